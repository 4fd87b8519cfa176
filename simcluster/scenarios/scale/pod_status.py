"""Pod statuses of the scale scenario, as the kubelet and the scheduler write them: Running (most of
them, filled in from a `Template` per job and role, sharing what does not vary), restarted, crash-looping, finished,
Pending and Unschedulable; and `churn_pod`, the status changes of ``--churn``."""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any

import orjson

from ...node.podstatus import go_duration
from .nodes import NodeInfo
from .plan import Job, Role
from .shared import GPU, epoch_of, image_id_of, managed_entry, random_hex, rfc3339
from .template import Template

_dumps = orjson.dumps
_loads = orjson.loads
_STATUS_TOKENS = ("@@T_PRS@@", "@@T_START@@", "@@T_READY@@", "@@T_SCHED@@", "@@T_CSTART@@", "@@HOSTIP@@",
                  "@@PODIP@@", "@@CID@@")


def churn_pod(pod: dict[str, Any], rng: random.Random, now: datetime | None = None) -> dict[str, Any]:
    """Return a changed deep copy of ``pod``; ``pod`` itself is not touched.

    A Running pod flips its first container: running/ready becomes a crash
    (restartCount+1, lastState.terminated, waiting CrashLoopBackOff, Ready and
    ContainersReady False); a not-ready one comes back running and ready.
    Pending pods get a fresh scheduling attempt, terminal pods only a new
    status write. The kubelet/scheduler managedFields time is updated too.
    """
    new: dict[str, Any] = _loads(_dumps(pod))
    t = epoch_of(now)
    ts = rfc3339(t)
    status = new.setdefault("status", {})
    statuses = status.get("containerStatuses") or []
    phase = status.get("phase")
    if phase == "Running" and statuses:
        cs = statuses[0]
        cname = cs.get("name", "main")
        if cs.get("ready"):
            started = (cs.get("state", {}).get("running") or {}).get("startedAt", ts)
            exit_code = rng.choice((1, 1, 1, 137, 139))
            cs["lastState"] = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "OOMKilled" if exit_code == 137 else "Error",
                    "startedAt": started,
                    "finishedAt": ts,
                    "containerID": cs.get("containerID", ""),
                }
            }
            cs["restartCount"] = int(cs.get("restartCount", 0)) + 1
            backoff = min(300, 10 * 2 ** min(cs["restartCount"] - 1, 5))
            meta = new.get("metadata", {})
            cs["state"] = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": (
                        f"back-off {go_duration(backoff)} restarting failed "
                        f"container={cname} pod={meta.get('name')}_"
                        f"{meta.get('namespace')}({meta.get('uid')})"
                    ),
                }
            }
            cs["ready"] = False
            cs["started"] = False
            _set_ready(status, False, ts, cname)
        else:
            cs["state"] = {"running": {"startedAt": ts}}
            cs["ready"] = True
            cs["started"] = True
            cs["containerID"] = "containerd://" + random_hex(rng, 64)
            _set_ready(status, True, ts, cname)
        manager = "kubelet"
    elif phase == "Pending" and not new.get("spec", {}).get("nodeName"):
        for cond in status.get("conditions", []):
            if cond.get("type") == "PodScheduled":
                cond["lastTransitionTime"] = ts
                cond["message"] = _unschedulable_message_from(cond.get("message", ""), rng)
        manager = "kube-scheduler"
    else:
        for cond in status.get("conditions", []):
            if cond.get("type") == "Ready":
                cond["lastProbeTime"] = ts
        manager = "kubelet"
    meta = new.setdefault("metadata", {})
    touched = False
    for entry in meta.get("managedFields", []):
        if entry.get("manager") == manager:
            entry["time"] = ts
            touched = True
    if not touched:
        meta.setdefault("managedFields", []).append(
            {
                "manager": manager,
                "operation": "Update",
                "apiVersion": "v1",
                "time": ts,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {}}},
                "subresource": "status",
            }
        )
    return new


def _cond(ctype: str, status: str, ts: str, reason: str | None = None, msg: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "type": ctype,
        "observedGeneration": 1,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": ts,
    }
    if reason:
        c["reason"] = reason
    if msg:
        c["message"] = msg
    return c


def _set_ready(status: dict[str, Any], ready: bool, ts: str, cname: str) -> None:
    for cond in status.get("conditions", []):
        if cond.get("type") in ("Ready", "ContainersReady"):
            cond["lastTransitionTime"] = ts
            if ready:
                cond["status"] = "True"
                cond.pop("reason", None)
                cond.pop("message", None)
            else:
                cond["status"] = "False"
                cond["reason"] = "ContainersNotReady"
                cond["message"] = f"containers with unready status: [{cname}]"


def _unschedulable_message(nodes: int, what: str) -> str:
    return (
        f"0/{nodes} nodes are available: {nodes} Insufficient {what}. "
        f"preemption: 0/{nodes} nodes are available: {nodes} No preemption "
        "victims found for incoming pod."
    )


def _unschedulable_message_from(old: str, rng: random.Random) -> str:
    # keep the node count, vary the reason split a little
    try:
        total = int(old.split("/", 1)[1].split(" ", 1)[0])
    except (IndexError, ValueError):
        total = 1
    busy = rng.randint(0, total)
    if busy in (0, total):
        return _unschedulable_message(total, GPU)
    return (
        f"0/{total} nodes are available: {busy} Insufficient {GPU}, "
        f"{total - busy} Insufficient cpu. preemption: 0/{total} nodes are "
        f"available: {total} No preemption victims found for incoming pod."
    )


# Read-only fieldsV1 pieces shared between pods (nothing edits fieldsV1 in place;
# churn_pod and the store copy objects before changing them).
_LEAF: dict[str, Any] = {}
_IP_FIELDS: dict[str, Any] = {".": _LEAF, "f:ip": _LEAF}
_KUBELET_STATUS_FIELDS: dict[str, Any] = {
    "f:conditions": _LEAF,
    "f:containerStatuses": _LEAF,
    "f:hostIP": _LEAF,
    "f:hostIPs": _LEAF,
    "f:observedGeneration": _LEAF,
    "f:phase": _LEAF,
    "f:podIP": _LEAF,
    "f:podIPs": _LEAF,
    "f:startTime": _LEAF,
}
_COND_FIELDS: dict[tuple[str, ...], dict[str, Any]] = {}


def _cond_fields(cond: dict[str, Any]) -> dict[str, Any]:
    """fieldsV1 of one pod condition; shared (read-only) between equal shapes."""
    keys = tuple(sorted(cond))
    tree = _COND_FIELDS.get(keys)
    if tree is None:
        tree = _COND_FIELDS[keys] = {".": {}, **{f"f:{k}": {} for k in keys}}
    return tree



class PodStatusBuilder:
    """A pod's status and the kubelet's (or the scheduler's) managedFields entry for it."""

    def __init__(self, rng: random.Random, now: int, n_nodes: int) -> None:
        self.rng = rng
        self.now = now
        self.n_nodes = n_nodes
        self.image_ids: dict[str, str] = {}
        self._status_tmpl: dict[tuple[str, str, str, bytes], Template] = {}
        self._running_cond_fields: dict[str, Any] | None = None

    def status(
        self,
        job: Job,
        role: Role,
        state: str,
        created: int,
        node: NodeInfo | None,
        res: dict[str, Any],
        cname: str,
        pod: dict[str, Any],
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        rng = self.rng
        now = self.now
        qos = "Guaranteed" if res.get("limits") == res.get("requests") else "Burstable"
        if node is None:
            if state == "unschedulable":
                msg = _unschedulable_message(self.n_nodes, "cpu")
            else:
                msg = _unschedulable_message(self.n_nodes, GPU if job.gpus else "cpu")
            ts_c = rfc3339(created)
            status = {
                "observedGeneration": 1,
                "phase": "Pending",
                "conditions": [_cond("PodScheduled", "False", ts_c, "Unschedulable", msg)],
                "qosClass": qos,
            }
            tree: dict[str, Any] = {
                "f:status": {
                    "f:conditions": {
                        ".": {},
                        'k:{"type":"PodScheduled"}': {
                            ".": {},
                            "f:lastProbeTime": {},
                            "f:lastTransitionTime": {},
                            "f:message": {},
                            "f:observedGeneration": {},
                            "f:reason": {},
                            "f:status": {},
                            "f:type": {},
                        },
                    }
                }
            }
            return status, managed_entry("kube-scheduler", "v1", rfc3339(now - rng.randint(0, 30)), tree, "status")

        ip = node.cidr_base + str(node.next_ip)
        node.next_ip = node.next_ip + 1 if node.next_ip < 254 else 2
        sched = created + rng.randint(0, 3)
        start = sched + 1
        c_start = start + rng.randint(5, 240)
        if state == "running":  # ~90 % of pods: the template fast path
            return self._running_status(job, role, res, cname, qos, node, ip, sched, start, c_start)
        ts_sched, ts_start, ts_cstart = rfc3339(sched), rfc3339(start), rfc3339(c_start)
        image = job.image
        image_id = self.image_ids.get(image)
        if image_id is None:
            image_id = self.image_ids[image] = image_id_of(image)
        cid = "containerd://" + random_hex(rng, 64)
        restarts = 0
        last_state: dict[str, Any] = {}
        ready = True
        kubelet_ts = c_start + 1
        if state in ("running", "restarted"):
            phase = "Running"
            c_state: dict[str, Any] = {"running": {"startedAt": ts_cstart}}
            if state == "restarted":
                restarts = rng.randint(1, 3)
                first = c_start
                c_start = rng.randint(first + 60, max(first + 61, now - 30))
                c_state = {"running": {"startedAt": rfc3339(c_start)}}
                last_state = {
                    "terminated": {
                        "exitCode": rng.choice((1, 137)),
                        "reason": "Error",
                        "startedAt": ts_cstart,
                        "finishedAt": rfc3339(c_start - 1),
                        "containerID": "containerd://" + random_hex(rng, 64),
                    }
                }
                last_state["terminated"]["reason"] = (
                    "OOMKilled" if last_state["terminated"]["exitCode"] == 137 else "Error"
                )
                kubelet_ts = c_start + 1
            conds = [
                _cond("PodReadyToStartContainers", "True", rfc3339(start + 2)),
                _cond("Initialized", "True", ts_start),
                _cond("Ready", "True", rfc3339(c_start + 1)),
                _cond("ContainersReady", "True", rfc3339(c_start + 1)),
                _cond("PodScheduled", "True", ts_sched),
            ]
            started = True
        elif state == "crash":
            phase = "Running"
            ready = False
            restarts = rng.randint(4, 40)
            fin = now - rng.randint(5, 280)
            backoff = min(300, 10 * 2 ** min(restarts - 1, 5))
            c_state = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": (
                        f"back-off {go_duration(backoff)} restarting failed container={cname} "
                        f"pod={pod['metadata']['name']}_{job.ns}({pod['metadata']['uid']})"
                    ),
                }
            }
            last_state = {
                "terminated": {
                    "exitCode": 1,
                    "reason": "Error",
                    "startedAt": rfc3339(fin - rng.randint(3, 60)),
                    "finishedAt": rfc3339(fin),
                    "containerID": cid,
                }
            }
            not_ready_since = rfc3339(max(c_start + 5, now - rng.randint(600, 7200)))
            msg = f"containers with unready status: [{cname}]"
            conds = [
                _cond("PodReadyToStartContainers", "True", rfc3339(start + 2)),
                _cond("Initialized", "True", ts_start),
                _cond("Ready", "False", not_ready_since, "ContainersNotReady", msg),
                _cond("ContainersReady", "False", not_ready_since, "ContainersNotReady", msg),
                _cond("PodScheduled", "True", ts_sched),
            ]
            started = False
            kubelet_ts = fin + 1
        else:  # succeeded / failed
            ok = state == "succeeded"
            phase = "Succeeded" if ok else "Failed"
            ready = False
            finished = min(now - 60, c_start + rng.randint(3600, 2 * 86400))
            finished = max(finished, c_start + 1)
            c_state = {
                "terminated": {
                    "exitCode": 0 if ok else 1,
                    "reason": "Completed" if ok else "Error",
                    "startedAt": ts_cstart,
                    "finishedAt": rfc3339(finished),
                    "containerID": cid,
                }
            }
            reason = "PodCompleted" if ok else "PodFailed"
            ts_fin = rfc3339(finished + 1)
            conds = [
                _cond("PodReadyToStartContainers", "False", ts_fin),
                _cond("Initialized", "True", ts_start, "PodCompleted" if ok else None),
                _cond("Ready", "False", ts_fin, reason),
                _cond("ContainersReady", "False", ts_fin, reason),
                _cond("PodScheduled", "True", ts_sched),
            ]
            started = False
            kubelet_ts = finished + 1

        cstatus = {
            "name": cname,
            "state": c_state,
            "lastState": last_state,
            "ready": ready,
            "restartCount": restarts,
            "image": image,
            "imageID": image_id,
            "containerID": cid,
            "started": started,
            "resources": {k: dict(v) for k, v in res.items()},
            "user": {"linux": {"uid": 0, "gid": 0, "supplementalGroups": [0]}},
        }
        ip_list = [{"ip": ip}]
        status = {
            "observedGeneration": 1,
            "phase": phase,
            "conditions": conds,
            "hostIP": node.ip,
            "hostIPs": [{"ip": node.ip}],
            "podIP": ip,
            "podIPs": ip_list,
            "startTime": ts_start,
            "containerStatuses": [cstatus],
            "qosClass": qos,
        }
        cond_fields = {}
        for c in sorted(conds, key=lambda c: c["type"]):
            if c["type"] != "PodScheduled":  # the scheduler's, not the kubelet's
                cond_fields[f'k:{{"type":"{c["type"]}"}}'] = _cond_fields(c)
        fields = dict(_KUBELET_STATUS_FIELDS)
        fields["f:conditions"] = cond_fields
        fields["f:podIPs"] = {".": _LEAF, f'k:{{"ip":"{ip}"}}': _IP_FIELDS}
        return status, managed_entry("kubelet", "v1", rfc3339(min(kubelet_ts, now)), {"f:status": fields}, "status")

    def _running_status(
        self,
        job: Job,
        role: Role,
        res: dict[str, Any],
        cname: str,
        qos: str,
        node: NodeInfo,
        ip: str,
        sched: int,
        start: int,
        c_start: int,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Status of a healthy Running pod, filled in from a template per image, container name, QoS
        class and resources (shared by the pods of many jobs)."""
        key = (job.image, cname, qos, _dumps(res))
        tmpl = self._status_tmpl.get(key)
        if tmpl is None:
            image_id = self.image_ids.get(job.image)
            if image_id is None:
                image_id = self.image_ids[job.image] = image_id_of(job.image)
            status = {
                "observedGeneration": 1,
                "phase": "Running",
                "conditions": [
                    _cond("PodReadyToStartContainers", "True", "@@T_PRS@@"),
                    _cond("Initialized", "True", "@@T_START@@"),
                    _cond("Ready", "True", "@@T_READY@@"),
                    _cond("ContainersReady", "True", "@@T_READY@@"),
                    _cond("PodScheduled", "True", "@@T_SCHED@@"),
                ],
                "hostIP": "@@HOSTIP@@",
                "hostIPs": [{"ip": "@@HOSTIP@@"}],
                "podIP": "@@PODIP@@",
                "podIPs": [{"ip": "@@PODIP@@"}],
                "startTime": "@@T_START@@",
                "containerStatuses": [
                    {
                        "name": cname,
                        "state": {"running": {"startedAt": "@@T_CSTART@@"}},
                        "lastState": {},
                        "ready": True,
                        "restartCount": 0,
                        "image": job.image,
                        "imageID": image_id,
                        "containerID": "containerd://@@CID@@",
                        "started": True,
                        "resources": res,
                        "user": {"linux": {"uid": 0, "gid": 0, "supplementalGroups": [0]}},
                    }
                ],
                "qosClass": qos,
            }
            tmpl = self._status_tmpl[key] = Template(status, _STATUS_TOKENS)
        ts_ready = rfc3339(c_start + 1)
        status = tmpl.fill({
            "@@T_PRS@@": rfc3339(start + 2),
            "@@T_START@@": rfc3339(start),
            "@@T_READY@@": ts_ready,
            "@@T_SCHED@@": rfc3339(sched),
            "@@T_CSTART@@": rfc3339(c_start),
            "@@HOSTIP@@": node.ip,
            "@@PODIP@@": ip,
            "@@CID@@": random_hex(self.rng, 64),
        })
        cond_fields = self._running_cond_fields
        if cond_fields is None:
            cond_fields = self._running_cond_fields = {
                f'k:{{"type":"{c["type"]}"}}': _cond_fields(c)
                for c in sorted(status["conditions"], key=lambda c: c["type"])
                if c["type"] != "PodScheduled"
            }
        fields = dict(_KUBELET_STATUS_FIELDS)
        fields["f:conditions"] = cond_fields
        fields["f:podIPs"] = {".": _LEAF, f'k:{{"ip":"{ip}"}}': _IP_FIELDS}
        return status, managed_entry("kubelet", "v1", ts_ready, {"f:status": fields}, "status")

