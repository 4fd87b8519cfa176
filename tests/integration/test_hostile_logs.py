"""Hostile log output and cluster text (issue #17, item 4): none of it changes the terminal.

A pod (a real process under simcluster's kubelet) writes every escape family (CSI with the
reports a terminal answers: title `ESC [ 21 t`, cursor position, device attributes; OSC with
titles, the OSC 52 clipboard, hyperlinks and colour queries; DCS with a settings request; SOS, PM,
APC; the 8-bit C1 forms), sequences cut by the end of the line, C0 controls, NUL, DEL, invalid
UTF-8, a UTF-8 character split between two of the runtime's 16 KiB partial records, bidi controls
and marks, `\\r` overwrites, Rich markup and links, and a 1 MB line. The workload's labels,
annotations, a pod's name and an event carry escapes, bidi controls and markup too.

- `ranks logs` through a pipe: only printable text and `\\n`, each line exactly what was meant;
  on a terminal (a pty): the same text with ranks' own SGR colours and nothing else; `-o json`
  the same text. In tmux: the title is unchanged and the terminal typed nothing back (no report
  was asked for), the screen is not switched, the cursor is shown.
- The dashboard (headless `run_test`): what the log view, the list, the detail, the events and the
  describe screen paint holds no control character and interprets no markup (no style, no link);
  the 1 MB line is drawn, wrapped or not, without stalling the keys.
- 50,000 lines/s from one rank (simcluster in its own process): the dashboard answers keys all
  along, and its memory grows by no more than what its log buffer holds (what it has not read yet
  waits in the cluster); the buffer's caps, in lines and in bytes (megabyte lines), hold.

Existing tests of the same cases (not repeated here): tests/unit/test_log_terminal_text.py (the
sanitiser, each family), tests/unit/test_log_stream.py (an escape sequence split across HTTP
chunks, an endless line), tests/unit/test_log_view.py (markup shown literally),
tests/integration/test_logs.py::test_escape_sequences_and_markup_reach_the_terminal_literally and
tests/integration/test_dashboard.py::test_cluster_text_is_shown_literally_without_escapes
(condition, event and container status text).
"""

from __future__ import annotations

import asyncio
import copy
import os
import pty
import re
import resource
import select
import shlex
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from textual import events
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import TabbedContent, TextArea

from monitors.logs.terminal_text import sanitize_line
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.dashboard_kit import make_app, move_to, synced, table, wait_screen
from tests.integration.test_logs import NODE, NS, PY, ROOT, TK, kf_pod, phase_of, seed
from tests.kubeflow_objects import pod
from tests.tmux_driver import Tmux
from tests.unit.test_log_stream import BASE, Server, run_engine, start_stream
from tests.waiting import pilot_wait, wait_for
from tui.screens.describe import DescribeScreen
from tui.screens.lists import WorkloadsScreen
from tui.screens.logs import LogsScreen
from tui.screens.workload import WorkloadScreen
from tui.widgets.log_view import LogView

SIZE = (160, 48)
JOB = "hostile"
BIG = 1_000_000
# (what the pod writes, what is shown): each line ends in "|ok" where the sanitiser must not cut
HOSTILE: list[tuple[bytes, str]] = [
    (b"csi:\x1b[2J\x1b[H\x1b[1A\x1b[2K\x1b[?1049h\x1b[?25l\x1b[?1000h\x1b[3g\x1b[5;10r|ok", "csi:|ok"),
    (b"reports:\x1b[21t\x1b[20t\x1b[14t\x1b[18t\x1b[6n\x1b[5n\x1b[c\x1b[>c\x1b[=c\x1b[?u|ok", "reports:|ok"),
    (b"osc:\x1b]0;pwned\x07\x1b]2;pwned\x1b\\\x1b]52;c;ZXZpbA==\x07\x1b]52;p;?\x1b\\"
     b"\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\\x1b]4;1;?\x07\x1b]10;?\x07\x1b]1337;File=x\x07|ok",
     "osc:click|ok"),
    (b"dcs:\x1bP$q\"p\x1b\\\x1bP+q544e\x1b\\\x1bPq#0;2;0;0;0\x1b\\\x1bX sos \x1b\\\x1b^ pm \x1b\\\x1b_ apc \x1b\\|ok",
     "dcs:|ok"),
    (b"esc:\x1b(0\x1b)B\x1b#8\x1b7\x1b8\x1bc\x1bD\x1bM\x1bE\x1bZ\x1b=\x1b>|ok", "esc:|ok"),
    ("c1:\u009b2J\u009d0;pwned\u009c\u0090dcs\u009c\u0085\u009a|ok".encode(), "c1: |ok"),  # (NEL: a space)
    (b"raw8:\x9b2J\x9d|ok", "raw8:\\x9b2J\\x9d|ok"),  # not UTF-8: shown escaped, inert
    (b"c0:\x01\x02\x05\x07\x08\x0b\x0c\x0e\x0f\x18\x1a\x7f|ok", "c0:|ok"),
    (b"nul:\x00\x00|ok", "nul:\u2400\u2400|ok"),
    (b"bad:\xff\xfe\xc3(\xed\xa0\x80|ok", "bad:\\xff\\xfe\\xc3(\\xed\\xa0\\x80|ok"),
    ("bidi:\u202eevil\u202c\u2066x\u2069\u200ey\u200fz\u061c|ok".encode(), "bidi:evilxyz|ok"),
    (b"fake\r[worker-9] spoofed|ok", "[worker-9] spoofed|ok"),
    (b"progress 10%\rprogress 100%|ok\r", "progress 100%|ok"),
    (b"markup:[bold red]x[/] [link=https://evil.example]y[/link] :warning: [/] \\[|ok",
     "markup:[bold red]x[/] [link=https://evil.example]y[/link] :warning: [/] \\[|ok"),
    (b"sgr:\x1b[1;31mred\x1b[0m \x1b[38;5;208mwarm\x1b[m|ok", "sgr:red warm|ok"),
    (b"cut-osc:|ok\x1b]0;pwned", "cut-osc:|ok"),
    (b"cut-dcs:|ok\x1bP1;2|x", "cut-dcs:|ok"),
    (b"cut-csi:|ok\x1b[1;2", "cut-csi:|ok"),
    (b"cut-esc:|ok\x1b", "cut-esc:|ok"),
    (b"y" * 16383 + "€".encode() + b"|split|ok", "y" * 16383 + "€|split|ok"),  # € across 16 KiB records
    (b"big:" + b"x" * BIG + b"|ok", "big:" + "x" * BIG + "|ok"),
]
# anything that acts on a terminal: C0 but \n, DEL, C1, bidi controls and marks
UNSAFE_TEXT = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
UNSAFE_BYTES = re.compile(rb"[\x00-\x09\x0b-\x1f\x7f]")
SGR = re.compile(rb"\x1b\[[0-9;]*m")
MARKUP = "[bold red]x[/] [link=https://evil.example]y[/link] :warning:"
EVIL = "\x1b]0;pwned\x07\x1b[2J\u202e[red]evil[/]\x1b]52;c;ZXZpbA==\x07"  # for labels, annotations, events
# a rank whose role (its `replica-type` label) is hostile: its label, `<role>-<index>`, prefixes its lines
EVIL_ROLE = "\x1b]0;pwned\x07[red]x[/]\u202e"
EVIL_PREFIX = "[[red]x[/]-1]"
EVIL_LINE = (b"evil-rank\x1b]0;pwned\x07|ok", "evil-rank|ok")


def literal(raw: bytes) -> str:
    """`raw` as a Python expression, runs of a byte written `b"x" * N` (an argument of the command
    line may not be longer than 128 KiB)."""
    parts: list[str] = []
    plain = 0  # where the bytes not yet written start
    for m in re.finditer(rb"(.)\1{64,}", raw, re.S):
        if m.start() > plain:
            parts.append(repr(raw[plain:m.start()]))
        parts.append(f"{m.group()[:1]!r} * {len(m.group())}")
        plain = m.end()
    if plain < len(raw) or not parts:
        parts.append(repr(raw[plain:]))
    return " + ".join(parts)


def writer(lines: list[bytes], *, then_sleep: float = 600) -> list[str]:
    """A Python process writing `lines` (bytes, each with a newline), then sleeping."""
    payload = " + ".join(f"{literal(raw)} + b'\\n'" for raw in lines)
    prog = ("import sys, time\n"
            f"sys.stdout.buffer.write({payload})\n"
            "sys.stdout.flush()\n"
            f"time.sleep({then_sleep!r})\n")
    return [PY, "-c", prog]


def expected() -> list[str]:
    return [f"[master-0] {shown}" for _, shown in HOSTILE]


def by_rank(lines: list[str]) -> tuple[list[str], list[str]]:
    """(the master's lines, the others), the padding after a prefix made one space."""
    master = ["[master-0] " + ln[len("[master-0]"):].lstrip(" ") for ln in lines if ln.startswith("[master-0]")]
    return master, [ln for ln in lines if not ln.startswith("[master-0]")]


def env_without_colour_overrides() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR", "FORCE_COLOR")}


# -- the cluster: one pod writing the hostile lines, hostile names and labels around it -----------------


def plant(sim: Any) -> None:
    evil_rank = kf_pod(JOB, "Worker", 1, writer([EVIL_LINE[0]]))
    evil_rank["metadata"]["labels"][TK + "replica-type"] = EVIL_ROLE
    seed(sim, JOB, [kf_pod(JOB, "Master", 0, writer([raw for raw, _ in HOSTILE])), evil_rank], workers=2)
    st = sim.store.find(("kubeflow.org", "pytorchjobs"), NS, JOB)
    obj = copy.deepcopy(st.obj)
    obj["metadata"].setdefault("labels", {})["team"] = EVIL
    obj["metadata"]["annotations"] = {"note": EVIL, EVIL: "key"}
    sim.apply(obj)
    # a rank whose pod name, labels and waiting reason are hostile (planted in the store: the API
    # server's validation would refuse such a name, ranks must not count on it); on no node
    worker = pod("PyTorchJob", JOB, NS, "Worker", 0, node="", phase="Pending", ready=False,
                 waiting=f"[red]Crash[/]{EVIL}", name=f"{JOB}-worker-0{EVIL}")
    worker["metadata"]["labels"]["team"] = EVIL
    worker["metadata"]["annotations"] = {"note": EVIL}
    sim.apply(worker)
    sim.apply({
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{JOB}.evil", "namespace": NS},
        "involvedObject": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": JOB, "namespace": NS,
                           "uid": obj["metadata"]["uid"]},
        "type": "Warning", "reason": f"[blink]Evil[/]{EVIL}", "message": f"{MARKUP} pod {worker['metadata']['name']}",
        "count": 1, "lastTimestamp": "2026-11-01T00:00:00Z",
    })


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(components=("kubelet",), workdir=tmp_path_factory.mktemp("hostile") / "sim") as t:
        t.call(plant, t.sim)
        for name in (f"{JOB}-master-0", f"{JOB}-worker-1"):
            wait_for(lambda n=name: t.call(phase_of, t.sim, n) == "Running", timeout=30, what=f"{name} running")
        # every line written (the log file holds the last one)
        log_dir = t.sim.workdir / "logs"
        for mark in (b"big:", b"evil-rank"):
            wait_for(lambda m=mark: any(m in p.read_bytes() for p in log_dir.rglob("*.log")), timeout=30,
                     what=f"{mark!r} in a log file")
        yield t


def run_logs(kubeconfig: Path, *args: str, tty: bool = False) -> tuple[int, bytes]:
    cmd = [PY, "-m", "tui.cli", "logs", JOB, *args, "--kubeconfig", str(kubeconfig)]
    env = env_without_colour_overrides()
    env["TERM"] = "xterm-256color"
    if not tty:
        proc = subprocess.run(cmd, capture_output=True, env=env, cwd=ROOT, timeout=60)
        assert proc.stderr == b"", proc.stderr
        return proc.returncode, proc.stdout
    master, slave = pty.openpty()
    p = subprocess.Popen(cmd, stdout=slave, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    os.close(slave)
    data = bytearray()
    while True:
        r, _, _ = select.select([master], [], [], 30)
        if not r:
            break
        try:
            chunk = os.read(master, 1 << 20)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    code = p.wait(30)
    os.close(master)
    assert p.stderr is not None and p.stderr.read() == b""
    return code, bytes(data)


# -- ranks logs -----------------------------------------------------------------------------------------


def test_logs_through_a_pipe_are_plain_text_each_line_as_meant(cluster: ThreadedSimCluster) -> None:
    code, out = run_logs(cluster.sim.kubeconfig_path)
    assert code == 0
    assert UNSAFE_BYTES.search(out.replace(b"\n", b"")) is None, UNSAFE_BYTES.search(out.replace(b"\n", b""))
    text = out.decode("utf-8")  # (valid UTF-8: invalid bytes are shown as \xff, never passed on)
    assert UNSAFE_TEXT.search(text.replace("\n", "")) is None
    assert by_rank(text.splitlines()) == (expected(), [f"{EVIL_PREFIX} {EVIL_LINE[1]}"])

    code, out = run_logs(cluster.sim.kubeconfig_path, "-o", "json")
    assert code == 0
    docs = [orjson.loads(line) for line in out.splitlines()]
    assert [d["line"] for d in docs if d["label"] == "master-0"] == [shown for _, shown in HOSTILE]
    assert [d["line"] for d in docs if d["label"] != "master-0"] == [EVIL_LINE[1]]


def test_logs_on_a_terminal_carry_only_ranks_own_colours(cluster: ThreadedSimCluster) -> None:
    code, out = run_logs(cluster.sim.kubeconfig_path, tty=True)
    assert code == 0
    sequences = set(re.findall(rb"\x1b[^m]{0,40}m|\x1b.?", out))
    assert sequences and all(SGR.fullmatch(s) for s in sequences), sequences - {s for s in sequences if SGR.fullmatch(s)}
    plain = SGR.sub(b"", out).replace(b"\r\n", b"\n")
    assert UNSAFE_BYTES.search(plain.replace(b"\n", b"")) is None
    assert by_rank(plain.decode("utf-8").splitlines()) == (expected(), [f"{EVIL_PREFIX} {EVIL_LINE[1]}"])
    assert b"\x1b[1;31mred\x1b[0m" in out  # the line's own colour, re-encoded by ranks


@pytest.mark.timeout(60)
def test_logs_in_tmux_leave_the_title_and_the_input_alone(cluster: ThreadedSimCluster, tmp_path: Path) -> None:
    """On a real terminal: tmux would answer `ESC [ 6 n` and `ESC [ c` by typing into the input, an
    OSC title would change the pane's title, `ESC [ ? 1049 h` switch screens, `ESC [ ? 25 l` hide
    the cursor. After `ranks logs`, the wrapper reads what was typed back: nothing."""
    env = env_without_colour_overrides()
    env.update(TERM="xterm-256color", LC_ALL="C.UTF-8", LANG="C.UTF-8")
    env.pop("TMUX", None)
    q = shlex.quote
    script = tmp_path / "run.sh"
    logs = f"{q(PY)} -m tui.cli logs {JOB} --kubeconfig {q(str(cluster.sim.kubeconfig_path))}"
    script.write_text(
        f"{logs}\n"  # on the terminal itself (every line, the 1 MB one too)
        'echo "EXIT=$?"\n'
        f"{logs} | grep -v -e '^.master-0. *big:' -e yyyyyyyy\n"  # through a pipe, the long lines left out
        "stty -icanon min 0 time 10; typed=$(dd bs=64 count=1 2>/dev/null | od -An -c | tr -d ' \\n')\n"
        'echo "TYPED=[$typed]"\n'
        "sleep 60\n")
    tmux = Tmux(env, 160, 48, name="ranks-hostile")
    try:
        tmux.start(f"sh {q(str(script))}", tmp_path)
        title = tmux.run("display-message", "-p", "-t", tmux.target, "#{pane_title}").strip()
        screen = tmux.wait_for("TYPED=", timeout=40, why="ranks logs to end and the wrapper to read the input")
        after = tmux.run("display-message", "-p", "-t", tmux.target,
                         "#{pane_title}|#{alternate_on}|#{cursor_flag}|#{mouse_any_flag}").strip()
    finally:
        tmux.kill()
    assert "pwned" not in title
    assert after == f"{title}|0|1|0", after
    assert "TYPED=[]" in screen, f"the terminal typed an answer back:\n{screen}"
    screen = re.sub(r"(\[master-0\]) +", r"\1 ", screen)
    assert "[master-0] osc:click|ok" in screen and "[master-0] [worker-9] spoofed|ok" in screen, screen
    assert f"{EVIL_PREFIX} {EVIL_LINE[1]}" in screen and "EXIT=0" in screen, screen


# -- the engine: a character split across HTTP chunks ----------------------------------------------------


async def test_a_utf8_character_split_across_http_chunks_is_whole() -> None:
    from monitors.logs.lines import format_ts

    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        resp = await start_stream(request)
        ts = format_ts(BASE).encode()
        euro, grin = "€".encode(), "😀".encode()
        for piece in (ts + b" a" + euro[:1], euro[1:2], euro[2:] + b" b" + grin[:3], grin[3:] + b"\xe2",
                      b"\x80\x8f|ok\n"):
            await resp.write(piece)
            await asyncio.sleep(0.03)
        await resp.write_eof()
        return resp

    async with Server(handler) as srv:
        _, got = await run_engine(srv, follow=False, until=lambda g: len(g) >= 1)
    assert [ln.text for ln in got] == ["a€ b😀|ok"]  # (U+200F, the RLM mark, taken out too)


def test_bidi_marks_are_stripped_like_the_other_bidi_controls() -> None:
    for mark in ("\u200e", "\u200f", "\u061c", "\u202e", "\u2067"):
        assert sanitize_line(f"a{mark}b".encode()).text == "ab", repr(mark)


def test_megabyte_lines_keep_the_buffer_within_its_byte_cap() -> None:
    """A rank printing 1 MiB lines (the longest kept): the buffer holds what fits in its byte cap,
    not 200,000 of them; the lines it lets go are freed."""
    import tracemalloc

    from monitors.logs.buffer import DEFAULT_MAX_BYTES, LineBuffer
    from monitors.logs.lines import LogLine, Origin

    assert LineBuffer().max_bytes == DEFAULT_MAX_BYTES <= 512 << 20  # (the dashboard's and the engine's)
    origin = Origin("worker-0", 1, "worker", 0, NS, "p", "c")
    buf = LineBuffer(max_bytes=32 << 20)
    tracemalloc.start()
    try:
        for i in range(300):  # 300 MiB in all
            buf.extend([LogLine(i, b"%06d" % i + b"x" * ((1 << 20) - 6), origin)])
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert buf.bytes <= buf.max_bytes and 10 <= buf.lines() <= 16, (buf.bytes, buf.lines())
    assert buf.total == 300 and buf.dropped == 300 - buf.lines()
    assert buf[-1].raw.startswith(b"000299") and buf[1].raw.startswith(b"%06d" % (300 - buf.lines()))
    assert "older lines dropped" in buf[0].text
    assert held < 40 << 20 and peak < 48 << 20, (held >> 20, peak >> 20)


# -- the dashboard ----------------------------------------------------------------------------------------


def painted(widget: Widget) -> list[Any]:
    """The segments the widget paints, row by row."""
    w, h = widget.size
    return [seg for strip in widget.render_lines(Region(0, 0, w, h)) for seg in strip]


def assert_inert(widget: Widget) -> str:
    """What `widget` paints: no control character, no bidi control, no link; returns its text."""
    segs = painted(widget)
    text = "".join(seg.text for seg in segs)
    bad = UNSAFE_TEXT.search(text)
    assert bad is None, f"{type(widget).__name__} paints {bad.group()!r}: {text[max(0, bad.start() - 40):bad.end() + 40]!r}"
    links = {seg.style.link for seg in segs if seg.style is not None and seg.style.link}
    assert not links, f"{type(widget).__name__} paints links {links}"
    return text


def assert_screen_inert(screen: Any) -> str:
    return "\n".join(assert_inert(w) for w in screen.query(Widget) if w.display and w.size.area)


@pytest.mark.timeout(90)
async def test_dashboard_shows_hostile_text_literally_everywhere(cluster: ThreadedSimCluster) -> None:
    key = (NS, "PyTorchJob", JOB)
    app = make_app(cluster.sim.kubeconfig_path)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, 1)
        assert_screen_inert(app.screen)
        await move_to(pilot, table(app), key)

        await pilot.press("d")  # describe: labels and annotations as YAML
        describe = await wait_screen(pilot, DescribeScreen)
        area = describe.query_one(TextArea)
        await pilot_wait(pilot, lambda: "annotations" in area.text, timeout=10, what="the YAML")
        assert UNSAFE_TEXT.search(area.text) is None and "[red]evil[/]" in area.text, area.text
        assert "pwned" not in area.text and "ZXZpbA" not in area.text
        assert_screen_inert(describe)
        await pilot.press("escape")
        await wait_screen(pilot, WorkloadsScreen)
        await move_to(pilot, table(app), key)
        await pilot.press("enter")
        detail = await wait_screen(pilot, WorkloadScreen)
        ranks = table(app, "#ranks")
        await pilot_wait(pilot, lambda: ranks.row_count >= 3, what="the three ranks")
        shown = assert_screen_inert(detail)
        assert "[red]x[/]-1" in shown and f"{JOB}-worker" in shown, shown
        detail.query_one(TabbedContent).active = "tab-events"
        await pilot_wait(pilot, lambda: MARKUP in assert_screen_inert(detail), what="the hostile event")

        await pilot.press("l")
        logs = await wait_screen(pilot, LogsScreen)
        view = logs.query_one(LogView)
        await pilot_wait(pilot, lambda: view.source is not None and len(view.source) >= len(HOSTILE), timeout=20,
                         what="every line in the log view")
        await pilot_wait(pilot, lambda: any(EVIL_LINE[1] in r for r in view.visible_text()), timeout=10,
                         what="the hostile rank's line")
        await pilot.press("home")
        await pilot.pause(0.1)
        text = re.sub(r"(\[master-0\]) +", r"\1 ", assert_screen_inert(logs))  # (labels padded to the widest)
        for want in (f"{EVIL_PREFIX} {EVIL_LINE[1]}", "[master-0] csi:|ok", "osc:click|ok", f"markup:{MARKUP} [/] \\[|ok", "nul:\u2400\u2400|ok",
                     "bidi:evilxyz|ok", "[master-0] [worker-9] spoofed|ok", "raw8:\\x9b2J\\x9d|ok"):
            assert want in text, f"{want!r} not in\n{text}"
        markup_row = next(i for i, row in enumerate(view.visible_text()) if "markup:" in row)
        for seg in view.render_line(markup_row):
            if "[bold red]" in seg.text:
                assert seg.style is None or not (seg.style.bold or seg.style.link), seg.style
        # the 1 MB line, unwrapped then wrapped, drawn while keys are answered
        for wrap in (False, True):
            t0 = time.monotonic()
            await pilot.press("end")
            if view.wrap != wrap:
                await pilot.press("w")
            def drawn(w: bool = wrap) -> bool:
                rows = [r.rstrip() for r in view.visible_text()]
                return view.wrap == w and (any(r.endswith("x|ok") for r in rows) if w else
                                           any(re.match(r"\[master-0\] +big:xxx", r) for r in rows))

            await pilot_wait(pilot, drawn, timeout=60, what=f"the 1 MB line drawn (wrap {wrap})")
            print(f"the 1 MB line drawn (wrap {wrap}) in {time.monotonic() - t0:.2f} s")
            assert_inert(view)
        assert app.return_code is None


# -- 50,000 lines/s from one rank ---------------------------------------------------------------------------

SIM = r'''
import asyncio, signal, sys
from simcluster import SimCluster

async def main():
    sim = SimCluster(components=("kubelet",), workdir=sys.argv[1])
    await sim.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", sim.kubeconfig_path, flush=True)
    await stop.wait()
    await sim.stop()

asyncio.run(main())
'''
RATE = 50_000  # lines/s
FLOOD = r'''
import sys, time
rate, seconds = int(sys.argv[1]), float(sys.argv[2])
w, flush = sys.stdout.buffer.write, sys.stdout.flush
tick, seq = 0.01, 0
per_tick = int(rate * tick)
t0 = time.monotonic()
nxt = t0
while time.monotonic() - t0 < seconds:
    w(b"".join(b"flood %d \x1b[31mred\x1b[0m \x1b]0;pwned\x07 step\n" % (seq + k) for k in range(per_tick)))
    flush()
    seq += per_tick
    nxt += tick
    time.sleep(max(0.0, nxt - time.monotonic()))
print("flood done", seq, flush=True)
time.sleep(600)
'''


@pytest.fixture
def sim_process(tmp_path: Path) -> Iterator[Path]:
    proc = subprocess.Popen([PY, "-c", SIM, str(tmp_path / "sim")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("ready"), proc.stderr.read() if proc.stderr else ""
        yield Path(line.split()[1])
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6


@dataclass
class Flood:
    """What one rank's flood of 50,000 lines/s did to the dashboard's log view (`flood`)."""

    rate: float  # lines/s the view took in while keys were pressed
    latencies: list[float]  # s from a key to the view's change, one every 0.25 s
    total: int  # lines that reached the buffer, at the end
    total_start: int  # ... when the keys began
    lines: int  # lines the buffer holds
    dropped: int
    cap: int
    rss_start: float  # MB
    rss_end: float


async def flood(kubeconfig: Path, seconds: float = 14.0, key_limit: float = 60.0) -> Flood:
    """One rank writes RATE lines/s (escape sequences in each) for `seconds` while its log view is
    shown and `w` is pressed every 0.25 s (each answered within `key_limit`). The view stays inert."""
    from kubernetes import client, config

    from simcluster.scenarios.nodes import gpu_node
    from tests.kubeflow_objects import job

    api = config.new_client_from_config(config_file=str(kubeconfig))
    core = client.CoreV1Api(api)
    core.create_node(gpu_node(NODE, 8))
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "kubeflow.org", "v1", NS, "pytorchjobs", job("PyTorchJob", "flood", NS, {"Master": 1}, conditions=[("Running", "")]))
    body = kf_pod("flood", "Master", 0, [PY, "-c", FLOOD, str(RATE), str(seconds)])
    key = (NS, "PyTorchJob", "flood")
    app = make_app(kubeconfig)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, 1)
        await move_to(pilot, table(app), key)
        await pilot.press("l")
        logs = await wait_screen(pilot, LogsScreen)
        view = logs.query_one(LogView)
        buffer = logs.buffer
        await asyncio.to_thread(core.create_namespaced_pod, NS, body)
        await pilot_wait(pilot, lambda: buffer.total > 10_000, timeout=60, what="the flood in the log view")
        t_start, total_start = time.monotonic(), buffer.total
        latencies: list[float] = []
        rss_start = rss_mb()
        # keys while the flood goes on: `w` (wrap) posted as the terminal driver does, answered
        # when the view's state changed; one every 0.25 s
        while time.monotonic() - t_start < seconds - 3:
            before = view.wrap
            t0 = time.monotonic()
            app.post_message(events.Key("w", "w"))
            while view.wrap == before and time.monotonic() - t0 < key_limit:
                await asyncio.sleep(0.005)
            assert view.wrap != before, f"a key not answered within {key_limit} s during the flood"
            latencies.append(time.monotonic() - t0)
            await asyncio.sleep(0.25)
        rate = (buffer.total - total_start) / (time.monotonic() - t_start)
        rss_end = rss_mb()
        assert_inert(view)
        out = Flood(rate, latencies, buffer.total, total_start, buffer.lines(), buffer.dropped, buffer.cap,
                    rss_start, rss_end)
    api.close()
    print(f"[hostile logs] {out.rate:,.0f} lines/s taken in, {out.total:,} in all, {out.dropped:,} dropped; keys: "
          f"median {statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms "
          f"(n={len(latencies)}); RSS {rss_start:.0f} MB at the start, {rss_end:.0f} MB at the end")
    return out


@pytest.mark.timeout(240)
async def test_50000_lines_per_second_keep_the_dashboard_answering_and_its_memory_bounded(sim_process: Path) -> None:
    """Every key is answered during the flood and the view takes lines in (how fast, how soon:
    tests/perf/test_bench_flood.py); its memory stays bounded."""
    f = await flood(sim_process)
    assert f.latencies and f.total > f.total_start, "the view took nothing in while keys were pressed"
    # what the dashboard cannot take in yet waits in the cluster (the pod's log), not in its memory:
    # it grows by what its buffers hold (a short line: a few hundred bytes, twice), no more
    assert f.lines == min(f.total, f.cap) and f.dropped == f.total - f.lines
    assert f.rss_end - f.rss_start < 100 + (f.total - f.total_start) * 1.5e-3, (f.rss_start, f.rss_end)
