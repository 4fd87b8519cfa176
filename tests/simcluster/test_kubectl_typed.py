"""A real kubectl v1.35's typed commands against simcluster. kubectl sends built-in kinds as
`application/vnd.kubernetes.protobuf` with no fallback, so each of these only works because the
server decodes protobuf request bodies; each result is checked against what the server stored."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.simcluster(scenario="demo", components=("operators", "scheduler", "kubelet"))

NS = "typed"


def stored(simcluster, group: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
    def find() -> dict[str, Any] | None:
        st = simcluster.sim.store.find((group, plural), namespace, name)
        return None if st is None else json.loads(json.dumps(st.obj))

    return simcluster.call(find)


def test_typed_create_commands_are_stored(kubectl, simcluster):
    assert kubectl.run("create", "namespace", NS).stdout.strip() == f"namespace/{NS} created"
    ns = stored(simcluster, "", "namespaces", "", NS)
    assert ns is not None and ns["status"]["phase"] == "Active"

    out = kubectl.run("create", "configmap", "settings", "-n", NS, "--from-literal=lr=0.1",
                      "--from-literal=model=bert large").stdout
    assert out.strip() == "configmap/settings created"
    assert stored(simcluster, "", "configmaps", NS, "settings")["data"] == {"lr": "0.1", "model": "bert large"}

    out = kubectl.run("create", "secret", "generic", "token", "-n", NS, "--from-literal=key=s3cr3t=").stdout
    assert out.strip() == "secret/token created"
    secret = stored(simcluster, "", "secrets", NS, "token")
    assert secret["type"] == "Opaque"
    assert base64.b64decode(secret["data"]["key"]) == b"s3cr3t="

    out = kubectl.run("create", "job", "once", "-n", NS, "--image=busybox", "--", "sh", "-c", "echo done").stdout
    assert out.strip() == "job.batch/once created"
    job = stored(simcluster, "batch", "jobs", NS, "once")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "busybox" and container["command"] == ["sh", "-c", "echo done"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    wait_for(lambda: (stored(simcluster, "batch", "jobs", NS, "once") or {}).get("status", {}).get("succeeded") == 1,
             timeout=30, what="the job ran to completion",
             detail=lambda: (stored(simcluster, "batch", "jobs", NS, "once"), kubectl.run("get", "pods", "-A", "-o", "wide").stdout))

    out = kubectl.run("create", "serviceaccount", "trainer", "-n", NS).stdout
    assert out.strip() == "serviceaccount/trainer created"
    assert stored(simcluster, "", "serviceaccounts", NS, "trainer") is not None


def test_label_annotate_and_delete_with_options(kubectl, simcluster):
    kubectl.run("create", "namespace", NS)
    kubectl.run("run", "sleeper", "-n", NS, "--image=busybox", "--restart=Never", "--", "sleep", "3600")
    assert stored(simcluster, "", "pods", NS, "sleeper") is not None

    assert "labeled" in kubectl.run("label", "pod", "sleeper", "-n", NS, "tier=gpu", "team=a").stdout
    assert "annotated" in kubectl.run("annotate", "pod", "sleeper", "-n", NS, "owner=alice smith").stdout
    meta = stored(simcluster, "", "pods", NS, "sleeper")["metadata"]
    assert meta["labels"]["tier"] == "gpu" and meta["labels"]["team"] == "a"
    assert meta["annotations"]["owner"] == "alice smith"
    assert "unlabeled" in kubectl.run("label", "pod", "sleeper", "-n", NS, "team-").stdout
    assert "team" not in stored(simcluster, "", "pods", NS, "sleeper")["metadata"]["labels"]

    wait_for(lambda: (stored(simcluster, "", "pods", NS, "sleeper") or {}).get("status", {}).get("phase") == "Running",
             timeout=30, what="the pod runs")
    out = kubectl.run("delete", "pod", "sleeper", "-n", NS, "--grace-period=0", "--force").stdout
    assert 'pod "sleeper" force deleted' in out
    assert stored(simcluster, "", "pods", NS, "sleeper") is None

    # --grace-period=0 without --force: kubectl asks for the shortest graceful deletion (1 s)
    kubectl.run("run", "brief", "-n", NS, "--image=busybox", "--restart=Never", "--", "sleep", "3600")
    wait_for(lambda: (stored(simcluster, "", "pods", NS, "brief") or {}).get("status", {}).get("phase") == "Running",
             timeout=30, what="the second pod runs")
    out = kubectl.run("delete", "pod", "brief", "-n", NS, "--grace-period=0", timeout=30).stdout
    assert 'pod "brief" deleted' in out
    assert stored(simcluster, "", "pods", NS, "brief") is None

    kubectl.run("create", "configmap", "gone", "-n", NS, "--from-literal=a=b")
    out = kubectl.run("delete", "configmap", "gone", "-n", NS, "--cascade=foreground", "--wait=true").stdout
    assert 'configmap "gone" deleted' in out
    assert stored(simcluster, "", "configmaps", NS, "gone") is None


def test_deployment_scale_and_rollout_status(kubectl, simcluster):
    kubectl.run("create", "namespace", NS)
    out = kubectl.run("create", "deployment", "web", "-n", NS, "--image=busybox", "--replicas=2", "--",
                      "sleep", "3600").stdout
    assert out.strip() == "deployment.apps/web created"
    dep = stored(simcluster, "apps", "deployments", NS, "web")
    assert dep["spec"]["replicas"] == 2 and dep["spec"]["selector"] == {"matchLabels": {"app": "web"}}

    status = kubectl.run("rollout", "status", "deployment/web", "-n", NS, "--timeout=60s", timeout=90)
    assert 'deployment "web" successfully rolled out' in status.stdout
    dep = stored(simcluster, "apps", "deployments", NS, "web")
    assert dep["status"]["availableReplicas"] == 2 and dep["status"]["observedGeneration"] == dep["metadata"][
        "generation"]

    out = kubectl.run("scale", "deployment", "web", "-n", NS, "--replicas=3").stdout
    assert out.strip() == "deployment.apps/web scaled"
    assert stored(simcluster, "apps", "deployments", NS, "web")["spec"]["replicas"] == 3
    status = kubectl.run("rollout", "status", "deployment/web", "-n", NS, "--timeout=60s", timeout=90)
    assert 'deployment "web" successfully rolled out' in status.stdout

    def running_pods() -> list[str]:
        def names() -> list[str]:
            return [st.obj["metadata"]["name"] for st in simcluster.sim.store.items(("", "pods"))
                    if st.obj["metadata"].get("namespace") == NS
                    and st.obj["metadata"].get("labels", {}).get("app") == "web"
                    and not st.obj["metadata"].get("deletionTimestamp")]
        return simcluster.call(names)

    assert len(running_pods()) == 3
    table = kubectl.run("get", "deployment", "web", "-n", NS).stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1].split()[:4] == ["web", "3/3", "3", "3"]

    kubectl.run("scale", "deployment", "web", "-n", NS, "--replicas=1", "--current-replicas=3")
    wait_for(lambda: len(running_pods()) == 1, timeout=30, what="scaled down to one pod")
    rs = json.loads(kubectl.run("get", "rs", "-n", NS, "-l", "app=web", "-o", "json").stdout)["items"]
    assert len(rs) == 1 and rs[0]["spec"]["replicas"] == 1
    assert rs[0]["metadata"]["name"] == f"web-{rs[0]['metadata']['labels']['pod-template-hash']}"

    assert 'deployment.apps "web" deleted' in kubectl.run("delete", "deployment", "web", "-n", NS).stdout
    wait_for(lambda: not running_pods(), timeout=30, what="the deployment's pods are gone")


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (the lengths here are all < 128)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _envelope(api_version: str, kind: str, raw: bytes = b"") -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return b"k8s\x00" + _field(1, type_meta) + _field(2, raw)


@pytest.mark.simcluster(scenario="demo", components=())
def test_bodies_it_cannot_decode_get_the_real_servers_answers(simcluster):
    import ssl
    import urllib.error
    import urllib.request

    sim = simcluster.sim
    ca = sim.workdir / "typed-test-ca.pem"
    ca.write_bytes(sim.ca_pem)
    tls = ssl.create_default_context(cafile=str(ca))

    def post(path: str, ctype: str, body: bytes) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(f"{sim.url}{path}", data=body, method="POST",
                                     headers={"Content-Type": ctype, "Authorization": f"Bearer {sim.admin_token}"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10, context=tls)
        return err.value.code, json.loads(err.value.read())

    unknown = "the body of the request was in an unknown format - accepted media types include: "
    code, status = post("/api/v1/namespaces/default/configmaps", "text/plain", b"name: x")
    assert code == 415 and status["message"].startswith(unknown) and status["reason"] == "UnsupportedMediaType"
    # a custom resource in protobuf (kube-apiserver serves CRDs as JSON and YAML only)
    code, status = post("/apis/kubeflow.org/v1/namespaces/runai-team-a/pytorchjobs",
                        "application/vnd.kubernetes.protobuf", _envelope("kubeflow.org/v1", "PyTorchJob"))
    assert code == 415 and status["message"].startswith(unknown)
    # not the protobuf magic number
    code, status = post("/api/v1/namespaces/default/configmaps", "application/vnd.kubernetes.protobuf", b"{}")
    assert code == 400 and status["kind"] == "Status"


def test_auth_can_i_answers_from_the_rbac(kubectl, simcluster):
    """`kubectl auth can-i` sends its SelfSubjectAccessReview (and `--list`'s SelfSubjectRulesReview)
    as protobuf: refused as 'an unknown format' before, so a demo user could not ask it. Alice may
    act in team-a only; the admin anywhere."""
    def can(*args: str, context: str | None = "ranks-sim-alice") -> tuple[int, str]:
        r = kubectl.run("auth", "can-i", *args, check=False, context=context)
        assert "unknown format" not in r.stderr, r.stderr
        return r.returncode, r.stdout.strip()

    assert can("get", "pods", "-n", "runai-team-a") == (0, "yes")
    assert can("create", "pods/exec", "-n", "runai-team-a") == (0, "yes")
    assert can("get", "pods", "-n", "runai-team-b") == (1, "no")
    assert can("list", "pods", "-A") == (1, "no")
    assert can("list", "pods", "-A", context=None) == (0, "yes")
    rules = kubectl.run("auth", "can-i", "--list", "-n", "runai-team-b", context="ranks-sim-alice").stdout
    assert "selfsubjectaccessreviews.authorization.k8s.io" in rules and "*.*" not in rules, rules
