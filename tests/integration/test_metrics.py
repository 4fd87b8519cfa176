"""GpuMetrics against real parts: simcluster's DCGM exporters, a real Prometheus (Debian's binary)
scraping them, the API server's service and pod proxies, the official client to set things up."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from monitors.metrics import GpuMetrics, MetricsSnapshot, MetricState, SourceKind
from monitors.prom_discovery import ApiEndpoint
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.gpu.prometheus import (
    PrometheusServer,
    dcgm_scrape_config,
    prometheus_binary,
    register_prometheus_service,
)
from simcluster.node.proxy import portmap
from tests.waiting import until, wait_for

GPU = pytest.mark.simcluster(nodes=2, gpus_per_node=4, components=("dcgm", "proxy"))
NS = "team-a"
A100_MIB = 81920  # gpu_nodes' default product


def gpu_pod(name: str, node: str, gpus: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "pytorch", "image": "python:3.12", "command": ["sleep", "infinity"],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
    }


async def wait_snapshot(gm: GpuMetrics, accept: Callable[[MetricsSnapshot], bool],
                        timeout: float = 10.0) -> MetricsSnapshot:
    """Refresh until a snapshot is accepted (returned)."""
    snap: MetricsSnapshot | None = None

    async def accepted() -> bool:
        nonlocal snap
        snap = await gm.refresh()
        return accept(snap)

    await until(accepted, timeout, "an accepted snapshot", interval=0.25, detail=lambda: f"last snapshot: {snap}")
    assert snap is not None
    return snap


def util_of(snap: MetricsSnapshot, pod: str) -> float | None:
    pm = snap.pods.get((NS, pod))
    return pm.sample.util if pm is not None and pm.sample is not None and pm.state is MetricState.OK else None


def make_gpu_pods(threaded: Any) -> dict[str, str]:
    """Running GPU pods with deterministic profiles, their GPUs assigned by the exporters
    (created with the official client, as a user would)."""
    from kubernetes import client, config

    sim = threaded.sim
    wait_for(lambda: len(threaded.call(sim.dcgm.targets)) == 2)
    api = config.new_client_from_config(config_file=str(sim.kubeconfig_path))
    try:
        core = client.CoreV1Api(api)
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        pods = {
            "w-0": gpu_pod("w-0", "gpu-node-01", 2, {"simcluster.ranks/gpu-util": "85",
                                                     "simcluster.ranks/gpu-mem-mib": "20000"}),
            "w-1": gpu_pod("w-1", "gpu-node-02", 2, {"simcluster.ranks/gpu-util": "85,45",
                                                     "simcluster.ranks/gpu-xid": "79"}),
        }
        for name, body in pods.items():
            core.create_namespaced_pod(NS, body)
            st = core.read_namespaced_pod_status(name, NS)
            st.status.phase = "Running"
            core.replace_namespaced_pod_status(name, NS, st)
    finally:
        api.close()
    for node in ("gpu-node-01", "gpu-node-02"):
        wait_for(lambda node=node: threaded.call(sim.dcgm.assignments, node))
    return {"w-0": "gpu-node-01", "w-1": "gpu-node-02"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    """One cluster for the Prometheus tests (Prometheus needs ~5 s to pick up its targets, so the
    two servers below are started once, together)."""
    with sim_in_thread(nodes=2, gpus_per_node=4, components=("dcgm", "proxy"),
                       workdir=tmp_path_factory.mktemp("sim")) as threaded:
        make_gpu_pods(threaded)
        yield threaded


@pytest.fixture(scope="module")
def proms(cluster: ThreadedSimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, PrometheusServer]]:
    """Two real Prometheus servers scraping the exporters every second: ``static`` keeps the
    exporter's namespace/pod labels, ``servicemonitor`` turns them into exported_* (no honor_labels)."""
    binary = prometheus_binary()
    if binary is None:
        pytest.fail("prometheus is not installed: run scripts/system-deps.sh (make test does)")
    sim = cluster.sim
    servers = {
        style: PrometheusServer(cluster.call(lambda style=style: dcgm_scrape_config(sim, style=style)),
                                tmp_path_factory.mktemp(f"prom-{style}"), binary=binary)
        for style in ("static", "servicemonitor")
    }
    try:
        for srv in servers.values():
            srv.start()
        yield servers
    finally:
        for srv in servers.values():
            srv.stop()


def endpoint(threaded: Any, tmp_path: Path, token: str) -> ApiEndpoint:
    """The user's credentials as the lead's connection module hands them over."""
    ca = tmp_path / "ca.pem"
    ca.write_bytes(threaded.sim.ca_pem)
    return ApiEndpoint(threaded.sim.url, {"Authorization": f"Bearer {token}"}, verify=str(ca))


async def test_prometheus_url_values_and_history(proms: dict[str, PrometheusServer]) -> None:
    prom = proms["static"]  # plain namespace/pod labels
    async with GpuMetrics(prom.url, interval=1.0, timeout=5.0, history_window=60.0) as gm:
        src = await gm.resolve_source()
        assert src.kind is SourceKind.PROMETHEUS and str(src) == f"prometheus({prom.url})"
        gm.set_shown([(NS, "w-0"), (NS, "w-1"), (NS, "not-there")], [NS], all_nodes=True)
        snap = await wait_snapshot(gm, lambda s: util_of(s, "w-0") is not None and util_of(s, "w-1") is not None
                                   and len(s.nodes) == 2)
        assert snap.state is MetricState.OK and snap.reason == ""
        s0 = snap.pods[(NS, "w-0")].sample
        assert s0 is not None
        assert s0.util == 85.0 and s0.gpus == 2  # the constant profile, exactly
        assert s0.sm_active == pytest.approx(85.0)
        assert s0.mem_used_mib == 20000.0 and s0.mem_total_mib == A100_MIB
        assert s0.power_w == pytest.approx(58.0 + (400.0 - 58.0) * 0.85, abs=0.01)
        assert s0.temp_c == round(31 + 44 * 0.85) and s0.xid == 0
        s1 = snap.pods[(NS, "w-1")].sample
        assert s1 is not None and s1.util == 65.0 and s1.gpus == 2 and s1.xid == 79
        missing = snap.pods[(NS, "not-there")]
        assert missing.state is MetricState.NO_DATA and missing.sample is None
        n1 = snap.nodes["gpu-node-01"]
        assert n1.state is MetricState.OK and n1.sample is not None
        assert n1.sample.gpus == 4 and n1.sample.util == pytest.approx((85 + 85 + 0 + 0) / 4)
        assert snap.queries == 2 * 9 + 1  # one query per field for pods, one per field for nodes, one range
        # history: one range query for the shown pods, step = interval
        await wait_snapshot(gm, lambda s: len(gm.history(NS, "w-0")) >= 3, timeout=8)
        hist = gm.history(NS, "w-0")
        assert {v for _, v in hist} == {85.0}
        assert all(b - a == pytest.approx(1.0) for (a, _), (b, _) in itertools.pairwise(hist))
        assert gm.history(NS, "not-there") == []


async def test_service_proxy_exported_labels_kill_and_restart(
    cluster: ThreadedSimCluster, proms: dict[str, PrometheusServer], tmp_path: Path
) -> None:
    sim = cluster.sim
    prom = proms["servicemonitor"]  # workload labels are exported_*, as under a ServiceMonitor
    cluster.call(register_prometheus_service, sim, prom.host, prom.port)
    token = sim.add_namespace_reader("viewer", [NS, "monitoring"])  # may not list services cluster-wide
    async with GpuMetrics(api=endpoint(cluster, tmp_path, token), interval=0.5, timeout=3.0,
                          discovery_namespaces=[NS]) as gm:
        src = await gm.resolve_source()
        assert src.kind is SourceKind.PROMETHEUS_VIA_APISERVER, src.notes
        assert str(src) == "prometheus-via-apiserver(monitoring/prometheus-k8s)"
        assert src.url.endswith("/api/v1/namespaces/monitoring/services/prometheus-k8s:9090/proxy")
        assert any("HTTP 403" in n for n in src.notes)
        gm.set_shown([(NS, "w-0"), (NS, "w-1")], [NS, "gpu-operator"])
        snap = await wait_snapshot(gm, lambda s: util_of(s, "w-0") is not None and util_of(s, "w-1") is not None)
        assert util_of(snap, "w-0") == 85.0 and util_of(snap, "w-1") == 65.0
        assert snap.pods[(NS, "w-0")].sample.gpus == 2  # type: ignore[union-attr]
        # idle GPUs carry the exporter pod's own namespace/pod: never shown as a pod's GPUs
        assert not [k for k in snap.pods if k[0] == "gpu-operator"], list(snap.pods)

        prom.stop()  # killed: the API server's proxy answers 503
        snap = await gm.refresh()
        assert snap.state is MetricState.UNAVAILABLE
        assert "connection refused" in snap.reason and "HTTP 503" in snap.reason, snap.reason
        pm = snap.pods[(NS, "w-0")]
        assert pm.state in (MetricState.OK, MetricState.STALE) and pm.sample is not None  # last value kept
        assert pm.sample.util == 85.0 and "connection refused" in pm.reason
        await asyncio.sleep(1.6)  # > 3 intervals
        snap = await gm.refresh()
        assert snap.state is MetricState.UNAVAILABLE
        assert snap.pods[(NS, "w-0")].state is MetricState.STALE

        # restarted on the same port with the same storage
        proms["servicemonitor"] = prom = PrometheusServer(prom.cfg, prom.workdir, port=prom.port,
                                                          binary=prom.binary)
        prom.start()
        snap = await wait_snapshot(gm, lambda s: s.state is MetricState.OK and util_of(s, "w-0") == 85.0)
        pm = snap.pods[(NS, "w-0")]
        assert pm.reason == "" and pm.sample is not None and pm.sample.at == snap.at


@GPU
async def test_exporter_scrape_fallback(simcluster: Any, tmp_path: Path) -> None:
    """No Prometheus service in this cluster: the exporters are scraped through the pod proxy."""
    make_gpu_pods(simcluster)
    sim = simcluster.sim
    async with GpuMetrics(api=endpoint(simcluster, tmp_path, sim.admin_token), interval=1.0,
                          timeout=3.0) as gm:
        gm.set_shown([(NS, "w-0"), (NS, "w-1")], [NS], all_nodes=True)
        src = await gm.resolve_source()
        assert src.kind is SourceKind.EXPORTER_SCRAPE and str(src) == "exporter-scrape"
        assert {e.node for e in src.exporters} == {"gpu-node-01", "gpu-node-02"}
        assert all(e.namespace == "gpu-operator" and e.port == 9400 for e in src.exporters)
        assert "pod proxy" in src.description and "no Prometheus service found" in src.notes
        snap = await gm.refresh()
        assert snap.state is MetricState.OK and snap.queries == 2
        s0 = snap.pods[(NS, "w-0")].sample
        assert s0 is not None and s0.util == 85.0 and s0.gpus == 2 and s0.mem_used_mib == 20000.0
        assert s0.mem_total_mib == A100_MIB
        s1 = snap.pods[(NS, "w-1")].sample
        assert s1 is not None and s1.util == 65.0 and s1.xid == 79
        assert snap.nodes["gpu-node-02"].sample.gpus == 4  # type: ignore[union-attr]
        assert snap.nodes["gpu-node-02"].sample.util == pytest.approx((85 + 45) / 4)  # type: ignore[union-attr]
        await asyncio.sleep(1.0)
        await gm.refresh()
        assert [v for _, v in gm.history(NS, "w-0")] == [85.0, 85.0]

        # one exporter stops answering: a partial answer, the other node's pods stay fresh
        dead = next(e for e in src.exporters if e.node == "gpu-node-02")
        simcluster.call(portmap(sim).unregister, dead.namespace, dead.name)
        snap = await gm.refresh()
        assert snap.state is MetricState.OK and len(snap.warnings) == 1
        assert dead.name in snap.warnings[0] and "HTTP 503" in snap.warnings[0]
        assert snap.pods[(NS, "w-0")].state is MetricState.OK and snap.pods[(NS, "w-0")].reason == ""
        pm = snap.pods[(NS, "w-1")]
        assert pm.state is MetricState.OK and pm.sample is not None and pm.sample.util == 65.0  # last value
        assert "partial answer" in pm.reason and "s ago" in pm.reason

    # a user who may not read the exporters' namespace: nothing to use, said so
    token = sim.add_namespace_reader("outsider", [NS])
    async with GpuMetrics(api=endpoint(simcluster, tmp_path, token), interval=1.0, timeout=3.0) as gm:
        src = await gm.resolve_source()
        assert src.kind is SourceKind.NONE
        assert "no DCGM exporter pod found" in src.notes
        assert src.description.startswith("forbidden to this identity") and "HTTP 403" in src.description
        gm.set_shown([(NS, "w-0")], [NS])
        snap = await gm.refresh()
        assert snap.state is MetricState.UNAVAILABLE and snap.pods[(NS, "w-0")].sample is None
        # nothing to ask until it is time to look again (the dashboard then skips its refreshes)
        assert gm.nothing_to_ask()
        gm.clock = lambda: time.time() + gm.rediscover_after + 1
        assert not gm.nothing_to_ask()
