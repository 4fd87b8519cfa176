"""GPU nodes as the kubelet and the GPU operator's feature discovery label them."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

GPU_MODELS = {
    "NVIDIA-H100-80GB-HBM3": ("NVIDIA H100 80GB HBM3", 81559),
    "NVIDIA-A100-SXM4-80GB": ("NVIDIA A100-SXM4-80GB", 81920),
}


def gpu_node(
    name: str,
    gpus: int,
    *,
    index: int = 0,
    pool: str = "default",
    product: str = "NVIDIA-A100-SXM4-80GB",
    cpu: int = 64,
    memory_gi: int = 512,
    created: str = "2026-01-01T00:00:00Z",
) -> dict[str, Any]:
    mem_mib = GPU_MODELS.get(product, ("", 81920))[1]
    ip = f"10.0.{index // 250}.{index % 250 + 2}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node-pool": pool,
                "run.ai/node-pool": pool,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.memory": str(mem_mib),
            },
        },
        "spec": {"podCIDR": f"10.244.{index % 256}.0/24"},
        "status": {
            "capacity": {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "allocatable": {
                "cpu": str(cpu), "memory": f"{memory_gi - 2}Gi", "nvidia.com/gpu": str(gpus), "pods": "110",
            },
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                 "lastHeartbeatTime": created, "lastTransitionTime": created},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
                 "lastHeartbeatTime": created, "lastTransitionTime": created},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
                 "lastHeartbeatTime": created, "lastTransitionTime": created},
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status",
                 "lastHeartbeatTime": created, "lastTransitionTime": created},
            ],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "nodeInfo": {
                # the ids a kubelet reports (the official client requires them), stable per node name
                "machineID": hashlib.md5(f"machine/{name}".encode()).hexdigest(),
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"system.{name}")),
                "bootID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"boot.{name}")),
                "kubeletVersion": "v1.35.0", "kubeProxyVersion": "v1.35.0", "osImage": "Ubuntu 24.04 LTS",
                "kernelVersion": "6.8.0-49-generic", "containerRuntimeVersion": "containerd://2.0.0",
                "operatingSystem": "linux", "architecture": "amd64",
            },
        },
    }


def gpu_nodes(count: int, gpus: int, *, start: int = 0, pool: str = "default",
              product: str = "NVIDIA-A100-SXM4-80GB", prefix: str = "gpu-node") -> list[dict[str, Any]]:
    return [
        gpu_node(f"{prefix}-{i + 1:02d}", gpus, index=i, pool=pool, product=product)
        for i in range(start, start + count)
    ]
