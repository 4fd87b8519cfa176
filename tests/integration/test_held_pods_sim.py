"""The dashboard's pods wait for the workloads' first LISTs (#31): with the PyTorchJobs' LIST held back
by simcluster, the pods' rows (listed first) are not grouped against no workload and shown so; once
the PyTorchJobs are in, every row is grouped as a one-shot command groups it."""

from __future__ import annotations

import asyncio
import gc

import pytest

from monitors.connection import load_cluster_config
from monitors.model_views import ModelDiff
from monitors.monitor import Monitor

pytestmark = pytest.mark.simcluster(scenario="scale", nodes=40, pods=1500)


def _grouping(m: Monitor) -> dict[tuple[str, str, str], tuple[str, ...]]:
    return {k: tuple(r.pod for r in w.ranks) for k, w in m.model.workloads.items()}


async def test_pods_listed_before_their_workloads_wait_for_them(simcluster):
    sim = simcluster.sim
    cfg = load_cluster_config(str(sim.kubeconfig_path))
    once = Monitor(cfg, once=True, events=False, pod_rows=True, unsettled=False)
    await once.start()
    await once.wait_synced()
    await once.stop()
    want = _grouping(once)
    assert sum(k[1] == "PyTorchJob" for k in want) >= 10

    simcluster.call(sim.faults.delay_next, r"/pytorchjobs$", 2.0)  # the pods' rows come in first
    m = Monitor(cfg, events=False, pod_rows=True, unsettled=False, coalesce=0.01)
    seen: list[tuple[int, bool]] = []  # at each diff the UI would get: (pods in the model, PyTorchJobs listed)

    def on_diff(d: ModelDiff) -> None:
        seen.append((len(m.model.pods), any(k[1] == "PyTorchJob" for k in m.model.jobs)))

    m.subscribe(on_diff)
    await m.start()
    try:
        pods = next(i for i in m.informers if i.kind.plural == "pods")
        await asyncio.wait_for(pods.synced.wait(), 30)
        assert not any(k[1] == "PyTorchJob" for k in m.model.jobs)  # (the delay held them back)
        assert not m.model.pods  # listed, and held
        await m.wait_synced()
        assert seen and all(jobs for n, jobs in seen if n)  # no picture had rows without their workloads
        assert _grouping(m) == want
        # each row one record: the informer's cache holds the model's (claimed by its workload)
        assert all(pods.cache[k] is p for k, p in m.model.pods.items())
    finally:
        await m.stop()


async def test_the_first_picture_is_built_without_the_cyclic_collector(simcluster):
    """Its views (at 100,000 pods, 100,000 rank views) are built before the collector resumes: with it
    on, each young collection rescans what the LISTs left (0.75 s more at 100,000 pods)."""
    cfg = load_cluster_config(str(simcluster.sim.kubeconfig_path))
    m = Monitor(cfg, events=False, pod_rows=True, unsettled=False, coalesce=30.0)  # (the first flush: wait_synced's)
    collector: list[bool] = []
    m.subscribe(lambda d: collector.append(gc.isenabled()))
    was = gc.isenabled()
    gc.enable()
    await m.start()
    try:
        await m.wait_synced()
        assert len(m.model.workloads) >= 10 and collector and collector[0] is False
        assert gc.isenabled()  # (and on again after it)
    finally:
        await m.stop()
        if not was:
            gc.disable()


async def test_the_dashboards_monitor_leaves_the_full_collection_to_the_app(simcluster):
    """Once: `tui.app.settle_heap` collects after the first picture (0.4 s at 100,000 pods); the data
    loop's first monitor does not collect the whole heap as well just before, and leaves the
    collector off for it (`collect_listed=False`: else, at 100,000 pods, a young, a middle and a
    full collection of all that was listed ran in between, 0.9 s); a command's monitor collects
    and resumes it itself (`ranks shell`: nothing collects after it)."""
    cfg = load_cluster_config(str(simcluster.sim.kubeconfig_path))
    full: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    for collect, want in ((False, 0), (True, 1)):
        m = Monitor(cfg, events=False, pod_rows=True, unsettled=False, collect_listed=collect)
        gc.collect()
        full.clear()
        gc.callbacks.append(count)
        try:
            await m.start()
            await m.wait_synced()
            assert len(full) == want, (collect, full)
            assert gc.isenabled() is collect
        finally:
            gc.callbacks.remove(count)
            await m.stop()
        assert gc.isenabled()  # (at the latest when the monitor stops)


@pytest.mark.simcluster(scenario="scale", nodes=10, pods=200)
async def test_the_app_resumes_the_collector_once_its_first_picture_is_in(simcluster):
    """What the data loop's first monitor left off, the dashboard turns on again after its one full
    collection (`tui.app.settle_heap`: what was listed frozen out of later collections); the app
    never runs on without it."""
    from tests import dashboard_kit as kit
    from tests.waiting import pilot_wait

    frozen = gc.get_freeze_count()
    app = kit.make_app(simcluster, metrics=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot_wait(pilot, lambda: app.store.synced, timeout=60, what="the first picture")
        await pilot_wait(pilot, gc.isenabled, timeout=10, what="the collector on")
        assert gc.get_freeze_count() > frozen
        assert not app.data.monitor.collect_listed  # (the first connection's: the app collected)


@pytest.mark.simcluster(scenario="scale", nodes=10, pods=200)
async def test_the_apps_full_collections_wait_for_a_moment_without_keys(simcluster):
    """After the first picture CPython makes no full collection of its own (one could fall inside a
    key's frame: 40-80 ms at 20,000 pods); the app makes them when no key came for a moment
    (`tui.idle_gc`), and gives them back to CPython when it ends."""
    from tests import dashboard_kit as kit
    from tests.waiting import pilot_wait
    from tui.idle_gc import DUE_AFTER, NEVER

    app = kit.make_app(simcluster, metrics=False)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot_wait(pilot, lambda: app.store.synced, timeout=60, what="the first picture")
            await pilot_wait(pilot, lambda: app.idle_gc.active, timeout=10, what="the idle collector")
            assert gc.get_threshold()[2] == NEVER
            for _ in range(3 * DUE_AFTER):
                gc.collect(1)  # (as many middle collections as a busy minute makes)
            await pilot.press("down")
            await pilot_wait(pilot, lambda: app.idle_gc.collections >= 1, timeout=30,
                             what="a full collection once the keys stopped")
            assert gc.get_count()[2] < DUE_AFTER
        assert gc.get_threshold()[2] == DUE_AFTER and not app.idle_gc.active
    finally:
        gc.set_threshold(700, 10, 10)
