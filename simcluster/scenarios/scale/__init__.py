"""Synthetic objects for the ``scale`` benchmark scenario.

``--scenario scale --nodes 1000 --pods 20000`` loads a cluster's worth of plain
API objects into the fake API server: GPU nodes, Run:ai style project
namespaces (``runai-<team>`` labelled ``runai/queue=<team>``) plus a few plain
ones, one ``ResourceQuota`` per namespace on ``requests.nvidia.com/gpu``,
Kubeflow training jobs (PyTorchJob and TFJob ``kubeflow.org/v1``, MPIJob
``kubeflow.org/v2beta1`` with its ``batch/v1`` launcher Job) and their pods.
No process backs any of the pods.

Labels, pod names and injected env variables follow
``docs/conventions.md`` sections 1, 2, 4 and 6.6.

GPU accounting: every Running pod that requests ``nvidia.com/gpu`` is bound
to a node with enough free GPUs, so per-node requests never exceed
allocatable. With the defaults (1000 nodes x 8 GPUs = 8,000 GPUs for 20,000
pods, ~93 % of them Running) not every pod can hold a whole GPU, so the
builder spends about 90 % of the GPU capacity on randomly chosen jobs and
makes the rest of the running jobs CPU-only (data preparation, evaluation,
tokenisation...). Pending jobs keep their GPU requests (that is why they are
Unschedulable). MPI launchers and TF parameter servers never request GPUs.

Building is template based: one `Template` per (job, replica type) with a few substitution
tokens (name, uid, index, rank, node...), filled in per pod, and one per image and resources for the
Running pods' statuses. Filling copies only the dicts and lists on the way to a token and shares
everything else between the pods of a template (tolerations, resources, most of the env, volumes,
ports...), as the ``managedFields[*].fieldsV1`` trees are shared between pods of the same shape.
100,000 pods build in about 6-8 s on a 2-vCPU VM into ~1.2 GB of Python objects. The objects are
therefore read-only below the levels that vary: copy before editing one in place (``churn_pod``
and the object store copy before they change anything; stored objects are never modified).

The builders, in the order they draw from one seeded random stream:
`namespaces` (namespaces, then quotas last), `nodes`, `plan` (jobs, their
states and placement), `workloads` (each job's pods, with `pod_status`'s
statuses, then its custom object and launcher Job); `shared` holds what they
have in common (kinds, images, timestamps, ids, managedFields).
"""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .namespaces import NamespaceBuilder
from .nodes import NodeBuilder
from .plan import Planner
from .pod_status import PodStatusBuilder, churn_pod
from .shared import epoch_of
from .workloads import WorkloadBuilder

__all__ = ["ScaleObjects", "build_scale", "churn_pod"]


@dataclass
class ScaleObjects:
    """Everything the scale scenario loads, grouped by kind family."""

    namespaces: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    quotas: list[dict[str, Any]] = field(default_factory=list)
    # PyTorchJob/MPIJob/TFJob custom objects and MPI launcher batch/v1 Jobs
    jobs: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)

    def all(self) -> Iterator[dict[str, Any]]:
        """Namespaces, nodes, quotas, jobs, pods, in that order."""
        yield from self.namespaces
        yield from self.nodes
        yield from self.quotas
        yield from self.jobs
        yield from self.pods


def build_scale(
    nodes: int = 1000,
    pods: int = 20000,
    *,
    namespaces: int = 50,
    gpus_per_node: int = 8,
    seed: int = 0,
    now: datetime | None = None,
) -> ScaleObjects:
    """Build the synthetic cluster. Deterministic for a given seed and ``now``.

    Exactly ``pods`` pods are produced, grouped into training jobs of
    2..64 pods (about 20 on average).
    """
    if nodes < 0 or pods < 0 or namespaces < 1 or gpus_per_node < 0:
        raise ValueError("nodes, pods, gpus_per_node must be >= 0 and namespaces >= 1")
    # Hundreds of thousands of fresh containers would trigger the cyclic GC
    # over and over (each full pass walks the whole growing heap); nothing
    # built here is cyclic, so pause it for the duration.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _build(nodes, pods, namespaces, gpus_per_node, seed, now)
    finally:
        if gc_was_enabled:
            gc.enable()


def _build(n_nodes: int, n_pods: int, n_namespaces: int, gpus_per_node: int, seed: int,
           now: datetime | None) -> ScaleObjects:
    """The builders in turn, drawing from one random stream (the order fixes the result)."""
    rng = random.Random(seed)
    at = epoch_of(now)
    out = ScaleObjects()
    namespaces = NamespaceBuilder(rng, at)
    out.namespaces = namespaces.namespaces(n_namespaces)
    node_builder = NodeBuilder(rng, at, gpus_per_node)
    out.nodes = node_builder.nodes(n_nodes)
    planner = Planner(rng, at, node_builder.node_info, gpus_per_node, namespaces)
    jobs = planner.plan_jobs(n_pods)
    planner.place(jobs)
    workloads = WorkloadBuilder(rng, at, node_builder.node_info, PodStatusBuilder(rng, at, n_nodes))
    for job in jobs:
        workloads.emit_job(job)
    out.jobs, out.pods = workloads.jobs, workloads.pods
    out.quotas = namespaces.quotas(workloads.gpu_used_ns)
    return out


