"""No read hangs or lies (issue #25, item 5): the real `ranks logs` against simcluster's faults.

- a follow whose one rank answers 403 after a reconnect ends with exit 7 naming that rank (it went
  on for ever, saying nothing, that rank's lines missing);
- a follow whose one rank keeps answering 5xx says so once, keeps retrying, and when the rank is
  read again says how many lines came late and from how long; none is missing or repeated;
- a follow whose finished rank's log never becomes readable again ends with exit 1 saying since
  when its lines are missing (it never ended);
- `ranks logs` (no -f) on a log body that stalls ends after retrying within --request-timeout,
  exit 4 (it never ended); a rank whose log answers 404 is exit 1 after the other ranks' lines (it
  was a note and exit 0);
- an exec credential plugin that hangs is killed after --request-timeout (exit 3), with what it
  started; exec's WebSocket upgrade that the server never answers ends after it too (exit 4).
Each injected fault is checked to have fired (`tests.faults`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitors.connection import ExitCode
from simcluster.cluster import ThreadedSimCluster
from tests.faults import answered, assert_fired
from tests.integration.test_logs import NS, kf_pod, phase_of, seed
from tests.kubeflow_objects import job
from tests.waiting import wait_for

pytestmark = pytest.mark.simcluster(components=("kubelet",))
ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}


def logs(sim: Any, *args: str) -> list[str]:
    return [PY, "-m", "tui.cli", "logs", *args, "-p", NS, "--kubeconfig", str(sim.kubeconfig_path)]


def counter(prefix: str, every: float = 0.1, n: int = 100_000) -> list[str]:
    """A rank printing `prefix n=<i>` every `every` seconds, `n` lines, then exiting."""
    return [PY, "-c", f"import time\nfor i in range({n}):\n    print('{prefix} n=%d' % i, flush=True)\n"
                      f"    time.sleep({every})\n"]


class Follow:
    """`ranks logs -f` in the background; its stdout lines read as they come."""

    def __init__(self, sim: Any, name: str, *extra: str) -> None:
        self.proc = subprocess.Popen(logs(sim, name, "-f", *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env(), cwd=ROOT)
        self.lines: list[str] = []
        import threading

        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def end(self, timeout: float = 60) -> tuple[int, str]:
        assert self.proc.stderr is not None
        err = self.proc.stderr.read() if self.proc.wait(timeout) is not None else ""
        self.reader.join(10)
        return self.proc.returncode, err

    def interrupt(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        return self.end(30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def two_ranks(simcluster: ThreadedSimCluster, name: str, master: list[str], worker: list[str]) -> None:
    sim = simcluster.sim
    simcluster.call(seed, sim, name, [kf_pod(name, "Master", 0, master), kf_pod(name, "Worker", 0, worker)])
    for pod in (f"{name}-master-0", f"{name}-worker-0"):
        wait_for(lambda p=pod: simcluster.call(phase_of, sim, p) == "Running", what=f"{pod} running", timeout=30)


def test_a_403_on_one_rank_after_a_reconnect_ends_the_follow_with_exit_7_naming_it(
        simcluster: ThreadedSimCluster) -> None:
    sim = simcluster.sim
    two_ranks(simcluster, "deny", counter("m", 0.2), counter("w", 0.2))
    f = Follow(sim, "deny", "--request-timeout", "3s")
    try:
        wait_for(lambda: any("w n=" in ln for ln in f.lines), what="the worker's lines", timeout=30)
        t0 = time.time()
        simcluster.call(sim.faults.fail_next, r"/pods/deny-worker-0/log$", 403, 100_000)
        simcluster.run(sim.restart(down_for=0.3))  # (every open follow is cut: the worker's reopen is refused)
        code, err = f.end(60)  # (it ends: it does not retry the refusal for ever)
    finally:
        f.kill()
        simcluster.call(sim.faults.clear)
    assert_fired(simcluster, r"/pods/deny-worker-0/log$", 403, since=t0)
    assert code == ExitCode.FORBIDDEN, (code, err)
    last = err.splitlines()[-1]
    assert last.startswith("ranks: error: worker-0/") and "forbidden" in last, err
    assert "Traceback" not in err, err


def test_a_rank_answering_5xx_is_said_once_retried_and_its_gap_counted_when_it_is_read_again(
        simcluster: ThreadedSimCluster) -> None:
    sim = simcluster.sim
    two_ranks(simcluster, "flaky", counter("m", 0.1), counter("w", 0.1))
    f = Follow(sim, "flaky", "-o", "json", "--request-timeout", "3s")
    try:
        wait_for(lambda: sum('"w n=' in ln for ln in f.lines) >= 5, what="the worker's lines", timeout=30)
        t0 = time.time()
        simcluster.call(sim.faults.fail_next, r"/pods/flaky-worker-0/log$", 503, 100_000)
        simcluster.run(sim.restart(down_for=0.3))
        wait_for(lambda: len(answered(simcluster, r"/pods/flaky-worker-0/log$", since=t0)) >= 4,
                 what="the worker's log refused again and again", timeout=30)
        time.sleep(2)
        simcluster.call(sim.faults.clear)
        t1 = time.time()
        # read again within the backoff (at most 5 s), then live: a line written after that has come
        wait_for(lambda: any(json.loads(ln)["line"].startswith("w n=") and json.loads(ln)["ts"] > _iso(t1 + 7)
                             for ln in list(f.lines)), what="the worker read again", timeout=30)
        code, err = f.interrupt()
    finally:
        f.kill()
        simcluster.call(sim.faults.clear)
    assert_fired(simcluster, r"/pods/flaky-worker-0/log$", 503, since=t0)
    assert code == ExitCode.INTERRUPTED, (code, err)
    notes = err.splitlines()
    said = [n for n in notes if "worker-0/" in n and "retrying" in n]
    assert len(said) == 1 and "503" in said[0], notes  # once, however many times it was refused
    gap = [n for n in notes if "worker-0/" in n and "read again after" in n]
    assert len(gap) == 1, notes
    rows = [json.loads(ln) for ln in f.lines]
    seq = [int(r["line"].split("n=")[1]) for r in rows if r["line"].startswith("w n=")]
    assert seq == list(range(seq[0], seq[0] + len(seq))), "a worker line missing or repeated"
    late = int(gap[0].split("; ")[1].split(" ")[0])  # "N lines it wrote meanwhile follow, late"
    assert late >= 20, gap  # (over 2 s at 10 lines/s)
    # those lines came after the master's newer ones: out of time order, as the note says
    assert any(rows[i]["ts"] < rows[i - 1]["ts"] for i in range(1, len(rows))), "no line came late"


def _iso(t: float) -> str:
    from monitors.logs.lines import format_ts

    return format_ts(int(t * 1e9))


def test_a_finished_rank_whose_log_stays_unreadable_ends_the_follow_with_exit_1(simcluster: ThreadedSimCluster) -> None:
    sim = simcluster.sim
    # (the worker runs long enough that its log is still being followed when the fault is set, however
    # busy the machine)
    two_ranks(simcluster, "gone", counter("m", 0.1, 30), counter("w", 0.1, 150))
    f = Follow(sim, "gone", "--request-timeout", "3s")
    try:
        wait_for(lambda: any("w n=2" in ln for ln in f.lines), what="the worker's lines", timeout=30)
        t0 = time.time()
        simcluster.call(sim.faults.fail_next, r"/pods/gone-worker-0/log$", 500, 100_000)
        simcluster.run(sim.restart(down_for=0.3))
        wait_for(lambda: simcluster.call(phase_of, sim, "gone-worker-0") == "Succeeded", what="worker done", timeout=90)
        simcluster.call(sim.apply, job("PyTorchJob", "gone", NS, {"Master": 1, "Worker": 1},
                                       conditions=[("Succeeded", "")]))
        code, err = f.end(60)  # (it ends by itself: it used to follow for ever)
    finally:
        f.kill()
        simcluster.call(sim.faults.clear)
    assert_fired(simcluster, r"/pods/gone-worker-0/log$", 500, since=t0)
    assert code == ExitCode.ERROR, (code, err)
    last = err.splitlines()[-1]
    assert last.startswith("ranks: error: cannot read the log of worker-0/") and "could not be read" in last, err
    assert "its lines since" in last, err
    assert any("m n=29" in ln for ln in f.lines)  # the master's lines, all of them, first


def test_a_stalled_log_body_ends_after_the_request_timeout(simcluster: ThreadedSimCluster) -> None:
    sim = simcluster.sim
    big = "import sys\nsys.stdout.write(''.join(f'line {i}\\n' for i in range(2000)))\n"
    pods = [kf_pod("st", "Master", 0, [PY, "-c", big])]
    simcluster.call(seed, sim, "st", pods, workers=0)
    wait_for(lambda: simcluster.call(phase_of, sim, "st-master-0") == "Succeeded", what="done", timeout=30)
    t0 = time.time()
    simcluster.call(sim.faults.stall_next, r"/pods/st-master-0/log$", 200, 100_000)
    try:  # (it ends by itself, within the subprocess's limit: it used to wait for ever)
        r = subprocess.run(logs(sim, "st", "--request-timeout", "3s"), capture_output=True, text=True, timeout=120,
                           env=env(), cwd=ROOT)
    finally:
        simcluster.call(sim.faults.clear)
    # (a stalled request is logged when the server's handler returns: the first one is there by now)
    assert answered(simcluster, r"/pods/st-master-0/log$", since=t0)
    assert r.returncode == ExitCode.UNREACHABLE, (r.returncode, r.stderr)
    err = r.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("ranks: error: cannot read the log of master-0/"), err
    assert "stopped sending" in err[0] and "no data for 3 s" in err[0], err


def test_a_rank_whose_log_answers_404_is_exit_1(simcluster: ThreadedSimCluster) -> None:
    sim = simcluster.sim
    pods = [kf_pod("nf", "Master", 0, ["sh", "-c", "echo master line"]),
            kf_pod("nf", "Worker", 0, ["sh", "-c", "echo worker line"])]
    simcluster.call(seed, sim, "nf", pods)
    for p in ("nf-master-0", "nf-worker-0"):
        wait_for(lambda p=p: simcluster.call(phase_of, sim, p) == "Succeeded", what="done", timeout=30)
    t0 = time.time()
    simcluster.call(sim.faults.fail_next, r"/pods/nf-worker-0/log$", 404, 100)
    try:
        r = subprocess.run(logs(sim, "nf"), capture_output=True, text=True, timeout=60, env=env(), cwd=ROOT)
    finally:
        simcluster.call(sim.faults.clear)
    assert_fired(simcluster, r"/pods/nf-worker-0/log$", 404, since=t0)
    assert r.returncode == ExitCode.ERROR, (r.returncode, r.stderr)
    assert r.stdout == "[master-0] master line\n", r.stdout
    err = r.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("ranks: error: cannot read the log of worker-0/"), err


def test_a_hanging_exec_credential_plugin_is_killed_after_the_request_timeout(tmp_path: Path) -> None:
    marker = f"ranks-plugin-{os.getpid()}-{time.monotonic_ns()}"
    plugin = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
                       "args": ["-c", f"sleep 3600 & wait # {marker}"], "interactiveMode": "Never"}}
    kc = tmp_path / "kc.yaml"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "here",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": plugin}],
        "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u"}}]}))
    try:
        r = subprocess.run([PY, "-m", "tui.cli", "list", "--kubeconfig", str(kc), "--request-timeout", "2s"],
                           capture_output=True, text=True, timeout=120, env={**env(), "HOME": str(tmp_path)}, cwd=ROOT,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == ExitCode.NO_CONFIG, (r.returncode, r.stderr)
        assert r.stderr.startswith("ranks: error: ") and "did not answer within 2 s" in r.stderr, r.stderr
        assert len(r.stderr.splitlines()) == 1, r.stderr  # (the 2 s budget ended it, not the plugin's hour)
        left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        assert left.stdout.strip() == "", f"the plugin is still running: {left.stdout}"
    finally:  # (what this test started, found by its marker, ended whatever happened)
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
        children = [c for p in found for c in subprocess.run(["pgrep", "-P", p], capture_output=True,
                                                               text=True).stdout.split()]
        for pid in [*children, *found]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


@pytest.mark.simcluster(components=("kubelet", "exec"))
def test_an_exec_upgrade_the_server_never_answers_ends_after_the_request_timeout(
        simcluster: ThreadedSimCluster) -> None:
    sim = simcluster.sim
    simcluster.call(seed, sim, "ex", [kf_pod("ex", "Master", 0, ["sh", "-c", "sleep 600"])], workers=0)
    wait_for(lambda: simcluster.call(phase_of, sim, "ex-master-0") == "Running", what="running", timeout=30)
    t0 = time.time()
    simcluster.call(sim.faults.delay_next, r"/pods/ex-master-0/exec$", 3600.0)
    start = time.monotonic()
    try:
        r = subprocess.run([PY, "-m", "tui.cli", "--kubeconfig", str(sim.kubeconfig_path), "--request-timeout", "2s",
                            "exec", "ex", "-p", NS, "--rank", "master-0", "--", "echo", "hi"],
                           capture_output=True, text=True, timeout=120, env=env(), cwd=ROOT, stdin=subprocess.DEVNULL)
    finally:  # (the 2 s budget ends it: not the server's hour)
        simcluster.call(sim.faults.clear)
    took = time.monotonic() - start
    assert answered(simcluster, r"/pods/ex-master-0/exec$", since=t0) or took >= 2  # (asked: the upgrade hung)
    assert r.returncode == ExitCode.UNREACHABLE, (r.returncode, r.stdout, r.stderr)
    assert "timed out" in r.stderr and "Traceback" not in r.stderr, r.stderr
