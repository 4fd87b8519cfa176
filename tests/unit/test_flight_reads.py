"""The flight recorder reads failed ranks' logs a few at a time (a churning cluster fails hundreds
at once: each read is a request to the API server, and its buffers and its task in the dashboard);
past the limit a failure is recorded from its status alone, at once, with no request."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from monitors.flight_recorder import CAPTURES_AT_ONCE, READS_AT_ONCE, FlightRecorder
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
            return b"the last line\n"
        finally:
            self.now -= 1


async def test_past_reads_at_once_a_failure_is_recorded_from_its_status_without_a_request(tmp_path: Path) -> None:
    client = HeldClient()
    store = FlightStore("ctx", root=tmp_path, max_workloads=1000)
    recorder = FlightRecorder(store, client)  # type: ignore[arg-type]
    n = 3 * READS_AT_ONCE
    for i in range(n):
        wl = SimpleNamespace(namespace="ns", kind="PyTorchJob", name=f"job{i}", uid=f"u{i}", ranks=[])
        pod = SimpleNamespace(namespace="ns", name=f"job{i}-worker-0", restarts=0, node="n1")
        recorder._spawn(("ns", "PyTorchJob", wl.name), wl, pod,  # type: ignore[arg-type]
                        Exit("pytorch", 1, "Error", 1.0, message="Traceback: boom"), read=True)

    def recorded() -> list[Any]:
        return [r for i in range(n) if (r := store.load("ns", "PyTorchJob", f"job{i}", f"u{i}")) is not None]

    for _ in range(3000):  # the ones past the limit: done, while the reads are still held
        if len(recorded()) >= n - READS_AT_ONCE:
            break
        await asyncio.sleep(0.02)
    assert len(recorded()) == n - READS_AT_ONCE, f"{len(recorded())} recorded while {client.now} reads are held"
    assert client.now == client.most == client.asked == READS_AT_ONCE
    assert {r.failures[0].source for r in recorded()} == {"termination message"}
    client.go.set()
    await recorder.drain(30)
    assert len(recorded()) == n and client.most == client.asked == READS_AT_ONCE
    assert sum(r.failures[0].source == "log" for r in recorded()) == READS_AT_ONCE


async def test_past_captures_at_once_a_failure_is_counted_not_recorded(tmp_path: Path) -> None:
    client = HeldClient()
    recorder = FlightRecorder(FlightStore("ctx", root=tmp_path), client)  # type: ignore[arg-type]
    recorder.tail_of = lambda key, label: None
    recorder.settle = 3600.0  # (every capture waits: none finishes while the flood comes)
    for i in range(CAPTURES_AT_ONCE + 10):
        wl = SimpleNamespace(namespace="ns", kind="PyTorchJob", name=f"job{i}", uid=f"u{i}", ranks=[])
        pod = SimpleNamespace(namespace="ns", name=f"job{i}-worker-0", restarts=0, node="n1")
        recorder._spawn(("ns", "PyTorchJob", wl.name), wl, pod,  # type: ignore[arg-type]
                        Exit("pytorch", 1, "Error", 1.0), read=True)
    assert (len(recorder._tasks), recorder.skipped) == (CAPTURES_AT_ONCE, 10)
    for t in list(recorder._tasks):
        t.cancel()
    await asyncio.gather(*recorder._tasks, return_exceptions=True)
