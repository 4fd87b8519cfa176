"""simcluster's DCGM exporters and the API server's pod/service/node proxies, with real clients."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from aiohttp import web

from simcluster.apiserver.auth import Rule
from simcluster.gpu.dcgm import CpuSampler, cpu_seconds
from simcluster.scenarios.nodes import gpu_node
from tests.waiting import wait_for

DCGM = pytest.mark.simcluster(nodes=2, gpus_per_node=4, components=("dcgm",))
LABEL_ORDER = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION",
               "container", "namespace", "pod"]
REQUIRED = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"]
SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+)$')
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


# -- helpers ---------------------------------------------------------------------------------------


def parse_metrics(text: str) -> tuple[dict[str, tuple[str, str]], list[tuple[str, list[tuple[str, str]], float]]]:
    """(name -> (type, help), [(name, ordered labels, value)]) from the text exposition format."""
    meta: dict[str, list[str]] = {}
    samples = []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_ = line[7:].partition(" ")
            meta.setdefault(name, ["", ""])[1] = help_
        elif line.startswith("# TYPE "):
            name, _, typ = line[7:].partition(" ")
            meta.setdefault(name, ["", ""])[0] = typ
        elif line:
            m = SAMPLE.match(line)
            assert m, f"bad sample line {line!r}"
            samples.append((m.group(1), LABEL.findall(m.group(2)), float(m.group(3))))
    return {k: (v[0], v[1]) for k, v in meta.items()}, samples


def series(text: str, metric: str) -> dict[str, tuple[dict[str, str], float]]:
    """gpu index -> (labels, value) of one metric."""
    _, samples = parse_metrics(text)
    return {dict(lbl)["gpu"]: (dict(lbl), v) for name, lbl, v in samples if name == metric}


def gpu_pod(name: str, node: str, gpus: int, ns: str = "default", annotations: dict[str, str] | None = None,
            command: list[str] | None = None, container: str = "pytorch") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [{
                "name": container, "image": "python:3.12",
                "command": command or ["sleep", "infinity"],
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }],
        },
    }


def set_running(core: Any, name: str, ns: str = "default") -> None:
    """Mark a pod Running through the status subresource (tests without a kubelet)."""
    body = core.read_namespaced_pod_status(name, ns)
    body.status.phase = "Running"
    core.replace_namespaced_pod_status(name, ns, body)


def raw_get(api: Any, path: str, method: str = "GET", query: list[tuple[str, str]] | None = None,
            body: Any = None, headers: dict[str, str] | None = None, stream: bool = False,
            form: list[tuple[str, str]] | None = None) -> Any:
    """A request through the official client's own machinery (auth, CA), returning the RESTResponse."""
    params = api.param_serialize(method, path, query_params=query or [], header_params=headers or {},
                                 body=body, post_params=form, auth_settings=["BearerToken"])
    resp = api.call_api(*params, _request_timeout=10)
    if not stream:
        resp.read()
    return resp


@pytest.fixture
def core(k8s: Any) -> Any:
    client, api = k8s
    return client.CoreV1Api(api)


@pytest.fixture
def session(simcluster: Any, tmp_path: Path) -> Iterator[requests.Session]:
    sim = simcluster.sim
    ca = tmp_path / "ca.pem"
    ca.write_bytes(sim.ca_pem)
    s = requests.Session()
    s.trust_env = False
    s.verify = str(ca)
    s.headers["Authorization"] = f"Bearer {sim.admin_token}"
    yield s
    s.close()


def scrape(simcluster: Any, node: str) -> str:
    targets = {n: (h, p) for n, h, p in simcluster.call(simcluster.sim.dcgm.targets)}
    host, port = targets[node]
    with requests.Session() as s:
        s.trust_env = False
        r = s.get(f"http://{host}:{port}/metrics", timeout=60)  # (a busy machine: the exporter answers late)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return r.text


# -- exporters as API objects ----------------------------------------------------------------------


@DCGM
def test_one_exporter_per_gpu_node_follows_nodes(simcluster: Any, core: Any) -> None:
    sim = simcluster.sim
    cpu = gpu_node("cpu-node-01", 0, index=50)
    cpu["status"]["capacity"].pop("nvidia.com/gpu")
    cpu["status"]["allocatable"].pop("nvidia.com/gpu")
    simcluster.call(sim.apply, cpu)
    simcluster.call(sim.apply, gpu_node("h100-node-01", 8, index=60, product="NVIDIA-H100-80GB-HBM3"))

    def exporter_pods() -> dict[str, Any]:
        pods = core.list_namespaced_pod("gpu-operator", label_selector="app=nvidia-dcgm-exporter").items
        return {p.spec.node_name: p for p in pods}

    pods = wait_for(lambda: (lambda p: p if len(p) == 3 else None)(exporter_pods()), timeout=5)
    assert set(pods) == {"gpu-node-01", "gpu-node-02", "h100-node-01"}
    for node, pod in pods.items():
        assert re.fullmatch(r"nvidia-dcgm-exporter-[a-z0-9]{5}", pod.metadata.name)
        assert pod.metadata.annotations["simcluster.ranks/in-process"] == "true"
        assert pod.status.phase == "Running"
        assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
        assert pod.spec.containers[0].ports[0].container_port == 9400
        assert pod.status.pod_ip and pod.status.host_ip
        assert simcluster.call(sim.dcgm.exporter_pods)[node] == pod.metadata.name
    svc = core.read_namespaced_service("nvidia-dcgm-exporter", "gpu-operator")
    assert svc.metadata.annotations["prometheus.io/scrape"] == "true"
    assert svc.spec.selector == {"app": "nvidia-dcgm-exporter"}
    assert [(p.name, p.port) for p in svc.spec.ports] == [("gpu-metrics", 9400)]

    targets = simcluster.call(sim.dcgm.targets)
    assert [t[0] for t in targets] == ["gpu-node-01", "gpu-node-02", "h100-node-01"]
    assert len({t[2] for t in targets}) == 3  # a distinct port per node
    h100 = scrape(simcluster, "h100-node-01")
    free = series(h100, "DCGM_FI_DEV_FB_FREE")
    assert len(free) == 8
    assert {lbl["modelName"] for lbl, _ in free.values()} == {"NVIDIA H100 80GB HBM3"}
    assert {v for _, v in free.values()} == {81559}

    # the node goes away: its exporter pod, target and listener go too
    h100_port = dict((n, p) for n, _, p in targets)["h100-node-01"]
    core.delete_node("h100-node-01")
    wait_for(lambda: set(exporter_pods()) == {"gpu-node-01", "gpu-node-02"}, timeout=5)
    assert [t[0] for t in simcluster.call(sim.dcgm.targets)] == ["gpu-node-01", "gpu-node-02"]
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{h100_port}/metrics", timeout=2)

    # an exporter pod deleted by a user comes back, like a DaemonSet's
    victim = exporter_pods()["gpu-node-01"].metadata.name
    core.delete_namespaced_pod(victim, "gpu-operator")
    back = wait_for(lambda: (lambda p: p.get("gpu-node-01") if p.get("gpu-node-01") and
                                       p["gpu-node-01"].metadata.name != victim else None)(exporter_pods()), timeout=5)
    assert back.status.phase == "Running"


# -- labels and values -----------------------------------------------------------------------------


@DCGM
def test_profile_pod_and_idle_gpus(simcluster: Any, core: Any) -> None:
    annotations = {"simcluster.ranks/gpu-util": "85", "simcluster.ranks/gpu-mem-mib": "40000",
                   "simcluster.ranks/gpu-xid": "79"}
    core.create_namespaced_pod("default", gpu_pod("train-0", "gpu-node-01", 2, annotations=annotations))
    set_running(core, "train-0")
    wait_for(lambda: simcluster.call(simcluster.sim.dcgm.assignments, "gpu-node-01"), timeout=5)
    text = scrape(simcluster, "gpu-node-01")
    meta, samples = parse_metrics(text)
    for name in REQUIRED:
        assert meta[name][0] == "gauge" and meta[name][1], name
    assert meta["DCGM_FI_DEV_GPU_UTIL"][1] == "GPU utilization (in %)."
    assert meta["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"][0] == "counter"
    for name, labels, _ in samples:
        assert [k for k, _ in labels] == LABEL_ORDER, name
    util = series(text, "DCGM_FI_DEV_GPU_UTIL")
    assert sorted(util) == ["0", "1", "2", "3"]
    for gpu in ("0", "1"):
        labels, value = util[gpu]
        assert value == 85
        assert (labels["namespace"], labels["pod"], labels["container"]) == ("default", "train-0", "pytorch")
        assert labels["Hostname"] == "gpu-node-01"
        assert labels["modelName"] == "NVIDIA A100-SXM4-80GB"
        assert labels["device"] == f"nvidia{gpu}"
        assert labels["DCGM_FI_DRIVER_VERSION"] == "550.54.15"
        assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", labels["UUID"])
        assert re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:00\.0", labels["pci_bus_id"])
        assert series(text, "DCGM_FI_DEV_FB_USED")[gpu][1] == 40000
        assert series(text, "DCGM_FI_DEV_FB_FREE")[gpu][1] == 81920 - 40000
        assert series(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")[gpu][1] == pytest.approx(0.85)
        assert series(text, "DCGM_FI_DEV_XID_ERRORS")[gpu][1] == 79
    assert len({util[g][0]["UUID"] for g in util}) == 4
    for gpu in ("2", "3"):
        labels, value = util[gpu]
        assert value == 0
        assert (labels["namespace"], labels["pod"], labels["container"]) == ("", "", "")
        assert series(text, "DCGM_FI_DEV_FB_USED")[gpu][1] == 0
        assert series(text, "DCGM_FI_DEV_FB_FREE")[gpu][1] == 81920
        assert series(text, "DCGM_FI_DEV_XID_ERRORS")[gpu][1] == 0
    power = series(text, "DCGM_FI_DEV_POWER_USAGE")
    temp = series(text, "DCGM_FI_DEV_GPU_TEMP")
    assert 50 < power["2"][1] < power["0"][1] <= 400
    assert 25 < temp["2"][1] < temp["0"][1] < 90
    # the same GPU identity on every scrape
    again = series(scrape(simcluster, "gpu-node-01"), "DCGM_FI_DEV_GPU_UTIL")
    assert {g: lbl["UUID"] for g, (lbl, _) in again.items()} == {g: lbl["UUID"] for g, (lbl, _) in util.items()}


@DCGM
def test_assignment_is_first_free_and_stable(simcluster: Any, core: Any) -> None:
    sim = simcluster.sim
    for name, gpus in (("a", 2), ("b", 1)):
        core.create_namespaced_pod("default", gpu_pod(name, "gpu-node-02", gpus,
                                                      annotations={"simcluster.ranks/gpu-util": "50"}))
        set_running(core, name)
        wait_for(lambda n=name: any(v[1] == n for v in simcluster.call(sim.dcgm.assignments, "gpu-node-02").values()), timeout=5)
    assigned = simcluster.call(sim.dcgm.assignments, "gpu-node-02")
    assert {i: v[1] for i, v in assigned.items()} == {0: "a", 1: "a", 2: "b"}
    # a pending pod (bound, not Running) gets nothing yet; a bad profile falls back without crashing
    core.create_namespaced_pod("default", gpu_pod("pending", "gpu-node-02", 1,
                                                  annotations={"simcluster.ranks/gpu-util": "bogus:1"}))
    core.delete_namespaced_pod("a", "default")
    wait_for(lambda: {i: v[1] for i, v in simcluster.call(sim.dcgm.assignments, "gpu-node-02").items()} == {2: "b"}, timeout=5)
    set_running(core, "pending")
    wait_for(lambda: {i: v[1] for i, v in simcluster.call(sim.dcgm.assignments, "gpu-node-02").items()}
             == {0: "pending", 2: "b"}, timeout=5)
    util = series(scrape(simcluster, "gpu-node-02"), "DCGM_FI_DEV_GPU_UTIL")
    assert util["0"][0]["pod"] == "pending" and util["0"][1] == 0  # no kubelet runtime: idle
    assert util["2"][0]["pod"] == "b" and util["2"][1] == 50
    # a pod that ends releases its GPUs
    body = core.read_namespaced_pod_status("b", "default")
    body.status.phase = "Succeeded"
    core.replace_namespaced_pod_status("b", "default", body)
    wait_for(lambda: {i: v[1] for i, v in simcluster.call(sim.dcgm.assignments, "gpu-node-02").items()}
             == {0: "pending"}, timeout=5)


@DCGM
def test_a_profile_written_for_one_job_is_not_read_in_a_copy_of_its_pods(simcluster: Any, core: Any) -> None:
    """The demo's bert-crash scripts its GPUs (60 %, XID 79 on rank 2); `ranks debug` copies its pod
    template into a session whose pods sleep: they read as any pod's (idle, no XID), not 60 % and a
    GPU fallen off the bus."""
    sim = simcluster.sim
    scripted = {"simcluster.ranks/gpu-util": "60", "simcluster.ranks/gpu-xid": "79",
                "simcluster.ranks/profile-of": "bert"}
    for name, job in (("bert-worker-1", "bert"), ("bert-debug-worker-1", "bert-debug")):
        body = gpu_pod(name, "gpu-node-02", 1, annotations=dict(scripted))
        body["metadata"]["labels"] = {"training.kubeflow.org/job-name": job}
        core.create_namespaced_pod("default", body)
        set_running(core, name)
    wait_for(lambda: len(simcluster.call(sim.dcgm.assignments, "gpu-node-02")) == 2, timeout=5)
    text = scrape(simcluster, "gpu-node-02")
    util = {lbl["pod"]: v for lbl, v in series(text, "DCGM_FI_DEV_GPU_UTIL").values() if lbl.get("pod")}
    xid = {lbl["pod"]: v for lbl, v in series(text, "DCGM_FI_DEV_XID_ERRORS").values() if lbl.get("pod")}
    assert util == {"bert-worker-1": 60, "bert-debug-worker-1": 0}, util  # (no kubelet: no CPU use)
    assert xid == {"bert-worker-1": 79, "bert-debug-worker-1": 0}, xid


# -- proxies ---------------------------------------------------------------------------------------


@DCGM
def test_scrape_through_service_and_pod_proxies(simcluster: Any, k8s: Any, core: Any, session: Any) -> None:
    _, api = k8s
    sim = simcluster.sim
    core.create_namespaced_pod("default", gpu_pod("p", "gpu-node-02", 1, annotations={"simcluster.ranks/gpu-util": "85"}))
    set_running(core, "p")
    wait_for(lambda: simcluster.call(sim.dcgm.assignments, "gpu-node-02"), timeout=5)
    # the service proxy, by port name and by number, through the official client's machinery
    hosts = set()
    for ref in ("nvidia-dcgm-exporter:gpu-metrics", "nvidia-dcgm-exporter:9400", "nvidia-dcgm-exporter",
                "http:nvidia-dcgm-exporter:9400"):
        for _ in range(2):
            resp = raw_get(api, f"/api/v1/namespaces/gpu-operator/services/{ref}/proxy/metrics")
            assert resp.status == 200, resp.data
            text = resp.data.decode()
            util = series(text, "DCGM_FI_DEV_GPU_UTIL")
            hosts |= {lbl["Hostname"] for lbl, _ in util.values()}
            if util["0"][0]["Hostname"] == "gpu-node-02":
                assert util["0"][0]["pod"] == "p" and util["0"][1] == 85
    assert hosts == {"gpu-node-01", "gpu-node-02"}  # requests spread over the endpoints
    # the generated connect_* methods (they percent-encode ':' in the name)
    text = core.connect_get_namespaced_service_proxy_with_path("nvidia-dcgm-exporter:gpu-metrics", "gpu-operator",
                                                               "metrics")
    assert "DCGM_FI_DEV_GPU_UTIL{" in text
    # the pod proxy reaches one node's exporter
    pods = simcluster.call(sim.dcgm.exporter_pods)
    for ref in (pods["gpu-node-02"], f"{pods['gpu-node-02']}:9400"):
        text = core.connect_get_namespaced_pod_proxy_with_path(ref, "gpu-operator", "metrics")
        util = series(text, "DCGM_FI_DEV_GPU_UTIL")
        assert {lbl["Hostname"] for lbl, _ in util.values()} == {"gpu-node-02"}
        assert util["0"][1] == 85
    # requests with the CA and trust_env=False
    r = session.get(f"{sim.url}/api/v1/namespaces/gpu-operator/pods/{pods['gpu-node-01']}/proxy/metrics")
    assert r.status_code == 200 and 'Hostname="gpu-node-01"' in r.text


@DCGM
def test_proxy_errors(simcluster: Any, k8s: Any, core: Any, session: Any) -> None:
    sim = simcluster.sim
    base = f"{sim.url}/api/v1/namespaces"

    def status(path: str) -> tuple[int, str, str]:
        r = session.get(base + path)
        body = r.json()
        assert body["kind"] == "Status", body
        return r.status_code, body["reason"], body["message"]

    assert status("/default/services/nope/proxy/") == (404, "NotFound", 'services "nope" not found')
    assert status("/default/pods/nope:80/proxy/x") == (404, "NotFound", 'pods "nope" not found')
    assert status("/gpu-operator/services/nvidia-dcgm-exporter:9401/proxy/metrics") == (
        503, "ServiceUnavailable", 'no service port 9401 found for service "nvidia-dcgm-exporter"')
    assert status("/gpu-operator/services/nvidia-dcgm-exporter:nope/proxy/metrics") == (
        503, "ServiceUnavailable", 'no endpoints available for service "nvidia-dcgm-exporter"')
    core.create_namespaced_service("default", {"metadata": {"name": "lonely"}, "spec": {
        "selector": {"app": "none"}, "ports": [{"name": "http", "port": 80}]}})
    assert status("/default/services/lonely/proxy/") == (
        503, "ServiceUnavailable", 'no endpoints available for service "lonely"')
    assert status("/default/services/a:b:c:d/proxy/")[0] == 400
    # a Ready pod behind a service but nothing listening: connection refused, as a dial would
    core.create_namespaced_pod("default", {"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {
        "containers": [{"name": "c", "image": "nginx", "ports": [{"name": "http", "containerPort": 8080}]}]}})
    body = core.read_namespaced_pod_status("web", "default")
    body.status.phase = "Running"
    body.status.pod_ip = "10.244.9.9"
    body.status.conditions = [{"type": "Ready", "status": "True"}]
    core.replace_namespaced_pod_status("web", "default", body)
    core.create_namespaced_service("default", {"metadata": {"name": "web"}, "spec": {
        "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
    assert status("/default/services/web:http/proxy/") == (
        503, "ServiceUnavailable",
        "error trying to reach service: dial tcp 10.244.9.9:8080: connect: connection refused")
    assert status("/default/pods/web/proxy/")[2].endswith("10.244.9.9:8080: connect: connection refused")
    # RBAC: the proxy is its own subresource
    tok = sim.add_user("viewer", rules=(Rule.of(["get", "list"], ["pods", "services"]),))
    r = session.get(base + "/gpu-operator/services/nvidia-dcgm-exporter:9400/proxy/metrics",
                    headers={"Authorization": f"Bearer {tok}"})
    assert r.status_code == 403 and "services/proxy" in r.json()["message"]


class EchoBackend:
    """A real HTTP server on the cluster's loop, to see what the proxy forwards."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> int:
        app = web.Application()
        app.router.add_route("*", "/stream", self.stream)
        app.router.add_route("*", "/redirect", self.redirect)
        app.router.add_route("*", "/{tail:.*}", self.echo)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self.port

    async def stop(self) -> None:
        self.release.set()
        if self.runner is not None:
            await self.runner.cleanup()

    async def echo(self, request: web.Request) -> web.Response:
        body = await request.read()
        return web.json_response({
            "method": request.method, "path": request.path, "query": request.query_string,
            "body": body.decode(), "auth": request.headers.get("Authorization"),
            "ctype": request.headers.get("Content-Type"),
        })

    async def redirect(self, request: web.Request) -> web.Response:
        raise web.HTTPFound("/graph")

    async def stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(b"first\n")
        await asyncio.wait_for(self.release.wait(), 10)
        await resp.write(b"second\n")
        await resp.write_eof()
        return resp


@DCGM
def test_proxy_forwards_method_query_body_and_streams(simcluster: Any, core: Any, session: Any) -> None:
    sim = simcluster.sim
    echo = EchoBackend()
    port = simcluster.run(echo.start())
    try:
        core.create_namespaced_pod("default", {"metadata": {"name": "echo", "labels": {"app": "echo"}}, "spec": {
            "containers": [{"name": "c", "image": "x", "ports": [{"name": "web", "containerPort": 8000}]}]}})
        body = core.read_namespaced_pod_status("echo", "default")
        body.status.phase = "Running"
        body.status.conditions = [{"type": "Ready", "status": "True"}]
        core.replace_namespaced_pod_status("echo", "default", body)
        core.create_namespaced_service("default", {"metadata": {"name": "echo"}, "spec": {
            "selector": {"app": "echo"}, "ports": [{"name": "web", "port": 80, "targetPort": "web"}]}})
        simcluster.call(sim.portmap.register, "default", "echo", 8000, "127.0.0.1", port)
        simcluster.call(sim.portmap.register_node, "gpu-node-01", 10255, "127.0.0.1", port)
        base = f"{sim.url}/api/v1/namespaces/default"
        for url in (f"{base}/services/echo:web/proxy/a/b%20c/", f"{base}/pods/echo:8000/proxy/a/b%20c/",
                    f"{sim.url}/api/v1/nodes/gpu-node-01:10255/proxy/a/b%20c/"):
            r = session.post(url + "?query=sum(up)&x=1&x=2", data=b"hello=world",
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
            assert r.status_code == 200, r.text
            got = r.json()
            assert got["method"] == "POST"
            assert got["path"] == "/a/b c/"
            assert got["query"] == "query=sum(up)&x=1&x=2"
            assert got["body"] == "hello=world"
            assert got["ctype"] == "application/x-www-form-urlencoded"
            assert got["auth"] is None  # the caller's token stays at the API server
        r = session.delete(f"{base}/services/echo/proxy/thing")
        assert r.json()["method"] == "DELETE"
        # redirects keep the proxy prefix
        r = session.get(f"{base}/services/echo:80/proxy/redirect", allow_redirects=False)
        assert r.status_code == 302
        assert r.headers["Location"] == "/api/v1/namespaces/default/services/echo:80/proxy/graph"
        # responses are streamed: the first chunk arrives while the backend still holds the rest
        with session.get(f"{base}/services/echo/proxy/stream", stream=True, timeout=5) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            assert next(lines) == b"first"
            simcluster.call(echo.release.set)
            assert next(lines) == b"second"
        assert session.get(f"{sim.url}/api/v1/nodes/nope/proxy/").status_code == 404
        r = session.get(f"{sim.url}/api/v1/nodes/gpu-node-02/proxy/metrics")
        assert r.status_code == 503 and "10250" in r.json()["message"]
    finally:
        simcluster.run(echo.stop())


# -- utilisation from real CPU use -----------------------------------------------------------------


def on_cpu(pid: int) -> float:
    """Seconds `pid` has run on a CPU, by the scheduler's count (/proc/PID/schedstat, in ns)."""
    with open(f"/proc/{pid}/schedstat") as fh:
        return int(fh.read().split()[0]) / 1e9


def test_cpu_sampler_reads_real_processes() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()+3\nwhile time.time()<t: pass"])
    idle = subprocess.Popen(["sleep", "30"])
    try:
        sampler = CpuSampler()
        assert sampler.cores("young", [idle.pid]) == 0.0  # under 1 s old: a baseline, not load
        time.sleep(1.1)
        first_busy = sampler.cores("busy", [busy.pid])  # first sample: average since start
        ran_from, wall_from = on_cpu(busy.pid), time.monotonic()
        first_idle = sampler.cores("idle", [idle.pid])
        time.sleep(0.6)
        ran_to, wall_to = on_cpu(busy.pid), time.monotonic()
        busy_cores = sampler.cores("busy", [busy.pid])
        idle_cores = sampler.cores("idle", [idle.pid])
        # what the busy loop got of a CPU (the scheduler's own count: on a busy machine, less than
        # one core), as the sampler read it from its CPU times
        got = (ran_to - ran_from) / (wall_to - wall_from)
        assert first_busy > 0.0 and got > 0.0 and abs(busy_cores - got) < 0.1, (first_busy, busy_cores, got)
        assert first_idle < 0.05 and idle_cores < 0.05, (first_idle, idle_cores)
        assert sampler.cores("busy", [busy.pid]) == busy_cores  # within 0.5 s: the last value
        assert cpu_seconds([2**22 + 12345]) == (0.0, None)  # a pid that does not exist
    finally:
        for p in (busy, idle):
            p.kill()
            p.wait()


def _has_kubelet() -> bool:
    try:
        import simcluster.node.kubelet  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _has_kubelet(), reason="simcluster.kubelet is not available")
@pytest.mark.simcluster(nodes=1, gpus_per_node=2, components=("kubelet", "dcgm"))
def test_utilisation_follows_pod_cpu(simcluster: Any, core: Any) -> None:
    sim = simcluster.sim
    busy = "import time\nt=time.time()+2.5\nwhile time.time()<t: pass\ntime.sleep(600)"
    core.create_namespaced_pod("default", gpu_pod("busy", "gpu-node-01", 1, command=["python3", "-c", busy]))
    core.create_namespaced_pod("default", gpu_pod("idle", "gpu-node-01", 1, command=["sleep", "infinity"]))
    wait_for(lambda: len(simcluster.call(sim.dcgm.assignments, "gpu-node-01")) == 2, timeout=10)

    def readings() -> dict[str, float]:
        util = series(scrape(simcluster, "gpu-node-01"), "DCGM_FI_DEV_GPU_UTIL")
        return {lbl["pod"]: v for lbl, v in util.values()}

    seen = wait_for(lambda: (lambda r: r if r.get("busy", 0) > 0 else None)(readings()), timeout=5, interval=0.3)
    assert seen["idle"] == 0
    time.sleep(0.6)
    assert readings()["idle"] == 0
    for name in ("busy", "idle"):
        core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
