"""The documented, stable JSON interface of `ranks projects | list | get | top` (`-o json|yaml`).

`projects` → {"projects": [{name, namespace, gpu_quota, gpus_allocated, gpu_util, running, pending}]}
`list`     → {"workloads": [{name, namespace, project, kind, framework, status, reason, interactive,
               ranks_ready, ranks_total, gpus_requested, gpus_allocated, gpu_util, age_seconds, user}]}
`get`      → {"workload": {...the list fields, conditions, command}, "ranks": [{role, rank,
               replica_index, pod, phase, reason, restarts, node, pod_ip, gpus, gpu_util,
               gpu_mem_used_mib, gpu_mem_total_mib, lead, gpu_xid (the last XID its GPUs raised, null when
               not read), gpu_throttle (why its GPUs' clocks are held down)}], "events": [...]}
`top nodes` → {"nodes": [{name, pool, gpu_model, gpus, gpus_allocated, gpu_util, gpu_mem_used_mib,
               ready, pods}]}; `top projects` is `projects`.
A metric with no value is null, never 0. Text from the cluster is stripped of control sequences.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from .model_views import NodeView, ProjectView, RankView, WorkloadView
from .records import EventRec
from .sanitize import clean


def _num(v: float | None, digits: int = 1) -> float | int | None:
    if v is None:
        return None
    r = round(float(v), digits)
    return int(r) if r == int(r) else r


def _ts(v: float | None) -> str | None:
    if v is None:
        return None
    try:
        return datetime.fromtimestamp(v, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, ValueError, OSError):  # (a time no calendar holds: none)
        return None


def project_json(p: ProjectView) -> dict[str, Any]:
    return {
        "name": clean(p.name), "namespace": clean(p.namespace), "gpu_quota": _num(p.gpu_quota),
        "gpus_allocated": _num(p.gpus_allocated), "gpu_util": _num(p.gpu_util), "running": p.running,
        "pending": p.pending,
    }


def workload_json(w: WorkloadView, now: float | None = None) -> dict[str, Any]:
    now = time.time() if now is None else now
    return {
        "name": clean(w.name), "namespace": clean(w.namespace), "project": clean(w.project), "kind": w.kind,
        "framework": w.framework, "status": w.status, "reason": clean(w.reason), "interactive": w.interactive,
        "ranks_ready": w.ranks_ready, "ranks_total": w.ranks_total, "gpus_requested": _num(w.gpus_requested),
        "gpus_allocated": _num(w.gpus_allocated), "gpu_util": _num(w.gpu_util),
        "age_seconds": int(now - w.created) if w.created else None, "user": clean(w.user),
    }


def rank_json(r: RankView) -> dict[str, Any]:
    return {
        "role": r.role, "rank": r.rank, "replica_index": r.replica_index, "pod": clean(r.pod), "phase": r.phase,
        "reason": clean(r.reason), "restarts": r.restarts, "node": clean(r.node), "pod_ip": r.pod_ip,
        "gpus": _num(r.gpus), "gpu_util": _num(r.gpu_util), "gpu_mem_used_mib": _num(r.gpu_mem_used_mib, 0),
        "gpu_mem_total_mib": _num(r.gpu_mem_total_mib, 0), "lead": r.lead,
        "gpu_xid": r.gpu_xid, "gpu_throttle": list(r.gpu_throttle),
    }


def event_json(e: EventRec) -> dict[str, Any]:
    return {
        "type": clean(e.type), "reason": clean(e.reason), "object": f"{e.kind}/{clean(e.object_name)}",
        "message": clean(e.message), "count": e.count, "last_seen": _ts(e.last),
    }


def get_json(w: WorkloadView, events: list[EventRec], now: float | None = None) -> dict[str, Any]:
    wl = workload_json(w, now)
    wl["conditions"] = [
        {"type": c.type, "status": c.status, "reason": clean(c.reason), "message": clean(c.message),
         "last_transition": _ts(c.at)}
        for c in w.conditions
    ]
    wl["command"] = clean(w.command)
    return {"workload": wl, "ranks": [rank_json(r) for r in w.ranks], "events": [event_json(e) for e in events]}


def node_json(n: NodeView) -> dict[str, Any]:
    return {
        "name": clean(n.name), "pool": clean(n.pool), "gpu_model": clean(n.product), "gpus": _num(n.gpus),
        "gpus_allocated": _num(n.gpus_allocated), "gpu_util": _num(n.gpu_util),
        "gpu_mem_used_mib": _num(n.gpu_mem_used_mib, 0), "ready": n.ready, "pods": n.pods,
    }
