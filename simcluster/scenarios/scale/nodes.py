"""GPU nodes of the scale scenario: A100 and H100 pools, each node Ready, tainted for GPUs, with
the labels of NVIDIA's GPU operator and node-feature-discovery."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from .shared import (
    GPU,
    IMAGES,
    PYTORCHJOB,
    fields_v1,
    image_id_of,
    managed_entry,
    random_hex,
    random_uid,
    rfc3339,
)

KUBELET_VERSION = "v1.35.0"

_GPU_PRODUCTS = [
    # product label, pool, family, GPU MiB, cpu cores, memory Ki, instance type
    ("NVIDIA-A100-SXM4-80GB", "a100", "ampere", 81920, 256, 2113600512, "dgx-a100"),
    ("NVIDIA-H100-80GB-HBM3", "h100", "hopper", 81559, 224, 2113470240, "dgx-h100"),
]


@dataclass
class NodeInfo:
    """What the other builders need of a node: placement and pod IPs."""

    name: str
    ip: str
    cidr_base: str  # "10.128.3." ; pod IPs are appended
    cpu_milli: int
    product: str
    next_ip: int = 2


class NodeBuilder:
    def __init__(self, rng: random.Random, now: int, gpus_per_node: int) -> None:
        self.rng = rng
        self.now = now
        self.gpn = gpus_per_node
        self.node_info: list[NodeInfo] = []

    def nodes(self, count: int) -> list[dict[str, Any]]:
        """`count` nodes, three fifths A100 then H100 (`node_info` gets what the others need)."""
        rng = self.rng
        out: list[dict[str, Any]] = []
        width = max(4, len(str(count)))
        n_a100 = (count * 3 + 4) // 5
        for i in range(count):
            prod = _GPU_PRODUCTS[0] if i < n_a100 else _GPU_PRODUCTS[1]
            product, pool, family, gpu_mib, cores, mem_ki, itype = prod
            name = f"gpu-node-{i + 1:0{width}d}"
            ip = f"10.{(i >> 16) + 1}.{(i >> 8) & 255}.{(i & 255) + 1}" if i < 65000 else f"10.200.0.{i % 250}"
            cidr = f"10.{128 + ((i >> 8) & 127)}.{i & 255}."
            alloc_cpu = cores - 2
            self.node_info.append(NodeInfo(name, ip, cidr, alloc_cpu * 1000, product))
            created = self.now - rng.randint(20, 300) * 86400 - rng.randint(0, 86399)
            ready_since = self.now - rng.randint(3600, 20 * 86400)
            hb = self.now - rng.randint(0, 40)
            ts_c, ts_r, ts_hb = rfc3339(created), rfc3339(ready_since), rfc3339(hb)
            labels = {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": itype,
                "topology.kubernetes.io/region": "dc1",
                "topology.kubernetes.io/zone": f"dc1-{'abcd'[i % 4]}",
                "node-pool": pool,
                "run.ai/node-pool": pool,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(self.gpn),
                "nvidia.com/gpu.memory": str(gpu_mib),
                "nvidia.com/gpu.family": family,
                "nvidia.com/gpu.machine": itype.upper(),
                "nvidia.com/cuda.driver.major": "550",
                "nvidia.com/cuda.driver.minor": "127",
                "nvidia.com/cuda.runtime.major": "12",
                "nvidia.com/cuda.runtime.minor": "4",
                "nvidia.com/mig.strategy": "single",
                "feature.node.kubernetes.io/pci-10de.present": "true",
            }
            labels = dict(sorted(labels.items()))
            annotations = {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "nvidia.com/gpu-driver-upgrade-enabled": "true",
            }
            res_cap = {
                "cpu": str(cores),
                "ephemeral-storage": "3750770180Ki",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": f"{mem_ki}Ki",
                GPU: str(self.gpn),
                "pods": "110",
            }
            res_alloc = dict(res_cap)
            res_alloc["cpu"] = str(alloc_cpu)
            res_alloc["ephemeral-storage"] = "3456711745442"
            res_alloc["memory"] = f"{mem_ki - 4 * 1024 * 1024}Ki"
            spec = {
                "podCIDR": cidr + "0/24",
                "podCIDRs": [cidr + "0/24"],
                "taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}],
            }
            status = {
                "capacity": res_cap,
                "allocatable": res_alloc,
                "conditions": [
                    {"type": t, "status": "False", "lastHeartbeatTime": ts_hb, "lastTransitionTime": ts_r,
                     "reason": r, "message": m}
                    for t, r, m in (
                        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    )
                ]
                + [
                    {"type": "Ready", "status": "True", "lastHeartbeatTime": ts_hb, "lastTransitionTime": ts_r,
                     "reason": "KubeletReady", "message": "kubelet is posting ready status"}
                ],
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": random_hex(rng, 32),
                    "systemUUID": random_uid(rng),
                    "bootID": random_uid(rng),
                    "kernelVersion": "5.15.0-126-generic",
                    "osImage": "Ubuntu 22.04.5 LTS",
                    "containerRuntimeVersion": "containerd://1.7.24",
                    "kubeletVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
                "images": [
                    {"names": [image_id_of(img), img], "sizeBytes": 8_000_000_000 + 1_000_003 * k}
                    for k, img in enumerate(IMAGES[PYTORCHJOB][:3])
                ],
                "runtimeHandlers": [
                    {"name": h, "features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}}
                    for h in ("nvidia", "runc", "")
                ],
                "features": {"supplementalGroupsPolicy": True},
            }
            meta = {
                "name": name,
                "uid": random_uid(rng),
                "creationTimestamp": ts_c,
                "labels": labels,
                "annotations": annotations,
                "managedFields": [
                    managed_entry(
                        "kubelet",
                        "v1",
                        ts_c,
                        {"f:metadata": {"f:annotations": fields_v1(annotations, {}), "f:labels": fields_v1(labels, {})}},
                    ),
                    managed_entry("kube-controller-manager", "v1", ts_c, {"f:spec": fields_v1(spec, {}, root=True)}),
                    managed_entry(
                        "kubelet",
                        "v1",
                        ts_hb,
                        {"f:status": {"f:conditions": {}, "f:images": {}, "f:nodeInfo": {"f:bootID": {}}}},
                        "status",
                    ),
                ],
            }
            out.append(
                {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}
            )
        return out

