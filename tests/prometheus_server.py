"""Test helper: a real Prometheus (Debian's binary) for a test, always stopped afterwards.

The logic lives in `simcluster.prometheus` (the demo uses it too); this is the test-side wrapper:
it fails clearly when the binary is missing (`make test` installs it via scripts/system-deps.sh)
and keeps the server's log in the test's tmp dir for post-mortems.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simcluster.gpu.prometheus import PrometheusServer, prometheus_binary


@contextlib.contextmanager
def prometheus_server(cfg: dict[str, Any], workdir: Path, *, timeout: float = 15.0) -> Iterator[PrometheusServer]:
    """Start Prometheus on 127.0.0.1 (random port, storage under `workdir`), ready on entry."""
    binary = prometheus_binary()
    if binary is None:
        pytest.fail("prometheus is not installed: run scripts/system-deps.sh (make test does)")
    server = PrometheusServer(cfg, workdir, binary=binary)
    try:
        server.start(timeout)
        yield server
    finally:
        server.stop()
