"""Raw API JSON (dicts from orjson) -> slim records. Pure functions, no I/O.

Every parser takes whatever the server sent: a field missing, null, of the wrong type, out of range
or huge degrades that field (to "", 0, None or an empty tuple), never the object; the record's
fields always have the types `monitors.records` declares (numbers finite, counts non-negative). The
one exception a parser raises is `BadObject`, for an object it cannot name (not a JSON object, its
metadata not one, no name); the informers drop it (their `except Exception` around each parse) and
go on with the stream.
"""

from __future__ import annotations

import math
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


MAX_GPUS = 1e6  # no pod, replica or node has a million GPUs: beyond, a figure is nonsense (and sums lose precision)
MAX_COUNT = 1_000_000  # replicas, nodes, parallelism
MAX_INT32 = 2**31 - 1  # restart counts, exit codes


class BadObject(ValueError):
    """An object a parser cannot make a record of (not a JSON object, or without a name). The informers
    drop it: their `except Exception` around each parse."""


def _named(obj: Any) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The object, its metadata and its name. Without a name (or without metadata, or not an object
    at all) no record can stand for it: keyed as no object is, it would replace another's. BadObject."""
    if not isinstance(obj, dict):
        raise BadObject(f"not an object but {type(obj).__name__}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise BadObject("its metadata is not an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise BadObject("it has no name")
    return obj, meta, name


def _d(v: Any) -> dict[str, Any]:
    """`v` where it is a JSON object, else empty (a field null or of the wrong type)."""
    return v if isinstance(v, dict) else {}


def _dicts(v: Any) -> list[dict[str, Any]]:
    """The objects of a JSON array (anything else: none)."""
    if type(v) is not list:
        return []
    for x in v:
        if type(x) is not dict:
            return [x for x in v if isinstance(x, dict)]
    return v  # the common case: every item an object, no copy


def _s(v: Any, default: str = "") -> str:
    """A text field: a string as it is, a number or boolean as JSON writes it, anything else (null,
    object, array) `default`."""
    if type(v) is str:
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    return default


def _int(v: Any, default: int = 0, lo: int = 0, hi: int = MAX_COUNT) -> int:
    """An integer field within [lo, hi]: a number or a decimal string; anything else `default`."""
    if isinstance(v, bool):
        n = default
    elif isinstance(v, int):
        n = v
    elif isinstance(v, float):
        n = int(v) if math.isfinite(v) else default
    elif isinstance(v, str):
        try:
            n = int(v)
        except ValueError:  # not a number (or more than 4300 digits)
            n = default
    else:
        n = default
    return min(max(n, lo), hi)


def quantity(value: Any) -> float:
    """A Kubernetes quantity as a float (enough for GPUs, CPUs and memory); 0 for what is not a
    finite number."""
    if value is None or isinstance(value, bool):
        return 0.0
    if isinstance(value, int | float):
        return _finite(float(value))
    if not isinstance(value, str):
        return 0.0
    s = value.strip()
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


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def _num(s: Any) -> float:
    if not isinstance(s, str | int | float) or isinstance(s, bool):
        return 0.0
    try:
        return _finite(float(s))
    except (ValueError, OverflowError):
        return 0.0


def _gpus(x: float) -> float:
    """A GPU figure within [0, MAX_GPUS]."""
    return min(max(_finite(x), 0.0), MAX_GPUS)


def container_gpus(containers: Any) -> float:
    total = 0.0
    for c in _dicts(containers):
        res = _d(c.get("resources"))
        lim = _d(res.get("limits")).get(GPU)
        req = _d(res.get("requests")).get(GPU)
        total += _gpus(quantity(lim if lim is not None else req))
    return _gpus(total)


def _fraction_gpus(ann: dict[str, Any]) -> float:
    """Run:ai's GPU portion (no nvidia.com/gpu request): gpu-fraction x gpu-fraction-num-devices."""
    if not ann.get("gpu-fraction"):
        return 0.0
    return _gpus(_num(ann["gpu-fraction"]) * max(1.0, _num(ann.get("gpu-fraction-num-devices", "1"))))


def _owner(meta: dict[str, Any]) -> Owner | None:
    refs = _dicts(meta.get("ownerReferences"))
    chosen = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
    if not chosen:
        return None
    return Owner(_intern(_s(chosen.get("kind"))), _s(chosen.get("name")), _s(chosen.get("uid")))


def _strings(v: Any) -> tuple[str, ...]:
    """A JSON array of words (a command, its args) as strings; anything else: none."""
    return tuple(_s(x) for x in v) if isinstance(v, list) else ()


def _command(c: dict[str, Any] | None) -> tuple[str, ...]:
    if not c:
        return ()
    return _strings(c.get("command")) + _strings(c.get("args"))


_TOLERATIONS: dict[tuple[Toleration, ...], tuple[Toleration, ...]] = {}


def _tolerations(items: Any) -> tuple[Toleration, ...]:
    """spec.tolerations as (key, operator, value, effect) tuples; the few distinct sets a cluster has
    (every pod gets the same not-ready/unreachable pair) are shared, as interned strings are."""
    if not isinstance(items, list):
        return ()
    out = tuple(
        (_intern(_s(t.get("key"))), _intern(_s(t.get("operator")) or "Equal"),
         _intern(_s(t.get("value"))), _intern(_s(t.get("effect"))))
        for t in items if isinstance(t, dict)
    )
    if len(_TOLERATIONS) < 1024:
        return _TOLERATIONS.setdefault(out, out)
    return _TOLERATIONS.get(out, out)


def _taints(items: Any) -> tuple[Taint, ...]:
    if not isinstance(items, list):
        return ()
    return tuple((_intern(_s(t.get("key"))), _intern(_s(t.get("value"))), _intern(_s(t.get("effect"))))
                 for t in items if isinstance(t, dict))


def _pod_reason(meta: dict[str, Any], status: dict[str, Any]) -> tuple[str, str]:
    """kubectl's STATUS column logic, reduced to a reason (and a message where there is one)."""
    phase = status.get("phase", "")
    if _s(status.get("reason")):
        return _s(status["reason"]), _s(status.get("message"))
    for cs in _dicts(status.get("initContainerStatuses")):
        state = _d(cs.get("state"))
        term = _d(state.get("terminated"))
        if term and _int(term.get("exitCode"), lo=-MAX_INT32, hi=MAX_INT32) != 0:
            return f"Init:{_s(term.get('reason')) or 'Error'}", _s(term.get("message"))
        wait = _d(state.get("waiting"))
        if wait and wait.get("reason") not in (None, "PodInitializing"):
            return f"Init:{_s(wait['reason'])}", _s(wait.get("message"))
    reason, message = "", ""
    for cs in _dicts(status.get("containerStatuses")):
        state = _d(cs.get("state"))
        wait = _d(state.get("waiting"))
        if wait.get("reason"):
            reason, message = _s(wait["reason"]), _s(wait.get("message"))
            if reason == "CrashLoopBackOff":
                last = _d(_d(cs.get("lastState")).get("terminated"))
                if last.get("reason") == "OOMKilled":
                    message = message or "OOMKilled"
            break
        ended = state.get("terminated")
        if isinstance(ended, dict):
            code = _int(ended.get("exitCode"), lo=-MAX_INT32, hi=MAX_INT32)
            reason = _s(ended.get("reason")) or ("Completed" if code == 0 else "Error")
            message = _s(ended.get("message"))
            if reason != "Completed":
                break
    if meta.get("deletionTimestamp"):
        return "Terminating", ""
    if not reason and phase == "Pending":
        for cond in _dicts(status.get("conditions")):
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return _s(cond.get("reason")) or "Unschedulable", _s(cond.get("message"))
    return reason, message


def parse_pod(obj: dict[str, Any]) -> PodRec:
    obj, meta, name = _named(obj)
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    containers = _dicts(spec.get("containers"))
    statuses = _dicts(status.get("containerStatuses"))
    ready = sum(1 for cs in statuses if cs.get("ready") is True)
    restarts = min(sum(_int(cs.get("restartCount"), hi=MAX_INT32) for cs in statuses), MAX_INT32)
    exits: list[Exit] = []
    for cs in statuses:
        for st in (_d(cs.get("state")).get("terminated"), _d(cs.get("lastState")).get("terminated")):
            if st and isinstance(st, dict):
                code = _int(st.get("exitCode"), lo=-MAX_INT32, hi=MAX_INT32)
                exits.append(
                    Exit(_s(cs.get("name")), code, _s(st.get("reason")) or ("Completed" if not code else "Error"),
                         parse_time(st.get("finishedAt")), _s(st.get("message")))
                )
    gpus = container_gpus(containers)
    annotations = _d(meta.get("annotations"))
    if not gpus:
        gpus = _fraction_gpus(annotations)
    unsched = ""
    for cond in _dicts(status.get("conditions")):
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            unsched = _s(cond.get("message")) or _s(cond.get("reason")) or "Unschedulable"
    reason, message = _pod_reason(meta, status)
    selector = spec.get("nodeSelector")
    tolerations = spec.get("tolerations")
    return PodRec(
        namespace=_intern(_s(meta.get("namespace"))),
        name=name,
        uid=_s(meta.get("uid")),
        labels=flat_labels(meta.get("labels")),
        owner=_owner(meta),
        node=_intern(_s(spec.get("nodeName"))),
        phase=_intern(_s(status.get("phase")) or "Pending"),
        reason=_intern(reason),
        message=message,
        restarts=restarts,
        ready=ready,
        total=len(containers),
        pod_ip=_s(status.get("podIP")),
        gpus=gpus,
        created=parse_time(meta.get("creationTimestamp")),
        started=parse_time(status.get("startTime")),
        deleting=bool(meta.get("deletionTimestamp")),
        unschedulable=unsched,
        command=_command(containers[0] if containers else None),
        containers=tuple(_intern(_s(c.get("name"))) for c in containers),
        exits=tuple(exits),
        annotations=flat_labels({k: v for k, v in annotations.items() if k in KEPT_ANNOTATIONS}),
        node_selector=flat_labels(selector) if isinstance(selector, dict) else (),
        tolerations=_tolerations(tolerations) if tolerations else (),
        delete_asked=_delete_asked(meta),
    )


def _delete_asked(meta: dict[str, Any]) -> float | None:
    """When the pod's deletion was asked for: its deletionTimestamp less its grace period (the API
    server sets the timestamp to the end of the grace). None when not being deleted, or when the
    grace is 0 (the kubelet's final delete moves the timestamp to that moment: the ask is unknown)."""
    at = parse_time(meta.get("deletionTimestamp"))
    grace = meta.get("deletionGracePeriodSeconds")
    if at is None or type(grace) is not int or not 0 < grace <= 10**9:
        return None
    return at - grace


def _conditions(status: dict[str, Any]) -> tuple[Condition, ...]:
    out = []
    for c in _dicts(status.get("conditions")):
        out.append(
            Condition(
                _intern(_s(c.get("type"))), _s(c.get("status")), _s(c.get("reason")),
                _s(c.get("message")), parse_time(c.get("lastTransitionTime") or c.get("lastUpdateTime")),
            )
        )
    return tuple(out)


def _template_replica(name: str, replicas: int, template: Any, restart: Any = "") -> ReplicaSpec:
    template = _d(template)
    pspec = _d(template.get("spec"))
    containers = _dicts(pspec.get("containers"))
    gpus = container_gpus(containers)
    if not gpus:  # Run:ai GPU portion: no nvidia.com/gpu request
        gpus = _fraction_gpus(_d(_d(template.get("metadata")).get("annotations")))
    return ReplicaSpec(
        rtype=name,
        replicas=replicas,
        gpus_per_replica=gpus,
        command=_command(containers[0] if containers else None),
        restart_policy=_s(restart) or _s(pspec.get("restartPolicy")),
    )


def parse_job(kind: str, group: str, version: str) -> Callable[[dict[str, Any]], JobRec]:
    """A parser for one workload kind."""

    def parse(obj: dict[str, Any]) -> JobRec:
        obj, meta, name = _named(obj)
        spec = _d(obj.get("spec"))
        status = _d(obj.get("status"))
        replicas: list[ReplicaSpec] = []
        suspended = False
        min_available = None
        extra: list[tuple[str, Any]] = []
        if kind in REPLICA_FIELDS:
            for rtype, rs in _d(spec.get(REPLICA_FIELDS[kind])).items():
                if isinstance(rs, dict):
                    rtype = str(rtype)
                    default = 0 if (kind == "MPIJob" and rtype.lower() == "worker" and version == "v2beta1") else 1
                    replicas.append(_template_replica(
                        rtype, _int(rs.get("replicas", default), default), rs.get("template"),
                        rs.get("restartPolicy"),
                    ))
            run = _d(spec.get("runPolicy"))
            suspended = bool(run.get("suspend"))
            sp = _d(run.get("schedulingPolicy"))
            if sp.get("minAvailable") is not None:
                min_available = _int(sp.get("minAvailable"))
            if kind == "MPIJob":
                extra.append(("slotsPerWorker", _int(spec.get("slotsPerWorker", 1), 1)))
        elif kind == "TrainJob":
            trainer = _d(spec.get("trainer"))
            gpus = _gpus(quantity(_d(_d(trainer.get("resourcesPerNode")).get("limits")).get(GPU)))
            replicas.append(ReplicaSpec(
                "node", _int(trainer.get("numNodes", 1), 1), gpus,
                _strings(trainer.get("command")) + _strings(trainer.get("args")), "",
            ))
            suspended = bool(spec.get("suspend"))
            extra.append(("runtime", _s(_d(spec.get("runtimeRef")).get("name"))))
        elif kind == "JobSet":
            for rj in _dicts(spec.get("replicatedJobs")):
                jt = _d(_d(rj.get("template")).get("spec"))
                per_job = _int(jt.get("parallelism", 1), 1)
                replicas.append(_template_replica(
                    _s(rj.get("name")), min(_int(rj.get("replicas", 1), 1) * per_job, MAX_COUNT), jt.get("template"),
                ))
            suspended = bool(spec.get("suspend"))
        elif kind == "Job":
            replicas.append(_template_replica(
                "job", _int(spec.get("parallelism", 1), 1), spec.get("template"),
            ))
            suspended = bool(spec.get("suspend"))
            extra.append(("completionMode", _s(spec.get("completionMode"), "NonIndexed")))
        elif group == "run.ai":
            def val(key: str) -> Any:
                v = spec.get(key)
                return v.get("value") if isinstance(v, dict) else v

            cmd = _s(val("command"))
            workers = _int(val("workers"), 1)
            replicas.append(ReplicaSpec("Worker", workers, _gpus(_num(val("gpu"))), tuple(cmd.split()), ""))
            extra.append(("jobType", _s(val("jobType"))))
        return JobRec(
            kind=_intern(kind), group=_intern(group), version=_intern(version),
            namespace=_intern(_s(meta.get("namespace"))), name=name, uid=_s(meta.get("uid")),
            labels=flat_labels(meta.get("labels")),
            annotations=flat_labels({k: v for k, v in _d(meta.get("annotations")).items()
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
    obj, meta, name = _named(obj)
    return NamespaceRec(name, flat_labels(meta.get("labels")), _s(_d(obj.get("status")).get("phase")))


def parse_quota(obj: dict[str, Any]) -> QuotaRec:
    obj, meta, name = _named(obj)
    hard = _d(_d(obj.get("spec")).get("hard"))
    used = _d(_d(obj.get("status")).get("used"))

    def pick(d: dict[str, Any]) -> float | None:
        for key in ("requests.nvidia.com/gpu", "limits.nvidia.com/gpu", GPU):
            if key in d:
                return max(quantity(d[key]), 0.0)
        return None

    return QuotaRec(_s(meta.get("namespace")), name, pick(hard), pick(used))


def parse_node(obj: dict[str, Any]) -> NodeRec:
    obj, meta, name = _named(obj)
    spec = _d(obj.get("spec"))
    status = _d(obj.get("status"))
    labels = _d(meta.get("labels"))
    alloc = _d(status.get("allocatable")) or _d(status.get("capacity"))
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in _dicts(status.get("conditions")))
    pool = _s(labels.get("run.ai/node-pool")) or _s(labels.get("node-pool")) \
        or _s(labels.get("cloud.google.com/gke-nodepool"))
    return NodeRec(
        name=name, labels=flat_labels(labels), gpus=_gpus(quantity(alloc.get(GPU))), ready=ready,
        unschedulable=bool(spec.get("unschedulable")), pool=_intern(pool),
        product=_intern(_s(labels.get("nvidia.com/gpu.product"))),
        taints=_taints(spec.get("taints")),
    )


def parse_event(obj: dict[str, Any]) -> EventRec:
    obj, meta, name = _named(obj)
    io = _d(obj.get("involvedObject")) or _d(obj.get("regarding"))
    last = next((t for t in (obj.get("lastTimestamp"), obj.get("eventTime"),
                             _d(obj.get("series")).get("lastObservedTime"), meta.get("creationTimestamp"))
                 if parse_time(t) is not None), None)
    return EventRec(
        namespace=_s(meta.get("namespace")), name=name, kind=_s(io.get("kind")),
        object_name=_s(io.get("name")), object_uid=_s(io.get("uid")), type=_s(obj.get("type")),
        reason=_s(obj.get("reason")), message=_s(obj["message"] if "message" in obj else obj.get("note")),
        count=_int(obj.get("count", 1), 1, hi=MAX_INT32), last=parse_time(last),
    )
