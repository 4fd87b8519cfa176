"""The Monitor against simcluster: live diffs, and watches that survive drops, 500s, 410 and restarts."""

from __future__ import annotations

import asyncio
import time

import pytest

from monitors.connection import load_cluster_config
from monitors.informer import InformerState
from monitors.monitor import Monitor
from tests.faults import assert_consumed, assert_fired
from tests.kubeflow_objects import job, pod
from tests.waiting import until

pytestmark = pytest.mark.simcluster(scenario="demo")
NS = "runai-team-a"
KEY = (NS, "PyTorchJob", "mnist")


async def start_monitor(sim, **kw) -> Monitor:
    cfg = load_cluster_config(str(sim.kubeconfig_path), kw.pop("context", None))
    m = Monitor(cfg, backoff=(0.05, 0.3), read_timeout=kw.pop("read_timeout", 5.0), **kw)
    await m.start()
    await m.wait_synced(20)
    return m


def seed(sim, workers: int = 2) -> None:
    sim.apply(job("PyTorchJob", "mnist", NS, {"Master": 1, "Worker": workers}, conditions=[("Running", "")]))
    sim.apply(pod("PyTorchJob", "mnist", NS, "Master", 0, node="h100-node-01"))
    for i in range(workers):
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", i, node="h100-node-02"))


def ranks_of(m: Monitor) -> list[str]:
    wl = m.model.workloads.get(KEY)
    return [r.pod for r in wl.ranks] if wl else []


async def test_live_diffs(simcluster_async):
    sim = simcluster_async
    seed(sim)
    m = await start_monitor(sim)
    diffs = []
    m.subscribe(diffs.append)
    try:
        assert ranks_of(m) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
        assert m.model.projects[NS].gpus_allocated == 3
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 1, node="h100-node-02", ready=False,
                      waiting="CrashLoopBackOff", restarts=2))
        await until(lambda: m.model.workloads[KEY].status == "Degraded", what="Degraded")
        assert m.model.workloads[KEY].reason == "worker-1: CrashLoopBackOff"
        assert any(KEY in d.workloads.changed for d in diffs)
        rt = sim.registry.get("", "v1", "pods")
        sim.store.remove(rt, NS, "mnist-worker-1")
        await until(lambda: len(ranks_of(m)) == 2, what="removal")
        assert m.model.workloads[KEY].ranks_total == 3  # the job still expects three
    finally:
        await m.stop()


async def test_dropped_watches_resume_without_relist(simcluster_async):
    sim = simcluster_async
    seed(sim)
    m = await start_monitor(sim)
    try:
        lists = m.list_requests
        await until(lambda: sim.store.watch_count >= len(m.informers), what="watches open")
        sim.store.drop_watches()
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 2, node="h100-node-03"))
        await until(lambda: "mnist-worker-2" in ranks_of(m), what="event after reconnect")
        assert m.list_requests == lists, "a dropped watch resumes from its resourceVersion"
        assert ranks_of(m).count("mnist-worker-2") == 1
    finally:
        await m.stop()


async def test_injected_500s_then_recovery(simcluster_async):
    sim = simcluster_async
    seed(sim)
    m = await start_monitor(sim)
    try:
        t0 = time.time()
        sim.faults.fail_next(r"/namespaces$|/pods$", 500, 6, method="GET")
        sim.store.drop_watches()
        await asyncio.sleep(0.3)
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 5, node="h100-node-03"))
        await until(lambda: "mnist-worker-5" in ranks_of(m), what="recovery after 500s")
        assert sorted(ranks_of(m)) == sorted(set(ranks_of(m)))
        # the monitor recovered through all six 500s, not around them
        assert_consumed(sim, r"/namespaces$|/pods$")
        assert_fired(sim, r"/namespaces$|/pods$", 500, since=t0, method="GET", times=6)
    finally:
        await m.stop()


async def test_410_relists_without_ghosts(simcluster_async):
    sim = simcluster_async
    seed(sim, workers=3)
    m = await start_monitor(sim)
    try:
        lists = m.list_requests
        await sim.restart(0.0)  # drops watches; the informers reconnect from their resourceVersion
        rt = sim.registry.get("", "v1", "pods")
        sim.store.remove(rt, NS, "mnist-worker-0")
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 7, node="h100-node-03"))
        sim.store.compact()  # ... which is now too old: 410, relist
        sim.store.drop_watches()
        await until(lambda: "mnist-worker-7" in ranks_of(m) and "mnist-worker-0" not in ranks_of(m),
                    what="relist after 410")
        assert m.list_requests > lists
        assert ranks_of(m) == ["mnist-master-0", "mnist-worker-1", "mnist-worker-2", "mnist-worker-7"]
    finally:
        await m.stop()


async def test_server_down_then_back(simcluster_async):
    sim = simcluster_async
    seed(sim)
    m = await start_monitor(sim)
    try:
        task = asyncio.create_task(sim.restart(1.0))
        await until(lambda: not m.status.connected, timeout=5, what="retrying state")
        await task
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 3, node="h100-node-03"))
        await until(lambda: "mnist-worker-3" in ranks_of(m) and m.status.connected, timeout=15,
                    what="reconnect")
    finally:
        await m.stop()


async def test_namespace_limited_user(simcluster_async):
    sim = simcluster_async
    seed(sim)
    sim.apply(job("PyTorchJob", "other", "runai-team-b", {"Master": 1}))
    sim.apply(pod("PyTorchJob", "other", "runai-team-b", "Master", 0, node="a100-node-01"))
    m = await start_monitor(sim, context="ranks-sim-alice", namespaces=[NS])
    try:
        assert not m.status.cluster_wide and m.status.namespaces == (NS,)
        assert set(m.model.workloads) == {KEY}
        assert any(n.startswith("nodes") for n in m.status.forbidden)
        nodes_inf = next(i for i in m.informers if i.kind.plural == "nodes")
        assert nodes_inf.state == InformerState.FORBIDDEN
        assert "cannot list resource \"nodes\"" in m.status.forbidden[nodes_inf.name]
    finally:
        await m.stop()
