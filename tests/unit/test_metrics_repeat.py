"""A GPU metrics refresh of the same pods against a source that keeps failing builds nothing again
(`monitors.metrics.GpuMetrics`): the history query of the pods shown is built once while they are
the same, and the failed answer, while no pod or node ever had a good sample, is the same object
(the dashboard puts it in its model once). Every five seconds with 15,000 GPU pods shown, that was
most of an idle SSH session's data thread (#31). Real sockets: a port nothing listens on."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from monitors import metrics as metrics_module
from monitors.gpu_samples import MetricState


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_same_pods_against_a_failing_source_cost_no_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Any] = []
    real = metrics_module.promql.history_query

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(metrics_module.promql, "history_query", counted)

    async def main() -> None:
        gm = metrics_module.GpuMetrics(f"http://127.0.0.1:{free_port()}", interval=5, timeout=2)
        try:
            gm.set_shown([("team", f"p{i}") for i in range(50)], all_nodes=True)
            first = await gm.refresh()
            again = await gm.refresh()
            assert first.state is again.state is MetricState.UNAVAILABLE
            assert again.pods is first.pods and len(first.pods) == 50 and len(built) == 1
            assert all(m.state is MetricState.UNAVAILABLE and m.sample is None for m in again.pods.values())
            gm.set_shown([("team", f"p{i}") for i in range(60)], all_nodes=True)  # (others shown: built again)
            other = await gm.refresh()
            assert other.pods is not first.pods and len(other.pods) == 60 and len(built) == 2
        finally:
            await gm.aclose()

    asyncio.run(main())
