"""Every GPU for the dashboard's GPUs tab, read on the data thread: the metrics loop's source asked
once per field group (`GpuMetrics.read_fleet`), the owners placed against the model, each GPU's
utilisation history kept for its sparkline, its XIDs and ECC counts since the tab first saw it, and
the doctor's lines where figures are missing (`diagnostics.gpu_doctor`)."""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass, field

from ..diagnostics.gpu_doctor import Direct, NodeGpus, diagnose, unlabelled_nodes
from ..gpu_fleet import Gpu, GpuKey, owners_of, place
from ..gpu_fleet_source import FleetRead, direct_of
from ..model import LiveModel

SPARK = 16  # readings kept per GPU
DIRECT_EVERY = 300.0  # seconds between two direct reads of the exporters beside Prometheus


@dataclass(frozen=True)
class FleetShown:
    """One reading as the tab shows it."""

    gpus: tuple[Gpu, ...]
    history: dict[GpuKey, tuple[float, ...]]
    xid_at: dict[GpuKey, float]  # when the tab first saw each GPU's XID
    notes: tuple[str, ...]  # what is missing and why, one line each (the doctor's)
    problem: str  # the source failed ("" when it answered)
    queries: int
    at: float


@dataclass
class FleetTrack:
    """What the tab keeps between readings: histories, and each GPU's first-seen error counters."""

    history: dict[GpuKey, deque[float]] = field(default_factory=dict)
    ecc_base: dict[GpuKey, tuple[float | None, float | None]] = field(default_factory=dict)
    xids: dict[GpuKey, tuple[int, float]] = field(default_factory=dict)  # last XID seen, and when first
    direct: dict[str, Direct] = field(default_factory=dict)  # the exporters read directly, at `direct_at`
    direct_at: float = float("-inf")

    def direct_due(self, now: float) -> bool:
        """Whether to read the exporters directly beside Prometheus (the doctor's comparison):
        at the first reading, then every `DIRECT_EVERY` seconds."""
        return now - self.direct_at >= DIRECT_EVERY

    def shown(self, read: FleetRead, model: LiveModel, now: float, *, prometheus: bool) -> FleetShown:
        fleet = read.fleet
        place(fleet, owners_of(model.workloads.values()))
        if read.scraped:
            self.direct, self.direct_at = direct_of(read), now
        k8s = {n.name: NodeGpus(n.gpus, n.gpus_allocated) for n in model.nodes.values() if n.gpus > 0}
        bare = set(unlabelled_nodes(fleet, k8s, self.direct))  # (`ranks gpus` attributes them by UUID; the tab says so)
        gpus: list[Gpu] = []
        for key, g in sorted(fleet.gpus.items()):
            if g.util is not None:
                self.history.setdefault(key, deque(maxlen=SPARK)).append(g.util)
            base = self.ecc_base.setdefault(key, (g.ecc_sbe, g.ecc_dbe))
            if g.xid and self.xids.get(key, (0, 0.0))[0] != g.xid:
                self.xids[key] = (g.xid, now)
            # ECC counts since this GPU was first seen here (a counter that went back: the driver reloaded)
            sbe = None if g.ecc_sbe is None else max(0.0, g.ecc_sbe - (base[0] or 0.0))
            dbe = None if g.ecc_dbe is None else max(0.0, g.ecc_dbe - (base[1] or 0.0))
            gpus.append(dataclasses.replace(g, ecc_sbe=sbe, ecc_dbe=dbe,
                                            owner_unknown=g.owner is None and g.node in bare))
        for key in [k for k in self.history if k not in fleet.gpus]:
            del self.history[key]
            self.ecc_base.pop(key, None)
            self.xids.pop(key, None)
        notes = diagnose(fleet, k8s, no_source=read.problem, prometheus=prometheus, direct=self.direct)
        notes += read.warnings
        return FleetShown(tuple(gpus), {k: tuple(v) for k, v in self.history.items()},
                          {k: at for k, (_, at) in self.xids.items()}, tuple(notes), read.problem, read.queries, now)
