"""#24 item 4g: a failed job whose ranks still hold GPUs says so everywhere, with the line that frees
them, and that line runs as pasted.

A PyTorchJob (cleanPodPolicy None, the default: the training-operator leaves the pods) whose worker-1
fails with restartPolicy Never: the job is Failed, its master and worker-0 run on, on 2 GPUs. The
list marks it (`holds 2 GPUs`), `ranks get` and `ranks why` say "2 ranks still running on 2 GPUs
since it failed 12s ago: `ranks delete pt-left -p team-a` frees them", the dashboard's list, detail
and cluster load say so too; the pasted line deletes the job and frees the GPUs.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.dashboard_kit import make_app
from tests.tmux_driver import Tmux
from tests.waiting import pilot_wait, wait_for
from tui.screens.cluster import ClusterScreen
from tui.screens.lists import WorkloadsScreen
from tui.screens.workload import WorkloadScreen
from tui.settings import Settings
from tui.widgets.keyed_table import KeyedTable

ROOT = Path(__file__).resolve().parents[2]
NS = "runai-team-a"
KEY = (NS, "PyTorchJob", "pt-left")
CONSOLE = Path(sys.executable).parent / "ranks"
RANKS = [str(CONSOLE)] if CONSOLE.exists() else [sys.executable, "-m", "tui.cli"]
SCRIPT = 'if [ "$RANK" = 2 ]; then sleep 2; echo "RuntimeError: boom on rank 2"; exit 1; fi; sleep 600'
HELD = re.compile(r"2 ranks still running on 2 GPUs since it failed \d+s ago: `(.+ delete pt-left -p team-a)` "
                  r"frees them")


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    out.update(RANKS_CONFIG="", NO_COLOR="1", PATH=f"{CONSOLE.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return out


def ranks(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([*RANKS, *args, "--kubeconfig", str(kubeconfig)], capture_output=True, text=True,
                       timeout=90, env=env(), cwd=ROOT, input=stdin if stdin is not None else "")
    assert 'File "/' not in r.stderr, r.stderr
    return r


def job() -> dict[str, Any]:
    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {
            "terminationGracePeriodSeconds": 1, "containers": [{
                "name": "pytorch", "image": "img", "command": ["sh", "-c", SCRIPT],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt-left", "namespace": NS},
            "spec": {"runPolicy": {"cleanPodPolicy": "None"},
                     "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)}}}


def setup(sim: Any) -> None:
    for node in gpu_nodes(2, 4, pool="main"):
        sim.apply(node)
    sim.apply(namespace(NS, {"runai/queue": "team-a"}))
    sim.apply(job())


def failed_with_survivors(sim: Any) -> bool:
    st = sim.store.find(("kubeflow.org", "pytorchjobs"), NS, "pt-left")
    conds = ((st.obj.get("status") or {}).get("conditions") or []) if st else []
    phases = {p["metadata"]["name"]: (p.get("status") or {}).get("phase") for p in sim.store.objects(("", "pods"), NS)}
    return (any(c["type"] == "Failed" and c["status"] == "True" for c in conds)
            and phases.get("pt-left-master-0") == "Running" and phases.get("pt-left-worker-0") == "Running")


def text_of(widget: Static) -> str:
    content = widget.content
    return getattr(content, "plain", str(content))


def status_of(t: KeyedTable, key: Any) -> str:
    return t.shown[key][t.labels.index("STATUS")].plain if key in t.shown else ""


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
async def test_a_failed_job_s_surviving_ranks_are_said_and_freed_as_pasted(simcluster, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    sim, kc = simcluster.sim, simcluster.sim.kubeconfig_path
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    simcluster.call(setup, sim)
    wait_for(lambda: simcluster.call(failed_with_survivors, sim), timeout=60,
             what="pt-left failed, its master and worker-0 still running")

    r = ranks(kc, "list", "-p", "team-a")
    assert r.returncode == 0 and re.search(r"pt-left\s+PyTorchJob\s+Failed \(holds 2 GPUs\)", r.stdout), r.stdout
    r = ranks(kc, "why", "pt-left", "-p", "team-a")
    assert r.returncode == 0, r.stderr
    head, *rest = r.stdout.splitlines()
    assert "2 ranks still hold 2 GPUs" in head, head
    assert any(line.startswith("  held: ") and HELD.search(line) for line in rest), r.stdout
    r = ranks(kc, "get", "pt-left", "-p", "team-a")
    assert r.returncode == 0, r.stderr
    found = HELD.search(r.stdout)
    assert found and "Still held:" in r.stdout, r.stdout
    pasted = found.group(1)

    app = make_app(kc, Settings(refresh_interval=1))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and app.store.synced,
                         timeout=20, what="the workloads list")
        lst = app.screen
        await pilot_wait(pilot, lambda: "▲ holds 2 GPUs" in status_of(lst.table, KEY), timeout=20,
                         what="the list's mark", detail=lambda: status_of(lst.table, KEY))
        assert "Failed" in status_of(lst.table, KEY)
        app.open_workload(KEY)
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and bool(app.screen.query("#failure")),
                         what="pt-left's detail")
        failure = app.screen.query_one("#failure", Static)
        await pilot_wait(pilot, lambda: HELD.search(text_of(failure)), timeout=20, what="the detail saying it",
                         detail=lambda: text_of(failure))
        app.go_back()
        await pilot.press("c")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ClusterScreen), what="the cluster load")
        note = app.screen.query_one("#nodes-note", Static)
        await pilot_wait(pilot, lambda: "2 GPUs held by failed or finished jobs" in text_of(note), timeout=20,
                         what="the cluster load saying it", detail=lambda: text_of(note))
        assert "team-a/pt-left: 2 ranks still running on 2 GPUs" in text_of(note)

    # the line, pasted in a terminal (and the deletion confirmed), frees them
    script = tmp_path / "paste.sh"
    script.write_text(f'{pasted}\necho "EXIT=$?"\nsleep 60\n')
    tmux = Tmux({**env(), "TERM": "xterm-256color"}, 200, 20, name="ranks-held")
    try:
        tmux.start(f"sh {shlex.quote(str(script))}", tmp_path)
        tmux.wait_for(lambda s: "pt-left" in s and "[y/N]" in s, timeout=60, why="the deletion's confirmation")
        tmux.type("y")
        tmux.keys("Enter")
        screen = tmux.wait_for("EXIT=", timeout=60, why="the pasted line to end")
        assert "EXIT=0" in screen, screen
    finally:
        tmux.kill()
    wait_for(lambda: not simcluster.call(lambda: [p for p in sim.store.objects(("", "pods"), NS)
                                                  if p["metadata"]["name"].startswith("pt-left-")]),
             timeout=60, what="pt-left's pods gone")
