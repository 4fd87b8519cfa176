"""Raw API JSON (dicts from orjson) -> slim records. Pure functions, no I/O."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .records import (
    Condition,
    EventRec,
    Exit,
    JobRec,
    NamespaceRec,
    NodeRec,
    Owner,
    PodRec,
    QuotaRec,
    ReplicaSpec,
    Taint,
    Toleration,
    flat_labels,
    parse_time,
)

_intern = sys.intern
GPU = "nvidia.com/gpu"

REPLICA_FIELDS = {
    "PyTorchJob": "pytorchReplicaSpecs",
    "TFJob": "tfReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "JAXJob": "jaxReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
}

# The pod annotations the views use; everything else is dropped.
KEPT_ANNOTATIONS = frozenset({
    "gpu-fraction", "gpu-fraction-num-devices", "gpu-memory", "ranks/user", "ranks/interactive",
    "user", "run.ai/user", "kubectl.kubernetes.io/default-container",
    "batch.kubernetes.io/job-completion-index",
})


def quantity(value: Any) -> float:
    """A Kubernetes quantity as a float (enough for GPUs, CPUs and memory)."""
    if value is None:
        return 0.0
    if isinstance(value, int | float):
        return float(value)
    s = str(value).strip()
    suffixes = {
        "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5,
        "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
    }
    for suf in ("Ki", "Mi", "Gi", "Ti", "Pi"):
        if s.endswith(suf):
            return _num(s[:-2]) * suffixes[suf]
    if s and s[-1] in suffixes:
        return _num(s[:-1]) * suffixes[s[-1]]
    return _num(s)


def _num(s: str) -> float:
    try:
        return float(s)
    except ValueError:
        return 0.0


def container_gpus(containers: list[dict[str, Any]] | None) -> float:
    total = 0.0
    for c in containers or ():
        res = c.get("resources") or {}
        lim = (res.get("limits") or {}).get(GPU)
        req = (res.get("requests") or {}).get(GPU)
        total += quantity(lim if lim is not None else req)
    return total


def _owner(meta: dict[str, Any]) -> Owner | None:
    refs = meta.get("ownerReferences") or ()
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if not chosen:
        return None
    return Owner(_intern(chosen.get("kind", "")), chosen.get("name", ""), chosen.get("uid", ""))


def _command(c: dict[str, Any] | None) -> tuple[str, ...]:
    if not c:
        return ()
    return tuple(str(x) for x in (c.get("command") or [])) + tuple(str(x) for x in (c.get("args") or []))


_TOLERATIONS: dict[tuple[Toleration, ...], tuple[Toleration, ...]] = {}


def _tolerations(items: Any) -> tuple[Toleration, ...]:
    """spec.tolerations as (key, operator, value, effect) tuples; the few distinct sets a cluster has
    (every pod gets the same not-ready/unreachable pair) are shared, as interned strings are."""
    if not isinstance(items, list):
        return ()
    out = tuple(
        (_intern(str(t.get("key") or "")), _intern(str(t.get("operator") or "Equal")),
         _intern(str(t.get("value") or "")), _intern(str(t.get("effect") or "")))
        for t in items if isinstance(t, dict)
    )
    if len(_TOLERATIONS) < 1024:
        return _TOLERATIONS.setdefault(out, out)
    return _TOLERATIONS.get(out, out)


def _taints(items: Any) -> tuple[Taint, ...]:
    if not isinstance(items, list):
        return ()
    return tuple((_intern(str(t.get("key") or "")), _intern(str(t.get("value") or "")),
                  _intern(str(t.get("effect") or ""))) for t in items if isinstance(t, dict))


def _pod_reason(obj: dict[str, Any], status: dict[str, Any]) -> tuple[str, str]:
    """kubectl's STATUS column logic, reduced to a reason (and a message where there is one)."""
    meta = obj["metadata"]
    phase = status.get("phase", "")
    if status.get("reason"):
        return status["reason"], status.get("message", "")
    for cs in status.get("initContainerStatuses") or ():
        state = cs.get("state") or {}
        term = state.get("terminated")
        if term and term.get("exitCode", 0) != 0:
            return f"Init:{term.get('reason') or 'Error'}", term.get("message", "")
        wait = state.get("waiting")
        if wait and wait.get("reason") not in (None, "PodInitializing"):
            return f"Init:{wait['reason']}", wait.get("message", "")
    reason, message = "", ""
    for cs in status.get("containerStatuses") or ():
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            reason, message = state["waiting"]["reason"], state["waiting"].get("message", "")
            if reason == "CrashLoopBackOff":
                last = (cs.get("lastState") or {}).get("terminated") or {}
                if last.get("reason") == "OOMKilled":
                    message = message or "OOMKilled"
            break
        if "terminated" in state:
            term = state["terminated"]
            reason = term.get("reason") or ("Completed" if term.get("exitCode", 0) == 0 else "Error")
            message = term.get("message", "")
            if reason != "Completed":
                break
    if meta.get("deletionTimestamp"):
        return "Terminating", ""
    if not reason and phase == "Pending":
        for cond in status.get("conditions") or ():
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return cond.get("reason") or "Unschedulable", cond.get("message", "")
    return reason, message


def parse_pod(obj: dict[str, Any]) -> PodRec:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount") or 0) for cs in statuses)
    exits: list[Exit] = []
    for cs in statuses:
        for st in ((cs.get("state") or {}).get("terminated"), (cs.get("lastState") or {}).get("terminated")):
            if st:
                exits.append(
                    Exit(cs.get("name", ""), int(st.get("exitCode") or 0),
                         st.get("reason") or ("Completed" if not st.get("exitCode") else "Error"),
                         parse_time(st.get("finishedAt")), st.get("message", "") or "")
                )
    gpus = container_gpus(containers)
    annotations = meta.get("annotations") or {}
    if not gpus and annotations.get("gpu-fraction"):
        gpus = _num(annotations["gpu-fraction"]) * max(1.0, _num(annotations.get("gpu-fraction-num-devices", "1")))
    unsched = ""
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            unsched = cond.get("message") or cond.get("reason") or "Unschedulable"
    reason, message = _pod_reason(obj, status)
    selector = spec.get("nodeSelector")
    tolerations = spec.get("tolerations")
    return PodRec(
        namespace=_intern(meta.get("namespace", "")),
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        labels=flat_labels(meta.get("labels")),
        owner=_owner(meta),
        node=_intern(spec.get("nodeName") or ""),
        phase=_intern(status.get("phase") or "Pending"),
        reason=_intern(reason),
        message=message,
        restarts=restarts,
        ready=ready,
        total=len(containers),
        pod_ip=status.get("podIP") or "",
        gpus=gpus,
        created=parse_time(meta.get("creationTimestamp")),
        started=parse_time(status.get("startTime")),
        deleting=bool(meta.get("deletionTimestamp")),
        unschedulable=unsched,
        command=_command(containers[0] if containers else None),
        containers=tuple(_intern(c.get("name", "")) for c in containers),
        exits=tuple(exits),
        annotations=flat_labels({k: v for k, v in annotations.items() if k in KEPT_ANNOTATIONS}),
        node_selector=flat_labels(selector) if isinstance(selector, dict) else (),
        tolerations=_tolerations(tolerations) if tolerations else (),
    )


def _conditions(status: dict[str, Any]) -> tuple[Condition, ...]:
    out = []
    for c in status.get("conditions") or ():
        if not isinstance(c, dict):
            continue
        out.append(
            Condition(
                _intern(str(c.get("type", ""))), str(c.get("status", "")), str(c.get("reason", "") or ""),
                str(c.get("message", "") or ""), parse_time(c.get("lastTransitionTime") or c.get("lastUpdateTime")),
            )
        )
    return tuple(out)


def _template_replica(name: str, replicas: int, template: dict[str, Any], restart: str = "") -> ReplicaSpec:
    pspec = (template or {}).get("spec") or {}
    containers = pspec.get("containers") or []
    gpus = container_gpus(containers)
    ann = ((template or {}).get("metadata") or {}).get("annotations") or {}
    if not gpus and ann.get("gpu-fraction"):  # Run:ai GPU portion: no nvidia.com/gpu request
        gpus = _num(ann["gpu-fraction"]) * max(1.0, _num(ann.get("gpu-fraction-num-devices", "1")))
    return ReplicaSpec(
        rtype=name,
        replicas=replicas,
        gpus_per_replica=gpus,
        command=_command(containers[0] if containers else None),
        restart_policy=restart or pspec.get("restartPolicy", ""),
    )


def _int(v: Any, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def parse_job(kind: str, group: str, version: str) -> Callable[[dict[str, Any]], JobRec]:
    """A parser for one workload kind."""

    def parse(obj: dict[str, Any]) -> JobRec:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        replicas: list[ReplicaSpec] = []
        suspended = False
        min_available = None
        extra: list[tuple[str, Any]] = []
        if kind in REPLICA_FIELDS:
            rmap = spec.get(REPLICA_FIELDS[kind]) or {}
            if isinstance(rmap, dict):
                for rtype, rs in rmap.items():
                    if isinstance(rs, dict):
                        default = 0 if (kind == "MPIJob" and rtype.lower() == "worker" and version == "v2beta1") else 1
                        replicas.append(_template_replica(
                            str(rtype), _int(rs.get("replicas", default), default), rs.get("template") or {},
                            rs.get("restartPolicy", ""),
                        ))
            run = spec.get("runPolicy") or {}
            suspended = bool(run.get("suspend"))
            sp = run.get("schedulingPolicy") or {}
            if sp.get("minAvailable") is not None:
                min_available = _int(sp.get("minAvailable"))
            if kind == "MPIJob":
                extra.append(("slotsPerWorker", _int(spec.get("slotsPerWorker", 1), 1)))
        elif kind == "TrainJob":
            trainer = spec.get("trainer") or {}
            gpus = quantity(((trainer.get("resourcesPerNode") or {}).get("limits") or {}).get(GPU))
            replicas.append(ReplicaSpec(
                "node", _int(trainer.get("numNodes", 1), 1), gpus,
                tuple(map(str, trainer.get("command") or [])) + tuple(map(str, trainer.get("args") or [])), "",
            ))
            suspended = bool(spec.get("suspend"))
            extra.append(("runtime", (spec.get("runtimeRef") or {}).get("name", "")))
        elif kind == "JobSet":
            for rj in spec.get("replicatedJobs") or ():
                jt = (rj.get("template") or {}).get("spec") or {}
                per_job = _int(jt.get("parallelism", 1), 1)
                replicas.append(_template_replica(
                    rj.get("name", ""), _int(rj.get("replicas", 1), 1) * per_job, jt.get("template") or {},
                ))
            suspended = bool(spec.get("suspend"))
        elif kind == "Job":
            replicas.append(_template_replica(
                "job", _int(spec.get("parallelism", 1), 1), spec.get("template") or {},
            ))
            suspended = bool(spec.get("suspend"))
            extra.append(("completionMode", spec.get("completionMode", "NonIndexed")))
        elif group == "run.ai":
            def val(key: str) -> Any:
                v = spec.get(key)
                return v.get("value") if isinstance(v, dict) else v

            cmd = val("command")
            workers = _int(val("workers"), 1)
            replicas.append(ReplicaSpec("Worker", workers, _num(str(val("gpu") or 0)),
                                        tuple(str(cmd).split()) if cmd else (), ""))
            extra.append(("jobType", str(val("jobType") or "")))
        return JobRec(
            kind=_intern(kind), group=_intern(group), version=_intern(version),
            namespace=_intern(meta.get("namespace", "")), name=meta.get("name", ""), uid=meta.get("uid", ""),
            labels=flat_labels(meta.get("labels")),
            annotations=flat_labels({k: v for k, v in (meta.get("annotations") or {}).items()
                                 if k != "kubectl.kubernetes.io/last-applied-configuration"}),
            owner=_owner(meta),
            created=parse_time(meta.get("creationTimestamp")),
            conditions=_conditions(status),
            replicas=tuple(replicas),
            suspended=suspended,
            min_available=min_available,
            started=parse_time(status.get("startTime")),
            completed=parse_time(status.get("completionTime")),
            extra=tuple(extra),
        )

    return parse


def parse_namespace(obj: dict[str, Any]) -> NamespaceRec:
    meta = obj.get("metadata") or {}
    return NamespaceRec(meta.get("name", ""), flat_labels(meta.get("labels")), (obj.get("status") or {}).get("phase", ""))


def parse_quota(obj: dict[str, Any]) -> QuotaRec:
    meta = obj.get("metadata") or {}
    hard = (obj.get("spec") or {}).get("hard") or {}
    used = (obj.get("status") or {}).get("used") or {}

    def pick(d: dict[str, Any]) -> float | None:
        for key in ("requests.nvidia.com/gpu", "limits.nvidia.com/gpu", GPU):
            if key in d:
                return quantity(d[key])
        return None

    return QuotaRec(meta.get("namespace", ""), meta.get("name", ""), pick(hard), pick(used))


def parse_node(obj: dict[str, Any]) -> NodeRec:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    labels = meta.get("labels") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
    pool = labels.get("run.ai/node-pool") or labels.get("node-pool") or labels.get("cloud.google.com/gke-nodepool") or ""
    return NodeRec(
        name=meta.get("name", ""), labels=flat_labels(labels), gpus=quantity(alloc.get(GPU)), ready=ready,
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")), pool=_intern(pool),
        product=_intern(labels.get("nvidia.com/gpu.product", "")),
        taints=_taints((obj.get("spec") or {}).get("taints")),
    )


def parse_event(obj: dict[str, Any]) -> EventRec:
    meta = obj.get("metadata") or {}
    io = obj.get("involvedObject") or obj.get("regarding") or {}
    last = obj.get("lastTimestamp") or obj.get("eventTime") or (obj.get("series") or {}).get("lastObservedTime") \
        or meta.get("creationTimestamp")
    return EventRec(
        namespace=meta.get("namespace", ""), name=meta.get("name", ""), kind=io.get("kind", ""),
        object_name=io.get("name", ""), object_uid=io.get("uid", ""), type=obj.get("type", ""),
        reason=obj.get("reason", "") or "", message=obj.get("message", obj.get("note", "")) or "",
        count=_int(obj.get("count", 1), 1), last=parse_time(last),
    )
