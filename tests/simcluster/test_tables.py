from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from simcluster.apiserver.jsonpath import jsonpath_first
from simcluster.apiserver.negotiation import table_api_version, wants_table
from simcluster.apiserver.tables import column_definitions, table_for, table_row
from simcluster.apiserver.timestamps import human_duration

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cells(kind: str, obj: dict[str, Any], group: str = "", **kw: Any) -> list[Any]:
    return table_row(kind, group, obj, now=NOW, **kw)["cells"]


def names(cols: list[dict[str, Any]], max_priority: int = 1) -> list[str]:
    return [c["name"] for c in cols if c["priority"] <= max_priority]


def pod(
    name: str = "p",
    *,
    phase: str = "Running",
    statuses: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    age: float = 600,
    n_containers: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    statuses = statuses or []
    n = n_containers if n_containers is not None else max(len(statuses), 1)
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": ago(age)},
        "spec": {"containers": [{"name": f"c{i}", "image": "busybox"} for i in range(n)]},
        "status": {"phase": phase, "containerStatuses": statuses},
    }
    if conditions is not None:
        obj["status"]["conditions"] = conditions
    if init_statuses is not None:
        obj["status"]["initContainerStatuses"] = init_statuses
    if init_containers is not None:
        obj["spec"]["initContainers"] = init_containers
    for key, value in extra.items():
        section, _, field = key.partition("__")
        obj[section][field] = value
    return obj


def running(name: str = "c0", restarts: int = 0, ready: bool = True, **kw: Any) -> dict[str, Any]:
    return {"name": name, "ready": ready, "restartCount": restarts,
            "state": {"running": {"startedAt": ago(60)}}, **kw}


# --------------------------------------------------------------------------
# Accept header
# --------------------------------------------------------------------------


def test_wants_table() -> None:
    assert wants_table(KUBECTL_ACCEPT)
    assert table_api_version(KUBECTL_ACCEPT) == "meta.k8s.io/v1"
    assert wants_table("application/json;as=Table;v=v1beta1;g=meta.k8s.io")
    assert table_api_version("application/json;as=Table;v=v1beta1;g=meta.k8s.io") == (
        "meta.k8s.io/v1beta1"
    )
    assert wants_table("application/json; as=Table; v=v1; g=meta.k8s.io")
    assert not wants_table(None)
    assert not wants_table("")
    assert not wants_table("application/json")
    assert not wants_table("*/*")
    assert not wants_table("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")
    assert not wants_table("application/json;as=Table;v=v2;g=meta.k8s.io")
    assert not wants_table("application/json;as=Table;v=v1;g=example.com")
    # The client's first acceptable choice wins.
    assert not wants_table("application/json,application/json;as=Table;v=v1;g=meta.k8s.io")


# --------------------------------------------------------------------------
# Human durations (apimachinery duration.HumanDuration)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (-5, "<invalid>"),
        (-1.5, "0s"),
        (0, "0s"),
        (5, "5s"),
        (5.9, "5s"),
        (119, "119s"),
        (120, "2m"),
        (150, "2m30s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 2 * 60 + 30, "3h2m"),
        (7 * 3600 + 59 * 60, "7h59m"),
        (8 * 3600 + 30 * 60, "8h"),
        (47 * 3600, "47h"),
        (2 * 86400, "2d"),
        (2 * 86400 + 5 * 3600, "2d5h"),
        (8 * 86400 + 5 * 3600, "8d"),
        (45 * 86400, "45d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (740 * 86400, "2y10d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration(seconds: float, expected: str) -> None:
    assert human_duration(seconds) == expected


# --------------------------------------------------------------------------
# Pods
# --------------------------------------------------------------------------


def test_pod_columns() -> None:
    cols = column_definitions("Pod", "")
    assert names(cols, 0) == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert names(cols) == [
        "Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates",
    ]
    assert cols[0]["format"] == "name"
    assert cols[3]["type"] == "string"  # RESTARTS is a string cell since 1.22
    for col in cols:
        assert set(col) == {"name", "type", "format", "description", "priority"}


def test_pod_running() -> None:
    p = pod(
        statuses=[running("c0"), running("c1", restarts=2,
                                         lastState={"terminated": {"exitCode": 1, "finishedAt": ago(300)}})],
        conditions=[{"type": "Ready", "status": "True"}],
        spec__nodeName="node-1",
        status__podIP="10.0.0.7",
        age=3 * 3600 + 125,
    )
    assert cells("Pod", p) == [
        "p", "2/2", "Running", "2 (5m ago)", "3h2m", "10.0.0.7", "node-1", "<none>", "<none>",
    ]


def test_pod_running_without_restart_time_and_podips() -> None:
    p = pod(statuses=[running(restarts=3)], status__podIPs=[{"ip": "10.9.9.9"}, {"ip": "fd00::9"}])
    row = cells("Pod", p)
    assert row[3] == "3"
    assert row[5] == "10.9.9.9"


def test_pod_pending_container_creating() -> None:
    p = pod(
        phase="Pending",
        statuses=[{"name": "c0", "ready": False, "restartCount": 0,
                   "state": {"waiting": {"reason": "ContainerCreating"}}}],
        age=4,
    )
    assert cells("Pod", p)[:5] == ["p", "0/1", "ContainerCreating", "0", "4s"]


def test_pod_pending_unscheduled() -> None:
    p = pod(phase="Pending", statuses=[], n_containers=2,
            conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}])
    assert cells("Pod", p)[:4] == ["p", "0/2", "Pending", "0"]


def test_pod_crashloop() -> None:
    p = pod(
        statuses=[{
            "name": "c0", "ready": False, "restartCount": 5,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(75)}},
        }],
        age=20 * 60,
    )
    assert cells("Pod", p)[:5] == ["p", "0/1", "CrashLoopBackOff", "5 (75s ago)", "20m"]


def test_pod_completed() -> None:
    p = pod(
        phase="Succeeded",
        statuses=[{"name": "c0", "ready": False, "restartCount": 0,
                   "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
        age=2 * 86400 + 3600,
    )
    row = table_row("Pod", "", p, now=NOW)
    assert row["cells"][:5] == ["p", "0/1", "Completed", "0", "2d1h"]
    assert row["conditions"] == [{
        "type": "Completed", "status": "True", "reason": "Succeeded",
        "message": "The pod has completed successfully.",
    }]


def test_pod_failed_error() -> None:
    p = pod(
        phase="Failed",
        statuses=[{"name": "c0", "ready": False, "restartCount": 0,
                   "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}],
    )
    row = table_row("Pod", "", p, now=NOW)
    assert row["cells"][2] == "Error"
    assert row["conditions"][0]["reason"] == "Failed"


def test_pod_exit_code_and_signal_without_reason() -> None:
    p = pod(phase="Failed", statuses=[{"name": "c0", "ready": False, "restartCount": 0,
                                       "state": {"terminated": {"exitCode": 3}}}])
    assert cells("Pod", p)[2] == "ExitCode:3"
    p = pod(phase="Failed", statuses=[{"name": "c0", "ready": False, "restartCount": 0,
                                       "state": {"terminated": {"exitCode": 0, "signal": 9}}}])
    assert cells("Pod", p)[2] == "Signal:9"


def test_pod_completed_sidecar_still_running() -> None:
    done = {"name": "c0", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    p = pod(statuses=[done, running("c1")], conditions=[{"type": "Ready", "status": "True"}])
    assert cells("Pod", p)[1:3] == ["1/2", "Running"]
    p = pod(statuses=[done, running("c1")], conditions=[{"type": "Ready", "status": "False"}])
    assert cells("Pod", p)[2] == "NotReady"
    failed = {"name": "c1", "ready": False, "restartCount": 0,
              "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}
    # A failed container is not hidden behind a sibling's "Completed".
    p = pod(phase="Failed", statuses=[done, failed])
    assert cells("Pod", p)[2] == "Error"
    p = pod(phase="Failed", statuses=[failed, done])
    assert cells("Pod", p)[2] == "Error"
    p = pod(phase="Succeeded", statuses=[done, {**done, "name": "c1"}])
    assert cells("Pod", p)[1:3] == ["0/2", "Completed"]


def test_pod_terminating() -> None:
    p = pod(statuses=[running()], metadata__deletionTimestamp=ago(3))
    p["metadata"]["name"] = "p"
    assert cells("Pod", p)[2] == "Terminating"
    p = pod(phase="Succeeded", statuses=[{"name": "c0", "ready": False, "restartCount": 0,
                                          "state": {"terminated": {"exitCode": 0,
                                                                   "reason": "Completed"}}}],
            metadata__deletionTimestamp=ago(3))
    assert cells("Pod", p)[2] == "Completed"  # terminal pods are not "Terminating"
    p = pod(statuses=[running()], metadata__deletionTimestamp=ago(3), status__reason="NodeLost")
    assert cells("Pod", p)[2] == "Unknown"


def test_pod_status_reason_and_scheduling_gated() -> None:
    p = pod(phase="Failed", statuses=[], status__reason="Evicted")
    assert cells("Pod", p)[2] == "Evicted"
    p = pod(phase="Pending", statuses=[],
            conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}])
    assert cells("Pod", p)[2] == "SchedulingGated"


def test_pod_init_containers() -> None:
    init_specs = [{"name": "i0"}, {"name": "i1"}]
    waiting_main = [{"name": "c0", "ready": False, "restartCount": 0,
                     "state": {"waiting": {"reason": "PodInitializing"}}}]
    done = {"name": "i0", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}
    p = pod(phase="Pending", init_containers=init_specs, statuses=waiting_main,
            init_statuses=[done, {"name": "i1", "restartCount": 0, "state": {"running": {}}}])
    assert cells("Pod", p)[1:4] == ["0/1", "Init:1/2", "0"]
    p = pod(phase="Pending", init_containers=init_specs, statuses=waiting_main,
            init_statuses=[{"name": "i0", "restartCount": 4,
                            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                            "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(30)}}}])
    assert cells("Pod", p)[2:4] == ["Init:CrashLoopBackOff", "4 (30s ago)"]
    p = pod(phase="Failed", init_containers=init_specs, statuses=waiting_main,
            init_statuses=[{"name": "i0", "restartCount": 0,
                            "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}])
    assert cells("Pod", p)[2] == "Init:Error"
    p = pod(phase="Pending", init_containers=init_specs, statuses=waiting_main,
            init_statuses=[{"name": "i0", "restartCount": 0,
                            "state": {"terminated": {"exitCode": 2}}}])
    assert cells("Pod", p)[2] == "Init:ExitCode:2"


def test_pod_sidecar_init_container_counts_as_container() -> None:
    p = pod(
        init_containers=[{"name": "sidecar", "restartPolicy": "Always"}],
        init_statuses=[{"name": "sidecar", "ready": True, "started": True, "restartCount": 1,
                        "state": {"running": {}}}],
        statuses=[running("c0")],
        conditions=[{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
    )
    assert cells("Pod", p)[1:4] == ["2/2", "Running", "1"]


def test_pod_wide_readiness_gates_and_nominated_node() -> None:
    p = pod(
        statuses=[running()],
        conditions=[{"type": "example.com/a", "status": "True"},
                    {"type": "example.com/b", "status": "False"}],
        spec__readinessGates=[{"conditionType": "example.com/a"},
                              {"conditionType": "example.com/b"}],
        status__nominatedNodeName="node-9",
    )
    assert cells("Pod", p)[5:] == ["<none>", "<none>", "node-9", "1/2"]


# --------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------


def node(name: str, *, ready: str | None = "True", labels: dict[str, str] | None = None,
         unschedulable: bool = False) -> dict[str, Any]:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "creationTimestamp": ago(45 * 86400), "labels": labels or {}},
        "spec": {"unschedulable": unschedulable},
        "status": {
            "conditions": conditions,
            "addresses": [{"type": "Hostname", "address": name},
                          {"type": "InternalIP", "address": "192.168.1.10"}],
            "nodeInfo": {"kubeletVersion": "v1.35.0", "osImage": "Ubuntu 24.04 LTS",
                         "kernelVersion": "6.8.0", "containerRuntimeVersion": "containerd://2.0.0"},
        },
    }


def test_node_columns_and_cells() -> None:
    assert names(column_definitions("Node", ""), 0) == ["Name", "Status", "Roles", "Age", "Version"]
    assert names(column_definitions("Node", "")) == [
        "Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP", "OS-Image",
        "Kernel-Version", "Container-Runtime",
    ]
    n = node("gpu-1", labels={"node-role.kubernetes.io/worker": "",
                              "node-role.kubernetes.io/control-plane": "", "zone": "a"})
    assert cells("Node", n) == [
        "gpu-1", "Ready", "control-plane,worker", "45d", "v1.35.0", "192.168.1.10", "<none>",
        "Ubuntu 24.04 LTS", "6.8.0", "containerd://2.0.0",
    ]


def test_node_status_variants() -> None:
    assert cells("Node", node("a", ready="False"))[1:3] == ["NotReady", "<none>"]
    assert cells("Node", node("a", ready="Unknown"))[1] == "NotReady"
    assert cells("Node", node("a", ready=None))[1] == "Unknown"
    assert cells("Node", node("a", unschedulable=True))[1] == "Ready,SchedulingDisabled"
    assert cells("Node", node("a", labels={"kubernetes.io/role": "gpu"}))[2] == "gpu"
    bare = {"metadata": {"name": "x"}}
    assert cells("Node", bare) == ["x", "Unknown", "<none>", "<unknown>", "", "<none>", "<none>",
                                   "<unknown>", "<unknown>", "<unknown>"]


# --------------------------------------------------------------------------
# Other built-in kinds
# --------------------------------------------------------------------------


def test_namespace_configmap_service() -> None:
    ns = {"metadata": {"name": "team-a", "creationTimestamp": ago(90)}, "status": {"phase": "Active"}}
    assert names(column_definitions("Namespace", "")) == ["Name", "Status", "Age"]
    assert cells("Namespace", ns) == ["team-a", "Active", "90s"]

    cm = {"metadata": {"name": "cfg", "creationTimestamp": ago(60)},
          "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
    assert names(column_definitions("ConfigMap", "")) == ["Name", "Data", "Age"]
    assert cells("ConfigMap", cm) == ["cfg", 3, "60s"]

    svc = {"metadata": {"name": "web", "creationTimestamp": ago(3600)},
           "spec": {"type": "NodePort", "clusterIP": "10.96.0.10",
                    "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                              {"port": 53, "protocol": "UDP"}],
                    "selector": {"app": "web", "tier": "fe"}}}
    assert names(column_definitions("Service", ""), 0) == [
        "Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age",
    ]
    assert cells("Service", svc) == [
        "web", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP", "60m", "app=web,tier=fe",
    ]
    lb = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.11"]}}
    assert cells("Service", lb)[1:5] == ["LoadBalancer", "10.96.0.11", "<pending>", "<none>"]


def test_event() -> None:
    cols = column_definitions("Event", "")
    assert names(cols, 0) == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert cols[-1]["name"] == "Name" and cols[-1]["format"] == "name"
    ev = {
        "metadata": {"name": "p.123", "creationTimestamp": ago(100)},
        "involvedObject": {"kind": "Pod", "name": "trainer-0", "fieldPath": "spec.containers{c}"},
        "reason": "Scheduled", "type": "Normal", "message": " Successfully assigned ",
        "firstTimestamp": ago(600), "lastTimestamp": ago(30), "count": 4,
        "source": {"component": "default-scheduler"},
    }
    assert cells("Event", ev) == [
        "30s", "Normal", "Scheduled", "pod/trainer-0", "spec.containers{c}", "default-scheduler",
        "Successfully assigned", "10m", 4, "p.123",
    ]
    new_style = {"metadata": {"name": "e"}, "regarding": {"kind": "Node", "name": "n1"},
                 "reason": "Ready", "type": "Normal", "note": "node ready",
                 "eventTime": "2025-06-01T11:59:00.000000Z", "reportingController": "kubelet",
                 "reportingInstance": "n1"}
    assert cells("Event", new_style, group="events.k8s.io") == [
        "60s", "Normal", "Ready", "node/n1", "", "kubelet, n1", "node ready", "60s", 1, "e",
    ]


def test_resource_quota() -> None:
    assert names(column_definitions("ResourceQuota", "")) == ["Name", "Request", "Limit", "Age"]
    rq = {"metadata": {"name": "gpu-quota", "creationTimestamp": ago(7200)},
          "status": {"hard": {"requests.nvidia.com/gpu": "4", "limits.cpu": "8", "pods": "10"},
                     "used": {"requests.nvidia.com/gpu": "1", "limits.cpu": "500m"}}}
    assert cells("ResourceQuota", rq) == [
        "gpu-quota", "pods: 0/10, requests.nvidia.com/gpu: 1/4", "limits.cpu: 500m/8", "120m",
    ]


def test_job() -> None:
    assert names(column_definitions("Job", "batch"), 0) == [
        "Name", "Status", "Completions", "Duration", "Age",
    ]
    job = {"metadata": {"name": "train", "creationTimestamp": ago(900)},
           "spec": {"completions": 4, "selector": {"matchLabels": {"job-name": "train"}},
                    "template": {"spec": {"containers": [{"name": "t", "image": "pytorch"}]}}},
           "status": {"succeeded": 4, "startTime": ago(890), "completionTime": ago(290),
                      "conditions": [{"type": "Complete", "status": "True"}]}}
    assert cells("Job", job, group="batch") == [
        "train", "Complete", "4/4", "10m", "15m", "t", "pytorch", "job-name=train",
    ]
    running_job = {"metadata": {"name": "r", "creationTimestamp": ago(60)},
                   "spec": {"parallelism": 3}, "status": {"startTime": ago(50), "active": 3}}
    assert cells("Job", running_job, group="batch")[1:4] == ["Running", "0/1 of 3", "50s"]


def test_deployment_selector_formatting() -> None:
    dep = {"metadata": {"name": "web", "creationTimestamp": ago(30)},
           "spec": {"replicas": 3, "selector": {
               "matchLabels": {"app": "web"},
               "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]},
                                    {"key": "canary", "operator": "DoesNotExist"}]},
               "template": {"spec": {"containers": [{"name": "a", "image": "x"},
                                                    {"name": "b", "image": "y"}]}}},
           "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}
    assert cells("Deployment", dep, group="apps") == [
        "web", "2/3", 3, 2, "30s", "a,b", "x,y", "app=web,!canary,tier in (be,fe)",
    ]


def test_crd_itself_uses_default_convertor() -> None:
    cols = column_definitions("CustomResourceDefinition", "apiextensions.k8s.io")
    assert [(c["name"], c["type"]) for c in cols] == [("Name", "string"), ("Created At", "date")]
    crd = {"metadata": {"name": "widgets.example.com", "creationTimestamp": "2024-03-05T06:07:08Z"}}
    assert cells("CustomResourceDefinition", crd, group="apiextensions.k8s.io") == [
        "widgets.example.com", "2024-03-05T06:07:08Z",
    ]


# --------------------------------------------------------------------------
# Custom resources and additionalPrinterColumns
# --------------------------------------------------------------------------

PRINTER_COLUMNS = [
    {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas",
     "description": "desired replicas"},
    {"name": "Running", "type": "string",
     "jsonPath": '.status.conditions[?(@.type=="Running")].status'},
    {"name": "Team", "type": "string", "jsonPath": ".metadata.labels.example\\.com/team",
     "priority": 1},
    {"name": "Resources", "type": "string", "jsonPath": ".spec.resources", "priority": 1},
    {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
    {"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled"},
    {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing.here"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def widget(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "TrainingJob",
        "metadata": {"name": "job-1", "namespace": "default", "creationTimestamp": ago(3 * 86400),
                     "labels": {"example.com/team": "vision"}},
        "spec": {"replicas": 8, "resources": {"gpu": 8, "cpu": "32"}, "ratio": 1, "enabled": True},
        "status": status,
    }


def test_crd_printer_columns_definitions() -> None:
    cols = column_definitions("TrainingJob", "example.com", printer_columns=PRINTER_COLUMNS)
    assert [c["name"] for c in cols] == ["Name"] + [c["name"] for c in PRINTER_COLUMNS]
    assert cols[0]["format"] == "name"
    assert cols[1]["description"] == (
        "Custom resource definition column (in JSONPath format): .status.conditions[-1:].type"
    )
    assert cols[2]["description"] == "desired replicas"
    assert cols[2]["type"] == "integer"
    assert [c["priority"] for c in cols] == [0, 0, 0, 0, 1, 1, 0, 0, 0, 0]


def test_crd_printer_columns_cells() -> None:
    obj = widget(conditions=[{"type": "Created", "status": "True"},
                             {"type": "Running", "status": "True"}])
    assert cells("TrainingJob", obj, group="example.com", printer_columns=PRINTER_COLUMNS) == [
        "job-1", "Running", 8, "True", "vision", '{"cpu":"32","gpu":8}', 1.0, True, None, "3d",
    ]
    empty = widget()
    row = cells("TrainingJob", empty, group="example.com", printer_columns=PRINTER_COLUMNS)
    assert row[1] is None  # no conditions
    assert row[3] is None


def test_crd_without_printer_columns_gets_age() -> None:
    cols = column_definitions("Thing", "example.com")
    assert [(c["name"], c["type"]) for c in cols] == [("Name", "string"), ("Age", "date")]
    assert cells("Thing", widget(), group="example.com") == ["job-1", "3d"]


def test_jsonpath_subset() -> None:
    obj = {"a": {"b": [{"n": 1, "t": "x"}, {"n": 2, "t": "y"}, {"n": 3, "t": "y"}]},
           "m": {"k.with.dots": "v"}}
    assert jsonpath_first(obj, ".a.b[0].n") == (True, 1)
    assert jsonpath_first(obj, ".a.b[-1].n") == (True, 3)
    assert jsonpath_first(obj, ".a.b[-1:].t") == (True, "y")
    assert jsonpath_first(obj, ".a.b[1:].n") == (True, 2)
    assert jsonpath_first(obj, ".a.b[*].n") == (True, 1)
    assert jsonpath_first(obj, '.a.b[?(@.t=="y")].n') == (True, 2)
    assert jsonpath_first(obj, ".a.b[?(@.n>2)].t") == (True, "y")
    assert jsonpath_first(obj, ".m['k.with.dots']") == (True, "v")
    assert jsonpath_first(obj, "{.m.k\\.with\\.dots}") == (True, "v")
    assert jsonpath_first(obj, "..n") == (True, 1)
    assert jsonpath_first(obj, ".a.b[5].n") == (False, None)
    assert jsonpath_first(obj, ".nope") == (False, None)
    assert jsonpath_first({"l": []}, ".l[-1:]") == (False, None)


# --------------------------------------------------------------------------
# Table envelope
# --------------------------------------------------------------------------


def test_table_envelope_and_include_object() -> None:
    pods = [pod("a", statuses=[running()]), pod("b", statuses=[running()])]
    table = table_for("Pod", "", pods, resource_version="42", continue_token="tok", now=NOW)
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "42", "continue": "tok"}
    assert table["columnDefinitions"] == column_definitions("Pod", "")
    assert [r["cells"][0] for r in table["rows"]] == ["a", "b"]
    first = table["rows"][0]
    assert first["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": pods[0]["metadata"]}
    assert "conditions" not in first
    assert first == table_row("Pod", "", pods[0], now=NOW)

    none = table_for("Pod", "", pods, include_object="None", now=NOW)
    assert all("object" not in r for r in none["rows"])
    full = table_for("Pod", "", pods, include_object="Object", now=NOW)
    assert full["rows"][1]["object"] is pods[1]

    empty = table_for("Pod", "", [], now=NOW)
    assert empty["rows"] == []
    assert len(empty["columnDefinitions"]) == 9


def test_column_definitions_are_copies() -> None:
    cols = column_definitions("Pod", "")
    cols[0]["name"] = "mutated"
    assert column_definitions("Pod", "")[0]["name"] == "Name"
