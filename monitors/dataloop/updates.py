"""What the data loop is told (`DataOptions`, `Judging`) and what it sends the UI (`DataStatus`,
`DataUpdate`): plain data, typed to the last field, safe to read on any thread."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias, TypedDict

from ..model_views import KeyedDiff, ModelDiff
from ..records import EventRec

if TYPE_CHECKING:  # (the diagnostics load when first used: the dashboard starts without them)
    from ..diagnostics.hangs import JobHealth, Thresholds
    from ..diagnostics.progress import Pattern
    from ..diagnostics.why import Diagnosis
    from ..flight_records import RecordedFailure

WorkloadKey = tuple[str, str, str]


@dataclass(frozen=True)
class DataOptions:
    namespaces: tuple[str, ...] = ()
    scope: tuple[str, ...] | None = None
    prometheus_url: str | None = None
    metric_names: Mapping[str, str] | None = None
    refresh_interval: float = 5.0
    coalesce: float = 0.05
    metrics: bool = True
    backoff: tuple[float, float] = (0.5, 30.0)
    project: str | None = None  # the project the dashboard opens on: checked against the cluster
    waiting_after: float = 3.0  # seconds without an answer before the status says "waiting"
    record_failures: bool = True  # the flight recorder (failing ranks written down, `flight_recorder`)


@dataclass
class Judging:
    """How the data loop judges what it sees: the app's settings (`tui.settings`), read as it judges."""

    thresholds: Thresholds | None = None  # hangs and stragglers (`diagnostics.hangs`; None: its defaults)
    clock: Callable[[], float] = time.time  # what "ago" is measured from (the app's clock)
    paste_command: str = "ranks"  # how ranks runs on the user's machine, in lines offered to paste
    idle_threshold: float = 5.0  # % under which a session's GPUs are idle
    progress_patterns: tuple[Pattern, ...] = ()  # the user's (`progress_patterns`), compiled


@dataclass(frozen=True)
class DataStatus:
    """What the status line and banners show; a snapshot, safe to read on any thread."""

    phase: str = "connecting"  # connecting / waiting (no answer yet) / syncing / live / retrying
    problem: str = ""  # why the connection is down or slow (empty when connected)
    forbidden: tuple[tuple[str, str], ...] = ()  # (informer, message)
    cluster_wide: bool = True
    namespaces: tuple[str, ...] = ()
    metrics_note: str = ""
    metrics_problem: str = ""
    metrics_forbidden: str = ""  # GPU metrics may not be read by this identity: why (else "")
    project: str = ""  # the project asked for (-p), once checked
    project_problem: str = ""  # it does not exist or may not be read (the CLI's message)
    user: str = ""
    context: str = ""
    server: str = ""

    @property
    def connected(self) -> bool:
        return self.phase in ("syncing", "live")

    def forbidden_for(self, prefix: str) -> str:
        """The message of the first forbidden informer whose name starts with `prefix` ("" if none)."""
        return next((m for n, m in self.forbidden if n.startswith(prefix)), "")


class RankProgressView(TypedDict):
    """A rank's training progress as the detail shows it: `ProgressBoard.summary()`'s, and its
    sparkline (the loss history, else the throughput's)."""

    step: int | None
    loss: float | None
    throughput: float | None
    unit: str | None
    rate: float | None
    spark: tuple[float, ...]


# the focused workload's training progress: (its key, {rank label: progress}, ETA s, total steps)
Progress: TypeAlias = "tuple[WorkloadKey | None, Mapping[str, RankProgressView], float | None, int | None]"
# a finished workload whose pods are gone: (its key, its first failure, what happened)
Postmortem: TypeAlias = "tuple[WorkloadKey, RecordedFailure | None, tuple[str, ...]]"


@dataclass(frozen=True)
class DataUpdate:
    diff: ModelDiff
    status: DataStatus
    histories: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # pod -> util history
    last_logs: Mapping[str, float] = field(default_factory=dict)  # pod -> last log line time
    events: tuple[EventRec, ...] | None = None  # the focused workload's events (None: unchanged)
    reset: bool = False  # a new model starts (connected, or reconnected from scratch): forget the old one
    synced: bool = False  # every kind has been listed: the picture is complete
    # the focused workload's diagnostics (both None: unchanged): why it waits or what is wrong, and
    # once it finished with its pods gone, its recorded first failure and what happened
    diagnosis: Diagnosis | None = None
    postmortem: Postmortem | None = None
    progress: Progress | None = None  # from its followed logs (None: unchanged)
    health: Mapping[WorkloadKey, JobHealth] | None = None  # the flagged running jobs (None: unchanged)


def quiet_diff(status_changed: bool) -> ModelDiff:
    """A diff with no view in it (a status, or the focused workload's extras, changed)."""
    return ModelDiff(KeyedDiff(), KeyedDiff(), KeyedDiff(), status_changed=status_changed)
