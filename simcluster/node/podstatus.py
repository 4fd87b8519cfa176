"""A pod's status as the kubelet reports it, computed from its containers' runs (no processes here:
those are `podruntime`'s, which writes this status through the store).

Status follows the kubelet: phase from `getPhase`, conditions PodReadyToStartContainers,
Initialized, Ready, ContainersReady (PodScheduled kept or set), container states waiting
(ContainerCreating / PodInitializing / CrashLoopBackOff / CreateContainerError /
CreateContainerConfigError), running, terminated (Completed, Error, OOMKilled, StartError), with
restartCount, lastState, containerID, ready and started; images normalised as the runtime reports
them (`busybox` is `docker.io/library/busybox:latest`), with a digest made from the name.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from ..apiserver.store import now_rfc3339
from .podenv import dict_items

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .container import ContainerRun, Instance
    from .podruntime import PodRuntime


def go_duration(seconds: float) -> str:
    """A duration as Go's time.Duration.String() prints it (10s, 1m20s, 5m0s, 200ms)."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size or unit == "ns":
                whole, frac = divmod(ns, size)
                text = str(whole)
                if frac:
                    text += "." + str(frac).rjust(len(str(size)) - 1, "0").rstrip("0")
                return text + unit
    h, rem = divmod(ns, 3_600_000_000_000)
    m, rem = divmod(rem, 60_000_000_000)
    s, frac = divmod(rem, 1_000_000_000)
    sec = str(s) + ("." + str(frac).rjust(9, "0").rstrip("0") if frac else "") + "s"
    if h:
        return f"{h}h{m}m{sec}"
    if m:
        return f"{m}m{sec}"
    return sec


def normalize_image(image: str) -> str:
    if not image:
        return ""
    name = image
    last = name.rsplit("/", 1)[-1]
    if "@" not in name and ":" not in last:
        name += ":latest"
    first = name.split("/")[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif "." not in first and ":" not in first and first != "localhost":
        name = "docker.io/" + name
    return name


def image_id(image: str) -> str:
    norm = normalize_image(image)
    if not norm:
        return ""
    repo = norm.split("@")[0]
    last = repo.rsplit("/", 1)
    if ":" in last[-1]:
        repo = repo[: repo.rfind(":")]
    return f"{repo}@sha256:{hashlib.sha256(norm.encode()).hexdigest()}"


# -- containers ------------------------------------------------------------------------------------


def terminated_state(inst: Instance) -> dict[str, Any]:
    """The `terminated` state of an instance that has ended."""
    st: dict[str, Any] = {"exitCode": inst.exit_code, "reason": inst.reason}
    if inst.message:
        st["message"] = inst.message
    st["startedAt"] = inst.started_at
    st["finishedAt"] = inst.finished_at
    st["containerID"] = inst.container_id
    return st


def container_state(run: ContainerRun, default_waiting: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(state, lastState) as the kubelet reports them."""
    last, prev = run.last, run.prev
    if run.waiting is not None:
        reason, message = run.waiting
        w: dict[str, Any] = {"reason": reason}
        if message:
            w["message"] = message
        lst = {"terminated": terminated_state(last)} if last is not None and last.exit_code is not None else {}
        return {"waiting": w}, lst
    if last is None:
        return {"waiting": {"reason": default_waiting}}, {}
    lst = {"terminated": terminated_state(prev)} if prev is not None and prev.exit_code is not None else {}
    if last.exit_code is not None:
        return {"terminated": terminated_state(last)}, lst
    if last.started_at is None:
        return {"waiting": {"reason": default_waiting}}, lst
    return {"running": {"startedAt": last.started_at}}, lst


def default_waiting(init_runs: Sequence[ContainerRun]) -> str:
    """The waiting reason of a regular container that has not started yet."""
    return "PodInitializing" if init_runs else "ContainerCreating"


def container_status(run: ContainerRun, default_waiting: str) -> dict[str, Any]:
    state, last_state = container_state(run, default_waiting)
    image = str(run.spec.get("image") or "")
    if run.kind == "init":
        ready = "terminated" in state and state["terminated"]["exitCode"] == 0
    else:
        ready = bool(run.ready and "running" in state)
    out: dict[str, Any] = {
        "name": run.name,
        "state": state,
        "lastState": last_state,
        "ready": ready,
        "restartCount": run.restart_count,
        "image": normalize_image(image),
        "imageID": image_id(image) if run.last is not None else "",
        "started": "running" in state,
    }
    if run.last is not None:
        out["containerID"] = run.last.container_id
    mounts = [{"name": m.get("name"), "mountPath": m.get("mountPath"),
               **({"readOnly": True} if m.get("readOnly") else {})}
              for m in dict_items(run.spec.get("volumeMounts"))]
    if mounts:
        out["volumeMounts"] = mounts
    return out


# -- the pod ---------------------------------------------------------------------------------------


def pod_phase(init_runs: Sequence[ContainerRun], runs: Sequence[ContainerRun], restart_policy: str,
              terminal: bool = False) -> str:
    """The kubelet's getPhase; `terminal`: the pod is done for good (no restart can follow)."""
    pending_init = failed_init = 0
    for r in init_runs:
        if r.kind == "sidecar":
            if r.last is None or r.last.started_at is None:
                pending_init += 1
            continue
        state, last = container_state(r, "PodInitializing")
        if "running" in state:
            pending_init += 1
        elif "terminated" in state:
            if state["terminated"]["exitCode"] != 0:
                failed_init += 1
        elif last.get("terminated"):
            if last["terminated"]["exitCode"] != 0:
                failed_init += 1
        else:
            pending_init += 1
    if failed_init and restart_policy == "Never":
        return "Failed"
    running = stopped = succeeded = waiting = 0
    for r in runs:
        state, last = container_state(r, default_waiting(init_runs))
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            if state["terminated"]["exitCode"] == 0:
                succeeded += 1
        elif last.get("terminated"):
            stopped += 1
        else:
            waiting += 1
    if pending_init or failed_init:
        return "Pending"
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if stopped:
        if terminal:
            return "Succeeded" if stopped == succeeded else "Failed"
        if restart_policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        if restart_policy == "Never":
            return "Failed"
        return "Running"
    return "Pending"


class Conditions:
    """Pod conditions with their lastTransitionTime: kept while a condition's status stays."""

    def __init__(self) -> None:
        self._times: dict[str, tuple[str, str]] = {}

    def condition(self, now: str, type_: str, ok: bool, reason: str = "", message: str = "") -> dict[str, Any]:
        status = "True" if ok else "False"
        prev = self._times.get(type_)
        if prev is None or prev[0] != status:
            self._times[type_] = (status, now)
        cond: dict[str, Any] = {"type": type_, "status": status, "lastProbeTime": None,
                                "lastTransitionTime": self._times[type_][1]}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        return cond


def pod_status(rt: PodRuntime, current: dict[str, Any], phase: str) -> dict[str, Any]:
    """The status the kubelet writes for the pod of `rt` in `phase`, over the `current` one (its
    PodScheduled condition, other components' conditions, qosClass and nominatedNodeName stay)."""
    now = now_rfc3339()
    conditions = rt.conditions
    status: dict[str, Any] = {}
    old_conds = list(current.get("conditions") or ())
    scheduled = next((c for c in old_conds if c.get("type") == "PodScheduled"), None)
    if scheduled is None:
        scheduled = {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                     "lastTransitionTime": rt.start_time}
    init_incomplete = []
    for r in rt.init_runs:
        if r.kind == "sidecar":
            if r.last is None or r.last.started_at is None:
                init_incomplete.append(r.name)
        elif not (r.last is not None and r.last.exit_code == 0 and r.waiting is None):
            init_incomplete.append(r.name)
    if rt.initialized or not init_incomplete:
        initialized = conditions.condition(now, "Initialized", True,
                                           "PodCompleted" if phase == "Succeeded" and rt.init_runs else "")
    else:
        initialized = conditions.condition(now, "Initialized", False, "ContainersNotInitialized",
                                           f"containers with incomplete status: [{' '.join(init_incomplete)}]")
    unready = [r.name for r in rt.runs if not (r.ready and r.last is not None and r.last.running)]
    if phase == "Succeeded":
        ready = conditions.condition(now, "Ready", False, "PodCompleted")
        cready = conditions.condition(now, "ContainersReady", False, "PodCompleted")
    elif unready:
        msg = f"containers with unready status: [{' '.join(unready)}]"
        ready = conditions.condition(now, "Ready", False, "ContainersNotReady", msg)
        cready = conditions.condition(now, "ContainersReady", False, "ContainersNotReady", msg)
    else:
        ready = conditions.condition(now, "Ready", True)
        cready = conditions.condition(now, "ContainersReady", True)
    sandbox = conditions.condition(now, "PodReadyToStartContainers", rt.sandbox_ready and not rt.finished)
    known = {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"}
    status["observedGeneration"] = rt.pod["metadata"].get("generation", 1)
    status["phase"] = phase
    status["conditions"] = [sandbox, initialized, ready, cready, scheduled,
                            *(c for c in old_conds if c.get("type") not in known)]
    status["hostIP"] = rt.host_ip
    status["hostIPs"] = [{"ip": rt.host_ip}]
    if rt.sandbox_ready:
        status["podIP"] = rt.pod_ip
        status["podIPs"] = [{"ip": rt.pod_ip}]
    status["startTime"] = rt.start_time
    if rt.init_runs:
        status["initContainerStatuses"] = [container_status(r, "PodInitializing") for r in rt.init_runs]
    status["containerStatuses"] = [container_status(r, default_waiting(rt.init_runs)) for r in rt.runs]
    if current.get("qosClass"):
        status["qosClass"] = current["qosClass"]
    if current.get("nominatedNodeName"):
        status["nominatedNodeName"] = current["nominatedNodeName"]
    if current.get("ephemeralContainerStatuses"):  # (written by `ephemeral`, as each one runs)
        status["ephemeralContainerStatuses"] = current["ephemeralContainerStatuses"]
    return status
