"""Idle interactive sessions (#15): `sleep infinity` sessions whose GPUs all read under a threshold.

    for s in idle_sessions(model, now, threshold=5.0):    # most idle GPU-hours first
        s.name, s.project, s.user, s.gpus, s.idle_since, s.idle_gpu_hours, s.to_json()

A pure function of what `monitors.model.LiveModel` already holds: the workload views (which are
interactive, their ranks' current GPU readings) and the per-pod GPU utilisation history
(`LiveModel.gpu_history`, (time, %) pairs appended at every metrics refresh). No request of its own.

Which sessions are listed: interactive ones (`WorkloadView.interactive`; unattended training jobs
never are) holding GPUs right now, whose every GPU-holding rank has a current reading (state
``ok``) under the threshold. A session with no current GPU reading at all, or with one of its GPU
ranks unread (no data, stale, unavailable), is not idle but unknown, and is not listed: an idle
GPU is one seen idle, never one not seen. A session idle for a few seconds is listed, with a small
figure.

Idle since: per GPU-holding rank, the first reading of the current run under the threshold in its
history (the first one after its last reading at or above the threshold); when the history holds
no reading at or above the threshold, the rank's start (its pod's creation), else the oldest
reading. The session is idle since the latest of its ranks' (all its GPUs have been idle since
then). The history is only what the model saw (see `LiveModel.set_gpu`: the dashboard's refreshes,
at most `monitors.model.HISTORY` samples per pod; a one-shot read has one sample), so "since the
start" means "nothing seen says otherwise". Idle GPU-hours = GPUs held x idle hours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from monitors.sanitize import clean

if TYPE_CHECKING:
    from monitors.model import LiveModel
    from monitors.model_views import RankView, WorkloadView

__all__ = ["DEFAULT_THRESHOLD", "IdleSession", "format_gpu_hours", "idle_sessions", "idle_sessions_of", "rfc3339",
           "session_idle_since", "session_reads_busy"]

DEFAULT_THRESHOLD = 5.0  # % utilisation under which a GPU counts as idle
PodKey = tuple[str, str]
History = Mapping[PodKey, Iterable[tuple[float, float]]]
_GONE = ("Succeeded", "Failed")


def rfc3339(t: float) -> str:
    """Epoch seconds as RFC 3339 UTC (``2026-01-15T12:00:00Z``), as `monitors.export` writes times."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_gpu_hours(h: float) -> str:
    """GPU-hours for a table: a session idle for seconds still shows a figure (0.001), big ones no
    decimals (1,234)."""
    if h < 0.01:
        return f"{h:.3f}"
    if h < 10:
        return f"{h:.2f}"
    if h < 100:
        return f"{h:.1f}"
    return f"{h:,.0f}"


@dataclass(frozen=True, slots=True)
class IdleSession:
    """An interactive session whose GPUs all read under the threshold now."""

    name: str
    namespace: str
    project: str
    user: str
    gpus: float  # GPUs held (of its running ranks)
    idle_since: float  # epoch seconds
    idle_gpu_hours: float  # gpus x idle hours, at the `now` it was computed for
    kind: str = ""  # with namespace and name, the workload's key (not part of `to_json`)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.kind, self.name)

    def gpu_hours_at(self, now: float) -> float:
        """The idle GPU-hours at another moment (the session still idle)."""
        return self.gpus * max(0.0, now - self.idle_since) / 3600.0

    def to_json(self) -> dict[str, Any]:
        """``{"name", "namespace", "project", "user", "gpus", "idle_since", "idle_gpu_hours"}``:
        cluster text sanitised, idle_since in RFC 3339 UTC."""
        g = round(float(self.gpus), 2)
        return {
            "name": clean(self.name), "namespace": clean(self.namespace), "project": clean(self.project),
            "user": clean(self.user), "gpus": int(g) if g == int(g) else g,
            "idle_since": rfc3339(self.idle_since), "idle_gpu_hours": round(self.idle_gpu_hours, 4),
        }


def _gpu_ranks(w: WorkloadView) -> list[RankView]:
    """The ranks holding GPUs now: placed on a node, with GPUs, not finished."""
    return [r for r in w.ranks if r.gpus > 0 and r.node and r.phase not in _GONE]


def _rank_idle_since(r: RankView, readings: Iterable[tuple[float, float]], threshold: float,
                     fallback: float | None) -> float | None:
    """The start of the rank's current run of readings under `threshold` (see the module)."""
    history = sorted(readings)
    run_start: float | None = None
    busy_seen = False
    for t, util in history:
        if util >= threshold:
            busy_seen, run_start = True, None
        elif run_start is None:
            run_start = t
    if busy_seen:
        return run_start  # None: the last reading was busy (the current one disagrees: a moment ago)
    start = r.created if r.created is not None else fallback
    if start is not None:
        return start if not history else min(start, history[0][0])
    return history[0][0] if history else None


def session_idle_since(w: WorkloadView, history: History, now: float, threshold: float = DEFAULT_THRESHOLD
                       ) -> float | None:
    """Since when all of an interactive session's GPUs read under `threshold`; None when it is not
    idle now or not known to be (a GPU rank without a current ``ok`` reading)."""
    ranks = _gpu_ranks(w)
    if not ranks:
        return None
    for r in ranks:
        if r.gpu_state != "ok" or r.gpu_util is None or r.gpu_util >= threshold:
            return None
    since: list[float] = []
    for r in ranks:
        s = _rank_idle_since(r, history.get((r.namespace, r.pod), ()), threshold, w.created)
        since.append(now if s is None else s)
    return min(max(since), now)


def session_reads_busy(w: WorkloadView, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """Every GPU rank of the session has a current reading and one reads at or over `threshold`
    (False when a reading is missing: then neither idle nor in use is known)."""
    ranks = _gpu_ranks(w)
    return bool(ranks) and all(r.gpu_state == "ok" and r.gpu_util is not None for r in ranks) and any(
        r.gpu_util is not None and r.gpu_util >= threshold for r in ranks)


def idle_sessions_of(workloads: Iterable[WorkloadView], history: History, now: float,
                     threshold: float = DEFAULT_THRESHOLD) -> list[IdleSession]:
    """`idle_sessions` over views and a history (pod -> (time, %) readings) of one's own."""
    out: list[IdleSession] = []
    for w in workloads:
        if not w.interactive:
            continue
        since = session_idle_since(w, history, now, threshold)
        if since is None:
            continue
        held = sum(r.gpus for r in _gpu_ranks(w))
        out.append(IdleSession(
            name=w.name, namespace=w.namespace, project=w.project, user=w.user, gpus=held, idle_since=since,
            idle_gpu_hours=held * (now - since) / 3600.0, kind=w.kind,
        ))
    out.sort(key=lambda s: (-s.idle_gpu_hours, s.idle_since, s.namespace, s.name))
    return out


def idle_sessions(model: LiveModel, now: float, threshold: float = DEFAULT_THRESHOLD) -> list[IdleSession]:
    """The interactive sessions of `model` whose allocated GPUs all read under `threshold` % now,
    most idle GPU-hours first. A session without any GPU reading is unknown, not idle: not listed.
    Reads the model only (views and `gpu_history`); call it on the thread that owns the model."""
    return idle_sessions_of(model.workloads.values(), model.gpu_history, now, threshold)
