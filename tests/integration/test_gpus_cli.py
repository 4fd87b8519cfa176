"""`ranks gpus` on the demo (#30): every GPU of every node with its owner, the idle ones marked, the
node whose exporter has no pod labels attributed by UUID and named by `--doctor` with the fields it
lacks; against a real Prometheus scraping the exporters (as a ServiceMonitor does, with a
relabelling that drops a field), the same figures as the exporters read directly; the failing
job's first failure names the XID its rank's GPU raised."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.scenarios.demo_workloads import demo_workloads
from tests.cli_inprocess import run_cli
from tests.prometheus_server import prometheus_server
from tests.waiting import wait_for

DROPPED = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"  # the field Prometheus' relabelling drops
BARE = "h100-node-04"  # the demo's node whose exporter has no pod labels


def _pod(sim: Any, ns: str, name: str) -> dict[str, Any] | None:
    st = sim.store.find(("", "pods"), ns, name)
    return st.obj if st is not None else None


def _phase(sim: Any, ns: str, name: str) -> str:
    pod = _pod(sim, ns, name)
    return ((pod or {}).get("status") or {}).get("phase", "")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ThreadedSimCluster, Any]]:
    """The demo with a real Prometheus scraping every exporter from the start (1 s)."""
    from simcluster.gpu.prometheus import dcgm_scrape_config

    base = tmp_path_factory.mktemp("gpus")
    with sim_in_thread(scenario="demo", workdir=base / "sim") as t:
        sim = t.sim
        wait_for(lambda: len(t.call(sim.dcgm.targets)) == 8, 30, "the 8 GPU nodes' exporters")
        cfg = t.call(dcgm_scrape_config, sim, style="servicemonitor")
        cfg["scrape_configs"][0]["metric_relabel_configs"] = [
            {"source_labels": ["__name__"], "regex": DROPPED, "action": "drop"}]
        # a pod on the node whose exporter has no pod labels (the demo's jobs leave it free)
        t.call(sim.apply, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notebook", "namespace": "research"},
                           "spec": {"nodeName": BARE, "containers": [{
                               "name": "main", "image": "python:3.12", "command": ["sleep", "infinity"],
                               "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}})
        with prometheus_server(cfg, base / "prom") as prom:
            prom.wait_for("up == 1", lambda r: len(r) == 8, timeout=60)
            # bert-crash runs again under Prometheus' eye: on a loaded machine, its rank's XID
            # (5 s after it starts) can come and go before Prometheus is up
            old = _pod(sim, "runai-team-b", "bert-crash-worker-1")
            old_uid = (old or {}).get("metadata", {}).get("uid")
            r = run_cli("delete", "bert-crash", "-p", "team-b", "--yes", "--kubeconfig", str(sim.kubeconfig_path))
            assert r.code == 0, r.err
            wait_for(lambda: _pod(sim, "runai-team-b", "bert-crash-worker-1") is None and sim.store.find(
                ("kubeflow.org", "pytorchjobs"), "runai-team-b", "bert-crash") is None, 120, "bert-crash gone")
            bert = next(w for w in demo_workloads() if w["metadata"]["name"] == "bert-crash")
            t.call(sim.apply, bert)
            # the failing rank has exited (the new run's), the demo's long runs hold their GPUs
            wait_for(lambda: (p := _pod(sim, "runai-team-b", "bert-crash-worker-1")) is not None
                     and p["metadata"].get("uid") != old_uid and _phase(sim, "runai-team-b", "bert-crash-worker-1")
                     == "Failed", 120, "bert-crash's rank 2 to fail")
            # ... and Prometheus has scraped its GPU freed (read directly, the exporters say so at once)
            prom.wait_for('DCGM_FI_DEV_GPU_UTIL{exported_pod="bert-crash-worker-1"}', lambda r: not r, timeout=60)
            wait_for(lambda: all(_phase(sim, "runai-team-a", p) == "Running" for p in (
                "hvd-interactive-worker-0", "hvd-interactive-worker-1", "pt-interactive-master-0",
                "llama-finetune-master-0")) and _phase(sim, "research", "notebook") == "Running", 90,
                     "the sessions, llama-finetune and the notebook to run")
            yield t, prom


def _gpus(*args: str, kubeconfig: Path) -> dict[str, Any]:
    r = run_cli("gpus", "-A", "-o", "json", "--kubeconfig", str(kubeconfig), *args)
    assert r.code == 0, r.err
    return json.loads(r.out)


def _held(t: ThreadedSimCluster) -> dict[tuple[str, int, str], str]:
    """(node, gpu, instance) -> pod, as the kubelet's device table holds the GPUs (MIG: 2 a GPU)."""
    sim = t.sim
    out = {}
    for node, held in t.call(lambda: {n: dict(h) for n, h in sim.devices.nodes.items()}).items():
        lay = sim.dcgm.exporters[node].layout
        for index, alloc in held.items():
            gpu, inst = lay.device(index)
            out[(node, gpu, "" if inst is None else str(inst))] = alloc.pod
    return out


def _capacity(t: ThreadedSimCluster) -> int:
    return sum(int(st.obj["status"]["capacity"]["nvidia.com/gpu"]) for st in t.call(
        lambda: list(t.sim.store.items(("", "nodes")))))


def test_every_gpu_of_every_node_with_its_owner(demo: tuple[ThreadedSimCluster, Any]) -> None:
    t, _ = demo
    data = _gpus(kubeconfig=t.sim.kubeconfig_path)
    gpus = {(g["node"], g["index"], g["instance"] or ""): g for g in data["gpus"]}
    assert len(data["gpus"]) == len(gpus) == _capacity(t) == 48
    held = _held(t)
    owned = {k: g["owner"]["pod"] for k, g in gpus.items() if g["owner"] is not None}
    # (a pod that ended between the two reads may still be listed by one of them)
    assert {k: p for k, p in owned.items() if k in held} == {k: p for k, p in held.items() if k in owned}
    assert set(held) - set(owned) <= {k for k in held if not held[k].startswith(("hvd-", "pt-", "llama-", "notebook"))}
    by_pod = {g["owner"]["pod"]: g for g in gpus.values() if g["owner"]}
    w = by_pod["hvd-interactive-worker-0"]
    assert (w["owner"]["workload"], w["owner"]["rank"], w["owner"]["project"], w["owner"]["user"]) == (
        "MPIJob/hvd-interactive", 0, "team-a", "alice")
    assert "idle" in w["flags"] and "idle" not in by_pod["llama-finetune-master-0"]["flags"]
    # h100-node-04's exporter has no pod labels: its GPUs are told by the UUIDs the pods report
    bare = [g for g in gpus.values() if g["node"] == BARE]
    assert sorted(g["owner"]["pod"] for g in bare if g["owner"]) == ["notebook", "notebook"]
    assert all(g["owner"] is None or g["owner"]["by"] == "uuid" for g in bare)
    assert all(g["owner"]["by"] == "labels" for g in gpus.values() if g["owner"] and g["node"] != BARE)
    # a field its exporter does not serve is null there (never 0), and said once
    assert all(g["power_limit_w"] is None and g["throttle"] is None for g in bare)
    assert all(g["power_limit_w"] for g in gpus.values() if g["node"] != BARE)
    assert data["not_exported"]["reasons"] == [BARE]
    mig = sorted((g["index"], g["instance"], g["mig_profile"]) for g in gpus.values() if g["node"] == "a100-node-04")
    assert mig == [(0, "1", "3g.40gb"), (0, "2", "3g.40gb"), (1, "1", "3g.40gb"), (1, "2", "3g.40gb")]
    # the badly cooled GPU under llama-finetune runs hot once its rank's load is up, its clock held
    # down, and says why
    def hot_gpu() -> dict[str, Any] | None:
        g = next(g for g in _gpus(kubeconfig=t.sim.kubeconfig_path)["gpus"]
                 if (g["node"], g["index"], g["instance"] or "") == ("h100-node-01", 1, ""))
        return g if "hot" in g["flags"] else None
    hot = wait_for(hot_gpu, timeout=60, what="h100-node-01's GPU 1 running hot")
    assert "throttled" in hot["flags"] and "sw_thermal" in hot["throttle"]

    r = run_cli("gpus", "--doctor", "--kubeconfig", str(t.sim.kubeconfig_path))
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert any(BARE in ln and "pod/namespace labels" in ln and "by UUID" in ln for ln in lines), r.out
    assert any("DCGM_FI_DEV_CLOCKS_EVENT_REASONS" in ln and BARE in ln for ln in lines), r.out

    r = run_cli("gpus", "-A", "--idle", "--node", "a100-node-01", "--kubeconfig", str(t.sim.kubeconfig_path))
    assert r.code == 0, r.err
    rows = r.out.splitlines()[1:]
    assert rows and all(row.split()[0] == "a100-node-01" and row.split()[-1] == "idle" for row in rows)


def test_prometheus_gives_the_figures_of_the_exporters(demo: tuple[ThreadedSimCluster, Any]) -> None:
    t, prom = demo
    kc = t.sim.kubeconfig_path
    direct = {(g["node"], g["index"], g["instance"]): g for g in _gpus(kubeconfig=kc)["gpus"]}
    labelled = sum(1 for g in direct.values() if g["owner"] and g["node"] != BARE)
    prom.wait_for(f'count(DCGM_FI_DEV_GPU_UTIL{{exported_pod!=""}}) >= {labelled}', lambda r: bool(r), timeout=30)
    through = _gpus("--prometheus", prom.url, kubeconfig=kc)
    assert through["source"].startswith("Prometheus at ")
    seen = {(g["node"], g["index"], g["instance"]): g for g in through["gpus"]}
    assert seen.keys() == direct.keys()
    stable = ("uuid", "model", "mig_profile", "mem_total_mib", "power_limit_w", "allocated", "xid", "ecc_dbe")
    for key, g in direct.items():
        assert {k: seen[key][k] for k in stable} == {k: g[k] for k in stable}, key
        assert (seen[key]["owner"] or {}).get("pod") == (g["owner"] or {}).get("pod"), key
    # constant profiles read the same either way (xgb-churn: 35 and 33 %, resnet-tf's chief 72 %)
    for pod, util in (("xgb-churn-master-0", 35), ("xgb-churn-worker-0", 33), ("resnet-tf-chief-0", 72)):
        assert [g["util"] for g in seen.values() if (g["owner"] or {}).get("pod") == pod] == [util]
    # the doctor: the field the relabelling drops, said as such
    r = run_cli("gpus", "--doctor", "--prometheus", prom.url, "--kubeconfig", str(kc))
    assert r.code == 0, r.err
    assert any(DROPPED in ln and "relabel" in ln for ln in r.out.splitlines()), r.out


def test_the_first_failure_names_the_xid(demo: tuple[ThreadedSimCluster, Any]) -> None:
    t, prom = demo
    kc = str(t.sim.kubeconfig_path)
    r = run_cli("why", "bert-crash", "-p", "team-b", "--prometheus", prom.url, "--kubeconfig", kc)
    assert r.code == 0, r.err
    line = next((ln for ln in r.out.splitlines() if "XID 79" in ln), "")
    assert "Rank 2's GPU " in line and "before it exited" in line and "fallen off the bus" in line, r.out
    r = run_cli("get", "bert-crash", "-p", "team-b", "-o", "json", "--prometheus", prom.url, "--kubeconfig", kc)
    assert r.code == 0, r.err
    gpu = json.loads(r.out)["first_failure"]["gpu"]
    assert gpu.startswith("rank 2's GPU ") and "XID 79" in gpu
