"""pytest fixtures for simcluster (load with `pytest_plugins = ["simcluster.pytest_plugin"]`).

- `simcluster`: a cluster served from a background thread, for synchronous tests and clients
  (the official `kubernetes` client and kubectl block, so the server needs its own loop).
- `simcluster_async`: a cluster on the test's own event loop, for async tests.
Ask for a scenario with `@pytest.mark.simcluster(scenario="demo")`. Tests get a passive cluster
(no components) unless they ask, e.g. `components=("operators", "scheduler", "kubelet")`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from .cluster import SimCluster, ThreadedSimCluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "simcluster(**kwargs): SimCluster options for the fixture")


def _options(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("simcluster")
    opts = dict(marker.kwargs) if marker else {}
    opts.setdefault("components", ())
    return opts


@pytest.fixture
def simcluster(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[ThreadedSimCluster]:
    opts = {"workdir": tmp_path / "sim", **_options(request)}
    t = ThreadedSimCluster(**opts)
    t.start()
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture
async def simcluster_async(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[SimCluster]:
    opts = {"workdir": tmp_path / "sim", **_options(request)}
    async with SimCluster(**opts) as sim:
        yield sim
