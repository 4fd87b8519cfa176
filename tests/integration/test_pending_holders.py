"""#24 item 5 (first half): a job pending for GPUs that the user's own interactive session holds says
so, in `ranks why` and in the detail's pending explanation, with the session's idleness and age and
the line that frees them.

On two nodes of 4 GPUs: the user's session `hvd` (`ranks submit --interactive`, 3 workers of 1 GPU)
sits idle on one of them and another user's job fills the other; the user's unattended job of
2 x 1 GPU cannot be placed (1 GPU free).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.dashboard_kit import make_app
from tests.waiting import pilot_wait, wait_for
from tui.screens.lists import WorkloadsScreen
from tui.screens.workload import WorkloadScreen
from tui.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
NS = "runai-team-a"
HELD = re.compile(r"your interactive session hvd \(idle \d+s, started \d+s ago, 3 GPUs on gpu-node-0[12]\) holds what "
                  r"this job needs: `.*delete hvd -p team-a` frees them")


def ranks(kubeconfig: Path, *args: str, columns: int | None = None) -> subprocess.CompletedProcess[str]:
    """`ranks ARGS` piped (every line whole), or as on a terminal of `columns` columns."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_")) and k != "COLUMNS"}
    env.update(RANKS_CONFIG="", NO_COLOR="1", **({"COLUMNS": str(columns)} if columns else {}))
    r = subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                       capture_output=True, text=True, timeout=90, env=env, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert 'File "/' not in r.stderr, r.stderr
    return r


def bobs_job(ns: str = NS) -> dict[str, Any]:
    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "template": {"spec": {"containers": [{
            "name": "pytorch", "image": "img", "command": ["sh", "-c", "sleep 600"],
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "llama", "namespace": ns, "labels": {"ranks/user": "bob"}},
            "spec": {"pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(3)}}}


def setup(sim: Any) -> None:
    for node in gpu_nodes(2, 4, pool="main"):
        sim.apply(node)
    sim.apply(namespace(NS, {"runai/queue": "team-a"}))


def phases(sim: Any, prefix: str, ns: str = NS) -> list[str]:
    return [(p.get("status") or {}).get("phase", "") for p in sim.store.objects(("", "pods"), ns)
            if p["metadata"]["name"].startswith(prefix)]


def why_naming_the_idle_session(kubeconfig: Path) -> str:
    """`ranks why train -p team-a`'s output once it names the session as idle. Its GPUs read its
    pods' CPU (simcluster's DCGM), so while they start on a busy machine the session reads "in use"."""
    said: dict[str, str] = {}

    def why() -> str | None:
        out = ranks(kubeconfig, "why", "train", "-p", "team-a")
        said["out"] = out.stdout + out.stderr
        return out.stdout if out.returncode == 0 and HELD.search(out.stdout) else None

    return str(wait_for(why, 60, "ranks why naming the idle session", interval=2, detail=lambda: said.get("out")))


def text_of(widget: Static) -> str:
    content = widget.content
    return getattr(content, "plain", str(content))


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "dcgm"))
async def test_a_job_pending_on_the_user_s_session_s_gpus_names_it(simcluster, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    sim, kc = simcluster.sim, simcluster.sim.kubeconfig_path
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    simcluster.call(setup, sim)
    r = ranks(kc, "submit", "hvd", "--framework", "mpi", "-i", "img", "--workers", "3", "-g", "1", "--interactive",
              "-p", "team-a")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: simcluster.call(phases, sim, "hvd-") == ["Running"] * 4, 60, "the session running")
    simcluster.call(sim.apply, bobs_job())
    wait_for(lambda: simcluster.call(phases, sim, "llama-") == ["Running"] * 4, 60, "bob's job running")
    r = ranks(kc, "submit", "train", "--framework", "pytorch", "-i", "img", "--workers", "2", "-g", "1",
              "--command", "python train.py", "-p", "team-a")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: (p := simcluster.call(phases, sim, "train-")) and set(p) == {"Pending"}, 60, "train pending",
             detail=lambda: simcluster.call(phases, sim, "train-"))

    out = why_naming_the_idle_session(kc)
    head, *rest = out.splitlines()
    assert "held by your interactive session hvd" in head, head
    assert [line for line in rest if line.startswith("  held: ")] and "llama" not in out, out  # (not needed)
    # on a terminal of 60 columns: the words wrap at spaces, the command to paste stays whole
    narrow = ranks(kc, "why", "train", "-p", "team-a", columns=60)
    assert narrow.returncode == 0, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert all(len(line) <= 60 for line in lines if "`" not in line), narrow.stdout
    assert any(line.strip().startswith("`ranks delete hvd -p team-a`") or "`ranks delete hvd -p team-a`" in line
               for line in lines), narrow.stdout
    held = next(i for i, line in enumerate(lines) if line.startswith("  held: "))
    assert lines[held + 1].startswith("    ") and not lines[held + 1].startswith("     "), narrow.stdout
    def words(text: str) -> list[str]:
        return re.sub(r"\d+", "N", text).split()  # (the ages move on between the two reads)

    assert words(narrow.stdout) == words(out) and len(lines) > len(out.splitlines()), narrow.stdout

    app = make_app(kc, Settings(refresh_interval=1))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and app.store.synced,
                         timeout=20, what="the workloads list")
        app.open_workload((NS, "PyTorchJob", "train"))
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and bool(app.screen.query("#pending")),
                         what="train's detail")
        pending = app.screen.query_one("#pending", Static)
        await pilot_wait(pilot, lambda: HELD.search(text_of(pending).replace("\n", " ")), timeout=90,
                         what="the pending explanation naming the session", detail=lambda: text_of(pending))


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "dcgm"))
def test_why_counts_the_gpus_other_projects_hold_on_the_nodes_it_could_use(simcluster) -> None:
    """The same, bob's job in another project: `ranks why -p team-a` lists team-a alone, and said
    'all might fit, but GPUs other projects use are not counted' with no word of the session (the
    demo's converted job waiting on its own session's GPUs, others' filling the rest)."""
    sim, kc = simcluster.sim, simcluster.sim.kubeconfig_path
    simcluster.call(setup, sim)
    simcluster.call(sim.apply, namespace("runai-team-b", {"runai/queue": "team-b"}))
    r = ranks(kc, "submit", "hvd", "--framework", "mpi", "-i", "img", "--workers", "3", "-g", "1", "--interactive",
              "-p", "team-a")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: simcluster.call(phases, sim, "hvd-") == ["Running"] * 4, 60, "the session running")
    simcluster.call(sim.apply, bobs_job("runai-team-b"))
    wait_for(lambda: simcluster.call(phases, sim, "llama-", "runai-team-b") == ["Running"] * 4, 60,
             "bob's job running in team-b")
    r = ranks(kc, "submit", "train", "--framework", "pytorch", "-i", "img", "--workers", "1", "-g", "1",
              "--command", "python train.py", "-p", "team-a")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: (p := simcluster.call(phases, sim, "train-")) and set(p) == {"Pending"}, 60, "train pending",
             detail=lambda: simcluster.call(phases, sim, "train-"))
    out = why_naming_the_idle_session(kc)
    head, *rest = out.splitlines()
    assert "held by your interactive session hvd" in head, out
    assert any(line.startswith("  held: ") and HELD.search(line) for line in rest), out
    gang = next(line for line in rest if line.startswith("  gang: "))
    assert "1 more could be placed now" in gang and "might fit" not in gang and "at most" not in gang, gang
