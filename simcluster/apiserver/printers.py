"""Server-side printers: the ``Table`` columns and cells of each kind, as kube-apiserver v1.35
prints them (``pkg/printers/internalversion/printers.go``), the apiextensions custom resource
table convertor (``additionalPrinterColumns``) and the default ``Name``/``Created At`` convertor.

Cells are always the wide set (priority 1 columns included); kubectl hides those columns itself
unless ``-o wide`` is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .jsonpath import JSONPathError, Step, compile_path, evaluate, go_text
from .timestamps import created_at, human_duration, parse_ts, since, timestamp_of

# --------------------------------------------------------------------------
# Column definitions
# --------------------------------------------------------------------------

_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name automatically. "
    "Name is primarily intended for creation idempotence and configuration definition. Cannot be "
    "updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_CREATED_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. "
    "It is not guaranteed to be set in happens-before order across separate operations. Clients may "
    "not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. "
    "Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


def _col(name: str, type_: str = "string", desc: str = "", *, priority: int = 0,
         fmt: str = "") -> dict[str, Any]:
    return {"name": name, "type": type_, "format": fmt, "description": desc, "priority": priority}


_NAME = _col("Name", desc=_NAME_DOC, fmt="name")
_AGE = _col("Age", desc=_CREATED_DOC)
_CONTAINERS = _col("Containers", desc="Names of each container in the template.", priority=1)
_IMAGES = _col("Images", desc="Images referenced by each container in the template.", priority=1)

_POD_COLUMNS = (
    _NAME,
    _col("Ready", desc="The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", desc="The aggregate status of the containers in this pod."),
    _col("Restarts", desc="The number of times the containers in this pod have been restarted "
         "and when the last container in this pod has restarted."),
    _AGE,
    _col("IP", desc="podIP address allocated to the pod.", priority=1),
    _col("Node", desc="NodeName indicates in which node this pod is scheduled.", priority=1),
    _col("Nominated Node", desc="nominatedNodeName is set only when this pod preempts other pods "
         "on the node.", priority=1),
    _col("Readiness Gates", desc="If specified, all readiness gates will be evaluated for pod "
         "readiness.", priority=1),
)
_NODE_COLUMNS = (
    _NAME,
    _col("Status", desc="The status of the node"),
    _col("Roles", desc="The roles of the node"),
    _AGE,
    _col("Version", desc="Kubelet Version reported by the node."),
    _col("Internal-IP", desc="List of addresses reachable to the node.", priority=1),
    _col("External-IP", desc="List of addresses reachable to the node.", priority=1),
    _col("OS-Image", desc="OS Image reported by the node from /etc/os-release.", priority=1),
    _col("Kernel-Version", desc="Kernel Version reported by the node from 'uname -r'.", priority=1),
    _col("Container-Runtime", desc="ContainerRuntime Version reported by the node through "
         "runtime remote API.", priority=1),
)
_NAMESPACE_COLUMNS = (_NAME, _col("Status", desc="The status of the namespace"), _AGE)
_SERVICE_COLUMNS = (
    _NAME,
    _col("Type", desc="type determines how the Service is exposed."),
    _col("Cluster-IP", desc="clusterIP is the IP address of the service."),
    _col("External-IP", desc="externalIPs is a list of IP addresses for which nodes in the "
         "cluster will also accept traffic for this service."),
    _col("Port(s)", desc="The list of ports that are exposed by this service."),
    _AGE,
    _col("Selector", desc="Route service traffic to pods with label keys and values matching "
         "this selector.", priority=1),
)
_EVENT_COLUMNS = (
    _col("Last Seen", desc="The time at which the most recent occurrence of this event was recorded."),
    _col("Type", desc="Type of this event (Normal, Warning), new types could be added in the future"),
    _col("Reason", desc="This should be a short, machine understandable string that gives the "
         "reason for the transition into the object's current status."),
    _col("Object", desc="The object that this event is about."),
    _col("Subobject", desc="If referring to a piece of an object instead of an entire object, "
         "this string should contain a valid JSON/Go field access statement.", priority=1),
    _col("Source", desc="The component reporting this event.", priority=1),
    _col("Message", desc="A human-readable description of the status of this operation."),
    _col("First Seen", desc="The time at which the event was first recorded.", priority=1),
    _col("Count", desc="The number of times this event has occurred.", priority=1),
    _col("Name", desc=_NAME_DOC, priority=1, fmt="name"),
)
_CONFIGMAP_COLUMNS = (_NAME, _col("Data", desc="Data contains the configuration data."), _AGE)
_SECRET_COLUMNS = (
    _NAME,
    _col("Type", desc="Used to facilitate programmatic handling of secret data."),
    _col("Data", desc="Data contains the secret data."),
    _AGE,
)
_SERVICEACCOUNT_COLUMNS = (
    _NAME,
    _col("Secrets", desc="Secrets is a list of the secrets in the same namespace that pods "
         "running using this ServiceAccount are allowed to use."),
    _AGE,
)
# v1.33+ (kubernetes#129419) moved AGE to the end of the quota table.
_RESOURCEQUOTA_COLUMNS = (
    _NAME,
    _col("Request", desc="Request represents a minimum amount of cpu/memory that a container "
         "may consume."),
    _col("Limit", desc="Limits control the maximum amount of cpu/memory that a container may "
         "use independent of contention on the node."),
    _AGE,
)
_JOB_COLUMNS = (
    _NAME,
    _col("Status", desc="Status of the job."),
    _col("Completions", desc="The number of pods which reached phase Succeeded."),
    _col("Duration", desc="Time required to complete the job."),
    _AGE,
    _CONTAINERS,
    _IMAGES,
    _col("Selector", desc="A label query over pods that should match the pod count.", priority=1),
)
_CRONJOB_COLUMNS = (
    _NAME,
    _col("Schedule", desc="The schedule in Cron format."),
    _col("Timezone", desc="The time zone name for the given schedule."),
    _col("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions."),
    _col("Active", "integer", "A list of pointers to currently running jobs."),
    _col("Last Schedule", desc="Information when was the last time the job was successfully "
         "scheduled."),
    _AGE,
    _CONTAINERS,
    _IMAGES,
    _col("Selector", desc="A label query over pods that should match the pod count.", priority=1),
)
_DEPLOYMENT_COLUMNS = (
    _NAME,
    _col("Ready", desc="Number of the pod with ready state"),
    _col("Up-to-date", desc="Total number of non-terminated pods targeted by this deployment "
         "that have the desired template spec."),
    _col("Available", desc="Total number of available pods (ready for at least minReadySeconds) "
         "targeted by this deployment."),
    _AGE,
    _CONTAINERS,
    _IMAGES,
    _col("Selector", desc="Label selector for pods.", priority=1),
)
_REPLICASET_COLUMNS = (
    _NAME,
    _col("Desired", "integer", "Replicas is the number of desired replicas."),
    _col("Current", "integer", "Replicas is the most recently observed number of replicas."),
    _col("Ready", "integer", "The number of ready replicas for this replica set."),
    _AGE,
    _CONTAINERS,
    _IMAGES,
    _col("Selector", desc="Selector is a label query over pods that should match the replica "
         "count.", priority=1),
)
_STATEFULSET_COLUMNS = (
    _NAME,
    _col("Ready", desc="Number of the pod with ready state"),
    _AGE,
    _CONTAINERS,
    _IMAGES,
)
_DAEMONSET_COLUMNS = (
    _NAME,
    _col("Desired", "integer", "The total number of nodes that should be running the daemon pod."),
    _col("Current", "integer", "The number of nodes that are running at least 1 daemon pod."),
    _col("Ready", "integer", "The number of nodes that should be running the daemon pod and have "
         "one or more of the daemon pod running and ready."),
    _col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
    _col("Available", "integer", "The number of nodes that should be running the daemon pod and "
         "have one or more of the daemon pod running and available."),
    _col("Node Selector", desc="NodeSelector is a selector which must be true for the pod to fit "
         "on a node."),
    _AGE,
    _CONTAINERS,
    _IMAGES,
    _col("Selector", desc="A label query over pods that are managed by the daemon set.", priority=1),
)
_LEASE_COLUMNS = (
    _NAME,
    _col("Holder", desc="holderIdentity contains the identity of the holder of a current lease."),
    _AGE,
)
_PRIORITYCLASS_COLUMNS = (
    _NAME,
    _col("Value", "integer", "value represents the integer value of this priority class."),
    _col("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should "
         "be considered as the default priority for pods that do not have any priority class."),
    _AGE,
    _col("PreemptionPolicy", desc="preemptionPolicy is the Policy for preempting pods with lower "
         "priority."),
)
_ROLEBINDING_COLUMNS = (
    _NAME,
    _col("Role", desc="RoleRef can reference a Role in the current namespace or a ClusterRole "
         "in the global namespace."),
    _AGE,
    _col("Users", desc="Users in the roleBinding", priority=1),
    _col("Groups", desc="Groups in the roleBinding", priority=1),
    _col("ServiceAccounts", desc="ServiceAccounts in the roleBinding", priority=1),
)
_CLUSTERROLEBINDING_COLUMNS = (
    _NAME,
    _col("Role", desc="RoleRef can only reference a ClusterRole in the global namespace."),
    _AGE,
    _col("Users", desc="Users in the clusterRoleBinding", priority=1),
    _col("Groups", desc="Groups in the clusterRoleBinding", priority=1),
    _col("ServiceAccounts", desc="ServiceAccounts in the clusterRoleBinding", priority=1),
)
# rest.NewDefaultTableConvertor (CRDs themselves, Roles, LimitRanges, ...)
_DEFAULT_COLUMNS = (_NAME, _col("Created At", "date", _CREATED_DOC))
# Custom resource without additionalPrinterColumns: the apiextensions server
# serves a default "Age" date column.
_CR_AGE_COLUMN: dict[str, Any] = {
    "name": "Age",
    "type": "date",
    "jsonPath": ".metadata.creationTimestamp",
    "description": _CREATED_DOC,
}


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


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


# --------------------------------------------------------------------------
# Built-in printers: each returns the row cells (always the wide set)
# --------------------------------------------------------------------------

_EMPTY: dict[str, Any] = {}
_NO_NAMES: frozenset[str] = frozenset()


def _print_pod(pod: Mapping[str, Any], now: float) -> list[Any]:
    meta = pod.get("metadata") or _EMPTY
    spec = pod.get("spec") or _EMPTY
    status = pod.get("status") or _EMPTY
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
        count = _int(cs.get("restartCount"))
        restarts += count
        last_term = (cs.get("lastState") or _EMPTY).get("terminated")
        finished = timestamp_of(last_term.get("finishedAt")) if last_term else None
        if finished is not None and finished > last_restart:
            last_restart = finished
        is_restartable = cs.get("name", "") in restartable
        if is_restartable:
            restartable_restarts += count
            if finished is not None and finished > last_restartable_restart:
                last_restartable_restart = finished
        state = cs.get("state") or _EMPTY
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if terminated is not None and _int(terminated.get("exitCode")) == 0:
            continue
        if is_restartable and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            t_reason = terminated.get("reason") or ""
            if not t_reason:
                signal = _int(terminated.get("signal"))
                if signal:
                    reason = f"Init:Signal:{signal}"
                else:
                    reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
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
            state = cs.get("state") or _EMPTY
            waiting = state.get("waiting")
            terminated = state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None:
                t_reason = terminated.get("reason") or ""
                exit_code = _int(terminated.get("exitCode"))
                if t_reason:
                    reason = t_reason
                else:
                    signal = _int(terminated.get("signal"))
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
        by_type = {}
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


def _print_node(node: Mapping[str, Any], now: float) -> list[Any]:
    meta = node.get("metadata") or _EMPTY
    spec = node.get("spec") or _EMPTY
    status = node.get("status") or _EMPTY
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
    roles = ",".join(_node_roles(meta.get("labels") or _EMPTY)) or "<none>"
    info = status.get("nodeInfo") or _EMPTY
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


def _print_namespace(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    phase = (obj.get("status") or _EMPTY).get("phase", "")
    return [meta.get("name", ""), phase, since(meta.get("creationTimestamp"), now)]


def _lb_ingress(status: Mapping[str, Any]) -> str:
    result: set[str] = set()
    for ing in ((status.get("loadBalancer") or _EMPTY).get("ingress") or ()):
        if ing.get("ip"):
            result.add(ing["ip"])
        elif ing.get("hostname"):
            result.add(ing["hostname"])
    return ",".join(sorted(result))


def _print_service(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    spec = obj.get("spec") or _EMPTY
    svc_type = spec.get("type") or "ClusterIP"
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    internal_ip = cluster_ips[0] if cluster_ips else "<none>"
    external_ips = list(spec.get("externalIPs") or ())
    if svc_type in ("ClusterIP", "NodePort"):
        external = ",".join(external_ips) if external_ips else "<none>"
    elif svc_type == "LoadBalancer":
        lb = _lb_ingress(obj.get("status") or _EMPTY)  # server prints wide: never clipped
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
        node_port = _int(port.get("nodePort"))
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


def _print_event(obj: Mapping[str, Any], now: float) -> list[Any]:
    # Handles both core/v1 Events and events.k8s.io/v1 Events.
    meta = obj.get("metadata") or _EMPTY
    first_raw = obj.get("firstTimestamp") or obj.get("deprecatedFirstTimestamp")
    first = since(first_raw, now) if first_raw else since(obj.get("eventTime"), now)
    last_raw = obj.get("lastTimestamp") or obj.get("deprecatedLastTimestamp")
    last = since(last_raw, now) if last_raw else first
    count = _int(obj.get("count") or obj.get("deprecatedCount"))
    series = obj.get("series")
    if series:
        last = since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1
    involved = obj.get("involvedObject") or obj.get("regarding") or _EMPTY
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or obj.get("deprecatedSource") or _EMPTY
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


def _print_configmap(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    n = len(obj.get("data") or ()) + len(obj.get("binaryData") or ())
    return [meta.get("name", ""), n, since(meta.get("creationTimestamp"), now)]


def _print_secret(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    n = len(obj.get("data") or ()) + len(obj.get("stringData") or ())
    return [meta.get("name", ""), obj.get("type") or "Opaque", n,
            since(meta.get("creationTimestamp"), now)]


def _print_serviceaccount(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    return [meta.get("name", ""), len(obj.get("secrets") or ()),
            since(meta.get("creationTimestamp"), now)]


def _print_resourcequota(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    status = obj.get("status") or _EMPTY
    hard = status.get("hard") or _EMPTY
    used = status.get("used") or _EMPTY
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


def _print_job(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    spec = obj.get("spec") or _EMPTY
    status = obj.get("status") or _EMPTY
    succeeded = _int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_int(spec.get('completions'))}"
    else:
        parallelism = _int(spec.get("parallelism"))
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


def _print_cronjob(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    spec = obj.get("spec") or _EMPTY
    status = obj.get("status") or _EMPTY
    last = status.get("lastScheduleTime")
    last_str = since(last, now) if last else "<none>"
    suspend = spec.get("suspend")
    suspend_str = "<unset>" if suspend is None else ("True" if suspend else "False")
    job_spec = (spec.get("jobTemplate") or _EMPTY).get("spec") or _EMPTY
    names, images = _layout_containers(_template_containers({"spec": job_spec}))
    return [meta.get("name", ""), spec.get("schedule", ""), spec.get("timeZone") or "<none>",
            suspend_str, len(status.get("active") or ()), last_str,
            since(meta.get("creationTimestamp"), now), names, images,
            _format_selector(job_spec.get("selector"))]


def _replicas(spec: Mapping[str, Any]) -> int:
    value = spec.get("replicas")
    return 1 if value is None else _int(value)


def _print_deployment(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    spec = obj.get("spec") or _EMPTY
    status = obj.get("status") or _EMPTY
    names, images = _layout_containers(_template_containers(obj))
    return [meta.get("name", ""),
            f"{_int(status.get('readyReplicas'))}/{_replicas(spec)}",
            _int(status.get("updatedReplicas")), _int(status.get("availableReplicas")),
            since(meta.get("creationTimestamp"), now), names, images,
            _selector_string(spec.get("selector"))]


def _print_replicaset(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    spec = obj.get("spec") or _EMPTY
    status = obj.get("status") or _EMPTY
    names, images = _layout_containers(_template_containers(obj))
    return [meta.get("name", ""), _replicas(spec), _int(status.get("replicas")),
            _int(status.get("readyReplicas")), since(meta.get("creationTimestamp"), now),
            names, images, _format_selector(spec.get("selector"))]


def _print_statefulset(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    spec = obj.get("spec") or _EMPTY
    status = obj.get("status") or _EMPTY
    names, images = _layout_containers(_template_containers(obj))
    return [meta.get("name", ""), f"{_int(status.get('readyReplicas'))}/{_replicas(spec)}",
            since(meta.get("creationTimestamp"), now), names, images]


def _print_daemonset(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    spec = obj.get("spec") or _EMPTY
    status = obj.get("status") or _EMPTY
    tmpl_spec = ((spec.get("template") or _EMPTY).get("spec")) or _EMPTY
    names, images = _layout_containers(tmpl_spec.get("containers"))
    return [meta.get("name", ""), _int(status.get("desiredNumberScheduled")),
            _int(status.get("currentNumberScheduled")), _int(status.get("numberReady")),
            _int(status.get("updatedNumberScheduled")), _int(status.get("numberAvailable")),
            _format_labels(tmpl_spec.get("nodeSelector")),
            since(meta.get("creationTimestamp"), now), names, images,
            _format_selector(spec.get("selector"))]


def _print_lease(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    holder = (obj.get("spec") or _EMPTY).get("holderIdentity") or ""
    return [meta.get("name", ""), holder, since(meta.get("creationTimestamp"), now)]


def _print_priorityclass(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    return [meta.get("name", ""), _int(obj.get("value")), bool(obj.get("globalDefault")),
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


def _print_rolebinding(obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj.get("metadata") or _EMPTY
    ref = obj.get("roleRef") or _EMPTY
    users, groups, sas = _subjects(obj.get("subjects"))
    return [meta.get("name", ""), f"{ref.get('kind', '')}/{ref.get('name', '')}",
            since(meta.get("creationTimestamp"), now), users, groups, sas]


def _print_default(obj: Mapping[str, Any], now: float) -> list[Any]:
    return [(obj.get("metadata") or _EMPTY).get("name", ""), created_at(obj)]


Printer = Callable[[Mapping[str, Any], float], list[Any]]

_BUILTIN: dict[tuple[str, str], tuple[tuple[dict[str, Any], ...], Printer]] = {
    ("", "Pod"): (_POD_COLUMNS, _print_pod),
    ("", "Node"): (_NODE_COLUMNS, _print_node),
    ("", "Namespace"): (_NAMESPACE_COLUMNS, _print_namespace),
    ("", "Service"): (_SERVICE_COLUMNS, _print_service),
    ("", "Event"): (_EVENT_COLUMNS, _print_event),
    ("events.k8s.io", "Event"): (_EVENT_COLUMNS, _print_event),
    ("", "ConfigMap"): (_CONFIGMAP_COLUMNS, _print_configmap),
    ("", "Secret"): (_SECRET_COLUMNS, _print_secret),
    ("", "ServiceAccount"): (_SERVICEACCOUNT_COLUMNS, _print_serviceaccount),
    ("", "ResourceQuota"): (_RESOURCEQUOTA_COLUMNS, _print_resourcequota),
    ("", "LimitRange"): (_DEFAULT_COLUMNS, _print_default),
    ("batch", "Job"): (_JOB_COLUMNS, _print_job),
    ("batch", "CronJob"): (_CRONJOB_COLUMNS, _print_cronjob),
    ("apps", "Deployment"): (_DEPLOYMENT_COLUMNS, _print_deployment),
    ("apps", "ReplicaSet"): (_REPLICASET_COLUMNS, _print_replicaset),
    ("apps", "StatefulSet"): (_STATEFULSET_COLUMNS, _print_statefulset),
    ("apps", "DaemonSet"): (_DAEMONSET_COLUMNS, _print_daemonset),
    ("coordination.k8s.io", "Lease"): (_LEASE_COLUMNS, _print_lease),
    ("scheduling.k8s.io", "PriorityClass"): (_PRIORITYCLASS_COLUMNS, _print_priorityclass),
    ("rbac.authorization.k8s.io", "RoleBinding"): (_ROLEBINDING_COLUMNS, _print_rolebinding),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): (
        _CLUSTERROLEBINDING_COLUMNS, _print_rolebinding),
    ("rbac.authorization.k8s.io", "Role"): (_DEFAULT_COLUMNS, _print_default),
    ("rbac.authorization.k8s.io", "ClusterRole"): (_DEFAULT_COLUMNS, _print_default),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (_DEFAULT_COLUMNS, _print_default),
}


# --------------------------------------------------------------------------
# Custom resources: additionalPrinterColumns
# --------------------------------------------------------------------------


def _cell_for_json_value(col_type: str, value: Any, now: float) -> Any:
    """apiextensions tableconvertor cellForJSONValue."""
    if value is None:
        return None
    if col_type == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return int(value)
    elif col_type == "number":
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return float(value)
    elif col_type == "boolean":
        if isinstance(value, bool):
            return value
    elif col_type == "string":
        if isinstance(value, str):
            return value
    elif col_type == "date" and isinstance(value, str):
        ts = parse_ts(value) if value else None
        if ts is None:
            return "<invalid>"
        return human_duration(now - ts)
    return None


def _cr_columns(printer_columns: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    cols = list(printer_columns) if printer_columns else [_CR_AGE_COLUMN]
    defs = [dict(_NAME)]
    for col in cols:
        path = col.get("jsonPath") or col.get("JSONPath") or ""
        defs.append({
            "name": col.get("name", ""),
            "type": col.get("type", "string"),
            "format": col.get("format", "") or "",
            "description": col.get("description")
            or f"Custom resource definition column (in JSONPath format): {path}",
            "priority": _int(col.get("priority")),
        })
    return defs


def _cr_printer(printer_columns: Sequence[Mapping[str, Any]]) -> Printer:
    cols = list(printer_columns) if printer_columns else [_CR_AGE_COLUMN]
    compiled: list[tuple[str, tuple[Step, ...] | None]] = []
    for col in cols:
        path = col.get("jsonPath") or col.get("JSONPath") or ""
        try:
            steps: tuple[Step, ...] | None = compile_path(path)
        except JSONPathError:
            steps = None
        compiled.append((col.get("type", "string"), steps))

    def printer(obj: Mapping[str, Any], now: float) -> list[Any]:
        cells: list[Any] = [(obj.get("metadata") or _EMPTY).get("name", "")]
        for col_type, steps in compiled:
            if steps is None:
                cells.append(None)
                continue
            try:
                results = evaluate(steps, [obj])
            except JSONPathError:
                cells.append(None)
                continue
            if not results:
                cells.append(None)
                continue
            value = results[0]
            if col_type == "string":
                cells.append(go_text(value))
            else:
                cells.append(_cell_for_json_value(col_type, value, now))
        return cells

    return printer


def resolve(kind: str, group: str,
            printer_columns: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], Printer]:
    """The column definitions and the printer for *kind* in *group*."""
    builtin = _BUILTIN.get((group or "", kind))
    if builtin is not None:
        cols, fn = builtin
        return [dict(c) for c in cols], fn
    return _cr_columns(printer_columns), _cr_printer(printer_columns)
