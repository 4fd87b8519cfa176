"""The flight recorder reads failed ranks' logs a few at a time (a churning cluster fails hundreds
at once: each read is a request to the API server and its buffers in the dashboard)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from monitors.flight_recorder import READS_AT_ONCE, FlightRecorder
from monitors.flight_store import FlightStore
from monitors.records import Exit


class HeldClient:
    """Answers every log read once let go, counting the reads under way."""

    def __init__(self) -> None:
        self.now = self.most = self.asked = 0
        self.go = asyncio.Event()

    async def request(self, method: str, path: str, **_: Any) -> bytes:
        self.asked += 1
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await self.go.wait()
            return b"last line\n"
        finally:
            self.now -= 1


async def test_failed_ranks_logs_are_read_at_most_reads_at_once_together(tmp_path: Path) -> None:
    client = HeldClient()
    recorder = FlightRecorder(FlightStore("ctx", root=tmp_path), client)  # type: ignore[arg-type]
    ex = Exit("c", 1, "Error", 1.0)
    pods = [SimpleNamespace(namespace="ns", name=f"p{i}", restarts=0) for i in range(5 * READS_AT_ONCE)]
    reads = [asyncio.create_task(recorder._read_log(p, ex)) for p in pods]  # type: ignore[arg-type]
    while client.asked < READS_AT_ONCE:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)  # (more would have started by now, were they not held back)
    assert client.now == client.most == READS_AT_ONCE
    client.go.set()
    assert await asyncio.gather(*reads) == [["last line"]] * len(pods)
    assert client.most == READS_AT_ONCE and client.asked == len(pods)
