"""The one-shot commands build only what they print (#31, item 4): `ranks top nodes` builds no
workload or rank view, `ranks projects` each workload's status alone, and `ranks list` does not rebuild the rank views of the pods it did not read
again; their answers stay those of the model that builds everything."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from monitors.connection import load_cluster_config
from monitors.export import node_json, project_json
from monitors.model import WorkloadViews
from monitors.monitor import Monitor
from tui.cli.loading import load_monitor

pytestmark = pytest.mark.simcluster(scenario="scale", nodes=40, pods=1500)
ROOT = Path(__file__).resolve().parents[2]


async def _loaded(kubeconfig: Path, workloads: WorkloadViews, what: str = "nodes") -> Monitor:
    """The monitor `ranks top nodes` (or `projects`) loads (`tui.cli.read`), with the workload views asked for."""
    m = await load_monitor(load_cluster_config(str(kubeconfig)), {}, None, nodes=what == "nodes", metrics_for=what,
                           pod_rows=True, workloads=workloads)
    await m.stop()
    return m


def test_top_nodes_builds_no_workload_view_and_tells_the_same_nodes(simcluster):
    kc = simcluster.sim.kubeconfig_path
    every = asyncio.run(_loaded(kc, workloads="full"))
    nodes_only = asyncio.run(_loaded(kc, workloads="none"))
    assert len(every.model.workloads) > 50
    assert nodes_only.model.workloads == {}
    assert len(nodes_only.model.nodes) == 40
    assert {n: node_json(v) for n, v in nodes_only.model.nodes.items()} == \
        {n: node_json(v) for n, v in every.model.nodes.items()}
    assert any(v.gpus_allocated for v in nodes_only.model.nodes.values())
    # and what the command prints is those nodes
    done = _ranks(kc, "top", "nodes", "-o", "json")
    assert sorted(orjson.dumps(r) for r in orjson.loads(done.stdout)["nodes"]) == sorted(orjson.dumps(node_json(v))
                                                            for v in every.model.nodes.values())


def test_projects_judge_each_workload_s_status_alone_and_tell_the_same_projects(simcluster):
    kc = simcluster.sim.kubeconfig_path
    every = asyncio.run(_loaded(kc, "full", "pods"))
    brief = asyncio.run(_loaded(kc, "status", "pods"))
    assert brief.model.workloads == {}
    assert brief.model.statuses == {k: w.status for k, w in every.model.workloads.items()}
    assert {"Running", "Pending", "Degraded"} <= set(brief.model.statuses.values())
    want = sorted(orjson.dumps(project_json(p)) for p in every.model.projects.values())
    assert sorted(orjson.dumps(project_json(p)) for p in brief.model.projects.values()) == want
    for command in (("projects", "-o", "json"), ("top", "projects", "-o", "json")):
        done = _ranks(kc, *command)
        assert sorted(orjson.dumps(r) for r in orjson.loads(done.stdout)["projects"]) == want, command


def _ranks(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "tui.cli", "--kubeconfig", str(kubeconfig), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


async def test_pods_read_whole_after_the_first_picture_rebuild_only_their_own_ranks(simcluster):
    """A one-shot monitor reads one pod of each pending workload whole (its scheduler message): the
    workloads rebuilt then keep the rank views of their other pods (cached, not built again)."""
    m = Monitor(load_cluster_config(str(simcluster.sim.kubeconfig_path)), once=True, events=False, pod_rows=True,
                unsettled=False)
    await m.start()
    try:
        await m.wait_synced()
        pending = {k: w for k, w in m.model.workloads.items() if w.status == "Pending" and len(w.ranks) >= 2}
        assert len(pending) >= 3, "the scenario has pending workloads of several pods"
        await m.explain_pending()
        for key, before in pending.items():
            after = m.model.workloads[key]
            assert after is not before and after.reason != "waiting to be scheduled"
            read = [r for r in after.ranks if not m.model.pods[(key[0], r.pod)].partial]
            assert len(read) == 1, key
            old = {r.pod: r for r in before.ranks}
            assert all(r is old[r.pod] for r in after.ranks if r.pod != read[0].pod), key
    finally:
        await m.stop()
