"""#24 item 4e: a kubeconfig context's `ranks` extension with a bad value is one `ranks: error:` line
and exit 3, in the one-shot commands that judge hangs and in the dashboard (before it takes the
terminal); a good one is what they judge by."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from monitors.connection import write_context_settings
from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.tmux_driver import Tmux
from tests.waiting import one_line_error, wait_for

ROOT = Path(__file__).resolve().parents[2]
NS = "runai-team-a"
BAD = "kubeconfig context ranks-sim: extension ranks: hang_after_minutes: must be a number of minutes more than 0"


def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    out.update(RANKS_CONFIG="", NO_COLOR="1", XDG_CONFIG_HOME=str(tmp_path / "config"))
    return out


def ranks(tmp_path: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=90, env=env(tmp_path), cwd=ROOT,
                          stdin=subprocess.DEVNULL)


def setup(sim: Any) -> None:
    for node in gpu_nodes(1, 4, pool="main"):
        sim.apply(node)
    sim.apply(namespace(NS, {"runai/queue": "team-a"}))
    replica = {"replicas": 1, "template": {"spec": {"containers": [{
        "name": "pytorch", "image": "img", "command": ["sh", "-c", "sleep 600"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
    sim.apply({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "quiet", "namespace": NS},
               "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": replica}}})


def running(sim: Any) -> bool:
    pods = [p for p in sim.store.objects(("", "pods"), NS) if p["metadata"]["name"].startswith("quiet-")]
    return len(pods) == 2 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
def test_a_bad_context_value_is_one_line_and_exit_3(simcluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    simcluster.call(setup, sim)
    wait_for(lambda: simcluster.call(running, sim), 60, "quiet running")
    good = tmp_path / "good.yaml"
    good.write_text(sim.kubeconfig_path.read_text())
    write_context_settings(good, {"hang_after_minutes": 30})
    r = ranks(tmp_path, good, "get", "quiet", "-p", "team-a", "-o", "json")
    assert r.returncode == 0, r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(sim.kubeconfig_path.read_text())
    write_context_settings(bad, {"hang_after_minutes": -1})
    for args in (("why", "quiet", "-p", "team-a"), ("get", "quiet", "-p", "team-a")):
        one_line_error(ranks(tmp_path, bad, *args), 3, BAD)

    # the dashboard says it before it takes the terminal
    script = tmp_path / "run.sh"
    script.write_text(f"{shlex.join([sys.executable, '-m', 'tui.cli', '--kubeconfig', str(bad)])} 2>&1\n"
                      'echo "EXIT=$?"\nsleep 60\n')
    tmux = Tmux({**env(tmp_path), "TERM": "xterm-256color"}, 200, 20, name="ranks-ctx")
    try:
        tmux.start(f"sh {shlex.quote(str(script))}", ROOT)
        screen = tmux.wait_for("EXIT=", timeout=60, why="the dashboard to refuse the context")
    finally:
        tmux.kill()
    assert "EXIT=3" in screen and f"ranks: error: {BAD}" in screen.replace("\n", ""), screen
    assert "Traceback" not in screen
