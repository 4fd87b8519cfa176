"""Builders for Kubeflow-shaped objects (labels and names as conventions.md gives them), for tests
that exercise grouping without running the operators."""

from __future__ import annotations

from typing import Any

TK = "training.kubeflow.org/"
OPERATORS = {
    "PyTorchJob": "pytorchjob-controller",
    "TFJob": "tfjob-controller",
    "XGBoostJob": "xgboostjob-controller",
    "MPIJob": "mpi-operator",
}
FIELDS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
          "MPIJob": "mpiReplicaSpecs"}


def job(kind: str, name: str, ns: str, replicas: dict[str, int], *, gpus: int = 1,
        command: list[str] | None = None, conditions: list[tuple[str, str]] | None = None,
        uid: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    version = "v2beta1" if kind == "MPIJob" else "v1"
    specs = {}
    for rtype, n in replicas.items():
        c: dict[str, Any] = {"name": "main", "image": "img", "command": command or ["python", "train.py"]}
        if gpus and rtype not in ("Launcher", "PS"):
            c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
        specs[rtype] = {"replicas": n, "template": {"spec": {"containers": [c]}}}
    obj: dict[str, Any] = {
        "apiVersion": f"kubeflow.org/{version}", "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {FIELDS[kind]: specs, "runPolicy": {}},
        "status": {"conditions": [
            {"type": t, "status": "True", "reason": f"{kind}{t}", "message": f"{kind} {name} is {t.lower()}",
             "lastTransitionTime": "2026-11-01T00:00:00Z"} for t, _ in (conditions or [])
        ]},
    }
    if uid:
        obj["metadata"]["uid"] = uid
    return obj


def pod(kind: str, job_name: str, ns: str, rtype: str, index: int | None, *, phase: str = "Running",
        node: str = "node-1", gpus: int = 1, ready: bool = True, name: str | None = None,
        waiting: str | None = None, terminated: tuple[int, str] | None = None, restarts: int = 0,
        owner: dict[str, Any] | None = None, command: list[str] | None = None,
        unschedulable: str | None = None) -> dict[str, Any]:
    labels = {TK + "job-name": job_name, TK + "operator-name": OPERATORS[kind]}
    if kind == "MPIJob":
        labels[TK + "job-role"] = rtype.lower()
    else:
        labels[TK + "replica-type"] = rtype.lower()
    if index is not None:
        labels[TK + "replica-index"] = str(index)
    pod_name = name or f"{job_name}-{rtype.lower()}-{index}"
    c: dict[str, Any] = {"name": "main", "image": "img", "command": command or ["python", "train.py"]}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    state: dict[str, Any] = {"running": {"startedAt": "2026-11-01T00:00:00Z"}}
    if waiting:
        state = {"waiting": {"reason": waiting}}
    if terminated:
        state = {"terminated": {"exitCode": terminated[0], "reason": terminated[1],
                                "finishedAt": "2026-11-01T00:05:00Z"}}
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if unschedulable:
        conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                       "message": unschedulable}]
        node = ""
    meta: dict[str, Any] = {"name": pod_name, "namespace": ns, "labels": labels}
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"nodeName": node, "containers": [c]} if node else {"containers": [c]},
        "status": {
            "phase": phase, "podIP": "10.244.0.9" if node else "", "conditions": conditions,
            "containerStatuses": [] if unschedulable else [
                {"name": "main", "ready": ready, "restartCount": restarts, "state": state}
            ],
        },
    }
