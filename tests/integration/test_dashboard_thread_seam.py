"""Nothing blocks across the dashboard's thread seam (#26, item 6), with `App.run_test()` against
simcluster's demo: exec on every rank hands its output to the UI without waiting for it (the
data loop reads the ranks' output to its end while the UI thread is held), and the dashboard's
shell leaves the UI thread free while it has the terminal, window changes reaching the pod by
SIGWINCH. (The shell on a real terminal: tests/e2e and tests/integration/test_exec_terminal.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import signal
import struct
import termios
import threading
import uuid
from collections.abc import Iterator

import pytest
from textual.drivers.headless_driver import HeadlessDriver
from textual.widgets import Input, Log

from sessions.terminal import LocalTerminal
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.integration.test_dashboard_actions import HVD, make_app, notifications, select
from tests.integration.test_shell_exec_convert import BANNER_END
from tests.waiting import pilot_wait, wait_for
from tui.screens.dialogs import ExecScreen, PromptScreen

LINES = 2000  # of output on each rank


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="demo", workdir=tmp_path_factory.mktemp("sim")) as t:
        yield t


async def test_exec_on_ranks_reads_to_the_end_while_the_ui_thread_is_held(demo: ThreadedSimCluster) -> None:
    mark = f"seam-{uuid.uuid4().hex[:8]}"
    shared = demo.sim.workdir / mark  # (the simulator's workdir is the pods' too)
    shared.mkdir()
    go = shared / "go"
    command = (f"touch {shared}/started-$HOSTNAME; while [ ! -e {go} ]; do sleep 0.05; done; "
               f"seq 1 {LINES} | sed 's/^/{mark} /'")
    app = make_app(demo.sim.kubeconfig_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await select(pilot, app, HVD, 3)
        await pilot.press("x")
        await pilot_wait(pilot, lambda: isinstance(app.screen, PromptScreen) and bool(app.screen.query(Input)),
                         what="the command prompt", timeout=20)
        app.screen.query_one(Input).value = command
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: len(list(shared.glob("started-*"))) == 3, what="the command on every rank",
                         timeout=60)
        screen = app.screen
        assert isinstance(screen, ExecScreen)
        go.touch()
        # the UI thread held (this test runs on it) until the data loop has read every rank's output
        # to its end: every line waits in the screen's batch for the UI
        wait_for(lambda: sum(mark in line for line in list(screen._waiting)) == 3 * LINES, timeout=120,
                 what="every rank's output read while the UI thread is held")
        await pilot_wait(pilot, lambda: screen.done, what="the exec's summary", timeout=60)
        shown = [line for line in screen.query_one(Log).lines if mark in line]
        assert len(shown) == 3 * LINES, shown[-5:]
        for label in ("launcher", "worker-0", "worker-1"):
            assert any(line.startswith(f"[{label}") and line.endswith(f"{mark} {LINES}") for line in shown), label


class PtyReader:
    """The other side of a pseudo-terminal: what was written to it, collected by a thread."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.out = bytearray()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            while data := os.read(self.master, 65536):
                with self.lock:
                    self.out += data

    def text(self) -> str:
        with self.lock:
            raw = self.out.decode("utf-8", "replace")
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw).replace("\r", "")


async def test_the_dashboard_s_shell_leaves_the_ui_thread_free(
        demo: ThreadedSimCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app suspended for the shell (Textual's headless driver told it can be), the shell on a
    pseudo-terminal of its own: while the shell runs, the UI thread answers, and a window change
    (SIGWINCH) reaches the pod's terminal."""
    monkeypatch.setattr(HeadlessDriver, "can_suspend", property(lambda self: True))
    master, slave = os.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    pty = PtyReader(master)
    app = make_app(demo.sim.kubeconfig_path)
    app.actions.terminal = lambda: LocalTerminal(slave, slave)
    seen: dict[str, object] = {}

    def user() -> None:
        """At the shell's prompt: the UI thread is asked something, the window changes, then exit."""
        try:
            wait_for(lambda: BANNER_END in pty.text() and pty.text().rstrip().endswith(("$", "#")), timeout=60,
                     what="the shell's banner and prompt", detail=lambda: pty.text()[-1000:])

            async def ask() -> bool:
                return app.actions.shell_open

            try:
                seen["answered"] = asyncio.run_coroutine_threadsafe(ask(), ui_loop).result(timeout=30)
            except TimeoutError:
                seen["answered"] = "no answer in 30 s: the UI thread is parked"
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 37, 111, 0, 0))
            os.kill(os.getpid(), signal.SIGWINCH)  # (what the kernel sends the terminal's foreground group)

            def size() -> str | None:
                """The pod's terminal's size, asked again (the change and the keys race to the pod)."""
                start = len(pty.text())
                os.write(master, b"stty size; echo @@size''-done\r")
                found = wait_for(lambda: re.search(r"^(\d+ \d+)\n@@size-done", pty.text()[start:], re.M),
                                 timeout=30, what="stty size").group(1)
                return found if found == "37 111" else None

            seen["size"] = wait_for(size, timeout=60, what="the pod's terminal at 37 rows, 111 columns")
        finally:
            os.write(master, b"exit 0\r")

    ui_loop = asyncio.get_running_loop()
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await select(pilot, app, HVD, 3)
            thread = threading.Thread(target=user, daemon=True)
            thread.start()
            await pilot.press("s")
            await pilot_wait(pilot, lambda: any("ended (exit 0)" in m for m in notifications(app)),
                             what="the shell to end", timeout=120, detail=lambda: pty.text()[-1000:])
            thread.join(30)
        assert seen == {"answered": True, "size": "37 111"}, seen
    finally:
        for fd in (slave, master):
            with contextlib.suppress(OSError):
                os.close(fd)
