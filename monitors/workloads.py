"""Grouping pods into workloads and ranks, by each framework's rules (see conventions.md).

- Kubeflow v1 jobs: `training.kubeflow.org/job-name` + `operator-name` (legacy `job-name`+`group-name`);
  role from `replica-type`, rank by the operator's env rule (PyTorch worker rank = index + 1).
- MPIJob v2beta1: `operator-name=mpi-operator`, role from `job-role` (launcher found by label, since
  its pod name has a random suffix).
- TrainJob / JobSet: `jobset.sigs.k8s.io/jobset-name`, role = replicatedJob name, rank from the
  job index and the completion index.
- Anything else that holds GPUs or is a batch Job: grouped by its top owner.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

from .records import JobRec, PodRec, ReplicaSpec, decimal

TK = "training.kubeflow.org/"
OPERATOR_KINDS = {
    "pytorchjob-controller": "PyTorchJob",
    "tfjob-controller": "TFJob",
    "xgboostjob-controller": "XGBoostJob",
    "jaxjob-controller": "JAXJob",
    "paddlejob-controller": "PaddleJob",
    "mpijob-controller": "MPIJob",
    "mpi-operator": "MPIJob",
}
FRAMEWORKS = {
    "PyTorchJob": "pytorch",
    "TFJob": "tensorflow",
    "XGBoostJob": "xgboost",
    "JAXJob": "jax",
    "PaddleJob": "paddle",
    "MPIJob": "mpi",
    "JobSet": "jobset",
    "Job": "batch",
}
ROLE_ORDER = {"launcher": 0, "master": 1, "chief": 2, "node": 3, "worker": 4, "ps": 5, "evaluator": 6}

WorkloadKey = tuple[str, str, str]  # (namespace, kind, name)


@dataclass(frozen=True, slots=True)
class Placement:
    role: str
    replica_index: int | None
    rank: int | None

    @property
    def label(self) -> str:
        return _label(self.role, self.replica_index)


@functools.lru_cache(maxsize=8192)  # (one string for every rank labelled alike: a dashboard keeps one per rank)
def _label(role: str, replica_index: int | None) -> str:
    if role == "launcher" and replica_index is None:
        return "launcher"
    return f"{role}-{replica_index if replica_index is not None else 0}"


_PLACED: dict[Placement, Placement] = {}  # every placement made, once: a dashboard keeps one per rank
PLACED_AT_MOST = 1 << 16


def framework_of(job: JobRec | None, kind: str) -> str:
    if job is not None and job.kind == "TrainJob":
        runtime = str(job.get_extra("runtime", "") or "")
        for key, fw in (("torch", "pytorch"), ("deepspeed", "deepspeed"), ("mpi", "mpi"), ("jax", "jax"),
                        ("xgboost", "xgboost"), ("mlx", "mlx")):
            if key in runtime:
                return fw
        return "trainer"
    if job is not None and job.group == "run.ai":
        jt = str(job.get_extra("jobType", "") or "").lower()
        return {"mpijob": "mpi", "pytorchjob": "pytorch", "tfjob": "tensorflow", "xgboostjob": "xgboost"}.get(
            jt, jt or "runai"
        )
    return FRAMEWORKS.get(kind, kind.lower())


def workload_of(pod: PodRec, jobs_by_uid: Mapping[str, JobRec], job_names: Mapping[tuple[str, str], set[str]]
                ) -> WorkloadKey | None:
    """Which workload a pod belongs to. `job_names`: (namespace, name) -> kinds present."""
    ns = pod.namespace
    name = pod.label(TK + "job-name")
    op = pod.label(TK + "operator-name")
    if not name and pod.label("group-name") == "kubeflow.org":
        name = pod.label("job-name")
    if name:
        kind = OPERATOR_KINDS.get(op, "")
        if not kind:
            kinds = job_names.get((ns, name), set()) & set(OPERATOR_KINDS.values())
            kind = sorted(kinds)[0] if kinds else ""
        if not kind and pod.owner and pod.owner.kind in FRAMEWORKS:
            kind = pod.owner.kind
        if kind:
            if "DistributedWorkload" in job_names.get((ns, name), set()):
                return (ns, "DistributedWorkload", name)
            return (ns, kind, name)
    jobset = pod.label("jobset.sigs.k8s.io/jobset-name")
    if jobset:
        kinds = job_names.get((ns, jobset), set())
        return (ns, "TrainJob" if "TrainJob" in kinds else "JobSet", jobset)
    # generic fallback: the top owner we know of
    owner = pod.owner
    if owner is None:
        return None
    job = jobs_by_uid.get(owner.uid)
    seen = 0
    while job is not None and job.owner is not None and seen < 5:
        parent = jobs_by_uid.get(job.owner.uid)
        if parent is None:
            return (ns, job.owner.kind, job.owner.name)
        job, seen = parent, seen + 1
    if job is not None:
        return (ns, job.kind, job.name)
    if pod.gpus > 0:
        return (ns, owner.kind, owner.name)
    return None


def _index(pod: PodRec) -> int | None:
    for key in (TK + "replica-index", "replica-index", "batch.kubernetes.io/job-completion-index"):
        v = decimal(pod.label(key))
        if v is not None:
            return v
    return decimal(pod.annotation("batch.kubernetes.io/job-completion-index"))



def placement(kind: str, pod: PodRec, job: JobRec | None) -> Placement:
    """Role, replica index and global rank of a pod, by its framework's rule (the same object for
    every pod placed alike)."""
    pl = _placement(kind, pod, job)
    got = _PLACED.get(pl)
    if got is None:
        if len(_PLACED) >= PLACED_AT_MOST:
            _PLACED.clear()
        got = _PLACED[pl] = pl
    return got


def _placement(kind: str, pod: PodRec, job: JobRec | None) -> Placement:
    idx = _index(pod)
    if kind == "MPIJob" or (kind == "DistributedWorkload" and pod.label(TK + "operator-name") == "mpi-operator"):
        role = pod.label(TK + "job-role") or pod.label(TK + "replica-type") or pod.label("mpi-job-role")
        if not role and pod.owner and pod.owner.kind == "Job":
            role = "launcher"
        if role == "master":  # MPIJob v1 marks the launcher with job-role=master
            role = "launcher"
        role = role or "worker"
        if role == "launcher":
            return Placement("launcher", idx, None)
        return Placement("worker", idx, idx)
    if kind in ("PyTorchJob", "TFJob", "XGBoostJob", "JAXJob", "PaddleJob", "DistributedWorkload"):
        role = (pod.label(TK + "replica-type") or pod.label("replica-type") or "worker").lower()
        i = idx if idx is not None else 0
        if kind == "PyTorchJob" or kind == "PaddleJob":
            if role != "worker":
                return Placement(role, idx, i)
            master = _replica(job, "master")
            return Placement(role, idx, i + (master.replicas if master is not None else 0))
        if kind == "XGBoostJob":
            master = _replica(job, "master")
            return Placement(role, idx, i + (master.replicas if master is not None and role == "worker" else 0))
        if kind == "TFJob":
            lead = 1 if _replica(job, "chief") is not None or _replica(job, "master") is not None else 0
            if role in ("chief", "master"):
                return Placement(role, idx, i)
            if role == "worker":
                return Placement(role, idx, i + lead)
            return Placement(role, idx, None)  # ps and evaluator hold no training rank
        return Placement(role, idx, i)
    if kind in ("TrainJob", "JobSet"):
        role = pod.label("jobset.sigs.k8s.io/replicatedjob-name") or "node"
        job_index = pod.label("jobset.sigs.k8s.io/job-index")
        per_job = 1
        if job:
            for r in job.replicas:
                if r.rtype == role:
                    n_jobs = decimal(pod.label("jobset.sigs.k8s.io/replicatedjob-replicas")) or 1
                    per_job = max(1, r.replicas // n_jobs)
        completion = idx if idx is not None else 0
        rank = (decimal(job_index) or 0) * per_job + completion
        if role == "launcher" or role.endswith("initializer"):
            return Placement(role, completion, None)
        return Placement(role, rank, rank)
    return Placement(pod.owner.kind.lower() if pod.owner else "pod", idx, idx)


def _replica(job: JobRec | None, rtype: str) -> ReplicaSpec | None:
    """The job's replica spec of that type (lower case), the last of its name as a dict of them keeps."""
    found = None
    for r in job.replicas if job is not None else ():
        if r.rtype.lower() == rtype:
            found = r
    return found


def lead_order(p: Placement) -> tuple[int, int]:
    return (ROLE_ORDER.get(p.role, 9), p.replica_index if p.replica_index is not None else 0)
