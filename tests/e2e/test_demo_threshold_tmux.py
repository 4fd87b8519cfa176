"""#24 item 4e, end to end: `ranks demo` in a real terminal (tmux) and `ranks why` in a second one,
pointed at the demo's kubeconfig (`--workdir DIR`, `DIR/kubeconfig`), judge gpt-hung by the same
threshold and say which and where it came from (the demo's dashboard judged hangs after 1 minute, a
`ranks why` beside it after 10). The demo writes it into its kubeconfig's contexts (their `ranks`
extension), which a real kubectl keeps and still works with."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_demo_tmux import (
    RANKS,
    clean_env,
    crumbs,
    demo_in_tmux,
    quit_and_check_restored,
    workloads_listed,
)
from tests.waiting import wait_for

SAID = "hung after 1m: hang_after_minutes of context ranks-sim"


@pytest.mark.timeout(420)
def test_the_demo_and_a_second_terminal_judge_hangs_alike(tmp_path: Path, kubectl_bin: Path) -> None:
    with demo_in_tmux(tmp_path, 160, 40) as demo:
        tmux = demo.tmux
        workloads_listed(demo)
        kubeconfig = demo.workdir / "kubeconfig"
        env = clean_env(tmp_path)  # (the same home and configuration as the dashboard's: none)

        view = subprocess.run([str(kubectl_bin), "config", "view", "--kubeconfig", str(kubeconfig), "-o", "json"],
                              capture_output=True, text=True, timeout=60, env=env)
        assert view.returncode == 0 and '"name": "ranks"' in view.stdout and "hang_after_minutes" in view.stdout, view
        ns = subprocess.run([str(kubectl_bin), "get", "namespaces", "--kubeconfig", str(kubeconfig)],
                            capture_output=True, text=True, timeout=60, env=env)
        assert ns.returncode == 0 and "runai-team-b" in ns.stdout, ns.stderr

        said: dict[str, str] = {}

        def why() -> str | None:
            r = subprocess.run([*RANKS, "why", "gpt-hung", "-p", "team-b", "--kubeconfig", str(kubeconfig)],
                               capture_output=True, text=True, timeout=90, env=env, stdin=subprocess.DEVNULL)
            said["out"] = r.stdout + r.stderr
            return r.stdout if r.returncode == 0 and "  hang: " in r.stdout else None

        out = wait_for(why, timeout=180, interval=5, what="ranks why to call gpt-hung hung",
                       detail=lambda: said.get("out"))
        assert SAID in out, out
        assert out.count(SAID) == 1, out  # said once

        tmux.wait_for(lambda s: "▲ hung" in s, timeout=120, why="the dashboard marking gpt-hung hung")
        tmux.keys("/")
        tmux.wait_for(lambda s: "Filter" in s or "filter" in s, timeout=30, why="the filter input")
        tmux.type("gpt-hung")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: "bert-crash" not in s and "gpt-hung" in s, timeout=30, why="only gpt-hung listed")
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s: "of context ranks-sim" in s.replace("\n", " "), timeout=60,
                               why="gpt-hung's detail saying its threshold and where it came from")
        assert "hang_after_minutes" in screen
        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1] != "gpt-hung", timeout=30, why="back on the list")
        quit_and_check_restored(demo)
