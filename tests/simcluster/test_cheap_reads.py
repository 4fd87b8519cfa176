"""What makes a client cheap, served as kube-apiserver serves it, over real HTTP (the official
kubernetes client, `requests`, a real kubectl): PartialObjectMetadata(List) on GET, LIST and WATCH,
content negotiation with fallback and 406, Tables on WATCH (column definitions on the first event
only, includeObject, bookmarks, selectors), field selectors on pods, watches resumed from an older
resourceVersion (replayed in order, 410 beyond the retained window) and the request log."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from kubernetes import watch as kwatch
from kubernetes.client.rest import ApiException

from simcluster.apiserver.negotiation import PARTIAL, PARTIAL_LIST, TABLE, Target, negotiate

POM = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
POM_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
TABLE_V1 = "application/json;as=Table;v=v1;g=meta.k8s.io"
KUBECTL = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
ONLY_TYPES = ("only the following media types are accepted: "
              "application/json, application/yaml, application/vnd.kubernetes.protobuf")
POD_COLUMNS = ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]


def pod(name: str, ns: str = "default", labels: dict | None = None, **spec: Any) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"]}], **spec},
    }


@pytest.fixture
def http(simcluster, tmp_path) -> Iterator[requests.Session]:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(simcluster.sim.ca_pem)
    s = requests.Session()
    s.trust_env = False
    s.verify = str(ca)
    s.headers["Authorization"] = f"Bearer {simcluster.sim.admin_token}"
    yield s
    s.close()


def get(http: requests.Session, sim: Any, path: str, accept: str | None = None, **params: Any) -> requests.Response:
    headers = {"Accept": accept} if accept is not None else {}
    return http.get(sim.url + path, headers=headers, params=params, timeout=30)


def watch_events(http: requests.Session, sim: Any, path: str, accept: str | None = None, *,
                 timeout: float = 1, **params: Any) -> list[dict]:
    """Every event of a watch that the server ends after `timeout` seconds."""
    headers = {"Accept": accept} if accept is not None else {}
    params = {"watch": "1", "timeoutSeconds": str(timeout), **params}
    with http.get(sim.url + path, headers=headers, params=params, stream=True, timeout=30) as resp:
        assert resp.status_code == 200, resp.text
        return [json.loads(line) for line in resp.iter_lines() if line.strip()]


def rv_of(core: Any, ns: str = "default") -> str:
    return core.list_namespaced_pod(ns).metadata.resource_version


def set_phase(core: Any, name: str, phase: str, ns: str = "default", **status: Any) -> None:
    core.patch_namespaced_pod_status(name, ns, {"status": {"phase": phase, **status}})


# -- negotiation, unit -------------------------------------------------------------------------


@pytest.mark.parametrize(("accept", "expected"), [
    (None, None),
    ("", None),
    ("*/*", None),
    ("application/json", None),
    ("application/json;stream=watch", None),
    ("application/vnd.kubernetes.protobuf,application/json", None),
    (POM, Target(PARTIAL)),
    (POM_LIST, Target(PARTIAL_LIST)),
    ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1", Target(PARTIAL_LIST, "v1beta1")),
    ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
     Target(PARTIAL_LIST)),  # client-go's metadata client; answered in JSON
    (KUBECTL, Target(TABLE)),
    ("application/yaml;as=Table;v=v1;g=meta.k8s.io", Target(TABLE)),
    # ranges the server cannot satisfy are skipped for the next one
    ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", None),
    ("application/json;as=Foo;g=meta.k8s.io;v=v1,application/json", None),
    ("application/json;as=Table;g=meta.k8s.io;v=v1alpha1," + POM_LIST, Target(PARTIAL_LIST)),
    ("application/json;as=Table;g=example.com;v=v1,application/json", None),
    ("application/json;as=Table;v=v1,application/json", None),  # no g: not meta.k8s.io
    ("text/html,application/json", None),
    # q-values order the ranges (ties keep the client's order)
    ("application/json;q=0.5," + TABLE_V1, Target(TABLE)),
    (TABLE_V1 + ";q=0.2," + POM_LIST + ";q=0.9", Target(PARTIAL_LIST)),
])
def test_negotiate(accept: str | None, expected: Target | None) -> None:
    assert negotiate(accept) == expected


@pytest.mark.parametrize("accept", [
    "application/json;as=Foo;g=meta.k8s.io;v=v1",
    "application/json;as=PartialObjectMetadata;g=k8s.io;v=v1",
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1alpha1",
    "application/json;as=Service;g=;v=v1",
    "application/json;g=meta.k8s.io;v=v1",  # g and v without as
    "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",  # Tables are JSON or YAML only
    "text/html",
    "application/yaml;stream=watch",
])
def test_negotiate_not_acceptable(accept: str) -> None:
    from simcluster.apiserver.errors import ApiError

    with pytest.raises(ApiError) as err:
        negotiate(accept)
    assert err.value.code == 406 and err.value.reason == "NotAcceptable"
    assert err.value.message == ONLY_TYPES


# -- PartialObjectMetadata over HTTP -------------------------------------------------------------


def test_partial_object_metadata_get_and_list(simcluster, core, http):
    sim = simcluster.sim
    for i in range(5):
        core.create_namespaced_pod("default", pod(f"m{i}", labels={"i": str(i), "even": str(i % 2 == 0).lower()}))
    full = get(http, sim, "/api/v1/namespaces/default/pods/m1").json()

    one = get(http, sim, "/api/v1/namespaces/default/pods/m1", POM)
    assert one.status_code == 200 and one.headers["Content-Type"].startswith("application/json")
    assert one.json() == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": full["metadata"]}
    beta = get(http, sim, "/api/v1/namespaces/default/pods/m1", POM.replace("v=v1", "v=v1beta1")).json()
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1" and beta["metadata"] == full["metadata"]

    lst = get(http, sim, "/api/v1/namespaces/default/pods", POM_LIST).json()
    assert lst["kind"] == "PartialObjectMetadataList" and lst["apiVersion"] == "meta.k8s.io/v1"
    assert int(lst["metadata"]["resourceVersion"]) >= int(full["metadata"]["resourceVersion"])
    assert [it["metadata"]["name"] for it in lst["items"]] == [f"m{i}" for i in range(5)]
    assert all(set(it) == {"kind", "apiVersion", "metadata"} and it["kind"] == "PartialObjectMetadata"
               and it["apiVersion"] == "meta.k8s.io/v1" for it in lst["items"])
    assert lst["items"][1]["metadata"] == full["metadata"]

    # selectors and pages as for the objects
    even = get(http, sim, "/api/v1/namespaces/default/pods", POM_LIST, labelSelector="even=true").json()
    assert [it["metadata"]["name"] for it in even["items"]] == ["m0", "m2", "m4"]
    page = get(http, sim, "/api/v1/namespaces/default/pods", POM_LIST, limit=2).json()
    assert len(page["items"]) == 2 and page["metadata"]["remainingItemCount"] == 3
    rest = get(http, sim, "/api/v1/namespaces/default/pods", POM_LIST, limit=10,
               **{"continue": page["metadata"]["continue"]}).json()
    assert [it["metadata"]["name"] for it in rest["items"]] == ["m2", "m3", "m4"]

    # cluster-scoped and custom resources too
    ns = get(http, sim, "/api/v1/namespaces/default", POM).json()
    assert ns["kind"] == "PartialObjectMetadata" and ns["metadata"]["name"] == "default"
    jobs = get(http, sim, "/apis/kubeflow.org/v1/pytorchjobs", POM_LIST).json()
    assert jobs["kind"] == "PartialObjectMetadataList" and jobs["items"] == []


def test_partial_object_metadata_with_the_official_client(simcluster, core):
    core.create_namespaced_pod("default", pod("oc"))
    resp = core.list_namespaced_pod("default", _headers={"Accept": POM_LIST + ",application/json"},
                                    _preload_content=False)
    doc = json.loads(resp.data)
    assert doc["kind"] == "PartialObjectMetadataList" and doc["items"][0]["metadata"]["name"] == "oc"
    resp = core.read_namespaced_pod("oc", "default", _headers={"Accept": POM}, _preload_content=False)
    assert json.loads(resp.data)["kind"] == "PartialObjectMetadata"


@pytest.mark.parametrize(("path", "accept", "status", "message"), [
    ("/api/v1/namespaces/default/pods/n1", POM_LIST, 406,
     "you requested PartialObjectMetadataList, but the requested object is not a list (*core.Pod)"),
    ("/api/v1/namespaces/default/pods", POM, 406,
     "you requested PartialObjectMetadata, but the requested object is a list (*core.PodList)"),
    ("/apis/kubeflow.org/v1/pytorchjobs", POM, 406,
     "you requested PartialObjectMetadata, but the requested object is a list (*unstructured.UnstructuredList)"),
    ("/apis/batch/v1/jobs", POM, 406,
     "you requested PartialObjectMetadata, but the requested object is a list (*batch.JobList)"),
    ("/api/v1/namespaces/default/pods", "application/json;as=Foo;g=meta.k8s.io;v=v1", 406, ONLY_TYPES),
    ("/api/v1/namespaces/default/pods/n1", "application/json;g=meta.k8s.io;v=v1", 406, ONLY_TYPES),
    ("/api/v1/namespaces/default/pods", "text/html", 406, ONLY_TYPES),
    ("/api/v1/namespaces/default/pods", TABLE_V1 + ";q=1", 400, None),  # with includeObject=Nope below
])
def test_not_acceptable_and_bad_table_options(simcluster, core, http, path, accept, status, message):
    core.create_namespaced_pod("default", pod("n1"))
    resp = get(http, simcluster.sim, path, accept, includeObject="Nope")
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["kind"] == "Status" and body["code"] == status
    if status == 406:
        assert body["reason"] == "NotAcceptable" and body["message"] == message
    else:
        assert body["reason"] == "BadRequest"
        assert body["message"] == ("Unable to convert to Table as requested: includeObject: Invalid value: "
                                   "\"Nope\": must be 'Metadata', 'Object', 'None', or empty")
    # the official client sees the 406 as an ApiException
    if status == 406 and path.endswith("/n1"):
        with pytest.raises(ApiException) as exc:
            core.read_namespaced_pod("n1", "default", _headers={"Accept": accept})
        assert exc.value.status == 406


@pytest.mark.parametrize(("accept", "kind"), [
    ("application/json;as=Foo;g=meta.k8s.io;v=v1,application/json", "PodList"),
    ("application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json", "PodList"),
    ("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v2,application/json", "PodList"),
    ("application/json;as=Foo;g=meta.k8s.io;v=v1," + POM_LIST + ",application/json", "PartialObjectMetadataList"),
    (KUBECTL, "Table"),
])
def test_fallback_to_what_is_offered_next(simcluster, http, accept, kind):
    assert get(http, simcluster.sim, "/api/v1/namespaces/default/pods", accept).json()["kind"] == kind


def test_partial_object_metadata_watch(simcluster, core, http):
    sim = simcluster.sim
    rv = rv_of(core)
    core.create_namespaced_pod("default", pod("pw", labels={"a": "1"}))
    core.patch_namespaced_pod("pw", "default", {"metadata": {"annotations": {"note": "x"}}})
    core.delete_namespaced_pod("pw", "default")
    events = watch_events(http, sim, "/api/v1/namespaces/default/pods", POM + ",application/json",
                          resourceVersion=rv, allowWatchBookmarks="true")
    assert [e["type"] for e in events][:3] == ["ADDED", "MODIFIED", "DELETED"]
    for e in events:
        obj = e["object"]
        assert set(obj) == {"kind", "apiVersion", "metadata"}
        assert (obj["kind"], obj["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert events[0]["object"]["metadata"]["labels"] == {"a": "1"}
    assert events[1]["object"]["metadata"]["annotations"] == {"note": "x"}
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)
    # the bookmark that ends the watch is a PartialObjectMetadata carrying the resourceVersion only
    assert events[-1]["type"] == "BOOKMARK"
    assert events[-1]["object"]["metadata"] == {"resourceVersion": str(rvs[-1])}
    # WATCH asking PartialObjectMetadataList: kube-apiserver cannot transform events into a list
    # and sends the objects themselves
    events = watch_events(http, sim, "/api/v1/namespaces/default/pods", POM_LIST, resourceVersion=rv)
    assert [e["object"]["kind"] for e in events] == ["Pod", "Pod", "Pod"]


# -- Tables on WATCH -----------------------------------------------------------------------------


@pytest.mark.parametrize("include", ["", "Metadata", "None", "Object"])
def test_table_watch_events(simcluster, core, http, include):
    sim = simcluster.sim
    rv = rv_of(core)
    core.create_namespaced_pod("default", pod("tw", labels={"app": "x"}))
    set_phase(core, "tw", "Running", podIP="10.1.2.3", podIPs=[{"ip": "10.1.2.3"}])
    core.delete_namespaced_pod("tw", "default")
    params = {"resourceVersion": rv, **({"includeObject": include} if include else {})}
    events = watch_events(http, sim, "/api/v1/namespaces/default/pods", KUBECTL, **params)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    for i, e in enumerate(events):
        table = e["object"]
        assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
        if i == 0:
            assert [c["name"] for c in table["columnDefinitions"]] == POD_COLUMNS
        else:  # kube-apiserver sends the columns with the first event only: null after
            assert "columnDefinitions" in table and table["columnDefinitions"] is None
        assert len(table["rows"]) == 1 and len(table["rows"][0]["cells"]) == len(POD_COLUMNS)
        row = table["rows"][0]
        assert int(table["metadata"]["resourceVersion"]) > int(rv)
        if include == "None":
            assert "object" not in row
        elif include == "Object":
            assert row["object"]["kind"] == "Pod" and row["object"]["spec"]["containers"][0]["name"] == "main"
        else:
            assert row["object"]["kind"] == "PartialObjectMetadata"
            assert row["object"]["apiVersion"] == "meta.k8s.io/v1"
            assert row["object"]["metadata"]["name"] == "tw"
    assert events[1]["object"]["rows"][0]["cells"][2] == "Running"
    assert events[1]["object"]["rows"][0]["cells"][5] == "10.1.2.3"


def test_table_watch_v1beta1(simcluster, core, http):
    rv = rv_of(core)
    core.create_namespaced_pod("default", pod("tb"))
    events = watch_events(http, simcluster.sim, "/api/v1/namespaces/default/pods",
                          "application/json;as=Table;v=v1beta1;g=meta.k8s.io", resourceVersion=rv)
    table = events[0]["object"]
    assert table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"


@pytest.mark.simcluster(bookmark_interval=0.2)
def test_table_watch_bookmarks(simcluster, core, http):
    """A bookmark in a Table watch is transformed like any event: a Table of one row (the empty
    object's) carrying the bookmark's resourceVersion; the first event has the columns, even a
    bookmark."""
    sim = simcluster.sim
    rv = rv_of(core)
    events = watch_events(http, sim, "/api/v1/namespaces/default/pods", TABLE_V1, timeout=1,
                          resourceVersion=rv, allowWatchBookmarks="true")
    assert len(events) >= 2 and {e["type"] for e in events} == {"BOOKMARK"}
    first, second = events[0]["object"], events[1]["object"]
    assert first["kind"] == "Table" and [c["name"] for c in first["columnDefinitions"]] == POD_COLUMNS
    assert second["columnDefinitions"] is None
    assert first["metadata"]["resourceVersion"] == rv
    row = first["rows"][0]
    assert row["cells"] == ["", "0/0", "", "0", "<unknown>", "<none>", "<none>", "<none>", "<none>"]
    assert row["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": {"resourceVersion": rv}}
    # a WatchList (sendInitialEvents) ends its initial events with an annotated bookmark
    core.create_namespaced_pod("default", pod("wl"))
    events = watch_events(http, sim, "/api/v1/namespaces/default/pods", TABLE_V1, timeout=0.5,
                          sendInitialEvents="true", resourceVersionMatch="NotOlderThan", allowWatchBookmarks="true")
    assert events[0]["type"] == "ADDED" and events[0]["object"]["rows"][0]["cells"][0] == "wl"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["rows"][0]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_table_watch_with_selectors(simcluster, core, http):
    """Label and field selectors filter a Table watch like any watch: a pod that starts matching
    arrives as ADDED, one that stops matching as DELETED (its last matching state)."""
    sim = simcluster.sim
    rv = rv_of(core)
    core.create_namespaced_pod("default", pod("sa", labels={"team": "a"}))
    core.create_namespaced_pod("default", pod("sb", labels={"team": "b"}))
    set_phase(core, "sa", "Running")
    set_phase(core, "sb", "Running")
    set_phase(core, "sa", "Failed")
    events = watch_events(http, sim, "/api/v1/pods", TABLE_V1, resourceVersion=rv,
                          labelSelector="team=a", includeObject="Object")
    assert [(e["type"], e["object"]["rows"][0]["cells"][0]) for e in events] == [
        ("ADDED", "sa"), ("MODIFIED", "sa"), ("MODIFIED", "sa")]
    events = watch_events(http, sim, "/api/v1/pods", TABLE_V1, resourceVersion=rv,
                          fieldSelector="status.phase!=Running", includeObject="Object")
    got = [(e["type"], e["object"]["rows"][0]["cells"][0], e["object"]["rows"][0]["object"]["status"].get("phase"))
           for e in events]
    assert got == [("ADDED", "sa", "Pending"), ("ADDED", "sb", "Pending"),
                   ("DELETED", "sa", "Pending"), ("DELETED", "sb", "Pending"), ("ADDED", "sa", "Failed")]
    # the DELETED for a pod leaving the selection carries the event's resourceVersion
    deleted = [e for e in events if e["type"] == "DELETED"]
    assert all(int(e["object"]["rows"][0]["object"]["metadata"]["resourceVersion"])
               == int(e["object"]["metadata"]["resourceVersion"]) for e in deleted)
    assert events[0]["object"]["columnDefinitions"] and events[1]["object"]["columnDefinitions"] is None


def test_kubectl_watch_with_field_selector(kubectl, simcluster, core):
    """kubectl get -w asks for Table watch events (includeObject=Object): a pod leaving a
    field-selected watch is reported DELETED."""
    core.create_namespaced_pod("default", pod("kw"))
    proc = kubectl.popen("get", "pods", "-n", "default", "-w", "--output-watch-events",
                         "--field-selector", "status.phase!=Running", "--request-timeout=0")
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]  # the header
        lines.append(proc.stdout.readline())  # kw, listed
        time.sleep(0.5)
        set_phase(core, "kw", "Running")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.split()[:2] == ["DELETED", "kw"]:
                break
        assert lines[0].split()[:2] == ["EVENT", "NAME"], lines
        assert lines[1].split()[:2] == ["ADDED", "kw"], lines
        assert lines[-1].split()[:2] == ["DELETED", "kw"], lines
    finally:
        proc.kill()
        proc.wait()


# -- field selectors on pods ---------------------------------------------------------------------


@pytest.fixture
def selected_pods(simcluster, core):
    core.create_namespaced_pod("default", pod("p-a", nodeName="node-1", restartPolicy="Never",
                                              schedulerName="runai-scheduler", serviceAccountName="trainer"))
    core.create_namespaced_pod("default", pod("p-b", nodeName="node-2", hostNetwork=True))
    core.create_namespaced_pod("default", pod("p-c"))
    simcluster.call(simcluster.sim.apply, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    core.create_namespaced_pod("other", pod("p-d", ns="other", nodeName="node-1"))
    set_phase(core, "p-a", "Running", podIP="10.0.0.1", podIPs=[{"ip": "10.0.0.1"}, {"ip": "fd00::1"}])
    set_phase(core, "p-b", "Succeeded", podIP="10.0.0.2", podIPs=[{"ip": "10.0.0.2"}])
    set_phase(core, "p-c", "Pending", nominatedNodeName="node-3")
    set_phase(core, "p-d", "Failed", ns="other")


@pytest.mark.parametrize(("selector", "names"), [
    ("spec.nodeName=node-1", ["p-a", "p-d"]),
    ("spec.nodeName==node-1", ["p-a", "p-d"]),
    ("spec.nodeName!=node-1", ["p-b", "p-c"]),
    ("spec.nodeName=", ["p-c"]),
    ("spec.host=node-2", ["p-b"]),  # old v1 clients' name for spec.nodeName
    ("status.phase=Running", ["p-a"]),
    ("status.phase!=Running,status.phase!=Succeeded", ["p-c", "p-d"]),
    ("status.phase==Failed,metadata.namespace=other", ["p-d"]),
    ("metadata.name=p-b", ["p-b"]),
    ("metadata.namespace!=default", ["p-d"]),
    ("spec.restartPolicy=Never", ["p-a"]),
    ("spec.restartPolicy=Always", ["p-b", "p-c", "p-d"]),
    ("spec.schedulerName=runai-scheduler", ["p-a"]),
    ("spec.schedulerName=default-scheduler", ["p-b", "p-c", "p-d"]),
    ("spec.serviceAccountName=trainer", ["p-a"]),
    ("spec.serviceAccountName=default", ["p-b", "p-c", "p-d"]),
    ("spec.hostNetwork=true", ["p-b"]),
    ("spec.hostNetwork=false", ["p-a", "p-c", "p-d"]),
    ("status.podIP=10.0.0.1", ["p-a"]),
    ("status.podIP=fd00::1", []),  # the first of podIPs only
    ("status.podIP=", ["p-c", "p-d"]),
    ("status.podIPs=10.0.0.1", []),  # accepted, but kube never sets it
    ("status.nominatedNodeName=node-3", ["p-c"]),
    ("status.nominatedNodeName!=node-3,spec.nodeName=node-1", ["p-a", "p-d"]),
])
def test_pod_field_selectors(simcluster, core, http, selected_pods, selector, names):
    sim = simcluster.sim
    listed = core.list_pod_for_all_namespaces(field_selector=selector)
    assert sorted(p.metadata.name for p in listed.items) == names
    rows = get(http, sim, "/api/v1/pods", TABLE_V1, fieldSelector=selector, includeObject="None").json()
    assert sorted(r["cells"][0] for r in rows["rows"]) == names
    events = watch_events(http, sim, "/api/v1/pods", None, timeout=0.3, fieldSelector=selector)
    assert sorted(e["object"]["metadata"]["name"] for e in events) == names
    table_events = watch_events(http, sim, "/api/v1/pods", TABLE_V1, timeout=0.3, fieldSelector=selector)
    assert sorted(e["object"]["rows"][0]["cells"][0] for e in table_events) == names


@pytest.mark.parametrize(("selector", "message"), [
    ("spec.containers=x", "field label not supported: spec.containers"),
    ("metadata.labels=x", "field label not supported: metadata.labels"),
    ("status.hostIP=1.2.3.4", "field label not supported: status.hostIP"),
    ("status.phase=Running,spec.nope=1", "field label not supported: spec.nope"),
    ("status.phase", "invalid selector: 'status.phase'; can't understand 'status.phase'"),
])
def test_pod_field_selector_errors(simcluster, core, http, selector, message):
    for path, accept, params in [("/api/v1/pods", None, {}), ("/api/v1/pods", TABLE_V1, {}),
                                 ("/api/v1/namespaces/default/pods", None, {"watch": "1"}),
                                 ("/api/v1/pods", TABLE_V1, {"watch": "1"})]:
        resp = get(http, simcluster.sim, path, accept, fieldSelector=selector, **params)
        assert resp.status_code == 400, (path, params, resp.text)
        assert resp.json()["message"] == message and resp.json()["reason"] == "BadRequest"
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod("default", field_selector=selector)
    assert exc.value.status == 400 and json.loads(exc.value.body)["message"] == message


def test_other_kinds_field_labels(simcluster, core, http):
    sim = simcluster.sim
    ok = get(http, sim, "/api/v1/services", fieldSelector="spec.type=ClusterIP")
    assert ok.status_code == 200
    ok = get(http, sim, "/apis/batch/v1/jobs", fieldSelector="status.successful=0")
    assert ok.status_code == 200
    bad = get(http, sim, "/api/v1/nodes", fieldSelector="spec.nodeName=x")
    assert bad.status_code == 400 and bad.json()["message"] == "field label not supported: spec.nodeName"


# -- watching from an older resourceVersion ------------------------------------------------------


def test_watch_replays_from_an_older_resource_version(simcluster, core):
    rv0 = rv_of(core)
    core.create_namespaced_pod("default", pod("ra"))
    core.create_namespaced_pod("default", pod("rb"))
    rv1 = core.patch_namespaced_pod("ra", "default", {"metadata": {"labels": {"step": "1"}}}).metadata.resource_version
    core.delete_namespaced_pod("rb", "default")
    core.patch_namespaced_pod("ra", "default", {"metadata": {"labels": {"step": "2"}}})

    def replay(rv: str, **kw: Any) -> list[tuple[str, str, str]]:
        out = []
        for ev in kwatch.Watch().stream(core.list_namespaced_pod, "default", resource_version=rv,
                                        timeout_seconds=1, **kw):
            out.append((ev["type"], ev["object"].metadata.name, ev["object"].metadata.resource_version))
        return out

    events = replay(rv0)
    assert [(t, n) for t, n, _ in events] == [("ADDED", "ra"), ("ADDED", "rb"), ("MODIFIED", "ra"),
                                              ("DELETED", "rb"), ("MODIFIED", "ra")]
    rvs = [int(r) for _, _, r in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs) and rvs[0] > int(rv0)
    assert [(t, n) for t, n, _ in replay(rv1)] == [("DELETED", "rb"), ("MODIFIED", "ra")]
    assert [(t, n) for t, n, _ in replay(rv0, field_selector="metadata.name=rb")] == [("ADDED", "rb"), ("DELETED", "rb")]
    assert [(t, n) for t, n, _ in replay(rv0, label_selector="step=1")] == [("ADDED", "ra"), ("DELETED", "ra")]
    assert replay(events[-1][2]) == []  # the newest: nothing to replay


@pytest.mark.simcluster(history=6)
def test_watch_older_than_the_window_is_expired(simcluster, core, http):
    sim = simcluster.sim
    rv0 = rv_of(core)
    for i in range(10):
        core.create_namespaced_pod("default", pod(f"h{i}"))
    compacted = simcluster.call(lambda: sim.store.compacted_rv)
    assert compacted > int(rv0)
    # older than the retained window: 410 Expired, as an ERROR event (the official client raises)
    with pytest.raises(ApiException) as exc:
        for _ in kwatch.Watch().stream(core.list_namespaced_pod, "default", resource_version=rv0, timeout_seconds=1):
            pass
    assert exc.value.status == 410
    events = watch_events(http, sim, "/api/v1/namespaces/default/pods", resourceVersion=rv0)
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    status = events[0]["object"]
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"] == f"too old resource version: {rv0} ({compacted})"
    # the oldest retained one replays what followed it
    events = watch_events(http, sim, "/api/v1/namespaces/default/pods", resourceVersion=str(compacted))
    assert [e["object"]["metadata"]["name"] for e in events] == [f"h{i}" for i in range(4, 10)]


# -- the request log -----------------------------------------------------------------------------


def test_request_log_tells_what_was_asked(simcluster, core, http):
    sim = simcluster.sim
    core.create_namespaced_pod("default", pod("lg"))
    t0 = time.time()
    get(http, sim, "/api/v1/namespaces/default/pods", KUBECTL, includeObject="None", limit="500")
    get(http, sim, "/api/v1/pods", POM_LIST, labelSelector="a=b")
    get(http, sim, "/api/v1/namespaces/default/pods/lg", POM)
    watch_events(http, sim, "/api/v1/namespaces/default/pods", None, timeout=0.2)
    log = sim.requests
    assert log.full_lists("pods", since=t0) == []
    get(http, sim, "/api/v1/pods", "application/json", fieldSelector="status.phase!=Running")
    selected = log.full_lists("pods", since=t0)
    assert [r.field_selector for r in selected] == ["status.phase!=Running"]
    assert log.full_lists("pods", since=t0, unfiltered=True) == []
    core.list_pod_for_all_namespaces()
    full = log.full_lists("pods", since=t0, unfiltered=True)
    assert len(full) == 1 and full[0].path == "/api/v1/pods" and full[0].verb == "list"

    recs = [r for r in log.since(t0) if r.resource == "pods"]
    table, pom, one, watch = recs[:4]
    assert (table.verb, table.representation, table.include_object, table.params["limit"]) == (
        "list", "Table", "None", "500")
    assert table.accept == KUBECTL and not table.full_objects
    assert (pom.verb, pom.representation, pom.label_selector, pom.accept) == (
        "list", "PartialObjectMetadataList", "a=b", POM_LIST)
    assert (one.verb, one.representation) == ("get", "PartialObjectMetadata")
    assert (watch.verb, watch.watch, watch.representation, watch.params["timeoutSeconds"]) == (
        "watch", True, "", "0.2")
    assert [r.status for r in recs[:4]] == [200, 200, 200, 200]
    assert len(log.of("watch", "pods", since=t0)) == 1 and len(log.of("get", "pods", since=t0)) == 1
    # and over the admin endpoint
    doc = http.get(sim.url + "/simcluster/admin/requests", params={"since": str(t0)}, timeout=30).json()
    first = next(r for r in doc["requests"] if r["path"] == "/api/v1/namespaces/default/pods")
    assert first["accept"] == KUBECTL and first["representation"] == "Table" and first["verb"] == "list"
