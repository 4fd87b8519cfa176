"""The SSH door serves nothing of the server's (issue #25, item 1), with the real OpenSSH client in a
real terminal (tmux): every key and dialog of the dashboard that takes text is given a path, and
the log view's save goes to the user's own directory (`ranks serve --user-files DIR/%u`), from
where `ssh host files NAME` gives it back; no file of the server's is created, changed or read for
the user, and no path typed reaches the filesystem."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.test_ssh_faults import serve  # noqa: F401 (the fixture)
from tests.integration.test_ssh_serve import Served, ssh_dashboard

pytestmark = pytest.mark.simcluster(scenario="demo", components=("operators", "scheduler", "kubelet"))

PWNED = "ranks-pwned"  # every path typed ends in this name: it must appear nowhere on disk


def tree(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple[int, int, int]]:
    """Every file and directory under `root` (not under `skip`): (mode, size, mtime_ns)."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if Path(d, x) not in skip]
        for name in [*dirs, *files]:
            st = os.lstat(Path(d, name))
            out[str(Path(d, name))] = (st.st_mode, st.st_size if not os.path.isdir(Path(d, name)) else 0,
                                       st.st_mtime_ns if not os.path.isdir(Path(d, name)) else 0)
    return out


def pwned(roots: tuple[Path, ...]) -> list[str]:
    return [str(Path(d, n)) for root in roots for d, dirs, files in os.walk(root) for n in [*dirs, *files]
            if PWNED in n]


def test_every_path_input_over_ssh_reaches_no_server_file_and_a_save_comes_back_through_ssh(
        serve: Callable[..., Served], tmp_path: Path) -> None:  # noqa: F811
    home = tmp_path / "server-home"  # the server's own files: its home, config, data, state
    for sub in (".config", ".local/share", ".local/state"):
        (home / sub).mkdir(parents=True, mode=0o700)
    files = tmp_path / "user-files"
    files.mkdir(mode=0o700)
    served = serve("--user-files", f"{files}/%u", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                   XDG_DATA_HOME=str(home / ".local/share"), XDG_STATE_HOME=str(home / ".local/state"))
    state = home / ".local/state"  # (ranks' own records there, as the server's: the flight recorder)
    before = {**tree(home, (state,)), **tree(served.dir)}
    path = f"../../../../..{tmp_path}/{PWNED}"
    tmux = ssh_dashboard(served, tmp_path, "ranks-ssh-files")
    try:
        tmux.wait_for("llama-finetune", timeout=45, why="alice's workloads over ssh")

        def press(key: str, shows: str | Callable[[str], bool], why: str) -> str:
            """`key` until the screen `shows` it took (a key that comes while a screen is still
            being put up can be lost: pressed again after 5 s)."""
            for attempt in range(4):
                tmux.keys(key)
                try:
                    return tmux.wait_for(shows, timeout=5, why=why)
                except AssertionError:
                    if attempt == 3:
                        raise
            return ""

        def footer(s: str) -> str:
            return (s.rstrip("\n").splitlines() or [""])[-1]

        def prompt(key: str, label: str, text: str, shows: str | Callable[[str], bool]) -> None:
            """`key` opens the input at the bottom (`label` before it), `text` replaces its value, Enter."""
            tmux.wait_for(lambda s: ("Filter" in footer(s) and " Back" in footer(s) and "Logs" in footer(s))
                          or "Ranks" in footer(s), timeout=20, why=f"the keys before {key}")
            tmux.keys(key)
            tmux.wait_for(lambda s: any(ln.startswith(f" {label} ") for ln in s.splitlines()[-3:])
                          and "Logs" not in footer(s), timeout=10, why=f"{key}'s input to take the keys")
            def shown(s: str) -> bool:
                return any((ln.startswith(f" {label} ") and ln.rstrip().endswith(text[-20:])) or
                           (not text and ln.rstrip() == f" {label}") for ln in s.splitlines()[-3:])

            for attempt in range(4):  # (the input sets its value as it opens: what is typed before is lost)
                tmux.keys("C-u")
                tmux.type(text)
                try:
                    tmux.wait_for(shown, timeout=5, why=f"{text!r} typed into {key}'s input")
                    break
                except AssertionError:
                    if attempt == 3:
                        raise
            tmux.keys("Enter")
            tmux.wait_for(shows, timeout=45, why=f"what {key} {text!r} shows")

        prompt("/", "/", path, lambda s: "no workload matches" in s)  # the list's filter: a regex, no file
        tmux.wait_for(lambda s: "Logs" in footer(s) and "no workload matches" in s, timeout=20,
                      why="the filter's input closed, its filter kept")  # (the list filters as one types)
        tmux.keys("Escape")  # clears the filter: the same list, every workload again
        tmux.wait_for(lambda s: "pt-interactive" in s and "llama-finetune" in s and "matches" not in s, timeout=20,
                      why="the filter cleared by Esc")
        prompt("/", "/", "llama", lambda s: "llama-finetune" in s and "pt-interactive" not in s)
        press("Enter", lambda s: "Placement" in s and "l Logs" in footer(s), "llama-finetune's detail")
        press("l", lambda s: "following" in s and "[master-0]" in s, "the merged logs")
        prompt("/", "/", path, lambda s: "no line matches" in s)  # the log view's filter
        prompt("/", "/", "", lambda s: "no line matches" not in s)
        prompt("r", "ranks", path, lambda s: "no rank" in s)  # the ranks prompt
        prompt("r", "ranks", "", lambda s: "no rank" not in s)
        tmux.keys("C-s")  # the save: into alice's own files, said in one line
        # (the line to paste at home names the server as the client reached it: LOGIN@127.0.0.1)
        screen = tmux.wait_for(lambda s: "in your" in s and "@127.0.0.1" in s, timeout=20, why="the save's note")
        assert "saving is off" not in screen, screen
        press(":", lambda s: "Quit" in s and "Cluster load" in s, "the palette")  # commands by name, no file
        tmux.type(path)
        tmux.keys("Enter")
        press("Escape", lambda s: "Quit" not in s.split("\n", 1)[-1][:2000] or "following" in s, "the palette gone")
        press("Escape", lambda s: "NAME" in s and "PROJECT" in s and "KIND" in s, "the list again")
        press("x", "Run on every rank", "the run prompt")  # a command for the pods, asked, then cancelled
        tmux.type(path)
        tmux.wait_for(PWNED, timeout=10, why="the path in the run prompt")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: "Run on every rank" not in s, timeout=10, why="the run prompt gone")
        press("n", lambda s: "framework" in s and "Submit" in s, "the new session form")  # names, paths in pods
        tmux.type(path)
        tmux.wait_for(PWNED, timeout=10, why="the path in the form")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: "Submit" not in s and "llama-finetune" in s, timeout=20, why="the form gone")
        tmux.keys("q")
        screen = tmux.wait_for("EXIT=", timeout=20, why="ssh to end after q")
        assert "EXIT=0" in screen, screen
    finally:
        tmux.kill()
    # the save is alice's, 0600 in her 0700 directory, and comes back through ssh
    mine = files / "alice"
    assert oct(mine.stat().st_mode & 0o777) == oct(0o700)
    saved = sorted(mine.iterdir())
    assert len(saved) == 1 and saved[0].name.startswith("runai-team-a_llama-finetune-"), saved
    assert oct(saved[0].stat().st_mode & 0o777) == oct(0o600)
    r = served.run("files")
    assert r.returncode == 0 and r.stdout.split("\t")[0] == saved[0].name, (r.stdout, r.stderr)
    got = subprocess.run(served.ssh("files", saved[0].name), capture_output=True, stdin=subprocess.DEVNULL,
                         timeout=60)
    assert got.returncode == 0 and got.stdout == saved[0].read_bytes() and b"] " in got.stdout, got.stderr
    for name, code in ((f"../../{shlex.quote(str(served.dir))}/users.yaml", 2), ("/etc/passwd", 2),
                       ("nope.log", 8), ("a b", 2)):
        r = served.run("files", name)
        assert r.returncode == code and r.stdout == "" and r.stderr.startswith("ranks: error: "), (name, r)
    # nothing else of the server's was written, and no typed path reached the disk
    after = {**tree(home, (state,)), **tree(served.dir)}
    assert after == before, {k: (before.get(k), after.get(k)) for k in {*before, *after}
                             if before.get(k) != after.get(k)}
    assert pwned((tmp_path, Path("/tmp"))) == []
    audit = served.audit()
    assert "exec user=alice" in audit and f"what='files {saved[0].name}'" in audit, audit
