"""The focused workload: the one on screen. Its ranks' GPU histories, last-log times and events ride
along with updates; its logs are followed while it is shown, for its training progress (and the
rates that name stragglers); why it waits or what is wrong is judged again when it changes, and,
once it finished with its pods gone, what the flight recorder kept of it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ..logs import LogEngine, LogLine, LogOptions
from ..model_views import ModelDiff
from ..monitor import Monitor
from ..records import EventRec
from .engines import LogEngines
from .updates import Judging, Postmortem, Progress, RankProgressView, WorkloadKey

if TYPE_CHECKING:
    from ..diagnostics.progress import ProgressBoard
    from ..diagnostics.why import Diagnosis
    from ..flight_recorder import FlightRecorder

# a batch's newest lines of each rank are read for training progress, no more: a rank printing
# thousands of lines a second supersedes its older steps within the batch anyway
PROGRESS_LINES = 32


class FocusHost(Protocol):
    """What the focused workload asks of the data loop."""

    monitor: Monitor | None  # the connection's (None between connections)
    synced: bool  # its first picture is complete

    def push_focus(self, refocus: bool = True) -> None:
        """Send an update carrying the focused workload's extras."""


def newest_per_rank(lines: list[LogLine], n: int) -> list[LogLine]:
    """The last `n` lines of each rank in `lines`, in their order."""
    seen: dict[str, int] = {}
    kept: list[LogLine] = []
    for ln in reversed(lines):
        k = seen.get(ln.label, 0)
        if k < n:
            seen[ln.label] = k + 1
            kept.append(ln)
    kept.reverse()
    return kept


REDIAGNOSE = 5.0  # s: a waiting or running workload's diagnosis is made again at least this often


class FocusedWorkload:
    def __init__(self, host: FocusHost, judging: Judging, engines: LogEngines, me: str,
                 logs_read: Callable[[], None]) -> None:
        """`logs_read()`: its ranks' last-log times are known now (hangs are judged again)."""
        self.host = host
        self.judging = judging
        self.engines = engines
        self.me = me  # who the user is (their own sessions are named first in a diagnosis)
        self.logs_read = logs_read
        self.key: WorkloadKey | None = None
        self._engine: LogEngine | None = None  # following its logs for its progress
        self._board: ProgressBoard | None = None
        self._board_key: WorkloadKey | None = None
        self._dirty = False
        self._pushed = 0.0
        self._diagnosed_at: float | None = None  # (by the judging clock) when its diagnosis was last made
        self._lock: asyncio.Lock | None = None  # (made on the data loop)

    # -- its logs, for its progress (on the data loop) -------------------------------------------------
    async def follow(self, key: WorkloadKey | None) -> None:
        """Follow `key`'s logs (the last 100 lines first): each line goes through the progress
        patterns; the board is pushed at most once a second. One change of focus at a time; a
        focus that moved on meanwhile is not followed."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await self._refollow(key)

    def follow_again(self) -> None:
        """A new connection: its logs are followed anew (`follow`)."""
        self._board_key = None

    async def _refollow(self, key: WorkloadKey | None) -> None:
        if key == self._board_key and self._engine is not None:
            return
        await self.stop()
        self._board_key = key
        monitor = self.host.monitor
        if key is None or key != self.key or monitor is None or key not in monitor.model.workloads:
            self._board, self._board_key = None, None
            return
        from ..diagnostics.progress import ProgressBoard

        await monitor.load_full_pods(key)  # the list has its pods as Table rows: no containers, no exits
        if key == self.key and self.host.synced:
            self.host.push_focus()  # judged again on the whole pods (requests, tolerations: why it is pending)
        board = self._board = ProgressBoard(self.judging.progress_patterns)
        first = [True]

        def on_lines(lines: list[LogLine]) -> None:
            if first[0]:  # its ranks' last-log times are known now: judged again at the next refresh
                first[0] = False
                self.logs_read()
            took = False
            if len(lines) > PROGRESS_LINES:
                lines = newest_per_rank(lines, PROGRESS_LINES)
            for ln in lines:
                if ln.kind == "line" and board.feed(ln.label, ln.ts / 1e9 if ln.ts else time.time(), ln.text):
                    took = True
            if took and board is self._board:
                self._dirty = True
                now = time.monotonic()
                if now - self._pushed >= 1.0:
                    self._pushed = now
                    self.host.push_focus(refocus=False)

        engine = LogEngine(monitor.client, key, monitor.model, monitor=monitor,
                           options=LogOptions(follow=True, tail=100, failure_notices=False))
        engine.subscribe(on_lines)
        self._engine = engine
        self.engines.open.setdefault(key, engine)
        with contextlib.suppress(Exception):  # (no logs to read yet, or none readable: no progress, nothing else lost)
            await engine.start()

    async def stop(self) -> None:
        """Stop following (a new focus, or the connection ends)."""
        old, self._engine = self._engine, None
        if old is not None:
            if self.engines.open.get(old.key) is old:
                del self.engines.open[old.key]
            with contextlib.suppress(Exception):
                await old.stop()

    def rates_of(self, key: WorkloadKey) -> dict[str, float] | None:
        """Its ranks' steps per second (health names stragglers by rate); None for another workload."""
        board = self._board
        if board is None or key != self._board_key:
            return None
        rates = {label: rp.rate() for label, rp in board.ranks.items()}
        return {label: r for label, r in rates.items() if r is not None} or None

    # -- what rides along with an update (on the data loop) --------------------------------------------
    def progress(self, refocus: bool) -> Progress | None:
        """Its training progress when it changed (or `refocus`: always), else None."""
        board, key = self._board, self._board_key
        if board is None or key is None or key != self.key:
            return (self.key, {}, None, None) if refocus else None
        if not (self._dirty or refocus):
            return None
        self._dirty = False
        ranks = {label: RankProgressView(step=r.step, loss=r.loss, throughput=r.throughput, unit=r.unit,
                                         rate=r.rate(), spark=tuple(r.sparkline_values()))
                 for label, r in board.ranks.items()}
        return key, ranks, board.eta(time.time()), board.total()

    def extras(self, d: ModelDiff, refocus: bool
               ) -> tuple[dict[str, tuple[float, ...]], dict[str, float], tuple[EventRec, ...] | None]:
        """Its ranks' GPU histories and last-log times, and its events when they changed."""
        monitor, key = self.host.monitor, self.key
        if monitor is None or key is None:
            return {}, {}, None
        model = monitor.model
        wl = model.workloads.get(key)
        if wl is None:
            return {}, {}, (() if refocus else None)
        hist = {r.pod: tuple(v for _, v in model.gpu_history.get((r.namespace, r.pod), ())) for r in wl.ranks}
        logs = {r.pod: model.last_log[(r.namespace, r.pod)] for r in wl.ranks
                if (r.namespace, r.pod) in model.last_log}
        events = None
        names = {wl.name} | {r.pod for r in wl.ranks}
        if refocus or key in d.workloads.added or any(
                ns == wl.namespace and name in names for ns, name in d.events_changed):
            events = tuple(model.events_for(wl, 50))
        return hist, logs, events

    def diagnostics(self, d: ModelDiff, refocus: bool, events_changed: bool, recorder: FlightRecorder | None
                    ) -> tuple[Diagnosis | None, Postmortem | None]:
        """Why it waits or what is wrong with it, again when it or its events changed or its last
        one is `REDIAGNOSE` seconds old (what holds its GPUs, their idle time and ages move on while
        it waits unchanged); and, once it finished with its pods gone, its recorded first failure
        and what happened (a small file read: on the data loop, never the UI's)."""
        monitor, key = self.host.monitor, self.key
        if monitor is None or key is None:
            return None, None
        wl = monitor.model.workloads.get(key)
        j = self.judging
        stale = self._diagnosed_at is None or j.clock() - self._diagnosed_at >= REDIAGNOSE
        if wl is None or not (refocus or events_changed or key in d.workloads.added or key in d.workloads.changed
                              or (stale and wl.status in ("Pending", "Running"))):
            return None, None
        from ..diagnostics.postmortem import first_failure_of, what_happened
        from ..diagnostics.why import explain

        self._diagnosed_at = j.clock()
        try:
            diagnosis: Diagnosis | None = explain(
                monitor.model, key, cluster_pods=monitor.status.cluster_wide, now=j.clock(), command=j.paste_command,
                me=self.me, idle_threshold=j.idle_threshold)
        except KeyError:
            diagnosis = None
        post: Postmortem = (key, None, ())
        if wl.status in ("Failed", "Succeeded") and all(r.deleting for r in wl.ranks):  # (gone, or going)
            recording = None
            if recorder is not None:
                with contextlib.suppress(OSError):  # (not the user's own directory: no recording)
                    recording = recorder.store.load(wl.namespace, wl.kind, wl.name, wl.uid)
            story = what_happened(wl, monitor.model.events_for(wl, 10_000), recording, now=j.clock())
            post = (key, first_failure_of(wl, recording), tuple(story))
        return diagnosis, post
