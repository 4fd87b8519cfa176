"""Ephemeral containers in simcluster (#28): `kubectl debug POD --image=... --target=C` from a real
kubectl patches `pods/ephemeralcontainers`; the pod's spec and status show it; it runs in the pod,
sees the target's processes, and exec reaches it by name; one that exists may not be changed; the
subresource is RBAC's `patch` on `pods/ephemeralcontainers`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import unique_sleep, wait_for

pytestmark = pytest.mark.simcluster(components=("scheduler", "kubelet", "exec"))
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: target, namespace: default}
spec:
  containers:
  - name: main
    image: registry.local/train:1
    command: ["sh", "-c", "exec sleep 600.271828"]
    env: [{name: PATH, value: "/usr/bin:/bin"}]
"""


def pod(kubectl: Any) -> dict[str, Any]:
    return json.loads(kubectl.run("get", "pod", "target", "-o", "json").stdout)


def state_of(kubectl: Any, name: str) -> dict[str, Any]:
    for s in pod(kubectl).get("status", {}).get("ephemeralContainerStatuses") or ():
        if s["name"] == name:
            return dict(s["state"])
    return {}


@pytest.fixture
def target(simcluster: Any, kubectl: Any) -> Any:
    from simcluster.scenarios.nodes import gpu_nodes

    for node in gpu_nodes(1, 1):
        simcluster.call(simcluster.sim.apply, node)
    kubectl.run("apply", "-f", "-", input=POD)
    wait_for(lambda: pod(kubectl).get("status", {}).get("phase") == "Running", 60, "the target pod running")
    return kubectl


def test_kubectl_debug_target_runs_beside_the_target(target: Any) -> None:
    kubectl = target
    mine = unique_sleep(120)  # (what the debug container runs: ended by this marker, no other test's sleep)
    r = kubectl.run("debug", "target", "--image=registry.local/debug:1", "--target=main", "-c", "dbg",
                    "--", *mine.split())
    assert "Targeting container \"main\"" in r.stderr + r.stdout, (r.stdout, r.stderr)
    spec = pod(kubectl)["spec"]["ephemeralContainers"]
    assert [(c["name"], c["image"], c["targetContainerName"]) for c in spec] == [
        ("dbg", "registry.local/debug:1", "main")]
    wait_for(lambda: "running" in state_of(kubectl, "dbg"), 30, "the ephemeral container running")
    # it sees the target's processes, and py-spy is on its PATH (the target's is not: its own env)
    seen = kubectl.run("exec", "target", "-c", "dbg", "--", "sh", "-c",
                       "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\000' ' '; echo; command -v py-spy").stdout
    assert "sleep 600.271828" in seen and "py-spy" in seen.splitlines()[-1], seen
    kubectl.run("exec", "target", "-c", "dbg", "--", "sh", "-c", f"pkill -f '{mine}' || kill 0", check=False)
    done = wait_for(lambda: state_of(kubectl, "dbg").get("terminated"), 30, "the ephemeral container ending")
    assert isinstance(done.get("exitCode"), int)
    # the target itself runs on, its status as it was
    assert pod(kubectl)["status"]["containerStatuses"][0]["state"].get("running")


def test_an_existing_ephemeral_container_may_not_change(target: Any, k8s: Any) -> None:
    client, api = k8s
    core = client.CoreV1Api(api)
    body = {"spec": {"ephemeralContainers": [{"name": "one", "image": "busybox", "command": ["sleep", "60"],
                                              "targetContainerName": "main"}]}}
    core.patch_namespaced_pod_ephemeralcontainers("target", "default", body)
    changed = {"spec": {"ephemeralContainers": [{"name": "one", "image": "other", "command": ["sleep", "60"],
                                                 "targetContainerName": "main"}]}}
    with pytest.raises(client.ApiException) as info:
        core.patch_namespaced_pod_ephemeralcontainers("target", "default", changed)
    assert info.value.status == 422 and 'existing ephemeral containers \\"one\\" may not be changed' in str(
        info.value.body)
    bad = {"spec": {"ephemeralContainers": [*body["spec"]["ephemeralContainers"],
                                            {"name": "two", "image": "busybox", "targetContainerName": "nope"}]}}
    with pytest.raises(client.ApiException) as info:
        core.patch_namespaced_pod_ephemeralcontainers("target", "default", bad)
    assert info.value.status == 422 and "targetContainerName: Not found" in str(info.value.body)


def test_without_the_verb_it_is_forbidden(target: Any, simcluster: Any, tmp_path: Path, kubectl: Any) -> None:
    simcluster.call(simcluster.sim.add_namespace_reader, "viewer", ["default"])
    kc = simcluster.call(simcluster.sim.write_kubeconfig, tmp_path / "viewer.yaml", "viewer")
    from tests.conftest import Kubectl

    viewer = Kubectl(kubectl.binary, kc)
    r = viewer.run("debug", "target", "--image=busybox", "--target=main", "--", "sleep", "5", check=False)
    assert r.returncode != 0 and "forbidden" in r.stderr and "pods/ephemeralcontainers" in r.stderr, r.stderr
