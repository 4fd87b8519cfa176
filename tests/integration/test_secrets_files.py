"""Secrets and files against simcluster (issue #17, items 11 and 13), with real parts: `ranks shell`
on a real terminal (a private tmux) in a session's pod through the exec WebSocket, `ranks exec`
holding a connection made with a client certificate and key from the kubeconfig (inline data, and
from an exec credential plugin), killed with SIGTERM.

- what the user types with a leading space, and at a password prompt, is in neither the pod's
  ~/.ranks_history nor bash's history, and is not echoed; the history file is 0600, and convert's
  reading of it still works (the other commands are recorded with their status);
- a client key from the kubeconfig is never a file: none in $TMPDIR while ranks runs and none
  after SIGTERM, and the TLS connection made with it works.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from monitors.kube import KubeClient
from sessions.history import parse_history
from sessions.session_history import history_command
from sessions.submit import submit
from simcluster.apiserver.tls import make_tls
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.integration.test_shell_exec_convert import (
    COMPONENTS,
    RANKS,
    ROOT,
    call,
    clean_env,
    running,
    setup,
    shell_in_tmux,
    spec,
)
from tests.waiting import wait_for

SECRET = f"s3cr3t-{os.getpid()}-leading-space"
PASSWORD = f"hunter2-{os.getpid()}-at-the-prompt"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="empty", components=COMPONENTS, workdir=tmp_path_factory.mktemp("secrets")) as t:
        t.call(setup, t.sim)
        yield t


@pytest.fixture(scope="module")
def env(cluster: ThreadedSimCluster) -> dict[str, str]:
    return clean_env(cluster.sim.workdir / "home", Path(cluster.sim.kubeconfig_path))


@pytest.fixture(scope="module")
def session(cluster: ThreadedSimCluster) -> str:
    """An interactive session (one pod), Running."""

    async def make(client: KubeClient) -> None:
        await submit(client, spec("sec"))

    call(cluster, make)
    wait_for(lambda: running(cluster, "sec", 1), timeout=60, what="sec: its pod Running")
    return "sec"


def in_pod(env: dict[str, str], name: str, script: str) -> str:
    """`script` run in the session's pod through `ranks exec` (its output, prefixes removed)."""
    r = subprocess.run([*RANKS, "exec", name, "-p", "team-a", "--all", "--", "/bin/sh", "-c", script], capture_output=True,
                       text=True, timeout=60, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return re.sub(r"(?m)^\[[^\]]+\] ", "", r.stdout)


def test_the_pods_history_keeps_secrets_secret(env: dict[str, str], session: str, tmp_path: Path) -> None:
    in_pod(env, session, 'rm -f "$HOME/.ranks_history"')  # (the shell creates it afresh)
    with shell_in_tmux(env, tmp_path, session, "-p", "team-a") as sh:
        sh.wait_prompt()
        sh.run(f" export SECRET={SECRET}")  # a leading space: kept out of the history
        sh.run('test -n "$SECRET"', alone=True)
        # a password prompt: what is typed there is read by `read`, not echoed, not recorded
        sh.tmux.type("read -rs -p 'Password: ' PW")
        sh.tmux.keys("Enter")
        sh.tmux.wait_for("Password:", why="the password prompt")
        sh.tmux.type(PASSWORD)
        sh.tmux.keys("Enter")
        typed = sh.run('echo "got ${#PW} characters"', alone=True)
        assert f"got {len(PASSWORD)} characters" in typed
        sh.tmux.type("exit 0")
        sh.tmux.keys("Enter")
        code, screen = sh.finish()
    assert code == 0, sh.err.read_text()
    assert PASSWORD not in screen  # no echo
    history = in_pod(env, session, history_command()[2])
    modes = in_pod(env, session, 'stat -c "%a" "$HOME/.ranks_history"; cat "$HOME/.bash_history" 2>/dev/null')
    assert modes.splitlines()[0] == "600"
    for recorded in (history, modes):
        assert SECRET not in recorded and PASSWORD not in recorded
    commands = [(e.status, e.command) for e in parse_history(history)]
    assert (0, 'test -n "$SECRET"') in commands  # the rest is recorded, with its status
    assert (0, "read -rs -p 'Password: ' PW") in commands and commands[-1] == (0, "exit 0")


# -- a client key from the kubeconfig ----------------------------------------------------------------


def client_kubeconfig(cluster: ThreadedSimCluster, tmp: Path, *, plugin: bool) -> Path:
    """The cluster's admin kubeconfig with a client certificate and key added: inline
    (`client-*-data`), or returned by an exec credential plugin with the token (`plugin`)."""
    tls = make_tls(("ranks-client",))
    doc = yaml.safe_load(Path(cluster.sim.kubeconfig_path).read_text())
    ctx = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])["context"]
    user = next(u for u in doc["users"] if u["name"] == ctx["user"])["user"]
    if plugin:
        credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                      "status": {"token": user["token"], "clientCertificateData": tls.cert_pem.decode(),
                                 "clientKeyData": tls.key_pem.decode()}}
        script = tmp / "plugin.py"
        script.write_text(f"import json\nprint(json.dumps({credential!r}))\n")
        user.clear()
        user["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                        "args": [str(script)], "interactiveMode": "Never"}
    else:
        user["client-certificate-data"] = base64.b64encode(tls.cert_pem).decode()
        user["client-key-data"] = base64.b64encode(tls.key_pem).decode()
    path = tmp / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def key_files(tmp: Path, key_pem: bytes) -> list[Path]:
    return [p for p in tmp.rglob("*") if p.is_file() and p.read_bytes().strip() == key_pem.strip()]


@pytest.mark.parametrize("plugin", [False, True], ids=["inline-key", "exec-plugin-key"])
def test_sigterm_leaves_no_client_key_behind(cluster: ThreadedSimCluster, env: dict[str, str], session: str,
                                             tmp_path: Path, plugin: bool) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    kubeconfig = client_kubeconfig(cluster, tmp_path, plugin=plugin)
    marker = f"holding-{os.getpid()}-{int(plugin)}"
    proc = subprocess.Popen([*RANKS, "exec", session, "-p", "team-a", "--all", "--", "/bin/sh", "-c",
                             f"echo {marker}; exec sleep 60"], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**env, "KUBECONFIG": str(kubeconfig), "TMPDIR": str(tmp)})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert marker in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        # connected over TLS with the client certificate and key loaded (the marker came back
        # through the exec WebSocket), and they are in no file
        assert cluster.sim.url.startswith("https://")
        assert list(tmp.iterdir()) == []
        if sys.platform == "linux":
            fds = [os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{proc.pid}/fd")]
            assert any(fd.startswith("/memfd:ranks-credential") for fd in fds), fds
            assert not any(str(tmp) in fd for fd in fds), fds
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(tmp.iterdir()) == []


def files_under(root: Path) -> list[Path]:
    """Every file and directory under `root`, skipping what goes while it is walked (the pod
    namespace helper's probe directory comes and goes at start)."""
    found: list[Path] = []
    for where, dirs, files in os.walk(root):  # os.walk ignores a directory gone before it is read
        found.extend(Path(where, name) for name in (*dirs, *files))
    return found


def open_to_others(path: Path, root: Path) -> bool:
    """Whether another user can read `path` (a file) or list it (a directory): every directory from
    `root` down to it searchable by group or others, and it readable by them. A path gone since it
    was listed is readable by no one."""
    here = path
    try:
        while here != root:
            here = here.parent
            if not os.stat(here).st_mode & 0o011:
                return False
        return bool(os.lstat(path).st_mode & 0o044)
    except FileNotFoundError:
        return False


def test_ranks_sim_writes_its_kubeconfig_and_files_for_the_user_alone(tmp_path: Path,
                                                                         env: dict[str, str]) -> None:
    """`ranks sim --kubeconfig DIR/new/config` under umask 022: the kubeconfig (with every user's
    token) 0600 in a new 0700 directory, the cluster's files (TLS key, tokens, pod files) in a
    0700 directory: nothing another user can read, at any time; SIGTERM removes the kubeconfig."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o755)
    target = tmp_path / "kube" / "new" / "config"
    proc = subprocess.Popen(["/bin/sh", "-c", 'umask 022; exec "$@"', "sh", *RANKS, "sim", "--kubeconfig",
                             str(target)], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**env, "TMPDIR": str(tmp)})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("ready: kubeconfig="), (line, proc.stderr.read() if proc.poll() is not None else "")
        assert stat_mode(target) == 0o600 and stat_mode(target.parent) == 0o700
        made = files_under(tmp)
        assert made, "simcluster wrote nothing under $TMPDIR"
        assert [p for p in made if open_to_others(p, tmp)] == []
        # (but the pod addresses' leases: a drop box every user's simcluster leases a block in, none
        # can list, its empty lock files 0600)
        modes = {p.name: stat_mode(p) for p in tmp.iterdir()}
        assert modes.pop("simcluster-podaddr", 0o1733) == 0o1733 and set(modes.values()) == {0o700}, modes
        assert {stat_mode(p) for p in (tmp / "simcluster-podaddr").glob("*")} <= {0o600}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not target.exists()


def stat_mode(path: Path) -> int:
    return os.stat(path).st_mode & 0o7777
