"""A window change reaches a terminal session by SIGWINCH even when the session runs on another
thread's loop (#26, item 6): the dashboard's shell runs on its data loop while the UI's loop has
the main thread, the only one where a signal handler can be set."""

from __future__ import annotations

import asyncio
import fcntl
import os
import queue
import signal
import struct
import termios
import threading

from sessions.terminal import LocalTerminal
from tests.thread_loops import end_loop

HOUR = 3600.0


def set_size(fd: int, columns: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


async def test_a_window_change_reaches_a_session_on_another_thread_by_signal() -> None:
    master, slave = os.openpty()
    other = asyncio.new_event_loop()
    runner = threading.Thread(target=other.run_forever, daemon=True)
    runner.start()
    try:
        set_size(master, 100, 30)
        term = LocalTerminal(slave, slave)
        sizes: queue.Queue[tuple[int, int]] = queue.Queue()
        before = signal.getsignal(signal.SIGWINCH)

        async def follow() -> None:  # polling once an hour: only a signal brings a change in time
            async for size in term.resizes(poll=HOUR):
                sizes.put(size)

        with term.resizes_by_signal() as caught:
            assert caught
            following = asyncio.run_coroutine_threadsafe(follow(), other)
            assert await asyncio.to_thread(sizes.get, timeout=30) == (100, 30)
            set_size(master, 111, 37)
            os.kill(os.getpid(), signal.SIGWINCH)  # (as the kernel does for the terminal's process group)
            assert await asyncio.to_thread(sizes.get, timeout=30) == (111, 37)
            following.cancel()
        assert signal.getsignal(signal.SIGWINCH) == before  # the handler it replaced, back
    finally:
        end_loop(other, runner)
        os.close(slave)
        os.close(master)


def test_off_the_main_thread_it_says_it_cannot() -> None:
    master, slave = os.openpty()
    try:
        found: list[bool] = []

        async def enter() -> None:
            with LocalTerminal(slave, slave).resizes_by_signal() as caught:
                found.append(caught)

        thread = threading.Thread(target=lambda: asyncio.run(enter()))
        thread.start()
        thread.join(30)
        assert found == [False]
    finally:
        os.close(slave)
        os.close(master)
