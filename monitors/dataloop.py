"""The data side of the dashboard: the monitor, GPU metrics and log engines on one asyncio loop in
a background thread, so parsing a 20,000-pod LIST or a burst of events never stalls the UI.

    loop = DataLoop(cfg, DataOptions(...), on_update=..., on_problem=...)
    loop.start()                        # returns at once; connects, lists, watches, retries
    loop.focus(key)                     # the workload whose GPU histories ride along with updates
    fut = loop.run_coroutine(coro_fn(...))  # run a coroutine on the data loop (concurrent Future)
    logs = loop.open_logs(key, LogOptions(follow=True, tail=2000), on_lines, on_notice)
    logs.close()
    loop.stop()

Callbacks run on the data thread: a UI must hand them over to its own loop (Textual's
`post_message` is thread-safe). What they carry is immutable (views, snapshots, tuples), so the
UI never reads structures the data thread is changing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .connection import DEFAULT_REQUEST_TIMEOUT, ClusterConfig, ConnectionProblem, ExitCode
from .flight_recorder import FlightRecorder
from .kube import ApiProblem
from .logs import LogEngine, LogLine, LogOptions
from .model_views import ModelDiff
from .monitor import Monitor

T = TypeVar("T")
WorkloadKey = tuple[str, str, str]
FATAL = (ExitCode.NO_CONFIG, ExitCode.TLS)
ASSESS_EVERY = 15.0  # s: hangs and stragglers judged at most this often


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


@dataclass(frozen=True)
class DataUpdate:
    diff: ModelDiff
    status: DataStatus
    histories: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # pod -> util history
    last_logs: Mapping[str, float] = field(default_factory=dict)  # pod -> last log line time
    events: tuple[Any, ...] | None = None  # the focused workload's events (None: unchanged)
    reset: bool = False  # a new model starts (connected, or reconnected from scratch): forget the old one
    synced: bool = False  # every kind has been listed: the picture is complete
    # the focused workload's diagnostics (None: unchanged): `diagnostics.why.Diagnosis`, and for a
    # finished one whose pods are gone (first failure from the flight recorder, what happened)
    diagnosis: Any = None
    postmortem: tuple[Any, Any, tuple[str, ...]] | None = None  # (workload key, first failure, story)
    # training progress of the focused workload from its followed logs (None: unchanged):
    # (key, {label: RankProgress summary + "spark": loss values}, ETA seconds or None, total steps)
    progress: tuple[Any, Mapping[str, Any], float | None, int | None] | None = None
    health: Mapping[Any, Any] | None = None  # workload key -> diagnostics.hangs.JobHealth (None: unchanged)


class LogHandle:
    """A log engine running on the data loop; `close()` stops it (from any thread)."""

    def __init__(self, loop: DataLoop, engine: LogEngine) -> None:
        self._loop = loop
        self.engine = engine
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._loop.run_coroutine(self._stop())

    async def _stop(self) -> None:
        await self.engine.stop()
        key = self.engine.key
        if self._loop._engines.get(key) is self.engine:
            del self._loop._engines[key]


# a batch's newest lines of each rank are read for training progress, no more: a rank printing
# thousands of lines a second supersedes its older steps within the batch anyway
PROGRESS_LINES = 32


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


class DataLoop:
    def __init__(
        self,
        cfg: ClusterConfig,
        options: DataOptions | None = None,
        *,
        on_update: Callable[[DataUpdate], None],
        on_problem: Callable[[str, int], None] | None = None,
        monitor_factory: Callable[[], Monitor] | None = None,
    ) -> None:
        self.cfg = cfg
        self.options = options or DataOptions()
        self.on_update = on_update
        self.on_problem = on_problem or (lambda message, code: None)
        self._monitor_factory = monitor_factory
        self.monitor: Monitor | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._focus: WorkloadKey | None = None
        self._status = DataStatus(user=cfg.impersonate_user or cfg.user, context=cfg.context, server=cfg.server)
        self._synced = False
        self._project_checked = not self.options.project
        self.updates = 0
        self._engines: dict[WorkloadKey, LogEngine] = {}  # open log views: their last lines, for the recorder
        # the focused workload's logs, followed for its training progress (and its ranks' last lines)
        self._progress_engine: LogEngine | None = None
        self._board: Any = None  # diagnostics.progress.ProgressBoard of the focused workload
        self._board_key: WorkloadKey | None = None
        self._board_dirty = False
        self._board_pushed = 0.0
        self._follow_lock: asyncio.Lock | None = None  # (made on the data loop)
        self.progress_patterns: tuple[Any, ...] = ()  # the user's (settings), compiled
        self.health: dict[WorkloadKey, Any] = {}
        self._health_sign: dict[WorkloadKey, Any] = {}
        self._timeless: dict[WorkloadKey, Any] = {}  # verdicts time cannot change (diagnostics.hangs)
        self._assessed_at = -1e9  # (monotonic) when hangs and stragglers were last judged
        self.thresholds: Any = None  # diagnostics.hangs.Thresholds (None: the defaults)
        self.clock: Callable[[], float] = time.time  # what "ago" is measured from (the app's clock)
        self.paste_command = "ranks"  # how ranks runs on the user's machine, in lines offered to paste
        self.idle_threshold = 5.0  # % under which a session's GPUs are idle (settings)
        self.recorder: FlightRecorder | None = None

    # -- lifecycle (any thread) --------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ranks-data", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self, timeout: float = 5.0) -> None:
        loop, stop = self.loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def run_coroutine(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the data loop."""
        if self.loop is None or self.loop.is_closed():
            coro.close()
            fut: concurrent.futures.Future[T] = concurrent.futures.Future()
            fut.set_exception(ConnectionProblem("the data loop is not running", ExitCode.ERROR))
            return fut
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run `fn()` on the data thread (to read the model consistently)."""
        async def run() -> T:
            return fn()
        return self.run_coroutine(run())

    def focus(self, key: WorkloadKey | None) -> None:
        """The workload on screen: its ranks' GPU histories and last-log times ride along, and its
        logs are followed for its training progress while it is shown."""
        self._focus = key
        if self.loop is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self._follow_progress(key)))  # type: ignore[union-attr]
                if self._synced:
                    self.loop.call_soon_threadsafe(self._push_focus)

    def show_node(self, node: str) -> None:
        """The pods of `node` are on screen: read them whole (the list has them as Table rows)."""
        monitor = self.monitor
        if self.loop is not None and monitor is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(lambda: self.loop.create_task(monitor.load_node_pods(node)))  # type: ignore[union-attr]

    async def _follow_progress(self, key: WorkloadKey | None) -> None:
        """Follow the focused workload's logs (the last 100 lines first): each line goes through the
        progress patterns; the board is pushed at most once a second. One change of focus at a
        time; a focus that moved on meanwhile is not followed."""
        if self._follow_lock is None:
            self._follow_lock = asyncio.Lock()
        async with self._follow_lock:
            await self._refollow(key)

    async def _refollow(self, key: WorkloadKey | None) -> None:
        if key == self._board_key and self._progress_engine is not None:
            return
        old, self._progress_engine = self._progress_engine, None
        if old is not None:
            if self._engines.get(old.key) is old:
                del self._engines[old.key]
            await old.stop()
        self._board_key = key
        monitor = self.monitor
        if key is None or key != self._focus or monitor is None or key not in monitor.model.workloads:
            self._board, self._board_key = None, None
            return
        from .diagnostics.progress import ProgressBoard

        await monitor.load_full_pods(key)  # the list has its pods as Table rows: no containers, no exits
        if key == self._focus and self._synced:
            self._push_focus()  # judged again on the whole pods (requests, tolerations: why it is pending)
        board = self._board = ProgressBoard(self.progress_patterns)
        first = [True]

        def on_lines(lines: list[LogLine]) -> None:
            if first[0]:  # its ranks' last-log times are known now: judged again at the next refresh
                first[0] = False
                self._assessed_at = -1e9
            took = False
            if len(lines) > PROGRESS_LINES:
                lines = newest_per_rank(lines, PROGRESS_LINES)
            for ln in lines:
                if ln.kind == "line" and board.feed(ln.label, ln.ts / 1e9 if ln.ts else time.time(), ln.text):
                    took = True
            if took and board is self._board:
                self._board_dirty = True
                now = time.monotonic()
                if now - self._board_pushed >= 1.0:
                    self._board_pushed = now
                    self._push_focus(refocus=False)

        engine = LogEngine(monitor.client, key, monitor.model, monitor=monitor,
                           options=LogOptions(follow=True, tail=100, failure_notices=False))
        engine.subscribe(on_lines)
        self._progress_engine = engine
        self._engines.setdefault(key, engine)
        try:
            await engine.start()
        except Exception:  # (no logs to read yet, or none readable: no progress, nothing else lost)
            return

    @property
    def status(self) -> DataStatus:
        return self._status

    # -- the thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        try:
            loop.run_until_complete(self._main())
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self._ready.set()
        delay = self.options.backoff[0]
        while not self._stop.is_set():
            monitor = self._monitor_factory() if self._monitor_factory else Monitor(
                self.cfg, namespaces=self.options.namespaces, scope=self.options.scope,
                coalesce=self.options.coalesce, backoff=self.options.backoff, pod_rows=True)
            try:
                await self._until_stopped(self._serve(monitor))
                await monitor.stop()  # again if it ended normally: a no-op
                return
            except (ConnectionProblem, ApiProblem, OSError, TimeoutError) as exc:
                message, code = _problem(exc)
                await monitor.stop()
                if code in FATAL or (code == ExitCode.UNAUTHORIZED and not self._synced):
                    self.on_problem(message, int(code))
                    return
                if not self._synced and isinstance(exc, ConnectionProblem) and exc.timed_out:
                    # took the connection, never answered: still waiting, not "connection lost"
                    self._set_status(phase="waiting", problem=f"{message}; asking again")
                else:
                    self._set_status(phase="retrying", problem=message)
                self._emit(ModelDiff(*_empty_diffs(), status_changed=True))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, self.options.backoff[1])

    async def _until_stopped(self, coro: Coroutine[Any, Any, None]) -> None:
        """`coro`, cancelled when the loop is stopped (quitting while a request hangs is at once)."""
        assert self._stop is not None
        task = asyncio.ensure_future(coro)
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if not task.cancelled():
            task.result()

    async def _serve(self, monitor: Monitor) -> None:
        """One monitor's life. The UI sees the model as it fills (a reset first, then the diffs of
        each LIST page as it is applied, then `synced`): a big cluster's rows appear page by page."""
        assert self._stop is not None
        self.monitor = monitor
        if self._status.phase != "waiting":
            self._set_status(phase="connecting" if not self._synced else "retrying")
        silence = asyncio.create_task(self._watch_silence(monitor))
        project = asyncio.create_task(self._check_project(monitor))
        try:
            await monitor.start()
        except BaseException:
            silence.cancel()
            project.cancel()
            raise
        self._set_status(phase="syncing", problem="", cluster_wide=monitor.status.cluster_wide,
                         namespaces=monitor.status.namespaces)
        self._emit(ModelDiff(*_empty_diffs(), status_changed=True), reset=True)
        live = False

        recorder = self._recorder(monitor)

        def on_diff(d: ModelDiff) -> None:
            self._refresh_status(monitor, live)
            self._emit(d)

        monitor.subscribe(on_diff)
        metrics: asyncio.Task[None] | None = None
        rest: asyncio.Task[None] | None = None
        try:
            # A first sync that is slow (a huge cluster) still ends: informers retry inside.
            await monitor.wait_synced()
            silence.cancel()
            if recorder is not None:
                recorder.prime(monitor.model)
                recorder.watch(monitor.model)
            live = self._synced = True
            if self._focus is not None:
                self._board_key = None  # (a new monitor: follow again)
                asyncio.get_running_loop().create_task(self._follow_progress(self._focus))
            self._refresh_status(monitor, live)
            self._emit(ModelDiff(*_empty_diffs(), status_changed=True), synced=True)
            if self.options.metrics:
                metrics = asyncio.create_task(self._metrics(monitor))
            rest = asyncio.create_task(monitor.explain_rest())  # why the other pending jobs wait
            await self._stop.wait()
        finally:
            for task in (silence, project, *([rest] if rest is not None else [])):
                task.cancel()
            if metrics is not None:
                metrics.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await metrics
            if recorder is not None:
                await recorder.drain(2.0)  # (a failure seen just before the end is kept)
            engine, self._progress_engine, self._board_key = self._progress_engine, None, None
            if engine is not None:
                with contextlib.suppress(Exception):
                    await engine.stop()
            await monitor.stop()

    def _recorder(self, monitor: Monitor) -> FlightRecorder | None:
        if not self.options.record_failures:
            return None
        from .flight_store import store_for

        def tail_of(key: WorkloadKey, label: str) -> list[str] | None:
            engine = self._engines.get(key)
            if engine is None or engine.stopping:
                return None
            return [ln.text for ln in engine.last_lines(label, 50)]

        self.recorder = FlightRecorder(store_for(self.cfg), monitor.client, tail_of)
        return self.recorder

    async def _watch_silence(self, monitor: Monitor) -> None:
        """Until the first LIST is in: a server that took the request and does not answer is
        said to be awaited ("waiting for the server"), not shown as an empty table "connecting"."""
        shown = -1
        while True:
            await asyncio.sleep(0.2)
            silent = monitor.client.silent_for()
            if silent >= self.options.waiting_after:
                secs = int(silent)
                if self._status.phase != "waiting" or secs != shown:
                    shown = secs
                    limit = monitor.client.timeout
                    after = f" (gives up after {limit:g} s and asks again)" if limit else ""
                    self._set_status(phase="waiting",
                                     problem=f"no answer from {self.cfg.server} for {secs} s{after}")
                    self._emit(ModelDiff(*_empty_diffs(), status_changed=True))
            elif self._status.phase == "waiting" and shown >= 0:
                shown = -1
                self._set_status(phase="connecting" if not monitor.informers else "syncing", problem="")
                self._emit(ModelDiff(*_empty_diffs(), status_changed=True))

    async def _check_project(self, monitor: Monitor) -> None:
        """The project the dashboard opens on exists and may be read; if not, the status says
        what the CLI would (`project "x" not found`, forbidden) for the screen to show."""
        if self._project_checked or not self.options.project:
            return
        from .names import LookupProblem, resolve_project

        project = self.options.project
        try:
            await resolve_project(monitor.client, project, user=self.cfg.impersonate_user or self.cfg.user)
        except LookupProblem as exc:
            self._project_checked = True
            self._set_status(project=project, project_problem=exc.message)
            self._emit(ModelDiff(*_empty_diffs(), status_changed=True))
            return
        except (ApiProblem, ConnectionProblem):
            return  # asked again with the next connection
        self._project_checked = True
        self._set_status(project=project, project_problem="")

    async def _metrics(self, monitor: Monitor) -> None:
        from .gpu_feed import apply_snapshot, make_metrics

        gm = make_metrics(self.cfg, self.options.prometheus_url, interval=self.options.refresh_interval,
                          timeout=self.cfg.request_timeout or DEFAULT_REQUEST_TIMEOUT)  # a slow link is no failure
        if self.options.metric_names:
            from . import promql

            gm.names = promql.metric_names(self.options.metric_names)
        assert self._stop is not None
        listed_from: object = None  # the workloads the shown pods were last read from
        pods: list[tuple[str, str]] = []
        try:
            while not self._stop.is_set():
                model = monitor.model
                same = model.workloads is listed_from  # the model replaces it when a workload changes
                if not same:
                    listed_from = model.workloads
                    pods = [(r.namespace, r.pod) for w in model.workloads.values() for r in w.ranks
                            if r.gpus > 0 and r.node and r.phase == "Running"]
                # no source yet and the same pods shown: the last answer stands, nothing to ask
                skip = same and gm.nothing_to_ask()
                if not skip:
                    gm.set_shown(pods, namespaces={ns for ns, _ in pods}, all_nodes=True)
                try:
                    snap = None if skip else await gm.refresh()
                except Exception as exc:  # a metrics bug must not take the dashboard down
                    monitor.metrics_problem = f"{type(exc).__name__}: {exc}"
                    snap = None
                if snap is not None:
                    apply_snapshot(model, snap)
                    monitor.metrics_note = snap.source.description if snap.source else ""
                    monitor.metrics_problem = snap.reason if snap.state.value == "unavailable" else ""
                    monitor.metrics_forbidden = snap.source.forbidden if snap.source else ""
                model.status_changed = model.status_changed or (
                    (monitor.metrics_note, monitor.metrics_problem, monitor.metrics_forbidden)
                    != (self._status.metrics_note, self._status.metrics_problem, self._status.metrics_forbidden))
                if not skip and not monitor.flush() and self._focus is not None:
                    self._push_focus(refocus=False)  # the focused ranks' GPU history grew
                health = self._assess(model) if self._assess_due() else None
                if health is not None:
                    self._emit(ModelDiff(*_empty_diffs(), status_changed=False), health=health)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), gm.interval)
        finally:
            await gm.aclose()

    def _assess_due(self) -> bool:
        """Whether hangs and stragglers are judged after this refresh: at most every 15 s (a
        quarter of the shortest threshold when that is less). Judging every running job costs
        ~30 ms per 1,000 jobs; after every refresh that was most of an idle dashboard's CPU, for
        verdicts that count in minutes."""
        from .diagnostics.hangs import DEFAULT

        t = self.thresholds or DEFAULT
        now = time.monotonic()
        if now - self._assessed_at < min(ASSESS_EVERY, t.hang_after / 4, t.silent_after / 4):
            return False
        self._assessed_at = now
        return True

    def _assess(self, model: Any) -> dict[WorkloadKey, Any] | None:
        """Hangs and stragglers of every running job (`diagnostics.hangs`), after each metrics
        refresh: the flagged ones when what is flagged changed, else None. The focused workload's
        progress (steps per second per rank, from its followed logs) names stragglers by rate."""
        from .diagnostics.hangs import DEFAULT, assess_all

        board, bkey = self._board, self._board_key

        def progress_of(key: WorkloadKey) -> dict[str, float] | None:
            if board is None or key != bkey:
                return None
            rates = {label: rp.rate() for label, rp in board.ranks.items()}
            return {label: r for label, r in rates.items() if r is not None} or None

        found = assess_all(model, self.clock(), self.thresholds or DEFAULT, progress_of, self._timeless)
        flagged = {k: h for k, h in found.items() if not h.ok}
        # what is shown of each: a hang's duration grows while it lasts, and its words change once
        # the ranks' logs are followed (the detail's): a verdict whose sentences moved is sent again
        sign = {k: (h.marker, h.summary, tuple((r.label, r.flags, r.why) for r in h.flagged))
                for k, h in flagged.items()}
        if sign == self._health_sign:
            self.health = flagged
            return None
        self._health_sign = sign
        self.health = flagged
        return flagged

    # -- updates -----------------------------------------------------------------------------------
    def _set_status(self, **changes: Any) -> None:
        fields = {**self._status.__dict__, **changes}
        self._status = DataStatus(**fields)

    def _refresh_status(self, monitor: Monitor, live: bool = True) -> None:
        st = monitor.status
        retrying = "; ".join(sorted(set(st.retrying.values())))
        self._set_status(
            phase="retrying" if retrying else ("live" if live else "syncing"),
            problem=retrying,
            forbidden=tuple(sorted(st.forbidden.items())),
            cluster_wide=st.cluster_wide,
            namespaces=st.namespaces,
            metrics_note=monitor.metrics_note,
            metrics_problem=monitor.metrics_problem,
            metrics_forbidden=monitor.metrics_forbidden,
        )

    def _emit(self, d: ModelDiff, *, reset: bool = False, synced: bool = False, refocus: bool = False,
              health: Mapping[Any, Any] | None = None) -> None:
        histories, last_logs, events = self._focus_extras(d, refocus or synced)
        diagnosis, postmortem = self._focus_diagnostics(d, refocus or synced, events is not None)
        progress = self._progress_update(refocus or synced)
        self.updates += 1
        self.on_update(DataUpdate(d, self._status, histories, last_logs, events, reset, synced, diagnosis,
                                  postmortem, progress, health))

    def _progress_update(self, refocus: bool) -> tuple[Any, Mapping[str, Any], float | None, int | None] | None:
        board, key = self._board, self._board_key
        if board is None or key is None or key != self._focus:
            return (self._focus, {}, None, None) if refocus else None
        if not (self._board_dirty or refocus):
            return None
        self._board_dirty = False
        ranks = {label: {**summary, "spark": tuple(board.ranks[label].sparkline_values())}
                 for label, summary in board.summary().items()}
        return key, ranks, board.eta(time.time()), board.total()

    def _focus_diagnostics(self, d: ModelDiff, refocus: bool, events_changed: bool) -> tuple[Any, Any]:
        """Why the focused workload waits or what is wrong with it, again when it or its events
        changed; and, once it finished with its pods gone, its recorded first failure and what
        happened (a small file read: on this loop, never the UI's)."""
        monitor, key = self.monitor, self._focus
        if monitor is None or key is None:
            return None, None
        wl = monitor.model.workloads.get(key)
        if wl is None or not (refocus or events_changed or key in d.workloads.added or key in d.workloads.changed):
            return None, None
        from .diagnostics.postmortem import first_failure_of, what_happened
        from .diagnostics.why import explain

        try:
            diagnosis = explain(monitor.model, key, cluster_pods=monitor.status.cluster_wide, now=self.clock(),
                                command=self.paste_command, me=self.cfg.impersonate_user or self.cfg.user,
                                idle_threshold=self.idle_threshold)
        except KeyError:
            diagnosis = None
        post: tuple[Any, Any, tuple[str, ...]] = (key, None, ())
        if wl.status in ("Failed", "Succeeded") and all(r.deleting for r in wl.ranks):  # (gone, or going)
            recording = None
            if self.recorder is not None:
                with contextlib.suppress(OSError):  # (not the user's own directory: no recording)
                    recording = self.recorder.store.load(wl.namespace, wl.kind, wl.name, wl.uid)
            story = what_happened(wl, monitor.model.events_for(wl, 10_000), recording, now=self.clock())
            post = (key, first_failure_of(wl, recording), tuple(story))
        return diagnosis, post

    def _focus_extras(self, d: ModelDiff, refocus: bool
                      ) -> tuple[dict[str, tuple[float, ...]], dict[str, float], tuple[Any, ...] | None]:
        monitor, key = self.monitor, self._focus
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

    def _push_focus(self, refocus: bool = True) -> None:
        self._emit(ModelDiff(*_empty_diffs(), status_changed=False), refocus=refocus)

    # -- queries and logs (any thread) ---------------------------------------------------------------
    def events_for(self, key: WorkloadKey, limit: int = 30) -> concurrent.futures.Future[list[Any]]:
        def read() -> list[Any]:
            monitor = self.monitor
            wl = monitor.model.workloads.get(key) if monitor else None
            return [] if wl is None or monitor is None else monitor.model.events_for(wl, limit)
        return self.call(read)

    def get_raw(self, path: str) -> concurrent.futures.Future[Any]:
        async def get() -> Any:
            if self.monitor is None:
                raise ConnectionProblem("not connected", ExitCode.UNREACHABLE)
            return await self.monitor.client.get(path)
        return self.run_coroutine(get())

    def open_logs(self, key: WorkloadKey, options: LogOptions,
                  on_lines: Callable[[list[LogLine]], None],
                  on_notice: Callable[[str], None]) -> concurrent.futures.Future[LogHandle]:
        async def open_() -> LogHandle:
            monitor = self.monitor
            if monitor is None:
                raise ConnectionProblem("not connected", ExitCode.UNREACHABLE)
            await monitor.load_full_pods(key)  # its containers (the list has its pods as Table rows)
            engine = LogEngine(monitor.client, key, monitor.model, monitor=monitor, options=options)
            engine.subscribe(on_lines)
            engine.on_notice(on_notice)
            await engine.start()
            self._engines[key] = engine
            return LogHandle(self, engine)
        return self.run_coroutine(open_())


def _problem(exc: BaseException) -> tuple[str, ExitCode]:
    if isinstance(exc, ConnectionProblem):
        return exc.message, exc.code
    if isinstance(exc, ApiProblem):
        return exc.one_line(), exc.exit_code
    if isinstance(exc, TimeoutError):
        return str(exc) or "timed out", ExitCode.UNREACHABLE
    return f"{type(exc).__name__}: {exc}", ExitCode.UNREACHABLE


def _empty_diffs() -> tuple[Any, Any, Any]:
    from .model_views import KeyedDiff

    return KeyedDiff(), KeyedDiff(), KeyedDiff()
