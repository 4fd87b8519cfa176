"""End to end in a real terminal: the last lines of a job that finishes reach the screen (issue #11,
item 1), from `ranks logs -f` and from the dashboard's log view, at 80x24 and at 120x40.

The job is submitted as a user does (`ranks submit --command`, so `cleanPodPolicy: Running`).
Every rank prints its lines right before it exits, so they are all still in the merge's reorder
window when the last stream ends. The master finishes first: the job is Succeeded while the
worker still runs, and the operator deletes the running worker; as in a real pod, its PID 1 (the
shell, without a SIGTERM handler) runs on to its end, and the follow waits for every rank.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from simcluster.scenarios.nodes import gpu_node
from tests.e2e.test_demo_tmux import RANKS, clean_env
from tests.tmux_driver import Tmux

pytestmark = pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))

SIZES = [(80, 24), (120, 40)]


def command(sleep: int) -> str:
    return (f'echo "start $RANK"; sleep $(({sleep} + RANK)); i=0; while [ $i -lt 40 ]; do echo "line $i of $RANK"; '
            'i=$((i+1)); done; echo "end $RANK"')


def submit(sim, name: str, sleep: int = 2) -> None:
    r = subprocess.run([*RANKS, "submit", name, "--framework", "pytorch", "-i", "img", "--workers", "1",
                        "--command", command(sleep), "-p", "default", "--kubeconfig", str(sim.kubeconfig_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def start(sim, name: str, tmp_path: Path, width: int, height: int, *args: str) -> Tmux:
    env = clean_env(tmp_path)
    cmd = " ".join(shlex.quote(a) for a in [*RANKS, *args, "--kubeconfig", str(sim.kubeconfig_path)])
    script = tmp_path / f"{name}.sh"
    script.write_text(f"{cmd}\necho \"EXIT=$?\"\nsleep 60\n")
    tmux = Tmux(env, width, height, name="ranks-logs", history=True)
    tmux.start(f"sh {shlex.quote(str(script))}", tmp_path)
    return tmux


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_logs_follow_prints_every_rank_s_last_lines_then_exits_0(simcluster, tmp_path, width, height):
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 8))
    submit(sim, "ftest")
    tmux = start(sim, "follow", tmp_path, width, height, "logs", "ftest", "-p", "default", "-f")
    try:
        screen = tmux.wait_for("EXIT=", timeout=60, why="ranks logs -f to end by itself")
        assert "EXIT=0" in screen, screen
        for rank, label in ((0, "master-0"), (1, "worker-0")):
            assert f"[{label}] start {rank}" in screen, screen
            assert f"[{label}] line 39 of {rank}" in screen, screen
            assert f"[{label}] end {rank}" in screen, screen
        assert "Traceback" not in screen and "error" not in screen
    finally:
        tmux.kill()


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_dashboard_log_view_shows_every_rank_s_last_lines(simcluster, tmp_path, width, height):
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 8))
    submit(sim, "dtest", sleep=8)  # still running when the log view opens: it follows to the end
    tmux = start(sim, "dash", tmp_path, width, height, "-p", "default")
    tmux.history = False
    try:
        tmux.wait_for("dtest", timeout=45, why="the workload in the list")
        tmux.keys("Enter")
        tmux.wait_for("worker-0", timeout=20, why="the workload's ranks")
        tmux.keys("l")
        tmux.wait_for(lambda s: "logs dtest" in s.splitlines()[0] and "start 1" in s, timeout=20,
                      why="the log view with the first lines")
        # the job ends; the view keeps following to the last line of every rank: 2 ranks x 42 lines
        screen = tmux.wait_for(lambda s: re.search(r"\b84 lines\b", s) is not None, timeout=40,
                               why="every line of every rank")
        assert "end 1" in screen, screen
        tmux.keys("q")
        tmux.wait_for("EXIT=0", timeout=20, why="the dashboard to quit")
    finally:
        tmux.kill()
