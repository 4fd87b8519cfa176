"""What a workload's status is judged by, of each of its pods: the few fields of a rank view
`model.derive_status` reads, without building the view (`ranks projects`, `ranks top projects`:
they count workloads by status and show no rank). The rank's label (its role and index) is placed
only when asked for, as only a degraded workload's reason names a rank."""

from __future__ import annotations

from typing import Protocol

from .records import JobRec, PodRec
from .workloads import placement


class RankLike(Protocol):
    """What `derive_status` reads of a rank (a `RankView`, or a `RankBrief`)."""

    @property
    def phase(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def ready(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def message(self) -> str: ...
    @property
    def label(self) -> str: ...


def rank_ready(p: PodRec) -> bool:
    """A rank is ready: its pod runs with every container ready (a `RankView`'s and a `RankBrief`'s `ready`)."""
    return p.phase == "Running" and p.ready == p.total and p.total > 0


def rank_message(p: PodRec) -> str:
    """What a rank says of itself: its pod's message, else why the scheduler cannot place it."""
    return p.message or p.unschedulable


class RankBrief:
    """A pod as `derive_status` sees it: the same values as its `RankView` would hold."""

    __slots__ = ("_job", "_kind", "_pod", "message", "node", "phase", "ready", "reason")

    def __init__(self, kind: str, p: PodRec, job: JobRec | None) -> None:
        self._kind, self._pod, self._job = kind, p, job
        self.phase, self.node, self.reason = p.phase, p.node, p.reason
        self.message, self.ready = rank_message(p), rank_ready(p)

    @property
    def label(self) -> str:
        return placement(self._kind, self._pod, self._job).label
