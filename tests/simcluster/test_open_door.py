"""simcluster is no open door (issue 17, item 10): it runs on developers' machines (`ranks demo`,
`ranks sim`), so

- a request without valid credentials gets 401 (a `Status`, reason Unauthorized), with TLS or
  without, on every path (`/healthz` and `/version` too: kube-apiserver with anonymous auth off);
- request bodies are JSON, YAML or Kubernetes protobuf only (the patch types for PATCH): what a web
  page can send without a CORS preflight (text/plain, forms) is 415, and nothing is created; a body
  without a type is JSON, as on kube-apiserver (the official Python client sends creates so);
- a browser's cross-origin request, and any CORS preflight, is 403 with no `Access-Control-*`;
- a pod gets its own namespace's service account and nothing else: no admin token, no kubeconfig
  holding other users' tokens; that token reads pods and execs in its namespace, and is refused
  other namespaces, secrets and writes. So `alice` (limited to runai-team-a) no longer reads the
  admin token from her pod's log.

Raw HTTP (http.client) against a started simcluster: what a browser or a curious process sends.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.node.launchers import _kube
from simcluster.scenarios.nodes import gpu_node
from tests.waiting import wait_for

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
NODE = "node-0"
TEAM_A, TEAM_B = "runai-team-a", "runai-team-b"
UNKNOWN_FORMAT = "the body of the request was in an unknown format - accepted media types include: "


class Raw:
    """One request per connection, as given: no header added but Host and Content-Length."""

    def __init__(self, t: ThreadedSimCluster) -> None:
        self.sim = t.sim
        self.ctx = ssl.create_default_context(cadata=t.sim.ca_pem.decode()) if t.sim.tls else None

    def __call__(self, method: str, path: str, headers: dict[str, str] | None = None,
                 body: bytes | None = None, token: str | None = None) -> tuple[int, dict[str, str], Any]:
        conn: http.client.HTTPConnection
        if self.ctx is not None:
            conn = http.client.HTTPSConnection(self.sim.host, self.sim.port, context=self.ctx, timeout=20)
        else:
            conn = http.client.HTTPConnection(self.sim.host, self.sim.port, timeout=20)
        hdrs = dict(headers or {})
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token}"
        try:
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
            got = {k.lower(): v for k, v in resp.getheaders()}
        finally:
            conn.close()
        try:
            doc: Any = json.loads(raw) if raw else None
        except ValueError:
            doc = raw.decode("utf-8", "replace")
        return resp.status, got, doc


@pytest.fixture(params=[True, False], ids=["tls", "no-tls"])
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[ThreadedSimCluster, Raw]]:
    """A passive simcluster (objects only), with TLS and without (`ranks sim --no-tls`)."""
    with sim_in_thread(components=(), tls=request.param, workdir=tmp_path / "sim") as t:
        t.call(t.sim.apply, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM_A}})
        yield t, Raw(t)


def pod_body(name: str, namespace: str = "default", command: list[str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": NODE, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "main", "image": "busybox", "command": command or ["sleep", "3600"]}]}}


def stored_pod(t: ThreadedSimCluster, name: str, namespace: str = "default") -> bool:
    return t.call(lambda: t.sim.store.find(("", "pods"), namespace, name)) is not None


def assert_status(got: tuple[int, dict[str, str], Any], code: int, reason: str) -> dict[str, Any]:
    status, headers, doc = got
    assert status == code, got
    assert headers["content-type"].startswith("application/json"), headers
    assert isinstance(doc, dict) and doc["kind"] == "Status" and doc["apiVersion"] == "v1", doc
    assert doc["status"] == "Failure" and doc["code"] == code and doc["reason"] == reason, doc
    assert not [h for h in headers if h.startswith("access-control-")], headers
    return doc


# -- no anonymous access --------------------------------------------------------------------------


PATHS = ["/healthz", "/readyz", "/livez", "/version", "/api", "/apis", "/api/v1", "/openapi/v3",
         "/api/v1/nodes", "/api/v1/namespaces/default/pods", "/api/v1/namespaces/default/secrets",
         "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs", "/simcluster/admin/requests",
         "/apis/simcluster.ranks/v1/namespaces/default/rendezvous/a:1"]


def test_a_request_without_credentials_is_401(served: tuple[ThreadedSimCluster, Raw]) -> None:
    t, raw = served
    sim = t.sim
    bad: list[dict[str, str]] = [
        {}, {"Authorization": "Bearer "}, {"Authorization": "Bearer not-a-token"},
        {"Authorization": "Basic " + base64.b64encode(b"admin:admin").decode()},
        {"Authorization": sim.admin_token},  # no scheme
        {"Impersonate-User": "admin"},
    ]
    for path in PATHS:
        for headers in bad:
            assert assert_status(raw("GET", path, headers), 401, "Unauthorized")["message"] == "Unauthorized"
        # with a token, the same paths are served (the rendezvous has no round yet: 200 too)
        status, _, doc = raw("GET", path, token=sim.admin_token)
        assert status == 200, (path, doc)
    # an expired token is no better than none
    tok = t.call(sim.add_user, "bob")  # no rules: discovery and /version only
    assert raw("GET", "/version", token=tok)[0] == 200
    assert_status(raw("GET", "/api/v1/nodes", token=tok), 403, "Forbidden")
    t.call(sim.authz.expire, tok)
    assert_status(raw("GET", "/version", token=tok), 401, "Unauthorized")


def test_a_pod_posted_without_credentials_is_not_created(served: tuple[ThreadedSimCluster, Raw]) -> None:
    """The probe: a web page's POST of a pod running a command, as JSON and as text/plain."""
    t, raw = served
    for ctype in ("application/json", "text/plain"):
        body = json.dumps(pod_body("anon", command=["sh", "-c", "touch /tmp/pwned"])).encode()
        assert_status(raw("POST", "/api/v1/namespaces/default/pods", {"Content-Type": ctype}, body),
                      401, "Unauthorized")
        assert not stored_pod(t, "anon")


# -- request bodies: JSON, YAML, protobuf only ------------------------------------------------------


@pytest.mark.parametrize("ctype", [
    "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
    "text/yaml", "application/x-yaml", "application/octet-stream", "application/merge-patch+json",
])
def test_a_body_of_another_type_is_415_and_creates_nothing(served: tuple[ThreadedSimCluster, Raw],
                                                          ctype: str) -> None:
    t, raw = served
    sim = t.sim
    headers = {"Content-Type": ctype}
    body = json.dumps(pod_body("typed")).encode()
    doc = assert_status(raw("POST", "/api/v1/namespaces/default/pods", headers, body, token=sim.admin_token),
                        415, "UnsupportedMediaType")
    assert doc["message"].startswith(UNKNOWN_FORMAT)
    assert not stored_pod(t, "typed")
    # PUT, DELETE (DeleteOptions), the admin endpoint and the rendezvous alike
    assert raw("POST", "/api/v1/namespaces/default/pods", {"Content-Type": "application/json"}, body,
               token=sim.admin_token)[0] == 201
    for method, path in (("PUT", "/api/v1/namespaces/default/pods/typed"),
                         ("DELETE", "/api/v1/namespaces/default/pods/typed"),
                         ("POST", "/simcluster/admin/latency"),
                         ("POST", "/apis/simcluster.ranks/v1/namespaces/default/rendezvous/a:1")):
        payload = b'{"seconds": 5, "id": "m"}' if method == "POST" else body
        assert_status(raw(method, path, headers, payload, token=sim.admin_token), 415, "UnsupportedMediaType")
    assert stored_pod(t, "typed")
    assert sim.faults.latency == 0


def test_bodies_as_json_yaml_and_patches_are_served(served: tuple[ThreadedSimCluster, Raw]) -> None:
    t, raw = served
    tok = t.sim.admin_token
    base = "/api/v1/namespaces/default/pods"
    assert raw("POST", base, {"Content-Type": "application/json; charset=utf-8"},
               json.dumps(pod_body("as-json")).encode(), token=tok)[0] == 201
    assert raw("POST", base, {"Content-Type": "application/yaml"},
               yaml.safe_dump(pod_body("as-yaml")).encode(), token=tok)[0] == 201
    merge = json.dumps({"metadata": {"labels": {"a": "b"}}}).encode()
    status, _, doc = raw("PATCH", f"{base}/as-json", {"Content-Type": "application/merge-patch+json"}, merge, token=tok)
    assert status == 200 and doc["metadata"]["labels"] == {"a": "b"}
    # a PATCH must name its patch type: application/json (or text/plain, or none) is not one
    for headers in ({"Content-Type": "application/json"}, {"Content-Type": "text/plain"}, {}):
        doc = assert_status(raw("PATCH", f"{base}/as-json", headers, merge, token=tok), 415, "UnsupportedMediaType")
        assert "application/merge-patch+json" in doc["message"]
    # a body without a type is read as JSON, as kube-apiserver does (the official Python client
    # sends creates so) but not as anything else, and a browser's (it has an Origin) is refused
    assert raw("POST", base, {}, json.dumps(pod_body("untyped")).encode(), token=tok)[0] == 201
    status, _, doc = raw("POST", base, {}, yaml.safe_dump(pod_body("untyped-yaml")).encode(), token=tok)
    assert status == 400 and doc["kind"] == "Status"
    assert_status(raw("POST", base, {"Origin": "http://evil.example"}, json.dumps(pod_body("blob")).encode(),
                      token=tok), 403, "Forbidden")
    assert not stored_pod(t, "untyped-yaml") and not stored_pod(t, "blob")
    # a body-less request needs no type
    assert raw("DELETE", f"{base}/as-yaml", token=tok)[0] == 200


# -- browsers ---------------------------------------------------------------------------------------


def test_cross_origin_requests_and_preflights_are_refused(served: tuple[ThreadedSimCluster, Raw]) -> None:
    t, raw = served
    sim = t.sim
    tok = sim.admin_token
    scheme = "https" if sim.tls else "http"
    path = "/api/v1/namespaces/default/pods"
    body = json.dumps(pod_body("browser")).encode()
    other = "https" if scheme == "http" else "http"
    foreign = ["http://evil.example", "https://evil.example", f"{scheme}://evil.example:{sim.port}",
               "null", f"{scheme}://127.0.0.1:{sim.port + 1 if sim.port < 65535 else 1}",
               f"{other}://127.0.0.1:{sim.port}", f"{scheme}://127.0.0.2:{sim.port}", "garbage", "http://[::1",
               f"{scheme}://localhost.evil.example:{sim.port}"]
    for origin in foreign:
        for method, data in (("GET", None), ("POST", body)):
            headers = {"Origin": origin, "Content-Type": "application/json"}
            doc = assert_status(raw(method, path, headers, data, token=tok), 403, "Forbidden")
            assert "cross-origin" in doc["message"]
        # without credentials too, and a DNS-rebound name (Host and Origin alike) is still foreign
        assert_status(raw("GET", path, {"Origin": origin}), 403, "Forbidden")
    host = f"evil.example:{sim.port}"
    assert_status(raw("GET", path, {"Origin": f"{scheme}://{host}", "Host": host}, token=tok), 403, "Forbidden")
    assert not stored_pod(t, "browser")
    # preflights: refused whatever they carry, and nothing says the origin is allowed
    for headers in ({"Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "authorization,content-type"},
                    {"Origin": f"{scheme}://127.0.0.1:{sim.port}", "Access-Control-Request-Method": "DELETE"},
                    {}):
        doc = assert_status(raw("OPTIONS", path, headers, token=tok), 403, "Forbidden")
        assert "preflight" in doc["message"]
    # the server's own origin (what websocket-client sends on an exec upgrade) is served
    for origin in (f"{scheme}://127.0.0.1:{sim.port}", f"{scheme}://localhost:{sim.port}"):
        status, headers, _ = raw("GET", path, {"Origin": origin}, token=tok)
        assert status == 200 and not [h for h in headers if h.startswith("access-control-")]


# -- pods: their own namespace's service account, nothing else ----------------------------------------


@pytest.fixture(params=[None, False], ids=["pod-namespaces", "host-view"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ThreadedSimCluster]:
    """Pods that run (kubelet, exec), two teams and alice, who may use runai-team-a only (the demo's);
    pods in namespaces of their own where the kernel allows, and in the host's view."""
    with sim_in_thread(components=("kubelet", "exec"), workdir=tmp_path / "sim",
                       pod_namespaces=request.param) as t:
        def setup() -> None:
            t.sim.apply(gpu_node(NODE, 8))
            for ns in (TEAM_A, TEAM_B):
                t.sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
                t.sim.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": ns},
                             "stringData": {"password": f"{ns}-secret"}})
            t.sim.add_namespace_reader("alice", [TEAM_A], write=True)

        t.call(setup)
        yield t


def every_token(t: ThreadedSimCluster) -> dict[str, str]:
    """Every identity's token: name by token."""
    return t.call(lambda: {tok: ident.name for tok, ident in t.sim.authz.tokens.items()})


READ_FILES = (
    f"cat {SA_DIR}/token 2>/dev/null || cat \"$HOME{SA_DIR}/token\"; echo; echo ===; "
    "cat \"$HOME/.kube/config\"; echo ===; env; echo ===; "
)


def pod_output(raw: Raw, token: str, ns: str, name: str) -> str:
    base = f"/api/v1/namespaces/{ns}/pods/{name}"
    def phase() -> Any:
        return (raw("GET", base, token=token)[2].get("status") or {}).get("phase")

    wait_for(lambda: phase() in ("Succeeded", "Failed"), 30, f"pod {ns}/{name} to finish", interval=0.2)
    status, _, log = raw("GET", f"{base}/log", token=token)
    assert status == 200, log
    return str(log)


def test_alices_pod_yields_only_her_namespaces_service_account(cluster: ThreadedSimCluster) -> None:
    t = cluster
    sim = t.sim
    raw = Raw(t)
    alice = sim.user_tokens["alice"]
    # alice runs a pod that prints what credentials it was given
    body = json.dumps(pod_body("peek", TEAM_A, ["sh", "-c", READ_FILES + "echo done"])).encode()
    status, _, doc = raw("POST", f"/api/v1/namespaces/{TEAM_A}/pods", {"Content-Type": "application/json"}, body,
                         token=alice)
    assert status == 201, doc
    out = pod_output(raw, alice, TEAM_A, "peek")
    token_part, kubeconfig_part, env_part, _ = out.split("===\n")
    sa_token = token_part.strip()
    tokens = every_token(t)
    assert tokens.get(sa_token) == f"system:serviceaccount:{TEAM_A}:default", out
    # no other identity's token anywhere in what the pod was given: not the admin's, not alice's
    others = {tok: who for tok, who in tokens.items() if tok != sa_token}
    assert sim.admin_token in others and alice in others
    assert [who for tok, who in others.items() if tok in out] == []
    # its kubeconfig holds the same service-account identity only, in its namespace
    kc = yaml.safe_load(kubeconfig_part)
    assert [u["user"] for u in kc["users"]] == [{"token": sa_token}]
    assert [c["context"]["namespace"] for c in kc["contexts"]] == [TEAM_A]
    assert kc["clusters"][0]["cluster"]["server"] == sim.url
    assert "KUBERNETES_SERVICE_HOST=" in env_part

    # what that token may do: read and exec into pods in runai-team-a, nothing more
    def code(method: str, path: str, body: bytes | None = None) -> int:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        return raw(method, path, headers, body, token=sa_token)[0]

    assert code("GET", f"/api/v1/namespaces/{TEAM_A}/pods") == 200
    assert code("GET", f"/api/v1/namespaces/{TEAM_A}/pods/peek") == 200
    assert code("GET", f"/api/v1/namespaces/{TEAM_A}/pods/peek/log") == 200
    assert code("GET", f"/api/v1/namespaces/{TEAM_A}/pods?watch=1&timeoutSeconds=1") == 200
    forbidden = [
        ("GET", f"/api/v1/namespaces/{TEAM_B}/pods"), ("GET", f"/api/v1/namespaces/{TEAM_B}/pods/peek"),
        ("GET", "/api/v1/pods"), ("GET", f"/api/v1/namespaces/{TEAM_A}/secrets"),
        ("GET", f"/api/v1/namespaces/{TEAM_A}/secrets/creds"), ("GET", f"/api/v1/namespaces/{TEAM_B}/secrets"),
        ("GET", f"/api/v1/namespaces/{TEAM_A}/configmaps"), ("GET", "/api/v1/namespaces"), ("GET", "/api/v1/nodes"),
        ("DELETE", f"/api/v1/namespaces/{TEAM_A}/pods/peek"), ("GET", "/simcluster/admin/requests"),
    ]
    for method, path in forbidden:
        assert_status(raw(method, path, token=sa_token), 403, "Forbidden")
    doc = assert_status(raw("POST", f"/api/v1/namespaces/{TEAM_A}/pods", {"Content-Type": "application/json"},
                            json.dumps(pod_body("escalate", TEAM_A)).encode(), token=sa_token), 403, "Forbidden")
    assert f"system:serviceaccount:{TEAM_A}:default" in doc["message"]
    assert not stored_pod(t, "escalate", TEAM_A)
    # nor may it become someone else
    assert_status(raw("GET", f"/api/v1/namespaces/{TEAM_B}/pods", {"Impersonate-User": "admin"}, token=sa_token),
                  403, "Forbidden")
    # and alice herself still may not list runai-team-b
    assert_status(raw("GET", f"/api/v1/namespaces/{TEAM_B}/pods", token=alice), 403, "Forbidden")


def test_a_running_pods_files_and_environment_hold_no_other_credential(cluster: ThreadedSimCluster) -> None:
    t = cluster
    sim = t.sim
    t.call(sim.apply, pod_body("idle", TEAM_B))
    t.call(sim.apply, pod_body("quiet", TEAM_B) | {"spec": {**pod_body("quiet", TEAM_B)["spec"],
                                                           "automountServiceAccountToken": False}})

    def runtime(name: str) -> Any:
        rt = t.call(lambda: sim.kubelet.runtime(TEAM_B, name))
        return rt if rt is not None and t.call(lambda: rt.is_running("main")) else None

    for name in ("idle", "quiet"):
        wait_for(lambda n=name: runtime(n), 30, f"pod {name} to run", interval=0.2)
    sa_token = t.call(sim.service_account_token, TEAM_B)
    others = {tok: who for tok, who in every_token(t).items() if tok != sa_token}
    assert sim.admin_token in others and sim.user_tokens["alice"] in others
    for name in ("idle", "quiet"):
        rt = runtime(name)
        root: Path = rt.root
        seen: list[str] = []
        for dirpath, dirnames, filenames in os.walk(root):
            if Path(dirpath) == root:
                dirnames[:] = [d for d in dirnames if d != ".simcluster"]  # the overlay: the host's files
            for f in filenames:
                path = Path(dirpath, f)
                if path.is_symlink() or not path.is_file():
                    continue
                data = path.read_bytes()
                seen.append(str(path.relative_to(root)))
                assert not [who for tok, who in others.items() if tok.encode() in data], path
        kc = yaml.safe_load((root / ".kube" / "config").read_text())
        assert ".kube/config" in seen
        environ = b"".join(Path(f"/proc/{pid}/environ").read_bytes() for pid in t.call(rt.pids))
        assert not [who for tok, who in others.items() if tok.encode() in environ]
        if name == "idle":
            assert (root / SA_DIR.lstrip("/") / "token").read_text() == sa_token
            assert [u["user"] for u in kc["users"]] == [{"token": sa_token}]
        else:  # automountServiceAccountToken: false: no token at all
            assert not (root / SA_DIR.lstrip("/") / "token").exists()
            assert [u["user"] for u in kc["users"]] == [{}]


def test_the_service_account_execs_in_its_namespace_only(cluster: ThreadedSimCluster) -> None:
    """The launchers' own client (`_kube.Api`, what mpirun and horovodrun use) with a pod's token."""
    t = cluster
    sim = t.sim
    for ns in (TEAM_A, TEAM_B):
        t.call(sim.apply, pod_body("worker", ns))
        wait_for(lambda n=ns: (rt := t.call(lambda: sim.kubelet.runtime(n, "worker"))) is not None
                 and t.call(lambda: rt.is_running("main")), 30, f"{ns}/worker to run", interval=0.2)
    token = t.call(sim.service_account_token, TEAM_A)
    api = _kube.Api(sim.host, sim.port, True, token, ca_data=sim.ca_pem)
    stream = api.exec(TEAM_A, "worker", ["sh", "-c", "echo ranked"])
    out = b"".join(data for channel, data in stream.frames() if channel == _kube.STDOUT)
    assert out == b"ranked\n" and _kube.exit_code(stream.status) == 0
    code, doc = api.request("GET", f"/api/v1/namespaces/{TEAM_A}/pods/worker")
    assert code == 200 and doc["metadata"]["name"] == "worker"
    with pytest.raises(_kube.ApiError) as err:
        api.exec(TEAM_B, "worker", ["sh", "-c", "echo escaped"])
    assert err.value.code == 403
    assert api.request("GET", f"/api/v1/namespaces/{TEAM_B}/pods/worker")[0] == 403
    # without a token the launchers' client gets 401, as any other
    anon = _kube.Api(sim.host, sim.port, True, None, ca_data=sim.ca_pem)
    with pytest.raises(_kube.ApiError) as err:
        anon.exec(TEAM_A, "worker", ["true"])
    assert err.value.code == 401
