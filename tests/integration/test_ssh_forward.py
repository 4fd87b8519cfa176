"""`ssh -L` through `ranks serve --ssh` (#29) with the real OpenSSH client: alice forwards a port of
her own session (`pt-interactive.team-a:8888`, its Jupyter) and gets the page; `-L` to team-b's
session (forbidden to her) and to `127.0.0.1:22` (no workload) are refused and written to the
audit log, as is every forward made."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator

import pytest

from simcluster.cluster import ThreadedSimCluster
from simcluster.scenarios.demo import namespace
from simcluster.scenarios.demo_workloads import session
from simcluster.scenarios.nodes import gpu_nodes
from tests.integration.test_port_forward import free_port, page, ready_pod
from tests.integration.test_ssh_serve import Served, env, served  # noqa: F401 (the fixture)
from tests.waiting import wait_for

A, B = "runai-team-a", "runai-team-b"


@pytest.fixture(scope="module")
def simcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    """Two sessions running Jupyter: alice's pt-interactive in team-a, bob's other in team-b."""
    t = ThreadedSimCluster(workdir=tmp_path_factory.mktemp("sim"), scenario="empty",
                           components=("operators", "scheduler", "kubelet", "exec"))
    t.start()

    def setup(sim) -> None:
        for node in gpu_nodes(2, 4, pool="a100", prefix="a100-node"):
            sim.apply(node)
        for ns, project in ((A, "team-a"), (B, "team-b")):
            sim.apply(namespace(ns, {"runai/queue": project}))
        sim.add_namespace_reader("alice", [A], write=True)
        sim.apply(session("PyTorchJob", "pt-interactive", A, 1, user="alice", project="team-a", pool="a100",
                          jupyter=True))
        sim.apply(session("PyTorchJob", "other", B, 1, user="bob", project="team-b", pool="a100", jupyter=True))

    try:
        t.call(setup, t.sim)
        for ns, job in ((A, "pt-interactive"), (B, "other")):
            wait_for(lambda ns=ns, job=job: ready_pod(t, ns, job), timeout=60, what=f"{job} Ready")
        yield t
    finally:
        t.stop()


def test_alice_forwards_her_sessions_port_and_nothing_else(served: Served) -> None:  # noqa: F811
    mine, theirs, host = free_port(), free_port(), free_port()
    proc = subprocess.Popen(served.ssh(opts=("-N", "-L", f"{mine}:pt-interactive.team-a:8888",
                                             "-L", f"{theirs}:other.team-b:8888", "-L", f"{host}:127.0.0.1:22")),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env())
    said: list[str] = []
    assert proc.stderr is not None
    threading.Thread(target=lambda: said.extend(proc.stderr or ()), daemon=True).start()
    try:
        assert "Jupyter" in wait_for(lambda: page(mine), timeout=60, what="alice's Jupyter through ssh -L",
                                     detail=lambda: (said, served.audit()))
        for port in (theirs, host):  # (ssh opens, then closes them: the door refused the channel)
            assert page(port) is None
        wait_for(lambda: served.audit().count(" refused user=alice ") >= 2, timeout=30, what="both refusals audited",
                 detail=served.audit)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # (ssh's own end is not what this checks)
            proc.kill()
            proc.wait(timeout=10)
    audit = served.audit()
    assert "forward user=alice" in audit and "pt-interactive.team-a:8888 -> runai-team-a/pt-interactive-master-0:8888" \
        in audit, audit
    refused = [ln for ln in audit.splitlines() if " refused user=alice " in ln]
    assert any("other.team-b:8888" in ln and "forbidden" in ln for ln in refused), refused
    assert any("127.0.0.1:22" in ln and "not a workload" in ln for ln in refused), refused

