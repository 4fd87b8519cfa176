"""Credentials after rotation (#26, item 7): every path to the cluster takes its credentials from
the one source (the connection's `ClusterConfig`) as each request goes out, and a 401 on any of them
reads the kubeconfig again, so a rotated token (a new one written into the kubeconfig, the old one
revoked) is picked up without a restart: the GPU metrics of a running dashboard (through the API
server's pod proxy: they copied the headers once), a log read, an exec, a port-forward, the GPU
metrics' discovery.

The informers' own path (a watch refused after a rotation) is tests/integration/test_identity.py's.
Real parts: simcluster's API server, its token authentication and DCGM exporters."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from monitors import api_paths
from monitors.connection import load_cluster_config
from monitors.dataloop import DataOptions
from monitors.gpu_feed import make_metrics
from monitors.kube import ApiProblem, KubeClient
from monitors.logs import LogEngine, LogOptions
from monitors.metrics import SourceKind
from monitors.monitor import Monitor
from sessions.exec_bridge import ExecSession
from sessions.portforward import PodStream
from simcluster.apiserver.auth import READ_VERBS, Rule
from simcluster.cluster import ThreadedSimCluster
from tests.kubeflow_objects import job, pod
from tests.waiting import pilot_wait, until
from themes import load_themes
from tui.app import RanksApp
from tui.settings import Settings

NS = "runai-team-a"
NODE = "h100-node-01"
USER = "rota"
RULES = (Rule.of(READ_VERBS), Rule.of(("create", "get"), ["pods/exec", "pods/portforward"], [""]))


def gpu_job(sim: Any, name: str, util: int, *, runnable: bool = False) -> None:
    """A one-rank PyTorchJob on a GPU of NODE whose utilisation reads `util` % (`runnable`: without a
    status, so the kubelet runs it: it says hello and sleeps)."""
    sim.apply(job("PyTorchJob", name, NS, {"Master": 1}, conditions=[("Running", "")]))
    p = pod("PyTorchJob", name, NS, "Master", 0, node=NODE, gpus=1,
            command=["sh", "-c", f"echo hello from {name}; sleep 600"])
    p["metadata"]["annotations"] = {"simcluster.ranks/gpu-util": str(util)}
    if runnable:
        p.pop("status")
    sim.apply(p)


def rotate(sim: Any, old: str, kubeconfig: Path) -> str:
    """A new token written into the user's kubeconfig, then the old one revoked (what a credential
    helper or `kubectl login` does); the watches already open stay open, as the API server's do."""
    new = sim.add_user(USER)  # (the rules stay bound to the name)
    sim.write_kubeconfig(kubeconfig, USER)
    sim.authz.expire(old)
    return new


def gpu_util(app: RanksApp, name: str) -> float | None:
    wl = app.store.workloads.get((NS, "PyTorchJob", name))
    return wl.gpu_util if wl is not None else None


@pytest.mark.simcluster(scenario="demo", components=("dcgm", "proxy"))
async def test_gpu_figures_go_on_after_the_token_is_rotated_under_a_running_dashboard(
        simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    old = simcluster.call(sim.add_user, USER, rules=RULES)
    kubeconfig = simcluster.call(sim.write_kubeconfig, tmp_path / "rota.yaml", USER)
    simcluster.call(gpu_job, sim, "before", 85)
    app = RanksApp(load_cluster_config(str(kubeconfig), None), Settings(), themes=load_themes(None),
                   data_options=DataOptions(refresh_interval=0.5))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot_wait(pilot, lambda: gpu_util(app, "before") == 85, timeout=60, what="the first GPU figures",
                         detail=lambda: (gpu_util(app, "before"), app.store.status))
        simcluster.call(rotate, sim, old, kubeconfig)
        # a job started after the rotation: its figures can only come from scrapes made since
        simcluster.call(gpu_job, sim, "after", 42)
        await pilot_wait(pilot, lambda: gpu_util(app, "after") == 42, timeout=60,
                         what="GPU figures read with the rotated token",
                         detail=lambda: (gpu_util(app, "after"), app.store.status.metrics_problem))
        assert gpu_util(app, "before") == 85
        assert app.store.status.metrics_problem == "" and app.store.status.connected, app.store.status
        assert app.return_code is None


@pytest.mark.simcluster(scenario="demo", components=("kubelet", "exec", "dcgm", "proxy"))
async def test_logs_exec_and_metrics_discovery_take_the_rotated_token(
        simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    old = simcluster.call(sim.add_user, USER, rules=RULES)
    kubeconfig = simcluster.call(sim.write_kubeconfig, tmp_path / "rota.yaml", USER)
    simcluster.call(gpu_job, sim, "talker", 60, runnable=True)
    key = (NS, "PyTorchJob", "talker")
    pod_name = "talker-master-0"
    # each path with a connection of its own, loaded before the rotation (none reads it again for another)
    for_logs, for_exec, for_gpus, for_forward = (load_cluster_config(str(kubeconfig), None) for _ in range(4))
    monitor = Monitor(for_logs, once=True)

    async def talked() -> bool:  # (before the rotation: its log has the line, so the pod runs)
        try:
            raw = await monitor.client.request("GET", api_paths.pod(NS, pod_name, "log"), accept="*/*")
        except ApiProblem:
            return False
        return b"hello from talker" in raw

    await until(talked, 60, "the job's pod running and saying hello")
    await monitor.start()
    await monitor.wait_synced(30)
    simcluster.call(rotate, sim, old, kubeconfig)
    try:
        engine = LogEngine(monitor.client, key, monitor.model, options=LogOptions(tail=5, failure_notices=False))
        await engine.start()
        await asyncio.wait_for(engine.wait(), 30)
        assert engine.failures == [], engine.failures
        assert "hello from talker" in [ln.text for ln in engine.buffer], list(engine.buffer)

        out: list[bytes] = []
        async with KubeClient(for_exec) as client:
            session = await ExecSession.open(client, NS, pod_name, ["sh", "-c", "echo exec-ok"], tty=False,
                                             stdin=False)
            outcome = await asyncio.wait_for(session.receive(lambda _ch, data: out.append(data)), 30)
            await session.close()
        assert outcome.exit_code == 0 and b"exec-ok" in b"".join(out), (outcome, out)

        async with KubeClient(for_forward) as client:  # (its own WebSocket client: a 401 asks once more too)
            stream = await PodStream.open(client, NS, pod_name, 9999)
            said = await stream.refusal(30)
            await stream.close()
        assert "error forwarding port 9999" in said and "connection refused" in said, said

        gm = make_metrics(for_gpus, interval=1.0, timeout=10.0)
        try:
            source = await gm.resolve_source()
            assert source.kind is SourceKind.EXPORTER_SCRAPE, (source, source.notes)
            gm.set_shown([(NS, pod_name)], [NS])
            snap = await gm.refresh()
            reading = snap.pods.get((NS, pod_name))
            assert reading is not None and reading.sample is not None and reading.sample.util == 60, (snap.reason, reading)
        finally:
            await gm.aclose()
    finally:
        await monitor.stop()
