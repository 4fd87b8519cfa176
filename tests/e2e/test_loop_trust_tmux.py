"""The loop's last step, trusted (issue #24, items 1-3 and 6), in a real terminal on simcluster:

- a launch's status is the launcher's own, whatever the line around it (`; echo done` after a
  failed horovodrun), and convert takes only a launch that exited 0;
- a launch on several nodes (torchrun in the master's shell, `ranks exec` on the worker) counts
  as successful only when every node exited 0, and the failing node is named;
- the history outlives the pods: suspend, resume and delete lose nothing convert needs, and
  suspending says what is lost and what is kept; nor does a pod replaced under an open shell;
- the round trip: `ranks debug` a failed job, its command recalled in the session's shell,
  fixed by hand, converted back (the diff against the original) to a job that Succeeds.
Everything runs as a user runs it: the shell in tmux, the CLI as a command, the cluster's own
launchers and train.py in the pods.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from simcluster.scenarios.nodes import gpu_node
from tests.e2e.test_interactive_loop_tmux import (
    RANKS,
    all_running,
    banner_lines,
    cli_env,
    prompt_ready,
    ranks,
    shell,
    workload,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "exec", "proxy"))


def run_line(tmux, line: str, pod_prefix: str, until: str, timeout: float = 60) -> str:
    """Type `line` in the shell, wait for `until` on the screen and the prompt after it."""
    tmux.type(line)
    tmux.keys("Enter")
    tmux.wait_for(until, timeout=timeout, why=f"{line!r} to print {until!r}")
    return prompt_ready(tmux, pod_prefix)


def leave(tmux) -> None:
    tmux.type("exit")
    tmux.keys("Enter")
    tmux.wait_for("EXIT=", timeout=30, why="ranks shell to end")


def status_of(sim, name: str) -> str:
    r = subprocess.run([*RANKS, "get", name, "-p", "default", "-o", "json"], capture_output=True, text=True,
                       timeout=60, env=cli_env(sim))
    return json.loads(r.stdout)["workload"]["status"] if r.returncode == 0 else ""


def test_a_failed_launch_is_never_taken_and_the_history_outlives_the_pods(simcluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 2))
    simcluster.call(sim.apply, gpu_node("gpu-1", 2))
    ranks(sim, "submit", "hvd", "--framework", "mpi", "-i", "horovod:latest", "--workers", "2", "-g", "1",
          "--interactive", "-p", "default")
    wait_for(lambda: all_running(sim, "hvd", 3), timeout=90, what="the session running")

    tmux = shell(sim, tmp_path, "hvd")
    try:
        screen = prompt_ready(tmux, "hvd-launcher")
        good = banner_lines(screen)[1]  # horovodrun -np 2 -hostfile /etc/mpi/hostfile python train.py
        assert good == "horovodrun -np 2 -hostfile /etc/mpi/hostfile python train.py", good
        # 1. the first launch succeeds inside a compound line; the second fails and `echo` hides it
        run_line(tmux, f"cd /tmp && cd - >/dev/null && {good} --steps 2 --step-seconds 0.1 | cat", "hvd-launcher",
                 "done on hvd-worker")
        run_line(tmux, "horovodrun -np 2 -hostfile /etc/mpi/hostfile python trian.py; echo done", "hvd-launcher",
                 "\ndone")
    finally:
        leave(tmux)
        tmux.kill()

    r = ranks(sim, "convert", "hvd", "-p", "default", "--from-history", "--dry-run")
    said = r.stderr.splitlines()[0]
    assert re.match(r"ranks: using the launch from .* \(exit 0; 1 later launch did not exit 0\): horovodrun -np 2 "
                    r"-hostfile /etc/mpi/hostfile python train.py --steps 2 --step-seconds 0.1$", said), r.stderr
    r = ranks(sim, "convert", "hvd", "-p", "default", "--from-history", "--allow-failed", "--dry-run")
    assert re.search(r"did not exit 0 \(exit [1-9]\d*\), .*: horovodrun .* trian\.py$", r.stderr.splitlines()[0]), \
        r.stderr  # its own status, not echo's

    # 3. suspend: what is lost and what is kept is said; the launches stay for convert
    r = ranks(sim, "suspend", "hvd", "-p", "default", "--yes")
    assert "every file outside mounted volumes" in r.stderr and "ranks keeps the 2 launches" in r.stderr, r.stderr
    wait_for(lambda: status_of(sim, "hvd") == "Suspended" and not workload(sim, "hvd")["ranks"], timeout=60,
             what="the session suspended, its pods gone")
    r = ranks(sim, "convert", "hvd", "-p", "default", "--from-history", "--dry-run")
    assert "using the launch from" in r.stderr and "--steps 2" in r.stderr, r.stderr
    ranks(sim, "resume", "hvd", "-p", "default")
    wait_for(lambda: all_running(sim, "hvd", 3), timeout=90, what="the session running again (new pods)")
    r = ranks(sim, "convert", "hvd", "-p", "default", "--from-history", "--dry-run")
    assert "using the launch from" in r.stderr and "--steps 2" in r.stderr, r.stderr

    # a deleted session: converted from what ranks kept (its spec and launches), to a job that Succeeds
    ranks(sim, "delete", "hvd", "-p", "default", "--yes")
    wait_for(lambda: ranks(sim, "get", "hvd", "-p", "default", check=False).returncode == 8, timeout=60,
             what="the session gone")
    r = ranks(sim, "convert", "hvd", "-p", "default", "--from-history", "--yes")
    assert "no longer exists in default; converting what ranks kept of it" in r.stderr, r.stderr
    assert "mpijob.kubeflow.org/hvd-train created in default" in r.stdout, r.stdout
    wait_for(lambda: status_of(sim, "hvd-train") == "Succeeded", timeout=120, what="the converted job Succeeded",
             detail=lambda: workload(sim, "hvd-train"))
    ranks(sim, "delete", "hvd-train", "-p", "default", "--yes")


def test_a_launch_on_two_nodes_succeeded_only_if_both_did(simcluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 1))
    simcluster.call(sim.apply, gpu_node("gpu-1", 1))
    ranks(sim, "submit", "pt", "--framework", "pytorch", "-i", "pytorch:latest", "--workers", "1", "-g", "1",
          "--interactive", "-p", "default")
    wait_for(lambda: all_running(sim, "pt", 2), timeout=90, what="the session's master and worker running")
    nodes = {r["pod"]: r["node"] for r in workload(sim, "pt")["ranks"]}
    assert nodes["pt-master-0"] != nodes["pt-worker-0"], nodes  # a rank on another node

    tmux = shell(sim, tmp_path, "pt")
    try:
        screen = prompt_ready(tmux, "pt-master-0")
        line = banner_lines(screen)[0]
        hint = next(ln.strip() for ln in screen.splitlines() if " exec pt " in ln and "--rank worker-0" in ln)

        def both(args: str) -> subprocess.CompletedProcess[str]:
            """The line with `args` in this shell and, through the banner's hint, on the worker's node."""
            other = subprocess.Popen(shlex.split(hint.replace(" train.py'", f" train.py {args}'")),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(sim))
            try:
                run_line(tmux, f"{line} {args}; echo master-ended", "pt-master-0", "master-ended", timeout=90)
                out, err = other.communicate(timeout=90)
            finally:
                if other.poll() is None:
                    other.kill()
            return subprocess.CompletedProcess(other.args, other.returncode, out, err)

        # 2. the worker's rank fails; the master's torchrun is the line's, echo hides it
        failed = both("--steps 3 --step-seconds 0.2 --fail-rank 1")
        assert failed.returncode == 1, (failed.stdout, failed.stderr)
        r = ranks(sim, "convert", "pt", "-p", "default", "--from-history", "--dry-run", check=False)
        # both nodes failed (a dead peer fails the survivors); the worker's rank failed first
        assert r.returncode == 1 and "has exit 1 on " in r.stderr and "worker-0" in r.stderr, r.stderr
        ok = both("--steps 2 --step-seconds 0.1")
        assert ok.returncode == 0, (ok.stdout, ok.stderr)
    finally:
        leave(tmux)
        tmux.kill()
    r = ranks(sim, "convert", "pt", "-p", "default", "--from-history", "--dry-run")
    assert re.search(r"\(exit 0 on 2 nodes; 1 later launch did not exit 0\)|\(exit 0 on 2 nodes\)", r.stderr), r.stderr
    assert "--steps 2" in r.stderr.splitlines()[0], r.stderr
    ranks(sim, "delete", "pt", "-p", "default", "--yes")


FAILING = "torchrun --nnodes=1 --nproc_per_node=1 train.py --steps 2 --step-seconds 0.1 --fail-rank 0"


def test_debug_a_failed_job_fix_it_in_the_shell_convert_it_back(simcluster, kubectl, tmp_path: Path) -> None:
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 2))
    ranks(sim, "submit", "fails", "--framework", "pytorch", "-i", "pytorch:latest", "--workers", "0", "-g", "1",
          "--command", FAILING, "-p", "default")
    wait_for(lambda: status_of(sim, "fails") == "Failed", timeout=120, what="the job Failed")

    r = ranks(sim, "debug", "fails", "-p", "default")
    assert "pytorchjob.kubeflow.org/fails-debug created in default" in r.stdout, r.stdout
    assert "shell fails-debug -p default" in r.stderr, r.stderr
    wait_for(lambda: all_running(sim, "fails-debug", 1), timeout=90, what="the debug session running")
    session = json.loads(kubectl.run("get", "pytorchjob", "fails-debug", "-n", "default", "-o", "json").stdout)
    (master,) = session["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"]
    assert master["command"] == ["sleep", "infinity"] and master["image"] == "pytorch:latest"

    tmux = shell(sim, tmp_path, "fails-debug")
    try:
        screen = prompt_ready(tmux, "fails-debug-master-0")
        # how it failed, as far as is known: its pods were deleted at the backoff limit, so the job's condition
        assert "a debug session of fails (failed: " in screen and "backoff limit" in screen, screen
        tmux.keys("Up")  # the job's command, as it ran
        tmux.wait_for(FAILING, timeout=15, why="the job's command recalled")
        tmux.keys("Enter")
        tmux.wait_for("failing on purpose", timeout=60, why="the job's failure reproduced")
        prompt_ready(tmux, "fails-debug-master-0")
        run_line(tmux, FAILING.replace(" --fail-rank 0", ""), "fails-debug-master-0", "rank 0/1 (local 0) done")
    finally:
        leave(tmux)
        tmux.kill()

    r = ranks(sim, "convert", "fails-debug", "-p", "default", "--from-history", "--yes", timeout=90)
    assert "is a debug session of fails" in r.stderr, r.stderr
    assert r.stdout.startswith("--- PyTorchJob/fails\n+++ PyTorchJob/fails-2\n"), r.stdout  # against the original
    changed = [ln for ln in r.stdout.splitlines() if ln[:1] in "+-" and "train.py" in ln]
    assert any(ln.startswith("-") and "--fail-rank 0" in ln for ln in changed), changed  # the fix, and only it
    assert any(ln.startswith("+") and "--fail-rank" not in ln for ln in changed), changed
    assert "pytorchjob.kubeflow.org/fails-2 created in default" in r.stdout, r.stdout
    wait_for(lambda: status_of(sim, "fails-2") == "Succeeded", timeout=120, what="the fixed job Succeeded",
             detail=lambda: workload(sim, "fails-2"))
    for name in ("fails-2", "fails-debug", "fails"):
        ranks(sim, "delete", name, "-p", "default", "--yes")


def test_a_pod_replaced_under_an_open_shell_loses_no_launch(simcluster, kubectl, tmp_path: Path) -> None:
    """Item 3, a restarted pod: the shell's history is kept while the shell is open, so a launch run
    in it survives its pod being deleted under it (the operator makes a new one, its home empty)."""
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 1))
    ranks(sim, "submit", "one", "--framework", "pytorch", "-i", "pytorch:latest", "--workers", "0", "-g", "1",
          "--interactive", "-p", "default")
    wait_for(lambda: all_running(sim, "one", 1), timeout=90, what="the session running")
    first = json.loads(kubectl.run("get", "pod", "one-master-0", "-n", "default", "-o", "json").stdout)
    state = Path(cli_env(sim)["XDG_STATE_HOME"])
    line = "torchrun --nnodes=1 --nproc_per_node=1 train.py --steps 2 --step-seconds 0.1"

    def kept() -> bool:
        return any("--steps 2 --step-seconds 0.1" in p.read_text() for p in state.rglob("*.json"))

    tmux = shell(sim, tmp_path, "one")
    try:
        prompt_ready(tmux, "one-master-0")
        run_line(tmux, line, "one-master-0", "rank 0/1 (local 0) done")
        wait_for(kept, timeout=60, what="the launch kept while the shell is open")
        kubectl.run("delete", "pod", "one-master-0", "-n", "default", "--wait=false")
        screen = tmux.wait_for("EXIT=", timeout=60, why="the shell to end with its pod")
        assert "was deleted during the shell" in screen or "stopped during the shell" in screen, screen
    finally:
        tmux.kill()

    def replaced() -> bool:
        r = kubectl.run("get", "pod", "one-master-0", "-n", "default", "-o", "json", check=False)
        if r.returncode != 0:
            return False
        pod = json.loads(r.stdout)
        return (pod["metadata"]["uid"] != first["metadata"]["uid"] and pod["status"].get("phase") == "Running"
                and not pod["metadata"].get("deletionTimestamp"))

    wait_for(replaced, timeout=90, what="a new pod one-master-0 running")
    r = ranks(sim, "convert", "one", "-p", "default", "--from-history", "--dry-run")
    assert re.match(r"ranks: using the launch from .* \(exit 0\): torchrun --nnodes=1 --nproc_per_node=1 train.py "
                    r"--steps 2 --step-seconds 0.1$", r.stderr.splitlines()[0]), r.stderr
    ranks(sim, "delete", "one", "-p", "default", "--yes")
