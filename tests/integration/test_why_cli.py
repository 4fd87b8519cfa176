"""`ranks why` (#15) against simcluster's demo: the pending gang `big-pretrain` (5 x 8 GPUs in a pool
of 4 x 8, in project team-a with a quota of 16), as text and JSON; a user who may not list nodes;
untrusted event text; every bad input one `ranks: error:` line and its exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from simcluster.cluster import ThreadedSimCluster
from tests.waiting import one_line_error, wait_for

pytestmark = pytest.mark.simcluster(scenario="demo", components=("operators", "scheduler"))
ROOT = Path(__file__).resolve().parents[2]
A = "runai-team-a"


def ranks(*args: str, kubeconfig: Path | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(RANKS_CONFIG="", NO_COLOR="1")
    extra = ["--kubeconfig", str(kubeconfig)] if kubeconfig is not None else []
    return subprocess.run([sys.executable, "-m", "tui.cli", *args, *extra], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)


def failed_scheduling(sim: Any) -> list[dict[str, Any]]:
    return [e for e in sim.store.objects(("", "events"), A)
            if e.get("reason") == "FailedScheduling" and e["involvedObject"]["name"].startswith("big-pretrain")]


@pytest.fixture
def cluster(simcluster: ThreadedSimCluster) -> ThreadedSimCluster:
    wait_for(lambda: simcluster.call(failed_scheduling, simcluster.sim), timeout=30,
             what="the scheduler to give up on big-pretrain")
    return simcluster


def test_why_pending_gang_text(cluster: ThreadedSimCluster) -> None:
    r = ranks("why", "big-pretrain", "-p", "team-a", kubeconfig=cluster.sim.kubeconfig_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    head, *rest = r.stdout.splitlines()
    assert head.startswith(
        "big-pretrain (PyTorchJob, project team-a) is Pending: needs 5 pods x 8 GPUs together; pool h100 has "
        "4 nodes x 8 GPUs (32 in all), fewer than the 40 needed; project team-a quota 16, allocated "), head
    kinds = [line.split(":")[0].strip() for line in rest]
    assert kinds[:4] == ["gang", "fit", "quota", "scheduler"], rest
    assert "needs all 5 pods placed together" in rest[0]
    assert "4 nodes in pool h100 (NVIDIA-H100-80GB-HBM3, 8 GPUs each)" in rest[1]
    assert "big-pretrain asks 40, more than the whole quota" in rest[2]
    assert "the scheduler says none of 8 nodes can take a pod:" in rest[3]
    assert "\x1b" not in r.stdout


def test_why_pending_gang_json(cluster: ThreadedSimCluster) -> None:
    r = ranks("why", "pytorchjob/big-pretrain", "-p", "team-a", "-o", "json", kubeconfig=cluster.sim.kubeconfig_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert (data["namespace"], data["kind"], data["name"], data["status"], data["project"]) == (
        A, "PyTorchJob", "big-pretrain", "Pending", "team-a")
    assert data["summary"].startswith("needs 5 pods x 8 GPUs together")
    assert {"gang", "fit", "quota", "scheduler"} <= {f["kind"] for f in data["findings"]}


def test_why_finds_the_project_without_p_and_cleans_event_text(cluster: ThreadedSimCluster) -> None:
    cluster.call(cluster.sim.apply, {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "big-pretrain.evil", "namespace": A},
        "involvedObject": {"kind": "PyTorchJob", "name": "big-pretrain", "namespace": A}, "type": "Warning",
        "reason": "FailedCreate", "message": "boom \x1b[31mred\x1b[0m\nsecond line", "count": 1,
        "lastTimestamp": "2026-11-01T00:00:05Z"})
    r = ranks("why", "big-pretrain", kubeconfig=cluster.sim.kubeconfig_path)
    assert r.returncode == 0, r.stderr
    assert "  events: big-pretrain: FailedCreate: boom red second line" in r.stdout.splitlines()
    assert "\x1b" not in r.stdout


def test_why_without_nodes_says_fit_is_unknown(cluster: ThreadedSimCluster, tmp_path: Path) -> None:
    kc = cluster.sim.write_kubeconfig(tmp_path / "alice.yaml", user="alice")  # reads runai-team-a only
    r = ranks("why", "big-pretrain", "-p", "team-a", kubeconfig=kc)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("ranks: warning: forbidden to list nodes"), r.stderr
    assert "  fit: no nodes were listed" in r.stdout
    assert "project team-a quota 16" in r.stdout.splitlines()[0]


def test_why_bad_input_is_one_line_and_a_code(cluster: ThreadedSimCluster, tmp_path: Path) -> None:
    kc = cluster.sim.kubeconfig_path
    one_line_error(ranks("why", "no-such-job", "-p", "team-a", kubeconfig=kc), 8, "not found")
    one_line_error(ranks("why", "big-pretrain", "-p", "no-such-project", kubeconfig=kc), 8, "not found")
    one_line_error(ranks("why", "Bad_Name", kubeconfig=kc), 2, "not a workload name")
    one_line_error(ranks("why", "big-pretrain", "-o", "xml", kubeconfig=kc), 2, "--output")
    one_line_error(ranks("why", kubeconfig=kc), 2, "WORKLOAD")
    one_line_error(ranks("why", "big-pretrain", kubeconfig=tmp_path / "missing.yaml"), 3)
