"""A failed job is shown as Failed everywhere (issue #11, item 2): the loop of the issue, end to end.

An interactive MPI session is converted into a job whose launcher command does not exist (exit
127); the launcher Job reaches its backoff limit and the MPIJob fails. Every view says Failed, and
the MPIJob's conditions look as the MPI Operator leaves them (Running is False once it failed).
"""

from __future__ import annotations

import json
import os
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


def ranks(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    r = subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                       capture_output=True, text=True, timeout=90, env=env, cwd=ROOT)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def as_json(kubeconfig: Path, *args: str) -> Any:
    r = ranks(kubeconfig, *args, "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def setup(sim: Any) -> None:
    sim.kubelet.backoff_base = 0.2  # the launcher's restarts (restartPolicy OnFailure) without 10 s waits
    for node in gpu_nodes(2, 4, pool="main"):
        sim.apply(node)
    sim.apply(namespace(NS, {"runai/queue": "team-a"}))


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "exec"))
def test_converted_job_whose_launcher_exits_127_is_failed_in_every_view(simcluster):
    sim = simcluster.sim
    kc = sim.kubeconfig_path
    simcluster.call(setup, sim)
    r = ranks(kc, "submit", "hvd", "--framework", "mpi", "-i", "img", "--workers", "1", "--interactive",
              "-p", "team-a")
    assert r.returncode == 0, r.stderr
    def running() -> bool:
        pods = sim.store.objects(("", "pods"), NS)
        return len(pods) == 2 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

    wait_for(lambda: simcluster.call(running), timeout=60, what="the session running")
    r = ranks(kc, "convert", "hvd", "-p", "team-a", "--command", "horovodrun-not-installed -np 1 python train.py",
              "--name", "hvd-train", "--yes")
    assert r.returncode == 0, r.stderr

    def failed() -> bool:
        st = sim.store.find(("kubeflow.org", "mpijobs"), NS, "hvd-train")
        conds = ((st.obj.get("status") or {}).get("conditions") or []) if st else []
        return any(c["type"] == "Failed" and c["status"] == "True" for c in conds)

    wait_for(lambda: simcluster.call(failed), timeout=60, what="the converted job failed")
    wait_for(lambda: as_json(kc, "get", "hvd-train", "-p", "team-a")["workload"]["status"] == "Failed",
             timeout=20, what="ranks get says Failed")
    doc = as_json(kc, "get", "hvd-train", "-p", "team-a")
    conds = {c["type"]: c for c in doc["workload"]["conditions"]}
    assert conds["Failed"]["status"] == "True"
    assert conds["Running"]["status"] == "False"  # as the MPI Operator leaves it
    assert "BackoffLimitExceeded" in conds["Failed"]["reason"]
    listed = {w["name"]: w for w in as_json(kc, "list", "-p", "team-a")["workloads"]}
    assert listed["hvd-train"]["status"] == "Failed"
    assert listed["hvd"]["status"] == "Running"
    projects = {p["name"]: p for p in as_json(kc, "projects")["projects"]}
    assert projects["team-a"]["pending"] == 0
    text = ranks(kc, "get", "hvd-train", "-p", "team-a")
    assert "Status:      Failed" in text.stdout, text.stdout
    assert "is running" not in text.stdout.split("Conditions:")[0]
