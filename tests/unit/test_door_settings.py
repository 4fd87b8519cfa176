"""The SSH door's settings as a session's `ranks` reads them (`tui.cli.door`, issue #25 item 2):
out of band, checked, winning over every flag, and the server's paths kept out of errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.ssh import SERVER_SETTINGS_ENV
from tui.cli.door import scrub, server_settings

ROOT = Path(__file__).resolve().parents[2]


def test_settings_are_read_typed_and_checked() -> None:
    assert server_settings({}) is None
    s = server_settings({SERVER_SETTINGS_ENV: json.dumps({"context": "c", "as_user": "alice", "as_groups": ["ml"],
                                                          "request_timeout": 5, "cpu_seconds": 60, "nice": 10})})
    assert s is not None and s.pinned == {"context": "c", "as_user": "alice", "as_groups": ("ml",),
                                          "request_timeout": 5} and (s.cpu_seconds, s.nice) == (60, 10)
    for bad in ("", "[]", '{"kubeconfig": "/x"}', '{"as_user": 3}', '{"read_only": "yes"}', '{"nice": true}',
                '{"as_groups": [1]}', '{"cpu_seconds": -1}'):
        with pytest.raises(ValueError):
            server_settings({SERVER_SETTINGS_ENV: bad})


def test_the_servers_paths_are_scrubbed_over_the_door_only() -> None:
    env = {SERVER_SETTINGS_ENV: "{}", "KUBECONFIG": "/etc/ranks/kc:/etc/ranks/kc2", "HOME": "/home/ranks"}
    said = "cannot read /etc/ranks/kc2 nor /etc/ranks/kc; see /home/ranks/.config/ranks/config.toml"
    assert scrub(said, env) == ("cannot read the server's kubeconfig nor the server's kubeconfig; "
                                "see ~/.config/ranks/config.toml")
    assert scrub(said, {k: v for k, v in env.items() if k != SERVER_SETTINGS_ENV}) == said


def ranks(*args: str, settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin", SERVER_SETTINGS_ENV: settings, "RANKS_CONFIG": "",
                               "KUBECONFIG": str(ROOT / "no-such-kubeconfig"), "HOME": str(ROOT)})


def test_a_servers_flag_is_a_usage_error_and_a_broken_setting_a_config_one() -> None:
    r = ranks("list", "-A", "--context=other", settings='{"context": "c"}')
    assert r.returncode == 2 and r.stderr.startswith("ranks: error: the flag --context is the server's"), r.stderr
    r = ranks("--as", "bob", "list", settings="{}")  # (before the subcommand too)
    assert r.returncode == 2 and "the flag --as is the server's" in r.stderr, r.stderr
    r = ranks("list", settings="not json")
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and SERVER_SETTINGS_ENV in r.stderr, r.stderr
    r = ranks("list", "-A", settings='{"context": "c"}')  # the kubeconfig's path is not said
    assert r.returncode == 3 and "no-such-kubeconfig" not in r.stderr and "the server's kubeconfig" in r.stderr, \
        r.stderr


def test_a_command_that_uses_up_its_cpu_says_so_in_one_line_and_exits_1() -> None:
    burn = ("from tui.cli.door import DoorSettings, apply_limits\n"
            "apply_limits(DoorSettings({}, 1, 10))\n"
            "while True:\n    pass\n")
    r = subprocess.run([sys.executable, "-c", burn], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr == ("ranks: error: stopped after 1 second of CPU: the server's limit for one command "
                        "(ranks serve --command-cpu-limit)\n"), r.stderr


def test_a_dashboard_is_given_no_cpu_limit_nor_lower_priority() -> None:
    from sessions.ssh.keys import Identity
    from sessions.ssh.server import COMMAND_NICE, ServeConfig, Server

    server = Server(ServeConfig("127.0.0.1", 0, "host", "keys", context="c", command_cpu=300), None, None)  # type: ignore[arg-type]
    alice = Identity("alice", ("ml",))
    assert server.settings(alice, command=False) == {"context": "c", "as_user": "alice", "as_groups": ["ml"]}
    assert server.settings(alice, command=True) == {"context": "c", "as_user": "alice", "as_groups": ["ml"],
                                                    "cpu_seconds": 300, "nice": COMMAND_NICE}
