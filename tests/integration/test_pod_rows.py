"""Pods listed as Table rows (#16): the same workloads, projects and nodes as from full pods, with no
full pod LIST on the wire (simcluster's request log, Accept headers included); the dashboard's watch
brings changed pods whole, and the workload shown in detail is read whole with one label-selected LIST."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from monitors.connection import load_cluster_config
from monitors.export import node_json, project_json, workload_json
from monitors.monitor import Monitor

pytestmark = pytest.mark.simcluster(scenario="scale", nodes=40, pods=1500)
ROOT = Path(__file__).resolve().parents[2]


async def _load(kubeconfig: Path, rows: bool) -> Monitor:
    m = Monitor(load_cluster_config(str(kubeconfig)), once=True, events=False, pod_rows=rows, unsettled=False)
    await m.start()
    await m.wait_synced()
    if rows:  # as `tui.cli.loading.load_monitor` does
        await asyncio.gather(m.read_unclaimed(), m.explain_pending())
    await m.stop()
    return m


def _fraction_launchers(simcluster) -> set[tuple[str, str]]:
    """Workloads whose pods carry a Run:ai gpu-fraction their replica template does not (the scale
    scenario's launchers): a full pod counts it, a row (GPUs from the spec) cannot."""
    def scan() -> set[tuple[str, str]]:
        out = set()
        for p in simcluster.sim.store.objects(("", "pods")):
            meta = p["metadata"]
            if "gpu-fraction" in (meta.get("annotations") or {}) and \
                    meta.get("labels", {}).get("training.kubeflow.org/job-role") == "launcher":
                out.add((meta["namespace"], meta["labels"].get("training.kubeflow.org/job-name", "")))
        return out
    return simcluster.call(scan)


def test_rows_tell_the_same_workloads_projects_and_nodes_as_full_pods(simcluster):
    kc = simcluster.sim.kubeconfig_path
    full = asyncio.run(_load(kc, rows=False))
    rows = asyncio.run(_load(kc, rows=True))
    odd = _fraction_launchers(simcluster)
    now = time.time()
    assert len(full.model.workloads) > 50 and set(full.model.workloads) == set(rows.model.workloads)
    for key, w in full.model.workloads.items():
        a, b = workload_json(w, now), workload_json(rows.model.workloads[key], now)
        if (key[0], key[2]) in odd:
            a.pop("gpus_allocated"), b.pop("gpus_allocated")
        assert a == b, key
        assert [(r.pod, r.role, r.rank, r.phase, r.node, r.ready) for r in w.ranks] == \
            [(r.pod, r.role, r.rank, r.phase, r.node, r.ready) for r in rows.model.workloads[key].ranks]
    assert any(w.status == "Pending" and w.reason for w in rows.model.workloads.values())
    odd_ns = {ns for ns, _ in odd}
    for key, p in full.model.projects.items():
        a, b = project_json(p), project_json(rows.model.projects[key])
        if key in odd_ns:
            a.pop("gpus_allocated"), b.pop("gpus_allocated")
        assert a == b, key
    assert set(full.model.nodes) == set(rows.model.nodes)
    differ = [n for n in full.model.nodes if node_json(full.model.nodes[n]) != node_json(rows.model.nodes[n])]
    assert len(differ) <= len(odd)


def _ranks(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", "--kubeconfig", str(kubeconfig), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("command", [("list", "-A", "-o", "json"), ("projects", "-o", "json"),
                                     ("top", "nodes", "-o", "json")])
def test_list_projects_and_top_issue_no_full_pod_list(simcluster, command):
    t0 = time.time()
    done = _ranks(simcluster.sim.kubeconfig_path, *command)
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)
    pod_lists = [r for r in simcluster.call(simcluster.sim.requests.since, t0)
                 if r.verb == "list" and r.path.endswith("/pods")]
    # label-selected LISTs are the GPU metrics' look for DCGM exporter pods: a few pods, not all
    every = [r for r in pod_lists if not r.label_selector and not r.field_selector]
    assert every, "no LIST of every pod was seen at all"
    full = [(r.path, r.query, r.accept) for r in every if "as=Table" not in r.accept or r.representation != "Table"]
    assert not full, f"full pod LISTs: {full}"
    assert all(r.include_object == "None" for r in every)


async def test_the_watch_brings_changed_pods_whole_and_the_detail_reads_its_workload_whole(simcluster, k8s):
    kc = simcluster.sim.kubeconfig_path
    m = Monitor(load_cluster_config(str(kc)), pod_rows=True, events=False, coalesce=0.01)
    await m.start()
    try:
        await m.wait_synced()
        assert all(p.partial or p.phase not in ("Running", "Succeeded") or p.restarts for p in m.model.pods.values())
        # then, each pending workload's scheduler message (one of its pods read whole)
        for _ in range(250):
            pending = [w for w in m.model.workloads.values() if w.status == "Pending" and any(
                r.phase == "Pending" and not r.node for r in w.ranks)]
            if pending and all(w.reason != "waiting to be scheduled" for w in pending):
                break
            await asyncio.sleep(0.02)
        assert pending and all("nodes are available" in w.reason or w.reason.startswith("0/") for w in pending), \
            [w.reason for w in pending][:5]
        key = next(k for k, w in m.model.workloads.items()
                   if k[1] == "PyTorchJob" and w.status == "Running" and len(w.ranks) >= 2)
        ns = key[0]
        t0 = time.time()
        await m.load_full_pods(key)
        wl = m.model.workloads[key]
        assert all(not m.model.pods[(ns, r.pod)].partial for r in wl.ranks)
        assert all(m.model.pods[(ns, r.pod)].command for r in wl.ranks)
        lists = [r for r in simcluster.call(simcluster.sim.requests.since, t0) if r.path.endswith("/pods")]
        assert len(lists) == 1 and "labelSelector=training.kubeflow.org" in lists[0].query.replace("%2F", "/")

        # a pod of another workload fails: its watch event carries the exit code the flight recorder keeps
        other = next(k for k, w in m.model.workloads.items() if k != key and k[1] == "PyTorchJob"
                     and w.status == "Running")
        victim = m.model.workloads[other].ranks[0].pod
        heard = []
        m.model.exit_listeners.append(heard.append)

        client, api = k8s
        core = client.CoreV1Api(api)
        pod = await asyncio.to_thread(core.read_namespaced_pod, victim, other[0])
        name0 = pod.spec.containers[0].name
        body = {"status": {"phase": "Failed", "containerStatuses": [{
            "name": name0, "ready": False, "restartCount": 0, "image": "x", "imageID": "", "started": False,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-23T10:00:00Z"}},
        }]}}
        await asyncio.to_thread(core.patch_namespaced_pod_status, victim, other[0], body)
        for _ in range(200):
            if any(p.name == victim and any(e.exit_code == 137 for e in p.exits) for p in heard):
                break
            await asyncio.sleep(0.02)
        mine = [p for p in heard if p.name == victim]
        assert mine and any(e.exit_code == 137 for e in mine[-1].exits)
        assert not m.model.pods[(other[0], victim)].partial
    finally:
        await m.stop()


def test_gpus_of_pods_outside_workloads_are_counted(simcluster, k8s):
    """A running GPU pod no workload claims (an inference server's) is read whole: its node, its
    project and the list count its GPUs as they do from full pods."""
    client, api = k8s
    core = client.CoreV1Api(api)
    node = next(n for n in asyncio.run(_load(simcluster.sim.kubeconfig_path, rows=False)).model.nodes)
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "serve-7f9c-abcde", "namespace": "ml-research",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "serve-7f9c", "uid": "rs-1",
                             "controller": True}]},
        "spec": {"nodeName": node, "containers": [{"name": "serve", "image": "x", "resources": {
            "limits": {"nvidia.com/gpu": "2"}}}]}}
    core.create_namespaced_pod("ml-research", body)
    core.patch_namespaced_pod_status("serve-7f9c-abcde", "ml-research", {"status": {"phase": "Running"}})
    full = asyncio.run(_load(simcluster.sim.kubeconfig_path, rows=False))
    rows = asyncio.run(_load(simcluster.sim.kubeconfig_path, rows=True))
    assert rows.model.nodes[node].gpus_allocated == full.model.nodes[node].gpus_allocated
    assert rows.model.projects["ml-research"].gpus_allocated == full.model.projects["ml-research"].gpus_allocated
    key = ("ml-research", "ReplicaSet", "serve-7f9c")
    assert key in full.model.workloads and key in rows.model.workloads
    assert not rows.model.pods[("ml-research", "serve-7f9c-abcde")].partial


async def test_the_first_picture_explains_a_bounded_number_of_pending_jobs_then_the_rest(simcluster):
    """A crowded cluster's thousands of pending jobs do not hold up the dashboard's first picture: it
    waits for the scheduler message of the first `most` (by namespace and name), the rest follow."""
    m = Monitor(load_cluster_config(str(simcluster.sim.kubeconfig_path)), once=True, events=False, pod_rows=True,
                unsettled=False)
    await m.start()
    try:
        await m.wait_synced()
        def told(k: tuple[str, str, str]) -> bool:  # the scheduler's message is on one of its ranks
            return any(r.message for r in m.model.workloads[k].ranks)

        pending = sorted(k for k, w in m.model.workloads.items() if w.status == "Pending")
        assert len(pending) >= 3, "the scenario has pending workloads"
        assert not any(told(k) for k in pending), "rows carry no scheduler message"
        m.pending_left = await m.explain_pending(most=2)
        assert m.pending_left
        assert [k for k in pending if told(k)] == pending[:2]
        await m.explain_rest()
        assert not m.pending_left
        assert all(told(k) for k in pending)
        assert not await m.explain_pending(most=2)  # nothing left to read
    finally:
        await m.stop()
