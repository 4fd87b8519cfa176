"""Who holds each GPU: every pod's owner, without the dashboard's model (`ranks gpus`).

The model groups every pod into its workload and builds each workload's view (every rank's view,
its status, its aggregates, the projects' and the nodes'); `ranks gpus` needs of a pod only its
owner: workload, rank, project, user. `GpuOwners` takes the pods' LIST (the Table rows `ranks list`
uses, `Monitor(pods_to=...)`) once the workload objects and namespaces are in the model, and reads
each row's workload and rank as the model does (`pod_rows.infer` from its name against its
namespace's workloads, `workloads.workload_of`, `workloads.placement`); the rows no workload claims
are read whole, as the model reads them (`Monitor.read_unclaimed`). Each owner is the one
`gpu_fleet.owners_of` makes from the model's views of the same cluster, field for field, and the
GPUs each node's pods hold the model's count. The listing runs while the GPUs are read (the other
process, `gpu_fleet_child`): this work is done meanwhile, not after.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .gpu_fleet import Owner, PodKey
from .model import project_of, workload_user
from .pod_rows import infer
from .records import JobRec, PodRec
from .workloads import WorkloadKey, lead_order, placement, workload_of

if TYPE_CHECKING:
    from .model import LiveModel
    from .monitor import Monitor

UNCLAIMED_READ = 512  # rows no workload claims read whole at most (as `Monitor.read_unclaimed`)


class GpuOwners:
    """Every listed pod's owner, from the workload objects and namespaces of the model of `sink`
    (which holds no pod: the pods come to `add`)."""

    def __init__(self) -> None:
        from .model import LiveModel

        self.model = LiveModel()
        self.pods: dict[PodKey, PodRec] = {}
        self.workload: dict[PodKey, WorkloadKey] = {}
        self._named = functools.lru_cache(maxsize=None)(self._jobs_named)

    def sink(self, model: LiveModel) -> Callable[[Iterable[tuple[PodKey, PodRec | None]]], None]:
        """`add`, placing pods against `model`'s workload objects (`Monitor`'s `pods_to`; a monitor
        made again, as `load_monitor` widens, starts it afresh)."""
        self.model = model
        self.pods.clear()
        self.workload.clear()
        self._named.cache_clear()
        return self.add

    def _jobs_named(self, namespace: str, name: str) -> list[JobRec]:
        m = self.model
        kinds = m.job_names.get((namespace, name))
        if not kinds:
            return []
        return [j for k in sorted(kinds) if (j := m.jobs.get((namespace, k, name))) is not None]

    def add(self, changes: Iterable[tuple[PodKey, PodRec | None]]) -> None:
        """A LIST's pods (`Monitor`'s `pods_to`): each row placed by its name, each whole pod by
        its labels and owners."""
        m = self.model
        named = self._named
        for pk, rec in changes:
            if rec is None:
                self.pods.pop(pk, None)
                self.workload.pop(pk, None)
                continue
            if rec.partial:
                rec = infer(rec, functools.partial(named, pk[0]))
            self.pods[pk] = rec
            key = workload_of(rec, m.jobs_by_uid, m.job_names)
            if key is None:
                self.workload.pop(pk, None)
            else:
                self.workload[pk] = key

    async def read_unclaimed(self, monitor: Monitor, limit: int = 32) -> None:
        """The running rows no workload claims read whole (a Deployment's server, a bare pod: the
        GPUs they hold, their owners), at most `UNCLAIMED_READ`, `limit` at a time."""
        kind = monitor.kinds.get(("", "pods"))
        wanted = [pk for pk, p in self.pods.items()
                  if p.partial and p.node and not p.terminated and pk not in self.workload][:UNCLAIMED_READ]
        if kind is None or not wanted:
            return
        gate = asyncio.Semaphore(limit)

        async def one(key: PodKey) -> PodRec | None:
            async with gate:
                return await monitor._read_pod(kind, key)

        self.add([(rec.key, rec) for rec in await asyncio.gather(*(one(k) for k in wanted)) if rec is not None])

    def held(self) -> dict[str, float]:
        """node -> the GPUs its pods hold (those not ended), as the model counts a node's allocation."""
        out: dict[str, float] = {}
        for p in self.pods.values():
            if p.node and not p.terminated:
                out[p.node] = out.get(p.node, 0.0) + p.gpus
        return out

    def owners(self) -> dict[PodKey, Owner]:
        """Each claimed pod's owner (as `gpu_fleet.owners_of` gives it from the model's views)."""
        groups: dict[WorkloadKey, list[PodRec]] = {}
        pods = self.pods
        for pk, key in self.workload.items():
            groups.setdefault(key, []).append(pods[pk])
        m = self.model
        out: dict[PodKey, Owner] = {}
        for (ns, kind, name), members in groups.items():
            job = m.jobs.get((ns, kind, name))
            if job is not None and job.kind == "Job" and job.owner is not None and job.owner.uid in m.jobs_by_uid:
                continue  # a child Job (MPI launcher, JobSet child) is part of its owner's workload
            if job is None and "DistributedWorkload" in m.job_names.get((ns, name), ()):
                job = m.jobs.get((ns, "DistributedWorkload", name))
            built = sorted(((placement(kind, p, job), p) for p in members), key=lambda b: (lead_order(b[0]), b[1].name))
            user = workload_user(job, built[0][1])
            project, _ = project_of(m.namespaces.get(ns), ns)
            workload = f"{kind}/{name}"
            for pl, p in built:
                out[(ns, p.name)] = Owner(ns, p.name, "", workload, kind, name, pl.rank, pl.label, project, user,
                                          p.created)
        return out

