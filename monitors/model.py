"""The live model: records in, views out, as keyed diffs.

Informers hand it record changes; it marks the workloads and projects they touch as dirty and,
on `flush()`, rebuilds only those views and reports what changed. The caller decides when to
flush (the monitor coalesces a burst of events into one flush).

It also keeps what later diagnostics need per rank: GPU utilisation history and the time of the
last log line.
"""

from __future__ import annotations

import functools
import shlex
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from .gpu_fleet import throttle_names
from .model_views import (
    ConditionView,
    FirstFailure,
    GpuXid,
    KeyedDiff,
    ModelDiff,
    NodeView,
    ProjectView,
    RankView,
    WorkloadView,
    diff,
)
from .pod_rows import infer
from .rank_brief import RankBrief, RankLike, rank_message, rank_ready
from .records import (
    EventRec,
    Exit,
    JobRec,
    NamespaceRec,
    NodeRec,
    PodRec,
    QuotaRec,
    pairs,
    stopped_by_deletion,
)
from .row_names import RowNames
from .workloads import ROLE_ORDER, Placement, WorkloadKey, framework_of, lead_order, placement, workload_of

PodKey = tuple[str, str]
WorkloadViews = Literal["full", "status", "none"]
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease"})
USER_KEYS = ("ranks/user", "user", "runai/user", "run.ai/user", "createdBy", "app.kubernetes.io/created-by")


def workload_user(job: JobRec | None, lead: PodRec | None) -> str:
    """The workload's user: its object's label or annotation, else its lead pod's (`USER_KEYS`)."""
    for src in (job, lead):
        if src is None:
            continue
        for k in USER_KEYS:
            user = src.label(k) or src.annotation(k)
            if user:
                return user
    return ""
TERMINAL = {"Succeeded", "Failed"}
HISTORY = 240  # GPU samples kept per rank


@dataclass(frozen=True, slots=True)
class GpuReading:
    state: str  # ok / no data / stale / unavailable
    util: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    xid: int | None = None  # the last XID its GPUs raised while it ran (0: none; None: not read)
    throttle: int | None = None  # its GPUs' clock-event reasons (bitmask; None: not exported)


def project_of(ns: NamespaceRec | None, namespace: str) -> tuple[str, bool]:
    """(project name, is Run:ai) for a namespace."""
    if ns is not None:
        for key in ("runai/queue", "kai.scheduler/queue"):
            v = ns.label(key)
            if v:
                return v, True
    if namespace.startswith("runai-"):
        return namespace[len("runai-"):], True
    return namespace, False


def is_sleep_infinity(command: Iterable[str]) -> bool:
    command = tuple(command)
    if not any("sleep" in part for part in command):
        return False
    words: list[str] = []
    for part in command:
        try:
            words += shlex.split(part)
        except ValueError:
            words += part.split()
    for i, w in enumerate(words):
        if w.rsplit("/", 1)[-1] == "sleep" and i + 1 < len(words) and words[i + 1] in ("infinity", "inf"):
            return True
    return False


class LiveModel:
    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self.now = now
        self.pods: dict[PodKey, PodRec] = {}
        self.jobs: dict[WorkloadKey, JobRec] = {}
        self.jobs_by_uid: dict[str, JobRec] = {}
        self.job_names: dict[tuple[str, str], set[str]] = {}
        self.namespaces: dict[str, NamespaceRec] = {}
        self.quotas: dict[tuple[str, str], QuotaRec] = {}
        self.node_recs: dict[str, NodeRec] = {}
        self.events: dict[tuple[str, str], EventRec] = {}
        self.pod_workload: dict[PodKey, WorkloadKey] = {}
        self.workload_pods: dict[WorkloadKey, set[PodKey]] = {}
        self._wl_keys: dict[WorkloadKey, WorkloadKey] = {}  # (each workload's key, one tuple for all its pods)
        self.workloads: dict[WorkloadKey, WorkloadView] = {}
        self.projects: dict[str, ProjectView] = {}
        self.nodes: dict[str, NodeView] = {}
        self.gpu: dict[PodKey, GpuReading] = {}
        self.gpu_xid: dict[PodKey, tuple[int, float]] = {}  # the last XID each pod's GPUs raised, first seen
        self.gpu_xids: dict[PodKey, GpuXid] = {}  # the same from Prometheus' history: which GPU, and when
        self.node_gpu: dict[str, tuple[float | None, float | None]] = {}
        self.gpu_history: dict[PodKey, deque[tuple[float, float]]] = {}
        self.last_log: dict[PodKey, float] = {}
        # told of each pod whose containers' terminations changed, as it is applied (before the
        # coalesced diff: a pod that fails and is deleted at once is seen here, not in a diff)
        self.exit_listeners: list[Callable[[PodRec], None]] = []
        # the time of each pod's latest GPU reading at or above `busy_threshold` (%): how long a GPU
        # has been idle, without scanning its history (diagnostics.hangs, per refresh, every pod)
        self.busy_threshold = 5.0
        self.busy_at: dict[PodKey, float] = {}
        self.status_changed = False
        # a one-shot command's model: every workload arrives before its pods and none changes after,
        # so no pod is ever regrouped (no hints kept); its rank views are cached all the same, as the
        # pods read whole after the first picture (`Monitor.explain_pending`) rebuild their workloads
        self.one_shot = False
        # what a flush builds of the workloads: "full" views; "status" their status alone, in
        # `statuses` (a one-shot command that counts them by status and shows none: `ranks
        # projects`); "none" (one that shows no workload: `ranks top nodes`)
        self.workload_views: WorkloadViews = "full"
        self.statuses: dict[WorkloadKey, str] = {}
        self._events_touched: set[tuple[str, str]] = set()
        self._by_hint: dict[tuple[str, str], set[PodKey]] = {}
        self._row_names = RowNames()  # the Table rows' names: which a workload may claim by its name
        self._children: dict[str, set[WorkloadKey]] = {}  # owner uid -> the jobs it owns
        self._rank_cache: dict[PodKey, tuple[PodRec, JobRec | None, GpuReading | None, float | None,
                                             Placement, RankView]] = {}
        self._dirty: set[WorkloadKey] = set()
        # incremental aggregates, so a flush costs what changed, not the cluster's size
        self._ns_alloc: dict[str, float] = {}
        self._node_alloc: dict[str, float] = {}
        self._node_pods: dict[str, int] = {}
        self._ns_util: dict[str, float] = {}
        self._dirty_ns: set[str] = set()
        self._dirty_nodes: set[str] = set()
        self._all_ns_dirty = True
        self._all_nodes_dirty = True
        self._ns_workloads: dict[str, list[WorkloadKey]] = {}
        self._ns_workloads_stale = True
        self._runai_any = False

    # -- input ---------------------------------------------------------------------------------
    def apply_pods(self, changes: Iterable[tuple[PodKey, PodRec | None]]) -> None:
        for pk, rec in changes:
            old_wl = self.pod_workload.get(pk)
            prev = self.pods.get(pk)
            if rec is not None and rec.partial:  # a Table row: its workload read from its name
                rec = infer(rec, functools.partial(self._jobs_named, pk[0]))
            self._account(prev, -1)
            self._account(rec, +1)
            if prev is not None and not self.one_shot:
                for h in _hints(prev):
                    members = self._by_hint.get(h)
                    if members is not None:
                        members.discard(pk)
                        if not members:
                            del self._by_hint[h]
                if prev.partial:
                    self._row_names.discard(*pk)
            if rec is None:
                self.pods.pop(pk, None)
                self._rank_cache.pop(pk, None)
                self.gpu_history.pop(pk, None)
                self.busy_at.pop(pk, None)
                self.last_log.pop(pk, None)
            else:
                self.pods[pk] = rec
                if not self.one_shot:
                    for h in _hints(rec):
                        self._by_hint.setdefault(h, set()).add(pk)
                    if rec.partial:
                        self._row_names.add(*pk)
            self._regroup(pk, old_wl, inferred=True)
            if rec is not None and rec.exits and self.exit_listeners and (prev is None or prev.exits != rec.exits):
                for listener in self.exit_listeners:
                    listener(rec)

    def _account(self, p: PodRec | None, sign: int) -> None:
        if p is None:
            return
        if p.node and not p.terminated:
            self._node_alloc[p.node] = self._node_alloc.get(p.node, 0.0) + sign * p.gpus
            self._node_pods[p.node] = self._node_pods.get(p.node, 0) + sign
            self._dirty_nodes.add(p.node)
            if not p.deleting:
                self._ns_alloc[p.namespace] = self._ns_alloc.get(p.namespace, 0.0) + sign * p.gpus
        self._dirty_ns.add(p.namespace)

    def _regroup(self, pk: PodKey, old_wl: WorkloadKey | None, inferred: bool = False) -> None:
        rec = self.pods.get(pk)
        if rec is not None and rec.partial and not inferred:  # a row whose workload may have changed
            read = infer(rec, lambda name: self._jobs_named(pk[0], name))
            if read is not rec:
                self._account(rec, -1)
                self._account(read, +1)
                self.pods[pk] = rec = read
        new_wl = workload_of(rec, self.jobs_by_uid, self.job_names) if rec is not None else None
        if old_wl is not None and old_wl != new_wl:
            members = self.workload_pods.get(old_wl)
            if members is not None:
                members.discard(pk)
                if not members:
                    del self.workload_pods[old_wl]
                    self._wl_keys.pop(old_wl, None)
            self.pod_workload.pop(pk, None)
        if new_wl is not None:
            new_wl = self._wl_keys.setdefault(new_wl, new_wl)
            self.pod_workload[pk] = new_wl
            self.workload_pods.setdefault(new_wl, set()).add(pk)
            self._dirty.add(new_wl)
        if old_wl is not None:
            self._dirty.add(old_wl)

    def _jobs_named(self, namespace: str, name: str) -> list[JobRec]:
        kinds = self.job_names.get((namespace, name))
        if not kinds:
            return []
        return [j for k in sorted(kinds) if (j := self.jobs.get((namespace, k, name))) is not None]

    def apply_jobs(self, changes: Iterable[tuple[WorkloadKey, JobRec | None]]) -> None:
        affected: set[PodKey] = set()
        for key, rec in changes:
            prev = self.jobs.get(key)
            if prev is not None:
                self.jobs.pop(prev.key, None)
                self.jobs_by_uid.pop(prev.uid, None)
                names = self.job_names.get((prev.namespace, prev.name))
                if names is not None:
                    names.discard(prev.kind)
                    if not names:
                        del self.job_names[(prev.namespace, prev.name)]
                self._dirty.add(prev.key)
            for j in (prev, rec):
                if j is not None and (prev is None or rec is None or prev.uid != rec.uid or prev.owner != rec.owner):
                    for h in ((j.namespace, j.name), (j.namespace, j.uid)):
                        affected |= self._by_hint.get(h, set())
                    affected.update(self._row_names.claimable(j.namespace, j.name))
            if prev is not None and prev.owner is not None:
                kids = self._children.get(prev.owner.uid)
                if kids is not None:
                    kids.discard(prev.key)
                    if not kids:
                        del self._children[prev.owner.uid]
            # a child Job (MPI launcher, JobSet child) shows as its own workload only while its
            # owner is unknown: the owner coming or going rebuilds it
            for j in (prev, rec):
                if j is not None:
                    self._dirty |= self._children.get(j.uid, set())
            if rec is not None:
                if rec.owner is not None:
                    self._children.setdefault(rec.owner.uid, set()).add(rec.key)
                self.jobs[rec.key] = rec
                self.jobs_by_uid[rec.uid] = rec
                self.job_names.setdefault((rec.namespace, rec.name), set()).add(rec.kind)
                self._dirty.add(rec.key)
                self._dirty_ns.add(rec.namespace)
            if prev is not None:
                self._dirty_ns.add(prev.namespace)
        # a job appearing or going can change how its pods group (launcher owners, DW wrappers)
        for pk in affected:
            self._regroup(pk, self.pod_workload.get(pk))

    def apply_namespaces(self, changes: Iterable[tuple[str, NamespaceRec | None]]) -> None:
        for key, rec in changes:
            if rec is None:
                self.namespaces.pop(str(key), None)
            else:
                self.namespaces[rec.name] = rec
            for wl in self.workload_pods:
                if wl[0] == key:
                    self._dirty.add(wl)
            self._dirty_ns.add(str(key))

    def apply_quotas(self, changes: Iterable[tuple[tuple[str, str], QuotaRec | None]]) -> None:
        for key, rec in changes:
            if rec is None:
                self.quotas.pop(key, None)
            else:
                self.quotas[(rec.namespace, rec.name)] = rec
            self._dirty_ns.add(key[0])

    def apply_nodes(self, changes: Iterable[tuple[str, NodeRec | None]]) -> None:
        for key, rec in changes:
            if rec is None:
                self.node_recs.pop(str(key), None)
            else:
                self.node_recs[rec.name] = rec
            self._dirty_nodes.add(str(key))

    def apply_events(self, changes: Iterable[tuple[tuple[str, str], EventRec | None]]) -> None:
        for key, rec in changes:
            if rec is None:
                old = self.events.pop(key, None)
                if old is not None:
                    self._events_touched.add((old.namespace, old.object_name))
            else:
                self.events[(rec.namespace, rec.name)] = rec
                self._events_touched.add((rec.namespace, rec.object_name))

    def set_gpu(self, pods: Mapping[PodKey, GpuReading], nodes: Mapping[str, tuple[float | None, float | None]]
                ) -> None:
        """A metrics refresh. Only workloads whose ranks' readings changed are rebuilt, and projects
        and nodes only when their figures moved: a refresh that changes nothing costs no rebuild."""
        now = self.now()
        old = self.gpu
        changed = {pk for pk, g in pods.items() if old.get(pk) != g} | {pk for pk in old if pk not in pods}
        self.gpu = dict(pods)
        for pk in [k for k in self.gpu_xid if k not in self.pods]:
            del self.gpu_xid[pk]
        for pk, reading in pods.items():
            if reading.xid and self.gpu_xid.get(pk, (0, 0.0))[0] != reading.xid:
                self.gpu_xid[pk] = (reading.xid, now)  # (kept after the pod stops: its failure's cause)
            if reading.util is not None and reading.state == "ok":
                hist = self.gpu_history.setdefault(pk, deque(maxlen=HISTORY))
                hist.append((now, reading.util))
                if reading.util >= self.busy_threshold:
                    self.busy_at[pk] = now
        for pk in changed:
            wl = self.pod_workload.get(pk)
            if wl is not None:
                self._dirty.add(wl)
        if dict(nodes) != self.node_gpu:
            self.node_gpu = dict(nodes)
            self._all_nodes_dirty = True
        if not changed:
            return
        per_ns: dict[str, list[tuple[float, float]]] = {}
        for pk, g in self.gpu.items():
            p = self.pods.get(pk)
            if p is None or g.util is None or g.state not in ("ok", "stale"):
                continue
            per_ns.setdefault(pk[0], []).append((g.util, p.gpus or 1.0))
        ns_util = {ns: sum(u * w for u, w in v) / sum(w for _, w in v) for ns, v in per_ns.items()}
        moved = {ns for ns in ns_util.keys() | self._ns_util.keys() if ns_util.get(ns) != self._ns_util.get(ns)}
        self._ns_util = ns_util
        self._dirty_ns |= moved

    def note_log(self, namespace: str, pod: str, at: float) -> None:
        """The log engine reports each rank's last log line time (for hang diagnostics)."""
        pk = (namespace, pod)
        if at > self.last_log.get(pk, 0.0):
            self.last_log[pk] = at

    # -- output --------------------------------------------------------------------------------
    def flush(self) -> ModelDiff:
        # only the workloads marked dirty can differ: compared alone (comparing every view of a
        # large cluster after each metrics refresh was most of an idle dashboard's data thread)
        wdiff: KeyedDiff[WorkloadKey, WorkloadView] = KeyedDiff()
        if self.workload_views != "full":
            self._flush_statuses()
        if self._dirty:
            old_wl, new_wl = self.workloads, dict(self.workloads)
            for key in self._dirty:
                view = self._build_workload(key)
                prev = old_wl.get(key)
                if view is None:
                    if prev is not None:
                        del new_wl[key]
                        wdiff.removed[key] = prev
                    continue
                new_wl[key] = view
                if prev is None:
                    wdiff.added[key] = view
                elif prev is not view and prev != view:
                    wdiff.changed[key] = view
            self._dirty.clear()
            self.workloads = new_wl
        if wdiff.added or wdiff.removed:
            self._ns_workloads_stale = True
        for key in wdiff.added.keys() | wdiff.changed.keys() | wdiff.removed.keys():
            self._dirty_ns.add(key[0])
        pdiff: KeyedDiff[str, ProjectView] = KeyedDiff()
        if self._dirty_ns or self._all_ns_dirty:
            new_p = self._build_projects(None if self._all_ns_dirty else self._dirty_ns)
            pdiff = diff(self.projects, new_p)
            self.projects = new_p
            self._dirty_ns = set()
            self._all_ns_dirty = False
        ndiff: KeyedDiff[str, NodeView] = KeyedDiff()
        if self._dirty_nodes or self._all_nodes_dirty:
            new_n = self._build_nodes(None if self._all_nodes_dirty else self._dirty_nodes)
            ndiff = diff(self.nodes, new_n)
            self.nodes = new_n
            self._dirty_nodes = set()
            self._all_nodes_dirty = False
        status, self.status_changed = self.status_changed, False
        events, self._events_touched = frozenset(self._events_touched), set()
        return ModelDiff(wdiff, pdiff, ndiff, status, events)

    def _flush_statuses(self) -> None:
        """The dirty workloads' statuses alone (`workload_views` "status"), or nothing ("none")."""
        if self.workload_views == "status":
            for key in self._dirty:
                members = self._members(key)
                if members is None:
                    if self.statuses.pop(key, None) is not None:
                        self._ns_workloads_stale = True
                else:
                    job, _, pods = members
                    self._ns_workloads_stale |= key not in self.statuses
                    self.statuses[key] = derive_status(job, [RankBrief(key[1], p, job) for p in pods])[0]
                self._dirty_ns.add(key[0])
        self._dirty.clear()

    def _members(self, key: WorkloadKey) -> tuple[JobRec | None, list[PodKey], list[PodRec]] | None:
        """The workload's object, its pods' keys (as the model holds them) and pods; None when there is no such workload (or it is part of another)."""
        ns, kind, name = key
        job = self.jobs.get(key)
        keys = [pk for pk in self.workload_pods.get(key, ()) if pk in self.pods]
        pods = [self.pods[pk] for pk in keys]
        if job is None and not pods:
            return None
        if job is None and kind in ("Job",) and not pods:
            return None
        if job is not None and job.kind == "Job" and job.owner is not None and job.owner.uid in self.jobs_by_uid:
            return None  # a child Job (MPI launcher, JobSet child) is part of its owner's workload
        if job is None and any(j for j in self.job_names.get((ns, name), ()) if j == "DistributedWorkload"):
            job = self.jobs.get((ns, "DistributedWorkload", name))
        return job, keys, pods

    def _build_workload(self, key: WorkloadKey) -> WorkloadView | None:
        members = self._members(key)
        if members is None:
            return None
        ns, kind, name = key
        job, keys, pods = members
        succeeded_at = succeeded_time(job)
        built = [self._rank(kind, p, job, succeeded_at, pk) for pk, p in zip(keys, pods, strict=True)]
        built.sort(key=lambda b: (lead_order(b[0]), b[1].pod))
        placed = [(pl, p) for pl, _, p in built]
        lead_pod = placed[0][1] if placed else None  # launcher, else master, else chief, else worker 0
        ranks = [rv for _, rv, _ in built]
        # the lead is the launcher, master or chief the job asks for; while that pod does not
        # exist yet no worker stands in for it (a shell must not open on worker-0)
        wanted = [rs.rtype.lower() for rs in job.replicas if rs.rtype.lower() in LEAD_ROLES] if job else []
        lead_role = min(wanted, key=lambda r: ROLE_ORDER[r]) if wanted else None
        if ranks and (lead_role is None or built[0][0].role == lead_role):
            ranks[0] = replace(ranks[0], lead=True)
        status, reason = derive_status(job, ranks)
        expected = sum(r.replicas for r in job.replicas) if job and job.replicas else 0
        total = max(expected, len(ranks))
        ready = sum(1 for r in ranks if r.ready)
        requested = (
            sum(r.replicas * r.gpus_per_replica for r in job.replicas) if job and job.replicas
            else sum(p.gpus for p in pods)
        )
        allocated = sum(p.gpus for p in pods if p.node and not p.terminated and not p.deleting)
        utils = [(r.gpu_util, r.gpus or 1.0) for r in ranks if r.gpu_util is not None and r.gpu_state in ("ok", "stale")]
        gpu_util = sum(u * w for u, w in utils) / sum(w for _, w in utils) if utils else None
        project, _ = project_of(self.namespaces.get(ns), ns)
        command: tuple[str, ...] = ()
        if job is not None and job.replicas:
            lead_spec = sorted(job.replicas, key=lambda r: (
                {"launcher": 0, "master": 1, "chief": 2, "node": 3}.get(r.rtype.lower(), 5), r.rtype))[0]
            command = lead_spec.command
        if not command and lead_pod is not None:
            command = lead_pod.command
        interactive = is_sleep_infinity(command)
        marker_src = job or lead_pod
        if marker_src is not None:
            ann = marker_src.annotation("ranks/interactive") or marker_src.label("ranks/interactive")
            if ann in ("true", "false"):
                interactive = ann == "true"
            if marker_src.label("priorityClassName") == "build":
                interactive = True
        if job is not None and job.kind == "InteractiveWorkload":
            interactive = True
        user = workload_user(job, lead_pod)
        conditions = tuple(ConditionView(c.type, c.status, c.reason, c.message, c.at) for c in job.conditions) if job else ()
        created = job.created if job else min((p.created for p in pods if p.created), default=None)
        return WorkloadView(
            namespace=ns, name=name, project=project, kind=kind, framework=framework_of(job, kind),
            status=status, reason=reason, interactive=interactive, ranks_ready=ready, ranks_total=total,
            gpus_requested=requested, gpus_allocated=allocated, gpu_util=gpu_util, created=created,
            user=user, command=shlex.join(command) if command else "", conditions=conditions,
            labels=pairs(job.labels) if job else (), ranks=tuple(ranks),
            first_failure=first_failure(placed, succeeded_at),
            uid=job.uid if job else "",
            api_version=f"{job.group}/{job.version}" if job and job.group else (job.version if job else ""),
        )

    def _rank(self, kind: str, p: PodRec, job: JobRec | None, succeeded_at: float | None = None,
              pk: PodKey | None = None) -> tuple[Placement, RankView, PodRec]:
        """A rank's view, cached until its pod, job, GPU reading or last-log time changes. `pk`: the
        pod's key as the model holds it (the cache's key then shares it: no tuple a rank)."""
        if pk is None:
            pk = p.key
        # a rank whose container is not running uses no GPU, whatever the exporter last said
        g = self.gpu.get(pk) if p.phase == "Running" and p.reason in ("", "Running") else None
        last = self.last_log.get(pk)
        hit = self._rank_cache.get(pk)
        xid = self.gpu_xid.get(pk)
        if hit is not None and hit[0] is p and hit[1] is job and hit[2] == g and hit[3] == last and (
                hit[5].gpu_xid_at == (xid[1] if xid else None)):
            return hit[4], hit[5], p
        pl = placement(kind, p, job)
        last_exit = _last_exit(p)
        rv = RankView(
            namespace=p.namespace, pod=p.name, role=pl.role, rank=pl.rank, replica_index=pl.replica_index,
            label=pl.label, phase=p.phase, reason=p.reason, message=rank_message(p),
            restarts=p.restarts, ready=rank_ready(p),
            node=p.node, pod_ip=p.pod_ip, gpus=p.gpus, lead=False, created=p.created,
            gpu_util=g.util if g else None, gpu_mem_used_mib=g.mem_used_mib if g else None,
            gpu_mem_total_mib=g.mem_total_mib if g else None,
            gpu_state=g.state if g else "unknown", last_log=last,
            exit_code=last_exit.exit_code if last_exit is not None else None,
            gpu_xid=xid[0] if xid else None, gpu_xid_at=xid[1] if xid else None,
            gpu_throttle=throttle_names(g.throttle) if g and g.throttle else (),
            stopped=last_exit is not None and stopped_by_deletion(p, last_exit, succeeded_at),
            deleting=p.deleting,
        )
        self._rank_cache[pk] = (p, job, g, last, pl, rv)
        return pl, rv, p

    def _build_projects(self, only: set[str] | None) -> dict[str, ProjectView]:
        """Rebuild the projects of `only` namespaces (None: all)."""
        statuses: Mapping[WorkloadKey, WorkloadView | str] = self.workloads if self.workload_views == "full" \
            else self.statuses
        if only is None or self._ns_workloads_stale:
            self._ns_workloads = {}
            for key in statuses:
                self._ns_workloads.setdefault(key[0], []).append(key)
            self._ns_workloads_stale = False
            only = None
        namespaces = set(self.namespaces) | set(self._ns_workloads) | {q[0] for q in self.quotas}
        runai_any = any(project_of(self.namespaces.get(n), n)[1] for n in namespaces)
        if runai_any != self._runai_any:
            self._runai_any = runai_any
            only = None
        out = dict(self.projects) if only is not None else {}
        for ns in sorted(namespaces if only is None else only):
            out.pop(ns, None)
            if ns in SYSTEM_NAMESPACES or ns not in namespaces:
                continue
            name, runai = project_of(self.namespaces.get(ns), ns)
            quotas = [q.gpu_hard for (qns, _), q in self.quotas.items() if qns == ns and q.gpu_hard is not None]
            wls = [st if isinstance(st := statuses[k], str) else st.status
                   for k in self._ns_workloads.get(ns, ()) if k in statuses]
            if not runai and runai_any and not wls and not quotas:
                continue
            out[ns] = ProjectView(
                name=name, namespace=ns, gpu_quota=sum(quotas) if quotas else None,
                gpus_allocated=round(self._ns_alloc.get(ns, 0.0), 6),
                gpu_util=self._ns_util.get(ns),
                running=sum(1 for st in wls if st in ("Running", "Degraded", "Restarting")),
                pending=sum(1 for st in wls if st == "Pending"),
                runai=runai,
            )
        return out

    def _build_nodes(self, only: set[str] | None) -> dict[str, NodeView]:
        out = dict(self.nodes) if only is not None else {}
        for name in (self.node_recs if only is None else only):
            out.pop(name, None)
            n = self.node_recs.get(name)
            if n is None:
                continue
            util, mem = self.node_gpu.get(n.name, (None, None))
            out[n.name] = NodeView(n.name, n.pool, n.product, n.ready, n.unschedulable, n.gpus,
                                   round(self._node_alloc.get(n.name, 0.0), 6), util, mem,
                                   self._node_pods.get(n.name, 0))
        return out

    # -- queries -------------------------------------------------------------------------------
    def events_for(self, wl: WorkloadView, limit: int = 20) -> list[EventRec]:
        uids = {wl.uid} if wl.uid else set()
        names = {wl.name} | {r.pod for r in wl.ranks}
        for e in self.events.values():  # the pods the operator deleted: their events outlive them
            if e.namespace == wl.namespace and e.reason == "SuccessfulDeletePod" and e.object_name == wl.name \
                    and e.message.startswith("Deleted pod: "):
                names.add(e.message[len("Deleted pod: "):].strip())
        out = [
            e for e in self.events.values()
            if e.namespace == wl.namespace and (e.object_uid in uids or e.object_name in names)
        ]
        out.sort(key=lambda e: e.last or 0.0)
        return out[-limit:]


def _last_exit(p: PodRec) -> Exit | None:
    """The pod's latest terminated container, when that is its state now."""
    if not (p.terminated or p.reason in ("Error", "OOMKilled", "Completed", "CrashLoopBackOff",
                                         "ContainerCannotRun")):
        return None
    return max(p.exits, key=lambda e: e.finished_at or 0.0, default=None)


def succeeded_time(job: JobRec | None) -> float | None:
    """When the job's Succeeded (Complete) condition became True; None when it has not succeeded."""
    if job is None:
        return None
    return next((c.at or 0.0 for c in job.conditions if c.status == "True"
                 and TERMINAL_CONDITIONS.get(c.type) == "Succeeded"), None)


def counts_as_failure(p: PodRec, ex: Exit, succeeded_at: float | None = None) -> bool:
    """A container's end that is a failure: non-zero or OOMKilled, and not its pod's deletion
    stopping it (the operator's clean-up after the job succeeded, a deleted pod)."""
    if ex.exit_code == 0 and ex.reason not in ("OOMKilled", "Error"):
        return False
    return not stopped_by_deletion(p, ex, succeeded_at)


def _hints(p: PodRec) -> list[tuple[str, str]]:
    """Names and uids a pod's grouping depends on: a job with one of these may regroup it. None for
    a Table row: its labels and owner are those of the workload that claimed it by its name, found
    by that name (`RowNames`) as any other workload that may claim it."""
    if p.partial:
        return []
    out = []
    for key in ("training.kubeflow.org/job-name", "job-name", "jobset.sigs.k8s.io/jobset-name"):
        v = p.label(key)
        if v:
            out.append((p.namespace, v))
    if p.owner is not None:
        out.append((p.namespace, p.owner.uid))
    return out


def first_failure(placed: Iterable[tuple[Placement, PodRec]], succeeded_at: float | None = None) -> FirstFailure | None:
    """The container that failed first; a pod's deletion stopping it is no failure
    (`counts_as_failure`), nor is anything the clean-up stopped after the job `succeeded_at`."""
    best: FirstFailure | None = None
    for pl, p in placed:
        for ex in p.exits:
            if not counts_as_failure(p, ex, succeeded_at):
                continue
            at = ex.finished_at
            if best is None or (at or float("inf")) < (best.at or float("inf")):
                best = FirstFailure(pl.label, pl.role, pl.rank, p.name, ex.container,
                                    ex.exit_code, ex.reason, at, ex.message)
    return best


LEAD_ROLES = ("launcher", "master", "chief")
# every status `derive_status` gives a workload (`ranks list --status` takes one of them)
WORKLOAD_STATUSES = ("Running", "Pending", "Degraded", "Restarting", "Suspended", "Succeeded", "Failed")
TERMINAL_CONDITIONS = {"Succeeded": "Succeeded", "Complete": "Succeeded", "Completed": "Succeeded",
                       "Failed": "Failed"}


def derive_status(job: JobRec | None, ranks: Sequence[RankLike]) -> tuple[str, str]:
    """Status as the operators mean it (the last True condition; a terminal one, Failed or
    Succeeded, wins over Running, Created and Suspended whatever their order), plus Degraded and
    Pending reasons."""
    last = None
    terminal = None
    if job is not None:
        for c in job.conditions:
            if c.status == "True":
                last = c
                if TERMINAL_CONDITIONS.get(c.type):
                    terminal = c
    if terminal is not None:
        last = terminal
    ctype = last.type if last else ""
    ctype = TERMINAL_CONDITIONS.get(ctype) or ctype
    if ctype in ("Succeeded", "Failed"):
        return ctype, (last.message or last.reason) if last else ""
    if ctype == "Suspended" or (job is not None and job.suspended and not any(r.phase == "Running" for r in ranks)):
        return "Suspended", last.message if last else ""
    unscheduled = [r for r in ranks if r.phase == "Pending" and not r.node]
    if unscheduled:
        msg = next((r.message for r in unscheduled if r.message), "") or "waiting to be scheduled"
        return "Pending", msg
    if ctype == "Restarting":
        return "Restarting", last.message if last else ""
    live = [r for r in ranks if r.phase not in TERMINAL]
    running = [r for r in ranks if r.phase == "Running"]
    if job is None and ranks and not live:
        return ("Failed", "") if any(r.phase == "Failed" for r in ranks) else ("Succeeded", "")
    if running or ctype == "Running":
        bad = [r for r in ranks if not r.ready and r.phase != "Succeeded"]
        if bad:
            worst = sorted(bad, key=lambda r: (r.reason not in ("CrashLoopBackOff", "Error", "OOMKilled"), r.label))[0]
            why = worst.reason or worst.phase
            if len(bad) == 1:
                return "Degraded", f"{worst.label}: {why}"
            return "Degraded", f"{len(ranks) - len(bad)}/{len(ranks)} ranks ready; {worst.label}: {why}"
        if running:
            return "Running", ""
    waiting = [r.reason for r in ranks if r.reason]
    if waiting:
        return "Pending", waiting[0]
    if job is not None and not ranks:
        return "Pending", "no pods yet" if ctype in ("", "Created") else (last.message if last else "")
    return "Pending", ""
