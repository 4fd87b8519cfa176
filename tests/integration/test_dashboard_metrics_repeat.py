"""An idle dashboard whose Prometheus does not answer (#31: the SSH door's sessions, told one
Prometheus by the operator): each refresh of the same GPU pods tells the poller nothing new and puts
nothing new in the model; the pods shown are told again when they change. Real parts: simcluster, a
port nothing listens on for Prometheus."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from monitors import gpu_feed
from monitors.dataloop import DataOptions
from monitors.metrics import GpuMetrics
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests import dashboard_kit as kit
from tests.kubeflow_objects import job, pod
from tests.waiting import pilot_wait

NS = "default"


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(components=(), workdir=tmp_path_factory.mktemp("sim")) as t:
        t.call(t.sim.apply, job("PyTorchJob", "train", NS, {"Master": 1, "Worker": 2}))
        for rtype, i in (("Master", 0), ("Worker", 0), ("Worker", 1)):
            t.call(t.sim.apply, pod("PyTorchJob", "train", NS, rtype, i, gpus=2))
        yield t


async def test_refreshes_of_the_same_pods_against_a_dead_prometheus_put_nothing_new_in_the_model(
        cluster: ThreadedSimCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    calls: dict[str, int] = {"shown": 0, "applied": 0}
    real_shown, real_apply = GpuMetrics.set_shown, gpu_feed.apply_snapshot

    def shown(self: GpuMetrics, *args: Any, **kwargs: Any) -> None:
        calls["shown"] += 1
        real_shown(self, *args, **kwargs)

    def applied(*args: Any) -> None:
        calls["applied"] += 1
        real_apply(*args)

    monkeypatch.setattr(GpuMetrics, "set_shown", shown)
    monkeypatch.setattr(gpu_feed, "apply_snapshot", applied)
    app = kit.make_app(cluster, data_options=DataOptions(prometheus_url=f"http://127.0.0.1:{port}",
                                                         refresh_interval=0.3))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot_wait(pilot, lambda: app.store.synced and app.data.metrics.gm is not None, 30, "the first picture")
        gm = app.data.metrics.gm
        assert gm is not None
        await pilot_wait(pilot, lambda: gm.refreshes >= 5, 30, "five refreshes", interval=0.05)
        assert gm.last is not None and gm.last.state.value == "unavailable" and len(gm.last.pods) == 3
        assert calls == {"shown": 1, "applied": 1}, calls
        # another GPU pod shown: told, and its reading put in the model
        cluster.call(cluster.sim.apply, pod("PyTorchJob", "train", NS, "Worker", 2, gpus=2, name="train-worker-9"))
        started = time.monotonic()
        await pilot_wait(pilot, lambda: gm.last is not None and len(gm.last.pods) == 4, 30, "the new pod's refresh",
                         interval=0.05)
        assert calls["shown"] == 2 and calls["applied"] == 2, (calls, time.monotonic() - started)
