"""Event loops that tests run on threads of their own: ended with no task left pending."""

from __future__ import annotations

import asyncio
import contextlib
import threading


def end_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread, timeout: float = 10) -> None:
    """Cancel every task still on `loop` and wait for them, then stop it, join its thread and close
    it (a loop stopped with tasks pending has them "destroyed but pending" at the process's end)."""

    async def cancel_the_rest() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    if loop.is_running():
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(cancel_the_rest(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout)
    if not thread.is_alive() and not loop.is_closed():
        loop.close()
