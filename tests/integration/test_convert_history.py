"""`ranks convert --from-history` against simcluster (issue #13, parts 3 and 4): the shell history
records each command with its exit status and time; convert takes the last launch that exited 0,
says which and when, refuses one that failed unless --allow-failed, and the new job's command
names the new job (the operator's $MASTER_ADDR/$MASTER_PORT/$RANK, the MPI hostfile, its pods).

The sessions are submitted as `ranks submit --interactive` submits them (`sessions.submit`); the
histories are written in their lead pods through `ranks exec`, in the format the shell writes, or
by the shell's own recorder run in the pod through exec, where the banner's ready-to-paste lines
run as pasted (with simcluster's launchers and train.py); the CLI runs as a user runs it, the
dashboard's convert screen under `App.run_test()`.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Checkbox, Input, OptionList, Static

from monitors.connection import load_cluster_config
from monitors.kube import KubeClient
from sessions.exec_bridge import ExecSession
from sessions.history import HistoryEntry, parse_history
from sessions.locate import locate_workload
from sessions.manifests import FRAMEWORKS, SubmitSpec
from sessions.session_history import history_command
from sessions.shell import banner, pick_rank, shell_command, shell_target
from sessions.submit import submit
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.dashboard_kit import make_app
from tests.waiting import one_line_error, pilot_wait, wait_for
from tui.screens.dialogs import ConfirmScreen, ConvertScreen
from tui.screens.lists import WorkloadsScreen
from tui.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
A = "runai-team-a"
RANKS = [sys.executable, "-m", "tui.cli"]
JOB_NAME = "training.kubeflow.org/job-name"
MUTATING = ("POST", "PUT", "PATCH", "DELETE")
HVD_HOSTS = f"hvd-worker-0.hvd.{A}.svc:1,hvd-worker-1.hvd.{A}.svc:1"  # as the banner's -H line has them


# -- cluster, sessions, the CLI ------------------------------------------------------------------------


def setup(sim: Any) -> None:
    for node in gpu_nodes(2, 4, pool="main", prefix="main-node"):
        sim.apply(node)
    sim.apply(namespace(A, {"runai/queue": "team-a"}))


def spec(name: str, framework: str) -> SubmitSpec:
    return SubmitSpec(name=name, framework=framework, image="nvcr.io/nvidia/pytorch:24.10-py3", workers=2, gpus=1,
                      namespace=A, project="team-a", user="admin", interactive=True, node_pool="main")


def call(t: ThreadedSimCluster, fn: Callable[[KubeClient], Any]) -> Any:
    cfg = load_cluster_config(str(t.sim.kubeconfig_path), None)

    async def body() -> Any:
        async with KubeClient(cfg) as client:
            return await fn(client)

    return asyncio.run(body())


def pods_of(t: ThreadedSimCluster, name: str) -> dict[str, dict[str, Any]]:
    def get() -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: copy.deepcopy(p) for p in t.sim.store.objects(("", "pods"), A)
                if (p["metadata"].get("labels") or {}).get(JOB_NAME) == name}

    return t.call(get)


def running(t: ThreadedSimCluster, name: str, count: int) -> dict[str, dict[str, Any]] | None:
    live = {n: p for n, p in pods_of(t, name).items() if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")}
    return live if len(live) == count else None


def job_of(t: ThreadedSimCluster, framework: str, name: str) -> dict[str, Any] | None:
    def get() -> dict[str, Any] | None:
        st = t.sim.store.find(("kubeflow.org", FRAMEWORKS[framework].plural), A, name)
        return copy.deepcopy(st.obj) if st is not None else None

    return t.call(get)


def mutations_since(t: ThreadedSimCluster, since: float) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in t.sim.requests.since(since) if r.method in MUTATING]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="empty", components=("operators", "scheduler", "kubelet", "exec"),
                       workdir=tmp_path_factory.mktemp("history")) as t:
        t.call(setup, t.sim)
        yield t


@pytest.fixture(scope="module")
def env(cluster: ThreadedSimCluster) -> dict[str, str]:
    home = cluster.sim.workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR", "FORCE_COLOR")
           and not k.startswith("RANKS_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), XDG_STATE_HOME=str(home / "state"), RANKS_CONFIG="",
               KUBECONFIG=str(cluster.sim.kubeconfig_path), LC_ALL="C.UTF-8", LANG="C.UTF-8")
    return env


@pytest.fixture(scope="module")
def sessions(cluster: ThreadedSimCluster) -> dict[str, dict[str, Any]]:
    """The PyTorch session `pt` and the MPI session `hvd`, 2 workers each, Running."""
    async def both(client: KubeClient) -> None:
        await asyncio.gather(submit(client, spec("pt", "pytorch")), submit(client, spec("hvd", "mpi")))

    call(cluster, both)
    return {name: wait_for(lambda name=name: running(cluster, name, 3), timeout=60, what=f"{name}: 3 pods Running")
            for name in ("pt", "hvd")}


def ranks(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([*RANKS, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
                       stdin=subprocess.DEVNULL)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def record(age: float, status: int, command: str) -> str:
    """One command as the shell records it: `<epoch>\\t<status>\\t<command>`."""
    return f"{int(time.time() - age)}\t{status}\t{command}"


def write_history(env: dict[str, str], session: str, rank: str, *lines: str) -> None:
    """The session's history in its lead pod (~/.ranks_history), written there through exec; what
    ranks kept of the earlier histories (and `ranks exec` runs) forgotten: this one is the whole."""
    shutil.rmtree(Path(env["XDG_STATE_HOME"]) / "ranks" / "sessions", ignore_errors=True)
    r = ranks(env, "exec", session, "-p", "team-a", "--rank", rank, "--", "sh", "-c",
              'printf "%s\\n" "$@" > "$HOME/.ranks_history"', "sh", *lines)
    assert r.returncode == 0, (r.stdout, r.stderr)


def added_lines(diff: str) -> list[str]:
    """The diff's added lines, a command YAML folded over several lines (at 120 columns) as one."""
    unfolded = re.sub(r"\n\+( {14})(?=\S)", " ", diff)
    return [ln for ln in unfolded.splitlines() if ln.startswith("+") and not ln.startswith("+++")]


def session_names_in(lines: list[str], name: str) -> list[str]:
    """Lines that still name one of the session's pods or hosts."""
    return [ln for ln in lines if re.search(rf"(?<![\w.-]){name}-(?:master|worker|launcher)|\.{name}\.", ln)]


# -- MPI: the last launch that exited 0, with the new job's names ----------------------------------------


def mpi_history() -> tuple[str, ...]:
    """Stamped when written (a module-level constant would age during a long run)."""
    return (
        record(600, 0, "cat /etc/mpi/hostfile"),
        record(300, 0, f"horovodrun -np 2 -H {HVD_HOSTS} python train.py"),
        record(240, 0, "# horovodrun -np 2 -hostfile /etc/mpi/hostfile python commented.py"),
        record(200, 127, "ranks exec hvd -p team-a --all -- horovodrun -np 2 python from-ranks.py"),
        record(120, 1, "NCCL_DEBUG=INFO horovodrun -np 2 -hostfile /etc/mpi/hostfile python broken.py"),
        record(60, 0, "echo horovodrun done"),
    )


def test_mpi_convert_takes_the_last_launch_that_exited_0_and_says_which(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    write_history(env, "hvd", "launcher", *mpi_history())
    t0 = time.time()
    r = ranks(env, "convert", "hvd", "-p", "team-a", "--from-history", "--dry-run")
    assert r.returncode == 0, r.stderr
    said = r.stderr.splitlines()
    assert said[0] == (f"ranks: using the launch from 5 minutes ago (exit 0; 1 later launch did not exit 0): "
                       f"horovodrun -np 2 -H {HVD_HOSTS} python train.py"), r.stderr
    assert said[-1] == "ranks: dry run: nothing was created"
    assert r.stdout.startswith("--- MPIJob/hvd\n+++ MPIJob/hvd-train\n"), r.stdout
    added = added_lines(r.stdout)
    # every worker of the session at its slots: the hostfile the operator mounts in the new launcher
    assert "+            - horovodrun -np 2 --hostfile /etc/mpi/hostfile python train.py" in added, r.stdout
    assert session_names_in(added, "hvd") == [], added
    for other in ("broken.py", "commented.py", "from-ranks.py", "echo horovodrun"):
        assert other not in r.stdout, other
    assert mutations_since(cluster, t0) == []


def test_allow_failed_takes_the_last_launch_with_a_warning(env: dict[str, str], sessions: dict[str, Any]) -> None:
    write_history(env, "hvd", "launcher", *mpi_history())
    r = ranks(env, "convert", "hvd", "-p", "team-a", "--from-history", "--allow-failed", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == (
        "ranks: warning: using a launch that did not exit 0 (exit 1), from 2 minutes ago: "
        "NCCL_DEBUG=INFO horovodrun -np 2 -hostfile /etc/mpi/hostfile python broken.py"), r.stderr
    assert "+            - NCCL_DEBUG=INFO horovodrun -np 2 -hostfile /etc/mpi/hostfile python broken.py" in \
        added_lines(r.stdout), r.stdout


def test_the_created_job_runs_the_command_with_its_own_names(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    write_history(env, "hvd", "launcher",
                  record(90, 0, f"horovodrun -np 2 -H hvd-worker-1.hvd.{A}.svc:1 python train.py "
                                "--peer hvd-launcher"))
    r = ranks(env, "convert", "hvd", "-p", "team-a", "--from-history", "--name", "hvd-run", "--yes")
    try:
        assert r.returncode == 0, (r.stdout, r.stderr)
        runs = f"horovodrun -np 2 -H hvd-run-worker-1.hvd-run.{A}.svc:1 python train.py --peer hvd-run-launcher"
        assert r.stdout.splitlines()[-1] == f"mpijob.kubeflow.org/hvd-run created in {A}, running: {runs}"
        new = job_of(cluster, "mpi", "hvd-run")
        assert new is not None and new["metadata"]["annotations"]["ranks/converted-from"] == "hvd"
        (launcher,) = new["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
        assert launcher["command"] == ["/bin/sh", "-c", runs]
        assert job_of(cluster, "mpi", "hvd") is not None  # the session stays
    finally:
        if job_of(cluster, "mpi", "hvd-run") is not None:
            call(cluster, lambda c: c.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{A}/mpijobs/hvd-run"))


# -- PyTorch: failed launches only, the operator's variables ---------------------------------------------


PT_FAILED = "torchrun --nnodes=3 --nproc_per_node=1 --node_rank=0 --master_addr=pt-master-0 --master_port=23456 bad.py"


def test_only_failed_launches_are_refused_in_one_line_unless_allowed(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    write_history(env, "pt", "master-0", record(400, 0, "nvidia-smi"), record(180, 1, PT_FAILED),
                  record(30, 0, "ls"))
    t0 = time.time()
    r = ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--yes")
    one_line_error(r, 1, "no launch in the session's shell history exited 0", "from 3 minutes ago", "exit 1 on master-0",
                   PT_FAILED, "--allow-failed")
    assert r.stdout == ""
    r = ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--allow-failed", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == (f"ranks: warning: using a launch that did not exit 0 (exit 1 on master-0), "
                                        f"from 3 minutes ago: {PT_FAILED}")
    added = added_lines(r.stdout)
    runs = ("torchrun --nnodes=3 --nproc_per_node=1 --node_rank=$RANK --master_addr=$MASTER_ADDR "
            "--master_port=$MASTER_PORT bad.py")
    assert added.count(f"+            - {runs}") == 2, r.stdout  # master and workers run it
    assert session_names_in(added, "pt") == [], added
    assert mutations_since(cluster, t0) == [] and job_of(cluster, "pytorch", "pt-train") is None


def test_no_launch_and_bad_flags(cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    write_history(env, "pt", "master-0", record(10, 0, "ls"), "torchrun-like but plain", "# torchrun x")
    t0 = time.time()
    one_line_error(ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--dry-run"), 1,
                   "no launch in the session's shell history (~/.ranks_history in pt's pods and what ranks kept of "
                   "it)", "--command")
    one_line_error(ranks(env, "convert", "pt", "-p", "team-a", "--command", "true", "--allow-failed", "--dry-run"),
                   2, "--allow-failed goes with --from-history")
    # --command is rewritten too; the session's name left where it is no pod or host is said
    r = ranks(env, "convert", "pt", "-p", "team-a", "--command", "python train.py --peer pt-worker-1 --out /data/pt",
              "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "+            - python train.py --peer pt-train-worker-1 --out /data/pt" in added_lines(r.stdout), r.stdout
    assert r.stderr.splitlines() == [
        'ranks: note: the command still names "pt" (not as a pod or host of the session, which are renamed): '
        "check it is meant for the new job", "ranks: dry run: nothing was created"]
    assert mutations_since(cluster, t0) == []


# -- the shell's own recorder, in the pod; the banner's lines as pasted ------------------------------------


PROMPT = "@@prompt@@ "


async def shell_session(client: KubeClient, pod: str, commands: list[str], timeout: float = 120) -> tuple[int, str]:
    """`shell_command()` in `pod` through exec (stdin a pipe, as `ranks shell` without a
    terminal), typing each command once the prompt is back (nothing a command reads from stdin
    is the next one), then `exit`: (the shell's exit status, what it printed)."""
    out = bytearray()

    class Typist:
        def __init__(self) -> None:
            # (quoted in two halves: the shell's echo of this line is no prompt; a command typed
            # while one runs would be read by it, as real mpirun forwards its stdin to rank 0)
            self.left = [f"PS1='{PROMPT[:5]}''{PROMPT[5:]}'", *commands, "exit"]
            self.sent = 0

        async def read(self) -> bytes:
            if not self.left:
                await asyncio.sleep(3600)  # stdin stays open until the shell has exited
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while self.sent and out.count(PROMPT.encode()) < self.sent:  # the previous command has finished
                assert loop.time() < deadline, f"no prompt after {self.sent} commands: {bytes(out[-2000:])!r}"
                await asyncio.sleep(0.05)
            self.sent += 1
            return (self.left.pop(0) + "\n").encode()

    def sink(_channel: int, data: bytes) -> None:
        out.extend(data)

    session = await ExecSession.open(client, A, pod, shell_command(), tty=False, stdin=True)
    try:
        outcome = await asyncio.wait_for(session.bridge(Typist(), sink), timeout)
    finally:
        await session.close()
    return outcome.exit_code, out.decode("utf-8", "replace")


def recorded(env: dict[str, str], session: str, rank: str) -> list[HistoryEntry]:
    """The session's history as the shell recorded it in the pod (read through exec), without the
    test's own prompt setting."""
    r = ranks(env, "exec", session, "-p", "team-a", "--rank", rank, "--", *history_command())
    assert r.returncode == 0, r.stderr
    entries = parse_history(re.sub(rf"(?m)^\[{rank}\] ", "", r.stdout))
    return [e for e in entries if not e.command.startswith("PS1=")]


def test_the_shell_records_statuses_in_the_pod_and_convert_reads_them(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    """Each command once with its status; the launch failed (no such script), so convert refuses
    it and names it."""
    write_history(env, "pt", "master-0")  # empty
    launch = "torchrun --nnodes=1 --nproc_per_node=1 --node_rank=$RANK no_such_script.py"
    code, _ = call(cluster, lambda c: shell_session(c, "pt-master-0", ["true", "false", "", launch, "exit 3"]))
    assert code == 3  # the shell's status is `exit 3`'s
    entries = recorded(env, "pt", "master-0")
    assert [e.command for e in entries] == ["true", "false", launch, "exit 3"], entries
    assert [e.status for e in entries][:2] == [0, 1] and entries[3].status == 3
    assert entries[2].status not in (None, 0), entries
    assert all(e.time is not None and abs(e.time - time.time()) < 120 for e in entries)
    line = one_line_error(ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--dry-run"), 1,
                          "no launch in the session's shell history exited 0", f"exit {entries[2].status}")
    ran = launch.replace("$RANK", "0")  # its arguments as they ran (the master's node rank)
    assert line.endswith(f": {ran} (fix it and run it again in the shell, or pass --allow-failed to take it "
                         "anyway)"), line


async def banner_of(client: KubeClient, cfg_path: Path, name: str) -> str:
    wl = await locate_workload(load_cluster_config(str(cfg_path), None), name, "team-a")
    return banner(await shell_target(client, wl, pick_rank(wl)), cli=True)


def pasted(text: str) -> list[str]:
    """The banner's ready-to-paste lines (those to run in the shell)."""
    lines = text.split("\r\n")
    start = lines.index("  ready to paste:") + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("    "))
    return [ln.strip() for ln in lines[start:end]]


def test_pytorch_banner_lines_run_as_pasted_then_convert_takes_that_launch(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    """Line 1 in the master's shell and the hint for the other nodes from another terminal: every
    rank runs train.py, each torchrun exits 0; convert then takes that launch, as typed."""
    text = call(cluster, lambda c: banner_of(c, cluster.sim.kubeconfig_path, "pt"))
    (line,) = pasted(text)
    assert line == ("torchrun --nnodes=3 --nproc_per_node=1 --node_rank=$RANK --master_addr=$MASTER_ADDR "
                    "--master_port=$MASTER_PORT train.py")
    (hint,) = [ln.strip() for ln in text.split("\r\n") if ln.startswith("    ranks exec ")]
    argv = shlex.split(hint)
    assert argv[:9] == ["ranks", "exec", "pt", "-p", "team-a", "--rank", "worker-0,worker-1", "--", "sh"]
    write_history(env, "pt", "master-0")  # empty
    others = subprocess.Popen([*RANKS, *argv[1:]], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        code, shown = call(cluster, lambda c: shell_session(c, "pt-master-0", [line]))
        out, err = others.communicate(timeout=120)
    finally:
        if others.poll() is None:
            others.kill()
    assert others.returncode == 0, (out, err)
    assert code == 0, shown
    for r in (1, 2):  # the workers' nodes' ranks (the master's is rank 0), each to its last step
        assert re.search(rf"rank {r}/3 .*done", out), out
    assert re.search(r"rank 0/3 .*done", shown), shown
    (entry,) = recorded(env, "pt", "master-0")[:1]
    assert (entry.command, entry.status) == (line, 0)
    r = ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--dry-run")
    assert r.returncode == 0, r.stderr
    said = r.stderr.splitlines()[0]
    ran = "torchrun --nnodes=3 --nproc_per_node=1 --node_rank=0 --master_addr=pt-master-0 --master_port=23456 train.py"
    assert re.fullmatch(rf"ranks: using the launch from (just now|\d+ seconds ago|1 minute ago) \(exit 0 on 3 "
                        rf"nodes\): {re.escape(ran)}", said), said  # the master's, as it ran; every node's status
    assert added_lines(r.stdout).count(f"+            - {line}") == 2, r.stdout


def test_mpi_banner_lines_run_as_pasted_then_convert_takes_the_last(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    """Each MPI line runs as pasted in the launcher and exits 0; convert takes the last one, its -H
    list of every worker turned into the new job's hostfile."""
    text = call(cluster, lambda c: banner_of(c, cluster.sim.kubeconfig_path, "hvd"))
    lines = pasted(text)
    assert lines[0] == f"horovodrun -np 2 -H {HVD_HOSTS} python train.py"
    assert "ranks exec" not in text  # the launcher starts every rank
    launcher = next(p for p in running(cluster, "hvd", 3) or {} if "-launcher" in p)
    write_history(env, "hvd", "launcher")  # empty
    code, shown = call(cluster, lambda c: shell_session(c, launcher, [*lines[1:], lines[0]]))
    assert code == 0, shown
    entries = recorded(env, "hvd", "launcher")
    assert [(e.command, e.status) for e in entries] == [(ln, 0) for ln in [*lines[1:], lines[0]]] + [("exit", 0)], (lines, shown)
    assert shown.count("done") >= 2 * 3, shown  # two ranks to their last step, three times
    r = ranks(env, "convert", "hvd", "-p", "team-a", "--from-history", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0].endswith(f"(exit 0): {lines[0]}"), r.stderr
    added = added_lines(r.stdout)
    assert "+            - horovodrun -np 2 --hostfile /etc/mpi/hostfile python train.py" in added, r.stdout
    assert session_names_in(added, "hvd") == [], added


# -- the dashboard's convert: the same picker ----------------------------------------------------------


async def test_dashboard_convert_offers_the_launches_that_exited_0_and_the_failed_ones_on_request(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    write_history(env, "hvd", "launcher", *mpi_history())
    app = make_app(cluster.sim.kubeconfig_path, Settings())
    key = (A, "MPIJob", "hvd")
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot_wait(pilot, lambda: app.store.synced and isinstance(app.screen, WorkloadsScreen)
                         and app.screen.table.move_to_key(key), what="hvd in the list", timeout=30)
        await pilot.press("t")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ConvertScreen) and app.screen.ready,
                         what="the convert screen with the history", timeout=30)
        screen = app.screen
        assert isinstance(screen, ConvertScreen)
        ok = f"horovodrun -np 2 -H {HVD_HOSTS} python train.py"
        assert screen.query_one("#command", Input).value == ok  # the last launch that exited 0
        picker = screen.query_one("#history", OptionList)
        assert picker.option_count == 1 and "exit 0, 5 minutes ago: horovodrun" in str(picker.get_option_at_index(0).prompt)
        diff = screen.query_one("#difftext", Static)
        await pilot_wait(pilot, lambda: "--hostfile /etc/mpi/hostfile" in str(diff.content), what="the diff")
        assert session_names_in(added_lines(str(diff.content)), "hvd") == []
        box = screen.query_one("#allow-failed", Checkbox)
        box.focus()
        await pilot.press("space")
        await pilot_wait(pilot, lambda: picker.option_count == 2, what="the failed launch listed too")
        assert "exit 1, 2 minutes ago: NCCL_DEBUG=INFO horovodrun" in str(picker.get_option_at_index(0).prompt)
        picker.highlighted = 0
        picker.action_select()
        await pilot_wait(pilot, lambda: "broken.py" in screen.query_one("#command", Input).value, what="picked")
        await pilot.press("escape")


# -- on a terminal: --dry-run asks nothing; the question is the dashboard's ------------------------------


def on_a_terminal(env: dict[str, str], *args: str, answer: str = "", timeout: float = 60) -> tuple[int, str]:
    """`ranks ARGS` with its stdin a terminal (a pty; what it prints on stderr collected), `answer`
    typed once it asks."""
    import pty

    leader, follower = pty.openpty()
    proc = subprocess.Popen([*RANKS, *args], cwd=ROOT, env=env, stdin=follower, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    os.close(follower)
    try:
        if answer:
            os.write(leader, answer.encode())
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    return proc.returncode, out + err


def test_on_a_terminal_dry_run_asks_nothing_and_the_question_is_the_dashboards(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    """Issue #24, item 8: several launches that exited 0, on a terminal: --dry-run takes the newest
    without asking which; without it the picker asks, then the question the dashboard asks
    (`sessions.convert.confirmation`), Yes by default as the dialog starts on Submit."""
    from sessions.convert import confirmation

    write_history(env, "hvd", "launcher", record(300, 0, "horovodrun -np 2 python a.py"),
                  record(200, 0, "horovodrun -np 2 python b.py"))
    t0 = time.time()
    code, said = on_a_terminal(env, "convert", "hvd", "-p", "team-a", "--from-history", "--dry-run")
    assert code == 0 and "use which" not in said and "b.py" in said, said
    assert mutations_since(cluster, t0) == []
    question, destroys = confirmation("MPIJob", "hvd-train", A, delete_session=False)
    assert question == f"Submit mpijob/hvd-train in {A}?" and not destroys
    code, said = on_a_terminal(env, "convert", "hvd", "-p", "team-a", "--from-history", answer="1\nn\n")
    assert "use which" in said and f"{question} [Y/n]" in said, said  # the same words; Enter would submit
    assert code == 1 and "nothing was created" in said and job_of(cluster, "mpi", "hvd-train") is None, said
    question, destroys = confirmation("MPIJob", "hvd-train", A, delete_session=True)
    assert destroys and "(its pods' files go with it)" in question
    code, said = on_a_terminal(env, "convert", "hvd", "-p", "team-a", "--from-history", "--delete-interactive",
                               answer="1\n\n")
    assert f"{question} [y/N]" in said and code == 1, said  # Enter: No, as the dialog starts on Cancel
    assert job_of(cluster, "mpi", "hvd") is not None and job_of(cluster, "mpi", "hvd-train") is None


# -- secrets stay out of the spec; the shell's exports go into its env (issue #25, item 4) -------------------


def test_secrets_go_into_a_secret_and_the_shells_exports_into_the_env(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any]) -> None:
    from kubernetes import client as k8s
    from kubernetes import config

    write_history(env, "pt", "master-0", record(300, 0, "export NCCL_DEBUG=INFO HF_TOKEN=hf_exported_secret"),
                  record(290, 0, "export RUN_TAG=$(date +%s)"),
                  record(200, 0, "WANDB_API_KEY=wk_inline_secret torchrun --nnodes=1 train.py --steps 1 "
                                 "--password 'pa ss'"))
    t0 = time.time()
    r = ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--dry-run")
    assert r.returncode == 2 and r.stdout == "", r.stderr  # which launch (masked), then why not, in one line
    assert r.stderr.splitlines()[0].endswith("WANDB_API_KEY=*** torchrun --nnodes=1 train.py --steps 1 "
                                             "--password '***'"), r.stderr
    assert r.stderr.splitlines()[1].startswith("ranks: error: the launch holds secrets (WANDB_API_KEY=, --password, "
                                               "export HF_TOKEN)") and "--secret-env NAME" in r.stderr, r.stderr
    for value in ("hf_exported_secret", "wk_inline_secret", "pa ss"):
        assert value not in r.stdout + r.stderr
    r = ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--allow-secrets", "--dry-run")
    assert r.returncode == 0, r.stderr
    for value in ("hf_exported_secret", "wk_inline_secret", "pa ss"):
        assert value not in r.stdout + r.stderr  # kept in the spec as typed, never printed
    assert "WANDB_API_KEY=***" in r.stdout and mutations_since(cluster, t0) == []

    r = ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--secret-env", "pt-run-secrets", "--name",
              "pt-run", "--yes")
    try:
        assert r.returncode == 0, r.stderr
        said = r.stdout + r.stderr
        for value in ("hf_exported_secret", "wk_inline_secret", "pa ss"):
            assert value not in said
        assert "carried into the job's env from the session's shell: NCCL_DEBUG=INFO" in said, said
        assert "not carried into the job: RUN_TAG (its value is computed in the shell: $(date +%s))" in said, said
        assert "go into the Secret pt-run-secrets" in said, said
        job = job_of(cluster, "pytorch", "pt-run")
        assert job is not None
        for rspec in job["spec"]["pytorchReplicaSpecs"].values():
            (c,) = rspec["template"]["spec"]["containers"]
            assert c["command"] == ["/bin/sh", "-c", 'torchrun --nnodes=1 train.py --steps 1 --password "$PASSWORD"']
            env_of = {e["name"]: e for e in c["env"]}
            assert env_of["NCCL_DEBUG"] == {"name": "NCCL_DEBUG", "value": "INFO"}
            for var in ("WANDB_API_KEY", "PASSWORD", "HF_TOKEN"):
                assert env_of[var]["valueFrom"] == {"secretKeyRef": {"name": "pt-run-secrets", "key": var}}
            assert "hf_exported_secret" not in str(rspec)
        # the Secret, read with the official client: the values, owned by the job (deleted with it)
        api = config.new_client_from_config(config_file=str(cluster.sim.kubeconfig_path))
        secret = k8s.CoreV1Api(api).read_namespaced_secret("pt-run-secrets", A)
        import base64
        data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
        assert data == {"WANDB_API_KEY": "wk_inline_secret", "PASSWORD": "pa ss", "HF_TOKEN": "hf_exported_secret"}
        assert [(o.kind, o.name) for o in secret.metadata.owner_references or []] == [("PyTorchJob", "pt-run")]
        api.close()
        # a second time: the Secret's name is taken, and nothing is left half-done
        again = ranks(env, "convert", "pt", "-p", "team-a", "--from-history", "--secret-env", "pt-run-secrets",
                      "--name", "pt-run-2", "--yes")
        assert again.returncode == 2 and again.stderr.splitlines()[-1] == (
            'ranks: error: secret "pt-run-secrets" already exists in "runai-team-a"; choose another --secret-env')
        assert job_of(cluster, "pytorch", "pt-run-2") is None
    finally:
        if job_of(cluster, "pytorch", "pt-run") is not None:
            call(cluster, lambda c: c.request("DELETE", f"/apis/kubeflow.org/v1/namespaces/{A}/pytorchjobs/pt-run"))


async def test_the_dashboards_convert_puts_secrets_in_a_secret_and_shows_none(
        cluster: ThreadedSimCluster, env: dict[str, str], sessions: dict[str, Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])
    write_history(env, "hvd", "launcher",
                  record(100, 0, "HF_TOKEN=hf_dash_secret horovodrun -np 2 -hostfile /etc/mpi/hostfile python train.py"))
    app = make_app(cluster.sim.kubeconfig_path, Settings())
    key = (A, "MPIJob", "hvd")
    try:
        async with app.run_test(size=(140, 44)) as pilot:
            await pilot_wait(pilot, lambda: app.store.synced and isinstance(app.screen, WorkloadsScreen)
                             and app.screen.table.move_to_key(key), what="hvd in the list", timeout=30)
            await pilot.press("t")
            await pilot_wait(pilot, lambda: isinstance(app.screen, ConvertScreen)
                             and "Secret" in str(app.screen.query_one("#problem", Static).content),
                             what="the convert screen saying where the secret goes", timeout=30)
            screen = app.screen
            assert isinstance(screen, ConvertScreen)
            note = str(screen.query_one("#problem", Static).content)
            assert "the launch's secrets (HF_TOKEN=) go into the Secret hvd-train-secrets" in note, note
            shown = str(screen.query_one("#difftext", Static).content) + str(screen.query_one("#history").render())
            assert "hf_dash_secret" not in shown and "horovodrun" in shown
            screen.query_one("#name", Input).value = "hvd-dash"
            await pilot_wait(pilot, lambda: "hvd-dash-secrets" in str(screen.query_one("#problem", Static).content),
                             what="the Secret named after the job", timeout=20)
            await pilot.press("ctrl+s")
            await pilot_wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question", timeout=20)
            await pilot.press("y")
            await pilot_wait(pilot, lambda: job_of(cluster, "mpi", "hvd-dash") is not None, what="the job", timeout=30)
        job = job_of(cluster, "mpi", "hvd-dash")
        assert job is not None
        (c,) = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
        assert "hf_dash_secret" not in str(job)
        assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hvd-dash-secrets", "key": "HF_TOKEN"}}} \
            in c["env"]
        secret = cluster.call(lambda: copy.deepcopy(cluster.sim.store.find(("", "secrets"), A, "hvd-dash-secrets").obj))
        assert base64.b64decode(secret["data"]["HF_TOKEN"]) == b"hf_dash_secret"
    finally:
        if job_of(cluster, "mpi", "hvd-dash") is not None:
            async with KubeClient(load_cluster_config(str(cluster.sim.kubeconfig_path), None)) as c:
                await c.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{A}/mpijobs/hvd-dash")
