"""Exec and the terminal when things go wrong (issue #17, item 5).

- The connection drops during `ranks shell`: the API server's side of the exec connection is reset
  (a TCP proxy in front of simcluster, standing for a load balancer or a server that dies) while a
  full-screen program in the pod has the alternate screen, a hidden cursor, mouse reporting,
  bracketed paste and the application keypad on. On a real terminal (tmux): every one of them is
  off again, `stty -a` is as before, one line says what happened, the exit status is 255. The
  same in the dashboard's shell (`s`): the dashboard comes back, says so, answers keys, and
  leaves the terminal as it was at `q`.
- A UTF-8 character split across WebSocket frames (a WebSocket server of our own speaking the
  `v5.channel.k8s.io` framing of `simcluster/node/exec_channels.py`): the bridge hands the bytes on
  unchanged, the terminal (a pty) gets the character whole, `exec` on ranks prints it whole; an
  escape sequence split across frames is still seen by the terminal's mode tracking.
- A resize storm: hundreds of window size changes and SIGWINCH in a second on the pty of `ranks
  shell`: it carries on, the pod's pty ends at the last size, the terminal is restored at exit.

The dashboard's return after a shell, in tmux and over SSH, is proved by
tests/e2e/test_demo_tmux.py::test_dashboard_shell_suspends_runs_and_repaints and
tests/integration/test_ssh_serve.py::test_a_shell_into_the_launcher_over_ssh_runs_commands_and_returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import select
import shlex
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from monitors.connection import ClusterConfig
from monitors.kube import KubeClient
from monitors.model import LiveModel
from sessions.exec_all import run_on_ranks
from sessions.exec_bridge import LOST, ExecSession
from sessions.submit import submit
from sessions.terminal import LocalTerminal
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.integration.test_shell_exec_convert import (
    BANNER_END,
    COMPONENTS,
    RANKS,
    ROOT,
    call,
    clean_env,
    running,
    setup,
    shell_in_tmux,
    spec,
)
from tests.kubeflow_objects import job, pod
from tests.thread_loops import end_loop
from tests.tmux_driver import Tmux, stty_flags
from tests.unit.test_model import load
from tests.waiting import wait_for

SESSION = "term"
# what a full-screen program (vim, less, top) turns on, and leaves on when it never gets to end
FULL_SCREEN_ON = r"\033[?1049h\033[?25l\033[?1000h\033[?1006h\033[?2004h\033=\033[1;31m"
TMUX_MODES = ("alternate_on", "cursor_flag", "keypad_flag", "mouse_any_flag", "mouse_standard_flag",
              "mouse_button_flag", "mouse_sgr_flag")


# -- cluster, session -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="empty", components=COMPONENTS, workdir=tmp_path_factory.mktemp("exec-term")) as t:
        t.call(setup, t.sim)
        yield t


@pytest.fixture(scope="module")
def env(cluster: ThreadedSimCluster) -> dict[str, str]:
    return clean_env(cluster.sim.workdir / "home", Path(cluster.sim.kubeconfig_path))


@pytest.fixture(scope="module")
def session(cluster: ThreadedSimCluster) -> str:
    """An interactive session (one pod), Running."""

    async def make(client: KubeClient) -> None:
        await submit(client, spec(SESSION))

    call(cluster, make)
    wait_for(lambda: running(cluster, SESSION, 1), timeout=60, what=f"{SESSION}: its pod Running")
    return SESSION


# -- a TCP proxy in front of the API server -----------------------------------------------------------


class Proxy:
    """Forwards TCP connections to the API server (TLS passes through untouched); `reset()` aborts
    every connection it carries with a RST, as a server or load balancer that goes away does."""

    def __init__(self, upstream: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.upstream = upstream
        self.host = host  # where it listens (another loopback address: a name the certificate lacks)
        self.loop = asyncio.new_event_loop()
        self.writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self.server: asyncio.Server | None = None
        self.thread = threading.Thread(target=self.loop.run_forever, name="proxy", daemon=True)

    def __enter__(self) -> Proxy:
        self.thread.start()
        self.server = self._run(asyncio.start_server(self._serve, self.host, 0))
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.reset()
        if self.server is not None:
            self.loop.call_soon_threadsafe(self.server.close)
        end_loop(self.loop, self.thread, 5)

    def _run(self, coro: Awaitable[Any]) -> Any:
        async def wrap() -> Any:
            return await coro

        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self.writers |= {writer, up_w}

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                self.writers.discard(w)
                w.close()

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))

    def reset(self) -> int:
        """Abort every connection (RST on both sides); how many there were."""

        async def abort() -> int:
            n = len(self.writers)
            for w in list(self.writers):
                sock = w.get_extra_info("socket")
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                w.transport.abort()
            self.writers.clear()
            return n // 2

        return int(self._run(abort()))


def kubeconfig_through(cluster: ThreadedSimCluster, proxy: Proxy, path: Path) -> Path:
    doc = yaml.safe_load(Path(cluster.sim.kubeconfig_path).read_text())
    for c in doc["clusters"]:
        c["cluster"]["server"] = f"{cluster.sim.scheme}://127.0.0.1:{proxy.port}"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def footer(screen: str) -> str:
    lines = screen.rstrip("\n").splitlines()
    return lines[-1] if lines else ""


def tmux_modes(tmux: Any) -> dict[str, str]:
    out = tmux.run("display-message", "-p", "-t", tmux.target, " ".join(f"#{{{n}}}" for n in TMUX_MODES))
    return dict(zip(TMUX_MODES, out.split(), strict=True))


# -- the connection drops during a shell ---------------------------------------------------------------


@pytest.mark.timeout(90)
def test_connection_reset_during_a_shell_restores_the_terminal_and_says_so(
        cluster: ThreadedSimCluster, env: dict[str, str], session: str, tmp_path: Path) -> None:
    host, port = cluster.sim.url.rsplit("://", 1)[1].rsplit(":", 1)
    with Proxy((host, int(port))) as proxy:
        e = {**env, "KUBECONFIG": str(kubeconfig_through(cluster, proxy, tmp_path / "kubeconfig"))}
        with shell_in_tmux(e, tmp_path / "run", session, "-p", "team-a") as sh:
            sh.wait_prompt()
            assert tmux_modes(sh.tmux)["alternate_on"] == "0"
            # a full-screen program takes the terminal... and the connection goes before it ends
            sh.tmux.type(f"printf '{FULL_SCREEN_ON}'; echo \"full-$((6*7))\"; sleep 600")
            sh.tmux.keys("Enter")
            sh.tmux.wait_for("full-42", timeout=15, why="the program's screen")
            taken = tmux_modes(sh.tmux)
            assert taken == {**taken, "alternate_on": "1", "cursor_flag": "0", "keypad_flag": "1",
                             "mouse_standard_flag": "1", "mouse_sgr_flag": "1"}, taken
            assert proxy.reset() >= 1
            code, screen = sh.finish()
            after = tmux_modes(sh.tmux)
        assert code == LOST, screen
        shown = {name: "1" if name == "cursor_flag" else "0" for name in TMUX_MODES}
        assert after == shown, f"terminal modes left as the pod's program set them: {after}"
        sh.assert_terminal_restored()  # stty -a as before
        lines = [ln for ln in sh.err.read_text().splitlines() if ln.strip()]
        assert lines == ["ranks: error: the connection to the pod was lost"], lines
        assert "Traceback" not in screen and BANNER_END in screen, screen  # the normal screen is back


@pytest.mark.timeout(90)
def test_connection_reset_during_the_dashboard_s_shell_returns_to_the_dashboard(
        cluster: ThreadedSimCluster, env: dict[str, str], session: str, tmp_path: Path) -> None:
    """`s` in the dashboard, the same reset: the dashboard comes back (whole, answering keys) with a
    one-line notification, and after `q` the terminal is as it was."""
    host, port = cluster.sim.url.rsplit("://", 1)[1].rsplit(":", 1)
    q = shlex.quote
    before, after = tmp_path / "stty-before.txt", tmp_path / "stty-after.txt"
    with Proxy((host, int(port))) as proxy:
        e = {**env, "KUBECONFIG": str(kubeconfig_through(cluster, proxy, tmp_path / "kubeconfig"))}
        script = tmp_path / "run.sh"
        script.write_text(f"stty -a > {q(str(before))}\n"
                          f"{' '.join(q(a) for a in RANKS)}\n"  # (the dashboard draws on stderr)
                          'echo "EXIT=$?"\n'
                          f"stty -a > {q(str(after))}\n"
                          "echo WRAPPER-DONE\nsleep 60\n")
        tmux = Tmux(e, 120, 32, name="ranks-dash-drop")
        try:
            tmux.start(f"sh {q(str(script))}", ROOT)
            tmux.wait_for(lambda s: re.search(rf"{session} .*Running", s) is not None or "EXIT=" in s, timeout=40,
                          why="the session listed, running")
            assert "EXIT=" not in tmux.screen(), tmux.screen()
            tmux.keys("/")
            tmux.wait_for(lambda s: "Logs" not in footer(s), timeout=10, why="the filter input")
            tmux.type(session)
            tmux.keys("Enter")
            tmux.wait_for(lambda s: "Shell" in footer(s), timeout=10, why="the table to take the keys again")
            tmux.keys("s")
            tmux.wait_for(lambda s: BANNER_END in s and s.rstrip().endswith(("$", "#")), timeout=30,
                          why="the shell's banner and prompt")
            tmux.type(f"printf '{FULL_SCREEN_ON}'; echo \"full-$((6*7))\"; sleep 600")
            tmux.keys("Enter")
            tmux.wait_for("full-42", timeout=15, why="the program's screen")
            assert proxy.reset() >= 1
            screen = tmux.wait_for(lambda s: "the connection to the pod was lost" in s and "full-42" not in s,
                                   timeout=20, why="the dashboard back, saying what happened")
            assert session in screen and "Traceback" not in screen, screen
            tmux.keys("?")  # the dashboard answers keys
            tmux.wait_for("Everywhere", timeout=10, why="the help screen")
            tmux.keys("Escape")
            tmux.wait_for(lambda s: "Everywhere" not in s, timeout=10, why="the help screen closed")
            tmux.keys("q")
            screen = tmux.wait_for("WRAPPER-DONE", timeout=20, why="the dashboard to exit")
            modes = tmux_modes(tmux)
        finally:
            tmux.kill()
    assert "EXIT=0" in screen and "Traceback" not in screen and "rror" not in screen, screen
    assert modes == {name: "1" if name == "cursor_flag" else "0" for name in TMUX_MODES}, modes
    assert stty_flags(after.read_text()) == stty_flags(before.read_text())


# -- a resize storm ----------------------------------------------------------------------------------------


class PtyRun:
    """`ranks shell ARGS` on a pseudo-terminal of our own (its controlling terminal: `setsid -c`),
    the output collected by a thread."""

    def __init__(self, env: dict[str, str], err: Path, *args: str, size: tuple[int, int] = (100, 30)) -> None:
        self.master, self.slave = os.openpty()
        self.set_size(*size)
        self.before = termios.tcgetattr(self.slave)
        self.err = err
        with err.open("wb") as errf:
            self.proc = subprocess.Popen(["setsid", "-c", *RANKS, "shell", *args], stdin=self.slave,
                                         stdout=self.slave, stderr=errf, env=env, cwd=ROOT, close_fds=True)
        self.out = bytearray()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.out += data

    def text(self) -> str:
        with self.lock:
            return self.out.decode("utf-8", "replace")

    def set_size(self, cols: int, rows: int) -> None:
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def type(self, text: str) -> None:
        os.write(self.master, text.encode() + b"\r")

    def screen_text(self, start: int = 0) -> str:
        """The output since `start` as lines: CSI sequences left out, `\r` a line break."""
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.text()[start:]).replace("\r\n", "\n").replace("\r", "\n")

    def run(self, command: str, marker: str, timeout: float = 15) -> str:
        """Type `command; echo MARKER`: the output since, up to the marker's line."""
        start = len(self.text())
        self.type(f"{command}; echo \"{marker[:-1]}\"\"{marker[-1]}\"")  # (the echoed line is not the marker)
        return str(wait_for(lambda: re.search(rf"^{re.escape(marker)}$", self.screen_text(start), re.M)
                            and self.screen_text(start), timeout=timeout, what=f"{command!r}",
                            detail=lambda: self.text()[-2000:]))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for fd in (self.slave, self.master):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.reader.join(5)


@pytest.mark.timeout(90)
def test_a_resize_storm_ends_at_the_last_size(env: dict[str, str], session: str, tmp_path: Path) -> None:
    run = PtyRun(env, tmp_path / "stderr.txt", session, "-p", "team-a")
    try:
        wait_for(lambda: BANNER_END in run.text() and run.text().rstrip().endswith(("$", "#")), timeout=30,
                 what="the banner and the remote prompt", detail=lambda: run.text()[-2000:])
        assert re.search(r"^30 100$", run.run("stty size", "@@one"), re.M)
        # the storm: 400 size changes (each one a SIGWINCH from the kernel) and 200 more signals, back
        # to back (well under a second on a quiet machine)
        for i in range(400):
            run.set_size(60 + i % 90, 15 + i % 40)
            if i % 2:
                os.kill(run.proc.pid, signal.SIGWINCH)
        run.set_size(111, 37)
        assert run.proc.poll() is None, f"ranks ended in the storm: {run.err.read_text()}"

        def last_size() -> bool:
            return bool(re.search(r"^37 111$", run.run("stty size", "@@two"), re.M))

        wait_for(last_size, timeout=15, what="the pod's pty at the last size (37 rows, 111 columns)",
                 detail=lambda: run.text()[-1000:])
        run.type("exit 0")
        assert run.proc.wait(20) == 0, run.text()[-2000:]
        assert run.err.read_text().strip() == ""
        assert termios.tcgetattr(run.slave) == run.before, "the terminal's settings were not restored"
    finally:
        run.close()


# -- bytes across WebSocket frames (a server of our own) ------------------------------------------------

Frames = list[bytes]  # each: the channel byte, then the payload
V5 = "v5.channel.k8s.io"
SUCCESS = b'\x03{"metadata":{},"status":"Success"}'
TK = "training.kubeflow.org/"
EURO, GRIN = "€".encode(), "😀".encode()


class ExecServer:
    """`POST .../pods/{pod}/exec` upgraded to a WebSocket that sends `frames` (one at a time, a
    short pause between them) and then closes, with a status frame or (`status=False`) without."""

    def __init__(self, frames: Frames, *, status: bool = True) -> None:
        self.frames = frames
        self.status = status
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> ExecServer:
        async def exec_(request: web.Request) -> web.WebSocketResponse:
            ws = web.WebSocketResponse(protocols=(V5,))
            await ws.prepare(request)
            for frame in self.frames:
                await ws.send_bytes(frame)
                await asyncio.sleep(0.01)
            if self.status:
                await ws.send_bytes(SUCCESS)
                await ws.close()
            else:  # the connection just goes: no status, no close frame
                assert request.transport is not None
                request.transport.abort()
            return ws

        app = web.Application()
        app.router.add_route("*", "/api/v1/namespaces/{ns}/pods/{pod}/exec", exec_)
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()

    def client(self) -> KubeClient:
        return KubeClient(ClusterConfig(server=self.url, context="t", namespace="ns", user="u"))


def read_until(fd: int, end: bytes, timeout: float = 10) -> bytes:
    """What the pty's other side shows, up to `end`."""
    seen = b""
    deadline = time.monotonic() + timeout
    while not seen.endswith(end):
        left = deadline - time.monotonic()
        assert left > 0 and select.select([fd], [], [], left)[0], f"no {end!r} in {seen!r}"
        seen += os.read(fd, 1024)
    return seen


SPLIT = [b"\x01" + EURO[:1], b"\x01" + EURO[1:] + b" and " + GRIN[:2], b"\x01" + GRIN[2:3], b"\x01" + GRIN[3:] + b"\n"]


async def test_a_utf8_character_split_across_frames_reaches_the_terminal_whole() -> None:
    got: list[tuple[int, bytes]] = []
    async with ExecServer(SPLIT) as srv, srv.client() as client:
        session = await ExecSession.open(client, "ns", "p", ["sh"], tty=True)
        async with session:
            outcome = await session.bridge(None, lambda ch, data: got.append((ch, data)))
    assert outcome.exit_code == 0 and not outcome.lost
    assert [d for _, d in got] == [f[1:] for f in SPLIT], "frames handed on as they came, none re-encoded"
    assert b"".join(d for _, d in got).decode("utf-8") == "€ and 😀\n"

    # the local terminal: a pty, read on its other side
    master, slave = os.openpty()
    try:
        term = LocalTerminal(fd_in=slave, fd_out=slave)
        async with ExecServer(SPLIT) as srv, srv.client() as client:
            session = await ExecSession.open(client, "ns", "p", ["sh"], tty=True)
            async with session:
                with term:
                    await session.bridge(None, term.sink)
        seen = read_until(master, b"\n")
        assert seen.replace(b"\r\n", b"\n").decode("utf-8") == "€ and 😀\n"
    finally:
        os.close(master)
        os.close(slave)


async def test_exec_on_ranks_prints_a_split_character_whole() -> None:
    """`exec` on every rank (`ranks exec`, the dashboard's `x`) decodes whole lines, not frames."""
    model = LiveModel()
    key = ("ns", "PyTorchJob", "pt")
    load(model, [job("PyTorchJob", "pt", "ns", {"Master": 1}, conditions=[("Running", "")])],
         [pod("PyTorchJob", "pt", "ns", "Master", 0)])
    wl = model.workloads[key]
    lines: list[str] = []
    async with ExecServer([*SPLIT, b"\x01two\xe2\x82", b"\x01\xac\n"]) as srv, srv.client() as client:
        results = await run_on_ranks(client, wl, wl.ranks, ["sh"],
                                     lambda _r, _ch, line: lines.append(line.decode("utf-8", "replace")))
    assert [r.exit_code for r in results] == [0]
    assert lines == ["€ and 😀\n", "two€\n"]


async def test_a_dropped_connection_turns_off_what_the_remote_side_left_on() -> None:
    """The modes are seen through frames that cut their escape sequences; the connection ends with
    no status: the session is lost, and restoring the terminal writes what turns them off."""
    frames = [b"\x01\x1b[?10", b"\x01" + b"49h\x1b[", b"\x01?25l\x1b[?2004h\x1b", b"\x01=\x1b[1mbold"]
    master, slave = os.openpty()
    try:
        term = LocalTerminal(fd_in=slave, fd_out=slave)
        async with ExecServer(frames, status=False) as srv, srv.client() as client:
            session = await ExecSession.open(client, "ns", "p", ["sh"], tty=True)
            async with session:
                with term:
                    outcome = await session.bridge(None, term.sink)
        assert outcome.lost and outcome.exit_code == LOST
        seen = read_until(master, b"\x1b[?1049l")
        remote, _, undo = seen.partition(b"bold")
        assert remote == b"\x1b[?1049h\x1b[?25l\x1b[?2004h\x1b=\x1b[1m"
        assert undo == b"\x1b[?2004l\x1b[?25h\x1b>\x1b[0m\x1b[?1049l"
        term.restore()  # (again: nothing more to undo)
    finally:
        os.close(master)
        os.close(slave)


async def test_a_clean_end_writes_nothing_more() -> None:
    """A program that turned its modes off again (and a coloured prompt) leaves nothing to undo:
    leaving an alternate screen never entered would move the cursor."""
    frames = [b"\x01\x1b[?1049h\x1b[?25l", b"\x01\x1b[?25h\x1b[?1049l", b"\x01\x1b[01;32muser@pod\x1b[00m$ "]
    master, slave = os.openpty()
    try:
        term = LocalTerminal(fd_in=slave, fd_out=slave)
        async with ExecServer(frames) as srv, srv.client() as client:
            session = await ExecSession.open(client, "ns", "p", ["sh"], tty=True)
            async with session:
                with term:
                    await session.bridge(None, term.sink)
        os.write(slave, b"END")
        seen = read_until(master, b"END")
        assert seen == b"".join(f[1:] for f in frames) + b"END"
    finally:
        os.close(master)
        os.close(slave)

