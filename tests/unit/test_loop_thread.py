"""The data side's loop thread at stop: the tasks its main left (a request under way, a spawned
read) are cancelled and end on the loop before it closes, never destroyed pending with it (which
prints "Task was destroyed but it is pending!" and, for a request, "Exception ignored ... Event
loop is closed" on the user's terminal at exit)."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from monitors.dataloop.thread import LoopThread


def test_tasks_left_at_stop_end_on_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    lt = LoopThread("ranks-data-test")
    started, cleaned_on_loop = threading.Event(), threading.Event()

    async def request_under_way() -> None:
        try:
            started.set()
            await asyncio.sleep(3600)
        finally:
            try:  # (its clean-up runs on the loop, as a connection's close needs)
                asyncio.get_running_loop()
                cleaned_on_loop.set()
            except RuntimeError:
                pass

    async def main() -> None:
        lt.spawn(request_under_way)
        assert lt.stopped is not None
        await lt.stopped.wait()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        lt.start(main)
        assert started.wait(10)
        lt.stop(10)
    assert cleaned_on_loop.is_set()
    assert not [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]
    assert lt.loop is not None and lt.loop.is_closed()
