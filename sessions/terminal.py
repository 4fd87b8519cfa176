"""The local terminal as a byte stream for the exec bridge: raw mode, window size changes, and a
terminal restored on every way out (normal exit, exception, lost connection, signal).

    with LocalTerminal() as term:              # raw mode (only if stdin is a TTY)
        outcome = await session.bridge(term, term.sink, term.resizes())

In raw mode Ctrl-C is a byte like any other, so it reaches the remote side.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import termios
import threading
import tty
from collections.abc import AsyncIterator, Callable
from types import FrameType
from typing import Any

READ_CHUNK = 64 * 1024


class LocalTerminal:
    def __init__(self, fd_in: int | None = None, fd_out: int | None = None) -> None:
        self.fd_in = sys.stdin.fileno() if fd_in is None else fd_in
        self.fd_out = sys.stdout.fileno() if fd_out is None else fd_out
        self.is_tty = os.isatty(self.fd_in)
        self._saved: list[Any] | None = None
        self._resize_queue: asyncio.Queue[tuple[int, int]] | None = None
        self._old_winch: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._eof = False
        self._typed: list[bytes] = []  # read from the terminal, not yet taken by `read`
        self._waiter: asyncio.Future[None] | None = None  # the `read` waiting for bytes
        self._hand_to: Callable[[bytes], bool] | None = None
        self._reader_loop: asyncio.AbstractEventLoop | None = None

    # -- mode ----------------------------------------------------------------------------------------
    def __enter__(self) -> LocalTerminal:
        if self.is_tty:
            self._saved = termios.tcgetattr(self.fd_in)
            tty.setraw(self.fd_in, termios.TCSANOW)
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def restore(self) -> None:
        """Back to the saved mode (idempotent); also stops resize tracking."""
        if self._reader_loop is not None:
            with contextlib.suppress(Exception):
                self._reader_loop.remove_reader(self.fd_in)
            self._reader_loop = None
        if self._saved is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.fd_in, termios.TCSAFLUSH, self._saved)
            self._saved = None
        if self._old_winch is not None:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signal.SIGWINCH, self._old_winch)
            self._old_winch = None

    def size(self) -> tuple[int, int]:
        """(columns, rows) of the output terminal (80x24 when it is not one)."""
        for fd in (self.fd_out, self.fd_in):
            with contextlib.suppress(OSError):
                sz = os.get_terminal_size(fd)
                return sz.columns, sz.lines
        return 80, 24

    # -- byte stream ---------------------------------------------------------------------------------
    async def read(self) -> bytes:
        """The bytes typed since the last call, waiting for some (b"" at the end): one reader
        registered for the whole session, whose callback reads at once and wakes this one waiting
        call (no queue, no add/remove of the reader per keystroke: it is on every key's echo)."""
        if not self._typed and not self._eof:
            loop = asyncio.get_running_loop()
            if self._reader_loop is None:
                loop.add_reader(self.fd_in, self._ready)
                self._reader_loop = loop
            self._waiter = waiter = loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        if not self._typed:
            return b""
        data = self._typed[0] if len(self._typed) == 1 else b"".join(self._typed)
        self._typed.clear()
        return data

    def hand_over(self, send: Callable[[bytes], bool] | None) -> None:
        """Bytes typed go to `send` from the reader's callback, before `read` (whose task has to be
        woken: on every key's echo) gets them; what it does not take (False), `read` returns.
        None: all to `read` again."""
        self._hand_to = send

    def _ready(self) -> None:
        try:
            data = os.read(self.fd_in, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        send = self._hand_to
        if data and send is not None and not self._typed and send(data):
            return
        if data:
            self._typed.append(data)
        else:  # the end: nothing more to read
            self._eof = True
            if self._reader_loop is not None:
                self._reader_loop.remove_reader(self.fd_in)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def sink(self, channel: int, data: bytes) -> None:
        try:
            n = os.write(self.fd_out, data)
        except BlockingIOError:
            n = 0
        except OSError:
            return
        if n == len(data):  # (all at once: nearly always)
            return
        view = memoryview(data)[n:]
        while view:
            try:
                n = os.write(self.fd_out, view)
            except BlockingIOError:
                continue
            except OSError:
                return
            view = view[n:]

    async def resizes(self, poll: float = 0.1) -> AsyncIterator[tuple[int, int]]:
        """The current size at once, then every change: SIGWINCH on the main thread; elsewhere
        (a signal handler can only be set there) the size is polled every `poll` seconds."""
        self._loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self._resize_queue = queue
        last = self.size()
        yield last
        on_main = threading.current_thread() is threading.main_thread()
        if self.is_tty and on_main and self._old_winch is None:
            self._old_winch = signal.signal(signal.SIGWINCH, self._on_winch)
        while True:
            if on_main:
                size = await queue.get()
            else:
                await asyncio.sleep(poll)
                size = self.size()
            if size != last:
                last = size
                yield size

    def _on_winch(self, signum: int, frame: FrameType | None) -> None:
        loop, queue = self._loop, self._resize_queue
        if loop is not None and queue is not None:
            loop.call_soon_threadsafe(queue.put_nowait, self.size())
