"""A dead peer fails the survivors of a simulated torchrun launch, as real DDP does at its next
collective (`simcluster/node/launchers/_peers.py`, `train.py`, the rendezvous' failures): torchrun
started by hand in each pod of a PyTorchJob whose pods sit on different simulated nodes, one
rank failing on purpose or its torchrun stopped. Everything runs for real: the operator, the
kubelet's processes, the exec WebSockets, the launchers' own API client.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.simcluster.test_launchers import (
    SIM,
    gone,
    in_threads,
    nodes,
    pytorchjob,
    run,
    running_pods,
    start,
    steps,
)
from tests.simcluster.test_launchers import wait_for as wait_api
from tests.waiting import processes_matching, wait_for

__all__ = ["nodes"]  # the fixture, used by name

NS = "default"
TRAIN = "train.py --steps 400 --step-seconds 0.05 --busy 0.1"
GLOO = re.compile(r"^RuntimeError: \[/opt/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair\.cc:534\] "
                  r"Connection closed by peer \[(?P<peer>[\d.]+)\]:\d+$", re.M)


def root_cause(err: str) -> str:
    """The `Root Cause (first observed failure)` block of torchrun's ChildFailedError summary."""
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: " in err, err
    return err[err.index("Root Cause (first observed failure):"):]


def pod_ip(core, name: str) -> str:
    return str(core.read_namespaced_pod(name, NS).status.pod_ip)


@SIM
def test_a_dead_peer_fails_the_other_node_at_its_next_step(simcluster, nodes, core, custom) -> None:
    pytorchjob(custom, "peer", workers=1)
    pods = ["peer-master-0", "peer-worker-0"]
    running_pods(core, "peer", 2)
    placed = {p: core.read_namespaced_pod(p, NS).spec.node_name for p in pods}
    assert len(set(placed.values())) == 2, placed  # two simulated nodes
    worker_ip = pod_ip(core, "peer-worker-0")  # (read before the exec streams: they patch the client)
    marker = f"peer-{uuid.uuid4().hex[:8]}"
    line = f"torchrun {TRAIN} --fail-rank 1 --fail-step 3 --exit-code 3 {marker}"
    (out0, err0, code0), (out1, err1, code1) = in_threads(*(partial(run, core, p, line) for p in pods))
    # the failing node: its own rank's exit status
    assert code1 == 1, (out1, err1)
    cause = root_cause(err1)
    assert "  rank      : 1 (local_rank: 0)\n" in cause and "  exitcode  : 3 (pid: " in cause, err1
    # the survivor: the collective after the peer's death raised gloo's error, its torchrun failed
    assert code0 == 1, (out0, err0)
    m = GLOO.search(err0)
    assert m and m.group("peer") == worker_ip, err0
    assert "Traceback (most recent call last):" in err0
    cause = root_cause(err0)
    assert "  host      : peer-master-0\n" in cause and "  rank      : 0 (local_rank: 0)\n" in cause, err0
    assert "  exitcode  : 1 (pid: " in cause, err0
    done = steps(out0)[0]
    assert len(done) < 400 and "done on" not in out0, out0  # stopped, not trained to the end
    wait_for(lambda: gone(marker), what="no worker left")
    # the address serves the next launch, which succeeds
    results = in_threads(*(partial(run, core, p, "torchrun train.py --steps 2 --step-seconds 0.01") for p in pods))
    assert [code for _, _, code in results] == [0, 0], results


@SIM
def test_a_stopped_node_fails_its_peer(simcluster, nodes, core, custom) -> None:
    """Ctrl-C in one node's shell: its workers stop, the other node's next collective fails."""
    pytorchjob(custom, "stop", workers=1)
    running_pods(core, "stop", 2)
    marker = f"stop-{uuid.uuid4().hex[:8]}"
    ws = start(core, "stop-worker-0", f"torchrun {TRAIN} {marker}")
    try:
        result: list = []
        t = threading.Thread(target=lambda: result.append(run(core, "stop-master-0", f"torchrun {TRAIN} {marker}")))
        t.start()
        wait_for(lambda: len([p for p in processes_matching(marker) if _is_train(p)]) == 2, timeout=30,
                 what="both nodes training")
        agent = [p for p in processes_matching(marker) if _is_torchrun(p) and _in_pod(p, "stop-worker-0")]
        assert len(agent) == 1
        os.kill(agent[0], signal.SIGINT)
        t.join(60)
        out, err, code = result[0]
        assert code == 1, (out, err)
        assert GLOO.search(err), err
        assert "  rank      : 0 (local_rank: 0)\n" in root_cause(err)
        wait_for(lambda: gone(marker), what="nothing left running")
    finally:
        ws.close()


@SIM
def test_restarts_left_restart_the_nodes_as_torch_does(simcluster, nodes, core, custom) -> None:
    """c10d with --max-restarts 1 on both nodes (torch's agent): the failing node restarts, the other
    joins the new round (a membership change, which costs no restart); the second failure uses up
    the failing node's restarts, it tells its peer, whose workers fail at their next step; the
    peer, with a restart left, waits at the rendezvous for nodes that no longer come, then gives up."""
    pytorchjob(custom, "again", workers=1)
    pods = ["again-master-0", "again-worker-0"]
    running_pods(core, "again", 2)
    marker = f"again-{uuid.uuid4().hex[:8]}"
    line = (f"torchrun --rdzv-backend c10d --rdzv-endpoint again-master-0:29400 --rdzv-conf join_timeout=10 "
            f"--max-restarts 1 {TRAIN} --fail-rank 1 --fail-step 2 {marker}")
    (out0, err0, code0), (_out1, err1, code1) = in_threads(*(partial(run, core, p, line) for p in pods))
    assert code1 == 1 and "Worker group FAILED. 1/1 attempts left; will restart worker group" in err1, err1
    assert "  rank      : 1 (local_rank: 0)\n" in root_cause(err1)
    assert code0 == 1, (out0, err0)
    assert "Detected new nodes from group_rank=0; will restart worker group" in err0, err0
    peer = GLOO.search(err0)
    assert peer, err0
    after = err0[peer.end():]
    assert "Worker group FAILED. 1/1 attempts left; will restart worker group" in after, err0
    assert after.strip().endswith("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"), err0
    wait_api(lambda: gone(marker), what="no worker left")


def _cmdline(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return []


def _is_train(pid: int) -> bool:
    argv = _cmdline(pid)
    return any(a.endswith(b"train.py") for a in argv) and not _is_torchrun(pid)


def _is_torchrun(pid: int) -> bool:
    return any(a.endswith(b"torchrun.py") or a.endswith(b"/torchrun") for a in _cmdline(pid))


def _in_pod(pid: int, pod: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return f"HOSTNAME={pod}".encode() in fh.read().split(b"\0")
    except OSError:
        return False


@pytest.mark.simcluster(components=())
def test_rendezvous_keeps_a_rounds_failures_for_its_watchers(simcluster, tmp_path: Path) -> None:
    """The API under the agents: a member's failure is recorded once, in order; a watch answers at
    once when the round has more failures than it has seen, else after its wait; only members of
    the round may report; an unknown round says so."""
    import requests

    sim = simcluster.sim
    ca = tmp_path / "ca.pem"
    ca.write_bytes(sim.ca_pem)
    url = f"{sim.url}/apis/simcluster.ranks/v1/namespaces/default/rendezvous/m-0%3A23456"
    auth = {"Authorization": f"Bearer {simcluster.call(sim.service_account_token, 'default')}"}

    def post(body: dict) -> requests.Response:
        return requests.post(url, json=body, verify=str(ca), timeout=10, headers=auth)

    def watch(**query: Any) -> dict:
        return requests.get(url, params=query, verify=str(ca), timeout=120, headers=auth).json()

    for member, host, rank in (("a", "m-0", 0), ("b", "w-0", 1)):
        post({"id": member, "host": host, "backend": "static", "nodeRank": rank, "maxNodes": 2, "nproc": 1,
              "wait": 0})
    assert post({"id": "a", "host": "m-0", "backend": "static", "nodeRank": 0, "maxNodes": 2, "nproc": 1,
                 "wait": 0}).json()["complete"]
    quiet = watch(round=1, seen=0, wait=0.2)
    assert (quiet["known"], quiet["failures"], quiet["laterRound"]) == (True, [], False)
    failure = {"rank": 1, "localRank": 0, "exitCode": 3, "address": "10.244.0.7"}
    assert post({"id": "b", "round": 1, "failed": failure}).status_code == 200
    assert post({"id": "b", "round": 1, "failed": {"rank": 1, "exitCode": 9}}).status_code == 200  # once only
    seen = watch(round=1, seen=0, wait=3600)  # answered at once: the client gives up long before the hour
    assert seen["failures"] == [{"host": "w-0", "address": "10.244.0.7", "nodeRank": 1, "groupRank": 1, "rank": 1,
                                 "localRank": 0, "exitCode": 3}]
    assert post({"id": "stranger", "round": 1, "failed": failure}).status_code == 404
    assert post({"id": "a", "round": "x", "failed": failure}).status_code == 400
    assert watch(round=7, seen=0, wait=5)["known"] is False
    # a later round with members wakes a watch that asks for it (a c10d agent), not the others
    post({"id": "c", "host": "m-0", "backend": "static", "nodeRank": 0, "maxNodes": 2, "nproc": 1, "wait": 0})
    assert watch(round=1, seen=1, wait=5, later=1)["laterRound"] is True
