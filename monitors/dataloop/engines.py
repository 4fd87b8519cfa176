"""The log engines the data loop runs: the log views' (`open`, closed through their `LogHandle`)
and the focused workload's, whose ranks' last lines the flight recorder takes when one fails."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..connection import ClusterConfig, ConnectionProblem, ExitCode
from ..logs import LogEngine, LogLine, LogOptions
from ..monitor import Monitor
from .updates import WorkloadKey

if TYPE_CHECKING:
    import concurrent.futures

    from ..flight_recorder import FlightRecorder

# runs a coroutine on the data loop from any thread (`thread.LoopThread.run_coroutine`)
RunCoroutine = Callable[[Coroutine[Any, Any, None]], "concurrent.futures.Future[None]"]


class LogHandle:
    """A log engine running on the data loop; `close()` stops it (from any thread)."""

    def __init__(self, engines: LogEngines, engine: LogEngine, run: RunCoroutine) -> None:
        self._engines = engines
        self._run = run
        self.engine = engine
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._run(self._engines.stop(self.engine))


class LogEngines:
    def __init__(self) -> None:
        self.open: dict[WorkloadKey, LogEngine] = {}  # by workload: their last lines, for the recorder

    async def start(self, monitor: Monitor, key: WorkloadKey, options: LogOptions,
                    on_lines: Callable[[list[LogLine]], None], on_notice: Callable[[str], None]) -> LogEngine:
        """A log view's engine of `key`'s ranks, started (its pods read whole first: the list has
        them as Table rows, without their containers); the recorder reads from it."""
        await monitor.load_full_pods(key)
        engine = LogEngine(monitor.client, key, monitor.model, monitor=monitor, options=options)
        engine.subscribe(on_lines)
        engine.on_notice(on_notice)
        await engine.start()
        self.open[key] = engine
        return engine

    async def stop(self, engine: LogEngine) -> None:
        await engine.stop()
        if self.open.get(engine.key) is engine:
            del self.open[engine.key]

    def tail_of(self, key: WorkloadKey, label: str) -> list[str] | None:
        """A rank's last lines as its workload's engine holds them (None when none follows it)."""
        engine = self.open.get(key)
        if engine is None or engine.stopping:
            return None
        return [ln.text for ln in engine.last_lines(label, 50)]

    def recorder(self, cfg: ClusterConfig, monitor: Monitor) -> FlightRecorder:
        """The flight recorder of this connection: failing ranks written down, their last lines
        from the engine that follows them when there is one."""
        from ..flight_recorder import FlightRecorder
        from ..flight_store import store_for

        return FlightRecorder(store_for(cfg), monitor.client, self.tail_of)


def not_connected() -> ConnectionProblem:
    return ConnectionProblem("not connected", ExitCode.UNREACHABLE)
