"""Issue #24 (a distributed launch succeeded only if every node did), where a user meets the
simulation: a PyTorch session of two nodes (master + worker), one GPU each on two simulated
nodes, `torchrun` started on both with `ranks exec`, the worker's rank failing on purpose. As
with real DDP, the master's next collective fails on the dead peer (NCCL's DistBackendError, the
session's pods have GPUs), its torchrun prints ChildFailedError and exits 1, and `ranks exec`
reports both nodes' failure. simcluster with the operators, scheduler, kubelet, exec and DCGM;
the CLI as a user runs it.
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.integration.test_shell_exec_convert import RANKS, ROOT, A, clean_env, running
from tests.waiting import processes_matching, wait_for

NCCL = ("torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/"
        "NCCLUtils.hpp:317, remote process exited or there was a network error, NCCL version 2.22.3")
CHILD_FAILED = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    def setup(sim: Any) -> None:
        for node in gpu_nodes(2, 1, pool="main", prefix="one-gpu"):  # one GPU each: the ranks on two nodes
            sim.apply(node)
        sim.apply(namespace(A, {"runai/queue": "team-a"}))

    with sim_in_thread(scenario="empty", components=("operators", "scheduler", "kubelet", "exec", "dcgm"),
                       workdir=tmp_path_factory.mktemp("peer")) as t:
        t.call(setup, t.sim)
        yield t


def ranks(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RANKS, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL)


def of(text: str, rank: str) -> str:
    """The lines `ranks exec` prefixed with `[rank] `, unprefixed."""
    head = f"[{rank}] "
    return "".join(ln[len(head):] + "\n" for ln in text.splitlines() if ln.startswith(head))


def test_a_failing_worker_fails_the_master_launch(cluster: ThreadedSimCluster) -> None:
    env = clean_env(cluster.sim.workdir / "home", Path(cluster.sim.kubeconfig_path))
    r = ranks(env, "submit", "ddp", "--framework", "pytorch", "--workers", "1", "-g", "1", "--node-pool", "main",
              "--interactive", "-p", "team-a", "-i", "nvcr.io/nvidia/pytorch:24.10-py3")
    assert r.returncode == 0, (r.stdout, r.stderr)
    pods = wait_for(lambda: running(cluster, "ddp", 2), timeout=60, what="the session's 2 pods Running")
    assert len({p["spec"]["nodeName"] for p in pods.values()}) == 2, pods  # two simulated nodes

    marker = f"ddp-peer-{uuid.uuid4().hex[:12]}"  # (train.py ignores unknown options: this run's processes)
    r = ranks(env, "exec", "ddp", "-p", "team-a", "--all", "--", "torchrun", "train.py", "--steps", "400",
              "--step-seconds", "0.05", "--busy", "0.1", "--fail-rank", "1", "--fail-step", "3", marker)
    assert r.returncode == 1, (r.stdout, r.stderr)
    master = of(r.stderr, "master-0")
    # the master's next collective after the worker's death: NCCL's error (the pods have GPUs)
    assert NCCL in master, r.stderr
    assert "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting " \
           "prematurely." in master
    # its torchrun: ChildFailedError naming its own rank, then exit 1
    assert CHILD_FAILED in master, master
    cause = master[master.index("Root Cause (first observed failure):"):]
    assert "  rank      : 0 (local_rank: 0)\n" in cause and "  exitcode  : 1 (pid: " in cause, master
    worker = of(r.stderr, "worker-0")
    assert "rank 1/2 (local 0): failing on purpose with exit code 1" in worker
    assert CHILD_FAILED in worker and "  rank      : 1 (local_rank: 0)\n" in worker, worker
    # the master stopped training, it did not run to the end
    assert "done on" not in of(r.stdout, "master-0"), r.stdout
    # ranks exec: every node's status, both failed
    statuses = sorted(ln for ln in r.stderr.splitlines() if not ln.startswith("["))
    assert statuses == ["master-0: exit 1", "worker-0: exit 1"], r.stderr
    wait_for(lambda: not processes_matching(marker), what="no rank left running")
