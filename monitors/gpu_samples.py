"""GPU metrics as the poller hands them out (`metrics.GpuMetrics`): where they come from
(`MetricsSource`), a pod's or node's values (`GpuSample`) and its state (`MetricState`, the rules in
`gpu_states`), one refresh's answer (`MetricsSnapshot`). Plain data."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from .prom_discovery import ExporterPod, PromService
from .promql import PodKey


class MetricState(enum.Enum):
    OK = "ok"
    NO_DATA = "no-data"
    STALE = "stale"
    UNAVAILABLE = "unavailable"


class SourceKind(enum.Enum):
    PROMETHEUS = "prometheus"
    PROMETHEUS_VIA_APISERVER = "prometheus-via-apiserver"
    EXPORTER_SCRAPE = "exporter-scrape"
    NONE = "none"


@dataclass(frozen=True)
class MetricsSource:
    """Where metrics come from; ``str()`` is the short form, `description` the human one."""

    kind: SourceKind
    url: str = ""  # the Prometheus base URL (through the proxy for PROMETHEUS_VIA_APISERVER)
    service: PromService | None = None
    exporters: tuple[ExporterPod, ...] = ()
    notes: tuple[str, ...] = ()  # what discovery tried
    forbidden: str = ""  # nothing found because the API server refused to show it (why)

    def __str__(self) -> str:
        if self.kind is SourceKind.PROMETHEUS:
            return f"prometheus({self.url})"
        if self.kind is SourceKind.PROMETHEUS_VIA_APISERVER and self.service is not None:
            return f"prometheus-via-apiserver({self.service.namespace}/{self.service.name})"
        return str(self.kind.value)

    @property
    def description(self) -> str:
        if self.kind is SourceKind.PROMETHEUS:
            return f"Prometheus at {self.url}"
        if self.kind is SourceKind.PROMETHEUS_VIA_APISERVER and self.service is not None:
            return f"Prometheus service {self.service} through the API server's service proxy"
        if self.kind is SourceKind.EXPORTER_SCRAPE:
            n = len(self.exporters)
            return (f"DCGM exporters scraped through the API server's pod proxy "
                    f"({n} pod{'s' if n != 1 else ''}; no Prometheus found)")
        why = "; ".join(self.notes[-3:])
        if self.forbidden:
            return f"forbidden to this identity ({self.forbidden})"
        return "no GPU metrics: no Prometheus service or DCGM exporter pod found" + (f" ({why})" if why else "")


@dataclass(frozen=True, slots=True)
class GpuSample:
    """Values averaged over the pod's (or node's) GPUs; None = no usable value (never 0)."""

    util: float | None  # %
    sm_active: float | None  # % (DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100)
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    temp_c: float | None
    xid: int | None  # last non-zero XID code seen (0: none)
    gpus: int  # GPUs seen
    at: float  # unix time of the refresh that produced it
    throttle: int | None = None  # the highest clock-event reasons bitmask of its GPUs (None: not exported)


@dataclass(frozen=True)
class PodMetrics:
    state: MetricState
    sample: GpuSample | None
    reason: str = ""


@dataclass(frozen=True)
class NodeGpu(PodMetrics):
    """The same as `PodMetrics`, for a node (keyed by the exporter's Hostname/hostname)."""


@dataclass(frozen=True)
class MetricsSnapshot:
    source: MetricsSource
    state: MetricState
    reason: str
    pods: Mapping[PodKey, PodMetrics]
    nodes: Mapping[str, NodeGpu]
    at: float
    warnings: tuple[str, ...] = ()
    queries: int = 0  # requests sent for this refresh
    duration: float = 0.0  # seconds
