"""A pod's own `0.0.0.0` and `localhost` (`simcluster.node.podnet`): where the kernel allows (root,
cgroup v2, BPF), a server a pod binds on `0.0.0.0` or `127.0.0.1` at a fixed port is bound on the
pod's own address, so the same port in two pods never collides, and `localhost` in a pod reaches
the pod's own server; binds that let the kernel pick the port, and the API server's port, are left
alone. Checked on the programs themselves in a cgroup, then on pods of a running simcluster
through real clients (pods/exec, pods/portforward of the official Python client)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest
from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes.stream import portforward, stream

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.node import podnet
from simcluster.node.podaddr import AddressBlock
from simcluster.scenarios.nodes import gpu_node
from tests.waiting import wait_for

NODE = "node-0"
PORT = 8731  # a fixed port, outside the ephemeral range
# a server that binds every address, as `jupyter lab --ip=0.0.0.0` does; it answers with its pod's name
SERVER = ("import http.server, socket\n"
          "class H(http.server.BaseHTTPRequestHandler):\n"
          "    def do_GET(self):\n"
          "        body = socket.gethostname().encode()\n"
          "        self.send_response(200); self.send_header('Content-Type', 'text/plain')\n"
          "        self.send_header('Content-Length', str(len(body))); self.end_headers()\n"
          "        self.wfile.write(body)\n"
          "http.server.HTTPServer(({host!r}, {port}), H).serve_forever()\n")
FETCH = ("import sys, urllib.request\n"
         "try:\n"
         "    print(urllib.request.urlopen('http://127.0.0.1:{port}/', timeout=5).read().decode())\n"
         "except OSError as e:\n"
         "    print('refused' if 'refused' in str(e) else e)\n")


def network_or_skip() -> podnet.PodNetwork:
    net = podnet.PodNetwork()
    if not net.start():
        pytest.skip(f"the kernel gives pods no cgroup programs here: {net.why_not}")
    return net


def _in_pod(cgroup: str, job) -> tuple[int, str]:
    """Run `job()` in a child moved into `cgroup`; its exit status and what it wrote."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: join, run, report, leave without running the parent's cleanup
        os.close(r)
        try:
            podnet.joiner(cgroup)()
            out = str(job())
            code = 0
        except BaseException as exc:  # (the child reports whatever happened)
            out, code = repr(exc), 1
        os.write(w, out.encode())
        os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode()


def test_the_programs_rewrite_what_a_pods_network_namespace_would() -> None:
    api = socket.socket()
    api.bind(("127.0.0.1", 0))
    api.listen()
    api_port = api.getsockname()[1]
    net = podnet.PodNetwork(api_ports=(api_port,))
    if not net.start():
        pytest.skip(f"the kernel gives pods no cgroup programs here: {net.why_not}")
    lo = net.ports[0]
    block = AddressBlock()  # two addresses no other cluster on the machine hands out
    assert block.lease()
    ip_a, ip_b = block.allocate(), block.allocate()
    assert ip_a and ip_b
    try:
        a = net.join("pod-a", ip_a)
        b = net.join("pod-b", ip_b)

        def binds() -> str:
            out = []
            for host, port in (("0.0.0.0", PORT), ("0.0.0.0", 0), ("127.0.0.1", PORT + 1)):
                s = socket.socket()
                s.bind((host, port))
                out.append(f"{host}:{'fixed' if port else 'any'}={s.getsockname()[0]}")
                s.close()
            for port in range(lo, lo + 100):  # a fixed port in the ephemeral range (the first one free)
                with socket.socket() as s:
                    try:
                        s.bind(("127.0.0.1", port))
                    except OSError:
                        continue
                    out.append(f"127.0.0.1:ephemeral={s.getsockname()[0]}")
                    break
            return " ".join(out)

        code, out = _in_pod(a, binds)
        assert code == 0, out
        # a fixed port on every address or on 127.0.0.1: the pod's own address; a port the kernel
        # picks, or one in its ephemeral range, is left as asked
        assert out == (f"0.0.0.0:fixed={ip_a} 0.0.0.0:any=0.0.0.0 127.0.0.1:fixed={ip_a} "
                       "127.0.0.1:ephemeral=127.0.0.1"), out

        # two pods bind the same port on every address without collision, and each one's
        # localhost reaches its own server
        def serve_and_dial(peer_ready: int, go: int) -> str:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (its TIME_WAIT must not hold the
            s.bind(("0.0.0.0", PORT))                                # address for the pods that follow)
            s.listen()
            os.write(peer_ready, b"x")
            os.read(go, 1)
            c = socket.create_connection(("127.0.0.1", PORT), timeout=5)
            conn, _ = s.accept()
            peer = c.getpeername()[0]
            c.close()
            conn.close()
            # the API server's port on 127.0.0.1 stays the host's
            api_peer = socket.create_connection(("127.0.0.1", api_port), timeout=5).getpeername()[0]
            return f"{s.getsockname()[0]} {peer} {api_peer}"

        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            code, out = _in_pod(b, lambda: serve_and_dial(ready_w, go_r))
            os._exit(0 if code == 0 and out == f"{ip_b} {ip_b} 127.0.0.1" else 1)
        os.read(ready_r, 1)  # pod b listens on PORT; now pod a binds it too
        os.write(go_w, b"xx")
        code, out = _in_pod(a, lambda: serve_and_dial(os.open(os.devnull, os.O_WRONLY), go_r))
        assert code == 0, out
        assert out == f"{ip_a} {ip_a} 127.0.0.1", out
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "pod b did not serve on its own address"
        # outside the pods, nothing changed
        s = socket.socket()
        s.bind(("0.0.0.0", 0))
        assert s.getsockname()[0] == "0.0.0.0"
        s.close()
    finally:
        net.close()
        api.close()
        block.close()
    assert net.base is not None and not os.path.exists(net.base), "the cgroups stay after close"


def test_programs_assemble_for_any_address_and_range() -> None:
    """The bytes are whole instructions ending in `exit`, whatever the address or the keep list."""
    for ip in ("127.16.0.2", "127.255.255.254"):
        for keep in ((), (6443,), (6443, 8080, 2379)):
            code = podnet.connect_program(ip, 32768, 60999, keep)
            assert len(code) % 8 == 0 and code[-8:] == bytes([0x95]) + bytes(7)
        assert podnet.bind_program(ip, 1024, 65535)[-8:] == bytes([0x95]) + bytes(7)


def test_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(podnet.ENV_VAR, "0")
    assert not podnet.wanted()
    monkeypatch.setenv(podnet.ENV_VAR, "1")
    assert podnet.wanted()
    assert not podnet.wanted(False)


# -- pods of a running simcluster -----------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    t = ThreadedSimCluster(workdir=tmp_path_factory.mktemp("sim"), components=("kubelet", "exec", "proxy"))
    t.start()
    try:
        if t.sim.kubelet.podnet is None:
            pytest.skip("the kernel gives pods no cgroup programs here")
        t.call(t.sim.apply, gpu_node(NODE, 8))
        yield t
    finally:
        t.stop()


@pytest.fixture(scope="module")
def core(cluster: ThreadedSimCluster) -> Iterator[kclient.CoreV1Api]:
    api = kconfig.new_client_from_config(config_file=str(cluster.sim.kubeconfig_path))
    yield kclient.CoreV1Api(api)
    api.close()


def server_pod(name: str, host: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": NODE, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "python", "command": ["python", "-c", SERVER.format(host=host, port=PORT)],
                        "ports": [{"containerPort": PORT, "name": "http"}]}]}}


def _exec(core: kclient.CoreV1Api, pod: str, code: str) -> str:
    return stream(core.connect_get_namespaced_pod_exec, pod, "default", command=["python", "-c", code],
                  stderr=True, stdin=False, stdout=True, tty=False).strip()


def _serving(core: kclient.CoreV1Api, pod: str) -> bool:
    return _exec(core, pod, FETCH.format(port=PORT)) == pod


def test_two_pods_serve_one_port_on_every_address(cluster: ThreadedSimCluster, core: kclient.CoreV1Api) -> None:
    for name in ("nb-a", "nb-b"):
        core.create_namespaced_pod("default", server_pod(name, "0.0.0.0"))
    for name in ("nb-a", "nb-b"):
        # both run, and localhost in each reaches its own server (the collision would fail one)
        wait_for(lambda n=name: _serving(core, n), timeout=60, what=f"{name} serving on its localhost")
    ips = {n: core.read_namespaced_pod(n, "default").status.pod_ip for n in ("nb-a", "nb-b")}
    assert ips["nb-a"] != ips["nb-b"]
    for name, ip in ips.items():
        with socket.create_connection((ip, PORT), timeout=5) as s:  # each pod's address is its own server
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            assert s.makefile("rb").read().endswith(name.encode())
        # the kubelet's port-forward reaches it (it dials the pod's address)
        pf = portforward(core.connect_get_namespaced_pod_portforward, name, "default", ports=str(PORT))
        sock = pf.socket(PORT)
        sock.settimeout(20)
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
        assert got.endswith(name.encode()), got
        pf.close()
    # the API server's proxy reaches each through its declared port
    for name in ("nb-a", "nb-b"):
        assert core.connect_get_namespaced_pod_proxy(name, "default") == name


def test_localhost_in_a_pod_is_its_own(cluster: ThreadedSimCluster, core: kclient.CoreV1Api) -> None:
    core.create_namespaced_pod("default", server_pod("lo-server", "127.0.0.1"))
    wait_for(lambda: _serving(core, "lo-server"), timeout=60, what="lo-server on its localhost")
    core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "neighbour", "namespace": "default"},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "python", "command": ["sleep", "3600"]}]}})
    wait_for(lambda: (core.read_namespaced_pod("neighbour", "default").status.phase == "Running"), timeout=30,
             what="neighbour running")
    # the server on lo-server's 127.0.0.1 is not on the neighbour's localhost
    assert _exec(core, "neighbour", FETCH.format(port=PORT)) == "refused"


def test_a_deleted_pods_cgroup_goes(cluster: ThreadedSimCluster, core: kclient.CoreV1Api) -> None:
    core.create_namespaced_pod("default", server_pod("short", "0.0.0.0"))
    wait_for(lambda: _serving(core, "short"), timeout=60, what="short serving")
    uid = core.read_namespaced_pod("short", "default").metadata.uid
    net = cluster.sim.kubelet.podnet
    path = cluster.call(lambda: net.pods.get(uid))
    assert path and os.path.isdir(path)
    core.delete_namespaced_pod("short", "default", grace_period_seconds=0)
    wait_for(lambda: not os.path.exists(path), timeout=30, what="the pod's cgroup to go")


def test_a_stopped_cluster_leaves_no_cgroup(tmp_path) -> None:
    network_or_skip().close()
    with sim_in_thread(components=("kubelet",), tls=False, workdir=tmp_path / "own") as t:
        base = t.sim.kubelet.podnet.base
        assert base and os.path.isdir(base)
    assert not os.path.exists(base)
