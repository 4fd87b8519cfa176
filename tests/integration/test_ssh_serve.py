"""`ranks serve --ssh` (issue #14) with the real OpenSSH client: each key acts as its own identity
through impersonation (simcluster's demo: `alice` reads runai-team-a alone), and everything that is
not the dashboard or a read-only command is refused with a message.

The server runs as a subprocess with the impersonator's context (`ranks-sim-ranks-ssh`), the keys
are made by ssh-keygen in the test's directory (0700/0600)."""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.e2e.test_demo_tmux import clean_env
from tests.tmux_driver import Tmux
from tests.waiting import descendants, titled, wait_for

pytestmark = pytest.mark.simcluster(scenario="demo", components=("operators", "scheduler", "kubelet"))

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = "ranks-sim-ranks-ssh"


def ssh_binary() -> str:
    path = shutil.which("ssh")
    if path is None:
        pytest.fail("ssh is not installed: run scripts/system-deps.sh (it installs openssh-client)", pytrace=False)
    return path


def keygen(path: Path) -> str:
    """A new ed25519 key pair at `path` (0600); its SHA256 fingerprint."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path)], check=True,
                   timeout=30)
    path.chmod(0o600)
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{path}.pub"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    return out.split()[1]


def env() -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_", "SSH_"))}
    e.update(RANKS_CONFIG="", NO_COLOR="1")
    return e


@dataclass
class Served:
    port: int
    dir: Path
    kubeconfig: Path
    proc: subprocess.Popen[str]
    stderr_path: Path
    sim_port: int

    def ssh(self, *remote: str, opts: tuple[str, ...] = (), key: str = "alice", batch: bool = True) -> list[str]:
        return [ssh_binary(), "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", f"BatchMode={'yes' if batch else 'no'}", "-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes",
                "-o", "ConnectTimeout=20", "-i", str(self.dir / key), "-p", str(self.port), *opts, "127.0.0.1", *remote]

    def run(self, *remote: str, opts: tuple[str, ...] = (), key: str = "alice", batch: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.ssh(*remote, opts=opts, key=key, batch=batch), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout, env=env())

    def audit(self) -> str:
        return self.stderr_path.read_text()


def ranks_local(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, env=env(), stdin=subprocess.DEVNULL)


@pytest.fixture
def served(simcluster, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Served]:
    """`ranks serve --ssh` on simcluster; `{"template": False}` (indirect): every session a fresh
    process instead of one forked from the warm template; `{"per_user_watch": True}`: each dashboard
    lists and watches as its user (`--per-user-watch`). `{"kubeconfig": HOW}`: how the server is
    given its kubeconfig and context: "flags" (--kubeconfig, --context), "env" (KUBECONFIG, and
    --context), "env-several" (KUBECONFIG naming two files, the first of which picks the current
    context) or "home" (~/.kube/config, its current context); the last three only in the server's
    environment."""
    template = getattr(request, "param", {}).get("template", True)
    per_user = ["--per-user-watch"] if getattr(request, "param", {}).get("per_user_watch") else []
    how = getattr(request, "param", {}).get("kubeconfig", "flags")
    ssh_binary()
    d = tmp_path / "ssh"
    d.mkdir(mode=0o700)
    keygen(d / "host")
    alice_fp = keygen(d / "alice")
    keygen(d / "stranger")
    keys = d / "authorized"
    keys.mkdir(mode=0o700)
    (keys / "alice").write_text((d / "alice.pub").read_text())
    (keys / "alice").chmod(0o600)
    users = d / "users.yaml"
    # no namespace: alice may not list namespaces; her projects are found (the server's identity
    # lists the names, each is checked as alice)
    users.write_text(f"{alice_fp}: {{user: alice}}\n")
    users.chmod(0o600)
    kubeconfig = simcluster.sim.kubeconfig_path
    err = tmp_path / "serve.err"
    server_env = {**env(), "RANKS_SSH_TEMPLATE": "1" if template else "0"}
    cluster_args = ["--kubeconfig", str(kubeconfig), "--context", CONTEXT]
    if how == "env":
        server_env["KUBECONFIG"], cluster_args = str(kubeconfig), ["--context", CONTEXT]
    elif how == "env-several":  # (kubectl's merge: the first file that names a current context wins)
        first = tmp_path / "current-context.yaml"
        first.write_text(f"apiVersion: v1\nkind: Config\ncurrent-context: {CONTEXT}\n")
        server_env["KUBECONFIG"], cluster_args = f"{first}{os.pathsep}{kubeconfig}", []
    elif how == "home":
        home = tmp_path / "home"
        (home / ".kube").mkdir(parents=True, mode=0o700)
        doc = yaml.safe_load(kubeconfig.read_text())
        (home / ".kube" / "config").write_text(yaml.safe_dump({**doc, "current-context": CONTEXT}))
        server_env["HOME"], cluster_args = str(home), []
    with open(err, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "serve", "--ssh", "127.0.0.1:0", "--host-key", str(d / "host"),
             "--authorized-keys", str(keys), "--users", str(users), "--max-sessions-per-user", "2", *cluster_args,
             *per_user],
            stdout=subprocess.PIPE, stderr=fh, text=True, cwd=ROOT, stdin=subprocess.DEVNULL, env=server_env)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline() if ready else ""
        assert line.startswith("ready: ssh=127.0.0.1:"), (line, err.read_text())
        yield Served(int(line.strip().rsplit(":", 1)[1]), d, kubeconfig, proc, err,
                     int(simcluster.sim.url.rsplit(":", 1)[1]))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, err.read_text()
        assert proc.stdout.read() == ""  # exactly one line on stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def ssh_dashboard(served: Served, tmp_path: Path, name: str) -> Tmux:
    """alice's dashboard through `ssh -t` in a tmux of 120x40; once ssh ends the pane shows
    `EXIT=<its status>`."""
    cmd = " ".join(shlex.quote(a) for a in served.ssh(opts=("-t",)))
    script = tmp_path / "ssh.sh"
    script.write_text(f"{cmd}\necho \"EXIT=$?\"\nsleep 60\n")
    tmux = Tmux(clean_env(tmp_path), 120, 40, name=name)
    tmux.start(f"sh {shlex.quote(str(script))}", tmp_path)
    return tmux


def without_ages(text: str) -> list[dict]:
    rows = json.loads(text)["workloads"]
    for r in rows:
        r.pop("age_seconds", None)
    return rows


def test_list_over_ssh_is_the_local_cli_as_that_user(served: Served) -> None:
    def same() -> list[dict] | None:  # (the demo's ranks start meanwhile: the two agree once settled)
        r = served.run("list", "-A", "-o", "json")
        local = ranks_local("list", "-A", "-o", "json", "--context", CONTEXT, "--as", "alice",
                           kubeconfig=served.kubeconfig)
        assert r.returncode == 0 and local.returncode == 0, (r.stderr, local.stderr)
        ours = without_ages(r.stdout)
        return ours if ours and ours == without_ages(local.stdout) else None

    rows = wait_for(same, 60, "ssh's list equal to the local one", interval=0.5)
    assert {w["namespace"] for w in rows} == {"runai-team-a"}
    assert {"llama-finetune", "pt-interactive"} <= {w["name"] for w in rows}
    audit = served.audit()
    assert "login user=alice from=127.0.0.1:" in audit and "exec user=alice" in audit and "logout user=alice" in audit
    # the same exit code as the local command: a project alice may not read is 7
    r = served.run("list", "-p", "team-b")
    assert r.returncode == 7 and 'alice may not read project "team-b"' in r.stderr, (r.returncode, r.stderr)


def test_without_p_alice_s_commands_find_her_projects(served: Served) -> None:
    """The server's context names `default`, which alice may not read: her `list` and `idle` look
    where her dashboard looks (her projects: team-a), and say so, rather than exit 7."""
    r = served.run("list")
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.split()[:2] == ["PROJECT", "NAME"] and "llama-finetune" in r.stdout, r.stdout
    assert {ln.split()[0] for ln in r.stdout.splitlines()[1:]} == {"team-a"}, r.stdout
    assert r.stderr.strip() == ("ranks: note: default (the context's namespace) may not be read; looked in every "
                                "project you may read"), r.stderr
    r = served.run("idle", "-o", "json")
    assert r.returncode == 0 and {s["project"] for s in json.loads(r.stdout)["sessions"]} <= {"team-a"}, r
    r = served.run("get", "llama-finetune")  # one workload: the one project she may read that has it
    assert r.returncode == 0 and "runai-team-a" in r.stdout, r.stderr


def test_other_commands_and_server_flags_are_refused(served: Served) -> None:
    for cmd, said in ((("delete", "llama-finetune", "-p", "team-a"), "only these read-only commands"),
                      (("list", "-A", "--as", "admin"), "the flag --as is the server's"),
                      (("list", "--kubeconfig=/etc/passwd"), "the flag --kubeconfig is the server's"),
                      (("sh", "-c", "id"), "only these read-only commands")):
        r = served.run(*cmd)
        assert r.returncode == 2, (cmd, r.returncode, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("ranks: error: ") and said in lines[0], r.stderr
    audit = served.audit()  # (a command the door does not serve is refused by the server; a flag by the command)
    assert audit.count("refused user=alice") == 2 and "what='list -A --as admin'" in audit, audit


def test_every_read_only_command_is_served(served: Served) -> None:
    """why and idle too (refused until the door's list came from the commands themselves)."""
    for cmd, said in ((("why", "llama-finetune", "-p", "team-a"), "llama-finetune (PyTorchJob, project team-a)"),
                      (("idle", "-p", "team-a", "-o", "json"), '"sessions"')):
        r = served.run(*cmd)
        assert r.returncode == 0 and said in r.stdout, (cmd, r.returncode, r.stdout, r.stderr)
        if cmd[0] == "why":  # (alice may not list nodes: said only where the answer would use them)
            assert ("is Pending" in r.stdout) == ("forbidden to list nodes" in r.stderr), (r.stdout, r.stderr)
    r = served.run("delete", "llama-finetune", "-p", "team-a")
    assert r.returncode == 2, r.stderr
    assert "only these read-only commands run over ssh: get, gpus, idle, list, logs, projects, stacks, top, why" in r.stderr


def test_unknown_key_password_and_keyboard_interactive_are_refused(served: Served) -> None:
    r = served.run("list", key="stranger")
    assert r.returncode == 255 and "Permission denied (publickey)" in r.stderr, r.stderr
    r = subprocess.run(served.ssh("list", opts=("-o", "PubkeyAuthentication=no", "-o", "PasswordAuthentication=yes",
                                                "-o", "KbdInteractiveAuthentication=yes",
                                                "-o", "PreferredAuthentications=password,keyboard-interactive"),
                                  batch=False),
                       capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, env=env())
    assert r.returncode == 255 and "Permission denied (publickey)" in r.stderr, r.stderr  # nothing else offered
    assert "login user=" not in served.audit()


def test_a_session_without_a_pty_gets_a_message(served: Served) -> None:
    r = served.run(opts=("-T",))
    assert r.returncode == 1
    assert "ranks: this server serves the dashboard; connect with a terminal (ssh -t)" in r.stderr


def test_forwarding_and_subsystems_are_refused(served: Served) -> None:
    sim_port = served.sim_port
    r = served.run(opts=("-W", f"127.0.0.1:{sim_port}"))  # -L's channel (direct-tcpip), opened at once
    assert r.returncode == 255 and "forwarding failed" in r.stderr, r.stderr
    r = served.run(opts=("-N", "-o", "ExitOnForwardFailure=yes", "-R", "0:127.0.0.1:22"), timeout=30)
    assert r.returncode == 255 and "forwarding failed" in r.stderr, r.stderr
    # -L: the client listens, the server refuses the channel when something connects through it
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        local = s.getsockname()[1]
    fwd = subprocess.Popen(served.ssh(opts=("-N", "-L", f"127.0.0.1:{local}:127.0.0.1:{sim_port}")), env=env(),
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def tried() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", local), timeout=2) as c:
                    c.settimeout(5)
                    assert c.recv(10) == b""  # closed: nothing reached the API server
                return True
            except ConnectionRefusedError:
                return False

        wait_for(tried, 20, "the -L listener")
        wait_for(lambda: served.audit().count("port forwarding to 127.0.0.1") >= 1, 10, "the refusal audited")
    finally:
        fwd.kill()
        fwd.wait()
    r = served.run("sftp", opts=("-s",))
    assert r.returncode != 0
    audit = served.audit()
    assert "remote forwarding" in audit and "subsystem sftp" in audit


@pytest.mark.parametrize("served", [{"template": True}, {"template": False},
                                    {"template": True, "per_user_watch": True}], indirect=True,
                         ids=["forked", "fresh", "per-user-watch"])
def test_the_dashboard_shows_alice_s_projects_only_and_q_exits_0(served: Served, tmp_path: Path) -> None:
    tmux = ssh_dashboard(served, tmp_path, "ranks-ssh")
    try:
        t0 = time.monotonic()
        screen = tmux.wait_for("llama-finetune", timeout=45, why="alice's workloads over ssh")
        print(f"first frame with workloads after {time.monotonic() - t0:.2f}s")
        assert "pt-interactive" in screen
        for other in ("bert-crash", "resnet-tf", "xgb-churn", "team-b", "research"):
            assert other not in screen, screen
        tmux.resize(100, 30)  # window-change reaches the dashboard's pty
        tmux.wait_for(lambda s: "llama-finetune" in s and max(len(ln) for ln in s.splitlines()) <= 100, timeout=15,
                      why="the dashboard redrawn at 100 columns")
        tmux.keys("q")
        screen = tmux.wait_for("EXIT=", timeout=20, why="ssh to end after q")
        assert "EXIT=0" in screen, screen
        assert "dashboard user=alice" in served.audit()
    finally:
        tmux.kill()


@pytest.mark.parametrize("served", [{"kubeconfig": "env"}, {"kubeconfig": "env-several"}, {"kubeconfig": "home"}],
                         indirect=True, ids=["KUBECONFIG", "KUBECONFIG-several", "home"])
def test_sessions_use_the_kubeconfig_the_server_was_started_with(served: Served, tmp_path: Path) -> None:
    """KUBECONFIG (one file, or several joined by ':') or ~/.kube/config, only in the server's
    environment, and its context: each session (a command, the dashboard) uses the same."""
    r = served.run("list", "-A", "-o", "json")
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert {w["namespace"] for w in json.loads(r.stdout)["workloads"]} == {"runai-team-a"}  # as alice
    tmux = ssh_dashboard(served, tmp_path, "ranks-ssh-kubeconfig")
    try:
        screen = tmux.wait_for(lambda s: "llama-finetune" in s or "EXIT=" in s, timeout=45,
                               why="alice's workloads over ssh")
        assert "llama-finetune" in screen and "kubeconfig" not in screen, screen
        tmux.keys("q")
        screen = tmux.wait_for("EXIT=", timeout=20, why="ssh to end after q")
        assert "EXIT=0" in screen, screen
    finally:
        tmux.kill()


@pytest.mark.simcluster(scenario="demo", components=("operators", "scheduler", "kubelet", "exec", "dcgm"))
def test_alice_s_dashboard_over_ssh_has_gpu_metrics(served: Served, tmp_path: Path) -> None:
    """docs/ssh.md's try-it (the embedded cluster as `ranks sim` runs it): alice is granted the Role
    docs/ssh.md gives, so her SSH dashboard shows GPU utilisation and no "GPU metrics are forbidden"."""
    def util() -> float | None:
        r = served.run("list", "-o", "json")
        rows = {w["name"]: w for w in json.loads(r.stdout)["workloads"]} if r.returncode == 0 else {}
        return rows.get("llama-finetune", {}).get("gpu_util")

    assert wait_for(util, 60, "llama-finetune's GPU utilisation over ssh", interval=1) > 0
    tmux = ssh_dashboard(served, tmp_path, "ranks-ssh-metrics")
    try:
        def row(s: str) -> str:
            return next((ln for ln in s.splitlines() if "llama-finetune" in ln), "")

        screen = tmux.wait_for(lambda s: "%" in row(s) or "forbidden" in s, timeout=60,
                               why="llama-finetune's GPU utilisation in alice's dashboard")
        assert "forbidden" not in screen and re.search(r"\d+%", row(screen)), screen
    finally:
        tmux.kill()


def test_serve_without_a_kubeconfig_stops_before_it_is_ready(tmp_path: Path) -> None:
    keygen(tmp_path / "host")
    (tmp_path / "keys").write_text((tmp_path / "host.pub").read_text())
    for extra in ({"HOME": str(tmp_path)}, {"HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "nope")}):
        r = subprocess.run([sys.executable, "-m", "tui.cli", "serve", "--ssh", "127.0.0.1:0", "--host-key",
                            str(tmp_path / "host"), "--authorized-keys", str(tmp_path / "keys")],
                           capture_output=True, text=True, timeout=30, cwd=ROOT, env={**env(), **extra},
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 3 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("ranks: error: no kubeconfig found"), r.stderr


@pytest.mark.parametrize("served", [{"template": True}, {"template": False}], indirect=True,
                         ids=["forked", "fresh"])
def test_a_client_that_disappears_leaves_no_process(served: Served) -> None:
    marker = "ranks: alice 127.0.0.1:"  # (each session's process is titled USER PEER; this server's alone)
    client = subprocess.Popen(served.ssh(opts=("-tt",)), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**env(), "TERM": "xterm-256color"})
    try:
        wait_for(lambda: titled(served.proc.pid, marker), 30, "the dashboard's child process")
        time.sleep(1.0)  # the dashboard is up
        client.kill()
        client.wait()
        wait_for(lambda: not titled(served.proc.pid, marker), 15, "no process of the session left",
                 detail=lambda: descendants(served.proc.pid))
        wait_for(lambda: "logout user=alice" in served.audit(), 10, "the logout audited")
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()


def test_a_dead_template_is_replaced_and_its_sessions_live_on(served: Served) -> None:
    """(Only this server's processes are looked for: its descendants, and the first session by its
    pid once its template is gone; another test's template is never killed.)"""
    def templates() -> list[int]:
        return titled(served.proc.pid, "ranks: dashboard template")

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
        except OSError:
            return False

    first = wait_for(templates, 30, "the warm template")
    marker = "ranks: alice 127.0.0.1:"
    client = dashboard_client(served)
    try:
        before = wait_for(lambda: titled(served.proc.pid, marker), 30, "a dashboard")
        os.kill(first[0], signal.SIGKILL)
        # a new template comes up, and new sessions work meanwhile (fresh processes)
        r = served.run("projects")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: templates() and templates() != first, 30, "a new template")
        second = dashboard_client(served)
        try:
            wait_for(lambda: titled(served.proc.pid, marker), 30, "a second dashboard")
        finally:
            second.kill()
            second.wait()
        assert alive(before[0])  # the first session lives on (its template gone, it was adopted)
        client.stdin.write(b"q")  # and ends as asked
        client.stdin.flush()
        client.wait(timeout=20)
        wait_for(lambda: not alive(before[0]) and not titled(served.proc.pid, marker), 15, "no dashboard left",
                 detail=lambda: descendants(served.proc.pid))
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()


def dashboard_client(served: Served) -> subprocess.Popen[bytes]:
    return subprocess.Popen(served.ssh(opts=("-tt",)), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env={**env(), "TERM": "xterm-256color"})


def test_per_user_session_limit_then_sigterm_drains_with_a_message(served: Served) -> None:
    marker = "ranks: alice 127.0.0.1:"  # (each session's process is titled USER PEER)
    clients = [dashboard_client(served) for _ in range(2)]
    try:
        pids = wait_for(lambda: len(found := titled(served.proc.pid, marker)) >= 2 and found, 30, "two dashboards")
        r = served.run("list", "-A")
        assert r.returncode == 1 and "alice has 2 sessions open already" in r.stderr, (r.returncode, r.stderr)
        assert "refused user=alice" in served.audit()
        served.proc.send_signal(signal.SIGTERM)
        for c in clients:
            out, _ = c.communicate(timeout=20)
            assert b"ranks: server shutting down" in out
        assert served.proc.wait(timeout=20) == 0
        wait_for(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in pids), 10, "no dashboard left")
    finally:
        for c in clients:
            if c.poll() is None:
                c.kill()
                c.wait()


@pytest.mark.parametrize(("args", "said"), [
    (("--ssh", "nope:x"), "--ssh: \"nope:x\" is not [HOST:]PORT"),
    (("--ssh", "127.0.0.1:0", "--authorized-keys", "{d}/missing"), "does not exist"),
    (("--ssh", "127.0.0.1:0", "--host-key", "{d}/missing"), "cannot read the host key"),
    (("--ssh", "127.0.0.1:0", "--as-group", "ml"), "--as-group needs --as USER"),
    (("--ssh", "127.0.0.1:0", "--user-files", "files/%u"), "give an absolute path"),
    (("--ssh", "127.0.0.1:0", "--user-files", "{d}/missing/%u"), "missing: No such file or directory"),
    (("--ssh", "127.0.0.1:0", "--user-files", "{d}/%u/x"), "%u (the user's name) goes in the last component"),
    (("--ssh", "127.0.0.1:0", "--command-time-limit", "soon"), "is not a duration"),
    # the user map or the keys as a FIFO (the server hung before ready), the map not UTF-8 (internal error)
    (("--ssh", "127.0.0.1:0", "--users", "{d}/fifo"), "fifo: is a FIFO, not a regular file"),
    (("--ssh", "127.0.0.1:0", "--authorized-keys", "{d}/fifo"), "fifo: is a FIFO, not a regular file"),
    (("--ssh", "127.0.0.1:0", "--users", "{d}/latin1.yaml"), "latin1.yaml is not UTF-8 (a byte 0xe9 at 7)"),
])
def test_serve_refuses_bad_input_in_one_line(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    keygen(tmp_path / "host")
    (tmp_path / "keys").write_text((tmp_path / "host.pub").read_text())
    os.mkfifo(tmp_path / "fifo", 0o600)
    (tmp_path / "latin1.yaml").write_bytes("bob: al\xe9\n".encode("latin-1"))
    base = {"--host-key": str(tmp_path / "host"), "--authorized-keys": str(tmp_path / "keys")}
    args = tuple(a.format(d=tmp_path) for a in args)
    for flag, value in base.items():
        if flag not in args:
            args += (flag, value)
    r = subprocess.run([sys.executable, "-m", "tui.cli", "serve", *args], capture_output=True, text=True, timeout=30,
                       cwd=ROOT, env=env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ranks: error: ") and said in lines[0], r.stderr
    assert r.stdout == ""


def test_authorized_keys_are_re_read_when_they_change(served: Served) -> None:
    keys = served.dir / "authorized"
    (keys / "bob").write_text((served.dir / "stranger.pub").read_text())
    wait_for(lambda: served.run("projects", key="stranger").returncode != 255, 20, "bob's key accepted")
    assert "login user=bob" in served.audit()
    (keys / "alice").unlink()
    wait_for(lambda: served.run("projects").returncode == 255, 20, "alice's key refused once removed")


@pytest.mark.simcluster(scenario="demo", components=("operators", "scheduler", "kubelet", "exec"))
def test_a_shell_into_the_launcher_over_ssh_runs_commands_and_returns(served: Served, tmp_path: Path) -> None:
    e = clean_env(tmp_path)
    cmd = " ".join(shlex.quote(a) for a in served.ssh(opts=("-t",)))
    script = tmp_path / "ssh.sh"
    script.write_text(f"{cmd}\necho \"EXIT=$?\"\nsleep 60\n")
    tmux = Tmux(e, 100, 30, name="ranks-ssh-shell")
    tmux.start(f"sh {shlex.quote(str(script))}", tmp_path)
    try:
        tmux.wait_for("hvd-interactive", timeout=45, why="alice's workloads over ssh")
        tmux.keys("/")
        tmux.wait_for(lambda s: "Logs" not in (s.rstrip("\n").splitlines() or [""])[-1], timeout=10,
                      why="the filter input to take the keys (the footer's table keys gone)")
        tmux.type("hvd")
        tmux.wait_for(lambda s: "hvd-interactive" in s and "llama-finetune" not in s, timeout=10, why="the filter")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: "hvd-interactive" in s and "Running" in s and "3/3" in s, timeout=40,
                      why="the session's ranks running")
        time.sleep(0.3)
        tmux.keys("s")
        tmux.wait_for(lambda s: "ranks shell: MPIJob hvd-interactive" in s, timeout=20, why="the shell's banner")
        tmux.type('echo "marker-$((6*7))"; whoami')
        tmux.keys("Enter")
        tmux.wait_for("marker-42", timeout=15, why="the command's output through ssh")
        tmux.type("exit 3")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: "hvd-interactive" in s and "exit 3" in s and "marker-42" not in s, timeout=20,
                      why="the dashboard back after the shell")
        tmux.keys("q")
        screen = tmux.wait_for("EXIT=", timeout=20, why="ssh to end after q")
        assert "EXIT=0" in screen, screen
        # the dashboard told the server's audit log what alice did, and from where
        audit = [ln for ln in served.audit().splitlines() if " action " in ln]
        assert len(audit) == 1 and "action user=alice from=127.0.0.1:" in audit[0], audit
        assert "what='shell runai-team-a/hvd-interactive-launcher" in audit[0], audit
    finally:
        tmux.kill()


def test_key_options_are_honoured(served: Served) -> None:
    keys = served.dir / "authorized"
    keygen(served.dir / "carol")
    # bob's key runs one read-only command, whatever is asked, never the dashboard
    (keys / "bob").write_text('restrict,command="projects -o json" ' + (served.dir / "stranger.pub").read_text())
    # carol's key only from 10.0.0.0/8: refused from loopback
    (keys / "carol").write_text('from="10.0.0.0/8" ' + (served.dir / "carol.pub").read_text())
    wait_for(lambda: served.run("list", key="stranger").returncode != 255, 20, "bob's key accepted")
    local = ranks_local("projects", "-o", "json", "--context", CONTEXT, "--as", "bob", kubeconfig=served.kubeconfig)
    for remote, opts in ((("list", "-A"), ()), ((), ("-tt",))):
        r = served.run(*remote, key="stranger", opts=opts)
        assert (r.returncode, r.stdout) == (local.returncode, local.stdout), (r, local)  # (text: \r\n -> \n)
    r = served.run("projects", key="carol")
    assert r.returncode == 255 and "Permission denied" in r.stderr, r.stderr
    # a command with -tt runs on a terminal of the client's size (as OpenSSH's sshd does)
    raw = subprocess.run(served.ssh("get", "llama-finetune", "-p", "team-a", opts=("-tt",)), capture_output=True,
                         stdin=subprocess.DEVNULL, timeout=60, env=env())
    assert raw.returncode == 0 and b"llama-finetune\r\n" in raw.stdout, (raw.returncode, raw.stderr)


def test_garbage_and_a_flood_of_connections_leave_the_server_serving(served: Served) -> None:
    for payload in (b"GET / HTTP/1.1\r\n\r\n", b"SSH-2.0-x\r\n" + os.urandom(4096), b"\x00" * 70000, b""):
        with socket.create_connection(("127.0.0.1", served.port), timeout=5) as s:
            s.settimeout(5)
            try:
                s.sendall(payload)
                s.recv(1024)
            except OSError:
                pass
    flood = []
    try:
        for _ in range(150):  # more than may log in at once: the rest are dropped, not queued
            c = socket.create_connection(("127.0.0.1", served.port), timeout=5)
            flood.append(c)
    finally:
        for c in flood:
            c.close()
    # the flood's connections are let go as their closes are read: a real login gets in right after
    wait_for(lambda: served.run("projects").returncode == 0, 20, "a login after the flood",
             detail=lambda: served.run("projects").stderr)
    assert served.proc.poll() is None
