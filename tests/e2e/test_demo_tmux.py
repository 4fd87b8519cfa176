"""End to end: the installed `ranks` command in a real terminal (tmux), and without one.

`ranks demo` runs inside a private tmux server (`tmux -L <unique>`) at a fixed size, driven with
send-keys and read with capture-pane. A shell wrapper records the exit status and `stty -a` before
and after, so the tests see that the terminal was restored (cooked mode, normal screen, cursor
shown, mouse reporting off) and that the demo cluster's processes (pods, Prometheus), found by
the demo's --workdir under tmp_path, are gone after exit, and the --workdir with them.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.tmux_driver import Tmux, stty_flags
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = Path(sys.executable).parent / "ranks"
RANKS: list[str] = [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "tui.cli"]

# environment variables that would make the run depend on the developer's machine
DROP_ENV = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "TMUX", "TMUX_PANE",
            "NO_COLOR",
            "FORCE_COLOR", "COLORTERM", "COLUMNS", "LINES", "TEXTUAL", "TEXTUAL_DRIVER", "RANKS_CONFIG")


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROP_ENV and not k.startswith("RANKS_")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_STATE_HOME=str(tmp_path / "state"),
               LC_ALL="C.UTF-8", LANG="C.UTF-8",
               TERM="xterm-256color", PYTHONDONTWRITEBYTECODE="1")
    return env


# ---------------------------------------------------------------- processes of one demo


def processes_under(root: Path) -> dict[int, str]:
    """Live processes whose working directory or root directory is under root (a simcluster pod's
    processes live in its own root there, where namespaces are available) or whose command line
    names it."""
    prefix = str(root)
    found: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
            cmd = raw.replace(b"\0", b" ").decode(errors="replace").strip()
            cwd = os.readlink(f"/proc/{pid}/cwd")
            top = os.readlink(f"/proc/{pid}/root")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z":  # a zombie holds nothing; its parent will reap it
            continue
        if prefix in cmd or any(p == prefix or p.startswith(prefix + os.sep) for p in (cwd, top)):
            found[pid] = cmd
    return found


def wait_no_processes(root: Path, timeout: float) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    left = processes_under(root)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = processes_under(root)
    return left


def kill_leftovers(root: Path) -> None:
    """Only processes of this test's demo (identified by its workdir), each by its pid."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in processes_under(root):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        if not wait_no_processes(root, 5.0):
            return


# ---------------------------------------------------------------- tmux


# ---------------------------------------------------------------- one demo run


@dataclass
class Demo:
    tmux: Tmux
    workdir: Path
    before: Path  # stty -a before ranks ran
    after: Path  # stty -a after ranks exited


@contextlib.contextmanager
def demo_in_tmux(tmp_path: Path, width: int, height: int, *extra: str) -> Iterator[Demo]:
    env = clean_env(tmp_path)
    workdir = tmp_path / "demo"
    before, after = tmp_path / "stty-before.txt", tmp_path / "stty-after.txt"
    ranks = " ".join(shlex.quote(a) for a in [*RANKS, "demo", "--workdir", str(workdir), *extra])
    script = tmp_path / "run.sh"  # a file: only ranks' own command line names the workdir
    script.write_text(
        "TERM=xterm-256color; export TERM\n"
        f"stty -a > {shlex.quote(str(before))}\n"
        f"{ranks}\n"
        'echo "EXIT=$?"\n'
        f"stty -a | tee {shlex.quote(str(after))}\n"
        "echo WRAPPER-DONE\n"
        "sleep 60\n"
    )
    tmux = Tmux(env, width, height, name="ranks-e2e")
    try:
        tmux.start(f"sh {shlex.quote(str(script))}", tmp_path)
        yield Demo(tmux, workdir, before, after)
    finally:
        tmux.kill()  # SIGHUP to a ranks still running (a failed test): give it time to clean up
        if wait_no_processes(workdir, 10.0):
            kill_leftovers(workdir)


def is_help(screen: str) -> bool:
    return re.search(r"ranks\s+\S+\s+keys", screen) is not None and "Quit" in screen


def crumbs(screen: str) -> list[str]:
    """The breadcrumbs of the first line: ["ranks", "projects", ..., "bert-crash"] (without the context)."""
    first = screen.splitlines()[0] if screen.strip() else ""
    parts = [p.strip() for p in first.split("›")]
    if parts:
        parts[-1] = re.split(r"\s{2,}", parts[-1])[0]
    return parts


def footer(screen: str) -> str:
    lines = screen.rstrip("\n").splitlines()
    return lines[-1] if lines else ""


def workloads_listed(demo: Demo) -> str:
    screen = demo.tmux.wait_for(lambda s: "hvd-interactive" in s and "bert-crash" in s, timeout=45,
                                why="the demo workloads in the list")
    flags = demo.tmux.flags()
    # while the dashboard runs, the terminal is in the state the exit checks expect to be undone
    assert flags["alternate_on"] == "1", flags
    assert flags["cursor_flag"] == "0", flags
    assert "1" in (flags["mouse_any_flag"], flags["mouse_all_flag"], flags["mouse_button_flag"]), flags
    running: dict[int, str] = {}

    def pods() -> list[str]:
        nonlocal running
        running = processes_under(demo.workdir)
        return [cmd for cmd in running.values() if "train_sim.py" in cmd]

    wait_for(pods, timeout=30, what="the demo's training pods running under the workdir", detail=lambda: running)
    return screen


def quit_and_check_restored(demo: Demo) -> None:
    tmux = demo.tmux
    # while it runs: the demo's files are the user's alone, the kubeconfig there for kubectl
    assert oct(demo.workdir.stat().st_mode & 0o777) == oct(0o700), "the demo's files are the user's alone"
    assert (demo.workdir / "kubeconfig").is_file(), "no kubeconfig for kubectl in another terminal"
    tmux.keys("q")
    tmux.wait_for("WRAPPER-DONE", timeout=30, why="ranks to exit and the wrapper to print stty -a")
    screen = tmux.screen(join=True)
    assert "EXIT=0" in screen, f"ranks did not exit 0:\n{screen}"
    assert "Traceback" not in screen and "ranks: error" not in screen, f"errors after exit:\n{screen}"
    # the alternate screen was left: the shell's lines are visible and the dashboard is not
    assert "icanon" in screen, f"stty -a output not visible:\n{screen}"
    assert not re.search(r"ranks\s+[›>]\s+projects", screen), f"the dashboard is still on screen:\n{screen}"
    flags = tmux.flags()
    assert flags["alternate_on"] == "0", f"still on the alternate screen: {flags}"
    assert flags["cursor_flag"] == "1", f"cursor left hidden: {flags}"
    mouse = {k: v for k, v in flags.items() if k.startswith("mouse_") and v != "0"}
    assert not mouse, f"mouse reporting left on: {mouse}"
    after = stty_flags(demo.after.read_text())
    for flag in ("icanon", "echo", "isig", "iexten", "icrnl", "ixon", "opost"):
        assert flag in after and f"-{flag}" not in after, f"terminal left with -{flag}: {sorted(after)}"
    assert after == stty_flags(demo.before.read_text()), (
        f"terminal settings changed: lost {sorted(stty_flags(demo.before.read_text()) - after)}, "
        f"gained {sorted(after - stty_flags(demo.before.read_text()))}")
    left = wait_no_processes(demo.workdir, 5.0)
    assert not left, f"ranks demo left processes behind: {left}"
    assert not demo.workdir.exists(), f"the stopped demo's --workdir is kept: {sorted(demo.workdir.iterdir())}"
    flight = demo.workdir.parent / "home" / ".local" / "state" / "ranks" / "flight"
    kept = sorted(p.name for p in flight.iterdir()) if flight.exists() else []
    assert kept == [], f"the stopped demo's flight recordings are kept: {kept}"


# ---------------------------------------------------------------- tests in a terminal


@pytest.mark.timeout(150)
def test_demo_in_tmux_100x30_navigation_and_clean_exit(tmp_path: Path) -> None:
    with demo_in_tmux(tmp_path, 100, 30) as demo:
        tmux = demo.tmux
        workloads_listed(demo)

        # the footer tells where the focus is: the filter input shows only "esc Back  / Filter"
        tmux.keys("/")
        tmux.wait_for(lambda s: "l Logs" not in footer(s), timeout=30,
                      why="the filter input to take the focus")
        tmux.type("bert")
        tmux.wait_for(lambda s: "bert-crash" in s and "hvd-interactive" not in s, timeout=30,
                      why="the filter to keep only bert-crash")
        tmux.keys("Enter")  # closes the filter, focus back on the table
        tmux.wait_for(lambda s: "l Logs" in footer(s), timeout=30, why="the table to take the focus")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "bert-crash", timeout=30,
                      why="the workload screen of bert-crash")
        screen = tmux.wait_for("first failure", timeout=40, why="bert-crash's first failure")
        assert re.search(r"first failure: worker-1 \(rank 2\)", screen), screen

        tmux.keys("l")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "logs bert-crash" and "step" in s,
                      timeout=20, why="bert-crash's merged logs")
        # the traceback may have scrolled away while following: filter the merged logs for it
        tmux.keys("/")
        tmux.wait_for(lambda s: "Follow" not in footer(s), timeout=30, why="the log filter input")
        tmux.type("Traceback|RuntimeError")
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s: "Traceback" in s and "RuntimeError" in s and "step 1" not in s,
                               timeout=20, why="the filtered logs showing the traceback")
        assert re.search(r"\[worker-1\] .*RuntimeError", screen), screen

        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "bert-crash" and "first failure" in s, timeout=30,
                      why="back on the workload screen")

        tmux.keys("p")
        screen = tmux.wait_for(lambda s: crumbs(s)[-1] == "projects" and "team-a" in s, timeout=30,
                               why="the projects list")
        assert "runai-team-a" in screen and "team-b" in screen, screen

        tmux.keys("c")
        screen = tmux.wait_for(lambda s: crumbs(s)[-1] == "cluster load" and "h100-node-01" in s, timeout=15,
                               why="the cluster load with its nodes")
        assert "a100-node-01" in screen and "8 nodes" in screen, screen

        tmux.keys("?")
        tmux.wait_for(is_help, timeout=30, why="the help screen")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: not is_help(s) and "h100-node-01" in s, timeout=30, why="the help to close")

        quit_and_check_restored(demo)


@pytest.mark.timeout(150)
def test_dashboard_shell_suspends_runs_and_repaints(tmp_path: Path) -> None:
    """`s` on the interactive session: the dashboard steps aside, the shell runs in the launcher
    (banner, commands, resize), and after `exit` the dashboard is back, whole, in a sane terminal."""
    with demo_in_tmux(tmp_path, 100, 30) as demo:
        tmux = demo.tmux
        workloads_listed(demo)
        tmux.keys("/")
        tmux.wait_for(lambda s: "l Logs" not in footer(s), timeout=30, why="the filter input")
        tmux.type("hvd")
        tmux.wait_for(lambda s: "hvd-interactive" in s and "bert-crash" not in s, timeout=30,
                      why="the filter to keep only hvd-interactive")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: "l Logs" in footer(s), timeout=30, why="the table to take the focus")
        tmux.wait_for(lambda s: re.search(r"hvd-interactive .*Running .*3/3", s) is not None, timeout=40,
                      why="the session's three ranks running")

        tmux.keys("s")
        tmux.wait_for(lambda s: "ranks shell: MPIJob hvd-interactive" in s and "horovodrun" in s,
                      timeout=20, why="the shell's banner")
        screen = tmux.screen(join=True)  # wrapped banner lines joined
        assert "hostfile" in screen and "hvd-interactive-worker-1" in screen, screen
        flags = tmux.flags()
        assert flags["alternate_on"] == "0", f"the dashboard did not step aside: {flags}"
        tmux.type('echo "marker-$((6*7))"; cat "$OMPI_MCA_orte_default_hostfile"')
        tmux.keys("Enter")
        tmux.wait_for(lambda s: "marker-42" in s and "slots=" in s, timeout=30, why="the commands' output")
        # the banner's mpirun line, as pasted: the real Open MPI reaches both workers' sshd
        line = next(ln.strip() for ln in screen.splitlines() if ln.strip().startswith("mpirun -np "))
        assert line == "mpirun -np 2 --hostfile /etc/mpi/hostfile python train.py", line
        tmux.type("clear; " + line + " --steps 3 --step-seconds 0.1")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: all(f"rank {r}/2 (local 0) done on hvd-interactive-worker-{r}" in s for r in (0, 1)),
                      timeout=60, why="both ranks of the pasted mpirun line to their end")
        tmux.run("resize-window", "-t", tmux.target, "-x", "90", "-y", "26")
        tmux.wait_for(lambda s: tmux.run("display-message", "-p", "-t", tmux.target,
                                         "#{pane_width}x#{pane_height}").strip() == "90x26", timeout=30,
                      why="tmux to resize the pane")

        def remote_size() -> bool:  # asked again until the resize has reached the remote pty
            tmux.type("stty size")
            tmux.keys("Enter")
            try:
                tmux.wait_for(lambda s: "26 90" in s, timeout=2, why="stty size saying 26 90")
            except AssertionError:
                return False
            return True

        wait_for(remote_size, 60, "the resize to reach the remote pty")
        tmux.type("exit 3")
        tmux.keys("Enter")

        screen = tmux.wait_for(lambda s: "hvd-interactive" in s and "ranks" in crumbs(s)[0:1], timeout=20,
                               why="the dashboard back after the shell")
        assert tmux.flags()["alternate_on"] == "1", "the dashboard did not take the screen back"
        assert "marker-42" not in screen, f"the shell's output is still on the dashboard's screen:\n{screen}"
        tmux.wait_for(lambda s: "exit 3" in s, timeout=30, why="the notification of the shell's exit status")
        tmux.keys("Escape")  # the dashboard still answers keys (the filter is cleared)
        tmux.wait_for(lambda s: "bert-crash" in s, timeout=30, why="the filter to clear after the shell")
        quit_and_check_restored(demo)


@pytest.mark.timeout(120)
def test_demo_in_tmux_80x24_ascii_clean_exit(tmp_path: Path) -> None:
    with demo_in_tmux(tmp_path, 80, 24, "--ascii") as demo:
        tmux = demo.tmux
        screens = {"workloads": workloads_listed(demo)}
        assert re.search(r"^ ranks\s+>\s+projects\s+>\s+all projects ", screens["workloads"]), screens
        tmux.keys("c")
        screens["cluster load"] = tmux.wait_for(lambda s: "h100-node-01" in s and "a100-node-01" in s,
                                                timeout=15, why="the cluster load with its nodes")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: "hvd-interactive" in s and "h100-node-01" not in s, timeout=30,
                      why="back on the workloads list")
        tmux.keys("?")
        screens["help"] = tmux.wait_for(is_help, timeout=30, why="the help screen")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: not is_help(s) and "hvd-interactive" in s, timeout=30,
                      why="the help to close")
        quit_and_check_restored(demo)
        assert "rows 24; columns 80" in demo.after.read_text()
    # last, so that a glyph does not hide the checks above: --ascii means "only ASCII glyphs"
    for name, screen in screens.items():
        odd = sorted({ch for ch in screen if not ch.isascii()})
        assert not odd, f"--ascii, yet the {name} screen shows {odd}:\n{screen}"


# ---------------------------------------------------------------- tests without a terminal


def run_ranks(tmp_path: Path, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = clean_env(tmp_path)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run([*RANKS, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=30)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> str:
    lines = proc.stderr.splitlines()
    assert proc.returncode == code, f"exit {proc.returncode}, wanted {code}; stderr: {proc.stderr!r}"
    assert len(lines) == 1 and lines[0].startswith("ranks: error: "), f"not one error line: {proc.stderr!r}"
    assert "Traceback" not in proc.stderr and proc.stdout == "", (proc.stdout, proc.stderr)
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def write_kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: e2e\n"
        "clusters:\n- name: e2e\n  cluster:\n    server: https://127.0.0.1:9\n"
        "users:\n- name: e2e\n  user:\n    token: t0ken\n"
        "contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: e2e\n"
    )
    return path


def test_dashboard_without_terminal_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_ranks(tmp_path, kubeconfig=write_kubeconfig(tmp_path))
    assert_one_line_error(proc, 2, "needs a terminal")


def test_dashboard_without_terminal_or_kubeconfig_is_a_usage_error(tmp_path: Path) -> None:
    """No terminal is the first problem: a dashboard can never run here, whatever the kubeconfig."""
    proc = run_ranks(tmp_path)
    assert_one_line_error(proc, 2, "needs a terminal")


@pytest.mark.parametrize("args", [
    ("--theme", "nope"),
    ("demo", "--theme", "nope"),
    ("--theme", "nope", "demo"),
], ids=["dashboard", "demo-option-after", "demo-option-before"])
def test_unknown_theme_is_a_one_line_usage_error(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = run_ranks(tmp_path, *args, kubeconfig=write_kubeconfig(tmp_path))
    assert_one_line_error(proc, 2, "unknown theme 'nope'", "dark")
    assert not (tmp_path / "demo").exists()
