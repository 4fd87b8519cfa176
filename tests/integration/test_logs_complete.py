"""`ranks logs` delivers every line a rank wrote, and says so when it cannot (issue #11, item 1).

- Following a job to its end keeps the last lines of every rank, whatever the order in which the
  pods and the job finish (the lines still held by the merge when the last stream ends).
- Reading the history retries transient answers (429 with Retry-After, 5xx) and never drops a
  rank silently: a rank whose log cannot be read is an error with the documented exit code.
- A follow whose credentials are rejected says so once and ends with exit 6.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from monitors.logs.lines import parse_ts
from simcluster.scenarios.nodes import gpu_node
from tests.faults import answered, assert_consumed, assert_fired
from tests.integration.test_logs import NS, kf_pod, phase_of, seed
from tests.kubectl_binary import kubectl_path
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def ranks(kubeconfig: Path, *args: str) -> list[str]:
    return [PY, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)]


def run(kubeconfig: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    return subprocess.run(ranks(kubeconfig, *args), capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT)


def pytorchjob(name: str, sleeps: dict[str, float], *, workers: int = 2, fail_rank: int | None = None
               ) -> dict[str, Any]:
    """A PyTorchJob (cleanPodPolicy None: no rank is killed by the clean-up) whose every rank prints
    `start`, sleeps, then a burst of 40 numbered lines and `end` right before it exits."""

    def command(rtype: str) -> list[str]:
        burst = 'i=0; while [ $i -lt 40 ]; do echo "line $i of $RANK"; i=$((i+1)); done'
        fail = (f'if [ "$RANK" = "{fail_rank}" ]; then echo "Traceback (most recent call last):"; '
                'echo "RuntimeError: boom on $RANK"; exit 1; fi; ') if fail_rank is not None else ""
        return ["sh", "-c", f'echo "start $RANK"; sleep {sleeps[rtype]}; {burst}; {fail}echo "end $RANK"']

    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
        "spec": {"runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0}, "pytorchReplicaSpecs": {
            rtype: {"replicas": n, "restartPolicy": "Never", "template": {"spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "pytorch", "image": "img", "command": command(rtype)}]}}}
            for rtype, n in (("Master", 1), ("Worker", workers))}},
    }


def pods_of(simcluster: Any, job: str) -> list[tuple[str, str, str]]:
    """(name, phase, node) of a job's pods now (what a failed assertion shows)."""
    def read() -> list[tuple[str, str, str]]:
        return [(p["metadata"]["name"], p["status"].get("phase", ""), p["spec"].get("nodeName", ""))
                for p in simcluster.sim.store.objects(("", "pods"), NS) if p["metadata"]["name"].startswith(job)]
    return simcluster.call(read)

WINDOW = 250_000_000  # ns: the merge's longest hold (monitors/logs/merge.py, `window`)


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
def test_follow_to_the_end_keeps_every_rank_s_last_lines_whatever_finishes_first(simcluster):
    """Each follow is there before its job's pods start (the node is cordoned until every follow
    watches the pods): `fails` reaches its backoff limit, and the operator then deletes every pod
    of it, logs included, so a follow that came later would find nothing left to read."""
    sim = simcluster.sim
    node = gpu_node("gpu-0", 8)
    node["spec"]["unschedulable"] = True
    simcluster.call(sim.apply, node)
    jobs = {
        "workers-first": pytorchjob("workers-first", {"Master": 2.5, "Worker": 1.5}),
        "master-first": pytorchjob("master-first", {"Master": 1.5, "Worker": 2.5}),  # Succeeded before workers end
        "together": pytorchjob("together", {"Master": 2.0, "Worker": 2.0}),
        "fails": pytorchjob("fails", {"Master": 2.0, "Worker": 2.0}, fail_rank=2),
    }
    for body in jobs.values():
        simcluster.call(sim.apply, body)
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    before = simcluster.call(sim.store.watching, ("", "pods"), NS)
    procs = {name: subprocess.Popen(ranks(sim.kubeconfig_path, "logs", name, "-p", NS, "-f", "-o", "json"),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
             for name in jobs}
    wait_for(lambda: simcluster.call(sim.store.watching, ("", "pods"), NS) >= before + len(procs), timeout=60,
             what="every follow watching the pods", detail=lambda: {n: p.poll() for n, p in procs.items()})
    uncordon = subprocess.run([str(kubectl_path()), "--kubeconfig", str(sim.kubeconfig_path), "uncordon", "gpu-0"],
                              capture_output=True, text=True, timeout=60)
    assert uncordon.returncode == 0, uncordon.stderr
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, (name, err)  # ends by itself once the job and every rank are done
        rows = [json.loads(line) for line in out.splitlines()]
        for rank in (0, 1, 2):
            got = [r["line"] for r in rows if r["rank"] == rank]
            expected = [f"start {rank}", *(f"line {i} of {rank}" for i in range(40))]
            if name == "fails" and rank == 2:
                expected += ["Traceback (most recent call last):", "RuntimeError: boom on 2"]
            else:
                expected.append(f"end {rank}")
            assert got == expected, (name, rank, got[-5:], {r: sum(1 for x in rows if x["rank"] == r) for r in (0, 1, 2)},
                                     err[-2000:], pods_of(simcluster, name))
        # time-ordered across ranks, but for a line that reached the merge after the lines it
        # precedes had been held their longest (the window, 250 ms; monitors/logs/merge.py): it goes
        # out late rather than never, as happens when a loaded machine delays a rank's read
        stamps = [parse_ts(r["ts"].encode()) or 0 for r in rows]
        late = [(a, b) for a, b in itertools.pairwise(stamps) if b < a - WINDOW]
        assert not late, (name, late[:3])


@pytest.mark.simcluster(components=("kubelet",))
def test_transient_errors_are_retried_and_an_unreadable_rank_is_an_error(simcluster):
    sim = simcluster.sim
    big = "import sys\nsys.stdout.write(''.join(f'm {i}\\n' for i in range(20001)))\n"
    pods = [kf_pod("tr", "Master", 0, [PY, "-c", big]),
            kf_pod("tr", "Worker", 0, ["sh", "-c", "echo w one; echo w two"])]
    simcluster.call(seed, sim, "tr", pods, workers=1)
    wait_for(lambda: all(simcluster.call(phase_of, sim, p["metadata"]["name"]) == "Succeeded" for p in pods),
             what="pods done", timeout=20)

    # one 503 on the master's log, and a 429 with Retry-After on the worker's: retried, nothing lost
    sim.faults.fail_next(r"/pods/tr-master-0/log$", 503, count=1)
    sim.faults.fail_next(r"/pods/tr-worker-0/log$", 429, count=1, retry_after=1)
    t0 = time.time()
    ok = run(sim.kubeconfig_path, "logs", "tr", "-p", NS)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr == ""
    lines = ok.stdout.splitlines()
    assert len(lines) == 20003
    assert lines.count("[worker-0] w one") == 1 and lines[-1] in ("[master-0] m 20000", "[worker-0] w two")
    worker_reads = [r for r in sim.requests.since(t0) if r.path.endswith("/pods/tr-worker-0/log")]
    assert [r.status for r in worker_reads] == [429, 200]
    assert worker_reads[1].at - worker_reads[0].at >= 0.9  # Retry-After: 1 was honoured
    # both injected failures fired: the master's 503 too, then its log was read again
    assert_consumed(simcluster, r"/pods/tr-master-0/log$")
    assert_consumed(simcluster, r"/pods/tr-worker-0/log$")
    master_reads = answered(simcluster, r"/pods/tr-master-0/log$", since=t0)
    assert [r.status for r in master_reads] == [503, 200]

    # the worker's log keeps failing: the master's lines are printed, then one error line, exit 1
    t1 = time.time()
    sim.faults.fail_next(r"/pods/tr-worker-0/log$", 500, count=1000)
    bad = run(sim.kubeconfig_path, "logs", "tr", "-p", NS)
    sim.faults.clear()
    assert_fired(simcluster, r"/pods/tr-worker-0/log$", 500, since=t1)
    # every read of the worker's log got the 500 (retried, never read)
    assert {r.status for r in answered(simcluster, r"/pods/tr-worker-0/log$", since=t1)} == {500}
    assert bad.returncode == 1, bad.stderr
    assert len(bad.stdout.splitlines()) == 20001
    err = bad.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith("ranks: error: cannot read the log of worker-0/pytorch"), err

    # every stream refused: 403 is exit 7, 401 exit 6; never "nothing and exit 0"
    for status, code in ((403, 7), (401, 6)):
        t2 = time.time()
        sim.faults.fail_next(r"/pods/tr-[a-z]+-0/log$", status, count=1000)
        r = run(sim.kubeconfig_path, "logs", "tr", "-p", NS)
        sim.faults.clear()
        for rank in ("master", "worker"):  # the refusal was what both streams got
            assert_fired(simcluster, rf"/pods/tr-{rank}-0/log$", status, since=t2)
        assert r.returncode == code, (status, r.stderr)
        assert r.stdout == ""
        err = r.stderr.splitlines()
        assert len(err) == 1 and err[0].startswith("ranks: error: cannot read the logs of 2 ranks"), err


@pytest.mark.simcluster(components=("kubelet",))
def test_follow_with_rejected_credentials_says_so_once_and_ends_with_exit_6(simcluster):
    sim = simcluster.sim
    simcluster.call(seed, sim, "auth", [kf_pod("auth", "Master", 0, ["sh", "-c", "echo hello; sleep 60"])],
                    workers=0)
    wait_for(lambda: simcluster.call(phase_of, sim, "auth-master-0") == "Running", what="running", timeout=20)
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    proc = subprocess.Popen(ranks(sim.kubeconfig_path, "logs", "auth", "-p", NS, "-f", "--request-timeout", "3s"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "[master-0] hello\n"
    # the token expires, and the open follow is cut: every reopen is refused with 401
    simcluster.call(sim.authz.expire, sim.admin_token)
    simcluster.run(sim.restart(down_for=0.2))
    _, err = proc.communicate(timeout=60)  # (it ends: the refusals are not retried for ever)
    assert proc.returncode == 6, err
    lines = err.splitlines()
    assert sum("unauthorized (401)" in ln for ln in lines) == 2, lines  # the note once, then the error
    assert lines[-1].startswith("ranks: error: master-0/pytorch: unauthorized (401)"), lines


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
def test_ranks_whose_pods_were_deleted_are_named_not_left_out_in_silence(simcluster):
    """A PyTorchJob past its backoff limit: the operator deletes every pod of it (whatever its
    cleanPodPolicy), logs and all. `ranks logs` (and `-f`) say how many ranks had no pod left and
    give the line that shows what is known of the failure; that line runs as printed."""
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 8))
    simcluster.call(sim.apply, pytorchjob("gone", {"Master": 60, "Worker": 0.2}, fail_rank=1))
    wait_for(lambda: json.loads(run(sim.kubeconfig_path, "get", "gone", "-p", NS, "-o", "json").stdout or "{}")
             .get("workload", {}).get("status") == "Failed", timeout=60, what="the job Failed")
    wait_for(lambda: pods_of(simcluster, "gone") == [], timeout=30, what="its pods deleted")
    for follow in ((), ("-f",)):
        r = run(sim.kubeconfig_path, "logs", "gone", "-p", NS, *follow)
        assert r.returncode == 0, r.stderr
        assert r.stdout == ""
        note = r.stderr.strip().splitlines()
        assert len(note) == 1, note
        assert note[0].startswith("ranks: note: 3 of 3 ranks of pytorchjob/gone (failed) had no pod left: "
                                  "deleted before their logs could be read; what is known of the failure: "), note
        hint = note[0].split("what is known of the failure: ", 1)[1]
        assert hint.endswith(f"logs gone -p {NS} --first-failure"), hint
    words = shlex.split(hint)  # (`ranks` here: these tests run `python -m tui.cli`, not a `ranks` program)
    assert words[0] == "ranks", words
    shown = subprocess.run([PY, "-m", "tui.cli", *words[1:], "--kubeconfig", str(sim.kubeconfig_path)], capture_output=True,
                           text=True, timeout=90, cwd=ROOT,
                           env={k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")})
    assert shown.returncode == 0, shown.stderr
    assert "pytorchjob/gone failed, and its pods are gone" in shown.stdout, shown.stdout
