"""The cells of each built-in kind's Table row, as kube-apiserver v1.35 prints them
(``pkg/printers/internalversion/printers.go``: printPod, printNode, ...), always the wide set; the
columns they fill and the custom resources' rows are `printers`'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .timestamps import created_at, human_duration, since, timestamp_of

# --------------------------------------------------------------------------
# Small formatting helpers (Go equivalents noted)
# --------------------------------------------------------------------------


def _format_labels(labels: Mapping[str, Any] | None) -> str:
    """labels.FormatLabels."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _selector_string(selector: Mapping[str, Any] | None) -> str:
    """metav1.LabelSelectorAsSelector(sel).String() ('' for nil or empty)."""
    if not selector:
        return ""
    reqs: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        reqs.append((key, f"{key}={value}"))
    for expr in selector.get("matchExpressions") or ():
        key = expr.get("key", "")
        op = expr.get("operator", "")
        values = sorted(str(v) for v in expr.get("values") or ())
        if op == "In":
            reqs.append((key, f"{key} in ({','.join(values)})"))
        elif op == "NotIn":
            reqs.append((key, f"{key} notin ({','.join(values)})"))
        elif op == "Exists":
            reqs.append((key, key))
        elif op == "DoesNotExist":
            reqs.append((key, f"!{key}"))
        else:
            return "<error>"
    reqs.sort(key=lambda r: r[0])
    return ",".join(r[1] for r in reqs)


def _format_selector(selector: Mapping[str, Any] | None) -> str:
    """metav1.FormatLabelSelector."""
    return _selector_string(selector) or "<none>"


def _layout_containers(containers: Sequence[Mapping[str, Any]] | None) -> tuple[str, str]:
    containers = containers or ()
    return (
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
    )


def _template_containers(obj: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec.get("containers") or ()


def _quantity(value: Any) -> str:
    if value is None:
        return "0"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def as_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


# --------------------------------------------------------------------------
# Built-in printers: each returns the row cells (always the wide set)
# --------------------------------------------------------------------------

EMPTY: dict[str, Any] = {}
_NO_NAMES: frozenset[str] = frozenset()


def print_pod(pod: Mapping[str, Any], now: float) -> list[Any]:
    meta = pod.get("metadata") or EMPTY
    spec = pod.get("spec") or EMPTY
    status = pod.get("status") or EMPTY
    containers = spec.get("containers") or ()
    init_specs = spec.get("initContainers") or ()
    conditions = status.get("conditions") or ()

    restarts = 0
    restartable_restarts = 0
    total = len(containers)
    ready = 0
    last_restart = 0.0  # 0 == zero time
    last_restartable_restart = 0.0

    phase = status.get("phase") or ""
    reason = status.get("reason") or phase

    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    restartable: set[str] | frozenset[str] = _NO_NAMES
    if init_specs:
        restartable = {c.get("name", "") for c in init_specs if c.get("restartPolicy") == "Always"}
        total += len(restartable)

    initializing = False
    n_init = len(init_specs)
    for i, cs in enumerate(status.get("initContainerStatuses") or ()):
        count = as_int(cs.get("restartCount"))
        restarts += count
        last_term = (cs.get("lastState") or EMPTY).get("terminated")
        finished = timestamp_of(last_term.get("finishedAt")) if last_term else None
        if finished is not None and finished > last_restart:
            last_restart = finished
        is_restartable = cs.get("name", "") in restartable
        if is_restartable:
            restartable_restarts += count
            if finished is not None and finished > last_restartable_restart:
                last_restartable_restart = finished
        state = cs.get("state") or EMPTY
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if terminated is not None and as_int(terminated.get("exitCode")) == 0:
            continue
        if is_restartable and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            t_reason = terminated.get("reason") or ""
            if not t_reason:
                signal = as_int(terminated.get("signal"))
                if signal:
                    reason = f"Init:Signal:{signal}"
                else:
                    reason = f"Init:ExitCode:{as_int(terminated.get('exitCode'))}"
            else:
                reason = "Init:" + t_reason
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{n_init}"
        initializing = True
        break

    if not initializing or any(
        c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions
    ):
        restarts = restartable_restarts
        last_restart = last_restartable_restart
        has_running = False
        error_reason = ""
        for cs in reversed(status.get("containerStatuses") or ()):
            restarts += cs.get("restartCount") or 0
            last_state = cs.get("lastState")
            last_term = last_state.get("terminated") if last_state else None
            if last_term:
                finished = timestamp_of(last_term.get("finishedAt"))
                if finished is not None and finished > last_restart:
                    last_restart = finished
            state = cs.get("state") or EMPTY
            waiting = state.get("waiting")
            terminated = state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None:
                t_reason = terminated.get("reason") or ""
                exit_code = as_int(terminated.get("exitCode"))
                if t_reason:
                    reason = t_reason
                else:
                    signal = as_int(terminated.get("signal"))
                    reason = f"Signal:{signal}" if signal else f"ExitCode:{exit_code}"
                if exit_code != 0:
                    error_reason = reason
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1

        if reason == "Completed":
            if has_running and any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
            ):
                reason = "Running"
            elif error_reason:
                reason = error_reason
            elif has_running:
                reason = "NotReady"

    if meta.get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    if restarts != 0 and last_restart:
        restarts_str = f"{restarts} ({human_duration(now - last_restart)} ago)"
    else:
        restarts_str = str(restarts)

    pod_ips = status.get("podIPs")
    pod_ip = (pod_ips[0].get("ip") if pod_ips else status.get("podIP")) or "<none>"
    gates = spec.get("readinessGates")
    if gates:
        by_type: dict[Any, Any] = {}
        for c in conditions:
            by_type.setdefault(c.get("type"), c.get("status"))
        true_count = sum(1 for g in gates if by_type.get(g.get("conditionType")) == "True")
        gates_str = f"{true_count}/{len(gates)}"
    else:
        gates_str = "<none>"

    return [
        meta.get("name", ""),
        f"{ready}/{total}",
        reason,
        restarts_str,
        since(meta.get("creationTimestamp"), now),
        pod_ip,
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_str,
    ]


def _node_roles(labels: Mapping[str, Any]) -> list[str]:
    roles: set[str] = set()
    for key, value in labels.items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key[len("node-role.kubernetes.io/"):]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    return sorted(roles)


def print_node(node: Mapping[str, Any], now: float) -> list[Any]:
    meta = node.get("metadata") or EMPTY
    spec = node.get("spec") or EMPTY
    status = node.get("status") or EMPTY
    states: list[str] = []
    ready_cond = None
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Ready":
            ready_cond = cond  # last one wins, like the Go condition map
    if ready_cond is not None:
        states.append("Ready" if ready_cond.get("status") == "True" else "NotReady")
    else:
        states.append("Unknown")
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = ",".join(_node_roles(meta.get("labels") or EMPTY)) or "<none>"
    info = status.get("nodeInfo") or EMPTY
    internal_ip = external_ip = "<none>"
    for addr in status.get("addresses") or ():
        if addr.get("type") == "InternalIP" and internal_ip == "<none>":
            internal_ip = addr.get("address", "")
        elif addr.get("type") == "ExternalIP" and external_ip == "<none>":
            external_ip = addr.get("address", "")
    return [
        meta.get("name", ""),
        ",".join(states),
        roles,
        since(meta.get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        internal_ip,
        external_ip,
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def print_namespace(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    phase = (obj.get("status") or EMPTY).get("phase", "")
    return [meta.get("name", ""), phase, since(meta.get("creationTimestamp"), now)]


def _lb_ingress(status: Mapping[str, Any]) -> str:
    result: set[str] = set()
    for ing in ((status.get("loadBalancer") or EMPTY).get("ingress") or ()):
        if ing.get("ip"):
            result.add(ing["ip"])
        elif ing.get("hostname"):
            result.add(ing["hostname"])
    return ",".join(sorted(result))


def print_service(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    spec = obj.get("spec") or EMPTY
    svc_type = spec.get("type") or "ClusterIP"
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    internal_ip = cluster_ips[0] if cluster_ips else "<none>"
    external_ips = list(spec.get("externalIPs") or ())
    if svc_type in ("ClusterIP", "NodePort"):
        external = ",".join(external_ips) if external_ips else "<none>"
    elif svc_type == "LoadBalancer":
        lb = _lb_ingress(obj.get("status") or EMPTY)  # server prints wide: never clipped
        if external_ips:
            external = ",".join([*(lb.split(",") if lb else []), *external_ips])
        else:
            external = lb or "<pending>"
    elif svc_type == "ExternalName":
        external = spec.get("externalName", "")
    else:
        external = "<unknown>"
    pieces = []
    for port in spec.get("ports") or ():
        proto = port.get("protocol") or "TCP"
        node_port = as_int(port.get("nodePort"))
        if node_port > 0:
            pieces.append(f"{port.get('port')}:{node_port}/{proto}")
        else:
            pieces.append(f"{port.get('port')}/{proto}")
    ports = ",".join(pieces) or "<none>"
    return [
        meta.get("name", ""),
        svc_type,
        internal_ip,
        external,
        ports,
        since(meta.get("creationTimestamp"), now),
        _format_labels(spec.get("selector")),
    ]


def print_event(obj: Mapping[str, Any], now: float) -> list[Any]:
    # Handles both core/v1 Events and events.k8s.io/v1 Events.
    meta = obj.get("metadata") or EMPTY
    first_raw = obj.get("firstTimestamp") or obj.get("deprecatedFirstTimestamp")
    first = since(first_raw, now) if first_raw else since(obj.get("eventTime"), now)
    last_raw = obj.get("lastTimestamp") or obj.get("deprecatedLastTimestamp")
    last = since(last_raw, now) if last_raw else first
    count = as_int(obj.get("count") or obj.get("deprecatedCount"))
    series = obj.get("series")
    if series:
        last = since(series.get("lastObservedTime"), now)
        count = as_int(series.get("count"))
    elif count == 0:
        count = 1
    involved = obj.get("involvedObject") or obj.get("regarding") or EMPTY
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or obj.get("deprecatedSource") or EMPTY
    component = source.get("component") or obj.get("reportingController") or ""
    host = source.get("host") or obj.get("reportingInstance") or ""
    source_str = f"{component}, {host}" if host else component
    message = obj.get("message")
    if message is None:
        message = obj.get("note") or ""
    return [
        last,
        obj.get("type", ""),
        obj.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        source_str,
        str(message).strip(),
        first,
        count,
        meta.get("name", ""),
    ]


def print_configmap(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    n = len(obj.get("data") or ()) + len(obj.get("binaryData") or ())
    return [meta.get("name", ""), n, since(meta.get("creationTimestamp"), now)]


def print_secret(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    n = len(obj.get("data") or ()) + len(obj.get("stringData") or ())
    return [meta.get("name", ""), obj.get("type") or "Opaque", n,
            since(meta.get("creationTimestamp"), now)]


def print_serviceaccount(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    return [meta.get("name", ""), len(obj.get("secrets") or ()),
            since(meta.get("creationTimestamp"), now)]


def print_resourcequota(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    status = obj.get("status") or EMPTY
    hard = status.get("hard") or EMPTY
    used = status.get("used") or EMPTY
    requests: list[str] = []
    limits: list[str] = []
    for res in sorted(hard):
        entry = f"{res}: {_quantity(used.get(res))}/{_quantity(hard[res])}"
        pieces = res.split(".")
        (limits if len(pieces) > 1 and pieces[0] == "limits" else requests).append(entry)
    return [meta.get("name", ""), ", ".join(requests), ", ".join(limits),
            since(meta.get("creationTimestamp"), now)]


def _has_condition(conditions: Sequence[Mapping[str, Any]], ctype: str) -> bool:
    for c in conditions:
        if c.get("type") == ctype:
            return c.get("status") == "True"
    return False


def print_job(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    spec = obj.get("spec") or EMPTY
    status = obj.get("status") or EMPTY
    succeeded = as_int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{as_int(spec.get('completions'))}"
    else:
        parallelism = as_int(spec.get("parallelism"))
        completions = (f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1")
    start = timestamp_of(status.get("startTime"))
    end = timestamp_of(status.get("completionTime"))
    if start is None:
        duration = ""
    elif end is None:
        duration = human_duration(now - start)
    else:
        duration = human_duration(end - start)
    conditions = status.get("conditions") or ()
    if _has_condition(conditions, "Complete"):
        job_status = "Complete"
    elif _has_condition(conditions, "Failed"):
        job_status = "Failed"
    elif meta.get("deletionTimestamp"):
        job_status = "Terminating"
    elif _has_condition(conditions, "Suspended"):
        job_status = "Suspended"
    elif _has_condition(conditions, "FailureTarget"):
        job_status = "FailureTarget"
    else:
        job_status = "Running"
    names, images = _layout_containers(_template_containers(obj))
    return [meta.get("name", ""), job_status, completions, duration,
            since(meta.get("creationTimestamp"), now), names, images,
            _format_selector(spec.get("selector"))]


def print_cronjob(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    spec = obj.get("spec") or EMPTY
    status = obj.get("status") or EMPTY
    last = status.get("lastScheduleTime")
    last_str = since(last, now) if last else "<none>"
    suspend = spec.get("suspend")
    suspend_str = "<unset>" if suspend is None else ("True" if suspend else "False")
    job_spec = (spec.get("jobTemplate") or EMPTY).get("spec") or EMPTY
    names, images = _layout_containers(_template_containers({"spec": job_spec}))
    return [meta.get("name", ""), spec.get("schedule", ""), spec.get("timeZone") or "<none>",
            suspend_str, len(status.get("active") or ()), last_str,
            since(meta.get("creationTimestamp"), now), names, images,
            _format_selector(job_spec.get("selector"))]


def _replicas(spec: Mapping[str, Any]) -> int:
    value = spec.get("replicas")
    return 1 if value is None else as_int(value)


def print_deployment(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    spec = obj.get("spec") or EMPTY
    status = obj.get("status") or EMPTY
    names, images = _layout_containers(_template_containers(obj))
    return [meta.get("name", ""),
            f"{as_int(status.get('readyReplicas'))}/{_replicas(spec)}",
            as_int(status.get("updatedReplicas")), as_int(status.get("availableReplicas")),
            since(meta.get("creationTimestamp"), now), names, images,
            _selector_string(spec.get("selector"))]


def print_replicaset(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    spec = obj.get("spec") or EMPTY
    status = obj.get("status") or EMPTY
    names, images = _layout_containers(_template_containers(obj))
    return [meta.get("name", ""), _replicas(spec), as_int(status.get("replicas")),
            as_int(status.get("readyReplicas")), since(meta.get("creationTimestamp"), now),
            names, images, _format_selector(spec.get("selector"))]


def print_statefulset(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    spec = obj.get("spec") or EMPTY
    status = obj.get("status") or EMPTY
    names, images = _layout_containers(_template_containers(obj))
    return [meta.get("name", ""), f"{as_int(status.get('readyReplicas'))}/{_replicas(spec)}",
            since(meta.get("creationTimestamp"), now), names, images]


def print_daemonset(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    spec = obj.get("spec") or EMPTY
    status = obj.get("status") or EMPTY
    tmpl_spec = ((spec.get("template") or EMPTY).get("spec")) or EMPTY
    names, images = _layout_containers(tmpl_spec.get("containers"))
    return [meta.get("name", ""), as_int(status.get("desiredNumberScheduled")),
            as_int(status.get("currentNumberScheduled")), as_int(status.get("numberReady")),
            as_int(status.get("updatedNumberScheduled")), as_int(status.get("numberAvailable")),
            _format_labels(tmpl_spec.get("nodeSelector")),
            since(meta.get("creationTimestamp"), now), names, images,
            _format_selector(spec.get("selector"))]


def print_lease(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    holder = (obj.get("spec") or EMPTY).get("holderIdentity") or ""
    return [meta.get("name", ""), holder, since(meta.get("creationTimestamp"), now)]


def print_priorityclass(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    return [meta.get("name", ""), as_int(obj.get("value")), bool(obj.get("globalDefault")),
            since(meta.get("creationTimestamp"), now), obj.get("preemptionPolicy") or ""]


def _subjects(subjects: Sequence[Mapping[str, Any]] | None) -> tuple[str, str, str]:
    users: list[str] = []
    groups: list[str] = []
    sas: list[str] = []
    for s in subjects or ():
        kind = s.get("kind")
        if kind == "User":
            users.append(s.get("name", ""))
        elif kind == "Group":
            groups.append(s.get("name", ""))
        elif kind == "ServiceAccount":
            sas.append(f"{s.get('namespace', '')}/{s.get('name', '')}")
    return ", ".join(users), ", ".join(groups), ", ".join(sas)


def print_rolebinding(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or EMPTY
    ref = obj.get("roleRef") or EMPTY
    users, groups, sas = _subjects(obj.get("subjects"))
    return [meta.get("name", ""), f"{ref.get('kind', '')}/{ref.get('name', '')}",
            since(meta.get("creationTimestamp"), now), users, groups, sas]


def print_default(obj: Mapping[str, Any], now: float) -> list[Any]:
    return [(obj.get("metadata") or EMPTY).get("name", ""), created_at(obj)]
