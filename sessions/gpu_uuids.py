"""Which GPUs each pod holds, as the pod itself reports them: its `NVIDIA_VISIBLE_DEVICES` (the
device plugin's UUIDs) and `nvidia-smi -L`, read once per pod through pods/exec (bounded, timed
out). `ranks gpus` attributes by them the GPUs of nodes whose DCGM exporter has no pod labels.

Only the variable's value and nvidia-smi's device lines leave the pod; nothing else of its
environment is read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from monitors.gpu_fleet import DeviceReport, parse_reported
from monitors.kube import KubeClient

from .exec_bridge import ExecError, ExecSession

SCRIPT = 'printf "%s\\n" "$NVIDIA_VISIBLE_DEVICES"; nvidia-smi -L 2>/dev/null; true'
AT_ONCE = 16
OUTPUT_LIMIT = 64 * 1024

PodKey = tuple[str, str]


@dataclass
class Reported:
    """What each pod reports of its GPUs (whole GPUs and MIG devices), and the pods that could not
    be read (why)."""

    uuids: dict[PodKey, DeviceReport] = field(default_factory=dict)
    failed: dict[PodKey, str] = field(default_factory=dict)


async def _read(client: KubeClient, ns: str, pod: str, container: str | None, timeout: float) -> DeviceReport:
    out = bytearray()

    def sink(channel: int, data: bytes) -> None:
        if channel == 1 and len(out) < OUTPUT_LIMIT:
            out.extend(data[: OUTPUT_LIMIT - len(out)])

    async def go() -> None:
        session = await ExecSession.open(client, ns, pod, ["sh", "-c", SCRIPT], container=container, tty=False,
                                         stdin=False)
        try:
            await session.receive(sink)
        finally:
            await session.close()

    await asyncio.wait_for(go(), timeout)
    return parse_reported(out.decode("utf-8", errors="replace"))


async def reported_uuids(client: KubeClient, pods: Iterable[tuple[str, str, str | None]],
                         timeout: float = 15.0) -> Reported:
    """(namespace, pod, container or None) -> the GPUs it reports; at most `AT_ONCE` at a time."""
    got = Reported()
    gate = asyncio.Semaphore(AT_ONCE)
    todo: Sequence[tuple[str, str, str | None]] = list(dict.fromkeys(pods))

    async def one(ns: str, pod: str, container: str | None) -> None:
        async with gate:
            try:
                got.uuids[(ns, pod)] = await _read(client, ns, pod, container, timeout)
            except ExecError as exc:
                got.failed[(ns, pod)] = exc.message if hasattr(exc, "message") else str(exc)
            except TimeoutError:
                got.failed[(ns, pod)] = f"no answer in {timeout:g} s"
            except Exception as exc:  # (a pod that went away, a refused exec: said, not raised)
                got.failed[(ns, pod)] = str(exc) or type(exc).__name__

    await asyncio.gather(*(one(*p) for p in todo))
    return got
