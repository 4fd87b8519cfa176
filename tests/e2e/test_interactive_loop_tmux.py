"""The loop this product exists for, end to end in a real terminal on simcluster (issue #13): submit
an interactive session, `ranks shell` into it, paste the banner's first line, watch every rank
train (and its GPU get busy), stop a run with Ctrl-C, leave with `exit 5`, then `ranks convert
--from-history --yes` and watch the unattended job run that same line to Succeeded.

Nothing is scripted inside the pod but what a user types: the launchers (`horovodrun`,
`torchrun`), `python` and `train.py` are what every simcluster pod has on its PATH and in its
working directory; ranks reach each other as real launchers do (pods/exec with the pod's
service-account token, the torchrun rendezvous at the master's address).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from simcluster.scenarios.nodes import gpu_node
from tests.e2e.test_demo_tmux import RANKS, clean_env
from tests.kubectl_binary import kubectl_path
from tests.simcluster.test_dcgm import scrape, series
from tests.tmux_driver import Tmux
from tests.waiting import processes_matching, wait_for

pytestmark = pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "exec", "proxy", "dcgm"))

VENV_BIN = Path(RANKS[0]).parent if len(RANKS) == 1 else None


def ranks(sim, *args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([*RANKS, *args], capture_output=True, text=True, timeout=timeout, env=cli_env(sim))
    if check:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def cli_env(sim) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env["KUBECONFIG"] = str(sim.kubeconfig_path)
    env["XDG_STATE_HOME"] = str(Path(sim.workdir).parent / "state")  # as clean_env(tmp_path): the shells' too
    if VENV_BIN is not None:
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def follow_logs(sim, name: str) -> str:
    """`ranks logs NAME -f` from the job's start to its end: every rank's lines, also those of a rank
    still running when the job succeeds (the operator then deletes it, cleanPodPolicy Running)."""
    wait_for(lambda: ranks(sim, "get", name, "-p", "default", "-o", "json", check=False).returncode == 0,
             timeout=30, what=f"{name} created")
    r = ranks(sim, "logs", name, "-p", "default", "-f", timeout=120)
    return r.stdout


def kubectl(sim, *args: str) -> None:
    r = subprocess.run([str(kubectl_path()), "--kubeconfig", str(sim.kubeconfig_path), *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)


def pod_watches(simcluster) -> int:
    """Open watches of the pods of the namespace `default` (a follow's monitor keeps one)."""
    return simcluster.call(simcluster.sim.store.watching, ("", "pods"), "default")


def follow_logs_from_the_start(simcluster, name: str, nodes: list[str]) -> str:
    """`ranks logs NAME -f` attached before any pod of the job runs: `nodes` are cordoned (the job's
    pods wait), and uncordoned once the follow watches the pods. A rank still running when the
    job succeeds is deleted with its log (cleanPodPolicy Running): only a follow that was there
    from its start has all of it, which is what this asserts (on a busy machine, a follow started
    after `convert` may come after the whole job)."""
    sim = simcluster.sim
    wait_for(lambda: ranks(sim, "get", name, "-p", "default", "-o", "json", check=False).returncode == 0,
             timeout=30, what=f"{name} created")
    before = pod_watches(simcluster)
    proc = subprocess.Popen([*RANKS, "logs", name, "-p", "default", "-f"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(sim))
    try:
        wait_for(lambda: pod_watches(simcluster) > before, timeout=60, what="the follow watching the pods",
                 detail=lambda: proc.poll())
        kubectl(sim, "uncordon", *nodes)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, (out, err)
    return out


def workload(sim, name: str) -> dict:
    return json.loads(ranks(sim, "get", name, "-p", "default", "-o", "json").stdout)


def all_running(sim, name: str, count: int) -> bool:
    w = workload(sim, name)
    return len(w["ranks"]) == count and all(r["phase"] == "Running" for r in w["ranks"])


def workers_busy(sim, name: str) -> bool:
    """Every worker's GPU utilisation (DCGM, through the exporters) is above 0."""
    w = workload(sim, name)
    workers = [r for r in w["ranks"] if r["role"].lower() == "worker"]
    return bool(workers) and all((r.get("gpu_util") or 0) > 0 for r in workers)


def busy_while_training(simcluster, name: str, done: Callable[[], bool], timeout: float = 120) -> None:
    """Every worker's GPU read busy by its node's DCGM exporter at least once before `done()`: the
    exporters asked directly and often (a run of 10 steps lasts 5 s; one `ranks get` on a busy
    machine takes seconds of it). What `ranks get` makes of the exporters: test_demo_pods, test_dcgm."""
    seen: set[str] = set()
    workers = {r["pod"] for r in workload(simcluster.sim, name)["ranks"] if r["role"].lower() == "worker"}

    def busy() -> bool:
        for node, _host, _port in simcluster.call(simcluster.sim.dcgm.targets):
            for labels, value in series(scrape(simcluster, node), "DCGM_FI_DEV_GPU_UTIL").values():
                if labels.get("pod") in workers and value > 0:
                    seen.add(labels["pod"])
        return seen == workers

    wait_for(lambda: busy() or done(), timeout, "the workers' GPUs busy while they train")
    assert seen == workers, f"only {sorted(seen)} of {sorted(workers)} read busy before the run ended"


def shell(sim, tmp_path: Path, name: str, width: int = 160, height: int = 50) -> Tmux:
    env = clean_env(tmp_path)
    if VENV_BIN is not None:  # `ranks` on the PATH: the banner shows its `ranks exec` hint
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    cmd = " ".join(shlex.quote(a) for a in [*RANKS, "shell", name, "-p", "default",
                                             "--kubeconfig", str(sim.kubeconfig_path)])
    script = tmp_path / f"shell-{name}.sh"
    script.write_text(f"{cmd}\necho \"EXIT=$?\"\nsleep 120\n")
    tmux = Tmux(env, width, height, name=f"loop-{name}", history=True)
    tmux.start(f"sh {shlex.quote(str(script))}", tmp_path)
    return tmux


def banner_lines(screen: str) -> list[str]:
    """The banner's ready-to-paste lines (indented under "ready to paste:")."""
    lines = screen.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "ready to paste:")
    out = []
    for ln in lines[start + 1:]:
        if not ln.startswith("    "):
            break
        out.append(ln.strip())
    return out


def prompt_ready(tmux: Tmux, pod_prefix: str) -> str:
    return tmux.wait_for(lambda s: re.search(rf"@{re.escape(pod_prefix)}[\w-]*[^\n]*[#$] *$", s.rstrip()) is not None,
                         timeout=30, why=f"the shell prompt of {pod_prefix}*")


def marker() -> str:
    return f"--run-{uuid.uuid4().hex[:12]}"  # train.py ignores unknown options: the processes' marker


def test_horovod_session_end_to_end(simcluster, tmp_path):
    sim = simcluster.sim
    simcluster.call(sim.apply, gpu_node("gpu-0", 2))
    simcluster.call(sim.apply, gpu_node("gpu-1", 2))
    ranks(sim, "submit", "hvd", "--framework", "mpi", "-i", "horovod:latest", "--workers", "2", "-g", "1",
          "--interactive", "-p", "default")
    wait_for(lambda: all_running(sim, "hvd", 3), timeout=60, what="the session's launcher and workers running")

    tmux = shell(sim, tmp_path, "hvd")
    try:
        screen = prompt_ready(tmux, "hvd-launcher")
        line = banner_lines(screen)[0]
        assert line.startswith("horovodrun -np 2 -H hvd-worker-0.hvd.default.svc:1,hvd-worker-1.hvd.default.svc:1"), line

        # 0. the banner's mpirun line with a rank that exits 1: Open MPI's own messages, no survivor left
        mpirun_line = banner_lines(screen)[2]
        assert mpirun_line == "mpirun -np 2 --hostfile /etc/mpi/hostfile python train.py", mpirun_line
        mark = marker()
        tmux.type(f"{mpirun_line} --steps 40 --step-seconds 0.1 --fail-rank 1 --fail-step 3 {mark}; echo STATUS=$?")
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s: re.search(r"STATUS=[1-9]", s) is not None, timeout=60,
                               why="the failing run's end")
        assert "\nrank 1/2 (local 0): failing on purpose with exit code 1" in screen, screen  # (no --tag-output)
        assert "prterun detected that one or more processes exited with non-zero status" in screen, screen
        wait_for(lambda: not processes_matching(mark), timeout=60, what="no rank of the failed run left",
                 detail=lambda: processes_matching(mark))
        tmux.type("clear")
        tmux.keys("Enter")
        prompt_ready(tmux, "hvd-launcher")

        # 1. the banner's first line, as pasted: horovodrun runs Open MPI's own mpirun, which reaches
        # the workers' sshd; both ranks train, each line with Open MPI 5's --tag-output prefix
        tmux.type(line)
        tmux.keys("Enter")
        busy_while_training(simcluster, "hvd", lambda: "(local 0) done" in tmux.screen())
        screen = tmux.wait_for(lambda s: all(f"[1,{r}]<stdout>: rank {r}/2 (local 0) done" in s for r in (0, 1)),
                               timeout=60, why="every rank's steps and end")
        for r in (0, 1):
            assert re.search(rf"\[1,{r}\]<stdout>: rank {r}/2 \(local 0\) step 10/10 loss [\d.]+ on hvd-worker-{r}",
                             screen), screen
        prompt_ready(tmux, "hvd-launcher")
        wait_for(lambda: not workers_busy(sim, "hvd"), timeout=30, what="the GPUs idle again")

        # 2. a second run, stopped with Ctrl-C: no rank process is left anywhere
        mark = marker()
        tmux.type(f"{line} {mark}")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: s.count("step 2/10") >= 4, timeout=30, why="the second run training")
        assert len(processes_matching(mark)) >= 2
        tmux.keys("C-c")
        wait_for(lambda: not processes_matching(mark), timeout=60, what="every rank of the stopped run gone",
                 detail=lambda: processes_matching(mark))
        prompt_ready(tmux, "hvd-launcher")

        # 3. exit 5 ends the shell with status 5
        tmux.type("exit 5")
        tmux.keys("Enter")
        tmux.wait_for("EXIT=5", timeout=60, why="ranks shell exiting with the shell's status")
    finally:
        tmux.kill()

    # 4. convert the last successful launch; the new job runs it to completion
    conv = ranks(sim, "convert", "hvd", "-p", "default", "--from-history", "--yes", timeout=90)
    said = conv.stdout + conv.stderr
    assert "using the launch from" in said and "1 later launch did not exit 0" in said, said
    diff = [ln for ln in conv.stdout.splitlines() if ln.startswith("+") and "horovodrun" in ln]
    assert diff and "--hostfile /etc/mpi/hostfile" in diff[0], conv.stdout
    assert "hvd-worker" not in diff[0] and "hvd.default" not in diff[0], diff
    logs = follow_logs(sim, "hvd-train")
    wait_for(lambda: workload(sim, "hvd-train")["workload"]["status"] == "Succeeded", timeout=90,
             what="the converted job Succeeded", detail=lambda: workload(sim, "hvd-train"))
    for r in (0, 1):
        assert f"rank {r}/2 (local 0) done" in logs, logs
        assert f"rank {r}/2 (local 0) step 10/10" in logs, logs
    ranks(sim, "delete", "hvd-train", "-p", "default", "--yes")
    ranks(sim, "delete", "hvd", "-p", "default", "--yes")


def test_pytorch_session_end_to_end(simcluster, tmp_path):
    sim = simcluster.sim
    for n in range(3):
        simcluster.call(sim.apply, gpu_node(f"gpu-{n}", 2))  # the session and the converted job
    ranks(sim, "submit", "pt", "--framework", "pytorch", "-i", "pytorch:latest", "--workers", "2", "-g", "1",
          "--interactive", "-p", "default")
    wait_for(lambda: all_running(sim, "pt", 3), timeout=60, what="the session's master and workers running")

    tmux = shell(sim, tmp_path, "pt")
    others: subprocess.Popen[str] | None = None
    try:
        screen = prompt_ready(tmux, "pt-master-0")
        line = banner_lines(screen)[0]
        assert line == ("torchrun --nnodes=3 --nproc_per_node=1 --node_rank=$RANK --master_addr=$MASTER_ADDR "
                        "--master_port=$MASTER_PORT train.py"), line
        # (this shell was started with --kubeconfig: the hint names it, so that it runs as pasted)
        hint = next(ln.strip() for ln in screen.splitlines()
                    if ln.strip().startswith(f"ranks --kubeconfig {sim.kubeconfig_path} exec pt "))

        # 1. line 1 in this shell (node 0), the banner's hint for the other nodes on "my machine"
        tmux.type(line)
        tmux.keys("Enter")
        others = subprocess.Popen(shlex.split(hint), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=cli_env(sim))
        busy_while_training(simcluster, "pt", lambda: "rank 0/3 (local 0) done" in tmux.screen())
        tmux.wait_for("rank 0/3 (local 0) done", timeout=60, why="rank 0 trained to the end")
        out, err = others.communicate(timeout=60)
        assert others.returncode == 0, (out, err)
        for r, label in ((1, "worker-0"), (2, "worker-1")):
            assert re.search(rf"\[{label}\] rank {r}/3 \(local 0\) done on pt-worker-{r - 1}", out), out
        prompt_ready(tmux, "pt-master-0")

        # 2. a run stopped with Ctrl-C on every node it runs on
        mark = marker()
        tmux.type(f"{line} {mark}")
        tmux.keys("Enter")
        others = subprocess.Popen(shlex.split(hint.replace(" train.py'", f" train.py {mark}'")),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(sim))
        tmux.wait_for("rank 0/3 (local 0) step 2/10", timeout=30, why="the second run training")
        wait_for(lambda: len(processes_matching(mark)) >= 3, timeout=60, what="three ranks of the second run")
        tmux.keys("C-c")
        others.send_signal(2)
        others.communicate(timeout=30)
        wait_for(lambda: not processes_matching(mark), timeout=60, what="every rank of the stopped run gone",
                 detail=lambda: processes_matching(mark))
        prompt_ready(tmux, "pt-master-0")

        tmux.type("exit 5")
        tmux.keys("Enter")
        tmux.wait_for("EXIT=5", timeout=60, why="ranks shell exiting with the shell's status")
    finally:
        if others is not None and others.poll() is None:
            others.kill()
        tmux.kill()

    nodes = [f"gpu-{n}" for n in range(3)]
    kubectl(sim, "cordon", *nodes)  # the converted job's pods wait until its logs are followed
    conv = ranks(sim, "convert", "pt", "-p", "default", "--from-history", "--yes", timeout=90)
    diff = [ln for ln in conv.stdout.splitlines() if ln.startswith("+") and "torchrun" in ln]
    assert diff and "--master_addr=$MASTER_ADDR" in diff[0], conv.stdout
    assert "pt-master" not in diff[0] and "pt-worker" not in diff[0], diff
    logs = follow_logs_from_the_start(simcluster, "pt-train", nodes)
    wait_for(lambda: workload(sim, "pt-train")["workload"]["status"] == "Succeeded", timeout=90,
             what="the converted job Succeeded", detail=lambda: workload(sim, "pt-train"))
    for r in range(3):
        assert f"rank {r}/3 (local 0) done" in logs, logs
    ranks(sim, "delete", "pt-train", "-p", "default", "--yes")
    ranks(sim, "delete", "pt", "-p", "default", "--yes")


def test_exec_all_torchrun_runs_one_process_per_node(simcluster):
    sim = simcluster.sim
    for n in range(3):
        simcluster.call(sim.apply, gpu_node(f"gpu-{n}", 1))
    ranks(sim, "submit", "ptx", "--framework", "pytorch", "-i", "pytorch:latest", "--workers", "2", "-g", "1",
          "--interactive", "-p", "default")
    wait_for(lambda: all_running(sim, "ptx", 3), timeout=60, what="the session running")
    r = ranks(sim, "exec", "ptx", "-p", "default", "--all", "--", "sh", "-c",
              "torchrun --nnodes 3 --nproc-per-node 1 --node-rank $RANK --master-addr $MASTER_ADDR "
              "--master-port $MASTER_PORT train.py --steps 2 --step-seconds 0.2", timeout=90)
    found = {int(m.group(1)) for m in re.finditer(r"rank (\d)/3 \(local 0\) done", r.stdout)}
    assert found == {0, 1, 2}, r.stdout
    for label, rank in (("master-0", 0), ("worker-0", 1), ("worker-1", 2)):
        assert f"[{label}] rank {rank}/3 (local 0) done on ptx-" in r.stdout, r.stdout
    ranks(sim, "delete", "ptx", "-p", "default", "--yes")
