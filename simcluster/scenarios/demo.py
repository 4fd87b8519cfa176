"""The demo scenario: GPU nodes in two pools, Run:ai projects with quotas, a limited user, and
(when the operators run) workloads that exercise every view (see demo_workloads)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..apiserver.auth import Rule
from ..gpu import readings as rd
from .nodes import gpu_nodes

if TYPE_CHECKING:
    from ..cluster import SimCluster

PROJECTS = {"team-a": 16, "team-b": 8}


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}


def gpu_metrics_rules(exporters: str = "gpu-operator", prometheus: str = "monitoring") -> tuple[Rule, ...]:
    """What a user needs to read GPU metrics through the API server, and no more: list the DCGM
    exporter pods and scrape them through the pod proxy; get the Prometheus service and query it
    through the service proxy."""
    return (Rule.of(("get", "list"), ["pods", "pods/proxy"], [""], namespaces=[exporters]),
            Rule.of(("get",), ["services", "services/proxy"], [""], namespaces=[prometheus]))


def gpu_quota(ns: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": ns},
        "spec": {"hard": {"requests.nvidia.com/gpu": str(gpus)}},
        "status": {"hard": {"requests.nvidia.com/gpu": str(gpus)}, "used": {"requests.nvidia.com/gpu": "0"}},
    }


# what the GPUs view and its doctor have to show (`simcluster.gpu.readings`): a node whose
# exporter has no pod-resources mount and only the default counters (one the demo's jobs leave
# free: their ranks' figures come from the pod labels), an A100 node split into MIG devices (2 GPUs
# x 2 instances: its 4 `nvidia.com/gpu`), a badly cooled GPU that throttles when busy
GPU_SETTINGS: dict[str, dict[str, str]] = {
    "h100-node-04": {rd.POD_LABELS_LABEL: "false", rd.COUNTERS_LABEL: "default"},
    "a100-node-04": {rd.MIG_LABEL: "all-3g.40gb", "nvidia.com/mig.strategy": "single"},
    "h100-node-01": {rd.HOT_LABEL: "1"},
}


def with_gpu_settings(node: dict[str, Any]) -> dict[str, Any]:
    node["metadata"]["labels"].update(GPU_SETTINGS.get(node["metadata"]["name"], {}))
    return node


def load_demo(sim: SimCluster) -> None:
    for node in gpu_nodes(4, 8, pool="h100", product="NVIDIA-H100-80GB-HBM3", prefix="h100-node"):
        sim.apply(with_gpu_settings(node))
    for node in gpu_nodes(4, 4, pool="a100", product="NVIDIA-A100-SXM4-80GB", prefix="a100-node"):
        sim.apply(with_gpu_settings(node))
    for project, gpus in PROJECTS.items():
        ns = f"runai-{project}"
        sim.apply(namespace(ns, {"runai/queue": project}))
        sim.apply(gpu_quota(ns, gpus))
    sim.apply(namespace("research"))
    sim.apply(gpu_quota("research", 8))
    sim.apply(namespace("gpu-operator"))
    sim.apply(namespace("monitoring"))
    sim.add_namespace_reader("alice", ["runai-team-a"], write=True)
    # and may read GPU metrics, as docs/ssh.md has an admin grant them (the Role ranks-gpu-metrics):
    # the DCGM exporters through the pod proxy, Prometheus (`ranks demo`'s) through the service proxy
    sim.authz.bind("user:alice", *gpu_metrics_rules())
    if "operators" in sim.components:
        from .demo_workloads import demo_workloads

        for obj in demo_workloads():
            sim.apply(obj)
