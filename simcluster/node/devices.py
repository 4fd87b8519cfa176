"""Which GPUs of a node each container holds, as the kubelet's device manager and the NVIDIA
device plugin decide it (simulation only).

The kubelet allocates a container's `nvidia.com/gpu` when it starts the container: the first
free GPU indexes of its node, kept across the container's restarts until the pod ends, and gives
the container the device plugin's variable `NVIDIA_VISIBLE_DEVICES` with the GPUs' UUIDs (the
plugin's default `envvar` list strategy and `uuid` id strategy); the pod's own `env` may
override it, as it may on a real node. The DCGM simulator attributes its GPUs from the same
table (`sim.devices`), so what a pod's `nvidia-smi`, the exporter's `pod` label and the
container's environment say always agree; without a kubelet the exporter fills it itself for
the Running pods.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..cluster import SimCluster

GPU_RESOURCE = "nvidia.com/gpu"
VISIBLE = "NVIDIA_VISIBLE_DEVICES"


def gpu_uuid(node: str, index: int) -> str:
    """The stable UUID of GPU `index` of `node` (`GPU-` + a UUID, as NVML prints it)."""
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/gpu/{index}')}"


def container_gpus(container: dict[str, Any]) -> int:
    """The whole GPUs a container asks for (limits, else requests)."""
    res = container.get("resources") or {}
    for part in ("limits", "requests"):
        val = (res.get(part) or {}).get(GPU_RESOURCE)
        if val is not None:
            try:
                return max(0, int(str(val)))
            except ValueError:
                return 0
    return 0


@dataclass
class Allocation:
    uid: str  # the pod's
    namespace: str
    pod: str
    container: str
    gpus: list[int]


@dataclass
class Devices:
    """Per node: GPU index -> the allocation holding it."""

    nodes: dict[str, dict[int, Allocation]] = field(default_factory=dict)

    def allocate(self, node: str, capacity: int, uid: str, namespace: str, pod: str, container: str,
                 count: int) -> list[int]:
        """The container's GPUs: those it holds already, else the first `count` free ones (fewer
        when the node has fewer free: the scheduler placed it, so that means a capacity change)."""
        held = self.nodes.setdefault(node, {})
        for alloc in held.values():
            if alloc.uid == uid and alloc.container == container:
                return list(alloc.gpus)
        free = [i for i in range(capacity) if i not in held][:count]
        if not free:
            return []
        alloc = Allocation(uid, namespace, pod, container, free)
        for i in free:
            held[i] = alloc
        return list(free)

    def release(self, uid: str, node: str | None = None) -> None:
        """Free every GPU the pod `uid` holds (on `node`, or anywhere)."""
        for name, held in list(self.nodes.items()):
            if node is not None and name != node:
                continue
            for i in [i for i, a in held.items() if a.uid == uid]:
                del held[i]
            if not held:
                del self.nodes[name]

    def on(self, node: str) -> dict[int, Allocation]:
        """GPU index -> allocation on `node` (a copy)."""
        return dict(self.nodes.get(node, {}))

    def uids(self, node: str) -> set[str]:
        return {a.uid for a in self.nodes.get(node, {}).values()}


def of(sim: SimCluster) -> Devices:
    """The cluster's table (`sim.devices`), made on first use by the kubelet or the exporter."""
    if sim.devices is None:
        sim.devices = Devices()
    return sim.devices
