"""Bad input, second round (issue #25, items 6 and 9): what the held-out probe found, each through
the real `ranks` command line (a subprocess where the old behaviour was a hang; in this process,
`tests.cli_inprocess`, elsewhere), against simcluster or a kubeconfig crafted for the case.

- a huge `--request-timeout` (or `--since`) is exit 2, not `OverflowError`;
- a token with CR/LF in the kubeconfig is exit 3 (the token never shown), not the HTTP library's
  `ValueError`;
- a kubeconfig whose cluster has no server (or a server that is no http(s) URL) is exit 3;
- a FIFO as the configuration file is refused at once (exit 3), the command and the dashboard alike;
- `logs --rank ''` (or `--role ''`) is exit 2, not every rank;
- a progress line whose step is beyond 64 bits leaves `ranks get -o json` whole;
- U+2028/U+2029/NEL in a pod's line and in cluster text keep one line one line in `logs` and `get`;
  bidi controls and separators reach no terminal through `-o json` or `-o yaml` (escaped there, so
  the data read back is the cluster's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from monitors.connection import ExitCode
from simcluster.cluster import ThreadedSimCluster
from tests.cli_inprocess import isolated, one_line_or_ok, run_cli
from tests.integration.test_bad_config import closed_port, env_for, kubeconfig, one_line
from tests.integration.test_logs import NS, kf_pod, phase_of, seed
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
SEPARATORS = "\u2028\u2029\x85"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def ranks(*args: str, home: Path, timeout: float = 30, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env_for(home, **extra), stdin=subprocess.DEVNULL)


# -- the command line and the kubeconfig -------------------------------------------------------------------


def test_a_huge_duration_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{closed_port()}")
    with isolated(monkeypatch, tmp_path):
        for value in ("99999999999999999999999h", "2562048h", "9" * 400):
            r = run_cli("list", "--kubeconfig", str(kc), "--request-timeout", value)
            one_line_or_ok(r, {ExitCode.USAGE})
            assert r.code == ExitCode.USAGE and "--request-timeout" in r.err and "out of range" in r.err, r
        r = run_cli("logs", "mnist", "--kubeconfig", str(kc), "--since", "99999999999999999999h")
        assert r.code == ExitCode.USAGE and "--since" in r.err and "out of range" in r.err, r
        # Go's longest duration still is one: the server (closed here) is asked
        r = run_cli("list", "--kubeconfig", str(kc), "--request-timeout", "2562047h")
        one_line_or_ok(r, {ExitCode.UNREACHABLE})
        assert r.code == ExitCode.UNREACHABLE, r


@pytest.mark.simcluster(scenario="empty")
def test_a_token_with_a_line_break_is_exit_3_without_the_token(simcluster: ThreadedSimCluster, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    doc = yaml.safe_load(simcluster.sim.kubeconfig_path.read_text())
    for user in doc["users"]:
        user["user"] = {"token": "s3cret-part\r\nX-Injected: yes"}
    plain = tmp_path / "crlf.yaml"
    plain.write_text(yaml.safe_dump(doc))
    other = tmp_path / "other.yaml"  # two files: the official loader's path
    other.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [],
                                     "contexts": []}))
    with isolated(monkeypatch, tmp_path):
        for env in ({}, {"KUBECONFIG": f"{plain}:{other}"}):
            for key, value in env.items():
                monkeypatch.setenv(key, value)
            args = ("list", "-A") if env else ("list", "-A", "--kubeconfig", str(plain))
            r = run_cli(*args)
            one_line_or_ok(r, {ExitCode.NO_CONFIG})
            assert r.code == ExitCode.NO_CONFIG and "control character" in r.err, r
            assert "s3cret" not in r.err and "Injected" not in r.err, r.err


def test_a_kubeconfig_without_a_server_is_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with isolated(monkeypatch, tmp_path):
        for server, said in ((None, "has no server"), ("", "has no server"), ("ftp://x", "not an https:// URL"),
                             ("https://", "not an https:// URL"), ("https://h:port", "not an https:// URL"),
                             (["https://a"], "kubeconfig")):
            doc = {"apiVersion": "v1", "kind": "Config", "current-context": "here",
                   "clusters": [{"name": "c", "cluster": {"insecure-skip-tls-verify": True}}],
                   "users": [{"name": "u", "user": {"token": "t0ken"}}],
                   "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u"}}]}
            if server is not None:
                doc["clusters"][0]["cluster"]["server"] = server  # type: ignore[index]
            kc = tmp_path / "kc.yaml"
            kc.write_text(yaml.safe_dump(doc))
            for args in (("list",), ("logs", "mnist"), ("get", "mnist")):
                r = run_cli(*args, "--kubeconfig", str(kc))
                one_line_or_ok(r, {ExitCode.NO_CONFIG})
                assert r.code == ExitCode.NO_CONFIG and said in r.err, (server, r)
                assert 'cluster "c"' in r.err or not isinstance(server, str | None), r


def test_a_fifo_as_the_configuration_file_is_refused_at_once(tmp_path: Path) -> None:
    """(a subprocess: the old behaviour was to wait on the FIFO for ever)"""
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{closed_port()}")
    for args in (("list",), ("get", "mnist"), ("logs", "mnist")):
        one_line(ranks(*args, "--kubeconfig", str(kc), home=tmp_path, RANKS_CONFIG=str(fifo)), ExitCode.NO_CONFIG,
                 str(fifo), "is a FIFO, not a regular file")
    # at the default place too, and for the dashboard (before it takes the terminal)
    (tmp_path / "xdg" / "ranks").mkdir(parents=True)
    os.mkfifo(tmp_path / "xdg" / "ranks" / "config.toml")
    one_line(ranks("projects", "--kubeconfig", str(kc), home=tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg")),
             ExitCode.NO_CONFIG, "config.toml", "is a FIFO")
    from tests.integration.test_bad_config import dashboard_refused, in_pty

    dashboard_refused(*in_pty("--kubeconfig", str(kc), home=tmp_path, RANKS_CONFIG=str(fifo), timeout=30),
                      ExitCode.NO_CONFIG, "is a FIFO")


def test_counts_beyond_what_the_api_takes_are_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A count the API server would take as typed (a Quantity of 10^23 GPUs) or refuse (tailLines
    past 64 bits) is the user's usage error, before anything is sent or created."""
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{closed_port()}")  # (never asked)
    with isolated(monkeypatch, tmp_path):
        for args in (("logs", "mnist", "--tail", str(2**64)),
                     ("submit", "x", "--framework", "pytorch", "-i", "img", "--interactive", "--workers", "1",
                      "-g", "9" * 23),
                     ("submit", "x", "--framework", "mpi", "-i", "img", "--interactive", "--workers", "1",
                      "--slots-per-worker", str(2**70))):
            r = run_cli(*args, "--kubeconfig", str(kc))
            one_line_or_ok(r, {ExitCode.USAGE})
            assert r.code == ExitCode.USAGE, (args, r)


def test_an_empty_rank_or_role_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{closed_port()}")  # (never asked)
    with isolated(monkeypatch, tmp_path):
        for flags in (("--rank", ""), ("--rank", ","), ("--rank", "1,"), ("--rank", " "), ("--role", ""),
                      ("--rank", "1", "--rank", "")):
            r = run_cli("logs", "mnist", *flags, "--kubeconfig", str(kc))
            one_line_or_ok(r, {ExitCode.USAGE})
            assert r.code == ExitCode.USAGE and "an empty name" in r.err, (flags, r)


# -- what pods print and what the cluster holds ------------------------------------------------------------


@pytest.mark.simcluster(components=("kubelet",))
def test_separators_bidi_and_huge_steps_in_logs_and_get(simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    line = "one\u2028two\u2029three\x85four \u202egnp.exe\u202c done"
    prog = (f"import sys, time\nprint({line!r}, flush=True)\n"
            "print('step 18446744073709551616 loss 0.5', flush=True)\n"
            "print('step 36893488147419103232/73786976294838206464 loss 0.25 12.5 samples/s', flush=True)\n"
            "time.sleep(600)\n")
    simcluster.call(seed, sim, "sep", [kf_pod("sep", "Master", 0, [sys.executable, "-c", prog])], workers=0)
    sneaky = f"evil{SEPARATORS}{BIDI} message"
    simcluster.call(sim.apply, {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "sep.1", "namespace": NS},
        "involvedObject": {"kind": "PyTorchJob", "name": "sep", "namespace": NS}, "type": "Warning",
        "reason": "Odd\u2028Reason", "message": sneaky, "count": 1,
        "firstTimestamp": "2026-11-01T00:00:05Z", "lastTimestamp": "2026-11-01T00:00:05Z"})
    wait_for(lambda: simcluster.call(phase_of, sim, "sep-master-0") == "Running", what="running", timeout=30)
    kc = str(sim.kubeconfig_path)
    wait_for(lambda: "step 36893488147419103232" in ranks("logs", "sep", "-p", NS, "--kubeconfig", kc,
                                                          home=tmp_path).stdout, what="the lines printed", timeout=30)

    def plain(*args: str) -> str:
        r = ranks(*args, "-p", NS, "--kubeconfig", kc, home=tmp_path)
        assert r.returncode == 0, (args, r.stderr)
        assert "internal error" not in r.stderr
        out = r.stdout + r.stderr
        assert not any(ch in out for ch in SEPARATORS + BIDI), (args, [c for c in out if c in SEPARATORS + BIDI])
        return r.stdout

    logs = plain("logs", "sep").splitlines()
    assert logs[0] == "[master-0] one two three four gnp.exe done", logs
    assert plain("logs", "sep", "--timestamps").count("\n") == 3
    rows = [json.loads(x) for x in plain("logs", "sep", "-o", "json").splitlines()]
    assert rows[0]["line"] == "one two three four gnp.exe done", rows[0]
    text = plain("get", "sep")
    assert "evil" in text and "Odd" in text, text
    for fmt, load in (("json", json.loads), ("yaml", yaml.safe_load)):
        doc = load(plain("get", "sep", "-o", fmt))
        events = doc["events"]
        assert events[0]["message"] == "evil    message" and events[0]["reason"] == "Odd Reason", events
        ranks_ = doc["ranks"]
        assert ranks_[0]["step"] is None, ranks_  # beyond 64 bits: no step, never a crash
        for listed in (plain("list", "-o", fmt),):
            assert "sep" in listed
