"""Ephemeral containers in simcluster (#28): `kubectl debug POD --image=... --target=C` from a real
kubectl patches `pods/ephemeralcontainers`; the pod's spec and status show it; it runs in the pod,
sees the target's processes, and exec reaches it by name; one that exists may not be changed; the
subresource is RBAC's `patch` on `pods/ephemeralcontainers`."""

from __future__ import annotations

import json
import os
import shlex
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


def test_kubectl_debug_i_attaches_to_the_debug_container(target: Any) -> None:
    """`kubectl debug -i` (stdin, no terminal): kubectl attaches (`pods/attach`) to the container's
    stdin and output; what it types runs beside the target, and the session ends with the shell."""
    kubectl = target
    r = kubectl.run("debug", "-i", "target", "--image=registry.local/debug:1", "--target=main", "-c", "dbgi",
                    "--", "sh", input="echo attached-$((6*7)); ps -eo args | grep -c '[s]leep 600.271828'; exit 3\n",
                    timeout=120)
    assert "attached-42\n1\n" in r.stdout, (r.stdout, r.stderr)
    spec = pod(kubectl)["spec"]["ephemeralContainers"]
    assert [(c["name"], c.get("stdin"), c.get("tty")) for c in spec] == [("dbgi", True, None)], spec
    done = wait_for(lambda: state_of(kubectl, "dbgi").get("terminated"), 30, "the debug shell ending")
    assert done["exitCode"] == 3, done


def test_attach_to_a_container_without_stdin_is_one_line(target: Any) -> None:
    r = target.run("attach", "target", "-c", "main", "-i", check=False, timeout=60)
    assert r.returncode == 1 and "has no stdin to attach to (simcluster attaches" in r.stderr, r.stderr


def test_kubectl_debug_it_gives_a_terminal_in_the_debug_container(target: Any, tmp_path: Path) -> None:
    """`kubectl debug -it` in a real terminal: the debug container's shell on a terminal of its own,
    sized as the client's window, beside the target's processes; `exit` ends the session."""
    from tests.tmux_driver import Tmux

    kubectl = target
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["HOME"] = str(kubectl.kubeconfig.parent)
    tmux = Tmux(env, 100, 30, name="ranks-kdebug")
    line = (f"{shlex.quote(str(kubectl.binary))} --kubeconfig {shlex.quote(str(kubectl.kubeconfig))} debug -it "
            "target --image=registry.local/debug:1 --target=main -c dbgt -- sh; echo kubectl-ended-$?; sleep 600")
    tmux.start(line, tmp_path)
    try:
        # (the shell's first prompt was written before kubectl attached, as on a real cluster)
        tmux.wait_for("If you don't see a command prompt, try pressing enter.", timeout=60, why="kubectl attaching")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: s.rstrip().endswith(("#", "$")), timeout=30, why="the debug shell's prompt")
        tmux.type("tty; stty size; ps -eo args | grep -c '[s]leep 600.271828'; echo seen-$((6*7))\r")
        shown = tmux.wait_for("seen-42", timeout=30)
        assert "/dev/pts/" in shown and "\n30 100\n1\n" in shown, shown
        tmux.type("exit\r")
        tmux.wait_for("kubectl-ended-", timeout=60, why="kubectl ending with the shell")
    finally:
        tmux.kill()
    spec = pod(kubectl)["spec"]["ephemeralContainers"]
    assert [(c["name"], c.get("stdin"), c.get("tty")) for c in spec] == [("dbgt", True, True)], spec
    wait_for(lambda: state_of(kubectl, "dbgt").get("terminated"), 30, "the debug shell ending")
