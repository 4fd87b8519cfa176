"""Server-side printers: the ``Table`` columns of each kind with the printer of its cells
(`rows`), as kube-apiserver v1.35 prints them (``pkg/printers/internalversion/printers.go``), the
apiextensions custom resource table convertor (``additionalPrinterColumns``) and the default
``Name``/``Created At`` convertor.

Cells are always the wide set (priority 1 columns included); kubectl hides those columns itself
unless ``-o wide`` is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .jsonpath import JSONPathError, Step, compile_path, evaluate, go_text
from .rows import (
    EMPTY,
    as_int,
    print_configmap,
    print_cronjob,
    print_daemonset,
    print_default,
    print_deployment,
    print_event,
    print_job,
    print_lease,
    print_namespace,
    print_node,
    print_pod,
    print_priorityclass,
    print_replicaset,
    print_resourcequota,
    print_rolebinding,
    print_secret,
    print_service,
    print_serviceaccount,
    print_statefulset,
)
from .timestamps import human_duration, parse_ts

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


Printer = Callable[[Mapping[str, Any], float], list[Any]]

_BUILTIN: dict[tuple[str, str], tuple[tuple[dict[str, Any], ...], Printer]] = {
    ("", "Pod"): (_POD_COLUMNS, print_pod),
    ("", "Node"): (_NODE_COLUMNS, print_node),
    ("", "Namespace"): (_NAMESPACE_COLUMNS, print_namespace),
    ("", "Service"): (_SERVICE_COLUMNS, print_service),
    ("", "Event"): (_EVENT_COLUMNS, print_event),
    ("events.k8s.io", "Event"): (_EVENT_COLUMNS, print_event),
    ("", "ConfigMap"): (_CONFIGMAP_COLUMNS, print_configmap),
    ("", "Secret"): (_SECRET_COLUMNS, print_secret),
    ("", "ServiceAccount"): (_SERVICEACCOUNT_COLUMNS, print_serviceaccount),
    ("", "ResourceQuota"): (_RESOURCEQUOTA_COLUMNS, print_resourcequota),
    ("", "LimitRange"): (_DEFAULT_COLUMNS, print_default),
    ("batch", "Job"): (_JOB_COLUMNS, print_job),
    ("batch", "CronJob"): (_CRONJOB_COLUMNS, print_cronjob),
    ("apps", "Deployment"): (_DEPLOYMENT_COLUMNS, print_deployment),
    ("apps", "ReplicaSet"): (_REPLICASET_COLUMNS, print_replicaset),
    ("apps", "StatefulSet"): (_STATEFULSET_COLUMNS, print_statefulset),
    ("apps", "DaemonSet"): (_DAEMONSET_COLUMNS, print_daemonset),
    ("coordination.k8s.io", "Lease"): (_LEASE_COLUMNS, print_lease),
    ("scheduling.k8s.io", "PriorityClass"): (_PRIORITYCLASS_COLUMNS, print_priorityclass),
    ("rbac.authorization.k8s.io", "RoleBinding"): (_ROLEBINDING_COLUMNS, print_rolebinding),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): (
        _CLUSTERROLEBINDING_COLUMNS, print_rolebinding),
    ("rbac.authorization.k8s.io", "Role"): (_DEFAULT_COLUMNS, print_default),
    ("rbac.authorization.k8s.io", "ClusterRole"): (_DEFAULT_COLUMNS, print_default),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (_DEFAULT_COLUMNS, print_default),
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
            "priority": as_int(col.get("priority")),
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
        cells: list[Any] = [(obj.get("metadata") or EMPTY).get("name", "")]
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
