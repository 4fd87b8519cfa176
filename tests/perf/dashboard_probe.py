"""Drive the dashboard against a cluster in this process (run by tests/perf/test_bench_dashboard.py).

    python -m tests.perf.dashboard_probe KUBECONFIG REPORT_FD

The app runs under Textual's headless driver (`run_test(headless=True, size=(120, 40))`), alone in
this process: the cluster is another process, so the parent can read this process's CPU time and
RSS from /proc. Phases, each reported as one JSON line on REPORT_FD:

1. start: from constructing `RanksApp` to the first frame showing the complete "all projects"
   workloads table (every workload a row, `store.synced`), and then to the last frame of that
   refresh (the DataTable measures its 1,000 rows on idle and redraws). Then {"event": "synced"}
   with the figures and RSS, and the probe waits (no timers, no polling) for "go" on stdin: the
   parent measures idle CPU meanwhile.
2. pod changes: a pod of a workload on screen changes status in the cluster (`churn_pod`, PUT to
   the pod's status subresource from a worker thread, the clock read just before the request);
   latency = until the first frame whose workloads row (then, on the workload screen, rank row)
   differs. Pods are taken from rows inside the viewport, so the change is on screen.
3. keys: down, pagedown/pageup, "/" then typing/erasing a filter. Latency = from posting the key
   event (as the terminal driver does) to the last frame of the refresh it caused.

How a frame is timed (Textual 8.2): `Screen._compositor_refresh` hands the compositor's update to
`App._display`, the one place where a real driver writes the terminal (headless skips the write;
`post_display_hook`, called in its `finally`, is Textual's hook for tests). `TimedApp` overrides
`_display`: it encodes the update into terminal bytes as `LinuxDriver` would (so that cost is
counted), then reads the clock. A frame whose predicate holds was rendered from the state the
predicate reads: both happen in the same synchronous call, with no await between.

"The refresh is complete" = the screen has nothing left to do: no dirty widget, layout, repaint or
scroll pending, no after-refresh callback, no running animation, no message queued or being handled
by the app, the screen or any of its widgets (`asyncio.Queue._unfinished_tasks`, which counts a
message until its handler returned), and no DataTable with cells or dimensions to re-measure on
idle; seen three times 2 ms apart. The last frame before that is the end of the refresh (checked:
for the first keys of each kind the probe waits 250 ms more and counts any later frame). Key samples
during which a data update arrived or rows were redrawn for their ages (the store's generation or
the table's cell updates moved) are discarded, not retried (a key typed twice is another sample).
Timing `pilot.press` would not do: it waits for CPU idle in 20 ms sleeps
(`textual._wait.wait_for_idle`), a floor of ~40 ms per key.

Each sample also carries the UI thread's own CPU time (`time.thread_time`, blind to other processes
on the machine) and the cyclic GC time inside it (`gc.callbacks`; a collection stops every thread).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any

T_PROCESS = time.perf_counter()  # before the imports of textual, monitors and tui

from rich.console import RenderableType  # noqa: E402
from textual import events  # noqa: E402
from textual._compositor import CompositorUpdate  # noqa: E402
from textual.keys import KEY_TO_UNICODE_NAME, REPLACED_KEYS  # noqa: E402
from textual.screen import Screen  # noqa: E402

from monitors.connection import ClusterConfig, load_cluster_config  # noqa: E402
from monitors.dataloop import DataUpdate  # noqa: E402
from tests.waiting import until  # noqa: E402
from themes import load_themes  # noqa: E402
from tui.app import RanksApp  # noqa: E402
from tui.keymap import character_key  # noqa: E402
from tui.screens.lists import FilterInput, WorkloadsScreen  # noqa: E402
from tui.screens.workload import WorkloadScreen  # noqa: E402
from tui.settings import Settings  # noqa: E402
from tui.widgets.keyed_table import KeyedTable  # noqa: E402

WorkloadKey = tuple[str, str, str]
SETTLE_CHECKS = 3
SETTLE_STEP = 0.002


GC_PAUSES: list[tuple[float, float, int]] = []  # (start, end, generation) of every cyclic GC run
_gc_started = [0.0]


def _gc_callback(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter()
    else:
        GC_PAUSES.append((_gc_started[0], time.perf_counter(), info["generation"]))


def gc_within(t0: float, t1: float) -> tuple[float, int]:
    """(seconds of cyclic GC inside [t0, t1], the oldest generation collected there or -1)."""
    total, oldest = 0.0, -1
    for a, b, gen in reversed(GC_PAUSES):
        if b < t0:
            break
        if a < t1:
            total += min(b, t1) - max(a, t0)
            oldest = max(oldest, gen)
    return total, oldest


def rss_mb(pid: int | str = "self") -> tuple[float, float]:
    """(VmRSS, VmHWM) in MB."""
    out = {"VmRSS": 0.0, "VmHWM": 0.0}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            name = line.split(":", 1)[0]
            if name in out:
                out[name] = int(line.split()[1]) / 1024
    return out["VmRSS"], out["VmHWM"]


class TimedApp(RanksApp):
    """RanksApp whose frames are timed (see the module docstring); nothing else differs."""

    def __init__(self, cfg: ClusterConfig, **kwargs: Any) -> None:
        super().__init__(cfg, **kwargs)
        self.frames: list[float] = []
        self.frame_bytes = 0
        self.watch: tuple[Callable[[], bool], asyncio.Future[float]] | None = None
        self.updates: list[tuple[float, bool, frozenset[Hashable]]] = []  # (posted at, first, workloads changed)
        post = self.data.on_update

        def on_update(u: DataUpdate) -> None:  # on the data thread, as the update is posted
            wd = u.diff.workloads
            self.updates.append((time.perf_counter(), u.synced,
                                 frozenset() if u.synced else frozenset((*wd.changed, *wd.added, *wd.removed))))
            post(u)

        self.data.on_update = on_update

    def _display(self, screen: Screen[object], renderable: RenderableType | None) -> None:
        super()._display(screen, renderable)
        if renderable is None or self._batch_count:
            return
        if self.is_headless and isinstance(renderable, CompositorUpdate):
            self.frame_bytes += len(renderable.render_segments(self.console))  # what LinuxDriver writes
        now = time.perf_counter()
        self.frames.append(now)
        if self.watch is not None:
            predicate, fut = self.watch
            if not fut.done() and predicate():
                fut.set_result(now)


# -- waiting for frames and for a settled screen -------------------------------------------------------


def busy(app: TimedApp) -> bool:
    screen = app.screen
    if (screen._dirty_widgets or screen._layout_required or screen._repaint_required or screen._scroll_required
            or screen._recompose_required or screen._callbacks or app.animator._animations):
        return True
    for node in (app, screen, *screen.walk_children()):
        queue = node._message_queue
        if getattr(queue, "_unfinished_tasks", queue.qsize()):
            return True
    return False


async def settled(app: TimedApp, timeout: float = 10.0) -> float:
    """Wait until the screen has nothing left to do; returns the time of the last frame."""
    deadline = time.perf_counter() + timeout
    quiet = 0
    while quiet < SETTLE_CHECKS:
        await asyncio.sleep(SETTLE_STEP)
        quiet = 0 if busy(app) else quiet + 1
        if time.perf_counter() > deadline:
            raise TimeoutError("the screen did not settle")
    return app.frames[-1]


async def frame_where(app: TimedApp, predicate: Callable[[], bool], timeout: float) -> float:
    """The time of the first frame (from now on) at which `predicate()` holds."""
    fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    app.watch = (predicate, fut)
    try:
        return await asyncio.wait_for(fut, timeout)
    finally:
        app.watch = None


async def frames_where(app: TimedApp, predicates: dict[str, Callable[[], bool]], timeout: float) -> dict[str, float]:
    """The time of the first frame (from now on) at which each predicate holds (one frame may be several's)."""
    times: dict[str, float] = {}

    def every() -> bool:
        for name, predicate in predicates.items():
            if name not in times and predicate():
                times[name] = app.frames[-1]
        return len(times) == len(predicates)

    await frame_where(app, every, timeout)
    return times


def key_event(key: str) -> events.Key:
    """A key event as `App._press_keys` (and so a terminal driver) makes it."""
    import unicodedata

    if len(key) == 1 and not key.isalnum():
        key = character_key(key)
    original = REPLACED_KEYS.get(key, key)
    try:
        char: str | None = unicodedata.lookup(KEY_TO_UNICODE_NAME.get(original, original.upper()))
    except KeyError:
        char = key if len(key) == 1 else None
    return events.Key(key, char)


# -- phase 1: start ----------------------------------------------------------------------------------------


def workloads_screen(app: TimedApp) -> WorkloadsScreen | None:
    try:
        s = app.screen
    except Exception:
        return None
    return s if isinstance(s, WorkloadsScreen) else None


def complete(app: TimedApp) -> bool:
    s = workloads_screen(app)
    if s is None or s.namespace is not None or not s.is_mounted or not app.store.synced:
        return False
    return 0 < len(app.store.workloads) == s.table.row_count


FIRST_ROWS = 30  # a screenful of workload rows at 120x40


def all_rows(app: TimedApp, expected: int = 1000) -> bool:
    """Every workload of the scale scenario has its row (pod columns may still be filling in)."""
    s = workloads_screen(app)
    return s is not None and s.namespace is None and s.is_mounted and s.table.row_count >= expected


# -- phase 2: pod changes ------------------------------------------------------------------------------------


class PodWriter(threading.Thread):
    """Changes pods' status in the cluster from its own thread, as a kubelet would (PUT .../status)."""

    def __init__(self, cfg: ClusterConfig) -> None:
        super().__init__(daemon=True, name="pod-writer")
        import http.client
        import random
        from urllib.parse import urlsplit

        from simcluster.scenarios.scale import churn_pod

        self.churn_pod = churn_pod
        self.rng = random.Random(7)
        u = urlsplit(cfg.server)
        assert u.scheme == "http", "run the cluster with --no-tls"
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        self.headers = {"Content-Type": "application/json", **cfg.headers()}
        self.jobs: list[tuple[str, str, asyncio.Future[float], asyncio.AbstractEventLoop]] = []
        self.cv = threading.Condition()

    def change(self, namespace: str, pod: str) -> asyncio.Future[float]:
        """Change the pod; the future gets the perf_counter time read just before the PUT."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[float] = loop.create_future()
        with self.cv:
            self.jobs.append((namespace, pod, fut, loop))
            self.cv.notify()
        return fut

    def _request(self, method: str, path: str, body: bytes | None = None) -> bytes:
        self.conn.request(method, path, body=body, headers=self.headers)
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:200]!r}")
        return data

    def run(self) -> None:
        while True:
            with self.cv:
                while not self.jobs:
                    self.cv.wait()
                ns, pod, fut, loop = self.jobs.pop(0)
            path = f"/api/v1/namespaces/{ns}/pods/{pod}"
            try:
                body = json.dumps(self.churn_pod(json.loads(self._request("GET", path)), self.rng)).encode()
                t0 = time.perf_counter()
                self._request("PUT", path + "/status", body)
            except Exception as exc:  # reported through the future
                loop.call_soon_threadsafe(lambda e=exc, f=fut: f.done() or f.set_exception(e))
            else:
                loop.call_soon_threadsafe(lambda t=t0, f=fut: f.done() or f.set_result(t))


def visible_rows(table: KeyedTable) -> range:
    first = int(table.scroll_y)
    shown = max(table.scrollable_content_region.height - table.header_height, 1)
    return range(first, min(first + shown, len(table.order)))


def row_text(table: KeyedTable, key: Hashable, skip: Iterable[int]) -> tuple[str, ...]:
    cells = table.get_row(key)  # what the row's strip is rendered from in this frame
    skipped = set(skip)
    return tuple(getattr(c, "plain", str(c)) for i, c in enumerate(cells) if i not in skipped)


def columns_named(table: KeyedTable, names: set[str]) -> tuple[int, ...]:
    """Indices of the table's columns with these labels (the sort marker and padding aside)."""
    return tuple(i for i, label in enumerate(table.labels)
                 if label.strip().rstrip("▲▼^v ").upper() in names)


def running_pods(app: TimedApp, key: WorkloadKey) -> list[str]:
    w = app.store.workloads[key]
    return [r.pod for r in w.ranks if r.phase == "Running"]


async def pod_change_samples(app: TimedApp, writer: PodWriter, targets: list[tuple[WorkloadKey, str]],
                             table: Callable[[], KeyedTable], row_key: Callable[[WorkloadKey, str], Hashable],
                             skip: tuple[int, ...]) -> dict[str, Any]:
    lat: list[float] = []
    data_path: list[float] = []  # PUT -> the data thread posts the update carrying the workload
    ui_path: list[float] = []  # that post -> the frame showing it
    ui_cpu: list[float] = []  # CPU time of the UI thread from the request to the frame
    gc_s: list[float] = []  # cyclic GC inside the sample (it stops every thread)
    timeouts = 0
    for wkey, pod in targets:
        tbl, rk = table(), row_key(wkey, pod)
        before = row_text(tbl, rk, skip)
        n_updates = len(app.updates)
        frame = asyncio.ensure_future(frame_where(app, lambda t=tbl, r=rk, b=before: row_text(t, r, skip) != b,
                                                  timeout=10.0))
        c0 = time.thread_time()
        t0 = await writer.change(wkey[0], pod)
        try:
            t1 = await frame
        except TimeoutError:
            timeouts += 1
            continue
        ui_cpu.append(time.thread_time() - c0)
        lat.append(t1 - t0)
        gc_s.append(gc_within(t0, t1)[0])
        posted = next((t for t, _, keys in app.updates[n_updates:] if wkey in keys), None)
        if posted is not None:
            data_path.append(posted - t0)
            ui_path.append(t1 - posted)
        await settled(app)
    return {"latency": lat, "data_path": data_path, "ui_path": ui_path, "ui_cpu": ui_cpu, "gc": gc_s,
            "timeouts": timeouts}


# -- phase 3: keys ---------------------------------------------------------------------------------------------


async def key_sample(app: TimedApp, key: str, done: Callable[[], bool], timeout: float = 10.0
                     ) -> tuple[float, float, float, float] | None:
    """(to the first frame where `done()` holds, to the end of the refresh, UI thread CPU, cyclic GC inside),
    or None if something else redrew rows meanwhile (a data update, the periodic age refresh)."""
    table = getattr(app.screen, "table", None)
    before = (app.store.generation, getattr(table, "cell_updates", 0))
    frame = asyncio.ensure_future(frame_where(app, done, timeout))
    await asyncio.sleep(0)  # the watch is in place before the key goes
    assert app._driver is not None
    c0 = time.thread_time()
    t0 = time.perf_counter()
    app._driver.send_message(key_event(key))
    t1 = await frame
    t2 = await settled(app)
    cpu = time.thread_time() - c0
    if (app.store.generation, getattr(table, "cell_updates", 0)) != before:
        return None  # a data update or the periodic age refresh redrew rows meanwhile
    return t1 - t0, t2 - t0, cpu, gc_within(t0, t2)[0]


async def keys_phase(app: TimedApp, verify: int) -> dict[str, Any]:
    screen = workloads_screen(app)
    assert screen is not None
    table = screen.table
    out: dict[str, Any] = {"discarded": 0, "late_frames": 0, "verified": 0, "timeouts": 0}

    async def run(name: str, key: str, done_after: Callable[[], Callable[[], bool]]) -> None:
        kind = out.setdefault(name, {"first": [], "complete": [], "cpu": [], "gc": [], "rebuilt": []})
        rebuilds = table.rebuilds
        try:
            r = await key_sample(app, key, done_after())
        except TimeoutError:
            out["timeouts"] += 1
            await settled(app)
            return
        if r is None:  # not retried: typing the same key again would not be the same sample
            out["discarded"] += 1
            return
        for field, v in zip(("first", "complete", "cpu", "gc"), r, strict=True):
            kind[field].append(v)
        if table.rebuilds != rebuilds:  # the rows changed: the table was rebuilt
            kind["rebuilt"].append(r[1])
        if len(kind["first"]) <= verify:  # no frame may follow what `settled` called the end
            n, state = len(app.frames), (app.store.generation, table.cell_updates)
            await asyncio.sleep(0.25)
            if (app.store.generation, table.cell_updates) == state:  # else data or ages were redrawn
                out["late_frames"] += len(app.frames) - n
                out["verified"] += 1

    def cursor_moved() -> Callable[[], bool]:
        row = table.cursor_row
        return lambda: table.cursor_row != row

    table.move_cursor(0)
    await settled(app)
    for _ in range(200):
        await run("down", "down", cursor_moved)
    table.move_cursor(0)
    await settled(app)
    for _ in range(5):
        for _ in range(20):
            await run("page", "pagedown", cursor_moved)
        for _ in range(20):
            await run("page", "pageup", cursor_moved)

    inp = screen.query_one(FilterInput)
    await run("slash", "slash", lambda: lambda: inp.has_focus and inp.display)
    word = "llama3-70b"
    typed = ""
    rebuilds = table.rebuilds
    rows_min = table.row_count
    for _ in range(10):
        for ch in word:
            typed += ch
            await run("type", ch, lambda v=typed: lambda: screen.row_filter.text == v)
            rows_min = min(rows_min, table.row_count)
            typed = inp.value  # the same unless a key was lost (then counted as a timeout)
        for _ in word:
            typed = typed[:-1]
            await run("type", "backspace", lambda v=typed: lambda: screen.row_filter.text == v)
            typed = inp.value
    out["type_rebuilds"] = table.rebuilds - rebuilds
    out["type_rows_min"] = rows_min
    out["rows_while_typing"] = table.row_count  # all of them again, once the filter is erased
    await app._press_keys(["escape"])  # closes the (empty) filter
    await settled(app)
    return out


# -- main ----------------------------------------------------------------------------------------------------


async def main(kubeconfig: str, report: Any) -> None:
    def emit(obj: dict[str, Any]) -> None:
        report.write(json.dumps(obj) + "\n")
        report.flush()

    gc.callbacks.append(_gc_callback)
    cfg = load_cluster_config(kubeconfig)
    t_start = time.perf_counter()
    app = TimedApp(cfg, settings=Settings(), themes=load_themes(None))
    async with app.run_test(headless=True, size=(120, 40)):
        seen = await frames_where(app, {"first": lambda: all_rows(app, FIRST_ROWS), "all": lambda: all_rows(app)},
                                  timeout=300)
        t_first, t_all = seen["first"], seen["all"]
        t_rows = await frame_where(app, lambda: complete(app), timeout=300)
        t_done = await settled(app)
        screen = workloads_screen(app)
        assert screen is not None
        t_data = next(t for t, synced, _ in app.updates if synced)
        rss, hwm = rss_mb()
        emit({"event": "synced", "imports_s": t_start - T_PROCESS, "data_synced_s": t_data - t_start,
              "rows_s": t_rows - t_start, "all_rows_s": t_all - t_start,
              "first_rows_s": t_first - t_start, "first_rows": FIRST_ROWS, "complete_s": t_done - t_start, "rows": screen.table.row_count,
              "workloads": len(app.store.workloads), "pods": sum(w.ranks_total for w in app.store.workloads.values()),
              "rss_mb": rss, "hwm_mb": hwm, "frames": len(app.frames)})
        updates_before_idle = len(app.updates)
        frames_before_idle = len(app.frames)
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # idle: blocked in read()
        assert line.strip() == "go", line
        idle = {"idle_updates": len(app.updates) - updates_before_idle,
                "idle_frames": len(app.frames) - frames_before_idle}

        # -- 2. pod changes on the workloads screen, then on one workload's screen
        t_drive = time.perf_counter()
        writer = PodWriter(cfg)
        writer.start()
        table = screen.table
        keys = [table.order[i] for i in visible_rows(table)]
        pods = {k: running_pods(app, k) for k in keys}
        keys = [k for k in keys if pods[k]]
        assert keys, "no workload on screen has a Running pod"
        targets = []
        i = 0
        while len(targets) < 100:
            k = keys[i % len(keys)]
            targets.append((k, pods[k][(i // len(keys)) % len(pods[k])]))
            i += 1
        skip = columns_named(table, {"UTIL", "AGE"})  # driven by the clock and by metrics, not by pods
        assert len(skip) == 2, table.labels
        listed = await pod_change_samples(app, writer, targets, lambda: screen.table, lambda w, p: w, skip)

        big = max(keys, key=lambda k: len(pods[k]))
        app.open_workload(big)
        await until(lambda: isinstance(app.screen, WorkloadScreen) and app.screen.is_mounted
                    and app.screen.table.row_count == len(app.store.workloads[big].ranks), 10,
                    "the workload screen with every rank", interval=0.005)  # not timed: polls
        await settled(app)
        detail_screen = app.screen
        assert isinstance(detail_screen, WorkloadScreen)
        rows = visible_rows(detail_screen.table)
        shown_pods = [p for p in running_pods(app, big) if detail_screen.table.order.index(p) in rows]
        assert shown_pods, "no Running rank on screen"
        detail_targets = [(big, shown_pods[j % len(shown_pods)]) for j in range(40)]
        gpu_cols = columns_named(detail_screen.table, {"GPU", "TREND", "HISTORY", "MEM"})  # metrics-driven
        assert gpu_cols, detail_screen.table.labels
        detail = await pod_change_samples(app, writer, detail_targets, lambda: detail_screen.table,
                                          lambda w, p: p, gpu_cols)
        await app._press_keys(["escape"])
        await until(lambda: workloads_screen(app) is not None, 10, "the workloads screen again", interval=0.005)
        await settled(app)

        # -- 3. keys
        keys_out = await keys_phase(app, verify=3)
        emit({"event": "done", **idle, "list": listed, "detail": detail, "detail_workload": list(big),
              "detail_ranks": len(app.store.workloads[big].ranks), "keys": keys_out,
              "frame_bytes": app.frame_bytes,
              "gc_gen2": [b - a for a, b, g in GC_PAUSES if g == 2 and a >= t_drive],
              "gc_tracked_objects": len(gc.get_objects())})


if __name__ == "__main__":
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the parent asks for stacks when we are late
    os.environ.pop("KUBECONFIG", None)
    with os.fdopen(int(sys.argv[2]), "w") as out:
        try:
            asyncio.run(main(sys.argv[1], out))
        except BaseException:  # Textual holds stderr while it runs: the parent gets the traceback here
            import traceback

            out.write(json.dumps({"event": "error", "traceback": traceback.format_exc()}) + "\n")
            raise
