"""GPU metrics snapshots into the model (`monitors.gpu_feed`): every pod without a sample (a
failing source's refresh) shares one reading, so a dashboard of 15,000 GPU pods whose Prometheus
does not answer holds one object for them, not 15,000 (#31: per-session memory at the SSH door);
a pod with a sample gets its own figures."""

from __future__ import annotations

from monitors.gpu_feed import apply_snapshot
from monitors.gpu_samples import (
    GpuSample,
    MetricsSnapshot,
    MetricsSource,
    MetricState,
    PodMetrics,
    SourceKind,
)
from monitors.model import GpuReading, LiveModel


def test_pods_without_a_sample_share_one_reading_and_the_others_keep_their_own() -> None:
    model = LiveModel()
    sample = GpuSample(util=50.0, sm_active=None, mem_used_mib=1000.0, mem_total_mib=80000.0, power_w=None,
                       temp_c=None, xid=0, gpus=1, at=1.0, throttle=None)
    down = PodMetrics(MetricState.UNAVAILABLE, None, "Prometheus: connection refused")
    pods = {("a", f"p{i}"): PodMetrics(MetricState.UNAVAILABLE, None, "Prometheus: connection refused")
            for i in range(3)} | {("a", "q"): down, ("a", "ok"): PodMetrics(MetricState.OK, sample)}
    apply_snapshot(model, MetricsSnapshot(MetricsSource(SourceKind.PROMETHEUS, "http://p"), MetricState.UNAVAILABLE,
                                          "down", pods, {}, 1.0))
    bare = {id(model.gpu[k]) for k in pods if k != ("a", "ok")}
    assert len(bare) == 1
    assert model.gpu[("a", "p0")] == GpuReading("unavailable", None, None, None, None, None)
    assert model.gpu[("a", "ok")] == GpuReading("ok", 50.0, 1000.0, 80000.0, 0, None)
