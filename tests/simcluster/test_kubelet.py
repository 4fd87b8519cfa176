"""The kubelet component: real processes for bound pods, status as the kubelet writes it, cleanup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import watch as kwatch
from kubernetes.client.rest import ApiException

from simcluster.cluster import sim_in_thread
from tests.waiting import wait_for

pytestmark = pytest.mark.simcluster(components=("kubelet",))

NODE = "node-a"
ROOT = Path(__file__).resolve().parents[2]


def pod(name: str, command: list[str], *, args: list[str] | None = None, restart: str = "Never",
        node: str = NODE, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "command": command}
    if args is not None:
        container["args"] = args
    container.update(extra.pop("container", {}))
    spec: dict[str, Any] = {"nodeName": node, "restartPolicy": restart, "containers": [container]}
    spec.update(extra.pop("spec", {}))
    meta: dict[str, Any] = {"name": name}
    meta.update(extra.pop("metadata", {}))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] != b"Z"


@pytest.fixture
def core(k8s):
    client, api = k8s
    core = client.CoreV1Api(api)
    # a bare node, as a test would apply it: the kubelet adds Ready and an InternalIP
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    return core


def phase(core, name: str) -> str | None:
    return core.read_namespaced_pod(name, "default").status.phase


def cstatus(core, name: str, container: str = "main"):
    st = core.read_namespaced_pod(name, "default").status
    for c in (st.container_statuses or []) + (st.init_container_statuses or []):
        if c.name == container:
            return c
    return None


def logs(core, name: str, **kw: Any) -> str:
    return core.read_namespaced_pod_log(name, "default", **kw)


def runtime_attr(simcluster, name: str, fn: Callable[[Any], Any]) -> Any:
    def get() -> Any:
        rt = simcluster.sim.kubelet.runtime("default", name)
        return None if rt is None else fn(rt)

    return simcluster.call(get)


def test_node_gets_ready_and_address(core):
    node = wait_for(lambda: (n := core.read_node(NODE)).status and n.status.addresses and n)
    ready = [c for c in node.status.conditions if c.type == "Ready"]
    assert ready and ready[0].status == "True"
    assert next(a.type for a in node.status.addresses) == "InternalIP"


def test_env_downward_api_and_expansion(core, simcluster):
    core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"},
                                                  "data": {"greeting": "hello", "K1": "v1", "bad key": "x"}})
    core.create_namespaced_secret("default", {"metadata": {"name": "sec"}, "stringData": {"token": "s3cret"}})
    env = [
        {"name": "MY_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "MY_NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "MY_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "MY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "MY_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "MY_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        {"name": "MY_TEAM", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['team']"}}},
        {"name": "MY_NOTE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['note']"}}},
        {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
        {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}}},
        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "token"}}},
        {"name": "MISSING_OK", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "x", "optional": True}}},
        {"name": "COMBINED", "value": "$(GREETING)-$(MY_NAME)"},
        {"name": "ESCAPED", "value": "$$(GREETING)"},
        {"name": "UNKNOWN", "value": "$(NOT_DEFINED)x"},
        {"name": "FORWARD", "value": "$(LATER)"},
        {"name": "LATER", "value": "late"},
        {"name": "FROM_PREFIX", "value": "$(CM_K1)"},
    ]
    body = pod("envpod", ["sh", "-c", "env"],
               metadata={"labels": {"team": "nlp"}, "annotations": {"note": "n1"}},
               container={"env": env, "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CM_"}],
                          "resources": {"limits": {"cpu": "1500m", "memory": "256Mi"},
                                        "requests": {"cpu": "1", "memory": "128Mi"}}},
               spec={"hostname": "envhost"})
    core.create_namespaced_pod("default", body)
    wait_for(lambda: phase(core, "envpod") == "Succeeded")
    got = dict(line.split("=", 1) for line in logs(core, "envpod").splitlines() if "=" in line)
    p = core.read_namespaced_pod("envpod", "default")
    root = runtime_attr(simcluster, "envpod", lambda rt: str(rt.root))
    assert got["MY_NAME"] == "envpod" and got["MY_NS"] == "default"
    assert got["MY_UID"] == p.metadata.uid
    assert got["MY_IP"] == p.status.pod_ip and got["MY_IP"].startswith("127.")  # its own loopback address
    assert [i.ip for i in p.status.pod_ips] == [p.status.pod_ip]
    assert got["MY_NODE"] == NODE
    assert got["MY_HOST_IP"] == p.status.host_ip and p.status.host_ip
    assert got["MY_TEAM"] == "nlp" and got["MY_NOTE"] == "n1"
    assert got["CPU_LIMIT"] == "2"  # ceil(1.5)
    assert got["MEM_MI"] == "128"
    assert got["GREETING"] == "hello" and got["TOKEN"] == "s3cret"
    assert "MISSING_OK" not in got
    assert got["COMBINED"] == "hello-envpod"
    assert got["ESCAPED"] == "$(GREETING)"
    assert got["UNKNOWN"] == "$(NOT_DEFINED)x"
    assert got["FORWARD"] == "$(LATER)"  # only earlier variables expand
    assert got["CM_K1"] == "v1" and got["CM_greeting"] == "hello" and "CM_bad key" not in got
    assert got["FROM_PREFIX"] == "v1"
    home, workdir = runtime_attr(simcluster, "envpod", lambda rt: (rt.home, rt.working_dir("main")))
    if runtime_attr(simcluster, "envpod", lambda rt: rt.holder is None):  # no pod namespaces: the host's view
        assert home == root and workdir == f"{root}/workspace"
        assert got["PATH"] == f"{simcluster.sim.workdir / 'bin'}:{os.environ['PATH']}"  # the launchers first
    else:
        assert home == "/root" and workdir == "/workspace"
        assert got["PATH"] == simcluster.sim.kubelet.pod_view.path  # an image's (the launchers in /usr/local/bin)
    assert got["HOME"] == home and got["PWD"] == workdir
    assert got["HOSTNAME"] == "envhost"
    assert got["KUBERNETES_SERVICE_HOST"] == simcluster.sim.host
    assert got["KUBERNETES_SERVICE_PORT"] == str(simcluster.sim.port)
    # the runtime API gives the same environment
    env_api = runtime_attr(simcluster, "envpod", lambda rt: rt.container_env("main"))
    assert env_api["COMBINED"] == "hello-envpod" and env_api["MY_IP"] == got["MY_IP"]


def test_command_and_args_expansion(core):
    body = pod("argpod", ["printf", "%s|%s|%s|%s\\n"], args=["$(A)", "$$(A)", "$(NOPE)", "x$(A)y"],
               container={"env": [{"name": "A", "value": "alpha"}]})
    core.create_namespaced_pod("default", body)
    wait_for(lambda: phase(core, "argpod") == "Succeeded")
    assert logs(core, "argpod") == "alpha|$(A)|$(NOPE)|xalphay\n"


def test_configmap_secret_and_emptydir_volumes(core, simcluster):
    core.create_namespaced_config_map("default", {"metadata": {"name": "job-config"},
                                                  "data": {"hostfile": "job-worker-0.job.default.svc slots=2\n",
                                                           "discover_hosts.sh": "#!/bin/sh\necho job-worker-0\n"}})
    core.create_namespaced_secret("default", {"metadata": {"name": "job-ssh"}, "stringData": {"id": "KEY"}})
    script = ('cat "$OMPI_MCA_orte_default_hostfile"; stat -c %a "$OMPI_MCA_orte_default_hostfile"; '
              'stat -c %a "$DISCOVER"; "$DISCOVER"; cat "$SSH_DIR/id_rsa"; echo; echo shared > "$SCRATCH/f"; '
              'cat "$SCRATCH2/f"')
    body = pod("volpod", ["sh", "-c", script],
               container={
                   "env": [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                           {"name": "DISCOVER", "value": "/etc/mpi/discover_hosts.sh"},
                           {"name": "SSH_DIR", "value": "/root/.ssh"},
                           {"name": "SCRATCH", "value": "/scratch"},
                           {"name": "SCRATCH2", "value": "/other/scratch"},
                           {"name": "NOT_A_MOUNT", "value": "/usr/bin/env"}],
                   "volumeMounts": [{"name": "mpi", "mountPath": "/etc/mpi"},
                                    {"name": "ssh", "mountPath": "/root/.ssh"},
                                    {"name": "scratch", "mountPath": "/scratch"},
                                    {"name": "scratch", "mountPath": "/other/scratch"}]},
               spec={"volumes": [
                   {"name": "mpi", "configMap": {"name": "job-config", "items": [
                       {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                       {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555}]}},
                   {"name": "ssh", "secret": {"secretName": "job-ssh", "defaultMode": 0o600,
                                              "items": [{"key": "id", "path": "id_rsa"}]}},
                   {"name": "scratch", "emptyDir": {}}]})
    core.create_namespaced_pod("default", body)
    wait_for(lambda: phase(core, "volpod") in ("Succeeded", "Failed"))
    out = logs(core, "volpod").splitlines()
    assert out == ["job-worker-0.job.default.svc slots=2", "444", "555", "job-worker-0", "KEY", "shared"], out
    env, hostfile = runtime_attr(simcluster, "volpod", lambda rt: (
        rt.container_env("main"), rt.resolve("/etc/mpi/hostfile").read_text()))
    assert hostfile.startswith("job-worker-0")
    root, namespaced = runtime_attr(simcluster, "volpod", lambda rt: (str(rt.root), rt.holder is not None))
    # in its own mount namespace the pod sees the volume at its path; else the path is rewritten
    assert env["OMPI_MCA_orte_default_hostfile"] == ("" if namespaced else root) + "/etc/mpi/hostfile"
    assert env["NOT_A_MOUNT"] == "/usr/bin/env"
    assert phase(core, "volpod") == "Succeeded"


def test_phases_states_and_conditions(core):
    w = kwatch.Watch()
    created = core.create_namespaced_pod("default", pod("ok", ["sh", "-c", "sleep 0.5; exit 0"]))
    core.create_namespaced_pod("default", pod("bad", ["sh", "-c", "exit 3"]))
    seen_phases: list[str] = [created.status.phase]
    seen_states: list[str] = []
    running_status = None
    for ev in w.stream(core.list_namespaced_pod, "default", field_selector="metadata.name=ok", timeout_seconds=15,
                       resource_version=created.metadata.resource_version):
        st = ev["object"].status
        if st.phase and (not seen_phases or seen_phases[-1] != st.phase):
            seen_phases.append(st.phase)
        for c in st.container_statuses or []:
            kind = "waiting:" + c.state.waiting.reason if c.state.waiting else (
                "running" if c.state.running else "terminated")
            if not seen_states or seen_states[-1] != kind:
                seen_states.append(kind)
            if c.state.running:
                running_status = st
        if st.phase == "Succeeded":
            w.stop()
    assert seen_phases == ["Pending", "Running", "Succeeded"], seen_phases
    assert seen_states == ["waiting:ContainerCreating", "running", "terminated"], seen_states
    conds = {c.type: c.status for c in running_status.conditions}
    assert conds == {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True",
                     "ContainersReady": "True", "PodScheduled": "True"}
    assert running_status.container_statuses[0].ready and running_status.container_statuses[0].started
    done = core.read_namespaced_pod("ok", "default").status
    term = done.container_statuses[0].state.terminated
    assert term.exit_code == 0 and term.reason == "Completed" and term.started_at and term.finished_at
    assert term.container_id.startswith("containerd://") and len(term.container_id) == len("containerd://") + 64
    assert done.container_statuses[0].ready is False
    cond = {c.type: c for c in done.conditions}
    assert cond["Ready"].status == "False" and cond["Ready"].reason == "PodCompleted"
    assert cond["PodReadyToStartContainers"].status == "False"
    wait_for(lambda: phase(core, "bad") == "Failed")
    bad = cstatus(core, "bad")
    assert bad.state.terminated.exit_code == 3 and bad.state.terminated.reason == "Error"
    assert bad.restart_count == 0


def test_restart_crashloop_backoff(core, simcluster):
    simcluster.call(setattr, simcluster.sim.kubelet, "backoff_base", 0.4)
    core.create_namespaced_pod("default", pod("crash", ["sh", "-c", "echo boom; exit 2"], restart="Always"))
    uid = core.read_namespaced_pod("crash", "default").metadata.uid
    waiting = wait_for(lambda: (c := cstatus(core, "crash")) and c.state.waiting
                       and c.state.waiting.reason == "CrashLoopBackOff" and c, timeout=10, interval=0.02)
    assert waiting.state.waiting.message in (
        f"back-off 400ms restarting failed container=main pod=crash_default({uid})",
        f"back-off 800ms restarting failed container=main pod=crash_default({uid})",
    )
    assert waiting.last_state.terminated.exit_code == 2 and waiting.last_state.terminated.reason == "Error"
    assert waiting.ready is False
    c = wait_for(lambda: (c := cstatus(core, "crash")) and c.restart_count >= 3 and c, timeout=15)
    assert phase(core, "crash") == "Running"
    assert c.last_state.terminated.exit_code == 2
    reasons = {e.reason for e in core.list_namespaced_event("default").items
               if e.involved_object.name == "crash"}
    assert {"Created", "Started", "BackOff"} <= reasons


def test_onfailure_restarts_until_success(core):
    script = 'if [ -f marker ]; then echo second; exit 0; fi; touch marker; echo first; exit 7'
    core.create_namespaced_pod("default", pod("retry", ["sh", "-c", script], restart="OnFailure"))
    wait_for(lambda: phase(core, "retry") == "Succeeded")
    c = cstatus(core, "retry")
    assert c.restart_count == 1
    assert c.state.terminated.exit_code == 0 and c.state.terminated.reason == "Completed"
    assert c.last_state.terminated.exit_code == 7
    assert logs(core, "retry") == "second\n"
    assert logs(core, "retry", previous=True) == "first\n"


def test_oom_annotation(core):
    body = pod("oom", ["sleep", "30"], metadata={"annotations": {"simcluster.ranks/oom-after-seconds": "0.3"}})
    core.create_namespaced_pod("default", body)
    wait_for(lambda: phase(core, "oom") == "Failed")
    t = cstatus(core, "oom").state.terminated
    assert (t.exit_code, t.reason) == (137, "OOMKilled")


def test_init_containers_run_first_in_order(core):
    body = pod("init", ["sh", "-c", "cat order"], spec={"initContainers": [
        {"name": "first", "image": "busybox", "command": ["sh", "-c", "echo one >> order"]},
        {"name": "second", "image": "busybox", "command": ["sh", "-c", "sleep 0.3; echo two >> order"]},
    ]})
    core.create_namespaced_pod("default", body)
    p = wait_for(lambda: (p := core.read_namespaced_pod("init", "default")).status.init_container_statuses and p)
    main = p.status.container_statuses[0]
    assert main.state.waiting.reason == "PodInitializing"
    assert p.status.phase == "Pending"
    wait_for(lambda: phase(core, "init") == "Succeeded")
    assert logs(core, "init") == "one\ntwo\n"
    st = core.read_namespaced_pod("init", "default").status
    assert [c.state.terminated.reason for c in st.init_container_statuses] == ["Completed", "Completed"]
    assert [c.ready for c in st.init_container_statuses] == [True, True]
    assert {c.type: c.status for c in st.conditions}["Initialized"] == "True"


def test_failed_init_container_fails_pod(core):
    body = pod("initfail", ["echo", "never"], spec={"initContainers": [
        {"name": "setup", "image": "busybox", "command": ["sh", "-c", "exit 4"]}]})
    core.create_namespaced_pod("default", body)
    wait_for(lambda: phase(core, "initfail") == "Failed")
    st = core.read_namespaced_pod("initfail", "default").status
    assert st.init_container_statuses[0].state.terminated.exit_code == 4
    assert st.container_statuses[0].state.waiting.reason == "PodInitializing"
    init = {c.type: c for c in st.conditions}["Initialized"]
    assert init.status == "False" and init.reason == "ContainersNotInitialized"
    assert init.message == "containers with incomplete status: [setup]"


def test_container_without_command_and_missing_binary(core):
    body = pod("nocmd", [])
    del body["spec"]["containers"][0]["command"]
    core.create_namespaced_pod("default", body)
    w = wait_for(lambda: (c := cstatus(core, "nocmd")) and c.state.waiting
                 and c.state.waiting.reason == "CreateContainerError" and c.state.waiting)
    assert "no command specified" in w.message
    assert phase(core, "nocmd") == "Pending"
    core.create_namespaced_pod("default", pod("nobin", ["/definitely/not/here"]))
    wait_for(lambda: phase(core, "nobin") == "Failed")
    t = cstatus(core, "nobin").state.terminated
    assert t.exit_code == 128 and t.reason == "StartError"
    assert "/definitely/not/here" in t.message


def test_malformed_pods_do_not_break_the_kubelet(core, simcluster):
    # the official client refuses such bodies, a raw request would not: put them in the store
    bad_cmd = pod("badcmd", [])
    bad_cmd["spec"]["containers"][0]["command"] = "sleep 10"
    bad_env = pod("badenv", ["true"], container={"env": [{"name": "X", "valueFrom": "nope"}, "junk"]})
    bad_vol = pod("badvol", ["true"], spec={"volumes": [{"name": "v", "configMap": "oops"}, 7]},
                  container={"volumeMounts": [{"name": "v", "mountPath": "/v"}, "junk"]})
    for body in (bad_cmd, bad_env, bad_vol):
        simcluster.call(simcluster.sim.apply, body)

    def waiting(name: str) -> dict[str, Any]:  # read from the store: the client cannot parse these pods
        def get() -> dict[str, Any]:
            st = simcluster.sim.store.find(("", "pods"), "default", name)
            cs = (st.obj.get("status") or {}).get("containerStatuses") or [{}]
            return (cs[0].get("state") or {}).get("waiting") or {}

        return simcluster.call(get)

    for name in ("badcmd", "badenv"):
        w = wait_for(lambda name=name: (w := waiting(name)).get("reason") == "CreateContainerConfigError" and w)
        assert w["message"]
    core.create_namespaced_pod("default", pod("fine", ["true"]))
    wait_for(lambda: phase(core, "fine") == "Succeeded")
    assert waiting("badvol")["reason"] == "ContainerCreating"
    events = [e for e in core.list_namespaced_event("default").items if e.involved_object.name == "badvol"]
    assert any(e.reason == "FailedMount" for e in events)


def test_missing_configmap_keeps_container_creating(core):
    body = pod("nocm", ["true"], container={"volumeMounts": [{"name": "v", "mountPath": "/cfg"}]},
               spec={"volumes": [{"name": "v", "configMap": {"name": "absent"}}]})
    core.create_namespaced_pod("default", body)
    time.sleep(0.5)
    c = cstatus(core, "nocm")
    assert c.state.waiting.reason == "ContainerCreating"
    assert phase(core, "nocm") == "Pending"
    events = [e for e in core.list_namespaced_event("default").items if e.involved_object.name == "nocm"]
    assert any(e.reason == "FailedMount" and 'configmap "absent" not found' in e.message for e in events)
    core.create_namespaced_config_map("default", {"metadata": {"name": "absent"}, "data": {"k": "v"}})
    wait_for(lambda: phase(core, "nocm") == "Succeeded", timeout=8)


def test_readiness_probe_exec(core):
    body = pod("probe", ["sh", "-c", "sleep 0.6; touch ready; sleep 30"], container={
        "readinessProbe": {"exec": {"command": ["test", "-f", "ready"]}, "periodSeconds": 1}})
    core.create_namespaced_pod("default", body)
    c = wait_for(lambda: (c := cstatus(core, "probe")) and c.state.running and c)
    assert c.ready is False
    wait_for(lambda: cstatus(core, "probe").ready, timeout=6)
    cond = {c.type: c.status for c in core.read_namespaced_pod("probe", "default").status.conditions}
    assert cond["Ready"] == "True"


def test_runtime_api(core, simcluster):
    core.create_namespaced_pod("default", pod("api", ["sh", "-c", "sleep 300 & sleep 301"],
                                              container={"ports": [{"containerPort": 18080}]},
                                              spec={"terminationGracePeriodSeconds": 1}))
    wait_for(lambda: phase(core, "api") == "Running")
    info = wait_for(lambda: runtime_attr(simcluster, "api", lambda rt: len(rt.pids()) >= 3 and {
        "names": rt.container_names(), "running": rt.is_running("main"), "pids": rt.pids(),
        "ip": rt.pod_ip, "node": rt.node, "uid": rt.uid, "root": rt.root}))
    assert info["names"] == ["main"] and info["running"] and info["node"] == NODE
    p = core.read_namespaced_pod("api", "default")
    assert info["ip"] == p.status.pod_ip and info["uid"] == p.metadata.uid
    assert Path(info["root"]).is_dir()
    # an exec'd process registered with the runtime dies with the pod
    child = subprocess.Popen(["sleep", "302"], start_new_session=True)
    simcluster.call(lambda: simcluster.sim.kubelet.runtime("default", "api").register_child(child.pid))
    assert child.pid in runtime_attr(simcluster, "api", lambda rt: rt.pids())
    assert simcluster.call(lambda: simcluster.sim.kubelet.runtime("default", "nope")) is None
    # the proxies find the declared port where a server of the pod on 0.0.0.0 or localhost is: the
    # pod's own address where pods have their own 0.0.0.0 (`podnet`), else the host's loopback
    where = info["ip"] if simcluster.sim.kubelet.podnet is not None else "127.0.0.1"
    assert simcluster.call(lambda: simcluster.sim.portmap.lookup("default", "api", 18080)) == (where, 18080)
    core.delete_namespaced_pod("api", "default")
    child.wait(10)
    for pid in info["pids"]:
        wait_for(lambda pid=pid: not alive(pid), timeout=10)
    wait_for(lambda: not Path(info["root"]).exists(), timeout=10)


def test_kubectl_delete_is_graceful_and_quick(core, kubectl, simcluster):
    # PID 1 handles SIGTERM: it stops at once, long before the default 30 s grace period
    core.create_namespaced_pod("default", pod("victim", ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"],
                                              spec={"terminationGracePeriodSeconds": 3600}))
    wait_for(lambda: phase(core, "victim") == "Running")
    pids = runtime_attr(simcluster, "victim", lambda rt: rt.pids())
    assert pids and all(alive(p) for p in pids)
    kubectl.run("delete", "pod", "victim", timeout=120)  # (it waits for the pod to go: not the hour's grace)
    assert not any(alive(p) for p in pids)
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("victim", "default")
    assert exc.value.status == 404


def test_sigterm_goes_to_pid_1_which_ignores_it_without_a_handler(core, simcluster):
    """As a container runtime does: SIGTERM to the container's first process only, and a PID 1
    without a SIGTERM handler ignores it, so a shell script runs on (and writes its last lines)
    until it ends or the grace period does."""
    core.create_namespaced_pod("default", pod("pid1", ["sh", "-c", "echo start; sleep 1.5; echo end"],
                                              spec={"terminationGracePeriodSeconds": 3600}))
    wait_for(lambda: phase(core, "pid1") == "Running")
    wait_for(lambda: "start" in core.read_namespaced_pod_log("pid1", "default"))
    resp = core.read_namespaced_pod_log("pid1", "default", follow=True, _preload_content=False)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.extend(resp.stream(64)), daemon=True)
    reader.start()
    t0 = time.monotonic()
    core.delete_namespaced_pod("pid1", "default")
    reader.join(60)
    assert b"".join(got).decode().split() == ["start", "end"]  # it ran to its end after the delete
    # the script's own end, not the grace period (an hour)
    wait_for(lambda: simcluster.call(lambda: simcluster.sim.kubelet.runtime("default", "pid1")) is None, timeout=120)
    assert time.monotonic() - t0 > 0.8  # (and it was not cut short: its sleep ran on)
    events = [e for e in core.list_namespaced_event("default").items if e.involved_object.name == "pid1"]
    assert any(e.reason == "Killing" for e in events)


def test_delete_sigkills_after_grace_period(core, simcluster):
    # TERM is ignored by the shell and, inherited, by its sleep: only SIGKILL ends them
    core.create_namespaced_pod("default", pod("term-ignorer", ["sh", "-c", "trap '' TERM; sleep 3600; echo"],
                                              spec={"terminationGracePeriodSeconds": 1}))
    wait_for(lambda: phase(core, "term-ignorer") == "Running")
    pids = wait_for(lambda: (p := runtime_attr(simcluster, "term-ignorer", lambda rt: rt.pids())) and len(p) >= 2 and p)
    t0 = time.monotonic()
    deleted = core.delete_namespaced_pod("term-ignorer", "default")
    assert deleted.metadata.deletion_timestamp is not None
    assert deleted.metadata.deletion_grace_period_seconds == 1
    terminating = core.read_namespaced_pod("term-ignorer", "default")
    assert terminating.metadata.deletion_timestamp is not None
    assert all(alive(p) for p in pids)
    wait_for(lambda: not any(alive(p) for p in pids), timeout=120)  # SIGKILL: not the sleep's hour
    assert time.monotonic() - t0 >= 0.8  # after the grace period (1 s)

    def gone() -> bool:
        try:
            core.read_namespaced_pod("term-ignorer", "default")
        except ApiException as e:
            return e.status == 404
        return False

    wait_for(gone, timeout=5)


def test_deletion_timestamp_is_the_end_of_the_grace_period(core, simcluster):
    """As kube-apiserver: a graceful delete sets deletionTimestamp to when the grace period ends,
    so that it less deletionGracePeriodSeconds says when the deletion was asked for (what ranks
    reads to tell a container its deletion stopped from one that had failed before); a shorter
    grace asked later keeps that moment."""
    core.create_namespaced_pod("default", pod("graceful", ["sh", "-c", "trap '' TERM; sleep 300; echo"],
                                              spec={"terminationGracePeriodSeconds": 60}))
    wait_for(lambda: phase(core, "graceful") == "Running")
    before = int(time.time())
    deleted = core.delete_namespaced_pod("graceful", "default")
    after = time.time()
    at = deleted.metadata.deletion_timestamp.timestamp()
    assert deleted.metadata.deletion_grace_period_seconds == 60
    assert before + 60 <= at <= after + 60, (before, at, after)
    core.delete_namespaced_pod("graceful", "default", grace_period_seconds=20)
    shortened = core.read_namespaced_pod("graceful", "default").metadata
    assert shortened.deletion_grace_period_seconds == 20
    assert shortened.deletion_timestamp.timestamp() == at - 60 + 20


def test_force_delete_kills_at_once(core, kubectl, simcluster):
    core.create_namespaced_pod("default", pod("forced", ["sh", "-c", "trap '' TERM; sleep 3600; echo"],
                                              spec={"terminationGracePeriodSeconds": 3600}))
    wait_for(lambda: phase(core, "forced") == "Running")
    pids = wait_for(lambda: (p := runtime_attr(simcluster, "forced", lambda rt: rt.pids())) and len(p) >= 2 and p)
    kubectl.run("delete", "pod", "forced", "--grace-period=0", "--force", timeout=120)
    wait_for(lambda: not any(alive(p) for p in pids), timeout=120)  # at once, not after the hour's grace


def test_removed_from_store_kills_processes(core, simcluster):
    core.create_namespaced_pod("default", pod("cascade", ["sleep", "300"]))
    wait_for(lambda: phase(core, "cascade") == "Running")
    pids = runtime_attr(simcluster, "cascade", lambda rt: rt.pids())
    sim = simcluster.sim

    def remove() -> None:
        sim.store.remove(sim.registry.get("", "v1", "pods"), "default", "cascade")

    simcluster.call(remove)
    wait_for(lambda: not any(alive(p) for p in pids), timeout=10)
    assert simcluster.call(lambda: sim.kubelet.runtime("default", "cascade")) is None


def test_terminal_pod_is_deleted_at_once(core):
    core.create_namespaced_pod("default", pod("quick", ["true"]))
    wait_for(lambda: phase(core, "quick") == "Succeeded")
    core.delete_namespaced_pod("quick", "default")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("quick", "default")
    assert exc.value.status == 404


def test_scenario_pods_with_status_are_left_alone(simcluster, core):
    sim = simcluster.sim
    body = pod("static", ["sleep", "300"])
    body["status"] = {"phase": "Running", "containerStatuses": [
        {"name": "main", "ready": True, "restartCount": 0, "image": "busybox", "imageID": "",
         "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}
    simcluster.call(sim.apply, body)
    time.sleep(0.3)
    assert simcluster.call(lambda: sim.kubelet.runtime("default", "static")) is None
    assert cstatus(core, "static").state.running.started_at is not None


def test_sim_stop_kills_every_process(tmp_path):
    with sim_in_thread(components=("kubelet",), tls=False, workdir=tmp_path / "own") as t:
        sim = t.sim

        def create() -> None:
            sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
            sim.apply(pod("a", ["sh", "-c", "sleep 300 & sleep 301"]) | {"metadata": {"name": "a", "namespace": "default"}})
            sim.apply(pod("b", ["sleep", "302"]) | {"metadata": {"name": "b", "namespace": "default"}})

        t.call(create)

        def all_pids() -> list[int]:
            out: list[int] = []
            for name in ("a", "b"):
                rt = sim.kubelet.runtime("default", name)
                out += rt.pids() if rt else []
            return out

        pids = wait_for(lambda: (p := t.call(all_pids)) and len(p) >= 3 and p)
        reaper = sim.kubelet.reaper.pid
    assert not any(alive(p) for p in pids)
    assert reaper is not None and not alive(reaper)


SIGKILL_SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    from simcluster import SimCluster

    async def main():
        sim = SimCluster(components=("kubelet",), tls=False, workdir=sys.argv[1])
        await sim.start()
        sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
        sim.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                   "spec": {"nodeName": "n", "containers": [
                       {"name": "c", "image": "x", "command": ["sh", "-c", "sleep 300 & sleep 301 & wait"]}]}})
        while True:
            rt = sim.kubelet.runtime("default", "p")
            pids = rt.pids() if rt else []
            if len(pids) >= 3:
                print(json.dumps({"pids": pids, "reaper": sim.kubelet.reaper.pid}), flush=True)
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(3600)

    asyncio.run(main())
""")


def test_sigkill_of_simcluster_leaves_no_process(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", SIGKILL_SCRIPT, str(tmp_path / "w")], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        info = json.loads(line)
        assert all(alive(p) for p in info["pids"])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        wait_for(lambda: not any(alive(p) for p in info["pids"]), timeout=10)
        wait_for(lambda: not alive(info["reaper"]), timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
