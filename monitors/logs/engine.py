"""The log engine: every container of every rank of a workload, merged into one bounded stream.

    engine = LogEngine(client, workload_key, monitor.model, monitor=monitor,
                       options=LogOptions(follow=True, tail=100))
    engine.subscribe(lambda lines: ...)   # batches of new merged lines, in time order
    await engine.start()
    ...  engine.buffer[i], len(engine.buffer), engine.buffer.total, engine.view(filter)
    await engine.wait()                   # until done (history read; or, following: every stream ended
                                          # and the workload finished)
    await engine.stop()

How it works:

1. History: every container present at start is read without `follow` (with since / tail /
   previous) and merged *exactly* by timestamp (`merge.Merger`, exact mode, with backpressure).
   With `tail`, only the newest `tail` merged lines are kept.
2. Following: each container is followed from its last timestamp (`stream.LogStream`: a follow
   that drops, stalls or falls behind a rotated log file is reopened from there, duplicates
   skipped; a pod attached later is read from its first line); lines
   are merged by a watermark across the open streams: a line goes out once every other open
   stream has shown a newer line, or has been quiet for `grace` while the line waited (at most
   `window`; `merge.Merger`). Pods that appear later (restarts, late workers,
   elastic scaling) are attached from the monitor's diffs; streams of finished pods are read to
   their end. At most `max_streams` streams are open; past that the rest wait for a free slot
   and a notice says so.
3. Storage: `buffer` (a `LineBuffer`, global cap, "N older lines dropped" marker) and `rings`
   (the newest lines of each rank).

No threads: everything runs on the caller's event loop. Nothing here imports a UI library.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..connection import ConnectionProblem, ExitCode
from ..kube import ApiProblem
from ..workloads import ROLE_ORDER
from .buffer import FilteredView, LineBuffer, RankRings
from .filters import LineFilter
from .lines import LogLine, Origin
from .merge import Merger
from .options import LogOptions as LogOptions
from .stream import LogStream, stream_summary

if TYPE_CHECKING:
    from ..kube import KubeClient
    from ..model import LiveModel
    from ..model_views import ModelDiff, RankView, WorkloadView
    from ..monitor import Monitor
    from ..records import PodRec
    from .first_failure import FailureReport

TERMINAL_STATUS = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class ReadFailure:
    """A rank's log that could not be read: who, why, and the documented exit code it means."""

    label: str
    container: str
    message: str
    code: ExitCode

    def one_line(self) -> str:
        return f"{self.label}/{self.container}: {self.message}"


def failure_summary(failures: list[ReadFailure]) -> tuple[str, ExitCode]:
    """One line and one exit code for every rank whose log could not be read (401 > 403 > the rest)."""
    order = (ExitCode.UNAUTHORIZED, ExitCode.FORBIDDEN, ExitCode.TLS, ExitCode.UNREACHABLE, ExitCode.ERROR)
    worst = min(failures, key=lambda f: order.index(f.code) if f.code in order else len(order))
    labels = list(dict.fromkeys(f.label for f in failures))
    if len(labels) == 1:
        return f"cannot read the log of {worst.one_line()}", worst.code
    shown = ", ".join(labels[:6]) + (f" and {len(labels) - 6} more" if len(labels) > 6 else "")
    return f"cannot read the logs of {len(labels)} ranks ({shown}): {worst.message}", worst.code


class LogEngine:
    def __init__(
        self,
        client: KubeClient,
        key: tuple[str, str, str],
        model: LiveModel,
        *,
        monitor: Monitor | None = None,
        options: LogOptions | None = None,
    ) -> None:
        self.client = client
        self.key = key
        self.model = model
        self.monitor = monitor
        self.options = options or LogOptions()
        self.filter = self.options.filter or LineFilter()
        self.buffer = LineBuffer(self.options.cap)
        self.rings = RankRings(self.options.rank_cap)
        self.merger = Merger(self._released, window=self.options.window, grace=self.options.grace,
                             collapse=self.options.collapse, exact=True, high=self.options.high_water)
        self.streams: dict[tuple[str, str, str, str], LogStream] = {}
        self.queued: list[LogStream] = []
        self.notices: list[str] = []
        self.history_done = asyncio.Event()
        self.done = asyncio.Event()
        self.stopping = False
        self.connected = True
        self.failed_streams = 0
        self.failures: list[ReadFailure] = []
        self.fatal = asyncio.Event()  # following cannot go on: forbidden, or credentials rejected too long
        self.fatal_failure: ReadFailure | None = None
        self._unauthorized_since: float | None = None
        self._said: dict[tuple[str, str, str, str], str] = {}
        self.workload_gone = False
        self._subscribers: list[Callable[[list[LogLine]], None]] = []
        self._notice_subscribers: list[Callable[[str], None]] = []
        self._tail_hold: list[LogLine] | None = None
        self._history_task: asyncio.Task[None] | None = None
        self._capped_noted = 0
        self._started = False
        self.started_at = time.time()

    # -- public API ----------------------------------------------------------------------------
    @property
    def workload(self) -> WorkloadView | None:
        return self.model.workloads.get(self.key)

    def subscribe(self, fn: Callable[[list[LogLine]], None]) -> Callable[[], None]:
        """`fn(lines)` for every batch of new merged lines; returns an unsubscribe function."""
        self._subscribers.append(fn)
        return lambda: self._subscribers.remove(fn) if fn in self._subscribers else None

    def on_notice(self, fn: Callable[[str], None]) -> None:
        """`fn(message)` for every notice (capped streams, lost/regained API server, read errors)."""
        self._notice_subscribers.append(fn)

    def view(self, flt: LineFilter | Callable[[LogLine], bool] | None = None) -> FilteredView:
        pred = flt.matches if isinstance(flt, LineFilter) else (flt or self.filter.matches)
        return FilteredView(self.buffer, pred)

    def set_collapse(self, on: bool) -> None:
        """Collapse identical lines of several ranks (applies to lines released from now on)."""
        self.merger.set_collapse(on)

    def last_lines(self, label: str, n: int = 20) -> list[LogLine]:
        return self.rings.last(label, n)

    def stream_states(self) -> list[dict[str, Any]]:
        return [stream_summary(s) for s in [*self.streams.values(), *self.queued]]

    @property
    def active_streams(self) -> int:
        return sum(1 for s in self.streams.values() if s.state != "done")

    async def first_failure(self, lines: int = 20) -> FailureReport | None:
        """The rank that failed first, with the last `lines` lines of the failed instance."""
        from .first_failure import first_failure_report

        wl = self.workload
        return None if wl is None else await first_failure_report(self.client, wl, lines=lines)

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.started_at = time.time()
        wl = self.workload
        if wl is None:
            raise LookupError(f"workload {self.key[2]} not found")
        if self.options.tail is not None:
            self._tail_hold = []
        if self.monitor is not None and self.options.follow:
            self.monitor.subscribe(self._on_diff)
        initial = self._sync(wl, history=True)
        for s in initial:
            s.start()
        self._history_task = asyncio.get_running_loop().create_task(self._history(initial))

    async def _history(self, streams: list[LogStream]) -> None:
        if streams:
            await asyncio.gather(*(s.history_read.wait() for s in streams))
        self.merger.flush()
        hold, self._tail_hold = self._tail_hold, None
        if hold:
            n = self.options.tail or 0
            self._store(hold[-n:] if n else [])
        self.merger.set_watermark_mode()
        self.history_done.set()
        if not self.options.follow or self.options.previous:
            self.done.set()
        else:
            wl = self.workload
            if wl is not None:
                self._sync(wl, history=False)
            self._check_done()

    async def wait(self) -> None:
        await self.done.wait()

    async def stop(self) -> None:
        if not self.stopping and self.history_done.is_set():
            self.merger.flush()  # lines held for slower streams were read: deliver them
        self.stopping = True
        self.merger.close()
        tasks = [s.task for s in self.streams.values() if s.task is not None]
        if self._history_task is not None:
            tasks.append(self._history_task)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self.done.set()

    # -- streams -------------------------------------------------------------------------------
    def _sync(self, wl: WorkloadView, *, history: bool) -> list[LogStream]:
        """Attach streams for every wanted container of the workload's ranks not yet followed."""
        new: list[LogStream] = []
        ranks = sorted(wl.ranks, key=_rank_order)
        for r in ranks:
            if not (self.filter.wants_rank(r) or self.filter.wants_tagged_lines(r)):
                continue
            rec = self.model.pods.get((r.namespace, r.pod))
            if rec is None or not rec.node:
                continue  # not scheduled yet: nothing to read
            for c in rec.containers:
                if self.options.containers and c not in self.options.containers:
                    continue
                key = (r.namespace, r.pod, c, rec.uid)
                if key in self.streams or any(q.key == key for q in self.queued):
                    continue
                origin = Origin(r.label, r.rank, r.role, r.replica_index, r.namespace, r.pod, c, None)
                if self.active_streams >= self.options.max_streams:
                    # over the limit: wait for a slot (following), or left out (history only)
                    s = LogStream(self, origin, rec.uid, history=False, initial=history)
                    s.state = "queued"
                    self.queued.append(s)
                    continue
                s = LogStream(self, origin, rec.uid, history=history)
                s.rec = rec
                self.streams[key] = s
                new.append(s)
                if not history and self._started and self.history_done.is_set():
                    s.start()
        self._note_capped()
        return new

    def _note_capped(self) -> None:
        n = len(self.queued)
        if n and n != self._capped_noted:
            self._capped_noted = n
            total = n + self.active_streams
            names = ", ".join(f"{q.origin.label}/{q.origin.container}" for q in self.queued[:5])
            more = f" and {n - 5} more" if n > 5 else ""
            how = "they start as slots free up" if self.options.follow else "not shown"
            self.notice(f"following {self.active_streams} of {total} log streams (the limit is "
                        f"{self.options.max_streams}; {how}): waiting: {names}{more}; "
                        "narrow with --rank/--role or raise --max-streams")

    def stream_done(self, s: LogStream) -> None:
        """A stream ended (called by the stream): it holds no line back; a queued one may start in its slot."""
        if s.source is not None:
            self.merger.finish(s.source)
        if self.stopping:
            return
        if self.history_done.is_set() and self.options.follow:
            while self.queued and self.active_streams < self.options.max_streams:
                q = self.queued.pop(0)
                rec = self.model.pods.get((q.origin.namespace, q.origin.pod))
                if rec is None or rec.uid != q.uid:
                    continue
                q.state = "waiting"
                self.streams[q.key] = q
                q.start()
            self._capped_noted = len(self.queued)
        self._check_done()

    def _check_done(self) -> None:
        if not self.history_done.is_set() or self.done.is_set() or not self.options.follow:
            return
        if self.active_streams or self.queued:
            return
        wl = self.workload
        if wl is None or wl.status in TERMINAL_STATUS:
            self.merger.flush()  # every stream has ended: nothing is left to wait for
            self.done.set()

    def pod_record(self, s: LogStream) -> PodRec | None:
        return self.model.pods.get((s.origin.namespace, s.origin.pod))

    def _on_diff(self, d: ModelDiff) -> None:
        if self.stopping:
            return
        for s in self.streams.values():
            rec = self.model.pods.get((s.origin.namespace, s.origin.pod))
            if rec is not s.rec:
                s.rec = rec
                s.changed.set()
        if self.key in d.workloads.removed:
            self.workload_gone = True
        wl = self.workload
        if wl is not None and self.history_done.is_set():
            self._sync(wl, history=False)
        self._check_done()

    # -- lines ---------------------------------------------------------------------------------
    def _released(self, lines: list[LogLine]) -> None:
        hold = self._tail_hold
        if hold is not None:
            hold.extend(lines)
            n = self.options.tail or 0
            if len(hold) > 2 * n + 1024:
                del hold[: len(hold) - n]
            return
        self._store(lines)

    def _store(self, lines: list[LogLine]) -> None:
        if not lines:
            return
        self.buffer.extend(lines)
        add = self.rings.add
        for line in lines:
            add(line)
        for fn in list(self._subscribers):
            try:
                fn(lines)
            except Exception as exc:  # a view's bug must not stop the streams
                self._subscribers.remove(fn)
                self.notice(f"a log subscriber failed and was removed: {type(exc).__name__}: {exc}")

    def note_log(self, s: LogStream, ts: int) -> None:
        """The stream's newest line is at `ts` (ns): the model's last-log time of its pod."""
        self.model.note_log(s.origin.namespace, s.origin.pod, ts / 1e9)

    # -- connection state ------------------------------------------------------------------------
    def notice(self, message: str) -> None:
        self.notices.append(message)
        for fn in list(self._notice_subscribers):
            fn(message)

    def notice_once(self, s: LogStream, message: str) -> None:
        """A stream's trouble, said again only when it changes (a retried 500 is one notice)."""
        if self._said.get(s.key) != message:
            self._said[s.key] = message
            self.notice(f"{s.origin.label}/{s.origin.container}: {message}")

    def failed(self, s: LogStream, problem: ApiProblem | ConnectionProblem | None, message: str = "", *,
               text: str | None = None) -> None:
        """The stream's log cannot be read (history: after retrying transient errors; following:
        forbidden, or a finished rank's log unreadable for `give_up_after`). Recorded with its exit
        code (`text`: what to say instead of the problem's own line); following, a forbidden log
        ends the follow."""
        if isinstance(problem, ApiProblem):
            said, code = problem.one_line(), problem.exit_code
            if code == ExitCode.NOT_FOUND:
                code = ExitCode.ERROR
        elif isinstance(problem, ConnectionProblem):
            said, code = problem.message, problem.code
        else:
            said, code = message or "unknown error", ExitCode.ERROR
        f = ReadFailure(s.origin.label, s.origin.container, text or said, code)
        self.failures.append(f)
        self.failed_streams += 1
        if self.options.failure_notices:
            self.notice(f.one_line())
        if self.options.follow and code in (ExitCode.FORBIDDEN, ExitCode.UNAUTHORIZED):
            self._fatal(f)

    def unauthorized(self, s: LogStream, exc: ApiProblem) -> None:
        """Following and the server rejects the credentials: said once; if it lasts `give_up_after`
        seconds the follow ends (exit 6 in the CLI); the dashboard keeps what it has."""
        if self._unauthorized_since is not None:
            return
        self._unauthorized_since = time.monotonic()
        self.notice(exc.one_line())
        since = self._unauthorized_since

        def check() -> None:
            if self._unauthorized_since == since and not self.stopping:
                self._fatal(ReadFailure(s.origin.label, s.origin.container, exc.one_line(), ExitCode.UNAUTHORIZED))

        asyncio.get_running_loop().call_later(self.options.give_up_after, check)

    def _fatal(self, f: ReadFailure) -> None:
        if self.fatal_failure is None:
            self.fatal_failure = f
            self.fatal.set()

    def server_lost(self, message: str) -> None:
        """A stream could not reach the API server (said once until it answers again)."""
        if self.connected:
            self.connected = False
            self.notice(f"{message}; retrying")

    def server_answered(self, s: LogStream | None = None) -> None:
        """The API server answered a stream (`s` opened: its own troubles are forgotten)."""
        if not self.connected:
            self.connected = True
            self.notice("connected to the API server again")
        if s is not None:
            self._said.pop(s.key, None)
            if self._unauthorized_since is not None:
                self._unauthorized_since = None
                self.notice("the server accepts the credentials again")


def _rank_order(r: RankView) -> tuple[int, int, int, str]:
    return (0 if r.lead else 1, ROLE_ORDER.get(r.role, 9),
            r.replica_index if r.replica_index is not None else -1, r.pod)
