"""Converting a session whose GPUs the new job needs (issue #24, item 5, second half): convert says,
before it submits, that the job would wait and on whom (its own session first), offers deleting
the session once the job is created, and the job then starts; the dashboard's convert screen
says the same and starts with that box ticked. Against simcluster with two nodes (2 and 3 GPUs), all
held by the user's two idle sessions: the one converted is named first, not the bigger one."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Checkbox, Static

from simcluster.scenarios.nodes import gpu_node
from tests.dashboard_kit import make_app
from tests.waiting import pilot_wait, wait_for
from tui.screens.dialogs import ConvertScreen
from tui.screens.lists import WorkloadsScreen
from tui.settings import Settings

pytestmark = pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "exec"))
ROOT = Path(__file__).resolve().parents[2]
RANKS = [sys.executable, "-m", "tui.cli"]


def env_of(sim: Any, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(KUBECONFIG=str(sim.kubeconfig_path), HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"),
               XDG_CONFIG_HOME=str(tmp_path / "config"))
    return env


def ranks(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([*RANKS, *args], capture_output=True, text=True, timeout=90, cwd=ROOT, env=env,
                       stdin=subprocess.DEVNULL)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def status(env: dict[str, str], name: str) -> list[tuple[str, str]]:
    import json

    r = ranks(env, "get", name, "-p", "default", "-o", "json")
    if r.returncode != 0:
        return []
    return [(x["pod"], x["phase"]) for x in json.loads(r.stdout)["ranks"]]


def running(env: dict[str, str], name: str, count: int) -> bool:
    found = status(env, name)
    return len(found) == count and all(phase == "Running" for _, phase in found)


def on_a_terminal(env: dict[str, str], *args: str, answer: str) -> tuple[int, str]:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*RANKS, *args], cwd=ROOT, env=env, stdin=follower, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    os.close(follower)
    try:
        os.write(leader, answer.encode())
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    return proc.returncode, out + err


def two_sessions(simcluster: Any, tmp_path: Path) -> dict[str, str]:
    """Every GPU held by the user's two idle sessions: `pt` (2 GPUs), the one converted, and `big`
    (3 GPUs), which the job's pods could take as well: the session converted is named first."""
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 2))
    simcluster.call(sim.apply, gpu_node("gpu-1", 3))
    env = env_of(sim, tmp_path)
    for name, workers in (("pt", "1"), ("big", "2")):
        assert ranks(env, "submit", name, "--framework", "pytorch", "-i", "pytorch:latest", "--workers", workers,
                     "-g", "1", "--interactive", "-p", "default").returncode == 0
    wait_for(lambda: running(env, "pt", 2) and running(env, "big", 3), timeout=90,
             what="both sessions running on every GPU")
    return env


LINE = "torchrun --nnodes=2 --nproc_per_node=1 --node_rank=$RANK --master_addr=$MASTER_ADDR train.py --steps 1"


def test_convert_says_the_job_would_wait_on_its_session_and_offers_deleting_it(simcluster, tmp_path: Path) -> None:
    env = two_sessions(simcluster, tmp_path)

    r = ranks(env, "convert", "pt", "-p", "default", "--command", LINE, "--dry-run")
    assert r.returncode == 0, r.stderr
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("ranks: note:")]
    assert notes[0] == ("ranks: note: the new job would wait: only 0 of its 2 pods fit the free GPUs where it can "
                        "run now"), notes
    assert notes[1].startswith("ranks: note: its own session pt holds 2 of the GPUs it needs"), notes
    assert notes[1].endswith("deleting the session once the job is created frees them (its launches stay kept)")
    assert notes[2] == "ranks: note: --delete-interactive deletes the session once the job is created", notes
    assert len(notes) == 3 and "session big" not in r.stderr, notes  # its own frees enough: no other named

    # on a terminal it offers; yes, then the question says the session goes too: the job starts
    code, said = on_a_terminal(env, "convert", "pt", "-p", "default", "--command", LINE, answer="y\ny\n")
    assert "Delete the session pt once the job is created, so that the job can start? [y/N]" in said, said
    assert ("Submit pytorchjob/pt-train in default and delete the interactive session (its pods' files go with "
            "it)? [y/N]") in said, said
    assert code == 0 and "pytorchjob.kubeflow.org/pt-train created in default" in said, said
    wait_for(lambda: not status(env, "pt"), timeout=60, what="the session gone")
    wait_for(lambda: any(phase in ("Running", "Succeeded") for _, phase in status(env, "pt-train")), timeout=90,
             what="the new job's pods started on the freed GPUs")


async def test_the_dashboards_convert_says_so_and_starts_with_the_box_ticked(simcluster, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    sim = simcluster.sim
    two_sessions(simcluster, tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    app = make_app(sim.kubeconfig_path, Settings())
    key = ("default", "PyTorchJob", "pt")
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot_wait(pilot, lambda: app.store.synced and isinstance(app.screen, WorkloadsScreen)
                         and key in app.store.workloads and len(app.store.workloads[key].ranks) == 2
                         and all(r.phase == "Running" for r in app.store.workloads[key].ranks)
                         and app.screen.table.move_to_key(key), what="pt running in the list", timeout=90)
        await pilot.press("t")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ConvertScreen) and app.screen.ready,
                         what="the convert screen", timeout=30)
        screen = app.screen
        waits = str(screen.query_one("#waits", Static).content)
        assert "the new job would wait" in waits and "its own session pt holds 2 of the GPUs it needs" in waits
        assert "session big" not in waits, waits
        assert screen.query_one("#delete", Checkbox).value is True


def test_one_projects_commands_count_the_gpus_other_projects_hold_on_its_nodes(simcluster, tmp_path: Path) -> None:
    """Seen from `make demo`: `ranks why` and `ranks convert -p team-a` listed one project's pods, so
    the GPUs team-b's pods held on the same nodes looked free. The job said "all might fit", the
    convert said nothing, and the converted job sat Pending on its own session's GPUs. They now read
    every project's pods on the nodes the job could use (`kubectl describe node`'s way)."""
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 4))
    simcluster.call(sim.apply, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    simcluster.call(sim.apply, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notebook", "namespace": "other"},
        "spec": {"containers": [{"name": "main", "image": "python:3.12", "command": ["sleep", "infinity"],
                                 "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}})

    def notebook_phase() -> str:
        st = simcluster.call(lambda: sim.store.find(("", "pods"), "other", "notebook"))
        return ((st.obj if st is not None else {}).get("status") or {}).get("phase", "")

    wait_for(lambda: notebook_phase() == "Running", timeout=90, what="the other project's notebook on 2 GPUs")
    env = env_of(sim, tmp_path)
    assert ranks(env, "submit", "pt", "--framework", "pytorch", "-i", "pytorch:latest", "--workers", "1", "-g", "1",
                 "--interactive", "-p", "default").returncode == 0
    wait_for(lambda: running(env, "pt", 2), timeout=90, what="the session running on the other 2 GPUs")

    r = ranks(env, "convert", "pt", "-p", "default", "--command", LINE, "--dry-run")
    assert r.returncode == 0, r.stderr
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("ranks: note:")]
    assert notes[:1] == ["ranks: note: the new job would wait: only 0 of its 2 pods fit the free GPUs where it "
                         "can run now"], r.stderr
    assert any(n.startswith("ranks: note: its own session pt holds 2 of the GPUs it needs") for n in notes), notes

    assert ranks(env, "submit", "big", "--framework", "pytorch", "-i", "pytorch:latest", "--workers", "1", "-g", "1",
                 "--command", "python train.py", "-p", "default").returncode == 0
    wait_for(lambda: "Pending" in ranks(env, "why", "big", "-p", "default").stdout.splitlines()[0],
             timeout=60, what="big pending")
    said = ranks(env, "why", "big", "-p", "default").stdout
    assert "all might fit" not in said and "at most" not in said, said
    assert "0 more could be placed now" in said, said
    assert said.splitlines()[0].endswith("held by your interactive session pt"), said
    assert "delete pt -p default` frees them" in said, said
