"""`pods/portforward` with real clients: the official Python client's `portforward` (the v4 channel
WebSocket) and kubectl v1.35 (SPDY/3.1 tunnelled in a WebSocket, and its fallback, SPDY/3.1 on the
upgraded connection, with KUBECTL_PORT_FORWARD_WEBSOCKETS=false), reaching a web server a pod's
process runs on its pod address; a port nothing of the pod listens on is refused, as is a port
another pod's server holds."""

from __future__ import annotations

import http.client
import os
import select
import socket
import ssl
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes.stream import portforward

from monitors.connection import load_cluster_config
from simcluster.cluster import ThreadedSimCluster
from simcluster.node.listeners import diag_listening, proc_listening
from simcluster.scenarios.nodes import gpu_node
from tests.conftest import Kubectl
from tests.waiting import wait_for

NODE = "node-0"
PAGE = "hello from the pod"
# a web server on the pod's own address (the downward API's status.podIP), as a notebook would run
SERVER = ('mkdir -p site && echo "{page} $HOSTNAME" > site/index.html && cd site && '
          'exec python -m http.server --bind "$POD_IP" {port}')


@pytest.fixture(scope="module")
def simcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    """One cluster for the module (overrides the plugin's per-test fixture)."""
    t = ThreadedSimCluster(workdir=tmp_path_factory.mktemp("sim"), components=("kubelet", "exec"))
    t.start()
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture(scope="module")
def core(simcluster: ThreadedSimCluster) -> Iterator[kclient.CoreV1Api]:
    api = kconfig.new_client_from_config(config_file=str(simcluster.sim.kubeconfig_path))
    yield kclient.CoreV1Api(api)
    api.close()


def web_pod(name: str, port: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": {
        "nodeName": NODE, "terminationGracePeriodSeconds": 0,
        "containers": [{
            "name": "main", "image": "python", "command": ["sh", "-c", SERVER.format(page=PAGE, port=port)],
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "ports": [{"containerPort": port, "name": "http"}],
        }]}}


@pytest.fixture(scope="module")
def web(simcluster: ThreadedSimCluster, core: kclient.CoreV1Api) -> str:
    """Pods `web` and `other` serving on their own addresses (8080 and 8081); returns web's IP."""
    simcluster.call(simcluster.sim.apply, gpu_node(NODE, 8))
    core.create_namespaced_pod("default", web_pod("web", 8080))
    core.create_namespaced_pod("default", web_pod("other", 8081))
    ips = {}
    for name, port in (("web", 8080), ("other", 8081)):
        ip = wait_for(lambda n=name: core.read_namespaced_pod(n, "default").status.pod_ip, what=f"{name}'s IP")
        wait_for(lambda ip=ip, port=port: _answers(ip, port), what=f"{name} serving", timeout=30)
        ips[name] = ip
    return ips["web"]


def _answers(ip: str, port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://{ip}:{port}/", timeout=2) as r:
            return PAGE in r.read().decode()
    except OSError:
        return False


def _get_over(sock: socket.socket) -> str:
    sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    out = b""
    while True:
        r, _, _ = select.select([sock], [], [], 20)
        assert r, f"no answer through the forward (so far {out!r})"
        chunk = sock.recv(65536)
        if not chunk:
            return out.decode(errors="replace")
        out += chunk


def test_python_client_reaches_the_pods_server(core: kclient.CoreV1Api, web: str) -> None:
    pf = portforward(core.connect_get_namespaced_pod_portforward, "web", "default", ports="8080")
    answer = _get_over(pf.socket(8080))
    assert "200 OK" in answer and f"{PAGE} web" in answer
    assert pf.error(8080) is None
    pf.close()


def test_python_client_is_refused_a_port_nothing_listens_on(core: kclient.CoreV1Api, web: str) -> None:
    # 8081 is served, but by the other pod: not web's
    for port in (9999, 8081):
        pf = portforward(core.connect_get_namespaced_pod_portforward, "web", "default", ports=str(port))
        sock = pf.socket(port)
        sock.settimeout(20)
        assert sock.recv(10) == b""  # the error closes the port's socket
        error = wait_for(lambda pf=pf, port=port: pf.error(port), what="the error channel's words")
        assert f"error forwarding port {port} to pod" in error and "connection refused" in error
        pf.close()


# kubectl's two ways: SPDY tunnelled in a WebSocket (its default, a GET), and its fallback when the
# WebSocket is refused or turned off: SPDY on the upgraded connection itself (a POST)
WAYS = pytest.mark.parametrize(("websockets", "method"), [("true", "GET"), ("false", "POST")],
                               ids=["websocket", "plain-spdy"])


def _upgraded_by(simcluster: ThreadedSimCluster, since: float) -> set[str]:
    """The methods of the pods/portforward upgrades (101) the API server answered since `since`."""
    return {r.method for r in simcluster.sim.server.log.since(since)
            if r.path.endswith("/pods/web/portforward") and r.status == 101}


@WAYS
def test_kubectl_port_forward(kubectl_bin: Path, simcluster: ThreadedSimCluster, web: str, websockets: str,
                              method: str) -> None:
    kubectl = Kubectl(kubectl_bin, simcluster.sim.kubeconfig_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        local = s.getsockname()[1]
    since = time.time()
    proc = kubectl.popen("port-forward", "pod/web", f"{local}:8080", "9999:9999",
                         env={"KUBECTL_PORT_FORWARD_WEBSOCKETS": websockets})
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.strip() == f"Forwarding from 127.0.0.1:{local} -> 8080", first
        for _ in range(2):  # two connections, one after the other, on the one session
            conn = http.client.HTTPConnection("127.0.0.1", local, timeout=20)
            conn.request("GET", "/")
            resp = conn.getresponse()
            assert resp.status == 200 and f"{PAGE} web" in resp.read().decode()
            conn.close()
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=20)
    assert "error" not in err.lower(), err
    # (an upgrade is in the log once its connection has ended)
    wait_for(lambda: _upgraded_by(simcluster, since) == {method}, what=f"a {method} upgrade logged")


@WAYS
def test_kubectl_port_forward_to_a_port_nothing_listens_on(kubectl_bin: Path, simcluster: ThreadedSimCluster,
                                                           web: str, websockets: str, method: str) -> None:
    kubectl = Kubectl(kubectl_bin, simcluster.sim.kubeconfig_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        local = s.getsockname()[1]
    since = time.time()
    proc = kubectl.popen("port-forward", "pod/web", f"{local}:9999", env={"KUBECTL_PORT_FORWARD_WEBSOCKETS": websockets})
    try:
        assert proc.stdout is not None
        assert "Forwarding from" in proc.stdout.readline()
        with socket.create_connection(("127.0.0.1", local), timeout=20) as sock:
            sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
            try:
                answer = sock.recv(100)
            except ConnectionResetError:  # (kubectl closed it before reading the request: a reset, not a FIN)
                answer = b""
            assert answer == b"", answer  # ended with nothing from the pod
    finally:
        proc.terminate()
        try:
            _out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, err = proc.communicate()
    assert "error forwarding port 9999 to pod" in err and "connection refused" in err, err
    # (an upgrade is in the log once its connection has ended)
    wait_for(lambda: _upgraded_by(simcluster, since) == {method}, what=f"a {method} upgrade logged")


def test_a_plain_spdy_upgrade_is_refused_without_the_port_forward_protocol(simcluster: ThreadedSimCluster,
                                                                         web: str) -> None:
    """As the kubelet's handshake: no X-Stream-Protocol-Version is a 400, only others a 403 naming
    the one it accepts."""
    cfg = load_cluster_config(str(simcluster.sim.kubeconfig_path), None)
    server = urllib.parse.urlsplit(cfg.server)
    tls = cfg.ssl_context()
    assert isinstance(tls, ssl.SSLContext)
    for version, status, words in ((None, 400, "X-Stream-Protocol-Version is required"),
                                   ("v4.channel.k8s.io", 403, "unable to negotiate protocol")):
        conn = http.client.HTTPSConnection(server.hostname or "", server.port, context=tls, timeout=20)
        headers = {**cfg.headers(), "Connection": "Upgrade", "Upgrade": "SPDY/3.1"}
        if version:
            headers["X-Stream-Protocol-Version"] = version
        conn.request("POST", "/api/v1/namespaces/default/pods/web/portforward", headers=headers)
        resp = conn.getresponse()
        body = resp.read().decode()
        conn.close()
        assert resp.status == status and words in body, (resp.status, body)
        if status == 403:
            assert resp.getheader("X-Accepted-Stream-Protocol-Versions") == "portforward.k8s.io"


def test_listening_sockets_from_sock_diag_as_from_proc() -> None:
    """The kernel's sock_diag (what a connection's check reads) finds a listening socket as
    /proc/net/tcp shows it, by its inode; a closed one is gone from both."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        mine = {os.fstat(s.fileno()).st_ino: ("127.0.0.1", port)}
        assert diag_listening(port) == proc_listening(port=port) == mine
        assert mine.items() <= diag_listening().items()
    assert diag_listening(port) == proc_listening(port=port) == {}
