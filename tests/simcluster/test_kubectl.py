"""A real kubectl v1.35 against simcluster: discovery, get, apply, delete, watch, identities."""

from __future__ import annotations

import json
import time

import pytest

pytestmark = pytest.mark.simcluster(scenario="demo")

PYTORCHJOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: mnist
  namespace: runai-team-a
  labels: {project: team-a}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
          - name: pytorch
            image: pytorch
            command: ["python", "{script}"]
"""

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: research
  labels: {{app: demo, tier: {tier}}}
spec:
  containers:
  - name: main
    image: busybox
    command: ["sleep", "infinity"]
    env: [{{name: A, value: "{value}"}}]
"""


def test_version_and_api_resources(kubectl):
    out = kubectl.run("version", "-o", "json").stdout
    data = json.loads(out)
    assert data["clientVersion"]["gitVersion"].startswith("v1.35")
    assert data["serverVersion"]["minor"] == "35"
    res = kubectl.run("api-resources").stdout
    for needle in ("pods", "pytorchjobs", "mpijobs", "kubeflow.org/v2beta1", "customresourcedefinitions"):
        assert needle in res
    assert "error" not in kubectl.run("api-resources").stderr.lower()


def test_get_nodes_and_wide_pods(kubectl):
    out = kubectl.run("get", "nodes").stdout.splitlines()
    assert out[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert len(out) == 9 and all(" Ready " in line for line in out[1:])
    kubectl.run("apply", "-f", "-", input=POD.format(name="w1", tier="a", value="1"))
    wide = kubectl.run("get", "pods", "-A", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[:6] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert "NODE" in wide[0] and "IP" in wide[0]
    assert any(line.split()[:2] == ["research", "w1"] for line in wide[1:])


def test_selectors(kubectl):
    for i in range(4):
        kubectl.run("apply", "-f", "-", input=POD.format(name=f"s{i}", tier="gpu" if i % 2 else "cpu", value=i))
    out = kubectl.run("get", "pods", "-n", "research", "-l", "tier=gpu", "-o", "name").stdout.split()
    assert out == ["pod/s1", "pod/s3"]
    out = kubectl.run("get", "pods", "-n", "research", "-l", "tier in (cpu),app", "-o", "name").stdout.split()
    assert out == ["pod/s0", "pod/s2"]
    out = kubectl.run("get", "pods", "-A", "--field-selector", "metadata.name=s2", "-o", "name").stdout.split()
    assert out == ["pod/s2"]
    bad = kubectl.run("get", "pods", "-A", "--field-selector", "spec.nope=1", check=False)
    assert bad.returncode != 0 and "field label not supported" in bad.stderr


def test_apply_create_update_delete_custom_resource(kubectl):
    assert "created" in kubectl.run("apply", "-f", "-", input=PYTORCHJOB.replace("{script}", "a.py")).stdout
    res = kubectl.run("apply", "-f", "-", input=PYTORCHJOB.replace("{script}", "b.py"))
    assert "configured" in res.stdout
    assert "warning" not in res.stderr.lower()
    cmd = kubectl.run("get", "pytorchjob", "mnist", "-n", "runai-team-a", "-o",
                      "jsonpath={.spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command}").stdout
    assert json.loads(cmd) == ["python", "b.py"]
    listing = kubectl.run("get", "pytorchjobs,mpijobs", "-A").stdout
    assert "pytorchjob.kubeflow.org/mnist" in listing
    assert "unchanged" in kubectl.run("apply", "-f", "-", input=PYTORCHJOB.replace("{script}", "b.py")).stdout
    out = kubectl.run("delete", "pytorchjob", "mnist", "-n", "runai-team-a").stdout
    assert "deleted" in out
    assert "No resources found" in kubectl.run("get", "pytorchjobs", "-A").stderr


def test_apply_updates_builtin_with_strategic_merge(kubectl):
    kubectl.run("apply", "-f", "-", input=POD.format(name="sm", tier="a", value="1"))
    kubectl.run("apply", "-f", "-", input=POD.format(name="sm", tier="b", value="2"))
    pod = json.loads(kubectl.run("get", "pod", "sm", "-n", "research", "-o", "json").stdout)
    assert pod["metadata"]["labels"]["tier"] == "b"
    assert pod["spec"]["containers"][0]["env"] == [{"name": "A", "value": "2"}]
    assert "kubectl.kubernetes.io/last-applied-configuration" in pod["metadata"]["annotations"]
    kubectl.run("delete", "-f", "-", input=POD.format(name="sm", tier="b", value="2"))
    assert kubectl.run("get", "pod", "sm", "-n", "research", check=False).returncode == 1


def test_watch_receives_event(kubectl):
    proc = kubectl.popen("get", "pods", "-n", "research", "-w", "--request-timeout=0")
    try:
        time.sleep(1.0)
        kubectl.run("apply", "-f", "-", input=POD.format(name="watched", tier="a", value="1"))
        deadline = time.monotonic() + 15
        lines: list[str] = []
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "watched" in line:
                break
        assert any(line.split()[0] == "watched" for line in lines), lines
    finally:
        proc.kill()
        proc.wait()


def test_chunk_size_paginates(kubectl):
    for i in range(7):
        kubectl.run("apply", "-f", "-", input=POD.format(name=f"c{i}", tier="a", value=i))
    res = kubectl.run("get", "pods", "-n", "research", "--chunk-size=3", "-v=6", "-o", "name")
    assert res.stdout.split() == [f"pod/c{i}" for i in range(7)]
    gets = [ln for ln in res.stderr.splitlines() if "/api/v1/namespaces/research/pods?" in ln]
    assert len(gets) == 3 and sum("continue=" in ln for ln in gets) == 2


def test_impersonation_and_forbidden(kubectl):
    ok = kubectl.run("get", "pods", "-n", "runai-team-a", "--as=alice")
    assert "No resources found" in ok.stderr
    denied = kubectl.run("get", "pods", "-n", "research", "--as=alice", check=False)
    assert denied.returncode == 1
    assert denied.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" '
        'in API group "" in the namespace "research"'
    )
    limited = kubectl.run("get", "nodes", context="ranks-sim-alice", check=False)
    assert limited.returncode == 1
    assert 'User "alice" cannot list resource "nodes" in API group "" at the cluster scope' in limited.stderr
    assert "No resources found" in kubectl.run("get", "pods", "-n", "runai-team-a", context="ranks-sim-alice").stderr


def test_invalid_name_and_unknown_kind(kubectl):
    bad = kubectl.run("apply", "-f", "-", input=POD.format(name="Bad_Name", tier="a", value=1), check=False)
    assert bad.returncode == 1 and "Invalid value" in bad.stderr and "RFC 1123" in bad.stderr
    unknown = kubectl.run("get", "frobnicators", check=False)
    assert unknown.returncode == 1 and 'the server doesn\'t have a resource type "frobnicators"' in unknown.stderr
