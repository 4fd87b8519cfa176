"""The dashboard's copy of the model, kept on the UI thread from the data loop's keyed diffs.

Screens read from here (never from the data thread's live structures); `apply` returns what
changed so the visible screen can update only those rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from monitors.dataloop import DataStatus, DataUpdate, Progress
from monitors.model_views import KeyedDiff, ModelDiff, NodeView, ProjectView, WorkloadView
from monitors.records import EventRec

if TYPE_CHECKING:
    from monitors.diagnostics.hangs import JobHealth
    from monitors.diagnostics.why import Diagnosis
    from monitors.flight_records import RecordedFailure

WorkloadKey = tuple[str, str, str]
K = TypeVar("K")
V = TypeVar("V")


@dataclass
class ViewStore:
    """The views the dashboard shows (workloads, projects, nodes), the data status and the focused
    workload's histories and events; updated only by `apply`."""

    workloads: dict[WorkloadKey, WorkloadView] = field(default_factory=dict)
    projects: dict[str, ProjectView] = field(default_factory=dict)
    nodes: dict[str, NodeView] = field(default_factory=dict)
    status: DataStatus = field(default_factory=DataStatus)
    histories: dict[str, tuple[float, ...]] = field(default_factory=dict)
    last_logs: dict[str, float] = field(default_factory=dict)
    events: tuple[EventRec, ...] = ()  # of the focused workload
    diagnosis: Diagnosis | None = None  # of the focused workload
    # (its key, its first failure, what happened), once it finished with its pods gone
    postmortem: tuple[WorkloadKey | None, RecordedFailure | None, tuple[str, ...]] = (None, None, ())
    # the focused workload's training progress: (key, {label: step/loss/throughput/rate/spark}, ETA, total)
    progress: Progress = (None, {}, None, None)
    health: dict[WorkloadKey, JobHealth] = field(default_factory=dict)  # the flagged running jobs
    synced: bool = False
    generation: int = 0  # bumped on every applied update (screens compare to skip work)

    def apply(self, update: DataUpdate) -> ModelDiff:
        d = update.diff
        if update.reset:
            self.workloads.clear()
            self.projects.clear()
            self.nodes.clear()
            self.synced = False
        if update.synced:
            self.synced = True
        _apply(self.workloads, d.workloads)
        _apply(self.projects, d.projects)
        _apply(self.nodes, d.nodes)
        self.status = update.status
        self.histories = dict(update.histories)
        self.last_logs = dict(update.last_logs)
        if update.events is not None:
            self.events = tuple(update.events)
        if update.progress is not None:
            self.progress = update.progress
        if update.health is not None:
            self.health = dict(update.health)
        if update.diagnosis is not None or update.postmortem is not None:
            self.diagnosis = update.diagnosis
            self.postmortem = update.postmortem or (None, None, ())
        self.generation += 1
        return d

    def project_of_namespace(self, namespace: str) -> ProjectView | None:
        for p in self.projects.values():
            if p.namespace == namespace:
                return p
        return None

    def find_project(self, name: str) -> ProjectView | None:
        """A project by name (team-a) or namespace (runai-team-a)."""
        return self.projects.get(name) or self.project_of_namespace(name) or self.projects.get(f"runai-{name}")


def _apply(target: dict[K, V], kd: KeyedDiff[K, V]) -> None:
    for k in kd.removed:
        target.pop(k, None)
    target.update(kd.added)
    target.update(kd.changed)
