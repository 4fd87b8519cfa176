"""The local terminal as a byte stream for the exec bridge: raw mode, window size changes, and a
terminal restored on every way out (normal exit, exception, lost connection, signal).

    with LocalTerminal() as term:              # raw mode (only if stdin is a TTY)
        outcome = await session.bridge(term, term.sink, term.resizes())

In raw mode Ctrl-C is a byte like any other, so it reaches the remote side.

Restored means the terminal's modes as well as its line settings: a full-screen program in the
pod (vim, less, top) switches to the alternate screen, hides the cursor, turns on mouse
reporting, bracketed paste or the application keypad, and turns them off when it ends. When the
connection drops (or the pod dies) first, nothing turns them off, and the user is left with a
terminal that shows nothing of what they type. So `sink` notes the modes the remote output
sets (`ModeTracker`, a scan for ESC only: nothing on an output without one), and `restore`
writes the sequences that turn off those still on: only those, so a session that ended cleanly
gets nothing written (leaving an alternate screen never entered would move the cursor).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import re
import signal
import sys
import termios
import threading
import tty
from collections.abc import AsyncIterator, Callable, Iterator
from types import FrameType
from typing import Any

READ_CHUNK = 64 * 1024

# DEC private modes (`ESC [ ? n h` sets, `l` resets) left on by a program that did not end cleanly,
# each with the sequence that puts it back: cursor keys, mouse reporting (X10, normal, button, any,
# UTF-8, SGR, urxvt), focus events and bracketed paste. Hidden cursor (25 reset) and autowrap off
# (7 reset) are the inverse case. The alternate screens (1049, which also restores the cursor it
# saved; 1047; 47) are one state: the one entered is the one left.
_SET_MODES: dict[int, bytes] = {
    1: b"\x1b[?1l", 9: b"\x1b[?9l", 1000: b"\x1b[?1000l", 1002: b"\x1b[?1002l", 1003: b"\x1b[?1003l",
    1005: b"\x1b[?1005l", 1006: b"\x1b[?1006l", 1015: b"\x1b[?1015l", 1004: b"\x1b[?1004l",
    2004: b"\x1b[?2004l",
}
_RESET_MODES: dict[int, bytes] = {25: b"\x1b[?25h", 7: b"\x1b[?7h"}
_ALT_SCREENS = (1049, 1047, 47)
# ESC [ ? modes h|l, ESC [ params m (SGR), ESC [ top;bottom r (scrolling region), ESC = / ESC >
# (keypad), ESC c (full reset)
_MODE_SEQ = re.compile(rb"\x1b(?:\[(\?)?([0-9;:]*)([hlmr])|([=>c]))")
_PARTIAL_SEQ = re.compile(rb"\x1b(?:\[\??[0-9;:]*)?")  # a sequence cut by the end of a chunk


class ModeTracker:
    """The terminal modes an output stream left changed, and what puts them back (`undo()`)."""

    __slots__ = ("_carry", "alt", "keypad", "modes", "region", "styled")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.modes: dict[int, bool] = {}  # mode -> set (True) or reset (False), as last seen
        self.alt = 0  # the alternate screen mode entered (0: the normal screen)
        self.keypad = False  # application keypad (ESC =)
        self.styled = False  # the last SGR was not a plain reset
        self.region = False  # a scrolling region is set
        self._carry = b""  # the start of a sequence the previous chunk ended in

    def feed(self, data: bytes) -> None:
        if self._carry:
            data = self._carry + data
            self._carry = b""
        elif b"\x1b" not in data:
            return
        for m in _MODE_SEQ.finditer(data):
            private, params, final, single = m.groups()
            if single is not None:
                if single == b"c":
                    self.clear()
                else:
                    self.keypad = single == b"="
            elif private:
                if final in b"hl":
                    on = final == b"h"
                    for p in params.split(b";"):
                        if not p.isdigit():
                            continue
                        mode = int(p)
                        if mode in _ALT_SCREENS:
                            self.alt = mode if on else 0
                        else:
                            self.modes[mode] = on
            elif final == b"m":
                self.styled = params.strip(b"0;:") != b""
            elif final == b"r":
                self.region = params.strip(b";") != b""
        tail = data.rfind(b"\x1b", max(0, len(data) - 64))
        if tail >= 0 and _PARTIAL_SEQ.fullmatch(data, tail):
            self._carry = data[tail:]

    def undo(self) -> bytes:
        """The sequences that turn off what is still on (b"" when nothing is): the modes, the
        scrolling region, the colours, and last the alternate screen."""
        out = [seq for mode, seq in _SET_MODES.items() if self.modes.get(mode)]
        out += [seq for mode, seq in _RESET_MODES.items() if self.modes.get(mode) is False]
        if self.keypad:
            out.append(b"\x1b>")
        if self.region:
            out.append(b"\x1b7\x1b[r\x1b8")  # (DECSTBM homes the cursor: saved and restored around it)
        if self.styled:
            out.append(b"\x1b[0m")
        if self.alt:
            out.append(b"\x1b[?%dl" % self.alt)
        return b"".join(out)


class LocalTerminal:
    def __init__(self, fd_in: int | None = None, fd_out: int | None = None) -> None:
        self.fd_in = sys.stdin.fileno() if fd_in is None else fd_in
        self.fd_out = sys.stdout.fileno() if fd_out is None else fd_out
        self.is_tty = os.isatty(self.fd_in)
        self._saved: list[Any] | None = None
        self._resize_queue: asyncio.Queue[tuple[int, int]] | None = None
        self._old_winch: Any = None
        self._winch_caught = False  # inside `resizes_by_signal`
        self._loop: asyncio.AbstractEventLoop | None = None
        self._eof = False
        self._typed: list[bytes] = []  # read from the terminal, not yet taken by `read`
        self._waiter: asyncio.Future[None] | None = None  # the `read` waiting for bytes
        self._hand_to: Callable[[bytes], bool] | None = None
        self._reader_loop: asyncio.AbstractEventLoop | None = None
        self.modes = ModeTracker()  # what the remote output turned on, turned off by `restore`

    # -- mode ----------------------------------------------------------------------------------------
    def __enter__(self) -> LocalTerminal:
        if self.is_tty:
            self._saved = termios.tcgetattr(self.fd_in)
            tty.setraw(self.fd_in, termios.TCSANOW)
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def restore(self) -> None:
        """Back to the saved mode (idempotent): the terminal modes the remote side left on turned
        off, the line settings as they were; also stops resize tracking."""
        if self._reader_loop is not None:
            with contextlib.suppress(Exception):
                self._reader_loop.remove_reader(self.fd_in)
            self._reader_loop = None
        if self._old_winch is not None:  # first: a window change cannot interrupt what follows
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signal.SIGWINCH, self._old_winch)
            self._old_winch = None
        undo = self.modes.undo()
        self.modes.clear()
        if undo and os.isatty(self.fd_out):
            self._write_all(undo)
        if self._saved is not None:
            for _ in range(10):  # (termios does not retry a call a signal interrupted)
                try:
                    termios.tcsetattr(self.fd_in, termios.TCSAFLUSH, self._saved)
                except termios.error as exc:
                    if exc.args and exc.args[0] == errno.EINTR:
                        continue
                except OSError:
                    pass
                break
            self._saved = None

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
        self.modes.feed(data)
        self._write_all(data)

    def _write_all(self, data: bytes) -> None:
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
        """The current size at once, then every change: by SIGWINCH on the main thread, or on
        another thread inside `resizes_by_signal` (entered on the main thread); elsewhere (a signal
        handler can only be set on the main thread) the size is polled every `poll` seconds."""
        self._loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        self._resize_queue = queue
        last = self.size()
        yield last
        by_signal = self._winch_caught
        if not by_signal and self.is_tty and threading.current_thread() is threading.main_thread():
            if self._old_winch is None:
                self._old_winch = signal.signal(signal.SIGWINCH, self._on_winch)
            by_signal = True
        while True:
            if by_signal:
                size = await queue.get()
            else:
                await asyncio.sleep(poll)
                size = self.size()
            if size != last:
                last = size
                yield size

    @contextlib.contextmanager
    def resizes_by_signal(self) -> Iterator[bool]:
        """Window changes caught by SIGWINCH while in the block, for a session whose `resizes` runs
        on another thread's loop (the dashboard's shell runs on its data loop): entered in a
        coroutine on the main thread's loop, where a signal handler can be set and wakes that loop at
        once; the handler it replaces is back at the end. Yields whether it could (not a terminal,
        not the main thread: `resizes` polls)."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        caught = False
        old: Any = None
        if loop is not None and self.is_tty and threading.current_thread() is threading.main_thread():
            old = signal.getsignal(signal.SIGWINCH)
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(signal.SIGWINCH, self._on_winch, signal.SIGWINCH, None)
                caught = True
        self._winch_caught = caught
        try:
            yield caught
        finally:
            if caught and loop is not None:
                self._winch_caught = False
                with contextlib.suppress(ValueError, RuntimeError):
                    loop.remove_signal_handler(signal.SIGWINCH)
                with contextlib.suppress(ValueError, TypeError, OSError):
                    signal.signal(signal.SIGWINCH, old)

    def _on_winch(self, signum: int, frame: FrameType | None) -> None:
        loop, queue = self._loop, self._resize_queue
        if loop is not None and queue is not None:
            with contextlib.suppress(RuntimeError):  # (its loop closed: nobody follows the size)
                loop.call_soon_threadsafe(queue.put_nowait, self.size())
