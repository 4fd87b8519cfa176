"""Every GPU read in a child process, while the parent lists the cluster (`ranks gpus`).

Reading 40,000 GPUs (46 MB of Prometheus answers parsed, 335,000 series made into rows) and
listing the cluster (40,000 pods placed in their workloads) are both work of the CPU under one
GIL: in one process they take turns. Forked before the parent's first request, the child reads
with a `GpuMetrics` of its own (`read_fleet`: one query per field group, or every exporter) on
the other core, and hands back the reading and its source, pickled, in an unlinked file made before
the fork (the parent's own child: nothing else writes there); a pipe's end closing says it is done.
The child leaves with `os._exit` (no exit handler of the parent's runs twice); the parent kills it
if it stops waiting (`Apart.close`); a child that fails says why, as the reading's `problem`.

Where the process cannot fork (no `os.fork`, it fails, or another thread runs) `start` returns
None and the caller reads in its own process, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # (light at import: the child imports the metrics' modules, after the fork)
    from .gpu_fleet_source import FleetRead
    from .gpu_samples import MetricsSource
    from .metrics import GpuMetrics

    Reading = tuple[FleetRead, MetricsSource | None]


@dataclass
class Apart:
    """A reading under way in a child process: it writes its answer into `file` (unlinked, the
    user's alone) and exits, which closes the pipe's end `fd` waits on."""

    pid: int
    fd: int
    file: int
    reaped: bool = False
    waiting: bool = False  # a thread waits on `fd` (it closes `fd` and `file` when it is done)

    async def result(self) -> Reading:
        """The child's reading (waited for and unpickled in a thread: between the parent's own turns,
        while it waits on its LISTs). Its failure is the reading's `problem`, as a source's is."""
        self.waiting = True
        try:
            got = await asyncio.to_thread(self._answer)
        finally:
            self.close()
        if isinstance(got, tuple) and len(got) == 2 and got[0] == "error":
            from .gpu_fleet import Fleet
            from .gpu_fleet_source import FleetRead

            return FleetRead(Fleet(), 0, problem=str(got[1])), None
        read, source = cast("Reading", got)
        return read, source

    def _answer(self) -> object:
        try:
            while os.read(self.fd, 4096):  # (nothing is written there: its end closes when the child exits)
                pass
            size = os.fstat(self.file).st_size
            data = os.pread(self.file, size, 0) if size else b""
        finally:
            os.close(self.fd)
            os.close(self.file)
        try:
            return pickle.loads(data) if data else ("error", "the GPU reading process ended without an answer")
        except Exception as exc:  # (a truncated answer: the child killed meanwhile)
            return ("error", f"the GPU reading process's answer could not be read ({type(exc).__name__})")

    def close(self) -> None:
        """The child reaped (killed first if it is still reading); the pipe and the file closed
        unless a thread waits on them (it closes them once the child is gone)."""
        if self.reaped:
            return
        self.reaped = True
        with contextlib.suppress(OSError):
            if os.waitpid(self.pid, os.WNOHANG) == (0, 0):
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        if not self.waiting:
            for fd in (self.fd, self.file):
                with contextlib.suppress(OSError):
                    os.close(fd)


def start(make: Callable[[], GpuMetrics], *, direct: bool = False) -> Apart | None:
    """A child process reading every GPU with `make()`'s poller (`GpuMetrics.read_fleet`); None
    where this process cannot fork, or should not: another thread runs (a lock it holds would stay
    held in the child: `ranks gpus` run inside another program, as the tests and the SSH door's
    template run commands). Call it before any connection of the caller's is open."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    try:
        file = tempfile.TemporaryFile()  # noqa: SIM115 - its descriptor is kept (closed by `Apart.close`)
        r, w = os.pipe()
    except OSError:
        return None
    fd = os.dup(file.fileno())
    file.close()
    for stream in (sys.stdout, sys.stderr):  # (nothing buffered is written twice)
        with contextlib.suppress(Exception):
            stream.flush()
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        for x in (r, w, fd):
            os.close(x)
        return None
    if pid == 0:  # the child: read, answer, leave
        code = 0
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # (Ctrl-C ends it with the parent)
            _end_with(parent)
            asyncio.events._set_running_loop(None)  # (forked inside the parent's running loop)
            try:
                answer: object = asyncio.run(_read(make(), direct))
            except Exception as exc:  # (said by the parent, as a source's failure is)
                answer = ("error", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            view = memoryview(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
            while view:
                view = view[os.write(fd, view):]
        except BaseException:  # (whatever happens, the child never returns into the parent's code)
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    return Apart(pid, r, fd)


def _end_with(parent: int) -> None:
    """The child killed when its parent dies (Linux's PR_SET_PDEATHSIG; elsewhere it ends when
    its reading does), or ended now if the parent is already gone."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # (1: PR_SET_PDEATHSIG)
    if os.getppid() != parent:
        os._exit(1)


async def in_process(gm: GpuMetrics, direct: bool) -> Reading:
    """The same reading in this process (where it cannot fork)."""
    return await _read(gm, direct)


async def _read(gm: GpuMetrics, direct: bool) -> Reading:
    try:
        read = await gm.read_fleet(direct=direct)
        return read, gm.source
    finally:
        await gm.aclose()
