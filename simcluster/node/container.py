"""One container of a pod: its runs (`Instance`: a process group, its log file, its end), the
protocol that captures a run's output into its CRI log file, the container's life in the pod
(`ContainerRun`: restarts, back-off, state) and its `exec` readiness probe. The pod's runtime
(`podruntime`) starts and supervises them; `podstatus` reports them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from .podlogs import LogWriter


class Instance:
    """One run of a container: a process group, its log file, its end."""

    def __init__(self, container: str, attempt: int, log_path: Path, flush_interval: float) -> None:
        self.container = container
        self.attempt = attempt
        self.container_id = "containerd://" + os.urandom(32).hex()
        self.log_path = log_path
        self.writer = LogWriter(log_path, flush_interval=flush_interval)
        self.pid: int | None = None
        self.started_at: str | None = None
        self.finished_at: str | None = None
        self.finished_mono = 0.0
        self.exit_code: int | None = None
        self.reason = ""
        self.message = ""
        self.oom = False
        self.term_sent = False
        self.done = asyncio.Event()
        self.transport: asyncio.SubprocessTransport | None = None
        self.pipes_closed = asyncio.Event()
        self.timers: list[asyncio.TimerHandle] = []
        self.probe_task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.pid is not None and not self.done.is_set() and self.exit_code is None


class CaptureProtocol(asyncio.SubprocessProtocol):
    """A run's stdout and stderr into its log file; `on_exit(instance)` when its process exits."""

    def __init__(self, inst: Instance, on_exit: Callable[[Instance], None], read_pause: float) -> None:
        self.inst = inst
        self.on_exit = on_exit
        self.read_pause = read_pause
        self.transport: asyncio.SubprocessTransport | None = None
        self._last_read: dict[int, float] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (a subprocess protocol is always given the subprocess's transport)
        self.transport = cast(asyncio.SubprocessTransport, transport)

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        self.inst.writer.feed(fd, data)
        # Under load (this pipe was read moments ago) pause it briefly so data accumulates and
        # is read in larger chunks; sparse output is read at once, keeping stdout/stderr order.
        now = time.monotonic()
        recent = now - self._last_read.get(fd, float("-inf")) < self.read_pause
        self._last_read[fd] = now
        if recent and len(data) < 65536 and self.transport is not None:
            # (the transport of an output pipe, stdout or stderr, reads)
            pipe = cast(asyncio.ReadTransport | None, self.transport.get_pipe_transport(fd))
            if pipe is not None and not pipe.is_closing():
                pipe.pause_reading()
                asyncio.get_running_loop().call_later(self.read_pause, _resume, pipe)

    def process_exited(self) -> None:
        self.on_exit(self.inst)

    def connection_lost(self, exc: Exception | None) -> None:
        self.inst.pipes_closed.set()


def _resume(pipe: asyncio.ReadTransport) -> None:
    with contextlib.suppress(Exception):
        if not pipe.is_closing():
            pipe.resume_reading()


class ContainerRun:
    """A spec container's life in the pod: its instances, restarts, back-off and state."""

    def __init__(self, spec: dict[str, Any], kind: str) -> None:
        self.spec = spec
        self.name = str(spec.get("name", ""))
        self.kind = kind  # "init" | "sidecar" | "regular"
        self.restart_count = 0
        self.last: Instance | None = None
        self.prev: Instance | None = None
        self.waiting: tuple[str, str] | None = None  # (reason, message) overrides the state
        self.ready = False
        self.env: dict[str, str] | None = None
        self.backoff: tuple[float, float] | None = None  # (duration, lastUpdate monotonic)
        self.task: asyncio.Task[int | None] | None = None

    def exec_probe(self) -> dict[str, Any] | None:
        """The container's readinessProbe when it is an `exec` one with a command (init
        containers are not probed)."""
        probe = self.spec.get("readinessProbe") if self.kind != "init" else None
        if (isinstance(probe, dict) and isinstance(probe.get("exec"), dict)
                and isinstance(probe["exec"].get("command"), list) and probe["exec"]["command"]):
            return probe
        return None


async def probe_loop(run: ContainerRun, inst: Instance, probe: dict[str, Any],
                     passes: Callable[[list[str], float], Awaitable[bool]], stopping: Callable[[], bool],
                     changed: Callable[[], None]) -> None:
    """Run the readiness probe while `inst` runs and the pod is not `stopping()`: `passes(command,
    timeout)` runs it once; the container's readiness follows the probe's thresholds, `changed()`
    told each time it flips."""
    cmd = [str(a) for a in probe["exec"]["command"]]

    def num(key: str, default: float) -> float:
        try:
            return max(0.0, float(probe.get(key) or default))
        except (TypeError, ValueError):
            return default

    initial = num("initialDelaySeconds", 0)
    period = max(0.1, num("periodSeconds", 10))
    timeout = max(0.1, num("timeoutSeconds", 1))
    need_ok = max(1, int(num("successThreshold", 1)))
    need_fail = max(1, int(num("failureThreshold", 3)))
    ok = fail = 0
    if initial:
        await asyncio.sleep(initial)
    while inst.running and not stopping():
        passed = await passes(cmd, timeout)
        ok, fail = (ok + 1, 0) if passed else (0, fail + 1)
        ready = run.ready
        if passed and ok >= need_ok:
            ready = True
        elif not passed and fail >= need_fail:
            ready = False
        if ready != run.ready and inst.running:
            run.ready = ready
            changed()
        await asyncio.sleep(period)
