"""The state of each pod's and node's GPU values, refresh after refresh (`metrics.GpuMetrics` asks):
the last good sample of each, the last XID seen, and the rules of `MetricState`.

- a fresh, valid utilisation: OK (and remembered as the last good sample);
- the source answered without a usable value: NO_DATA (no series; or NaN, Inf, out of range);
- the source failed (or answered partially) for this one: its last good sample, OK while at most
  `stale_after` old, then STALE until `expire_after`, then UNAVAILABLE (and forgotten).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from .gpu_samples import GpuSample, MetricState, NodeGpu, PodMetrics
from .promql import PodKey, Reading

K = TypeVar("K", PodKey, str)  # a pod (namespace, name) or a node's name
M = TypeVar("M", bound=PodMetrics)  # PodMetrics, or NodeGpu for a node


class GpuStates:
    def __init__(self, stale_after: float, expire_after: float) -> None:
        self.stale_after = stale_after
        self.expire_after = expire_after
        self.pods: dict[PodKey, GpuSample] = {}  # the last good sample of each pod
        self.nodes: dict[str, GpuSample] = {}  # of each node
        self._xid: dict[PodKey | str, int] = {}  # the last non-zero XID seen of each pod or node

    def sample(self, key: K, fields: Mapping[str, Mapping[K, Reading]], now: float) -> GpuSample | None:
        """`key`'s values in this refresh's answers (`fields`: field -> key -> reading), None without any."""
        readings = {fkey: m[key] for fkey, m in fields.items() if key in m}
        if not readings:
            return None

        def val(fkey: str) -> float | None:
            r = readings.get(fkey)
            return r.value if r is not None else None

        gpus = val("gpus")
        xid_now = val("xid")
        xid: int | None = None
        if xid_now is not None:
            xid = int(xid_now)
            if xid > 0:
                self._xid[key] = xid
            else:
                xid = self._xid.get(key, 0)
        elif key in self._xid:
            xid = self._xid[key]
        return GpuSample(
            util=val("util"), sm_active=val("sm_active"), mem_used_mib=val("mem_used_mib"),
            mem_total_mib=val("mem_total_mib"), power_w=val("power_w"), temp_c=val("temp_c"),
            xid=xid, gpus=int(gpus) if gpus is not None else 0, at=now,
            throttle=int(t) if (t := val("throttle")) is not None else None,
        )

    def fallback(self, last: GpuSample | None, now: float, reason: str, cls: type[M]) -> M:
        """The state of something without a fresh value while the source fails (or is partial)."""
        if last is None:
            return cls(MetricState.UNAVAILABLE, None, reason)
        age = now - last.at
        if age <= self.stale_after:
            return cls(MetricState.OK, last, f"{reason}; showing the value from {_ago(age)}")
        if age <= self.expire_after:
            return cls(MetricState.STALE, last, f"{reason}; last value from {_ago(age)}")
        return cls(MetricState.UNAVAILABLE, None, reason)

    def assemble(self, fields: Mapping[str, Mapping[K, Reading]], shown: Iterable[K], good: dict[K, GpuSample],
                 now: float, partial: str, *, extra: Callable[[K], bool], cls: type[M]) -> dict[K, M]:
        """The state of each shown key (and of each key in the answers that `extra` accepts);
        `good` (`pods` or `nodes`) keeps the last good samples; `partial`: why the answer was partial."""
        keys = set(shown)
        for m in fields.values():
            keys.update(k for k in m if extra(k))
        out: dict[K, M] = {}
        for key in sorted(keys):
            sample = self.sample(key, fields, now)
            if sample is None:
                if partial:
                    out[key] = self.fallback(good.get(key), now, partial, cls)
                else:
                    out[key] = cls(MetricState.NO_DATA, None, "no DCGM series for this pod"
                                   if cls is PodMetrics else "no DCGM series for this node")
                continue
            if sample.util is None:
                util = fields.get("util", {}).get(key)
                why = util.problem if util is not None and util.problem else "NaN, Inf or out of range"
                out[key] = cls(MetricState.NO_DATA, sample,
                               f"no valid GPU utilisation ({why}) on {sample.gpus} GPU(s)")
                continue
            good[key] = sample
            out[key] = cls(MetricState.OK, sample)
        return out

    def failed(self, pods: Iterable[PodKey], nodes: Iterable[str], now: float, reason: str
               ) -> tuple[dict[PodKey, PodMetrics], dict[str, NodeGpu]]:
        """Every shown pod and node while the source fails: each from its last good sample."""
        return ({key: self.fallback(self.pods.get(key), now, reason, PodMetrics) for key in sorted(pods)},
                {n: self.fallback(self.nodes.get(n), now, reason, NodeGpu) for n in sorted(nodes)})

    def prune(self, now: float) -> None:
        """Forget last good values (and remembered XIDs) older than `expire_after`."""
        cutoff = now - self.expire_after
        for pk in [k for k, v in self.pods.items() if v.at < cutoff]:
            del self.pods[pk]
            self._xid.pop(pk, None)
        for node in [k for k, v in self.nodes.items() if v.at < cutoff]:
            del self.nodes[node]
            self._xid.pop(node, None)


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago"
