"""#15, part 2: the first failure survives the pods.

A PyTorchJob with `backoffLimit: 0` whose rank 2 (worker-1) prints a traceback and exits 3; the
operator deletes every pod when the backoff limit is reached, before it sets Failed (as the
training-operator does). Then:

- with no ranks process watching at the time, `ranks get` and `ranks logs --first-failure` say
  what happened from what is left (the job's condition and events, the pods' events) instead of
  "No pods yet." / "No rank has failed.";
- with `ranks logs -f` watching at the time, the flight recorder kept rank 2's exit and last lines
  under $XDG_STATE_HOME/ranks/ (0700/0600), and both commands show them as a recording.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
NS = "runai-team-a"
SCRIPT = ('sleep "${DELAY:-0}"; if [ "$RANK" = 2 ]; then echo "step 1 loss 2.5"; '
          'echo "Traceback (most recent call last):"; echo "  File \\"train.py\\", line 9, in <module>"; '
          'echo "RuntimeError: CUDA error: an illegal memory access on rank 2"; exit 3; fi; sleep 120')


def env_for(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    env["XDG_STATE_HOME"] = str(state)
    return env


def ranks(kubeconfig: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                       capture_output=True, text=True, timeout=90, env=env_for(state), cwd=ROOT)
    assert "Traceback (most recent call last):\n  File \"/" not in r.stderr, r.stderr  # (ours, not the job's)
    return r


def job(name: str, delay: int) -> dict[str, Any]:
    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [{
            "name": "pytorch", "image": "img", "command": ["sh", "-c", SCRIPT],
            "env": [{"name": "DELAY", "value": str(delay)}],
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"runPolicy": {"backoffLimit": 0},
                     "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)}}}


def setup(sim: Any) -> None:
    for node in gpu_nodes(2, 4, pool="main"):
        sim.apply(node)
    sim.apply(namespace(NS, {"runai/queue": "team-a"}))


def failed_and_gone(sim: Any, name: str) -> bool:
    st = sim.store.find(("kubeflow.org", "pytorchjobs"), NS, name)
    conds = ((st.obj.get("status") or {}).get("conditions") or []) if st else []
    pods = [p for p in sim.store.objects(("", "pods"), NS) if p["metadata"]["name"].startswith(name + "-")]
    return any(c["type"] == "Failed" and c["status"] == "True" for c in conds) and not pods


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
def test_with_no_ranks_process_watching_what_is_left_is_said(simcluster, tmp_path: Path) -> None:
    sim, kc, state = simcluster.sim, simcluster.sim.kubeconfig_path, tmp_path / "state"
    simcluster.call(setup, sim)
    simcluster.call(sim.apply, job("unseen", 0))
    wait_for(lambda: simcluster.call(failed_and_gone, sim, "unseen"), 60, "the job failed and its pods deleted")

    r = ranks(kc, state, "get", "unseen", "-p", "team-a")
    assert r.returncode == 0, r.stderr
    assert "No pods yet." not in r.stdout
    assert "What happened:" in r.stdout and "pytorchjob/unseen failed" in r.stdout, r.stdout
    assert "reached the specified backoff limit" in r.stdout
    assert "the operator deleted 3 pods" in r.stdout and "unseen-worker-1" in r.stdout
    # the pods that were still running got a Killing event; the one that had failed did not
    assert "already stopped before the clean-up (no Killing event): unseen-worker-1 " in r.stdout, r.stdout
    assert "no ranks process was watching" in r.stdout

    r = ranks(kc, state, "logs", "unseen", "-p", "team-a", "--first-failure")
    assert r.returncode == 0, r.stderr
    assert "has failed." not in r.stdout  # not "No rank of pytorchjob/unseen has failed."
    assert "its pods are gone; no ranks process recorded a failing rank" in r.stdout, r.stdout
    assert "unseen-worker-1" in r.stdout
    assert not (state / "ranks").exists()  # nothing recorded: nothing was watching


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
def test_with_ranks_logs_f_watching_the_flight_recorder_keeps_the_failure(simcluster, tmp_path: Path) -> None:
    sim, kc, state = simcluster.sim, simcluster.sim.kubeconfig_path, tmp_path / "state"
    simcluster.call(setup, sim)
    simcluster.call(sim.apply, job("seen", 6))

    def running() -> bool:
        pods = [p for p in sim.store.objects(("", "pods"), NS) if p["metadata"]["name"].startswith("seen-")]
        return len(pods) == 3 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

    wait_for(lambda: simcluster.call(running), 60, "the job's three pods running")
    follow = subprocess.Popen([sys.executable, "-m", "tui.cli", "logs", "seen", "-p", "team-a", "-f",
                               "--kubeconfig", str(kc)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env_for(state), cwd=ROOT)
    try:
        wait_for(lambda: simcluster.call(failed_and_gone, sim, "seen"), 60, "the job failed and its pods deleted")
        out, err = follow.communicate(timeout=60)  # the follow ends with the workload
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
    assert "RuntimeError: CUDA error" in out, (out, err)

    files = list((state / "ranks" / "flight").glob("*/*.json"))
    assert len(files) == 1, (files, err)
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    for d in (files[0].parent, files[0].parent.parent, state / "ranks"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d

    r = ranks(kc, state, "get", "seen", "-p", "team-a")
    assert r.returncode == 0, r.stderr
    assert "First failure: worker-1 (worker rank 2, pod seen-worker-1 on node " in r.stdout, r.stdout
    assert "exited 3 (Error)" in r.stdout
    assert "a recording made by ranks" in r.stdout
    assert "RuntimeError: CUDA error: an illegal memory access on rank 2" in r.stdout
    assert "No pods yet." not in r.stdout and "What happened:" in r.stdout
    assert "ranks recorded the last" in r.stdout

    doc = json.loads(ranks(kc, state, "get", "seen", "-p", "team-a", "-o", "json").stdout)
    ff = doc["first_failure"]
    assert (ff["label"], ff["rank"], ff["exit_code"], ff["recorded"]) == ("worker-1", 2, 3, True)
    assert ff["lines"][-1] == "RuntimeError: CUDA error: an illegal memory access on rank 2"

    r = ranks(kc, state, "logs", "seen", "-p", "team-a", "--first-failure")
    assert r.returncode == 0, r.stderr
    assert "worker-1" in r.stdout and "a recording made by ranks" in r.stdout, r.stdout
    assert "RuntimeError: CUDA error" in r.stdout
