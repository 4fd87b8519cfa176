"""What the operators' tests share: the marker, manifests' builders, the waits and readers of
jobs and pods (test_operators: the Kubeflow jobs; test_operators_mpi: MPIJob and batch/v1 Jobs)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from simcluster.scenarios.nodes import gpu_nodes
from tests import waiting

OPS = pytest.mark.simcluster(components=("operators", "scheduler"))
NS = "default"
GPU = "nvidia.com/gpu"


# -- helpers ---------------------------------------------------------------------------------------
def not_found(exc: Exception) -> bool:
    """A 404: the object is not created yet (the operator has not got to it)."""
    return isinstance(exc, ApiException) and exc.status == 404


# the shared poller; a 404 (an object the operator has yet to create) counts as "not yet"
wait_for = partial(waiting.wait_for, ignore=not_found)


def add_nodes(simcluster, count: int = 4, gpus: int = 8, **kw: Any) -> None:
    for node in gpu_nodes(count, gpus, **kw):
        simcluster.call(simcluster.sim.apply, node)


def container(name: str, cmd: list[str] | None = None, gpus: int = 0, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "registry.local/train:1", **extra}
    if cmd is not None:
        c["command"] = cmd
    if gpus:
        c["resources"] = {"limits": {GPU: str(gpus)}}
    return c


def replica(n: int | None, c: dict[str, Any], policy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [c]}}}
    if n is not None:
        spec["replicas"] = n
    if policy:
        spec["restartPolicy"] = policy
    return spec


def pytorchjob(name: str, workers: int = 2, gpus: int = 1, policy: str | None = None,
               run: dict[str, Any] | None = None, cmd: list[str] | None = None) -> dict[str, Any]:
    cmd = cmd or ["python", "train.py"]
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "runPolicy": run or {},
            "pytorchReplicaSpecs": {
                "Master": replica(1, container("pytorch", cmd, gpus), policy),
                "Worker": replica(workers, container("pytorch", cmd, gpus), policy),
            },
        },
    }


def mpijob(name: str, workers: int = 2, launcher_cmd: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "slotsPerWorker": 4,
            "mpiReplicaSpecs": {
                "Launcher": replica(1, container("launcher", launcher_cmd or ["mpirun", "-np", "8", "python", "t.py"])),
                "Worker": replica(workers, container("worker", None, gpus=4)),
            },
            **spec,
        },
    }


PLURALS = {"PyTorchJob": ("v1", "pytorchjobs"), "TFJob": ("v1", "tfjobs"), "XGBoostJob": ("v1", "xgboostjobs"),
           "MPIJob": ("v2beta1", "mpijobs")}


def create(custom, obj: dict[str, Any]) -> dict[str, Any]:
    version, plural = PLURALS[obj["kind"]]
    return custom.create_namespaced_custom_object("kubeflow.org", version, NS, plural, obj)


def get_job(custom, kind: str, name: str) -> dict[str, Any]:
    version, plural = PLURALS[kind]
    return custom.get_namespaced_custom_object("kubeflow.org", version, NS, plural, name)


def cond(job: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return c
    return None


def has_cond(custom, kind: str, name: str, ctype: str, status: str = "True") -> Callable[[], Any]:
    def check() -> Any:
        job = get_job(custom, kind, name)
        c = cond(job, ctype)
        return job if c is not None and c["status"] == status else None

    return check


def pods_of(core, job: str) -> dict[str, Any]:
    pods = core.list_namespaced_pod(NS, label_selector=f"training.kubeflow.org/job-name={job}").items
    return {p.metadata.name: p for p in pods}


def set_phase(core, name: str, phase: str, *, container_name: str = "pytorch", exit_code: int | None = None,
              ready: bool | None = None, restarts: int = 0) -> None:
    """Act as the kubelet: write the pod's phase and container state through pods/status."""
    state: dict[str, Any]
    if phase == "Running":
        state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    elif phase in ("Succeeded", "Failed"):
        code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
        state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}}
    else:
        state = {"waiting": {"reason": "ContainerCreating"}}
    is_ready = phase == "Running" if ready is None else ready
    status = {
        "phase": phase,
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True" if is_ready else "False"},
        ],
        "containerStatuses": [{
            "name": container_name, "ready": is_ready, "restartCount": restarts, "image": "img", "imageID": "",
            "state": state,
        }],
    }
    core.patch_namespaced_pod_status(name, NS, {"status": status})


def env_of(pod) -> dict[str, str | None]:
    return {e.name: e.value for e in pod.spec.containers[0].env or []}
