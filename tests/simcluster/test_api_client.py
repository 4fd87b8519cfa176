"""The official Python client against simcluster: CRUD, watch semantics, errors, identities."""

from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes import watch as kwatch
from kubernetes.client.rest import ApiException

from tests.faults import answered, assert_consumed, assert_fired

KUBEFLOW_KINDS = [
    ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"),
    ("kubeflow.org", "v1", "tfjobs", "TFJob"),
    ("kubeflow.org", "v1", "xgboostjobs", "XGBoostJob"),
    ("kubeflow.org", "v2beta1", "mpijobs", "MPIJob"),
]


def pod(name: str, ns: str = "default", labels: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "infinity"]}]},
    }


def test_version_and_discovery(k8s):
    client, api = k8s
    info = client.VersionApi(api).get_code()
    assert info.major == "1" and info.minor == "35"
    groups = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    assert {"batch", "kubeflow.org", "apiextensions.k8s.io"} <= groups
    crds = client.ApiextensionsV1Api(api).list_custom_resource_definition()
    names = {c.metadata.name for c in crds.items}
    assert {"pytorchjobs.kubeflow.org", "mpijobs.kubeflow.org", "tfjobs.kubeflow.org",
            "xgboostjobs.kubeflow.org"} <= names


def test_pod_crud_and_status(core):
    created = core.create_namespaced_pod("default", pod("p1", labels={"app": "x"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Pending"
    got = core.read_namespaced_pod("p1", "default")
    assert got.metadata.uid == created.metadata.uid
    patched = core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"tier": "gpu"}}})
    assert patched.metadata.labels == {"app": "x", "tier": "gpu"}
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)
    # status subresource: a status write does not touch labels, a main write does not touch status
    body = core.read_namespaced_pod_status("p1", "default")
    body.status.phase = "Running"
    core.replace_namespaced_pod_status("p1", "default", body)
    assert core.read_namespaced_pod("p1", "default").status.phase == "Running"
    main = core.read_namespaced_pod("p1", "default")
    main.status.phase = "Failed"
    main.metadata.labels["x"] = "y"
    core.replace_namespaced_pod("p1", "default", main)
    again = core.read_namespaced_pod("p1", "default")
    assert again.status.phase == "Running" and again.metadata.labels["x"] == "y"
    # stale resourceVersion on update -> 409 Conflict
    main.metadata.labels["z"] = "1"
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_pod("p1", "default", main)
    assert exc.value.status == 409
    assert json.loads(exc.value.body)["reason"] == "Conflict"
    core.delete_namespaced_pod("p1", "default")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("p1", "default")
    assert exc.value.status == 404
    assert json.loads(exc.value.body)["message"] == 'pods "p1" not found'


def test_json_patch_and_duplicate(core):
    core.create_namespaced_pod("default", pod("p2"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", pod("p2"))
    assert exc.value.status == 409
    assert json.loads(exc.value.body)["reason"] == "AlreadyExists"
    out = core.patch_namespaced_pod(
        "p2", "default", [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    )
    assert out.metadata.labels == {"a": "b"}


@pytest.mark.parametrize("group,version,plural,kind", KUBEFLOW_KINDS)
def test_custom_objects_crud(custom, group, version, plural, kind):
    body = {"apiVersion": f"{group}/{version}", "kind": kind, "metadata": {"name": "job1"},
            "spec": {"runPolicy": {"cleanPodPolicy": "None"}}}
    made = custom.create_namespaced_custom_object(group, version, "default", plural, body)
    assert made["metadata"]["generation"] == 1
    lst = custom.list_namespaced_custom_object(group, version, "default", plural)
    assert [o["metadata"]["name"] for o in lst["items"]] == ["job1"]
    assert lst["kind"] == f"{kind}List"
    p = custom.patch_namespaced_custom_object(
        group, version, "default", plural, "job1", {"spec": {"runPolicy": {"suspend": True}}}
    )
    assert p["spec"]["runPolicy"] == {"cleanPodPolicy": "None", "suspend": True}
    assert p["metadata"]["generation"] == 2
    all_ns = custom.list_cluster_custom_object(group, version, plural)
    assert len(all_ns["items"]) == 1
    custom.delete_namespaced_custom_object(group, version, "default", plural, "job1")
    assert custom.list_namespaced_custom_object(group, version, "default", plural)["items"] == []


def test_every_builtin_kind_crud(k8s):
    client, api = k8s
    core = client.CoreV1Api(api)
    batch = client.BatchV1Api(api)
    core.create_namespace({"metadata": {"name": "kinds"}})
    core.create_namespaced_config_map("kinds", {"metadata": {"name": "cm"}, "data": {"a": "1"}})
    core.create_namespaced_service("kinds", {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}]}})
    core.create_namespaced_resource_quota(
        "kinds", {"metadata": {"name": "q"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}
    )
    core.create_namespaced_event(
        "kinds", {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "x", "namespace": "kinds"},
                  "reason": "Test", "message": "hello", "type": "Normal"}
    )
    batch.create_namespaced_job("kinds", {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "x", "command": ["true"]}], "restartPolicy": "Never"}}}})
    core.create_node({"metadata": {"name": "n1", "labels": {"pool": "a"}}})
    assert core.read_namespaced_config_map("cm", "kinds").data == {"a": "1"}
    svc = core.read_namespaced_service("svc", "kinds")
    assert svc.spec.cluster_ip.startswith("10.")
    assert core.list_namespaced_event("kinds").items[0].message == "hello"
    assert batch.read_namespaced_job("j", "kinds").spec.backoff_limit == 6
    assert core.read_node("n1").metadata.labels == {"pool": "a"}
    core.patch_node("n1", {"metadata": {"labels": {"pool": "b"}}})
    assert core.read_node("n1").metadata.labels == {"pool": "b"}
    # deleting the namespace removes what it held
    core.delete_namespace("kinds")
    assert core.list_config_map_for_all_namespaces(field_selector="metadata.namespace=kinds").items == []
    with pytest.raises(ApiException) as exc:
        core.read_namespace("kinds")
    assert exc.value.status == 404
    core.delete_node("n1")


def test_owner_cascade(core, custom):
    job = custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", "default", "pytorchjobs",
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "own"}, "spec": {}},
    )
    ref = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "own",
           "uid": job["metadata"]["uid"], "controller": True}
    for i in range(3):
        body = pod(f"own-worker-{i}")
        body["metadata"]["ownerReferences"] = [ref]
        core.create_namespaced_pod("default", body)
    core.create_namespaced_pod("default", pod("bystander"))
    custom.delete_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", "own")
    names = [p.metadata.name for p in core.list_namespaced_pod("default").items]
    assert names == ["bystander"]


def test_selectors(core):
    for i in range(6):
        core.create_namespaced_pod("default", pod(f"s{i}", labels={"idx": str(i), "even": str(i % 2 == 0).lower()}))
    def names(**kw):
        return sorted(p.metadata.name for p in core.list_namespaced_pod("default", **kw).items)
    assert names(label_selector="even=true") == ["s0", "s2", "s4"]
    assert names(label_selector="even!=true") == ["s1", "s3", "s5"]
    assert names(label_selector="idx in (1,5)") == ["s1", "s5"]
    assert names(label_selector="idx notin (1,5),even==false") == ["s3"]
    assert names(label_selector="idx") == [f"s{i}" for i in range(6)]
    assert names(label_selector="!idx") == []
    assert names(field_selector="metadata.name=s4") == ["s4"]
    assert names(field_selector="status.phase=Pending,metadata.name!=s0") == ["s1", "s2", "s3", "s4", "s5"]
    assert names(field_selector="spec.nodeName=") == [f"s{i}" for i in range(6)]
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod("default", label_selector="idx in (1")
    assert exc.value.status == 400
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod("default", field_selector="spec.bogus=1")
    assert exc.value.status == 400


def test_pagination(core):
    for i in range(25):
        core.create_namespaced_pod("default", pod(f"page-{i:02d}"))
    seen = []
    token = None
    pages = 0
    while True:
        resp = core.list_namespaced_pod("default", limit=10, _continue=token)
        pages += 1
        seen += [p.metadata.name for p in resp.items]
        token = resp.metadata._continue
        if not token:
            break
        assert resp.metadata.remaining_item_count == 25 - len(seen)
    assert pages == 3
    assert seen == [f"page-{i:02d}" for i in range(25)]


def test_watch_resume_and_410(simcluster, core):
    lst = core.list_namespaced_pod("default")
    rv = lst.metadata.resource_version
    core.create_namespaced_pod("default", pod("w1"))
    core.patch_namespaced_pod("w1", "default", {"metadata": {"labels": {"a": "1"}}})
    core.delete_namespaced_pod("w1", "default")
    w = kwatch.Watch()
    events = []
    for ev in w.stream(core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=1):
        events.append((ev["type"], ev["object"].metadata.name))
        if len(events) == 3:
            w.stop()
    assert events == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]
    # after compaction, the old resourceVersion is gone: 410 Expired
    simcluster.call(simcluster.sim.store.compact)
    w = kwatch.Watch()
    with pytest.raises(ApiException) as exc:
        for _ in w.stream(core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=2):
            pass
    assert exc.value.status == 410
    # relist gives a fresh RV from which watching works again
    fresh = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", pod("w2"))
    got = []
    for ev in kwatch.Watch().stream(core.list_namespaced_pod, "default", resource_version=fresh, timeout_seconds=1):
        got.append(ev["object"].metadata.name)
        break
    assert got == ["w2"]


def test_watch_live_bookmarks_and_timeout(simcluster, core):
    rv = core.list_namespaced_pod("default").metadata.resource_version
    def later():
        time.sleep(0.3)
        core.create_namespaced_pod("default", pod("live"))
    threading.Thread(target=later).start()
    start = time.monotonic()
    resp = core.list_namespaced_pod("default", watch=True, resource_version=rv, timeout_seconds=2,
                                    allow_watch_bookmarks=True, _preload_content=False)
    buf = b""
    for chunk in resp.stream(amt=None):
        buf += chunk
    lines = [json.loads(x) for x in buf.splitlines() if x.strip()]
    elapsed = time.monotonic() - start
    assert elapsed > 1.5, "timeoutSeconds ends the watch, not before"
    types = [ln["type"] for ln in lines]
    assert types[0] == "ADDED" and lines[0]["object"]["metadata"]["name"] == "live"
    assert types[-1] == "BOOKMARK"
    assert int(lines[-1]["object"]["metadata"]["resourceVersion"]) >= int(lines[0]["object"]["metadata"]["resourceVersion"])


def test_drop_watches_ends_streams(simcluster, core):
    rv = core.list_namespaced_pod("default").metadata.resource_version
    result = {}
    def watch():
        for _ in kwatch.Watch().stream(core.list_namespaced_pod, "default", resource_version=rv, timeout_seconds=30):
            pass
        result["ended"] = True
    t = threading.Thread(target=watch)
    t.start()
    time.sleep(0.5)
    dropped = simcluster.call(simcluster.sim.store.drop_watches)
    t.join(10)
    assert dropped >= 1 and result.get("ended")


def admin_session(sim, tmp_path):
    import requests

    ca = tmp_path / "ca.pem"
    ca.write_bytes(sim.ca_pem)
    s = requests.Session()
    s.trust_env = False  # REQUESTS_CA_BUNDLE would override verify
    s.verify = str(ca)
    s.headers["Authorization"] = f"Bearer {sim.admin_token}"
    return s


def test_invalid_and_malformed_requests(k8s, simcluster, tmp_path):
    client, api = k8s
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("default", pod("Bad_Name"))
    assert exc.value.status == 422
    body = json.loads(exc.value.body)
    assert body["reason"] == "Invalid" and "RFC 1123" in body["message"]
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("nope", pod("x", "nope"))
    assert exc.value.status == 404
    # raw requests: malformed JSON, a 10 MB body, unknown kinds
    sim = simcluster.sim
    s = admin_session(sim, tmp_path)
    r = s.post(f"{sim.url}/api/v1/namespaces/default/pods", data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["kind"] == "Status"
    r = s.post(f"{sim.url}/api/v1/namespaces/default/pods", data=b"x" * (10 * 1024 * 1024),
               headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    r = s.get(f"{sim.url}/apis/kubeflow.org/v1/namespaces/default/bogusjobs")
    assert r.status_code == 404 and r.json()["reason"] == "NotFound"
    r = s.post(f"{sim.url}/api/v1/namespaces/default/pods", data=b'{"kind":"Node","apiVersion":"v1"}',
               headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    r = s.get(f"{sim.url}/api/v1/pods", params={"labelSelector": "a in ((b"})
    assert r.status_code == 400
    r = s.get(f"{sim.url}/api/v1/pods", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"
    # still serving
    assert core.list_namespaced_pod("default").items == []


def test_namespace_limited_user(simcluster, tmp_path):
    sim = simcluster.sim
    simcluster.call(sim.add_namespace_reader, "carol", ["team-c"])
    simcluster.call(sim.apply, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-c"}})
    path = sim.write_kubeconfig(tmp_path / "carol.yaml", user="carol")
    api = kconfig.new_client_from_config(config_file=str(path))
    core = kclient.CoreV1Api(api)
    assert core.list_namespaced_pod("team-c").items == []
    with pytest.raises(ApiException) as exc:
        core.list_namespace()
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"] == (
        'namespaces is forbidden: User "carol" cannot list resource "namespaces" in API group "" at the cluster scope'
    )
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod("default")
    assert json.loads(exc.value.body)["message"] == (
        'pods is forbidden: User "carol" cannot list resource "pods" in API group "" in the namespace "default"'
    )
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod("team-c", pod("x", "team-c"))
    assert exc.value.status == 403
    api.close()


def test_impersonation(simcluster, tmp_path):
    sim = simcluster.sim
    simcluster.call(sim.add_namespace_reader, "dave", ["default"])
    tok = sim.user_tokens["ranks-ssh"] if "ranks-ssh" in sim.user_tokens else simcluster.call(sim.authz.token_for, "ranks-ssh")
    cfg = kclient.Configuration()
    cfg.host = sim.url
    cfg.ssl_ca_cert = str(tmp_path / "ca.pem")
    (tmp_path / "ca.pem").write_bytes(sim.ca_pem)
    cfg.api_key = {"authorization": f"Bearer {tok}"}
    api = kclient.ApiClient(cfg, header_name="Impersonate-User", header_value="dave")
    core = kclient.CoreV1Api(api)
    assert core.list_namespaced_pod("default").items == []
    with pytest.raises(ApiException) as exc:
        core.list_node()
    assert 'User "dave" cannot list resource "nodes"' in json.loads(exc.value.body)["message"]
    api.close()
    # a user who may not impersonate gets 403
    api = kconfig.new_client_from_config(config_file=str(sim.write_kubeconfig(tmp_path / "d.yaml", user="dave")))
    api.default_headers["Impersonate-User"] = "admin"
    with pytest.raises(ApiException) as exc:
        kclient.CoreV1Api(api).list_namespaced_pod("default")
    assert exc.value.status == 403
    api.close()


def test_fault_injection_fail_and_retry_after(simcluster, core, tmp_path):
    sim = simcluster.sim
    s = admin_session(sim, tmp_path)
    t0 = time.time()
    r = s.post(f"{sim.url}/simcluster/admin/fail",
               json={"path": "/api/v1/namespaces/default/pods$", "status": 429, "count": 2, "retryAfter": 3})
    assert r.status_code == 200
    for _ in range(2):
        r = s.get(f"{sim.url}/api/v1/namespaces/default/pods")
        assert r.status_code == 429 and r.headers["Retry-After"] == "3"
        assert r.json()["reason"] == "TooManyRequests"
    assert core.list_namespaced_pod("default").items == []
    # both injected 429s fired (and only those two: the third list was answered)
    assert_consumed(simcluster, "/api/v1/namespaces/default/pods$")
    reads = answered(simcluster, "/api/v1/namespaces/default/pods$", since=t0)
    assert [r.status for r in reads] == [429, 429, 200]
    # the admin endpoint needs the admin identity
    s.headers["Authorization"] = f"Bearer {simcluster.call(sim.authz.token_for, 'ranks-ssh')}"
    assert s.post(f"{sim.url}/simcluster/admin/compact").status_code == 403
    t1 = time.time()
    simcluster.call(sim.faults.fail_next, r"/pods", 500, 1)
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod("default")
    assert exc.value.status == 500 and "injected failure (500)" in str(exc.value.body)
    assert_consumed(simcluster, r"/pods")
    assert_fired(simcluster, r"/pods$", 500, since=t1, times=1)


def test_expired_token_and_restart(simcluster, core):
    sim = simcluster.sim
    core.create_namespaced_pod("default", pod("keep"))
    port = sim.port
    simcluster.run(sim.restart(0.2))
    assert sim.port == port
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["keep"]
    simcluster.call(sim.authz.expire, sim.admin_token)
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod("default")
    assert exc.value.status == 401


def test_official_client_reads_the_scenarios_gpu_nodes(simcluster, core):
    """The client checks required fields when it builds its models: every node the scenarios make
    has the system info a kubelet reports (machine, system and boot ids included)."""
    from simcluster.scenarios.nodes import gpu_nodes

    for node in gpu_nodes(2, 8, pool="a100"):
        simcluster.call(simcluster.sim.apply, node)
    nodes = core.list_node().items
    assert [n.metadata.name for n in nodes] == ["gpu-node-01", "gpu-node-02"]
    info = nodes[0].status.node_info
    assert info.boot_id and info.machine_id and info.system_uuid and info.boot_id != nodes[1].status.node_info.boot_id
