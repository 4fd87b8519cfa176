"""The objects the sessions/ unit tests share: a spec for `ranks submit`, the parts of a rendered
manifest, a session as the API server returns it, and workloads in a model (an MPI one with its
launcher) for picking the rank a shell opens."""

from __future__ import annotations

import copy
from typing import Any

from monitors.model import LiveModel
from monitors.model_views import WorkloadView
from sessions.manifests import SubmitSpec, render
from tests.kubeflow_objects import job, pod
from tests.unit.test_model import load

NS = "runai-team-a"
SLEEP = ["sleep", "infinity"]
ROLES = {"mpi": ("Launcher", "Worker"), "pytorch": ("Master", "Worker"), "tensorflow": ("Chief", "Worker"),
         "xgboost": ("Master", "Worker")}
KINDS = {"mpi": ("MPIJob", "kubeflow.org/v2beta1", "mpiReplicaSpecs"),
         "pytorch": ("PyTorchJob", "kubeflow.org/v1", "pytorchReplicaSpecs"),
         "tensorflow": ("TFJob", "kubeflow.org/v1", "tfReplicaSpecs"),
         "xgboost": ("XGBoostJob", "kubeflow.org/v1", "xgbReplicaSpecs")}


def spec(**kw: Any) -> SubmitSpec:
    base: dict[str, Any] = {"name": "sess", "framework": "pytorch", "image": "nvcr.io/nvidia/pytorch:24.01-py3",
                            "workers": 2, "namespace": NS, "project": "team-a", "user": "alice", "gpus": 1,
                            "interactive": True}
    base.update(kw)
    return SubmitSpec(**base)


def replicas(manifest: dict[str, Any]) -> dict[str, Any]:
    field = next(k for k in manifest["spec"] if k.endswith("ReplicaSpecs"))
    return manifest["spec"][field]


def pod_spec(manifest: dict[str, Any], role: str) -> dict[str, Any]:
    return replicas(manifest)[role]["template"]["spec"]


def main(manifest: dict[str, Any], role: str) -> dict[str, Any]:
    return pod_spec(manifest, role)["containers"][0]


def as_served(manifest: dict[str, Any]) -> dict[str, Any]:
    """The job as the API server returns it: server-set metadata, status, a kubectl annotation."""
    j = copy.deepcopy(manifest)
    j["metadata"].update(uid="0b3c", resourceVersion="4711", creationTimestamp="2026-11-01T00:00:00Z", generation=2,
                         managedFields=[{"manager": "ranks"}], finalizers=["x"])
    j["metadata"].setdefault("annotations", {}).update({
        "ranks/submit-id": "s-123", "kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "vision"})
    j["spec"]["runPolicy"]["suspend"] = True
    j["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    return j


def session(framework: str = "pytorch", **kw: Any) -> dict[str, Any]:
    return as_served(render(spec(framework=framework, gpus=2, cpu="8", memory="32Gi", env=["NCCL_DEBUG=INFO"],
                                 volumes=["data:/data", "ckpt:/ckpt:ro"], node_pool="h100", **kw)))


def workload(kind: str, name: str, replicas_: dict[str, int], pods: list[dict[str, Any]], **kw: Any) -> WorkloadView:
    m = LiveModel()
    load(m, [job(kind, name, NS, replicas_, conditions=[("Running", "")], **kw)], pods)
    return m.workloads[(NS, kind, name)]


def mpi(with_launcher: bool = True, workers_ready: bool = True) -> WorkloadView:
    pods = [pod("MPIJob", "hvd", NS, "Worker", i, ready=workers_ready) for i in (1, 0)]
    if with_launcher:
        pods.insert(1, pod("MPIJob", "hvd", NS, "Launcher", None, gpus=0, name="hvd-launcher-x7k2p", command=SLEEP))
    return workload("MPIJob", "hvd", {"Launcher": 1, "Worker": 2}, pods, command=SLEEP)

