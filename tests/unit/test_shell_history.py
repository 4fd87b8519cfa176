"""The shell history without a cluster: the records the session's shell writes (every command line
with its status and time; every launch it runs with its own status and arguments as run, whatever
the line around it), read back; which lines are launches; launches put together across nodes and
the one convert takes (sessions.history, sessions.launches, sessions.session_history), the history
store kept outside the pods (sessions.history_store)."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from monitors.connection import ExitCode
from monitors.model_views import WorkloadView
from sessions import history, session_history, shell
from sessions import launches as launches_mod
from sessions.cmdline import launcher_in
from sessions.errors import SessionError
from sessions.exec_all import RankResult
from sessions.exec_bridge import ExecOutcome
from sessions.history import HistoryEntry, parse_history
from sessions.history_store import HistoryStore
from sessions.launches import Launch, launch_choices, launches, pick_launch
from tests.unit.session_objects import mpi
from tests.waiting import wait_for

# -- shell: the history ------------------------------------------------------------------------------

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z

# records as the shell writes them (epoch, exit status, command; a multi-line command continues on
# lines starting with two tabs), after lines an older ranks wrote (plain, bash's #epoch lines)
HISTORY = "\n".join([
    "#1767225000",
    "horovodrun -np 2 -H a:1,b:1 python old.py",  # old format: no exit status
    "ls /data",
    f"{T0:.0f}\t0\tnvidia-smi",
    f"{T0 + 10:.0f}\t0\t# horovodrun -np 2 commented out",
    f"{T0 + 20:.0f}\t0\techo 'use torchrun --nnodes=2 here'",
    f"{T0 + 30:.0f}\t0\tranks exec sess -p team-a --rank worker-0 -- sh -c 'torchrun train.py'",
    f"{T0 + 40:.0f}\t0\tNCCL_DEBUG=INFO horovodrun -np 2 -hostfile /etc/mpi/hostfile python train.py",
    f"{T0 + 50:.0f}\t0\tfor i in 1 2; do",
    "\t\t  echo $i",
    "\t\tdone",
    f"{T0 + 60:.0f}\t127\ttorchrun --nnodes=3 train.py",
    f"{T0 + 70:.0f}\t1\tmpirun -np 2 python nope.py",
    "",
]) + "\n"


def test_parse_history_records_continuations_and_plain_lines() -> None:
    entries = parse_history(HISTORY)
    assert entries[0] == HistoryEntry("horovodrun -np 2 -H a:1,b:1 python old.py", None, 1767225000.0)
    assert entries[1] == HistoryEntry("ls /data", None, None)  # a plain line: no status, no time
    assert entries[2] == HistoryEntry("nvidia-smi", 0, T0)
    assert entries[7] == HistoryEntry("for i in 1 2; do\n  echo $i\ndone", 0, T0 + 50)
    assert [(e.status, e.command) for e in entries[-2:]] == [(127, "torchrun --nnodes=3 train.py"),
                                                             (1, "mpirun -np 2 python nope.py")]
    assert len(entries) == 10
    # a tab-indented plain line is a command of its own, not a continuation
    assert parse_history("ls\n\t\tpwd\r\n") == [HistoryEntry("ls"), HistoryEntry("pwd")]
    assert parse_history("") == []


@pytest.mark.parametrize(("line", "launcher"), [
    ("horovodrun -np 4 python train.py", "horovodrun"),
    ("mpirun -np 2 python t.py", "mpirun"),
    ("mpiexec -n 2 python t.py", "mpiexec"),
    ("torchrun --nnodes=2 train.py", "torchrun"),
    ("deepspeed --num_gpus 8 train.py", "deepspeed"),
    ("python -m torch.distributed.run --nproc_per_node 2 t.py", "python -m torch.distributed.run"),
    ("python3 -u -m torch.distributed.launch t.py", "python -m torch.distributed.launch"),
    ("/opt/conda/bin/python3.11 -mtorch.distributed.run t.py", "python -m torch.distributed.run"),
    ("NCCL_DEBUG=INFO OMP_NUM_THREADS=1 torchrun train.py", "torchrun"),
    ("env -u HTTP_PROXY A=1 nohup time -p /usr/local/bin/horovodrun -np 2 x > run.log 2>&1 &", "horovodrun"),
    ("cd /workspace && torchrun train.py | tee log", "torchrun"),
    ("for n in 1 2; do mpirun -np $n x; done", "mpirun"),
    ("echo a#b; mpiexec -n 2 x", "mpiexec"),
    # never a launch
    ("# horovodrun -np 2 python train.py", None),
    ("ls # torchrun", None),
    ("echo torchrun --nnodes=2 train.py", None),
    ("ranks exec sess --all -- sh -c 'torchrun train.py'", None),
    ("kubectl exec sess-master-0 -- torchrun train.py", None),
    ("sh -c 'torchrun train.py'", None),
    ('echo "$(torchrun --help)"', None),
    ("python train.py", None),
    ("python -m torch.utils.collect_env", None),
    ("python -c 'import torch.distributed.run'", None),
    ("vim torchrun.sh", None),
    ("HOROVOD=horovodrun", None),
    ("horovodrun() { echo stand-in; }", None),
    ("torchrun () { :; }; torchrun train.py", "torchrun"),
])
def test_a_launch_is_its_command_word(line: str, launcher: str | None) -> None:
    assert launcher_in(line) == launcher


def test_launches_most_recent_first_with_status_and_time() -> None:
    found = launches(HISTORY)
    assert [(x.launcher, x.status, x.time) for x in found] == [
        ("mpirun", 1, T0 + 70), ("torchrun", 127, T0 + 60), ("horovodrun", 0, T0 + 40),
        ("horovodrun", None, 1767225000.0)]
    assert found[2].command == "NCCL_DEBUG=INFO horovodrun -np 2 -hostfile /etc/mpi/hostfile python train.py"
    assert launches("ls\ncd /data\npython train.py\n") == []


def test_pick_the_last_launch_that_exited_0_and_say_which_and_when() -> None:
    found = launches(HISTORY)
    launch, note = pick_launch(found, now=T0 + 40 + 4 * 60 + 5)
    assert launch is found[2]
    assert note == ("using the launch from 4 minutes ago (exit 0; 2 later launches did not exit 0): "
                    "NCCL_DEBUG=INFO horovodrun -np 2 -hostfile /etc/mpi/hostfile python train.py")
    ok_last = [Launch("torchrun train.py", "torchrun", 0, T0)]
    assert pick_launch(ok_last, now=T0 + 1) == (ok_last[0], "using the launch from just now (exit 0): "
                                                                  "torchrun train.py")


def test_only_failed_launches_are_refused_unless_allowed() -> None:
    failed = [x for x in launches(HISTORY) if not x.ok]
    with pytest.raises(SessionError) as err:
        pick_launch(failed, now=T0 + 70 + 2 * 3600)
    assert err.value.code == ExitCode.ERROR
    assert err.value.message == (
        "no launch in the session's shell history exited 0; the last one, from 2 hours ago, has exit 1: "
        "mpirun -np 2 python nope.py (fix it and run it again in the shell, or pass --allow-failed to take it "
        "anyway)")
    assert "\n" not in err.value.message
    launch, note = pick_launch(failed, allow_failed=True, now=T0 + 70 + 2 * 3600)
    assert launch is failed[0]
    assert note == ("warning: using a launch that did not exit 0 (exit 1), from 2 hours ago: "
                    "mpirun -np 2 python nope.py")
    # --allow-failed takes the latest even when an older one succeeded
    assert pick_launch(launches(HISTORY), allow_failed=True)[0].status == 1


def test_an_old_plain_history_has_no_status_it_is_refused_unless_allowed() -> None:
    old = launches("#1767225000\nhorovodrun -np 2 python train.py\n")
    with pytest.raises(SessionError) as err:
        pick_launch(old, now=1767225000 + 86400 * 3)
    assert "the last one, from 3 days ago, has exit status not recorded: horovodrun" in err.value.message
    launch, note = pick_launch(launches("torchrun a.py\n"), allow_failed=True)
    assert launch.status is None and launch.time is None
    assert note == ("warning: using a launch that did not exit 0 (exit status not recorded), from an older history "
                    "(no time recorded): torchrun a.py")


def test_no_launch_at_all() -> None:
    with pytest.raises(SessionError) as err:
        pick_launch([], where="~/.ranks_history in hvd's lead pod")
    assert err.value.code == ExitCode.ERROR
    assert err.value.message.startswith("no launch in the session's shell history (~/.ranks_history in hvd's "
                                        "lead pod): run horovodrun, mpirun, mpiexec, torchrun, deepspeed or ")


def test_launch_choices_each_command_once() -> None:
    found = launches(HISTORY + f"{T0 + 80:.0f}\t0\ttorchrun ok.py\n{T0 + 90:.0f}\t0\ttorchrun ok.py\n")
    assert [c.command for c in launch_choices(found, allow_failed=False)] == [
        "torchrun ok.py", "NCCL_DEBUG=INFO horovodrun -np 2 -hostfile /etc/mpi/hostfile python train.py"]
    assert launch_choices(found, allow_failed=False)[0].time == T0 + 90  # the latest
    assert len(launch_choices(found, allow_failed=True)) == 5


def test_the_pick_says_what_it_shows_without_control_sequences() -> None:
    found = [Launch("torchrun \x1b]52;c;aGk=\x07train.py\x1b[2J", "torchrun", 0, T0)]
    _, note = pick_launch(found, now=T0 + 30)
    assert "\x1b" not in note and "\x07" not in note and note.endswith("torchrun train.py")


def test_history_command_reads_the_file_the_shell_writes() -> None:
    argv = session_history.history_command()
    assert argv[:2] == ["/bin/sh", "-c"]
    assert '"${HOME:-/tmp}/.ranks_history"' in argv[2] and '"/tmp/.ranks_history"' in argv[2]
    assert ".ranks_history" in shell.SHELL_SCRIPT and "__HIST__" not in shell.SHELL_SCRIPT


class LocalShell:
    """`shell_command()` run here on a pseudo-terminal as the pod runs it: HOME a temporary
    directory (whose .bashrc sets a prompt to wait for), the given PATH."""

    PROMPT = b"@@ready@@ "

    def __init__(self, home: Path, path: str | None = None, argv0: str = "/bin/sh") -> None:
        env = {"HOME": str(home), "PATH": path or os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "dumb",
               "PS1": self.PROMPT.decode()}
        self.home = home
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            os.chdir(home)
            os.execve(argv0, shell.shell_command(), env)
        self.seen = b""
        self.code: int | None = None

    def read(self) -> None:
        if select.select([self.fd], [], [], 0.05)[0]:
            with contextlib.suppress(OSError):
                self.seen += os.read(self.fd, 65536)

    def prompts(self, n: int) -> None:
        wait_for(lambda: self.read() or self.seen.count(self.PROMPT) >= n, timeout=10, what=f"prompt {n}",
                 detail=lambda: self.seen[-500:])

    def type(self, *commands: str) -> None:
        """Each command (its lines), then the prompt after it."""
        for command in commands:
            count = self.seen.count(self.PROMPT)
            os.write(self.fd, command.replace("\n", "\r").encode() + b"\r")
            self.prompts(count + 1)

    def finish(self, line: str) -> int:
        """Type `line`, which ends the shell: its exit status."""
        os.write(self.fd, line.encode() + b"\r")

        def ended() -> bool:
            self.read()
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.code = os.waitstatus_to_exitcode(status)
            return bool(pid)

        wait_for(ended, timeout=10, what="the shell to end", detail=lambda: self.seen[-500:])
        os.close(self.fd)
        assert self.code is not None
        return self.code

    @property
    def history(self) -> str:
        return (self.home / ".ranks_history").read_text()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    (tmp_path / ".bashrc").write_text(f"PS1='{LocalShell.PROMPT.decode()}'\n")
    return tmp_path


def test_the_shell_records_each_command_once_with_its_status(home: Path) -> None:
    (home / ".bash_history").write_text("torchrun from-an-earlier-session.py\n")  # bash loads it: not a new command
    sh = LocalShell(home)
    sh.prompts(1)
    sh.type("true", "", "", "false", "ranks-no-such-command --x", "for i in 1 2; do\necho $i\ndone",
            "echo 'two\nlines'", "sleep 0; (exit 3)")
    assert sh.finish("exit 5") == 5  # the shell ends with the status `exit` gave
    entries = parse_history(sh.history)
    assert [(e.status, e.command) for e in entries] == [
        (0, "true"), (1, "false"), (127, "ranks-no-such-command --x"), (0, "for i in 1 2; do echo $i; done"),
        (0, "echo 'two\nlines'"), (3, "sleep 0; (exit 3)"), (5, "exit 5")]
    assert all(e.time is not None and abs(e.time - time.time()) < 60 for e in entries)
    lines = sh.history.splitlines()  # readable: one record a line, a multi-line command's lines indented
    assert re.fullmatch(r"\d+\t0\ttrue", lines[0]) and lines[4].endswith("\t0\techo 'two")
    assert lines[5] == "\t\tlines'"


def test_the_shell_keeps_the_status_of_a_plain_exit_and_the_users_prompt_command_and_trap(home: Path) -> None:
    (home / ".bashrc").write_text(f"PS1='{LocalShell.PROMPT.decode()}'\nPROMPT_COMMAND='LAST=$?'\n"
                                  f"trap 'echo $LAST > {home}/trap-ran' EXIT\n")
    sh = LocalShell(home)
    sh.prompts(1)
    sh.type("false")
    assert sh.finish("exit") == 1  # `exit` alone: the status of the last command
    assert [(e.status, e.command) for e in parse_history(sh.history)] == [(1, "false"), (1, "exit")]
    assert (home / "trap-ran").read_text() == "1\n"  # their PROMPT_COMMAND saw $?, their EXIT trap ran


def test_without_bash_sh_runs_with_the_history_file(home: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    dash = shutil.which("dash")
    if dash is None:
        pytest.skip("no dash here")
    bin_dir = tmp_path_factory.mktemp("nobash")
    for tool, path in (("sh", dash), ("cat", shutil.which("cat")), ("rm", shutil.which("rm"))):
        os.symlink(path or "/bin/false", bin_dir / tool)
    sh = LocalShell(home, str(bin_dir), str(bin_dir / "sh"))
    sh.prompts(1)
    sh.type('echo "hf=$HISTFILE"')
    assert sh.finish("exit 4") == 4
    assert f"hf={home}/.ranks_history" in sh.seen.decode()


async def test_session_launches_read_every_running_rank_and_keep_what_they_read(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    asked: list[tuple[list[str], list[str]]] = []

    async def run_on_ranks(client: Any, wl: WorkloadView, ranks: list[Any], command: list[str], on_line: Any,
                           **kw: Any) -> list[RankResult]:
        asked.append(([r.pod for r in ranks], command))
        lead = next(r for r in ranks if r.lead)
        for line in HISTORY.encode().splitlines(keepends=True):
            on_line(lead, 1, line)
        on_line(lead, 2, b"torchrun --on-stderr-is-not-history\n")
        on_line(lead, 1, f"{T0 + 99:.0f}\t0\ttorchrun bad-\xff-utf8\n".encode("latin-1"))
        return [RankResult(r, ExecOutcome(0)) for r in ranks]

    monkeypatch.setattr(session_history, "run_on_ranks", run_on_ranks)
    store = HistoryStore("ctx", root=tmp_path)
    wl = mpi()
    got = await session_history.session_launches(None, wl, store)
    ((pods, command),) = asked  # every running rank at once
    assert sorted(pods) == sorted(r.pod for r in wl.ranks) and command == session_history.history_command()
    assert (got[0].command, got[0].launcher, got[0].status, got[0].time) == ("torchrun bad-\ufffd-utf8", "torchrun",
                                                                              0, T0 + 99)
    assert [(x.command, x.status) for x in got[1:]] == [(x.command, x.status) for x in launches(HISTORY)]
    # what was read is kept: with the pods gone (a suspend), the same launches
    saved = store.load(wl.namespace, wl.kind, wl.name, wl.uid)
    assert saved is not None and [h.label for h in saved.histories] == ["launcher"]
    assert [x.command for x in session_history.launches_of(saved, None)] == [x.command for x in got]


@pytest.mark.parametrize(("result", "message"), [
    (RankResult(None, ExecOutcome(2)), "cannot read the shell history in hvd-launcher-x7k2p: exit 2"),  # type: ignore[arg-type]
    (RankResult(None, None, "pods \"hvd-launcher-x7k2p\" is forbidden", 7),  # type: ignore[arg-type]
     'cannot read the shell history in hvd-launcher-x7k2p: pods "hvd-launcher-x7k2p" is forbidden'),
])
async def test_an_unreadable_history_of_which_nothing_was_kept_is_an_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, result: RankResult, message: str) -> None:
    async def run_on_ranks(client: Any, wl: WorkloadView, ranks: list[Any], *_a: Any, **_kw: Any) -> list[RankResult]:
        return [RankResult(r, result.outcome, result.error, result.code) for r in ranks]

    monkeypatch.setattr(session_history, "run_on_ranks", run_on_ranks)
    with pytest.raises(SessionError) as err:
        await session_history.session_launches(None, mpi(), HistoryStore("ctx", root=tmp_path))
    assert err.value.code == ExitCode.ERROR
    assert err.value.message == message


# -- every launch with its own status, whatever the line around it -------------------------------------------


def stand_ins(home: Path) -> str:
    """Launchers for a local shell: each exits with `--code N` (0 without), horovodrun with 2 for a
    script it cannot open, as python does; a PATH with them first."""
    bin_dir = home / "bin"
    bin_dir.mkdir()
    body = ('#!/bin/sh\ncode=0; prev=\nfor a; do [ "$prev" = --code ] && code=$a; prev=$a\n'
            'case $a in *trian.py) echo "python: can\'t open file \'$a\'" >&2; exit 2;; esac; done\nexit $code\n')
    for name in ("horovodrun", "torchrun", "mpirun", "python"):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return f"{bin_dir}:/usr/bin:/bin"


def test_every_launch_is_recorded_with_its_own_status_whatever_the_line_around_it(home: Path) -> None:
    (home / "run.sh").write_text("#!/bin/bash\ntorchrun --code 5 from-a-script.py\necho script done\n")
    sh = LocalShell(home, stand_ins(home))
    sh.prompts(1)
    sh.type("horovodrun -np 2 -hostfile /etc/mpi/hostfile python trian.py; echo done",
            "true && torchrun --code 3 and.py || echo failed",
            "torchrun ok.py | cat",
            "for n in 1 2; do mpirun -np $n loop.py; done",
            "go() { torchrun --code 4 in-a-function.py; }; go; echo after",
            "bash run.sh",
            " torchrun --code 0 kept-out-with-a-leading-space.py",
            "python -m torch.distributed.run --nproc_per_node 2 module.py",
            "python plain-script.py",
            "echo horovodrun is not a launch")
    assert sh.finish("exit") == 0
    got = [(x.status, x.command) for x in launches(sh.history)]
    assert got == [
        (0, "python -m torch.distributed.run --nproc_per_node 2 module.py"),
        (5, "torchrun --code 5 from-a-script.py"),
        (4, "torchrun --code 4 in-a-function.py"),
        (0, "mpirun -np 2 loop.py"),
        (0, "mpirun -np 1 loop.py"),
        (0, "torchrun ok.py"),
        (3, "torchrun --code 3 and.py"),
        (2, "horovodrun -np 2 -hostfile /etc/mpi/hostfile python trian.py"),
    ], got
    # the line of the failed launch exited 0 (echo's): convert never takes it, and says why not
    entries = parse_history(sh.history)
    assert (entries[0].status, entries[0].command) == (0, "horovodrun -np 2 -hostfile /etc/mpi/hostfile python "
                                                          "trian.py; echo done")
    chosen, note = pick_launch(launches(sh.history))
    assert chosen.command == "python -m torch.distributed.run --nproc_per_node 2 module.py" and "exit 0" in note
    failed = [x for x in launches(sh.history) if x.launcher == "horovodrun"]
    with pytest.raises(SessionError) as err:
        pick_launch(failed)
    assert "has exit 2: horovodrun -np 2 -hostfile /etc/mpi/hostfile python trian.py" in err.value.message


def test_a_launch_keeps_its_lines_environment_and_directory(home: Path) -> None:
    sh = LocalShell(home, stand_ins(home))
    sh.prompts(1)
    sh.type("mkdir -p work && cd work && NCCL_DEBUG=INFO torchrun --nnodes=1 --node_rank=$((2-2)) 'a b.py'",
            "cd ..", "X=1; torchrun here.py")
    assert sh.finish("exit") == 0
    got = [x.command for x in launches(sh.history)]
    assert got == ["torchrun here.py",
                   f"cd {home}/work && NCCL_DEBUG=INFO torchrun --nnodes=1 --node_rank=0 'a b.py'"], got


@pytest.mark.parametrize(("line", "its"), [
    ("torchrun a.py", True),
    ("cd /w && NCCL_DEBUG=1 torchrun a.py", True),
    ("time torchrun a.py > log 2>&1", True),
    ("torchrun a.py; echo done", False),
    ("torchrun a.py && echo done", False),
    ("torchrun a.py || true", False),
    ("torchrun a.py | tee log", False),
    ("torchrun a.py &", False),
    ("for n in 1; do torchrun a.py; done", False),
    ("! torchrun a.py", False),
    ("(torchrun a.py)", False),
    ("echo torchrun", False),
])
def test_a_lines_status_is_its_launchs_only_when_nothing_follows_it(line: str, its: bool) -> None:
    assert history.status_is_the_launchs(line) is its


def test_a_line_known_only_as_a_line_has_its_status_only_when_it_is_the_launchs() -> None:
    text = (f"{T0:.0f}\t0\tnohup torchrun a.py; echo done\n"  # nohup: not through the shell's function
            f"{T0 + 5:.0f}\t1\tenv A=1 torchrun b.py\n")
    got = launches(text)
    assert [(x.command, x.status) for x in got] == [("env A=1 torchrun b.py", 1),
                                                    ("nohup torchrun a.py; echo done", None)]
    assert got[1].outcome() == "exit status unknown: the line's status (0) is not the launch's"
    with pytest.raises(SessionError):
        pick_launch(got[1:])


# -- a launch on several nodes -------------------------------------------------------------------------------


def run(label: str, status: int | None, start: float, end: float, node_rank: int | str = "$RANK",
        source: str = "shell") -> history.LaunchRun:
    command = f"torchrun --nnodes=2 --node_rank={node_rank} --master_addr=pt-master-0 train.py"
    return history.LaunchRun("torchrun", command, status, start, end, command, label, f"pt-{label}", source)


def same_rank(command: str) -> str:
    """As convert's rewrite does: any node rank is the operator's $RANK."""
    return re.sub(r"--node_rank=\S+", "--node_rank=$RANK", command)


def test_a_torch_launch_succeeded_only_if_every_node_did_and_names_the_one_that_failed() -> None:
    runs = [run("master-0", 0, T0, T0 + 30, 0), run("worker-0", 1, T0 + 2, T0 + 20, source="exec")]
    (launch,) = launches_mod.group(runs, normalize=same_rank)
    assert launch.status == 1 and not launch.ok and launch.nodes == 2
    assert launch.outcome() == "exit 1 on worker-0" and launch.failed_node == "worker-0"
    assert launch.command == runs[0].command  # the master's
    (launch,) = launches_mod.group([run("master-0", 0, T0, T0 + 30, 0), run("worker-0", 0, T0 + 2, T0 + 29)],
                                   normalize=same_rank)
    assert launch.ok and launch.outcome() == "exit 0 on 2 nodes"


def test_a_node_not_recorded_leaves_the_launch_unknown_and_says_which() -> None:
    (launch,) = launches_mod.group([run("master-0", 0, T0, T0 + 30, 0)], labels=["master-0", "worker-0"])
    assert launch.status is None and not launch.ok
    assert launch.outcome() == ("exit status unknown: worker-0 not recorded (started outside ranks shell and "
                                "ranks exec?)")


def test_runs_apart_in_time_or_of_other_commands_are_other_launches() -> None:
    runs = [run("master-0", 0, T0, T0 + 30, 0), run("worker-0", 0, T0 + 100, T0 + 130),
            run("master-0", 0, T0 + 101, T0 + 131, 0)]
    got = launches_mod.group(runs, normalize=same_rank)
    assert [(x.ok, len(x.runs)) for x in got] == [(True, 2), (False, 1)]
    other = history.LaunchRun("torchrun", "torchrun --nnodes=2 other.py", 0, T0 + 1, T0 + 29, "", "worker-0")
    got = launches_mod.group([run("master-0", 0, T0, T0 + 30, 0), other])
    assert [len(x.runs) for x in got] == [1, 1] and not any(x.ok for x in got)


# -- the store kept outside the pods --------------------------------------------------------------------------


def test_the_store_keeps_each_pod_instances_history_for_the_user_alone(tmp_path: Path) -> None:
    store = HistoryStore("ctx", "https://server", user="alice", root=tmp_path / "sessions")
    first = f"{T0:.0f}\t0\ttorchrun a.py\n"
    store.save_history("ns", "PyTorchJob", "pt", "uid-1", "master-0", "pt-master-0", "pt-master-0@1", first)
    store.save_history("ns", "PyTorchJob", "pt", "uid-1", "master-0", "pt-master-0", "pt-master-0@1",
                       first + f"{T0 + 9:.0f}\t1\ttorchrun b.py\n")  # the same file, grown
    store.save_history("ns", "PyTorchJob", "pt", "uid-1", "master-0", "pt-master-0", "pt-master-0@2", "")  # resumed
    store.save_history("ns", "PyTorchJob", "pt", "uid-1", "master-0", "pt-master-0", "pt-master-0@2",
                       f"{T0 + 99:.0f}\t0\ttorchrun c.py\n")
    saved = store.load("ns", "PyTorchJob", "pt", "uid-1")
    assert saved is not None and [h.instance for h in saved.histories] == ["pt-master-0@1", "pt-master-0@2"]
    assert [x.command for x in session_history.launches_of(saved, None)] == ["torchrun c.py", "torchrun b.py",
                                                                              "torchrun a.py"]
    assert store.load("ns", "PyTorchJob", "pt", "uid-2") is None  # another session of that name
    assert [s.uid for s in store.find("ns", "pt")] == ["uid-1"] and store.find("*", "pt")
    path = store.path("ns", "PyTorchJob", "pt")
    assert path.stat().st_mode & 0o777 == 0o600
    assert store.dir.stat().st_mode & 0o777 == 0o700 and store.dir.parent.stat().st_mode & 0o777 == 0o700
    assert "alice" in store.dir.name and HistoryStore("ctx", "https://server", user="bob",
                                                      root=tmp_path / "sessions").dir != store.dir


def test_the_mirror_frames_are_read_whole_however_they_arrive() -> None:
    frames = session_history.Frames()
    stream = b"\x1f\n\x1e12\nab\tc\n\x1e\n\x1f\n\x1e0\n\x1e\n\x1e3\nxyz\x1e\n"
    got: list[str] = []
    for i in range(len(stream)):
        got += frames.feed(stream[i:i + 1])
    assert got == ["ab\tc\n", "", "xyz"]
