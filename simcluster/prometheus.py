"""Prometheus against a SimCluster, for `ranks demo`: the front door to `simcluster.gpu.prometheus`,
where it lives (the package's other front doors: `simcluster.cluster`, `simcluster.pytest_plugin`)."""

from .gpu.prometheus import (
    PrometheusError,
    PrometheusServer,
    config,
    dcgm_scrape_config,
    prometheus_binary,
    register_prometheus_service,
    unregister_prometheus_service,
)

__all__ = [
    "PrometheusError",
    "PrometheusServer",
    "config",
    "dcgm_scrape_config",
    "prometheus_binary",
    "register_prometheus_service",
    "unregister_prometheus_service",
]
