"""`ranks shell | exec | convert` against simcluster with the operators, scheduler, kubelet and exec
running (pods are local processes, exec is the Kubernetes WebSocket protocol): the acceptance tests
of issue #7 for the shell, running on all ranks and converting a session to an unattended job.

The shell runs as a user runs it, on a real terminal: a private tmux server (`tmux -L`) at a fixed
size, driven with send-keys and read with capture-pane. A wrapper script records `stty -a` before
and after `ranks shell`, ranks' exit status and its stderr (in a file, so that its messages are
read exactly), to check that the terminal is restored on every way out.

One cluster serves the module; the sessions are submitted once (`ranks submit ... --interactive`
for the two main ones) and shared by the tests that do not change them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from monitors.connection import load_cluster_config
from monitors.kube import ApiProblem, KubeClient
from sessions.history import parse_history
from sessions.manifests import FRAMEWORKS, SubmitSpec
from sessions.session_history import history_command
from sessions.submit import submit
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.tmux_driver import Tmux, stty_flags
from tests.waiting import one_line_error, processes_matching, unique_sleep, wait_for

ROOT = Path(__file__).resolve().parents[2]
A = "runai-team-a"
COMPONENTS = ("operators", "scheduler", "kubelet", "exec")
RANKS = [sys.executable, "-m", "tui.cli"]
JOB_NAME = "training.kubeflow.org/job-name"
MUTATING = ("POST", "PUT", "PATCH", "DELETE")
BANNER_END = "turns the last launch into a training job"
DROP_ENV = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "TMUX", "TMUX_PANE", "NO_COLOR",
            "FORCE_COLOR", "COLORTERM", "COLUMNS", "LINES", "PROMPT_COMMAND", "PS1", "HISTFILE")


# -- cluster and sessions -----------------------------------------------------------------------------


def setup(sim: Any) -> None:
    for node in gpu_nodes(3, 4, pool="main", prefix="main-node"):
        sim.apply(node)
    for node in gpu_nodes(1, 2, pool="solo", prefix="solo-node"):  # one small node for the Pending session
        sim.apply(node)
    sim.apply(namespace(A, {"runai/queue": "team-a"}))


def spec(name: str, framework: str = "pytorch", **kw: Any) -> SubmitSpec:
    base: dict[str, Any] = dict(image="nvcr.io/nvidia/pytorch:24.10-py3", workers=0, namespace=A, project="team-a",
                                user="admin", interactive=True)
    base.update(kw)
    if base.get("command") is not None:
        base["interactive"] = False
    return SubmitSpec(name=name, framework=framework, **base)


# sessions submitted directly (sessions.submit, what `ranks submit` calls): name -> (spec, pods when running)
AUX = {
    "gone": (spec("gone"), 1),  # its pod is deleted during a shell
    "cv": (spec("cv", workers=1, cpu="1", memory="1Gi", env=("CONVERT_ME=yes",)), 2),  # converted (PyTorch)
    "cvm": (spec("cvm", "mpi", workers=1), 2),  # converted (MPI)
    "taken": (spec("taken"), 1),  # a name convert must not reuse
    "batch": (spec("batch", command="sleep 600"), 1),  # not a session
    "blocker": (spec("blocker", gpus=2, node_pool="solo"), 1),  # fills the solo node
}
CLI_SESSIONS = {
    "pt": ["--framework", "pytorch", "--workers", "2", "-g", "1"],
    "hvd": ["--framework", "mpi", "--workers", "2", "-g", "1"],
}


def clean_env(home: Path, kubeconfig: Path) -> dict[str, str]:
    """The environment of a user who installed ranks: its directory first on PATH (the banner
    shows `ranks` commands for the user's machine only when `ranks` is a command there)."""
    env = {k: v for k, v in os.environ.items() if k not in DROP_ENV and not k.startswith("RANKS_")}
    home.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), RANKS_CONFIG="", KUBECONFIG=str(kubeconfig),
               LC_ALL="C.UTF-8", LANG="C.UTF-8", TERM="xterm-256color", PYTHONDONTWRITEBYTECODE="1",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "/usr/bin:/bin")]))
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="empty", components=COMPONENTS, workdir=tmp_path_factory.mktemp("shell")) as t:
        t.call(setup, t.sim)
        yield t


@pytest.fixture(scope="module")
def env(cluster: ThreadedSimCluster) -> dict[str, str]:
    return clean_env(cluster.sim.workdir / "home", Path(cluster.sim.kubeconfig_path))


def ranks(env: dict[str, str], *args: str, extra_env: dict[str, str] | None = None,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, not on a terminal (stdin is /dev/null); the kubeconfig comes from
    $KUBECONFIG so that nothing is appended after `ranks exec ... -- CMD`."""
    return subprocess.run([*RANKS, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**env, **(extra_env or {})}, stdin=subprocess.DEVNULL)




def call(t: ThreadedSimCluster, fn: Callable[[KubeClient], Any]) -> Any:
    """Run `fn(client)` (a coroutine function) with a client of the cluster's admin."""
    cfg = load_cluster_config(str(t.sim.kubeconfig_path), None)

    async def body() -> Any:
        async with KubeClient(cfg) as client:
            return await fn(client)

    return asyncio.run(body())


def api_delete(t: ThreadedSimCluster, path: str) -> None:
    call(t, lambda c: c.request("DELETE", path))


def job_of(t: ThreadedSimCluster, framework: str, name: str) -> dict[str, Any] | None:
    def get() -> dict[str, Any] | None:
        st = t.sim.store.find(("kubeflow.org", FRAMEWORKS[framework].plural), A, name)
        return copy.deepcopy(st.obj) if st is not None else None

    return t.call(get)


def pods_of(t: ThreadedSimCluster, name: str) -> dict[str, dict[str, Any]]:
    def get() -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: copy.deepcopy(p) for p in t.sim.store.objects(("", "pods"), A)
                if (p["metadata"].get("labels") or {}).get(JOB_NAME) == name}

    return t.call(get)


def running(t: ThreadedSimCluster, name: str, count: int) -> dict[str, dict[str, Any]] | None:
    live = {n: p for n, p in pods_of(t, name).items() if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")}
    return live if len(live) == count else None


def mutations_since(t: ThreadedSimCluster, since: float) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in t.sim.requests.since(since) if r.method in MUTATING]


def execs_since(t: ThreadedSimCluster, since: float) -> list[str]:
    return [r.path for r in t.sim.requests.since(since) if r.path.endswith("/exec")]



@pytest.fixture(scope="module")
def sessions(cluster: ThreadedSimCluster, env: dict[str, str]) -> dict[str, dict[str, dict[str, Any]]]:
    """Every session of the module, Running: name -> its pods."""
    procs = {name: subprocess.Popen([*RANKS, "submit", name, *args, "-i", "nvcr.io/nvidia/pytorch:24.10-py3",
                                     "--node-pool", "main", "--interactive", "-p", "team-a"],
                                    cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
             for name, args in CLI_SESSIONS.items()}

    async def aux(client: KubeClient) -> None:
        await asyncio.gather(*(submit(client, s) for s, _ in AUX.values()))

    call(cluster, aux)
    for name, p in procs.items():
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, (name, out, err)
        assert f"{name} created in {A}; when it runs: ranks shell {name} -p team-a" in out, out
    want = {**{n: 3 for n in CLI_SESSIONS}, **{n: c for n, (_, c) in AUX.items()}}
    return {n: wait_for(lambda n=n, c=c: running(cluster, n, c), timeout=60, what=f"{n}: {c} pods Running")
            for n, c in want.items()}


# -- a terminal -----------------------------------------------------------------------------------------


def prompt_shown(screen: str) -> bool:
    """The banner, then a shell prompt waiting on the last line."""
    if BANNER_END not in screen:
        return False
    after = screen.split(BANNER_END, 1)[1]
    lines = [ln.rstrip() for ln in after.splitlines() if ln.strip()]
    return bool(lines) and lines[-1].endswith(("#", "$"))


@dataclass
class Shell:
    """`ranks shell ARGS` in tmux, inside a wrapper that records the terminal around it."""

    tmux: Tmux
    before: Path
    after: Path
    err: Path
    steps: int = 0

    def wait_prompt(self, timeout: float = 20.0) -> str:
        return self.tmux.wait_for(prompt_shown, timeout=timeout, why="the banner and the remote prompt")

    def run(self, command: str, timeout: float = 15.0, *, alone: bool = False) -> str:
        """Type `command` and Enter, wait for it to finish: what the pane showed since the previous
        step (the prompt, the typed line, the output). `alone`: the marker's echo is a command of its
        own, typed after it (so the history records `command` with its own exit status)."""
        self.steps += 1
        marker = re.compile(rf"^@@step{100 + self.steps}$", re.M)
        echo = f'echo "@@step$((100+{self.steps}))"'
        if alone:
            self.tmux.type(command)
            self.tmux.keys("Enter")
            self.tmux.type(echo)
        else:
            self.tmux.type(f"{command}; {echo}")
        self.tmux.keys("Enter")
        screen = self.tmux.wait_for(lambda s: marker.search(s) is not None, timeout=timeout,
                                    why=f"{command!r} to finish")
        end = marker.search(screen).start()  # type: ignore[union-attr]
        previous = [m.end() for m in re.finditer(r"^@@step\d+$", screen[:end], re.M)]
        start = previous[-1] if previous else screen.find(BANNER_END) + len(BANNER_END)
        return screen[start:end]

    def finish(self, timeout: float = 20.0) -> tuple[int, str]:
        """Wait for ranks to exit: (its exit status, the screen)."""
        screen = self.tmux.wait_for("WRAPPER-DONE", timeout=timeout, why="ranks to exit and the wrapper to end")
        found = re.findall(r"EXIT=(\d+)$", screen, re.M)
        assert found, screen
        return int(found[-1]), screen

    def assert_terminal_restored(self) -> None:
        after = stty_flags(self.after.read_text())
        before = stty_flags(self.before.read_text())
        for flag in ("icanon", "echo", "isig", "iexten", "icrnl", "opost"):
            assert flag in after and f"-{flag}" not in after, f"terminal left with -{flag}: {sorted(after)}"
        assert after == before, f"terminal settings changed: lost {sorted(before - after)}, gained {sorted(after - before)}"


@contextlib.contextmanager
def shell_in_tmux(env: dict[str, str], tmp: Path, *args: str, width: int = 100, height: int = 30) -> Iterator[Shell]:
    tmp.mkdir(parents=True, exist_ok=True)
    before, after, err = tmp / "stty-before.txt", tmp / "stty-after.txt", tmp / "stderr.txt"
    q = shlex.quote
    ranks_line = " ".join(q(a) for a in [*RANKS, "shell", *args])
    script = tmp / "run.sh"
    script.write_text(
        f"stty -a > {q(str(before))}\n"
        f"{ranks_line} 2> {q(str(err))}\n"
        'echo "EXIT=$?"\n'
        f"stty -a > {q(str(after))}\n"
        "echo WRAPPER-DONE\n"
        "sleep 60\n"
    )
    tmux = Tmux(env, width, height, name="ranks-shell", history=True)
    try:
        tmux.start(f"sh {q(str(script))}", ROOT)
        yield Shell(tmux, before, after, err)
    finally:
        tmux.kill()


# -- the shell: PyTorch session ---------------------------------------------------------------------------

SLEEP = unique_sleep(4242)  # a command line no other test run has
# launches that fail (no such script; one node, so that nothing waits for the others)
OLD_LAUNCH = "torchrun --nnodes=1 --node_rank=$RANK old_train.py"
NEW_LAUNCH = "torchrun --nnodes=1 --node_rank=$RANK new_train.py"


@dataclass
class ShellRun:
    banner: str
    first_size: str  # `stty size` at 100x30
    env: str  # echo of $WORLD_SIZE and $RANK
    resized: str  # `stty size` after the window became 120x40
    interrupted: str  # SLEEP, Ctrl-C, then an echo
    sleep_seen: bool
    sleep_gone: bool
    exit_code: int
    screen: str
    stderr: str
    history: str
    shell: Shell


def signal_state(marker: str) -> str:
    """The signal masks of the processes holding `marker`, and of this one (why a Ctrl-C did nothing)."""
    def masks(pid: int | str) -> str:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return "gone"
        return " ".join(ln.replace("\t", "") for ln in status.splitlines() if ln.startswith(("SigBlk", "SigIgn", "SigPnd")))
    return "; ".join([*(f"{pid}: {masks(pid)}" for pid in processes_matching(marker)), f"tests: {masks('self')}"])


def in_foreground(marker: str) -> bool:
    """A process whose command line holds `marker` is its terminal's foreground process group."""
    for pid in processes_matching(marker):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 5 and fields[2] == fields[5]:  # pgrp == tpgid
            return True
    return False


@pytest.fixture(scope="module")
def pt_shell(cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any],
             tmp_path_factory: pytest.TempPathFactory) -> ShellRun:
    """One shell in the PyTorch session's master, driven through what the tests below check."""
    with shell_in_tmux(env, tmp_path_factory.mktemp("pt-shell"), "pt", "-p", "team-a") as sh:
        banner = sh.wait_prompt()
        first_size = sh.run("stty size")
        echoed = sh.run('echo "ws=$WORLD_SIZE rank=$RANK"')
        sh.tmux.resize(120, 40)
        deadline = time.monotonic() + 10
        resized = sh.run("stty size")
        while not re.search(r"^40 120$", resized, re.M) and time.monotonic() < deadline:
            resized = sh.run("stty size")
        # Ctrl-C goes to the remote command; the shell (and ranks) carry on
        sh.tmux.type(SLEEP)
        sh.tmux.keys("Enter")
        # (bash hands the terminal to the command's process group just after starting it: a Ctrl-C
        # before that goes to bash, as it would on any terminal)
        sleep_seen = bool(wait_for(lambda: in_foreground(SLEEP), timeout=10, what="the remote sleep in the foreground"))
        sh.tmux.keys("C-c")
        sleep_gone = bool(wait_for(lambda: not processes_matching(SLEEP), timeout=10, what="sleep to end",
                                   detail=lambda: signal_state(SLEEP)))
        interrupted = sh.run('echo "alive-$((6*7))"')
        # launch lines for --from-history (they fail: no such script; recorded with their status)
        for line in (OLD_LAUNCH, NEW_LAUNCH):
            sh.run(line, alone=True)
        sh.run("echo after-the-launch")
        sh.tmux.type("exit 7")
        sh.tmux.keys("Enter")
        code, screen = sh.finish()
        r = ranks(env, "exec", "pt", "-p", "team-a", "--rank", "master-0", "--", *history_command())
        assert r.returncode == 0, r.stderr
        history = re.sub(r"(?m)^\[master-0\] ", "", r.stdout)  # the pod's ~/.ranks_history, read in the pod
        return ShellRun(banner, first_size, echoed, resized, interrupted, sleep_seen, sleep_gone, code, screen,
                        sh.err.read_text(), history, sh)


def test_shell_banner_pytorch(pt_shell: ShellRun, sessions: dict[str, Any]) -> None:
    banner = pt_shell.banner.split(BANNER_END)[0]
    node = sessions["pt"]["pt-master-0"]["spec"]["nodeName"]
    assert "ranks shell: PyTorchJob pt (project team-a)" in banner, banner
    assert f"pod pt-master-0 [pytorch] on node {node}, master-0 rank 0" in banner, banner
    assert "world size 3, 3 pods, 3 GPUs" in banner, banner
    assert "master pt-master-0:23456" in banner, banner
    line = ("torchrun --nnodes=3 --nproc_per_node=1 --node_rank=$RANK --master_addr=$MASTER_ADDR "
            "--master_port=$MASTER_PORT train.py")
    assert f"  ready to paste:\n    {line}\n" in banner, banner
    # the other nodes, from the user's machine (ranks is on the PATH here)
    assert f"\n    ranks exec pt -p team-a --rank worker-0,worker-1 -- sh -c '{line}'\n" in banner, banner
    assert "commands and launches are recorded with their exit status in ~/.ranks_history" in banner


def test_shell_env_and_window_size(pt_shell: ShellRun) -> None:
    assert re.search(r"^ws=3 rank=0$", pt_shell.env, re.M), pt_shell.env
    assert re.search(r"^30 100$", pt_shell.first_size, re.M), pt_shell.first_size
    assert re.search(r"^40 120$", pt_shell.resized, re.M), f"the resize did not reach the pod: {pt_shell.resized}"


def test_shell_ctrl_c_interrupts_the_remote_command(pt_shell: ShellRun) -> None:
    assert pt_shell.sleep_seen and pt_shell.sleep_gone
    assert re.search(r"^alive-42$", pt_shell.interrupted, re.M), pt_shell.interrupted
    assert "^C" in pt_shell.interrupted  # the remote terminal saw the interrupt character


def test_shell_exit_status_and_terminal_restored(pt_shell: ShellRun) -> None:
    assert pt_shell.exit_code == 7, pt_shell.screen
    assert pt_shell.stderr.strip() == "", pt_shell.stderr
    assert "Traceback" not in pt_shell.screen
    pt_shell.shell.assert_terminal_restored()


def test_shell_history_records_commands(pt_shell: ShellRun) -> None:
    """Each command once, in order, with its exit status (Ctrl-C: 130; `exit 7` too)."""
    entries = parse_history(pt_shell.history)
    commands = [e.command.split('; echo "@@step')[0] for e in entries]
    wanted = ['echo "ws=$WORLD_SIZE rank=$RANK"', SLEEP, OLD_LAUNCH, NEW_LAUNCH, "exit 7"]
    positions = []
    for w in wanted:
        assert commands.count(w) == 1, f"{w!r} not once in the history: {commands}"
        positions.append(commands.index(w))
    assert positions == sorted(positions), commands
    status = {c: e.status for c, e in zip(commands, entries, strict=True)}
    assert status['echo "ws=$WORLD_SIZE rank=$RANK"'] == 0 and status[SLEEP] == 130 and status["exit 7"] == 7
    assert status[OLD_LAUNCH] != 0 and status[NEW_LAUNCH] != 0, entries
    assert all(e.time is not None and abs(e.time - time.time()) < 600 for e in entries)


def test_convert_from_history_refuses_failed_launches_unless_allowed(cluster: ThreadedSimCluster, env: dict[str, str],
                                                                     pt_shell: ShellRun) -> None:
    t0 = time.time()
    r = ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--yes", "--dry-run")
    line = one_line_error(r, 1, "no launch in the session's shell history exited 0", "--allow-failed")
    ran = NEW_LAUNCH.replace("$RANK", "0")  # the arguments as they ran on the master (node rank 0)
    assert line.endswith(f"has exit 1: {ran} (fix it and run it again in the shell, or pass --allow-failed to take "
                         "it anyway)") and "old_train" not in line, line
    assert r.stdout == ""
    r = ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--allow-failed", "--yes", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("--- PyTorchJob/pt\n+++ PyTorchJob/pt-train\n"), r.stdout
    added = [ln for ln in r.stdout.splitlines() if ln.startswith("+")]
    assert any(NEW_LAUNCH in ln for ln in added), r.stdout  # rewritten: the operator's $RANK again
    assert "old_train.py" not in r.stdout and "after-the-launch" not in r.stdout
    warning = r.stderr.splitlines()[0]
    assert warning.startswith("ranks: warning: using a launch that did not exit 0 (exit "), r.stderr
    assert warning.endswith(f": {ran}"), r.stderr
    assert "ranks: dry run: nothing was created" in r.stderr
    assert mutations_since(cluster, t0) == [] and job_of(cluster, "pytorch", "pt-train") is None


# -- the shell: MPI session, pod deleted, Pending session -------------------------------------------------


def test_shell_mpi_banner_and_hostfile(cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any],
                                       tmp_path: Path) -> None:
    (launcher,) = [p for p in sessions["hvd"] if "-launcher" in p]
    hosts = [f"hvd-worker-{i}.hvd.{A}.svc" for i in range(2)]
    with shell_in_tmux(env, tmp_path, "hvd", "-p", "team-a", width=160, height=40) as sh:
        banner = sh.wait_prompt().split(BANNER_END)[0]
        assert "ranks shell: MPIJob hvd (project team-a)" in banner, banner
        assert f"pod {launcher} [mpi] on node" in banner and ", launcher" in banner, banner
        assert "world size 2, 3 pods, 2 GPUs" in banner, banner
        assert f"hostfile /etc/mpi/hostfile: {', '.join(hosts)}" in banner, banner
        assert f"horovodrun -np 2 -H {hosts[0]}:1,{hosts[1]}:1 python train.py" in banner, banner
        assert "horovodrun -np 2 -hostfile /etc/mpi/hostfile python train.py" in banner, banner
        assert "mpirun -np 2 --hostfile /etc/mpi/hostfile python train.py" in banner, banner
        out = sh.run('cat "$OMPI_MCA_orte_default_hostfile"')
        for h in hosts:
            assert re.search(rf"^{re.escape(h)} slots=1$", out, re.M), out
        sh.tmux.type("exit")
        sh.tmux.keys("Enter")
        code, screen = sh.finish()
        assert code == 0, screen
        assert sh.err.read_text().strip() == ""
        sh.assert_terminal_restored()


def test_shell_pod_deleted_during_the_shell(cluster: ThreadedSimCluster, env: dict[str, str],
                                            sessions: dict[str, Any], tmp_path: Path) -> None:
    with shell_in_tmux(env, tmp_path, "gone", "-p", "team-a") as sh:
        sh.wait_prompt()
        assert re.search(r"^ws=1$", sh.run('echo "ws=$WORLD_SIZE"'), re.M)
        api_delete(cluster, f"/api/v1/namespaces/{A}/pods/gone-master-0")
        code, screen = sh.finish()
        assert code != 0, screen
        lines = [ln.strip() for ln in sh.err.read_text().splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("ranks: error: pod gone-master-0 "), lines
        assert "deleted" in lines[0] or "stopped" in lines[0], lines
        assert "Traceback" not in screen
        sh.assert_terminal_restored()


def test_pending_session_refused_without_terminal_then_waited_for(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any], tmp_path: Path) -> None:
    """A session that cannot be scheduled (its node pool is full): without a terminal, one line saying
    why and suggesting --wait; with --wait, the shell opens once the blocking job is gone."""
    call(cluster, lambda c: submit(c, spec("waiter", gpus=2, node_pool="solo")))

    def unschedulable() -> bool:
        pod = pods_of(cluster, "waiter").get("waiter-master-0")
        conds = ((pod or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conds)

    wait_for(unschedulable, timeout=20, what="waiter-master-0 to be found unschedulable")
    r = ranks(env, "shell", "waiter", "-p", "team-a")
    one_line_error(r, 1, "waiter-master-0", "Pending", "Insufficient nvidia.com/gpu", "--wait")
    assert r.stdout == ""

    with shell_in_tmux(env, tmp_path, "waiter", "-p", "team-a", "--wait") as sh:
        wait_for(lambda: "ranks: waiting: " in sh.err.read_text(), timeout=20, what="ranks to say it waits",
                 ignore=lambda e: isinstance(e, FileNotFoundError))  # (until tmux's shell has made the file)
        assert "Insufficient nvidia.com/gpu" in sh.err.read_text()
        assert BANNER_END not in sh.tmux.screen()
        api_delete(cluster, f"/apis/kubeflow.org/v1/namespaces/{A}/pytorchjobs/blocker")
        sh.wait_prompt(timeout=30)
        assert re.search(r"^ws=1$", sh.run('echo "ws=$WORLD_SIZE"'), re.M)
        sh.tmux.type("exit 3")
        sh.tmux.keys("Enter")
        code, screen = sh.finish()
        assert code == 3, screen
        assert "ranks: error" not in sh.err.read_text()
        sh.assert_terminal_restored()


# -- exec on several ranks ---------------------------------------------------------------------------------


def rank_lines(text: str) -> list[str]:
    return sorted(ln for ln in text.splitlines() if ln.startswith("["))


def test_exec_all_ranks_prefixed_with_exit_codes(env: dict[str, str], sessions: dict[str, Any]) -> None:
    r = ranks(env, "exec", "pt", "-p", "team-a", "--all", "--", "sh", "-c", "echo rank=$RANK; exit 0")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert rank_lines(r.stdout) == ["[master-0] rank=0", "[worker-0] rank=1", "[worker-1] rank=2"], r.stdout
    assert r.stderr == ""  # every rank succeeded: no summary (issue #11)
    r = ranks(env, "exec", "pt", "-p", "team-a", "--all", "-v", "--", "true")
    assert r.returncode == 0 and r.stdout == "", (r.stdout, r.stderr)
    assert sorted(r.stderr.splitlines()) == ["master-0: exit 0", "worker-0: exit 0", "worker-1: exit 0"], r.stderr

    r = ranks(env, "exec", "pt", "-p", "team-a", "--all", "--", "sh", "-c",
              'echo rank=$RANK; echo "err-$RANK" >&2; test "$RANK" != 1 || exit 5')
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert rank_lines(r.stdout) == ["[master-0] rank=0", "[worker-0] rank=1", "[worker-1] rank=2"], r.stdout
    err = r.stderr.splitlines()
    assert sorted(ln for ln in err if ln.startswith("[")) == ["[master-0] err-0", "[worker-0] err-1",
                                                             "[worker-1] err-2"], r.stderr
    assert sorted(ln for ln in err if not ln.startswith("[")) == ["master-0: exit 0", "worker-0: exit 5",
                                                                 "worker-1: exit 0"], r.stderr


def test_exec_selected_ranks(env: dict[str, str], sessions: dict[str, Any]) -> None:
    r = ranks(env, "exec", "pt", "-p", "team-a", "--rank", "0,worker-1", "--", "sh", "-c", "echo rank=$RANK")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert rank_lines(r.stdout) == ["[master-0] rank=0", "[worker-1] rank=2"], r.stdout
    assert r.stderr == "", r.stderr
    # the MPI session: the launcher reads the hostfile the workers are listed in
    r = ranks(env, "exec", "hvd", "-p", "team-a", "--rank", "launcher", "--", "sh", "-c",
              'cat "$OMPI_MCA_orte_default_hostfile"')
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert rank_lines(r.stdout) == [f"[launcher] hvd-worker-{i}.hvd.{A}.svc slots=1" for i in range(2)], r.stdout


def test_exec_refusals(cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    t0 = time.time()
    one_line_error(ranks(env, "exec", "pt", "-p", "team-a", "--rank", "worker-7", "--", "true"), 8,
                   "no such rank in pt: worker-7", "master-0 (rank 0)")
    one_line_error(ranks(env, "exec", "pt", "-p", "team-a", "--all"), 2, "no command given")
    one_line_error(ranks(env, "exec", "pt", "-p", "team-a", "--", "true"), 2, "--all, or --rank")
    one_line_error(ranks(env, "exec", "nosuch", "-p", "team-a", "--all", "--", "true"), 8,
                   'workload "nosuch" not found')
    assert execs_since(cluster, t0) == []


def test_exec_and_shell_forbidden_by_rbac(cluster: ThreadedSimCluster, env: dict[str, str], tmp_path: Path,
                                          sessions: dict[str, Any]) -> None:
    """A user who may read the project but not create pods/exec: one line naming who, what and where."""
    cluster.call(cluster.sim.add_namespace_reader, "viewer", [A])
    kubeconfig = cluster.call(cluster.sim.write_kubeconfig, tmp_path / "viewer.yaml", "viewer")
    viewer = {**env, "KUBECONFIG": str(kubeconfig)}
    for args in (("exec", "pt", "-p", "team-a", "--all", "--", "true"), ("shell", "pt", "-p", "team-a")):
        line = one_line_error(ranks(viewer, *args), 7, "forbidden")
        assert "viewer" in line and "pods/exec" in line and A in line, line


# -- convert ---------------------------------------------------------------------------------------------


def collect_logs(t: ThreadedSimCluster, name: str, done: Callable[[dict[str, str]], bool],
                 timeout: float = 40) -> dict[str, str]:
    """The job's pod logs (pod -> text), read through the API as soon as they appear: a job that
    ends deletes its still-running pods (cleanPodPolicy: Running)."""
    seen: dict[str, str] = {}

    async def go(client: KubeClient) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline and not done(seen):
            pods = await client.get(f"/api/v1/namespaces/{A}/pods", {"labelSelector": f"{JOB_NAME}={name}"})
            for p in pods["items"]:
                with contextlib.suppress(ApiProblem):
                    raw = await client.request("GET", f"/api/v1/namespaces/{A}/pods/{p['metadata']['name']}/log")
                    seen[p["metadata"]["name"]] = raw.decode()
            await asyncio.sleep(0.1)

    call(t, go)
    return seen


def test_convert_pytorch_session_runs_the_command_everywhere(cluster: ThreadedSimCluster, env: dict[str, str],
                                                             sessions: dict[str, Any]) -> None:
    source = job_of(cluster, "pytorch", "cv")
    assert source is not None
    cmd = "echo converted-run-$RANK; sleep 2"
    r = ranks(env, "convert", "cv", "-p", "team-a", "--command", cmd, "--yes", "--delete-interactive")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.startswith("--- PyTorchJob/cv\n+++ PyTorchJob/cv-train\n"), r.stdout
    assert f"pytorchjob.kubeflow.org/cv-train created in {A}, running: {cmd}" in r.stdout
    assert f"pytorchjob.kubeflow.org/cv deleted from {A}" in r.stdout
    new = job_of(cluster, "pytorch", "cv-train")
    assert new is not None
    assert new["metadata"]["annotations"]["ranks/converted-from"] == "cv"
    assert "ranks/interactive" not in new["metadata"]["annotations"]
    assert new["metadata"]["labels"] == source["metadata"]["labels"]
    policy = new["spec"]["runPolicy"]
    assert policy["cleanPodPolicy"] == "Running" and policy["backoffLimit"] >= 1
    assert policy["ttlSecondsAfterFinished"] > 0 and not policy.get("suspend")
    old_reps, new_reps = source["spec"]["pytorchReplicaSpecs"], new["spec"]["pytorchReplicaSpecs"]
    assert list(new_reps) == ["Master", "Worker"]
    for role in new_reps:
        assert new_reps[role]["replicas"] == old_reps[role]["replicas"]
        (c,) = new_reps[role]["template"]["spec"]["containers"]
        (old,) = old_reps[role]["template"]["spec"]["containers"]
        assert c["command"] == ["/bin/sh", "-c", cmd] and "args" not in c
        assert {k: v for k, v in c.items() if k != "command"} == {k: v for k, v in old.items() if k != "command"}
        assert {"name": "CONVERT_ME", "value": "yes"} in c["env"]
    # the interactive session is gone, the new job ran the command on every replica
    assert job_of(cluster, "pytorch", "cv") is None
    logs = collect_logs(cluster, "cv-train", lambda s: len([t for t in s.values() if "converted-run-" in t]) == 2)
    assert {ln for text in logs.values() for ln in text.split() if ln.startswith("converted-run-")} == {
        "converted-run-0", "converted-run-1"}, logs
    wait_for(lambda: not pods_of(cluster, "cv"), what="the session's pods to go", timeout=20)


def test_convert_mpi_session_runs_the_command_on_the_launcher(cluster: ThreadedSimCluster, env: dict[str, str],
                                                              sessions: dict[str, Any]) -> None:
    cmd = 'echo converted-run-$K_MPI_JOB_ROLE; cat "$OMPI_MCA_orte_default_hostfile"'
    r = ranks(env, "convert", "cvm", "-p", "team-a", "--command", cmd, "--yes", "--delete-interactive")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert f"mpijob.kubeflow.org/cvm-train created in {A}" in r.stdout
    assert f"mpijob.kubeflow.org/cvm deleted from {A}" in r.stdout
    new = job_of(cluster, "mpi", "cvm-train")
    assert new is not None
    reps = new["spec"]["mpiReplicaSpecs"]
    (launcher,) = reps["Launcher"]["template"]["spec"]["containers"]
    (worker,) = reps["Worker"]["template"]["spec"]["containers"]
    assert launcher["command"] == ["/bin/sh", "-c", cmd]
    assert "command" not in worker and "args" not in worker  # the workers keep the operator's sshd
    assert job_of(cluster, "mpi", "cvm") is None
    logs = collect_logs(cluster, "cvm-train", lambda s: any("converted-run-launcher" in t for t in s.values()))
    (text,) = [t for p, t in logs.items() if "-launcher" in p]
    assert "converted-run-launcher" in text and f"cvm-train-worker-0.cvm-train.{A}.svc slots=1" in text, logs


def test_convert_dry_run_shows_the_diff_and_creates_nothing(cluster: ThreadedSimCluster, env: dict[str, str],
                                                            sessions: dict[str, Any]) -> None:
    t0 = time.time()
    cmd = "torchrun --nnodes=3 --node_rank=$RANK train.py"
    r = ranks(env, "convert", "pt", "-p", "team-a", "--command", cmd, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("--- PyTorchJob/pt\n+++ PyTorchJob/pt-train\n"), r.stdout
    assert "-    ranks/interactive: 'true'" in r.stdout and "+    ranks/converted-from: pt" in r.stdout
    # the command replaces `sleep infinity` in each replica (Master and Worker), readable in each
    assert r.stdout.count(f"+            - {cmd}\n") == 2, r.stdout
    assert r.stdout.count("-            - infinity\n") == 2, r.stdout
    assert "*id" not in r.stdout and "&id" not in r.stdout, "YAML aliases hide the command in the diff"
    assert "+    ttlSecondsAfterFinished: 604800" in r.stdout  # a week, as for `ranks submit --command`
    assert r.stderr.strip() == "ranks: dry run: nothing was created"
    assert mutations_since(cluster, t0) == [] and job_of(cluster, "pytorch", "pt-train") is None


def test_convert_refusals(cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any],
                          tmp_path: Path) -> None:
    t0 = time.time()
    taken = job_of(cluster, "pytorch", "taken")
    assert taken is not None
    one_line_error(ranks(env, "convert", "pt", "-p", "team-a", "--command", "true", "--name", "taken", "--yes"), 2,
                   "taken already exists", "choose another --name")
    after = job_of(cluster, "pytorch", "taken")
    assert after is not None and after["metadata"]["uid"] == taken["metadata"]["uid"]
    assert after["spec"] == taken["spec"]
    one_line_error(ranks(env, "convert", "batch", "-p", "team-a", "--command", "true", "--yes"), 2,
                   "pytorchjob/batch is not an interactive session")
    one_line_error(ranks(env, "convert", "pt", "-p", "team-a", "--command", "true", "--read-only"), 2,
                   "read-only mode (--read-only): refusing to convert pt")
    config = tmp_path / "config.toml"
    config.write_text("read_only = true\n")
    one_line_error(ranks(env, "convert", "pt", "-p", "team-a", "--command", "true", "--yes",
                         extra_env={"RANKS_CONFIG": str(config)}), 2,
                   f"read-only mode (read_only = true in {config}): refusing to convert pt")
    one_line_error(ranks(env, "convert", "pt", "-p", "team-a", "--command", "true"), 2, "--yes")
    one_line_error(ranks(env, "convert", "pt", "-p", "team-a"), 2, "--command CMD, or --from-history")
    assert mutations_since(cluster, t0) == []
    assert job_of(cluster, "pytorch", "pt-train") is None


def test_read_only_refuses_exec_and_shell(cluster: ThreadedSimCluster, env: dict[str, str],
                                          sessions: dict[str, Any]) -> None:
    """pods/exec is `create` in RBAC (the built-in `view` role does not grant it) and a command in a
    pod can change anything there: read-only mode refuses `ranks exec` and `ranks shell` too."""
    t0 = time.time()
    one_line_error(ranks(env, "exec", "pt", "-p", "team-a", "--read-only", "--all", "--", "true"), 2,
                   "read-only mode (--read-only): refusing to")
    one_line_error(ranks(env, "shell", "pt", "-p", "team-a", "--read-only"), 2,
                   "read-only mode (--read-only): refusing to")
    assert execs_since(cluster, t0) == []


def test_convert_refuses_a_name_used_by_another_kind(cluster: ThreadedSimCluster, env: dict[str, str],
                                                     sessions: dict[str, Any]) -> None:
    """A PyTorchJob named like the MPIJob hvd would clash with its pods and Services (hvd-worker-0)."""
    t0 = time.time()
    try:
        one_line_error(ranks(env, "convert", "pt", "-p", "team-a", "--command", "true", "--name", "hvd", "--yes"),
                       2, "hvd already exists")
        assert mutations_since(cluster, t0) == []
    finally:
        if job_of(cluster, "pytorch", "hvd") is not None:
            api_delete(cluster, f"/apis/kubeflow.org/v1/namespaces/{A}/pytorchjobs/hvd")
