"""#6, #16: the dashboard on simcluster's scale scenario (20,000 pods, ~1,000 workloads; and
100,000 pods, ~5,000 workloads, for the start and the memory).

simcluster runs as `ranks sim --scenario scale --no-tls` in its own process; the dashboard runs in
another (tests/perf/dashboard_probe.py: `RanksApp` under Textual's headless driver at 120x40, alone
in its process, frames timed where the driver would write them; see its docstring for the method).
This process only orchestrates and reads /proc. Figures and goals (#16):

1. start: constructing the app -> the last frame of the first complete "all projects" table
   (every workload a row with its ranks, GPUs and status: the store synced, every pod listed)
                                                        20,000 pods <= 1.5 s; 100,000 pods <= 6 s
   and, at 100,000 pods, to the first frame with a screenful of workload rows (30: the first rows,
   their pod columns may still be filling in)                                             <= 1 s
2. a pod's status changes in the cluster (PUT .../status) -> the first frame whose row differs,
   100 times on the workloads list and 40 times on a workload's rank table     p99 <= 150 ms
3. a key (down, pagedown/pageup, "/" then typing a filter), ~200 each -> the last frame of the
   refresh it caused, 1,000+ rows                                               p99 <= 50 ms
   (typing: the first frame showing the filtered rows; the scrollbar's own frame after it <= 100 ms)
4. idle CPU of the app process, nothing changing in the cluster, over 30 s: the ages of the list
   still tick (each age cell is repainted when its text changes: ~1,000 workloads created at
   random seconds, so some every second), which the window samples evenly
                                                                             <= 0.3 % of a core
5. RSS of the app process after the sync (and after the idle window)
                                                          20,000 pods <= 200 MB; 100,000 <= 300 MB

(#31 made the start at 20,000 pods 1.5 s, the idle CPU 0.3 % and the RSS at 100,000 pods 300 MB,
from #16's 2 s, 0.5 % and 400 MB; the figures are the same.)

Every goal is recorded (tests/perf/results.py) before the test that checks it asserts it. At
100,000 pods only the start and the RSS are measured (the probe is stopped once it has synced),
and only when 12 GB of memory are available (the machine is shared); otherwise the figures are
recorded as not measured, with why.

The machine has 2 cores and other work may run: the table shows how much CPU other processes used
during each phase, the UI thread's own CPU and the cyclic GC time per sample, so a disturbed run can
be told from a slow one. About 2 minutes (a 20,000-pod cluster driven, a 100,000-pod one synced).
"""

from __future__ import annotations

import json
import math
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.perf.conftest import MIN_AVAILABLE_GB, ROOT, mem_available_gb
from tests.perf.results import record

pytestmark = pytest.mark.timeout(900)

BIG = 100000  # pods of the second cluster: the start and the RSS
START_GOAL_S = {20000: 1.5, BIG: 6.0}
FIRST_ROWS_GOAL_S = 1.0  # at 100,000 pods
RSS_GOAL_MB = {20000: 200.0, BIG: 300.0}
EVENT_P99_S = 0.150
KEY_P99_S = 0.050
TYPE_COMPLETE_P99_S = 0.100
IDLE_GOAL = 0.003  # of a core
IDLE_WARMUP = 3.0  # after the sync: the first metrics round, GC
IDLE_WINDOW = 30.0
TICK = os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p99 of 100 samples is the 99th smallest)."""
    if not values:
        return math.inf
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    out = {"VmRSS": 0.0, "VmHWM": 0.0}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            name = line.split(":", 1)[0]
            if name in out:
                out[name] = int(line.split()[1]) / 1024
    return out["VmRSS"], out["VmHWM"]


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """CPU time of a process (all its threads), or of one of its threads."""
    with open(f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_busy() -> float:
    """CPU seconds all processes have used since boot (every core)."""
    with open("/proc/stat") as fh:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fh.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / TICK


class Meter:
    """CPU used by the app, by simcluster and by everything else over a phase."""

    def __init__(self, app: int, sim: int) -> None:
        self.pids = (app, sim)
        self.t, self.busy = time.monotonic(), machine_busy()
        self.own = [cpu_seconds(p) for p in self.pids]
        self.ui = cpu_seconds(app, app)  # the app's main thread: Textual's loop

    def read(self) -> dict[str, float]:
        wall = time.monotonic() - self.t
        own = [cpu_seconds(p) - c for p, c in zip(self.pids, self.own, strict=True)]
        ui = cpu_seconds(self.pids[0], self.pids[0]) - self.ui
        others = machine_busy() - self.busy - sum(own)
        return {"wall": wall, "app": own[0] / wall, "app_ui": ui / wall, "sim": own[1] / wall,
                "others": max(0.0, others / wall)}


class Reports:
    def __init__(self, fd: int, proc: subprocess.Popen[str], stderr: Path) -> None:
        self.file = os.fdopen(fd)
        self.proc = proc
        self.stderr = stderr

    def next(self, event: str, timeout: float) -> dict[str, Any]:
        ready, _, _ = select.select([self.file], [], [], timeout)
        line = self.file.readline() if ready else ""
        if not line:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGUSR1)  # every thread's stack to its stderr
                time.sleep(2)
            self.proc.kill()
            raise AssertionError(f"dashboard probe: no {event!r} report within {timeout:.0f} s:\n"
                                 + self.stderr.read_text()[-4000:])
        msg = json.loads(line)
        if msg["event"] == "error":
            raise AssertionError(f"dashboard probe failed:\n{msg['traceback']}")
        assert msg["event"] == event, msg
        return msg


def start_sim(tmp: Path, pods: int = 20000) -> tuple[subprocess.Popen[str], Path]:
    kc = tmp / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "sim", "--scenario", "scale", "--nodes", "1000",
                             "--pods", str(pods), "--no-tls", "--kubeconfig", str(kc)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], max(240, pods / 100000 * 600))
    line = proc.stdout.readline() if ready else ""
    if not line.startswith("ready: kubeconfig="):
        proc.kill()
        raise RuntimeError(f"simcluster did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc, Path(line.strip()[len("ready: kubeconfig="):].split(" server=")[0])


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_probe(tmp: Path, kubeconfig: Path) -> tuple[subprocess.Popen[str], Reports]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")} | {"HOME": str(tmp)}
    r, w = os.pipe()
    stderr = tmp / "probe.stderr"
    with open(stderr, "w") as err:
        probe = subprocess.Popen([sys.executable, "-m", "tests.perf.dashboard_probe", str(kubeconfig), str(w)],
                                 pass_fds=(w,), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err,
                                 text=True, cwd=ROOT, env=env)
    os.close(w)
    return probe, Reports(r, probe, stderr)


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("dashboard")
    sim, kubeconfig = start_sim(tmp)
    probe: subprocess.Popen[str] | None = None
    try:
        launched = time.monotonic()
        probe, reports = start_probe(tmp, kubeconfig)
        meter = Meter(probe.pid, sim.pid)
        synced = reports.next("synced", 300)
        launch_s = time.monotonic() - launched
        start_load = meter.read()

        time.sleep(IDLE_WARMUP)
        rss_before_idle = rss_mb(probe.pid)
        meter = Meter(probe.pid, sim.pid)
        time.sleep(IDLE_WINDOW)
        idle = meter.read()
        rss_after_idle, hwm = rss_mb(probe.pid)

        assert probe.stdin is not None
        stderr = reports.stderr
        meter = Meter(probe.pid, sim.pid)
        probe.stdin.write("go\n")
        probe.stdin.flush()
        done = reports.next("done", 600)
        drive_load = meter.read()
        assert probe.wait(60) == 0, stderr.read_text()[-4000:]
    finally:
        if probe is not None:
            stop(probe, signal.SIGKILL)
        stop(sim)

    f: dict[str, Any] = {
        **synced, "launch_s": launch_s, "idle": idle, "idle_updates": done["idle_updates"],
        "idle_frames": done["idle_frames"], "rss_before_idle": rss_before_idle[0], "rss_after_idle": rss_after_idle,
        "hwm": hwm, "list": done["list"], "detail": done["detail"], "keys": done["keys"],
        "detail_ranks": done["detail_ranks"], "gc_gen2": done["gc_gen2"],
        "gc_tracked_objects": done["gc_tracked_objects"], "load": {"start": start_load, "idle": idle, "drive": drive_load},
    }
    print_table(f)
    yield f


@pytest.fixture(scope="module")
def big_start(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The start and RSS at 100,000 pods: the probe is stopped once it reported "synced" (no idle, no
    driving). {"skipped": why} when the machine has too little memory available now."""
    avail = mem_available_gb()
    if avail < MIN_AVAILABLE_GB:
        return {"skipped": f"not run: {avail:.1f} GB of memory available before starting {BIG:,} pods "
                           f"(< {MIN_AVAILABLE_GB:.0f} GB; the machine is shared)"}
    tmp = tmp_path_factory.mktemp("dashboard-big")
    sim, kubeconfig = start_sim(tmp, BIG)
    probe: subprocess.Popen[str] | None = None
    try:
        launched = time.monotonic()
        probe, reports = start_probe(tmp, kubeconfig)
        meter = Meter(probe.pid, sim.pid)
        synced = reports.next("synced", 600)
        launch_s = time.monotonic() - launched
        load = meter.read()
        rss_now, hwm = rss_mb(probe.pid)
    finally:
        if probe is not None:
            stop(probe, signal.SIGKILL)
        stop(sim)
    f = {**synced, "launch_s": launch_s, "rss_now": rss_now, "hwm": hwm, "load": load}
    print(f"\n[bench dashboard] scale scenario: {f['pods']:,} pods, {f['workloads']:,} workloads ({f['rows']:,} rows): "
          f"complete table {f['complete_s']:.2f} s after the app was constructed (goal <= {START_GOAL_S[BIG]:g} s; "
          f"first rows {f['first_rows_s']:.2f} s (goal <= {FIRST_ROWS_GOAL_S:g} s), 1,000 rows {f['all_rows_s']:.2f} s, data synced {f['data_synced_s']:.2f} s, process launch -> complete "
          f"{launch_s:.2f} s); RSS {f['rss_mb']:.0f} MB (goal <= {RSS_GOAL_MB[BIG]:.0f}), peak {hwm:.0f} MB; "
          f"load: app {load['app']:.2f} / sim {load['sim']:.2f} / others {load['others']:.2f} cores")
    return f


def ms(v: float) -> str:
    return f"{v * 1000:.0f}" if math.isfinite(v) else "inf"


def print_table(f: dict[str, Any]) -> None:
    rows: list[tuple[str, str, str]] = []
    rows.append(("start: app constructed -> all 1,000 workloads on screen (s)", f"{f['all_rows_s']:.2f}", ""))
    rows.append(("start: app constructed -> complete table, every pod listed (s)", f"{f['complete_s']:.2f}",
                 f"<= {START_GOAL_S[20000]:g}"))
    rows.append(("   of which: monitor LIST+parse done (s)", f"{f['data_synced_s']:.2f}", ""))
    rows.append(("   of which: rows in the table, first frame (s)", f"{f['rows_s']:.2f}", ""))
    rows.append((f"   process launch -> complete (s), imports {f['imports_s']:.2f} s", f"{f['launch_s']:.2f}", ""))
    for name, label in (("list", "pod change -> workloads row"), ("detail", f"pod change -> rank row "
                                                                             f"({f['detail_ranks']} ranks)")):
        d = f[name]
        rows.append((f"{label}, p50 / p99 (ms), n={len(d['latency'])}",
                     f"{ms(pct(d['latency'], 50))} / {ms(pct(d['latency'], 99))}", f"p99 <= {ms(EVENT_P99_S)}"))
        rows.append(("   PUT -> data thread posts the update, p50 / p99",
                     f"{ms(pct(d['data_path'], 50))} / {ms(pct(d['data_path'], 99))}", ""))
        rows.append(("   posted -> frame (UI), p50 / p99",
                     f"{ms(pct(d['ui_path'], 50))} / {ms(pct(d['ui_path'], 99))}", ""))
        rows.append(("   UI thread CPU per change, p50 / p99",
                     f"{ms(pct(d['ui_cpu'], 50))} / {ms(pct(d['ui_cpu'], 99))}", ""))
        rows.append(("   cyclic GC inside a change, p99 / max",
                     f"{ms(pct(d['gc'], 99))} / {ms(max(d['gc'], default=0.0))}", ""))
    for name, label in (("down", "down"), ("page", "pagedown/pageup"), ("type", "filter typing")):
        k = f["keys"][name]
        rows.append((f"key {label} -> refresh done, p50 / p99 (ms), n={len(k['complete'])}",
                     f"{ms(pct(k['complete'], 50))} / {ms(pct(k['complete'], 99))}",
                     f"p99 <= {ms(TYPE_COMPLETE_P99_S if name == 'type' else KEY_P99_S)}"))
        rows.append(("   first frame showing it, p50 / p99",
                     f"{ms(pct(k['first'], 50))} / {ms(pct(k['first'], 99))}",
                     f"p99 <= {ms(KEY_P99_S)}" if name == "type" else ""))
        rows.append(("   UI thread CPU per key, p50 / p99",
                     f"{ms(pct(k['cpu'], 50))} / {ms(pct(k['cpu'], 99))}", ""))
        rows.append(("   cyclic GC inside a key, p99 / max",
                     f"{ms(pct(k['gc'], 99))} / {ms(max(k['gc'], default=0.0))}", ""))
        if k["rebuilt"]:
            rows.append((f"   keys that changed the rows (table rebuilt), n={len(k['rebuilt'])}, p50 / max",
                         f"{ms(pct(k['rebuilt'], 50))} / {ms(max(k['rebuilt']))}", ""))
    keys = f["keys"]
    rows.append(("   samples discarded (data or ages redrawn) / frames after 'done'",
                 f"{keys['discarded']} / {keys['late_frames']} in {keys['verified']}", ""))
    gen2 = f["gc_gen2"]
    rows.append((f"full (gen 2) GCs while driving, {f['gc_tracked_objects'] / 1e6:.1f} M objects tracked: n, max (ms)",
                 f"{len(gen2)}, {ms(max(gen2, default=0.0))}", ""))
    rows.append((f"idle CPU of the app, {f['idle']['wall']:.0f} s (% of a core)", f"{f['idle']['app'] * 100:.2f}",
                 f"<= {IDLE_GOAL * 100:.1f}"))
    rows.append(("   of which the UI thread / the data thread (%)",
                 f"{f['idle']['app_ui'] * 100:.2f} / {(f['idle']['app'] - f['idle']['app_ui']) * 100:.2f}", ""))
    rows.append(("   updates / frames while idle", f"{f['idle_updates']} / {f['idle_frames']}", ""))
    rows.append(("RSS after sync / after idle / peak (MB)",
                 f"{f['rss_mb']:.0f} / {f['rss_after_idle']:.0f} / {f['hwm']:.0f}", f"<= {RSS_GOAL_MB[20000]:.0f}"))
    for phase, load in f["load"].items():
        rows.append((f"load during {phase}: app / sim / other processes (cores)",
                     f"{load['app']:.2f} / {load['sim']:.2f} / {load['others']:.2f}", ""))
    width = max(len(r[0]) for r in rows)
    print(f"\n[bench dashboard] scale scenario: {f['pods']:,} pods, {f['workloads']:,} workloads "
          f"({f['rows']:,} rows), 120x40, headless")
    for label, value, goal in rows:
        print(f"[bench dashboard] {label:<{width}}  {value:>17}  {goal}")
    disturbed = [p for p, load in f["load"].items() if load["others"] > 0.25]
    if disturbed:
        print(f"[bench dashboard] DISTURBED: other processes used > 0.25 cores during {', '.join(disturbed)}; "
              "latencies and the start time are inflated (compare the UI thread CPU figures)")


def load_note(f: dict[str, Any], phase: str) -> str:
    load = f["load"][phase]
    return (f"load during {phase}: app {load['app']:.2f}, sim {load['sim']:.2f}, other processes "
            f"{load['others']:.2f} cores" + (" (DISTURBED)" if load["others"] > 0.25 else ""))


def test_first_complete_screen(figures: dict[str, Any]) -> None:
    f, goal = figures, START_GOAL_S[20000]
    record(f"dashboard start, {f['pods']:,} pods: complete picture", f"<= {goal:g} s", round(f["complete_s"], 3),
           "s", met=f["complete_s"] <= goal and f["rows"] == f["workloads"],
           note=f"app constructed -> the last frame of the complete table: {f['rows']:,} rows for "
                f"{f['workloads']:,} workloads, every rank's pod listed (all rows {f['all_rows_s']:.2f} s, data "
                f"synced {f['data_synced_s']:.2f} s; process launch -> complete {f['launch_s']:.2f} s); "
                + load_note(f, "start"), pods=f["pods"])
    assert f["rows"] == f["workloads"] >= 900
    assert f["complete_s"] <= goal


def test_first_complete_screen_100000_pods(big_start: dict[str, Any]) -> None:
    goal, rss_goal = START_GOAL_S[BIG], RSS_GOAL_MB[BIG]
    if "skipped" in big_start:
        why = big_start["skipped"]
        record(f"dashboard start, {BIG:,} pods: complete picture", f"<= {goal:g} s", None, "s", met=None,
               note=why, pods=BIG)
        record(f"dashboard start, {BIG:,} pods: first rows", f"<= {FIRST_ROWS_GOAL_S:g} s", None, "s", met=None,
               note=why, pods=BIG)
        record(f"dashboard RSS, {BIG:,} pods", f"<= {rss_goal:.0f} MB", None, "MB", met=None, note=why, pods=BIG)
        pytest.skip(why)
    f = big_start
    load = f["load"]
    record(f"dashboard start, {BIG:,} pods: complete picture", f"<= {goal:g} s", round(f["complete_s"], 3), "s",
           met=f["complete_s"] <= goal and f["rows"] == f["workloads"],
           note=f"{f['rows']:,} rows for {f['workloads']:,} workloads ({f['pods']:,} pods; all rows "
                f"{f['all_rows_s']:.2f} s, data synced {f['data_synced_s']:.2f} s; process launch -> complete "
                f"{f['launch_s']:.2f} s); load: app {load['app']:.2f}, sim {load['sim']:.2f}, other processes "
                f"{load['others']:.2f} cores", pods=BIG)
    record(f"dashboard start, {BIG:,} pods: first rows", f"<= {FIRST_ROWS_GOAL_S:g} s", round(f["first_rows_s"], 3),
           "s", met=f["first_rows_s"] <= FIRST_ROWS_GOAL_S,
           note=f"app constructed -> the first frame with a screenful of workload rows ({f['first_rows']} of "
                f"{f['workloads']:,}; their pod columns may still be filling in); 1,000 rows {f['all_rows_s']:.2f} s, "
                f"every workload's row with the store synced {f['rows_s']:.2f} s, complete {f['complete_s']:.2f} s",
           pods=BIG)
    rss = max(f["rss_mb"], f["rss_now"])
    record(f"dashboard RSS, {BIG:,} pods", f"<= {rss_goal:.0f} MB", round(rss, 1), "MB", met=rss <= rss_goal,
           note=f"after the sync; peak {f['hwm']:.0f} MB", pods=BIG)
    assert f["pods"] >= BIG * 0.99 and f["rows"] == f["workloads"]
    assert f["complete_s"] <= goal
    assert f["first_rows_s"] <= FIRST_ROWS_GOAL_S
    assert rss <= rss_goal


def test_pod_change_on_screen(figures: dict[str, Any]) -> None:
    for name, label in (("list", "workloads row"), ("detail", f"rank row ({figures['detail_ranks']} ranks)")):
        d = figures[name]
        p99 = pct(d["latency"], 99)
        record(f"dashboard: pod change -> {label} on screen, p99", f"<= {ms(EVENT_P99_S)} ms",
               round(p99 * 1000, 1) if math.isfinite(p99) else None, "ms",
               met=p99 <= EVENT_P99_S and d["timeouts"] == 0,
               note=f"n={len(d['latency'])}, p50 {ms(pct(d['latency'], 50))} ms, {d['timeouts']} never shown; "
                    f"{figures['pods']:,} pods; " + load_note(figures, "drive"), pods=figures["pods"])
    for name in ("list", "detail"):
        d = figures[name]
        assert d["timeouts"] == 0, f"{name}: {d['timeouts']} changes never showed"
        assert pct(d["latency"], 99) <= EVENT_P99_S, name


def test_keystroke_redraw(figures: dict[str, Any]) -> None:
    keys = figures["keys"]
    goals = (("down", "complete", "key down -> refresh done", KEY_P99_S),
             ("page", "complete", "key pagedown/pageup -> refresh done", KEY_P99_S),
             ("type", "first", "filter typing -> first frame with the filtered rows", KEY_P99_S),
             ("type", "complete", "filter typing -> refresh done (the scrollbar's frame too)", TYPE_COMPLETE_P99_S))
    for name, field, label, goal in goals:
        v = keys[name][field]
        p99 = pct(v, 99)
        record(f"dashboard: {label}, p99", f"<= {ms(goal)} ms", round(p99 * 1000, 1) if math.isfinite(p99) else None,
               "ms", met=p99 <= goal and len(v) >= 190 and keys["timeouts"] == 0,
               note=f"n={len(v)}, p50 {ms(pct(v, 50))} ms; {figures['rows']:,} rows; "
                    f"{keys['timeouts']} keys never shown", pods=figures["pods"])
    assert keys["late_frames"] == 0  # the end of a refresh is found, not guessed
    assert keys["timeouts"] == 0
    assert keys["type_rebuilds"] > 0 and keys["type_rows_min"] < keys["rows_while_typing"] == figures["rows"]
    for name in ("down", "page", "type"):
        assert len(keys[name]["complete"]) >= 190  # 200 keys, less those discarded (see the probe)
    for name in ("down", "page"):
        assert pct(keys[name]["complete"], 99) <= KEY_P99_S, name
    # Typing in the filter: the frame that shows the filtered rows (with the typed character) is the
    # redraw; when the row count changes, the scrollbar's thumb is redrawn alone one frame later
    # (Textual's frame timer): reported as "refresh done", held to a looser bound.
    assert pct(keys["type"]["first"], 99) <= KEY_P99_S
    assert pct(keys["type"]["complete"], 99) <= TYPE_COMPLETE_P99_S


def test_idle_cpu(figures: dict[str, Any]) -> None:
    idle = figures["idle"]
    record(f"dashboard: idle CPU, {figures['pods']:,} pods", f"<= {IDLE_GOAL * 100:.1f} % of a core",
           round(idle["app"] * 100, 3), "% of a core", met=idle["app"] <= IDLE_GOAL and idle["wall"] >= IDLE_WINDOW,
           note=f"over {idle['wall']:.0f} s, nothing changing in the cluster, ages ticking: UI thread "
                f"{idle['app_ui'] * 100:.2f} %, {figures['idle_updates']} updates, {figures['idle_frames']} frames; "
                + load_note(figures, "idle"), pods=figures["pods"])
    assert idle["wall"] >= IDLE_WINDOW
    assert idle["app"] <= IDLE_GOAL


def test_rss_after_sync(figures: dict[str, Any]) -> None:
    rss, goal = max(figures["rss_mb"], figures["rss_after_idle"]), RSS_GOAL_MB[20000]
    record(f"dashboard RSS, {figures['pods']:,} pods", f"<= {goal:.0f} MB", round(rss, 1), "MB", met=rss <= goal,
           note=f"after the sync {figures['rss_mb']:.0f} MB, after the idle window {figures['rss_after_idle']:.0f} MB, "
                f"peak {figures['hwm']:.0f} MB", pods=figures["pods"])
    assert rss <= goal
