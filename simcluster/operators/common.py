"""Shared machinery of the emulated operators: labels, conditions, events, owned objects.

Everything here writes through the store the way an operator writes through the API server:
`api_create` applies the API server's defaulting and admission before storing, `api_delete`
offers the object to the server's delete hooks first (so the kubelet can terminate a pod
gracefully), and `EventRecorder` aggregates repeated events like client-go's recorder without
scanning every Event in the namespace.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeGuard

from ..apiserver.errors import ApiError
from ..apiserver.resources import ResourceType
from ..apiserver.store import Stored, TypeKey
from ..apiserver.validation import default, validate_new
from ..controllers.base import now as now  # (the operators take their clock from here)

if TYPE_CHECKING:
    from ..cluster import SimCluster

# -- label and annotation keys (conventions §1.4, §2.3, §6.6) ------------------------------------
OPERATOR_NAME = "training.kubeflow.org/operator-name"
JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
JOB_ROLE = "training.kubeflow.org/job-role"

BATCH_JOB_NAME = "batch.kubernetes.io/job-name"
BATCH_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME = "job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"

POD_KEY: TypeKey = ("", "pods")
SERVICE_KEY: TypeKey = ("", "services")
CONFIGMAP_KEY: TypeKey = ("", "configmaps")
SECRET_KEY: TypeKey = ("", "secrets")
EVENT_KEY: TypeKey = ("", "events")
JOB_KEY: TypeKey = ("batch", "jobs")

TERMINAL_PHASES = ("Succeeded", "Failed")


# -- time ------------------------------------------------------------------------------------------
def parse_time(value: Any) -> float | None:
    """RFC3339 (with or without fraction) to a POSIX timestamp; None if absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# -- small readers -----------------------------------------------------------------------------
def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def is_int(value: Any) -> TypeGuard[int]:
    """An integer that is not a boolean (JSON's integers)."""
    return isinstance(value, int) and not isinstance(value, bool)


def controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    for ref in as_list(as_dict(obj.get("metadata")).get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def owner_ref(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def phase(pod: dict[str, Any]) -> str:
    return as_dict(pod.get("status")).get("phase") or "Pending"


def deleting(obj: dict[str, Any]) -> bool:
    return bool(as_dict(obj.get("metadata")).get("deletionTimestamp"))


def is_active(pod: dict[str, Any]) -> bool:
    """`FilterActivePods`: not finished and not being deleted."""
    return phase(pod) not in TERMINAL_PHASES and not deleting(pod)


def pod_ready(pod: dict[str, Any]) -> bool:
    for c in as_list(as_dict(pod.get("status")).get("conditions")):
        if isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True":
            return True
    return False


def restart_count(pod: dict[str, Any]) -> int:
    st = as_dict(pod.get("status"))
    total = 0
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in as_list(st.get(key)):
            if isinstance(cs, dict) and is_int(cs.get("restartCount")):
                total += cs["restartCount"]
    return total


def exit_code(pod: dict[str, Any], container: str) -> int | None:
    """The terminated exit code of `container`, or None when it has not terminated."""
    for cs in as_list(as_dict(pod.get("status")).get("containerStatuses")):
        if isinstance(cs, dict) and cs.get("name") == container:
            code = as_dict(as_dict(cs.get("state")).get("terminated")).get("exitCode")
            if is_int(code):
                return code
    return None


def label_selector_string(labels: dict[str, str]) -> str:
    """`metav1.FormatLabelSelector` of matchLabels: requirements sorted by key."""
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


# -- field errors (k8s.io/apimachinery/pkg/util/validation/field) ------------------------------
def go_value(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def required(path: str, detail: str) -> str:
    return f"{path}: Required value: {detail}"


def forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {go_value(value)}: {detail}"


def not_supported(path: str, value: Any, supported: Iterable[str]) -> str:
    quoted = ", ".join(f'"{s}"' for s in supported)
    return f"{path}: Unsupported value: {go_value(value)}: supported values: {quoted}"


def aggregate(errors: list[str]) -> str:
    """`utilerrors.NewAggregate(...).Error()`."""
    if len(errors) == 1:
        return errors[0]
    return "[" + ", ".join(errors) + "]"


def camel_case_keys(specs: dict[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """`setTypeNameToCamelCase`: `worker` or `WORKER` becomes `Worker`; unknown keys stay."""
    by_lower = {k.lower(): k for k in known}
    out: dict[str, Any] = {}
    for key, value in specs.items():
        name = by_lower.get(str(key).lower(), key)
        if name in out and name != key:
            continue  # an exact-case key wins over a differently cased duplicate
        out[name] = value
    return out


def _canonical_quantity(value: Any) -> Any:
    """What a Go `resource.Quantity` marshals a YAML number to: 4 -> "4", 0.5 -> "500m"."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int) or float(value).is_integer():
        return str(int(value))
    millis = value * 1000
    return f"{round(millis)}m" if abs(millis - round(millis)) < 1e-9 else str(value)


def canonical_pod_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Resource quantities as the operator's typed objects write them (strings), in place."""
    for key in ("initContainers", "containers"):
        for c in as_list(spec.get(key)):
            res = as_dict(c.get("resources")) if isinstance(c, dict) else {}
            for part in ("limits", "requests"):
                vals = res.get(part)
                if isinstance(vals, dict):
                    res[part] = {k: _canonical_quantity(v) for k, v in vals.items()}
    if isinstance(spec.get("overhead"), dict):
        spec["overhead"] = {k: _canonical_quantity(v) for k, v in spec["overhead"].items()}
    return spec


def container_command_errors(
    containers: list[Any], path: str, *, skip_first: bool = False
) -> list[str]:
    """simcluster runs commands, not images: a container needs `command` or `args`."""
    errs = []
    for i, c in enumerate(containers):
        if skip_first and i == 0:
            continue
        if isinstance(c, dict) and not as_list(c.get("command")) and not as_list(c.get("args")):
            errs.append(
                required(
                    f"{path}[{i}].command",
                    "a container needs a command or args (simcluster runs no container images)",
                )
            )
    return errs


# -- conditions ------------------------------------------------------------------------------------
def get_condition(status: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in as_list(status.get("conditions")):
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return None


def condition_true(status: dict[str, Any], ctype: str) -> bool:
    c = get_condition(status, ctype)
    return c is not None and c.get("status") == "True"


def is_finished(status: dict[str, Any]) -> bool:
    return condition_true(status, "Succeeded") or condition_true(status, "Failed")


def set_condition(
    status: dict[str, Any],
    ctype: str,
    cstatus: str,
    reason: str,
    message: str,
    *,
    frozen_when_failed: bool = True,
    mpi: bool = False,
) -> bool:
    """`UpdateJobConditions` of training-operator (`mpi=True`: mpi-operator's variant).

    Returns True when the conditions changed.
    """
    if frozen_when_failed and condition_true(status, "Failed"):
        return False
    cur = get_condition(status, ctype)
    if cur is not None and cur.get("status") == cstatus and cur.get("reason") == reason:
        return False
    stamp = now()
    cond = {
        "type": ctype,
        "status": cstatus,
        "reason": reason,
        "message": message,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
    }
    if cur is not None and cur.get("status") == cstatus:
        cond["lastTransitionTime"] = cur.get("lastTransitionTime", stamp)
    kept = []
    for c in as_list(status.get("conditions")):
        if not isinstance(c, dict):
            continue
        t = c.get("type")
        if (ctype == "Restarting" and t == "Running") or (ctype == "Running" and t == "Restarting"):
            continue
        if t == ctype:
            continue
        if ctype in ("Failed", "Succeeded") and (t == "Running" or (mpi and t == "Failed")):
            c = {**c, "status": "False"}
        kept.append(c)
    kept.append(cond)
    status["conditions"] = kept
    return True




# -- writing like an API client ------------------------------------------------------------------
def rtype(sim: SimCluster, group: str, version: str, plural: str) -> ResourceType:
    rt = sim.registry.get(group, version, plural)
    if rt is None:
        raise ApiError(404, f"the server could not find the requested resource ({plural}.{group})")
    return rt


def api_create(sim: SimCluster, rt: ResourceType, obj: dict[str, Any]) -> Stored:
    """Create as a client would: validation, the server's defaulting and admission, then store."""
    meta = obj.setdefault("metadata", {})
    ns = meta.get("namespace")
    if rt.namespaced and (not ns or sim.store.find(("", "namespaces"), "", ns) is None):
        raise ApiError(404, f'namespaces "{ns}" not found')
    validate_new(rt, obj)
    default(rt, obj, sim.server.service_ips)
    for hook in sim.server.admission:
        hook(rt, obj)
    return sim.store.create(rt, obj, ns)


def api_delete(sim: SimCluster, rt: ResourceType, obj: dict[str, Any]) -> bool:
    """Delete as a client would: delete hooks first (graceful pod termination), else remove."""
    meta = obj["metadata"]
    ns = meta.get("namespace", "")
    cur = sim.store.find(rt.key, ns if rt.namespaced else "", meta["name"])
    if cur is None:
        return False
    if cur.obj["metadata"].get("deletionTimestamp"):
        return True
    for hook in sim.server.delete_hooks:
        try:
            if hook(rt, cur.obj, None):
                return True
        except ApiError:
            continue
    try:
        sim.store.remove(rt, ns, meta["name"])
    except ApiError:
        return False
    return True


def owned(sim: SimCluster, owner_uid: str, tkey: TypeKey) -> list[dict[str, Any]]:
    """Objects of one type whose controller ownerReference is `owner_uid` (owner index)."""
    out = []
    for dep_tkey, (ns, name) in sim.store.dependents(owner_uid):
        if dep_tkey != tkey:
            continue
        st = sim.store.find(tkey, ns, name)
        if st is None:
            continue
        ref = controller_ref(st.obj)
        if ref is not None and ref.get("uid") == owner_uid:
            out.append(st.obj)
    return out


def write_status(sim: SimCluster, rt: ResourceType, obj: dict[str, Any], status: dict[str, Any]) -> None:
    """Replace `status` (the status subresource) if it changed."""
    meta = obj["metadata"]
    cur = sim.store.find(rt.key, meta.get("namespace", ""), meta["name"])
    if cur is None or cur.obj.get("metadata", {}).get("uid") != meta.get("uid"):
        return
    if cur.obj.get("status") == status:
        return
    new = copy.deepcopy(status)

    def fn(o: dict[str, Any]) -> None:
        o["status"] = new

    sim.store.mutate(rt, meta.get("namespace", ""), meta["name"], fn)


@dataclass
class Timers:
    """Delayed re-reconciles: `enqueue_after` deduplicated per key and due time."""

    enqueue_after: Callable[[float, Any], None]

    def __post_init__(self) -> None:
        self._due: dict[Any, float] = {}

    def at(self, key: Any, delay: float) -> None:
        due = time.monotonic() + max(0.0, delay)
        prev = self._due.get(key)
        if prev is not None and time.monotonic() < prev <= due + 0.05:
            return
        self._due[key] = due
        self.enqueue_after(max(0.0, delay) + 0.05, key)
