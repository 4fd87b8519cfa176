"""What the model offers its readers: immutable, comparable views of projects, workloads, ranks, nodes.

Views compare by value, so the model can send keyed diffs (added / changed / removed) and the
dashboard can redraw only the rows that changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: `frozen` costs 7x per record
class RankView:
    namespace: str
    pod: str
    role: str
    rank: int | None
    replica_index: int | None
    label: str  # launcher, master-0, worker-3
    phase: str
    reason: str
    message: str
    restarts: int
    ready: bool
    node: str
    pod_ip: str
    gpus: float
    lead: bool
    created: float | None
    gpu_util: float | None = None
    gpu_mem_used_mib: float | None = None
    gpu_mem_total_mib: float | None = None
    gpu_state: str = "unknown"  # ok / no data / stale / unavailable / unknown
    last_log: float | None = None
    exit_code: int | None = None  # of the main container, when it has terminated
    # that exit was its pod's deletion stopping it (`records.stopped_by_deletion`): no failure
    stopped: bool = False
    deleting: bool = False  # its pod is being deleted (Terminating)
    gpu_xid: int | None = None  # the last XID its GPUs raised (kept once it stopped), and when first seen
    gpu_xid_at: float | None = None
    gpu_throttle: tuple[str, ...] = ()  # why its GPUs' clocks are held down now (power_cap, sw_thermal...)

    @property
    def status(self) -> str:
        return self.reason or self.phase


@dataclass(frozen=True, slots=True)
class FirstFailure:
    label: str
    role: str
    rank: int | None
    pod: str
    container: str
    exit_code: int
    reason: str
    at: float | None
    message: str = ""


@dataclass(frozen=True, slots=True)
class GpuXid:
    """An XID one of a pod's GPUs raised: which GPU (None: not known), the code, when first seen."""

    namespace: str
    pod: str
    node: str
    gpu: int | None
    code: int
    at: float


@dataclass(frozen=True, slots=True)
class ConditionView:
    type: str
    status: str
    reason: str
    message: str
    at: float | None


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: `frozen` costs 7x per record
class WorkloadView:
    namespace: str
    name: str
    project: str
    kind: str
    framework: str
    status: str
    reason: str
    interactive: bool
    ranks_ready: int
    ranks_total: int
    gpus_requested: float
    gpus_allocated: float
    gpu_util: float | None
    created: float | None
    user: str
    command: str
    conditions: tuple[ConditionView, ...]
    labels: tuple[tuple[str, str], ...]
    ranks: tuple[RankView, ...]
    first_failure: FirstFailure | None
    uid: str = ""
    api_version: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.kind, self.name)

    @property
    def lead(self) -> RankView | None:
        return next((r for r in self.ranks if r.lead), None)


@dataclass(frozen=True, slots=True)
class ProjectView:
    name: str
    namespace: str
    gpu_quota: float | None
    gpus_allocated: float
    gpu_util: float | None
    running: int
    pending: int
    runai: bool


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    pool: str
    product: str
    ready: bool
    unschedulable: bool
    gpus: float
    gpus_allocated: float
    gpu_util: float | None
    gpu_mem_used_mib: float | None
    pods: int


@dataclass(frozen=True)
class KeyedDiff(Generic[K, V]):
    added: dict[K, V] = field(default_factory=dict)
    changed: dict[K, V] = field(default_factory=dict)
    removed: dict[K, V] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


@dataclass(frozen=True)
class ModelDiff:
    workloads: KeyedDiff[tuple[str, str, str], WorkloadView]
    projects: KeyedDiff[str, ProjectView]
    nodes: KeyedDiff[str, NodeView]
    status_changed: bool = False  # connection / forbidden / metrics-source state changed
    events_changed: frozenset[tuple[str, str]] = frozenset()  # (namespace, involved object name)

    def __bool__(self) -> bool:
        return bool(self.workloads or self.projects or self.nodes or self.status_changed or self.events_changed)


def diff(old: dict[Any, Any], new: dict[Any, Any]) -> KeyedDiff[Any, Any]:
    out: KeyedDiff[Any, Any] = KeyedDiff()
    for k, v in new.items():
        prev = old.get(k)
        if prev is None:
            out.added[k] = v
        elif prev is not v and prev != v:
            out.changed[k] = v
    for k, v in old.items():
        if k not in new:
            out.removed[k] = v
    return out
