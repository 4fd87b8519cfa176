"""The data loop: one connection after another (reconnecting with backoff), each one monitor's life,
with its rooms: the thread and its loop (`thread`), the connection's status (`status`), the GPU
metrics loop (`metrics_loop`), hangs and stragglers (`health`), the focused workload (`focus`), the
log engines (`engines`); every update the UI gets goes out from here (`_emit`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import random
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from ..connection import ClusterConfig, ConnectionProblem, ExitCode
from ..kube import ApiProblem, KubeClient
from ..logs import LogLine, LogOptions
from ..model_views import ModelDiff, WorkloadView
from ..monitor import Monitor
from ..records import EventRec
from ..shared_view import SharedView
from .engines import LogEngines, LogHandle, not_connected
from .fleet import FleetShown, FleetTrack
from .focus import FocusedWorkload
from .health import HealthJudge
from .metrics_loop import MetricsLoop
from .status import FATAL, ConnectionStatus, problem_of
from .thread import LoopThread
from .updates import DataOptions, DataStatus, DataUpdate, Judging, WorkloadKey, quiet_diff

if TYPE_CHECKING:
    from ..diagnostics.hangs import JobHealth
    from ..diagnostics.holders import GpuDemand, GpuFit
    from ..diagnostics.idle import IdleSession
    from ..flight_recorder import FlightRecorder
    from ..logs.first_failure import FailureReport

T = TypeVar("T")


class DataLoop:
    def __init__(self, cfg: ClusterConfig, options: DataOptions | None = None, *,
                 on_update: Callable[[DataUpdate], None], on_problem: Callable[[str, int], None] | None = None,
                 monitor_factory: Callable[[], Monitor] | None = None) -> None:
        self.cfg = cfg
        self.options = options or DataOptions()
        self.on_update = on_update
        self.on_problem = on_problem or (lambda message, code: None)
        self._monitor_factory = monitor_factory
        self.shared = SharedView.from_environment()  # over the SSH door: its one watch (`shared_view`)
        self.judging = Judging()  # the app's settings (thresholds, clock, patterns...)
        self.monitor: Monitor | None = None  # the connection's (None between connections)
        self.synced = False  # the first picture of a connection was complete once
        self.recorder: FlightRecorder | None = None
        self.updates = 0
        self.thread = LoopThread()
        self.status_room = ConnectionStatus(cfg, self.options, lambda: self._emit(quiet_diff(True)))
        self.engines = LogEngines()
        self.health = HealthJudge(self.judging)
        self.focused = FocusedWorkload(self, self.judging, self.engines, cfg.impersonate_user or cfg.user,
                                       self.health.again)
        self.metrics = MetricsLoop(cfg, self.options, self.status_room, self.thread, self._refreshed)
        self.fleet = FleetTrack()

    # -- lifecycle (any thread) --------------------------------------------------------------------
    def start(self) -> None:
        """Returns at once; connects, lists, watches, retries on the data thread."""
        self.thread.start(self._main)

    def stop(self, timeout: float = 5.0) -> None:
        self.thread.stop(timeout)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self.thread.loop

    @property
    def status(self) -> DataStatus:
        return self.status_room.current

    def run_coroutine(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the data loop."""
        return self.thread.run_coroutine(coro)

    def call(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run `fn()` on the data thread (to read the model consistently)."""
        return self.thread.call(fn)

    def focus(self, key: WorkloadKey | None) -> None:
        """The workload on screen: its ranks' GPU histories and last-log times ride along, and its
        logs are followed for its training progress while it is shown."""
        self.focused.key = key
        self.thread.spawn(lambda: self.focused.follow(key))
        if self.synced:
            self.thread.call_soon(self.push_focus)

    def show_node(self, node: str) -> None:
        """The pods of `node` are on screen: read them whole (the list has them as Table rows)."""
        monitor = self.monitor
        if monitor is not None:
            self.thread.spawn(lambda: monitor.load_node_pods(node))

    # -- queries: what screens and actions ask of the model and the connection ------------------------
    def api_client(self) -> KubeClient:
        """The connection's client, for an action run on the data loop; `ConnectionProblem` between
        connections."""
        if self.monitor is None:
            raise not_connected()
        return self.monitor.client

    def gpu_fit(self, namespace: str, demands: list[GpuDemand], me: str,
                first: WorkloadKey | None = None) -> GpuFit | None:
        """Whether `demands` fit now and who holds what they need, `first` counted first (on the data
        loop: the model is read where it is written); None between connections."""
        from ..diagnostics.holders import gpu_fit

        return None if self.monitor is None else gpu_fit(self.monitor.model, namespace, demands, me=me, first=first)

    def idle_sessions(self, now: Callable[[], float], threshold: float) -> concurrent.futures.Future[list[IdleSession]]:
        """Interactive sessions holding idle GPUs (`diagnostics.idle`), read on the data thread."""
        from ..diagnostics.idle import idle_sessions

        def read() -> list[IdleSession]:
            if self.monitor is None:
                raise not_connected()
            return idle_sessions(self.monitor.model, now(), threshold)
        return self.call(read)

    def gpu_fleet(self) -> concurrent.futures.Future[FleetShown]:
        """Every GPU of the cluster (`dataloop.fleet`: one query per field group through the metrics
        loop's source, owners placed against the model), read on the data thread."""
        import time

        from ..gpu_samples import SourceKind

        async def read() -> FleetShown:
            gm, monitor = self.metrics.gm, self.monitor
            if gm is None or monitor is None:
                raise not_connected()
            got = await gm.read_fleet(direct=self.fleet.direct_due(time.time()))
            prom = gm.source is not None and gm.source.kind in (SourceKind.PROMETHEUS,
                                                                 SourceKind.PROMETHEUS_VIA_APISERVER)
            return self.fleet.shown(got, monitor.model, time.time(), prometheus=prom)
        return self.run_coroutine(read())

    def locate_failure(self, wl: WorkloadView) -> concurrent.futures.Future[FailureReport | None]:
        """Which instance of `wl`'s first failed container holds the failure (`logs.first_failure`)."""
        from ..logs.first_failure import locate_failure

        async def locate() -> FailureReport | None:
            return await locate_failure(self.api_client(), wl)
        return self.run_coroutine(locate())

    def events_for(self, key: WorkloadKey, limit: int = 30) -> concurrent.futures.Future[list[EventRec]]:
        def read() -> list[EventRec]:
            monitor = self.monitor
            wl = monitor.model.workloads.get(key) if monitor else None
            return [] if wl is None or monitor is None else monitor.model.events_for(wl, limit)
        return self.call(read)

    def get_raw(self, path: str) -> concurrent.futures.Future[dict[str, Any]]:
        """An object as the API server has it (`KubeClient.get`)."""
        async def get() -> dict[str, Any]:
            return await self.api_client().get(path)
        return self.run_coroutine(get())

    def open_logs(self, key: WorkloadKey, options: LogOptions, on_lines: Callable[[list[LogLine]], None],
                  on_notice: Callable[[str], None]) -> concurrent.futures.Future[LogHandle]:
        """A log engine of `key` on the data loop (`LogHandle.close()` stops it)."""
        async def open_() -> LogHandle:
            if self.monitor is None:
                raise not_connected()
            engine = await self.engines.start(self.monitor, key, options, on_lines, on_notice)
            return LogHandle(self.engines, engine, self.run_coroutine)
        return self.run_coroutine(open_())

    # -- connections (on the data loop) -------------------------------------------------------------------
    async def _main(self) -> None:
        delay = self.options.backoff[0]
        while not self.thread.stopping:
            monitor = self._monitor_factory() if self._monitor_factory else Monitor(
                self.cfg, namespaces=self.options.namespaces, scope=self.options.scope,
                coalesce=self.options.coalesce, backoff=self.options.backoff, pod_rows=True, shared=self.shared,
                collect_listed=self.synced)  # (the first: the app collects and resumes the collector
            # once its first picture is in, `tui.app.settle_heap`; later connections, themselves)
            try:
                await self.thread.until_stopped(self._serve(monitor))
                await monitor.stop()  # again if it ended normally: a no-op
                return
            except (ConnectionProblem, ApiProblem, OSError, TimeoutError) as exc:
                message, code = problem_of(exc)
                await monitor.stop()
                if code in FATAL or (code == ExitCode.UNAUTHORIZED and not self.synced):
                    self.on_problem(message, int(code))
                    return
                self.status_room.lost(exc, self.synced)
            await self.thread.pause(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, self.options.backoff[1])

    async def _serve(self, monitor: Monitor) -> None:
        """One monitor's life. The UI sees the model as it fills (a reset first, then the diffs of
        each LIST page as it is applied, then `synced`): a big cluster's rows appear page by page."""
        assert self.thread.stopped is not None
        status = self.status_room
        self.monitor = monitor
        if status.current.phase != "waiting":
            status.set(phase="connecting" if not self.synced else "retrying")
        silence = asyncio.create_task(status.watch_silence(monitor))
        project = asyncio.create_task(status.check_project(monitor))
        try:
            await monitor.start()
        except BaseException:
            silence.cancel()
            project.cancel()
            raise
        status.set(phase="syncing", problem="", cluster_wide=monitor.status.cluster_wide,
                   namespaces=monitor.status.namespaces)
        self._emit(quiet_diff(True), reset=True)
        live = False
        recorder = self.recorder = self.engines.recorder(self.cfg, monitor) if self.options.record_failures else None

        def on_diff(d: ModelDiff) -> None:
            status.refresh(monitor, live)
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
            live = self.synced = True
            if self.focused.key is not None:
                self.focused.follow_again()  # (a new monitor: follow again)
                asyncio.get_running_loop().create_task(self.focused.follow(self.focused.key))
            status.refresh(monitor, live)
            self._emit(quiet_diff(True), synced=True)
            if self.options.metrics:
                metrics = asyncio.create_task(self.metrics.run(monitor))
            rest = asyncio.create_task(monitor.explain_rest())  # why the other pending jobs wait
            await self.thread.stopped.wait()
        finally:
            for task in (silence, project, *([rest] if rest is not None else [])):
                task.cancel()
            if metrics is not None:
                metrics.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await metrics
            if recorder is not None:
                await recorder.drain(2.0)  # (a failure seen just before the end is kept)
            self.focused.follow_again()
            await self.focused.stop()
            await monitor.stop()

    def _refreshed(self, asked: bool, sent: bool) -> None:
        """After a metrics refresh: the focused ranks' GPU history grew (sent with the model's
        update, or on its own); hangs and stragglers judged when due."""
        if asked and not sent and self.focused.key is not None:
            self.push_focus(refocus=False)
        monitor = self.monitor
        health = self.health.assess(monitor.model, self.focused.rates_of) if monitor and self.health.due() else None
        if health is not None:
            self._emit(quiet_diff(False), health=health)

    # -- updates ----------------------------------------------------------------------------------------
    def push_focus(self, refocus: bool = True) -> None:
        self._emit(quiet_diff(False), refocus=refocus)

    def _emit(self, d: ModelDiff, *, reset: bool = False, synced: bool = False, refocus: bool = False,
              health: dict[WorkloadKey, JobHealth] | None = None) -> None:
        again = refocus or synced
        histories, last_logs, events = self.focused.extras(d, again)
        diagnosis, postmortem = self.focused.diagnostics(d, again, events is not None, self.recorder)
        progress = self.focused.progress(again)
        self.updates += 1
        self.on_update(DataUpdate(d, self.status_room.current, histories, last_logs, events, reset, synced, diagnosis,
                                  postmortem, progress, health))
