"""The data side's own thread and its asyncio loop: started once, stopped once; coroutines and
functions run on it from any thread, their results as concurrent futures (never waited for on the
caller's thread by this module)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..connection import ConnectionProblem, ExitCode

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str = "ranks-data") -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopped: asyncio.Event | None = None  # set when the loop is asked to stop (made on the loop)
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def start(self, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run `main()` on a new thread's loop; returns once the loop runs (at most 10 s)."""
        self._thread = threading.Thread(target=self._run, args=(main,), name=self.name, daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self, timeout: float = 5.0) -> None:
        """Ask `main` to end (`stopped` is set), then wait for the thread up to `timeout`."""
        loop, stopped = self.loop, self.stopped
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopped.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop

        async def begin() -> None:
            self.stopped = asyncio.Event()
            self._ready.set()
            await main()

        try:
            loop.run_until_complete(begin())
        finally:
            with contextlib.suppress(Exception):
                _cancel_the_rest(loop)
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    # -- from any thread ---------------------------------------------------------------------------
    def run_coroutine(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; its future fails with a `ConnectionProblem` when the loop is not running."""
        if self.loop is None or self.loop.is_closed():
            coro.close()
            fut: concurrent.futures.Future[T] = concurrent.futures.Future()
            fut.set_exception(ConnectionProblem("the data loop is not running", ExitCode.ERROR))
            return fut
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable[[], T]) -> concurrent.futures.Future[T]:
        """Run `fn()` on the loop's thread (to read the model consistently)."""
        async def run() -> T:
            return fn()
        return self.run_coroutine(run())

    def call_soon(self, fn: Callable[[], object]) -> None:
        """`fn()` on the loop's thread, soon; nothing when the loop is not running."""
        loop = self.loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # (closed meanwhile)
                loop.call_soon_threadsafe(fn)

    def spawn(self, coro_fn: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """A task of `coro_fn()` on the loop, soon (nothing awaits it)."""
        def start() -> None:
            assert self.loop is not None
            self.loop.create_task(coro_fn())
        self.call_soon(start)

    # -- on the loop --------------------------------------------------------------------------------
    async def until_stopped(self, coro: Coroutine[Any, Any, None]) -> None:
        """`coro`, cancelled when the loop is stopped (quitting while a request hangs is at once)."""
        assert self.stopped is not None
        task = asyncio.ensure_future(coro)
        stopping = asyncio.ensure_future(self.stopped.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if not task.cancelled():
            task.result()

    async def pause(self, seconds: float) -> None:
        """Sleep `seconds`, less when the loop is stopped meanwhile."""
        assert self.stopped is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopped.wait(), seconds)

    @property
    def stopping(self) -> bool:
        return self.stopped is not None and self.stopped.is_set()


def _cancel_the_rest(loop: asyncio.AbstractEventLoop, grace: float = 2.0) -> None:
    """Cancel the tasks `main` left (a request under way, a spawned read) and let them end, up to
    `grace` seconds, before the loop closes (as `asyncio.run` does): a task left pending would be
    destroyed with the loop and its request's connection closed on a closed loop ("Exception
    ignored ... Event loop is closed" on the terminal at exit)."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.wait(tasks, timeout=grace))
