"""Feeding GPU metrics snapshots into the live model (the glue between `metrics` and `model`)."""

from __future__ import annotations

from .connection import ClusterConfig
from .metrics import GpuMetrics, MetricsSnapshot, MetricState
from .model import GpuReading, LiveModel
from .prom_discovery import ApiEndpoint

STATE_NAMES = {
    MetricState.OK: "ok",
    MetricState.NO_DATA: "no data",
    MetricState.STALE: "stale",
    MetricState.UNAVAILABLE: "unavailable",
}


def api_endpoint(cfg: ClusterConfig) -> ApiEndpoint:
    """The API server for GPU metrics and Prometheus discovery, with the connection's own
    credentials (read as each request goes out: the same source as every other path)."""
    return ApiEndpoint(cfg.server, server_hostname=cfg.tls_server_name or None, credentials=cfg)


def make_metrics(cfg: ClusterConfig, prometheus: str | None = None, *, interval: float = 15.0,
                 timeout: float = 5.0) -> GpuMetrics:
    return GpuMetrics(prometheus, api_endpoint(cfg), interval=interval, timeout=timeout)


def apply_snapshot(model: LiveModel, snap: MetricsSnapshot) -> None:
    pods = {}
    for key, pm in snap.pods.items():
        s = pm.sample
        pods[key] = GpuReading(
            STATE_NAMES[pm.state],
            s.util if s else None,
            s.mem_used_mib if s else None,
            s.mem_total_mib if s else None,
            s.xid if s else None,
            s.throttle if s else None,
        )
    nodes = {
        name: (nm.sample.util if nm.sample else None, nm.sample.mem_used_mib if nm.sample else None)
        for name, nm in snap.nodes.items()
    }
    model.set_gpu(pods, nodes)
