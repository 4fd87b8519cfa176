"""Secrets stay secret (issue #17, items 11 and 13): the shell's history file is the user's alone,
` cmd` (a leading space) and what a program reads at a password prompt are never recorded, the rc
file cannot be redirected through a planted link, client keys from a kubeconfig never sit in a
file that outlives ranks (SIGTERM included), files ranks writes are 0600 from the start, and
tokens stay out of error messages, reprs and crash reports.

The shell runs here as the pod runs it (`shell_command()` on a pseudo-terminal, HOME a temporary
directory), with real bash, sh and coreutils."""

from __future__ import annotations

import base64
import contextlib
import os
import pty
import re
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitors import connection
from monitors.connection import load_cluster_config
from monitors.prom_discovery import ApiEndpoint
from sessions import session_history, shell
from sessions.history import parse_history
from tests.unit.test_shell_history import LocalShell

ROOT = Path(__file__).resolve().parents[2]
BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="no bash here")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


class PodShell(LocalShell):
    """`LocalShell` with the pod's environment chosen (TMPDIR, PATH) and the script given; the
    child waits for `before_exec(pid)` (which can plant files named after the shell's $$) before
    it runs the script."""

    def __init__(self, home: Path, *, tmpdir: Path | None = None, path: str | None = None,
                 script: str | None = None, before_exec: Callable[[int], None] | None = None,
                 sh: str = "/bin/sh") -> None:
        env = {"HOME": str(home), "PATH": path or os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "dumb",
               "PS1": self.PROMPT.decode()}
        if tmpdir is not None:
            env["TMPDIR"] = str(tmpdir)
        argv = shell.shell_command() if script is None else ["/bin/sh", "-c", script]
        gate_r, gate_w = os.pipe()
        self.home = home
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            try:
                os.close(gate_w)
                os.read(gate_r, 1)
                os.execve(sh, argv, env)
            finally:
                os._exit(127)
        os.close(gate_r)
        try:
            if before_exec is not None:
                before_exec(self.pid)
        finally:
            os.write(gate_w, b"go")
            os.close(gate_w)
        self.seen = b""
        self.code = None

    def secret(self, command: str, answer: str) -> None:
        """Type `command`, which reads a line from the terminal (a password prompt), then `answer`."""
        count = self.seen.count(self.PROMPT)
        os.write(self.fd, command.encode() + b"\r")
        time.sleep(0.3)  # (bash has run `read`: the terminal's echo is off)
        os.write(self.fd, answer.encode() + b"\r")
        self.prompts(count + 1)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    (h / ".bashrc").write_text(f"PS1='{LocalShell.PROMPT.decode()}'\n")
    return h


@pytest.fixture
def tmpdir_(tmp_path: Path) -> Path:
    d = tmp_path / "tmp"
    d.mkdir()
    return d


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


# -- the history file ---------------------------------------------------------------------------------


def test_the_history_is_created_0600_whatever_the_umask(home: Path, tmpdir_: Path) -> None:
    with umask(0o022):  # (the child inherits it: a plain `>>` would make the file 0644)
        sh = PodShell(home, tmpdir=tmpdir_)
    sh.prompts(1)
    sh.type("true")
    assert sh.finish("exit 0") == 0
    assert mode(home / ".ranks_history") == 0o600
    assert [e.command for e in parse_history(sh.history)] == ["true", "exit 0"]


def test_an_older_world_readable_history_is_made_0600_and_kept(home: Path, tmpdir_: Path) -> None:
    hist = home / ".ranks_history"
    hist.write_text("1767225600\t0\ttorchrun old.py\n")
    hist.chmod(0o644)
    sh = PodShell(home, tmpdir=tmpdir_)
    sh.prompts(1)
    assert sh.finish("exit 0") == 0
    assert mode(hist) == 0o600
    assert [e.command for e in parse_history(sh.history)] == ["torchrun old.py", "exit 0"]


def fallback_script(tmp_history: Path) -> str:
    """The shell's script with its /tmp fallback moved into a test directory (not the machine's
    /tmp, which other users and runs share)."""
    script = shell.SHELL_SCRIPT.replace('"/tmp/.ranks_history"', f'"{tmp_history}"')
    assert script != shell.SHELL_SCRIPT
    return script


def test_the_tmp_fallback_is_0600_too(home: Path, tmp_path: Path, tmpdir_: Path) -> None:
    (home / ".ranks_history").mkdir()  # $HOME/.ranks_history cannot be written: the fallback is used
    fallback = tmp_path / "shared" / ".ranks_history"
    fallback.parent.mkdir()
    with umask(0o022):
        sh = PodShell(home, tmpdir=tmpdir_, script=fallback_script(fallback))
    sh.prompts(1)
    sh.type("true")
    sh.finish("exit 0")
    assert mode(fallback) == 0o600
    assert [e.command for e in parse_history(fallback.read_text())] == ["true", "exit 0"]


def test_a_link_planted_at_the_tmp_fallback_is_not_followed(home: Path, tmp_path: Path, tmpdir_: Path) -> None:
    (home / ".ranks_history").mkdir()
    fallback = tmp_path / "shared" / ".ranks_history"
    fallback.parent.mkdir()
    victim = tmp_path / "victims-file"
    victim.write_text("precious\n")
    victim.chmod(0o644)
    fallback.symlink_to(victim)
    sh = PodShell(home, tmpdir=tmpdir_, script=fallback_script(fallback))
    sh.prompts(1)
    sh.type("echo still-works")
    sh.finish("exit 0")
    assert b"still-works" in sh.seen
    assert victim.read_text() == "precious\n" and mode(victim) == 0o644  # not written, not chmod'ed
    assert fallback.is_symlink()


def test_history_command_reads_only_a_file_of_the_users_own() -> None:
    for argv in (session_history.history_command(), session_history.mirror_command()):
        assert '[ -O "$f" ]' in argv[2] and '[ ! -h "$f" ]' in argv[2]


# -- what is not recorded -----------------------------------------------------------------------------


def test_a_command_typed_with_a_leading_space_is_recorded_nowhere(home: Path, tmpdir_: Path) -> None:
    secret = "s3cr3t-leading-space-4711"
    sh = PodShell(home, tmpdir=tmpdir_)
    sh.prompts(1)
    sh.type(f" export SECRET={secret}", 'test -n "$SECRET"', " false", "true", f" echo {secret} >/dev/null",
            "sh -c 'exit 3'")
    assert sh.finish(" exit 4") == 4  # (not recorded either: a leading space)
    history = sh.history
    assert secret not in history
    assert secret not in (home / ".bash_history").read_text()
    # the rest is recorded as before, each with its own status
    assert [(e.status, e.command) for e in parse_history(history)] == [
        (0, 'test -n "$SECRET"'), (0, "true"), (3, "sh -c 'exit 3'")]


def test_what_is_typed_at_a_password_prompt_is_not_echoed_or_recorded(home: Path, tmpdir_: Path) -> None:
    password = "hunter2-at-the-prompt-0815"
    sh = PodShell(home, tmpdir=tmpdir_)
    sh.prompts(1)
    sh.secret("read -rs PW", password)
    sh.type('echo "length=${#PW}"')
    sh.secret("IFS= read -r -s -p 'Password: ' PW2", password)
    sh.type('[ "$PW" = "$PW2" ] && echo same')
    assert sh.finish("exit 0") == 0
    assert f"length={len(password)}".encode() in sh.seen and b"same" in sh.seen  # read it did
    assert password.encode() not in sh.seen  # no echo on the terminal
    for recorded in (sh.history, (home / ".bash_history").read_text()):
        assert password not in recorded
    assert [e.command for e in parse_history(sh.history)][:2] == ["read -rs PW", 'echo "length=${#PW}"']


# -- the rc file --------------------------------------------------------------------------------------


def rm_spy(bin_dir: Path, log: Path) -> None:
    """An `rm` first on PATH that notes the mode and name of what it is asked to remove (the rc
    file removes itself with `rm -f "$RANKS_RC"` as soon as bash reads it)."""
    rm = shutil.which("rm", path="/usr/bin:/bin")
    stat_ = shutil.which("stat", path="/usr/bin:/bin")
    assert rm and stat_
    spy = bin_dir / "rm"
    spy.write_text(f'#!/bin/sh\nfor a; do [ -e "$a" ] && {stat_} -c "%a %F %n" "$a" >> {log}; done\nexec {rm} "$@"\n')
    spy.chmod(0o755)


def test_the_rc_file_has_a_random_name_is_0600_and_a_planted_link_is_not_followed(
        home: Path, tmpdir_: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victims-file"
    victim.write_text("precious\n")
    planted: list[Path] = []

    def plant(pid: int) -> None:  # the name the rc file used to have: $TMPDIR/.ranks_bashrc.$$
        link = tmpdir_ / f".ranks_bashrc.{pid}"
        link.symlink_to(victim)
        planted.append(link)

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "rm.log"
    rm_spy(bin_dir, log)
    with umask(0o022):
        sh = PodShell(home, tmpdir=tmpdir_, path=f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                      before_exec=plant)
    sh.prompts(1)
    sh.type("true")
    assert sh.finish("exit 0") == 0
    assert victim.read_text() == "precious\n"
    assert [e.command for e in parse_history(sh.history)] == ["true", "exit 0"]  # recorded: the rc ran
    removed = log.read_text().splitlines()
    assert len(removed) == 1, removed
    perms, _kind, name = re.fullmatch(r"(\d+) (regular (?:empty )?file) (.+)", removed[0]).groups()  # type: ignore[union-attr]
    assert perms == "600" and Path(name).parent == tmpdir_
    assert Path(name).name != planted[0].name and re.fullmatch(r"\.ranks_bashrc\.\w{10}", Path(name).name)
    assert sorted(p.name for p in tmpdir_.iterdir()) == [planted[0].name]  # nothing left behind


def test_without_mktemp_the_rc_file_is_created_exclusively_and_skips_a_planted_link(
        home: Path, tmpdir_: Path, tmp_path: Path) -> None:
    """No mktemp in the pod: a name from bash's $RANDOM, created with noclobber (O_EXCL). Here
    $RANDOM is made predictable (a `bash` wrapper) to plant a link at the first name it tries."""
    assert BASH is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cat", "chmod", "sleep", "true", "false"):
        found = shutil.which(tool)
        assert found
        os.symlink(found, bin_dir / tool)
    (bin_dir / "bash").write_text(
        f'#!{BASH}\ncase "$2" in *RANDOM*) echo 4242; exit 0;; esac\nexec {BASH} "$@"\n')
    (bin_dir / "bash").chmod(0o755)
    log = tmp_path / "rm.log"
    rm_spy(bin_dir, log)
    assert shutil.which("mktemp", path=str(bin_dir)) is None
    victim = tmp_path / "victims-file"
    victim.write_text("precious\n")
    names: list[str] = []

    def plant(pid: int) -> None:
        names.extend([f".ranks_bashrc.{pid}.42421", f".ranks_bashrc.{pid}.42422"])
        (tmpdir_ / names[0]).symlink_to(victim)

    with umask(0o022):
        sh = PodShell(home, tmpdir=tmpdir_, path=str(bin_dir), before_exec=plant)
    sh.prompts(1)
    sh.type("true")
    assert sh.finish("exit 0") == 0
    assert victim.read_text() == "precious\n"
    assert [e.command for e in parse_history(sh.history)] == ["true", "exit 0"]
    assert log.read_text().splitlines() == [f"600 regular file {tmpdir_ / names[1]}"]
    assert sorted(p.name for p in tmpdir_.iterdir()) == [names[0]]


def test_an_unusable_tmpdir_puts_the_rc_file_in_tmp(home: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "rm.log"
    rm_spy(bin_dir, log)
    sh = PodShell(home, tmpdir=tmp_path / "no-such-dir", path=f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    sh.prompts(1)
    sh.type("true")
    assert sh.finish("exit 0") == 0
    assert [e.command for e in parse_history(sh.history)] == ["true", "exit 0"]  # bash with the rc
    perms, name = log.read_text().split(" regular file ")
    assert perms == "600" and Path(name.strip()).parent == Path("/tmp") and not Path(name.strip()).exists()


def test_noclobber_as_the_fallback_uses_it_refuses_an_existing_link(tmp_path: Path) -> None:
    """The property the fallback relies on (sh's `set -C` opens a new file O_EXCL): a link
    planted between the check and the open is refused, not followed."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for target in (victim, tmp_path / "dangling"):
        link = tmp_path / f"link-{target.name}"
        link.symlink_to(target)
        r = subprocess.run(["/bin/sh", "-c", '(set -C; umask 077; cat > "$1") <<EOF\nrc\nEOF', "sh", str(link)],
                           capture_output=True, text=True)
        assert r.returncode != 0
    assert victim.read_text() == "precious\n" and not (tmp_path / "dangling").exists()


# -- credentials from the kubeconfig -----------------------------------------------------------------

KEY = b"-----BEGIN PRIVATE KEY-----\nTHE-CLIENT-KEY-4711\n-----END PRIVATE KEY-----\n"


def kubeconfig(path: Path, *, official: bool = False) -> Path:
    """A kubeconfig with a client certificate and key inline (`*-data`); `official`: with
    something the fast path leaves to the official loader (basic auth)."""
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    user: dict[str, Any] = {"client-certificate-data": b64(b"CERT"), "client-key-data": b64(KEY)}
    if official:
        user.update(username="u", password="p")
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1",
                                                  "certificate-authority-data": b64(b"CA")}}],
           "users": [{"name": "u", "user": user}], "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("official", [False, True], ids=["fast-path", "official-loader"])
def test_a_client_key_is_never_a_file_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              official: bool) -> None:
    import tempfile

    from kubernetes.config import kube_config

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(connection, "_DATA_FILES", {})
    monkeypatch.setattr(kube_config, "_temp_files", {})  # (what earlier tests of this process left)
    cfg = load_cluster_config(str(kubeconfig(tmp_path / "config", official=official)))
    assert cfg.key_file and cfg.cert_file and cfg.ca_file
    assert Path(cfg.key_file).read_bytes() == KEY and Path(cfg.cert_file).read_bytes() == b"CERT"
    assert Path(cfg.ca_file).read_bytes() == b"CA"
    assert list(tmp.iterdir()) == []  # nothing in the temporary directory, not even while running
    assert kube_config._temp_files == {}
    if sys.platform == "linux":
        assert cfg.key_file.startswith("/proc/self/fd/")  # a file in memory
        assert os.readlink(cfg.key_file).startswith("/memfd:")  # in memory, in no directory


def test_without_memory_files_the_key_is_0600_in_a_0700_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "memfd_create", raising=False)
    monkeypatch.setattr(connection, "_DATA_FILES", {})
    monkeypatch.setattr(connection, "_SPILLED", ["(registered)"])  # (no atexit or signal handler from a test)
    path = Path(connection._private_file(KEY))
    try:
        assert path.read_bytes() == KEY and mode(path) == 0o600 and mode(path.parent) == 0o700
    finally:
        connection._SPILLED.remove(str(path))
        path.unlink()
        path.parent.rmdir()


HOLDER = textwrap.dedent("""
    import os, sys, time
    {prelude}
    from monitors.connection import load_cluster_config
    cfg = load_cluster_config(sys.argv[1])
    print(cfg.key_file, flush=True)
    time.sleep(60)
""")


@pytest.mark.parametrize("memory", [True, False], ids=["memfd", "no-memfd"])
@pytest.mark.parametrize("official", [False, True], ids=["fast-path", "official-loader"])
def test_sigterm_leaves_no_credential_file(tmp_path: Path, official: bool, memory: bool) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    prelude = "" if memory else "del os.memfd_create"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.format(prelude=prelude),
                             str(kubeconfig(tmp_path / "config", official=official))],
                            cwd=ROOT, env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        key_file = proc.stdout.readline().strip()
        if memory:
            assert list(tmp.iterdir()) == []
        else:  # a file while ranks runs (the user's alone)...
            assert Path(key_file).parent.parent == tmp and Path(key_file).read_bytes() == KEY
            made = list(tmp.iterdir())  # the CA, certificate and key: each in a 0700 directory, 0600
            assert len(made) == 3 and all(mode(d) == 0o700 and [mode(f) for f in d.iterdir()] == [0o600]
                                          for d in made)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == -signal.SIGTERM  # (it ends as SIGTERM ends it)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(tmp.iterdir()) == []  # ...and none after SIGTERM


# -- files ranks writes ---------------------------------------------------------------------------------


def test_saved_logs_are_0600_from_the_start(tmp_path: Path) -> None:
    from monitors.logs.buffer import LineBuffer
    from monitors.logs.lines import LogLine, Origin
    from tui.widgets.log_view import LogView

    buf = LineBuffer(10)
    buf.extend([LogLine(1_767_225_600 * 10**9, b"export TOKEN=abc", Origin("worker-0", 0, "worker", 0))])
    path = tmp_path / "saved.log"
    with umask(0o022):
        assert LogView(buf).save(path) == 1
    assert mode(path) == 0o600 and "TOKEN=abc" in path.read_text()


def test_the_simcluster_kubeconfig_is_0600_and_a_planted_tmp_link_is_not_followed(tmp_path: Path) -> None:
    from simcluster import SimCluster

    target = tmp_path / "kube" / "config"
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    target.parent.mkdir()
    (target.parent / "config.tmp").symlink_to(victim)
    sim = SimCluster(scenario="empty", workdir=tmp_path / "sim", kubeconfig=target)
    with umask(0o022):
        sim.write_kubeconfig(target)
    assert victim.read_text() == "precious\n"
    assert mode(target) == 0o600 and not target.is_symlink()
    assert not (target.parent / "config.tmp").exists()


def test_the_flight_recorder_store_is_the_users_alone_whatever_the_umask(tmp_path: Path) -> None:
    from monitors.flight_recorder import FlightStore, RecordedFailure

    store = FlightStore("ctx", "https://api:6443", root=tmp_path / "state")
    with umask(0):
        store.add("ns", "PyTorchJob", "job", "uid", RecordedFailure(
            "worker-0", "worker", 0, "job-worker-0", "node", "pytorch", 1, "Error", 1.0, lines=("x",),
            recorded_at=2.0, source="log"))
    made = [p for p in (tmp_path / "state").rglob("*")]
    assert made and all(mode(p) == (0o700 if p.is_dir() else 0o600) for p in made), \
        {str(p): oct(mode(p)) for p in made}


# -- tokens in messages, reprs and crash reports -------------------------------------------------------

TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0.sig-4711"


def test_a_token_is_not_in_the_reprs_of_what_holds_it() -> None:
    api = ApiEndpoint("https://api", {"Authorization": f"Bearer {TOKEN}"})
    cfg = connection.ClusterConfig("https://api", "c", "ns", "u", _auth=lambda: {"Authorization": f"Bearer {TOKEN}"})
    assert TOKEN not in repr(api) and TOKEN not in repr(cfg) and TOKEN not in str(cfg)


@pytest.mark.parametrize("message", [
    f"internal error: ClientError: {{'Authorization': 'Bearer {TOKEN}'}}",
    f"exec plugin said: token: {TOKEN}",
    f"Authorization: Basic {base64.b64encode(b'user:hunter2').decode()}",
    "cannot load kubeconfig: password=hunter2-0815",
])
def test_error_lines_redact_credentials(message: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tui.cli.errors import error, fail

    assert error(message, 1) == 1
    with pytest.raises(SystemExit):
        fail(message, 1)
    err = capsys.readouterr().err
    assert err.count("<redacted>") >= 2
    for secret in (TOKEN, "hunter2", base64.b64encode(b"user:hunter2").decode()):
        assert secret not in err


def test_plain_messages_are_left_alone() -> None:
    from tui.cli.errors import redact

    for message in ("no such token file ~/.kube/token", "token expired: log in again", "pods is forbidden"):
        assert redact(message) == message


def test_a_dashboard_crash_report_shows_no_local_variables() -> None:
    """Textual's crash report shows every frame's locals (a request's headers, a key): ranks'
    shows the traceback without them."""
    from rich.console import Console
    from textual.app import App

    from tui.app import RanksApp

    class Crashed:
        def __init__(self) -> None:
            self.console = Console(width=120, record=True, color_system=None)
            self._exit_renderables: list[Any] = []

        def bell(self) -> None:
            pass

        def _close_messages_no_wait(self) -> None:
            pass

    def request(headers: dict[str, str]) -> None:
        raise RuntimeError(f"failed with {len(headers)} headers")

    def report(fatal_error: Callable[[Any], None]) -> str:
        app = Crashed()
        try:
            request(ApiEndpoint("https://api", {"Authorization": f"Bearer {TOKEN}"}).headers)
        except RuntimeError:
            fatal_error(app)
        console = Console(width=120, record=True, color_system=None)
        for r in app._exit_renderables:
            console.print(r)
        return console.export_text()

    text = report(RanksApp._fatal_error)
    assert "RuntimeError" in text and "failed with 1 headers" in text and "request" in text
    assert TOKEN not in text
    assert TOKEN in report(App._fatal_error)  # (what Textual's own report would have shown)


def test_the_script_runs_where_sh_is_bash(home: Path, tmpdir_: Path) -> None:
    """Images whose /bin/sh is bash (in POSIX mode, as argv[0] `sh` starts it): the same."""
    assert BASH is not None
    with umask(0o022):
        sh = PodShell(home, tmpdir=tmpdir_, sh=BASH)
    sh.prompts(1)
    sh.type(" export SECRET=under-bash-as-sh", "true")
    assert sh.finish("exit 2") == 2
    assert [e.command for e in parse_history(sh.history)] == ["true", "exit 2"]
    assert mode(home / ".ranks_history") == 0o600 and list(tmpdir_.iterdir()) == []
