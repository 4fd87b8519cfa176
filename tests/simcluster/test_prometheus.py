"""A real Prometheus scraping simcluster's DCGM exporters, queried directly and through the API server.

Prometheus 2.42 applies new scrape targets only every 5 s (its discovery manager's throttle), so
one cluster and one Prometheus serve the whole module.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest

from simcluster.cluster import ThreadedSimCluster
from simcluster.gpu.prometheus import (
    PrometheusServer,
    config,
    dcgm_scrape_config,
    register_prometheus_service,
    unregister_prometheus_service,
)
from tests.prometheus_server import prometheus_server
from tests.simcluster.test_dcgm import gpu_pod, raw_get, set_running
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def simcluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    """One cluster for the module (overrides the plugin's per-test fixture)."""
    t = ThreadedSimCluster(workdir=tmp_path_factory.mktemp("sim"), nodes=2, gpus_per_node=2, components=("dcgm",))
    t.start()
    try:
        yield t
    finally:
        t.stop()


@pytest.fixture(scope="module")
def gpu_pods(simcluster: ThreadedSimCluster) -> None:
    """ns/p: 2 GPUs at a constant 85 %; ns/q: 2 GPUs at 40 % and 60 % (per-GPU profile)."""
    from kubernetes import client as kclient
    from kubernetes import config as kconfig

    api = kconfig.new_client_from_config(config_file=str(simcluster.sim.kubeconfig_path))
    core = kclient.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "ns"}})
    core.create_namespaced_pod("ns", gpu_pod("p", "gpu-node-01", 2, ns="ns",
                                             annotations={"simcluster.ranks/gpu-util": "85"}))
    core.create_namespaced_pod("ns", gpu_pod("q", "gpu-node-02", 2, ns="ns",
                                             annotations={"simcluster.ranks/gpu-util": "40,60"}))
    for name in ("p", "q"):
        set_running(core, name, "ns")
    sim = simcluster.sim
    wait_for(lambda: all(len(simcluster.call(sim.dcgm.assignments, n)) == 2 for n in ("gpu-node-01", "gpu-node-02")), timeout=5)
    api.close()


@pytest.fixture(scope="module")
def prometheus(simcluster: ThreadedSimCluster, gpu_pods: None,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """Prometheus with two jobs on the same exporters: plain static targets, and targets labelled
    the way a ServiceMonitor labels them (so the workload's labels become exported_*)."""
    sim = simcluster.sim
    static = simcluster.call(dcgm_scrape_config, sim, job="gpu-metrics")
    monitor = simcluster.call(dcgm_scrape_config, sim, job="gpu-metrics-sm", style="servicemonitor")
    cfg = config(static["scrape_configs"] + monitor["scrape_configs"])
    with prometheus_server(cfg, tmp_path_factory.mktemp("prometheus")) as prom:
        prom.wait_for_targets(4)  # 2 nodes × 2 jobs
        yield prom


def values(result: list[dict[str, Any]]) -> dict[tuple[str, ...], float]:
    out = {}
    for r in result:
        m = r["metric"]
        out[(m.get("namespace", ""), m.get("pod", ""), m.get("gpu", ""))] = float(r["value"][1])
    return out


def test_prometheus_scrapes_dcgm_exporters(simcluster: Any, prometheus: PrometheusServer) -> None:
    targets = prometheus.active_targets()
    assert {t["labels"]["node"] for t in targets} == {"gpu-node-01", "gpu-node-02"}
    assert {t["scrapePool"] for t in targets} == {"gpu-metrics", "gpu-metrics-sm"}
    q = 'DCGM_FI_DEV_GPU_UTIL{job="gpu-metrics",namespace="ns",pod="p"}'
    result = prometheus.wait_for(q, lambda r: len(r) == 2)
    assert values(result) == {("ns", "p", "0"): 85.0, ("ns", "p", "1"): 85.0}
    assert {r["metric"]["Hostname"] for r in result} == {"gpu-node-01"}
    assert {r["metric"]["modelName"] for r in result} == {"NVIDIA A100-SXM4-80GB"}
    per_pod = prometheus.query('avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{job="gpu-metrics",pod!=""})')
    assert {(r["metric"]["namespace"], r["metric"]["pod"]): float(r["value"][1]) for r in per_pod} == {
        ("ns", "p"): 85.0, ("ns", "q"): 50.0,
    }
    free = prometheus.query('DCGM_FI_DEV_FB_FREE{job="gpu-metrics",pod=""}')
    assert len(free) == 0  # every GPU of both nodes is taken
    used_frac = prometheus.query(
        'DCGM_FI_DEV_FB_USED{job="gpu-metrics",pod="q"} / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)')
    assert len(used_frac) == 2 and all(0 < float(r["value"][1]) < 1 for r in used_frac)
    # through a ServiceMonitor-like target, the workload labels are renamed exported_*
    sm = prometheus.query('DCGM_FI_DEV_GPU_UTIL{job="gpu-metrics-sm",exported_namespace="ns",exported_pod="p"}')
    assert len(sm) == 2 and {float(r["value"][1]) for r in sm} == {85.0}
    assert {r["metric"]["namespace"] for r in sm} == {"gpu-operator"}
    assert {r["metric"]["pod"] for r in sm} == {simcluster.call(simcluster.sim.dcgm.exporter_pods)["gpu-node-01"]}
    assert {r["metric"]["exported_container"] for r in sm} == {"pytorch"}


def test_prometheus_through_the_api_server(simcluster: Any, k8s: Any, prometheus: PrometheusServer,
                                           kubectl: Any) -> None:
    _, api = k8s
    sim = simcluster.sim
    prometheus.wait_for('DCGM_FI_DEV_GPU_UTIL{job="gpu-metrics",pod="p"}', lambda r: len(r) == 2)
    pod = simcluster.call(register_prometheus_service, sim, prometheus.host, prometheus.port)
    assert pod == "prometheus-k8s-0"
    path = "/api/v1/namespaces/monitoring/services/prometheus-k8s:9090/proxy/api/v1/query"
    resp = raw_get(api, path, query=[("query", "up")])
    assert resp.status == 200, resp.data
    body = json.loads(resp.data)
    assert body["status"] == "success" and body["data"]["resultType"] == "vector"
    assert {r["value"][1] for r in body["data"]["result"]} == {"1"}
    assert len(body["data"]["result"]) == 4
    # PromQL with braces and quotes survives the query string; port by name works too
    q = 'avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL{job="gpu-metrics",namespace="ns",pod="q"})'
    resp = raw_get(api, "/api/v1/namespaces/monitoring/services/prometheus-k8s:web/proxy/api/v1/query",
                   query=[("query", q)])
    result = json.loads(resp.data)["data"]["result"]
    assert [(r["metric"], r["value"][1]) for r in result] == [({"namespace": "ns", "pod": "q"}, "50")]
    # a POSTed form query, as Prometheus clients send long queries
    resp = raw_get(api, path, method="POST", form=[("query", 'count(DCGM_FI_DEV_GPU_UTIL{job="gpu-metrics"})')],
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert resp.status == 200, resp.data
    assert json.loads(resp.data)["data"]["result"][0]["value"][1] == "4"
    # the same through the pod proxy, and with a real kubectl
    resp = raw_get(api, "/api/v1/namespaces/monitoring/pods/prometheus-k8s-0:9090/proxy/-/ready")
    assert resp.status == 200
    raw = kubectl.run("get", "--raw", path + "?" + urllib.parse.urlencode({"query": 'DCGM_FI_DEV_GPU_UTIL{pod="p"}'}))
    assert {r["value"][1] for r in json.loads(raw.stdout)["data"]["result"]} == {"85"}
    svc = kubectl.run("get", "svc", "-n", "monitoring", "prometheus-k8s", "-o", "json")
    assert json.loads(svc.stdout)["spec"]["ports"][0]["name"] == "web"
    simcluster.call(unregister_prometheus_service, sim)
    resp = raw_get(api, path, query=[("query", "up")])
    assert resp.status == 404
