"""The soak's dashboard, alone in its process so that its RSS is its own (run by tests/soak/test_soak.py):

    python -m tests.soak.soak_probe KUBECONFIG REPORT_FD

`RanksApp` under Textual's headless driver opens the logs of `soak/soak-train` (64 ranks followed)
and stays there while the cluster churns. Commands on stdin, each answered by one JSON line on
REPORT_FD:

- (at start, unasked) `{"event": "following", ...}` once the log streams are open;
- `sample`: `{"event": "sample", ...}` the figures so far (log lines received, data updates, the
  pods watch's resourceVersion, the status) and the errors seen so far;
- `stop`: the app quits; `{"event": "done", ...}` with every error seen, shutdown included.

What counts as an error in the dashboard's log: a record of WARNING or above from any logger
(asyncio's "Task exception was never retrieved" included), an exception in any thread or an
unraisable one, an exception the app handles as fatal (a worker's included: Textual exits the app
with it) or a worker in the ERROR state, a warning or error notification, the status bar in any
state but live once synced (reconnecting, waiting), a connection, access, project or metrics
problem in the status, and any notice or read failure of the log engine.
"""

from __future__ import annotations

import asyncio
import collections
import gc
import json
import logging
import os
import sys
import threading
import time
import traceback
from typing import Any, TextIO

from textual.worker import WorkerState

from monitors.connection import ClusterConfig, load_cluster_config
from monitors.dataloop import DataUpdate
from tests.waiting import until
from themes import load_themes
from tui.app import RanksApp
from tui.screens.logs import LogsScreen
from tui.settings import Settings

KEY = ("soak", "PyTorchJob", "soak-train")
RANKS = int(os.environ.get("SOAK_RANKS", "64"))
# the soak's cluster has no GPU metrics source (no Prometheus, no DCGM exporter): the dashboard says
# so, as it should; any other metrics problem counts
NO_METRICS_SOURCE = "no GPU metrics: no Prometheus service or DCGM exporter pod found"


class Errors:
    """Every distinct error seen (the first 500), with how often each was seen."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()

    def add(self, what: str) -> None:
        what = what.strip()[:2000]
        with self.lock:
            if what in self.seen or len(self.seen) < 500:
                self.seen[what] = self.seen.get(what, 0) + 1

    def list(self) -> list[str]:
        with self.lock:
            return [f"{w} (x{n})" if n > 1 else w for w, n in self.seen.items()]


ERRORS = Errors()


class Recorder(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        text = f"log {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info))
        ERRORS.add(text)


class SoakApp(RanksApp):
    """RanksApp that counts its data updates and records what it would show as a problem."""

    def __init__(self, cfg: ClusterConfig, **kwargs: Any) -> None:
        super().__init__(cfg, **kwargs)
        self.updates = 0
        self.workloads_changed = 0
        post = self.data.on_update

        def on_update(u: DataUpdate) -> None:  # (on the data thread)
            self.updates += 1
            self.workloads_changed += len(u.diff.workloads.changed)
            post(u)

        self.data.on_update = on_update

    def notify(self, message: str, *, title: str = "", severity: Any = "information", **kwargs: Any) -> None:
        if severity in ("warning", "error"):
            ERRORS.add(f"notification {severity}: {title} {message}")
        super().notify(message, title=title, severity=severity, **kwargs)

    def _handle_exception(self, error: Exception) -> None:
        ERRORS.add("app exception: " + "".join(traceback.format_exception(error)))
        super()._handle_exception(error)


def check(app: SoakApp, synced_once: bool) -> None:
    """What the dashboard shows now: a problem is recorded."""
    st = app.store.status
    if synced_once and st.phase != "live":
        ERRORS.add(f"status bar: {st.phase} ({st.problem})")
    for field in ("problem", "project_problem", "metrics_problem", "metrics_forbidden"):
        value = getattr(st, field)
        if value and not (field == "metrics_problem" and value.startswith(NO_METRICS_SOURCE)):
            ERRORS.add(f"status {field}: {value}")
    for name, message in st.forbidden:
        ERRORS.add(f"status forbidden {name}: {message}")
    for w in list(app.workers):
        if w.state == WorkerState.ERROR:
            ERRORS.add(f"worker {w.name} failed: {w.error!r}")


def pods_rv(app: SoakApp) -> int:
    monitor = app.data.monitor
    if monitor is None:
        return 0
    for inf in list(monitor.informers):
        if inf.kind.plural == "pods" and not inf.kind.group and inf.namespace is None:
            try:
                return int(inf.rv or 0)
            except ValueError:
                return 0
    return 0


def heap() -> dict[str, Any]:
    """The collector's view: objects it tracks (not frozen), collections run, the commonest types.
    No other thread runs while the census holds every object: a tuple another thread is still
    building from a generator would be seen (and referenced) half made, and CPython's resize of it
    then fails (`SystemError: Objects/tupleobject.c: bad argument to internal function`, once in a
    soak)."""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e6)  # (the census does no I/O: the GIL is not given up meanwhile)
    try:
        objs = gc.get_objects()
        tracked = len(objs)
        common = collections.Counter(type(o).__name__ for o in objs).most_common(8)
        del objs
    finally:
        sys.setswitchinterval(switch)
    return {"gc_objects": tracked, "gc_frozen": gc.get_freeze_count(),
            "gc_collections": [g["collections"] for g in gc.get_stats()], "gc_common": common}


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def main(kubeconfig: str, report: TextIO) -> None:
    def emit(obj: dict[str, Any]) -> None:
        report.write(json.dumps(obj) + "\n")
        report.flush()

    cfg = load_cluster_config(kubeconfig)
    app = SoakApp(cfg, settings=Settings(), themes=load_themes(None))
    t0 = time.monotonic()
    async with app.run_test(headless=True, size=(160, 50)):
        await until(lambda: app.store.synced and KEY in app.store.workloads
                    and app.store.workloads[KEY].ranks_total == RANKS, 300, "the soak job in the dashboard")
        synced_at = time.monotonic() - t0
        app.open_logs(KEY)
        screen = await until(lambda: isinstance(app.screen, LogsScreen) and app.screen.handle is not None
                             and app.screen, 60, "the logs of the soak job followed")
        assert isinstance(screen, LogsScreen)
        assert screen.handle is not None
        engine = screen.handle.engine
        emit({"event": "following", "synced_s": synced_at, "streams": engine.active_streams,
              "workloads": len(app.store.workloads), "rss_mb": rss_mb()})

        def figures() -> dict[str, Any]:
            recorder = getattr(app.data, "recorder", None)
            data_loop = app.data.loop
            return {"queued": app._message_queue.qsize() + screen._message_queue.qsize(),
                    "recorder_tasks": len(recorder._tasks) if recorder is not None else None,
                    "data_tasks": len(asyncio.all_tasks(data_loop)) if data_loop is not None else None,
                    "lines": screen.buffer.total, "lines_held": len(screen.buffer), "dropped": screen.buffer.dropped,
                    "engine_lines": engine.buffer.total, "streams": engine.active_streams,
                    "updates": app.updates, "workloads_changed": app.workloads_changed, "pods_rv": pods_rv(app),
                    "phase": app.store.status.phase, "workloads": len(app.store.workloads),
                    "notices": list(engine.notices), "failures": [f.one_line() for f in engine.failures],
                    "rss_mb": rss_mb(), "errors": ERRORS.list()}

        traced: list[Any] = []  # SOAK_TRACE=1: where memory grows (tracemalloc), from the second sample on

        def trace() -> list[str]:
            import tracemalloc

            if not tracemalloc.is_tracing():
                return []
            snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
            traced.append(snap)
            if len(traced) < 3:
                return []
            return [str(d) for d in snap.compare_to(traced[1], "lineno")[:15]]

        loop = asyncio.get_running_loop()
        commands: asyncio.Queue[str] = asyncio.Queue()

        def read_commands() -> None:
            for line in sys.stdin:
                loop.call_soon_threadsafe(commands.put_nowait, line.strip())
            loop.call_soon_threadsafe(commands.put_nowait, "stop")

        threading.Thread(target=read_commands, daemon=True, name="commands").start()
        # SOAK_DIAG_GC=N (a diagnosis, not the soak): a full collection every N s, to tell garbage
        # the collector has not reached yet from memory that is still referenced
        diag_gc = float(os.environ.get("SOAK_DIAG_GC", "0"))
        next_gc = time.monotonic() + diag_gc
        while True:
            if diag_gc and time.monotonic() >= next_gc:
                gc.collect()
                next_gc = time.monotonic() + diag_gc
            try:
                cmd = await asyncio.wait_for(commands.get(), 1.0)
            except TimeoutError:
                check(app, True)
                continue
            check(app, True)
            if cmd == "sample":
                emit({"event": "sample", **figures(), **heap(), "growth_by_line": trace()})
            elif cmd == "stop":
                break
        before_gc = rss_mb()
        freed = gc.collect()
        final_gc = {"rss_before_full_gc_mb": before_gc, "full_gc_freed": freed, "rss_after_full_gc_mb": rss_mb(),
                    **heap()}
        for n in engine.notices:
            ERRORS.add(f"log engine notice: {n}")
        for f in engine.failures:
            ERRORS.add(f"log read failure: {f.one_line()}")
        final = figures()
        await app._press_keys(["q"])
    # (the app has quit: its data loop stopped; what was logged while stopping counts too)
    emit({"event": "done", **final, **final_gc, "errors": ERRORS.list(), "return_code": app.return_code})


if __name__ == "__main__":
    os.environ.pop("KUBECONFIG", None)
    if os.environ.get("SOAK_TRACE") == "1":
        import tracemalloc

        tracemalloc.start(1)
    handler = Recorder(logging.WARNING)
    logging.getLogger().addHandler(handler)
    logging.captureWarnings(True)
    threading.excepthook = lambda a: ERRORS.add(  # type: ignore[assignment]
        f"exception in thread {a.thread.name if a.thread else '?'}: "
        + "".join(traceback.format_exception(a.exc_type, a.exc_value, a.exc_traceback)))
    sys.unraisablehook = lambda u: ERRORS.add(  # type: ignore[assignment]
        f"unraisable: {u.err_msg or ''} {u.object!r}: {u.exc_type.__name__}: {u.exc_value}")
    with os.fdopen(int(sys.argv[2]), "w") as out:
        try:
            asyncio.run(main(sys.argv[1], out))
        except BaseException:  # Textual holds stderr while it runs: the parent gets the traceback here
            out.write(json.dumps({"event": "error", "traceback": traceback.format_exc(),
                                  "errors": ERRORS.list()}) + "\n")
            raise
