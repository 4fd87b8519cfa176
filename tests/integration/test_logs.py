"""`ranks logs` and the log engine against simcluster: pods are real processes writing real logs.

Pods carry the Kubeflow labels and a PyTorchJob object exists, so the model groups them into a
workload without the operator; one end-to-end test runs the operators and the scheduler too.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from monitors.connection import load_cluster_config
from monitors.logs.engine import LogEngine, LogOptions
from monitors.logs.lines import LogLine
from monitors.monitor import Monitor
from simcluster.scenarios.nodes import gpu_node
from tests.faults import assert_consumed
from tests.kubeflow_objects import job
from tests.waiting import until, wait_for

pytestmark = pytest.mark.simcluster(components=("kubelet",))

NS = "default"
NODE = "node-0"
TK = "training.kubeflow.org/"
ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


# -- helpers --------------------------------------------------------------------------------------


def kf_pod(job_name: str, rtype: str, index: int, command: list[str], *, restart: str = "Never",
           containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{job_name}-{rtype.lower()}-{index}", "namespace": NS, "labels": {
            TK + "job-name": job_name, TK + "replica-type": rtype.lower(), TK + "replica-index": str(index),
            TK + "operator-name": "pytorchjob-controller"}},
        "spec": {"nodeName": NODE, "restartPolicy": restart, "terminationGracePeriodSeconds": 1,
                 "containers": containers or [{"name": "pytorch", "image": "img", "command": command}]},
    }


def timed(lines: list[tuple[float, str]], t0: float, *, exit_code: int = 0, then_sleep: float = 0) -> list[str]:
    """A Python process printing each line at t0 + offset (absolute times: pods start at different moments)."""
    prog = (
        "import sys, time\n"
        f"for off, text in {lines!r}:\n"
        f"    time.sleep(max(0.0, {t0!r} + off - time.time()))\n"
        "    print(text, flush=True)\n"
        f"time.sleep({then_sleep!r})\n"
        f"sys.exit({exit_code})\n"
    )
    return [PY, "-c", prog]


def seed(sim, name: str, pods: list[dict[str, Any]], *, workers: int | None = None) -> None:
    sim.apply(gpu_node(NODE, 8))
    sim.apply(job("PyTorchJob", name, NS, {"Master": 1, "Worker": workers if workers is not None else len(pods) - 1},
                  conditions=[("Running", "")]))
    for p in pods:
        sim.apply(p)


def phase_of(sim, pod: str) -> str:
    st = sim.store.find(("", "pods"), NS, pod)
    return ((st.obj.get("status") or {}).get("phase") or "") if st else ""


def ranks_cli(kubeconfig: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    return subprocess.run([PY, "-m", "tui.cli", "logs", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, timeout=timeout, env=env, cwd=ROOT)


class Following:
    """A LogEngine fed by a watching Monitor, on the test's loop (the cluster runs on it too)."""

    def __init__(self, sim, name: str, **opts: Any) -> None:
        self.sim = sim
        self.key = (NS, "PyTorchJob", name)
        self.opts = opts
        self.lines: list[LogLine] = []
        self.notices: list[str] = []

    async def __aenter__(self) -> Following:
        cfg = load_cluster_config(str(self.sim.kubeconfig_path))
        self.monitor = Monitor(cfg, scope=(NS,), events=False, nodes=False, backoff=(0.05, 0.3), read_timeout=5)
        await self.monitor.start()
        await self.monitor.wait_synced(20)
        await until(lambda: self.key in self.monitor.model.workloads, what="workload", timeout=20)
        self.engine = LogEngine(self.monitor.client, self.key, self.monitor.model, monitor=self.monitor,
                                options=LogOptions(follow=True, backoff_min=0.05, backoff_max=0.5, **self.opts))
        self.engine.subscribe(self.lines.extend)
        self.engine.on_notice(self.notices.append)
        await self.engine.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.engine.stop()
        await self.monitor.stop()

    def texts(self, label: str | None = None) -> list[str]:
        return [ln.text for ln in self.lines if label is None or ln.label == label]


# -- ordering --------------------------------------------------------------------------------------


def test_history_merged_in_time_order_json(simcluster):
    sim = simcluster.sim
    t0 = time.time() + 1.0
    pods = [
        kf_pod("order", "Master", 0, timed([(0.0, "m-a"), (0.45, "m-b"), (0.9, "m-c")], t0)),
        kf_pod("order", "Worker", 0, timed([(0.15, "w0-a"), (0.6, "w0-b"), (1.05, "w0-c")], t0)),
        kf_pod("order", "Worker", 1, timed([(0.3, "w1-a"), (0.75, "w1-b"), (1.2, "w1-c")], t0)),
    ]
    simcluster.call(seed, sim, "order", pods)
    wait_for(lambda: all(simcluster.call(phase_of, sim, p["metadata"]["name"]) == "Succeeded" for p in pods),
             what="pods done", timeout=20)
    out = ranks_cli(sim.kubeconfig_path, "order", "-o", "json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.decode().splitlines()]
    assert [r["line"] for r in rows] == ["m-a", "w0-a", "w1-a", "m-b", "w0-b", "w1-b", "m-c", "w0-c", "w1-c"]
    assert [r["ts"] for r in rows] == sorted(r["ts"] for r in rows)
    first = rows[0]
    assert set(first) == {"ts", "rank", "label", "role", "replica_index", "pod", "container", "stream", "line"}
    assert (first["label"], first["rank"], first["role"], first["pod"], first["container"], first["stream"]) == (
        "master-0", 0, "master", "order-master-0", "pytorch", None)
    assert {(r["label"], r["rank"]) for r in rows} == {("master-0", 0), ("worker-0", 1), ("worker-1", 2)}
    # text: aligned prefixes, filters; --tail takes the newest lines of the merged history, then --grep
    text = ranks_cli(sim.kubeconfig_path, "order", "--role", "worker", "--grep", "-[ab]$", "--tail", "4")
    assert text.returncode == 0, text.stderr
    assert text.stdout.decode().splitlines() == ["[worker-0] w0-b", "[worker-1] w1-b"]  # of w0-b w1-b w0-c w1-c
    ranked = ranks_cli(sim.kubeconfig_path, "order", "--rank", "0,worker-1", "--exclude", "a$", "--timestamps")
    lines = ranked.stdout.decode().splitlines()
    assert [ln.split(" ", 1)[1] for ln in lines] == [
        "[master-0] m-b", "[worker-1] w1-b", "[master-0] m-c", "[worker-1] w1-c"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z", lines[0].split(" ")[0])


async def test_follow_interleaves_live_lines_and_attaches_a_late_rank(simcluster_async):
    sim = simcluster_async
    t0 = time.time() + 1.0
    master = [(0.2 * i, f"m {i}") for i in range(20)]
    seed(sim, "live", [kf_pod("live", "Master", 0, timed(master, t0, then_sleep=30))], workers=1)
    async with Following(sim, "live") as f:
        await until(lambda: "m 4" in f.texts(), what="master lines", timeout=20)
        late = [(0.1 + 0.2 * i, f"w {i}") for i in range(7, 18)]
        sim.apply(kf_pod("live", "Worker", 0, timed(late, t0, then_sleep=30)))
        await until(lambda: "w 17" in f.texts() and "m 19" in f.texts(), what="both ranks", timeout=20)
        await asyncio.sleep(0.4)
        last_log = f.monitor.model.last_log[(NS, "live-master-0")]
    texts = f.texts()
    assert f.texts("master-0") == [f"m {i}" for i in range(20)]
    worker = f.texts("worker-0")
    assert worker == [f"w {i}" for i in range(7, 18)][-len(worker):] and len(worker) >= 8
    assert [ln.ts for ln in f.lines] == sorted(ln.ts for ln in f.lines)
    # interleaved right: each worker line sits between the master lines around it
    for k in (12, 15):
        i = texts.index(f"w {k}")
        assert texts[i - 1] == f"m {k}" and texts[i + 1] == f"m {k + 1}", texts
    assert abs(last_log - f.lines[-1].time) < 1.0  # the model knows each rank's last log line


async def test_restart_while_following_previous_and_new_lines_once(simcluster_async):
    sim = simcluster_async
    sim.kubelet.backoff_base = 0.3
    script = ("n=$(cat runs 2>/dev/null || echo 0); echo $((n+1)) > runs; "
              "for i in 0 1 2 3 4; do echo \"run $n line $i\"; sleep 0.1; done; "
              "if [ $n -eq 0 ]; then exit 1; fi; sleep 30")
    seed(sim, "rs", [kf_pod("rs", "Master", 0, ["sh", "-c", script], restart="Always")], workers=0)
    async with Following(sim, "rs") as f:
        await until(lambda: "run 1 line 4" in f.texts(), what="second run", timeout=20)
        await asyncio.sleep(0.5)
        assert f.texts() == [f"run {r} line {i}" for r in (0, 1) for i in range(5)]
        assert f.monitor.model.pods[(NS, "rs-master-0")].restarts == 1


async def test_api_server_lost_while_following_is_retried_without_loss_or_duplicates(simcluster_async):
    sim = simcluster_async
    prog = "import time\nfor i in range(150):\n    print(f'seq {i}', flush=True)\n    time.sleep(0.02)\ntime.sleep(30)\n"
    seed(sim, "lost", [kf_pod("lost", "Master", 0, [PY, "-c", prog])], workers=0)
    async with Following(sim, "lost", read_timeout=2.0) as f:
        await until(lambda: len(f.lines) >= 20, what="first lines", timeout=20)
        await sim.restart(down_for=1.0)
        await until(lambda: "seq 149" in f.texts(), what="all lines", timeout=30)
        await asyncio.sleep(0.3)
    assert f.texts() == [f"seq {i}" for i in range(150)]
    assert any("retrying" in n for n in f.notices), f.notices
    assert any("connected to the API server again" in n for n in f.notices), f.notices
    stream = next(iter(f.engine.streams.values()))
    assert stream.opens >= 3  # history, the first follow, and at least one reopen


# -- limits and untrusted text ---------------------------------------------------------------------


def test_stream_cap_says_so(simcluster):
    sim = simcluster.sim
    pods = [kf_pod("many", "Master", 0, ["sh", "-c", "echo hello from master; sleep 30"])]
    pods += [kf_pod("many", "Worker", i, ["sh", "-c", f"echo hello from {i}; sleep 30"]) for i in range(7)]
    simcluster.call(seed, sim, "many", pods)
    wait_for(lambda: all(simcluster.call(phase_of, sim, p["metadata"]["name"]) == "Running" for p in pods),
             what="pods running", timeout=20)
    out = ranks_cli(sim.kubeconfig_path, "many", "--max-streams", "5")
    assert out.returncode == 0, out.stderr
    err = out.stderr.decode()
    assert "following 5 of 8 log streams (the limit is 5" in err, err
    assert "worker-4/pytorch" in err and "--max-streams" in err
    shown = out.stdout.decode().splitlines()
    # time-ordered: which of the five followed ranks wrote first depends on when each pod started
    assert sorted(shown) == sorted(["[master-0] hello from master",
                                    *(f"[worker-{i}] hello from {i}" for i in range(4))]), shown


PAYLOAD = (
    "printf 'title\\033]0;pwned\\007 clear\\033[2J\\033[H home\\033[1A up\\033]52;c;ZXZpbA==\\007 clip"
    " \\033P+q544e\\033\\\\ dcs \\302\\233 2J c1 [bold red]markup[/] [link=file:///etc/passwd]link[/link]"
    " \\377 nul\\000 end\\033[31m red\\033[0m \\033'; echo; "
    "printf 'fake\\r[worker-9] spoofed\\n'; sleep 30"
)


def test_escape_sequences_and_markup_reach_the_terminal_literally(simcluster):
    sim = simcluster.sim
    simcluster.call(seed, sim, "evil", [kf_pod("evil", "Master", 0, ["sh", "-c", PAYLOAD])], workers=0)
    wait_for(lambda: simcluster.call(phase_of, sim, "evil-master-0") == "Running", what="running", timeout=20)
    time.sleep(0.5)
    out = ranks_cli(sim.kubeconfig_path, "evil")
    assert out.returncode == 0, out.stderr
    assert b"\x1b" not in out.stdout and b"\r" not in out.stdout and b"\x9b" not in out.stdout
    text = out.stdout.decode()
    lines = text.splitlines()
    assert lines[0] == ("[master-0] title clear home up clip  dcs 2J c1 [bold red]markup[/] "
                        "[link=file:///etc/passwd]link[/link] \\xff nul␀ end red ")
    assert lines[1] == "[master-0] [worker-9] spoofed"
    # on a terminal: colour, but only our own SGR codes
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen([PY, "-m", "tui.cli", "logs", "evil", "--kubeconfig", str(sim.kubeconfig_path)],
                            stdout=slave, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    os.close(slave)
    data = b""
    while True:
        r, _, _ = select.select([master], [], [], 30)
        if not r:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    proc.wait(30)
    os.close(master)
    assert proc.returncode == 0
    sequences = set(re.findall(rb"\x1b[^m]*m|\x1b.", data))
    assert sequences and all(re.fullmatch(rb"\x1b\[[0-9;]*m", s) for s in sequences), sequences
    plain = re.sub(rb"\x1b\[[0-9;]*m", b"", data).replace(b"\r\n", b"\n")
    assert plain.decode().splitlines() == lines
    assert b"\x1b[31m red" in data  # the line's own colour, re-encoded by us
    no_colour = subprocess.run([PY, "-m", "tui.cli", "logs", "evil", "--no-color", "--kubeconfig",
                                str(sim.kubeconfig_path)], capture_output=True, env=env, cwd=ROOT, timeout=60)
    assert no_colour.stdout.decode().splitlines() == lines


# -- first failure ---------------------------------------------------------------------------------


def test_first_failure_names_the_rank_that_failed_first(simcluster):
    sim = simcluster.sim
    t0 = time.time() + 1.0
    pods = [
        # exits more than a second apart: container statuses carry finishedAt in whole seconds
        kf_pod("ff", "Master", 0, timed([(0.0, "master up")], t0, then_sleep=2.8)),
        kf_pod("ff", "Worker", 0, timed([(0.1, "w0 up")], t0, then_sleep=2.4, exit_code=4)),
        kf_pod("ff", "Worker", 1, timed([(0.2 + i * 0.01, f"w1 line {i}") for i in range(25)], t0, exit_code=3)),
    ]
    simcluster.call(seed, sim, "ff", pods)
    wait_for(lambda: simcluster.call(phase_of, sim, "ff-master-0") == "Succeeded"
             and simcluster.call(phase_of, sim, "ff-worker-0") == "Failed", what="pods done", timeout=20)
    out = ranks_cli(sim.kubeconfig_path, "ff", "--first-failure")
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode().splitlines()
    assert text[0] == "First failure: worker-1 (role worker, rank 2)"
    assert "Pod:           ff-worker-1" in text and "Exit code:     3 (Error)" in text
    assert "Last 20 lines of the instance that failed:" in text
    assert text[-20:] == [f"[worker-1] w1 line {i}" for i in range(5, 25)]
    js = json.loads(ranks_cli(sim.kubeconfig_path, "ff", "--first-failure", "-o", "json").stdout)
    assert (js["failure"]["label"], js["failure"]["exit_code"], js["failure"]["previous"]) == ("worker-1", 3, False)
    assert len(js["lines"]) == 20


def test_first_failure_and_previous_after_a_restart(simcluster):
    sim = simcluster.sim
    simcluster.call(setattr, sim.kubelet, "backoff_base", 0.2)
    script = ("if [ -f marker ]; then echo second run; sleep 30; fi; touch marker; "
              "echo first run; echo out of memory; exit 137")
    pods = [kf_pod("rf", "Master", 0, ["sh", "-c", "echo fine; sleep 30"]),
            kf_pod("rf", "Worker", 0, ["sh", "-c", script], restart="OnFailure")]
    simcluster.call(seed, sim, "rf", pods)

    def restarted() -> bool:
        st = simcluster.call(sim.store.find, ("", "pods"), NS, "rf-worker-0")
        cs = (st.obj.get("status") or {}).get("containerStatuses") or []
        return bool(cs) and cs[0].get("restartCount", 0) >= 1 and "running" in (cs[0].get("state") or {})

    wait_for(restarted, what="restart", timeout=20)
    time.sleep(0.3)
    out = ranks_cli(sim.kubeconfig_path, "rf", "--first-failure")
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode().splitlines()
    assert text[0] == "First failure: worker-0 (role worker, rank 1)"
    assert "Exit code:     137 (Error)" in text
    assert text[-3:] == ["Last 2 lines of the previous instance:", "[worker-0] first run", "[worker-0] out of memory"]
    prev = ranks_cli(sim.kubeconfig_path, "rf", "--previous", "--rank", "worker-0")
    assert prev.stdout.decode().splitlines() == ["[worker-0] first run", "[worker-0] out of memory"]
    now = ranks_cli(sim.kubeconfig_path, "rf")
    assert now.stdout.decode().splitlines() == ["[master-0] fine", "[worker-0] second run"]


# -- the command line ------------------------------------------------------------------------------


def test_cli_errors_and_ctrl_c(simcluster):
    sim = simcluster.sim
    simcluster.call(seed, sim, "cc", [kf_pod("cc", "Master", 0, ["sh", "-c", "echo one; sleep 0.5; echo two; "
                                                                       "sleep 30"])], workers=0)
    missing = ranks_cli(sim.kubeconfig_path, "nope")
    assert missing.returncode == 8
    assert missing.stderr.decode().strip() == (
        'ranks: error: workload "nope" not found in default or any other project you may read')
    bad = ranks_cli(sim.kubeconfig_path, "cc", "--grep", "(")
    assert bad.returncode == 2 and len(bad.stderr.decode().strip().splitlines()) == 1
    assert "invalid --grep regex" in bad.stderr.decode()
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    proc = subprocess.Popen([PY, "-m", "tui.cli", "logs", "cc", "-f", "--kubeconfig", str(sim.kubeconfig_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"[master-0] one\n"
    assert proc.stdout.readline() == b"[master-0] two\n"
    # the API server goes away for a while: said on stderr, retried, no crash
    simcluster.run(sim.restart(down_for=1.0))
    time.sleep(2.5)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert out == b""  # nothing repeated after the reconnect
    assert b"Traceback" not in err and b"Unclosed" not in err, err
    notes = err.decode().splitlines()
    assert any(n.startswith("ranks: note: cannot reach the API server") and n.endswith("; retrying") for n in notes), notes
    assert "ranks: note: connected to the API server again" in notes


# -- end to end: operators, scheduler and kubelet --------------------------------------------------


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
def test_e2e_pytorchjob_logs_follow_until_done(simcluster):
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 8))
    body = {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "e2e", "namespace": NS},
        "spec": {"pytorchReplicaSpecs": {
            r: {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [{
                "name": "pytorch", "image": "img", "command": ["sh", "-c",
                                                               "sleep 1; echo rank $RANK of $WORLD_SIZE; sleep 0.5"],
            }]}}} for r, n in (("Master", 1), ("Worker", 2))}},
    }
    simcluster.call(sim.apply, body)
    out = ranks_cli(sim.kubeconfig_path, "e2e", "-f", "-o", "json", timeout=60)
    assert out.returncode == 0, out.stderr  # ends by itself when the job has succeeded
    rows = [json.loads(line) for line in out.stdout.decode().splitlines()]
    assert sorted((r["label"], r["line"]) for r in rows) == [
        ("master-0", "rank 0 of 3"), ("worker-0", "rank 1 of 3"), ("worker-1", "rank 2 of 3")]


def test_identical_lines_of_many_ranks_collapse(simcluster):
    sim = simcluster.sim
    t0 = time.time() + 1.0
    pods = [kf_pod("col", "Master", 0, timed([(0.0, "NCCL INFO Bootstrap : Using eth0"), (0.5, "master only")], t0))]
    pods += [kf_pod("col", "Worker", i, timed([(0.01 * (i + 1), "NCCL INFO Bootstrap : Using eth0")], t0))
             for i in range(3)]
    simcluster.call(seed, sim, "col", pods)
    wait_for(lambda: all(simcluster.call(phase_of, sim, p["metadata"]["name"]) == "Succeeded" for p in pods),
             what="pods done", timeout=20)
    out = ranks_cli(sim.kubeconfig_path, "col", "--collapse")
    assert out.stdout.decode().splitlines() == [
        "[master-0] NCCL INFO Bootstrap : Using eth0  (x4 ranks)", "[master-0] master only"]
    rows = [json.loads(line) for line in ranks_cli(sim.kubeconfig_path, "col", "--collapse", "-o", "json").stdout
            .decode().splitlines()]
    assert rows[0]["ranks"] == ["master-0", "worker-0", "worker-1", "worker-2"] and "ranks" not in rows[1]


@pytest.mark.timeout(900)
def test_300_ranks_with_the_default_cap_of_256(simcluster):
    """The issue's case at full size: 300 running ranks, the default cap, a clear message. (A busy
    machine starts 300 processes slowly, the cluster's loop busy with them: each rank runs for
    10 minutes, so that all are running at once, and a count the loop has no time for is asked again.)"""
    sim = simcluster.sim
    pods = [kf_pod("wide", "Master", 0, ["sh", "-c", "echo rank 0; exec sleep 600"])]
    pods += [kf_pod("wide", "Worker", i, ["sh", "-c", f"echo rank {i + 1}; exec sleep 600"]) for i in range(299)]
    simcluster.call(seed, sim, "wide", pods)
    wait_for(lambda: simcluster.call(
        lambda: sum(1 for p in pods if phase_of(sim, p["metadata"]["name"]) == "Running")) == 300,
        what="300 pods running", timeout=600, ignore=lambda exc: isinstance(exc, TimeoutError))
    out = ranks_cli(sim.kubeconfig_path, "wide", timeout=180)
    assert out.returncode == 0, out.stderr
    err = out.stderr.decode()
    assert "following 256 of 300 log streams (the limit is 256" in err, err
    assert "Traceback" not in err
    assert len(out.stdout.decode().splitlines()) == 256


async def test_injected_stall_is_reopened_without_loss_or_duplicates(simcluster_async):
    """simcluster's log endpoint goes silent mid-stream (connection open): the engine notices by
    its read timeout and reopens from the last timestamp."""
    sim = simcluster_async
    prog = "import time\nfor i in range(120):\n    print(f'seq {i}', flush=True)\n    time.sleep(0.03)\ntime.sleep(30)\n"
    seed(sim, "stall", [kf_pod("stall", "Master", 0, [PY, "-c", prog])], workers=0)
    await until(lambda: phase_of(sim, "stall-master-0") == "Running", what="running", timeout=20)
    await asyncio.sleep(0.5)
    # the history read and the first follow both go silent after 100 bytes
    sim.faults.stall_next(r"/pods/stall-master-0/log$", after_bytes=100, count=2)
    async with Following(sim, "stall", read_timeout=1.0) as f:
        await until(lambda: "seq 119" in f.texts(), what="all lines after the stall", timeout=30)
        await asyncio.sleep(0.3)
    assert_consumed(sim, r"/pods/stall-master-0/log$")  # both reads were stalled
    assert f.texts() == [f"seq {i}" for i in range(120)]
    stream = next(iter(f.engine.streams.values()))
    assert stream.reopens >= 1
