"""Bad configuration and hostile argv (issue #17, items 9 and 12): the real `ranks` command line as
a subprocess, against crafted kubeconfigs, a server that accepts and never answers, and simcluster
(wrong CA, hostile names). Each problem is exactly one `ranks: error:` line on stderr, the
documented exit code (monitors.connection.ExitCode), no traceback and no ESC byte; the dashboard
fails before the TUI takes the terminal (a pty), or says it clearly in the TUI and on exit."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from monitors.connection import ExitCode
from simcluster.cluster import ThreadedSimCluster
from tests.kubeflow_objects import job, pod
from tests.tmux_driver import Tmux

ROOT = Path(__file__).resolve().parents[2]
ONE_SHOT = (("list",), ("projects",), ("get", "mnist"), ("logs", "mnist"))
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
ALT_SCREEN = "\x1b[?1049h"  # Textual taking the terminal


def env_for(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KUBE", "RANKS_", "XDG_CONFIG")) and k != "NO_COLOR"}
    env.update({"HOME": str(home), "RANKS_CONFIG": "", "NO_COLOR": "1", "TERM": "xterm-256color", **extra})
    return env


def ranks(*args: str, home: Path, timeout: float = 60, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env_for(home, **extra), stdin=subprocess.DEVNULL)


def one_line(r: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    """Exit `code`, exactly one stderr line (`ranks: error: ...` with `fragments`), no traceback,
    no stray logging line and no ESC byte anywhere."""
    assert r.returncode == code, (r.args, r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ranks: error: "), (r.args, r.stderr)
    assert "Traceback" not in r.stderr and "ERROR:root" not in r.stderr
    assert "\x1b" not in r.stderr and "\x1b" not in r.stdout
    assert not any(ch in r.stderr for ch in BIDI)
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


def kubeconfig(path: Path, server: str, *, user: dict | None = None, ca: bytes | None = None) -> Path:
    cluster: dict = {"server": server}
    if ca is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "here",
           "clusters": [{"name": "c", "cluster": cluster}],
           "users": [{"name": "u", "user": user if user is not None else {"token": "t0ken"}}],
           "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u", "namespace": "default"}}]}
    path.write_text(yaml.safe_dump(doc))
    return path


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A server that accepts every connection and never sends a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for c in held:
            c.close()
        listener.close()
    assert held, "the silent server was never connected to"


def in_pty(*args: str, home: Path, timeout: float = 60, **extra: str) -> tuple[int, str]:
    """`ranks ARGS` on a terminal of its own (stdin, stdout and stderr a pty, as a user runs the
    dashboard): (exit code, everything it wrote)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", *args], stdin=slave, stdout=slave, stderr=slave,
                            cwd=ROOT, env=env_for(home, **extra), start_new_session=True)
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # (EIO: the child closed the terminal)
                    chunk = b""
                if not chunk and proc.poll() is not None:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
        else:
            raise AssertionError(f"ranks {args} still running after {timeout} s: {out.decode(errors='replace')}")
        return proc.wait(5), out.decode(errors="replace")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        os.close(master)


def dashboard_refused(code: int, out: str, want: int, *fragments: str) -> None:
    """The dashboard said no before taking the terminal: one line, no TUI, no traceback."""
    assert code == want, (code, out)
    assert ALT_SCREEN not in out, f"the TUI took the terminal: {out!r}"
    lines = [ln for ln in out.replace("\r", "").split("\n") if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ranks: error: "), out
    assert "Traceback" not in out and "ERROR:root" not in out and "\x1b" not in out
    for f in fragments:
        assert f in lines[0], (f, lines[0])


# -- configuration that cannot work: before any request ------------------------------------------------


def test_no_kubeconfig(tmp_path: Path) -> None:
    for args in ONE_SHOT:
        one_line(ranks(*args, home=tmp_path), ExitCode.NO_CONFIG, "no kubeconfig found", str(tmp_path / ".kube"))
        one_line(ranks(*args, "--kubeconfig", str(tmp_path / "nowhere.yaml"), home=tmp_path), ExitCode.NO_CONFIG,
                 "nowhere.yaml", "does not exist")
    # KUBECONFIG naming files that are not there
    one_line(ranks("list", home=tmp_path, KUBECONFIG=f"{tmp_path}/a.yaml:{tmp_path}/b.yaml"), ExitCode.NO_CONFIG,
             "no kubeconfig found", "a.yaml")
    dashboard_refused(*in_pty(home=tmp_path), ExitCode.NO_CONFIG, "no kubeconfig found")


def test_unknown_context(tmp_path: Path) -> None:
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{closed_port()}")
    for args in ONE_SHOT:
        one_line(ranks(*args, "--kubeconfig", str(kc), "--context", "nope", home=tmp_path), ExitCode.NO_CONFIG,
                 'context "nope" not found in kubeconfig (have: here)')
    dashboard_refused(*in_pty("--kubeconfig", str(kc), "--context", "nope", home=tmp_path), ExitCode.NO_CONFIG,
                      'context "nope" not found')


def test_malformed_kubeconfig(tmp_path: Path) -> None:
    kc = tmp_path / "kc.yaml"
    kc.write_text("apiVersion: v1\nclusters: [\n")
    for args in ONE_SHOT:
        one_line(ranks(*args, "--kubeconfig", str(kc), home=tmp_path), ExitCode.NO_CONFIG, "kubeconfig")


def test_malformed_config_toml(tmp_path: Path) -> None:
    """ranks' own settings file: not TOML, or named by RANKS_CONFIG and missing, is exit 3 for
    every command (the server, unreachable here, is never asked: that would be exit 4)."""
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{closed_port()}")
    bad = tmp_path / "config.toml"
    bad.write_text('theme = "dark\n[[[\n')
    for args in ONE_SHOT:
        one_line(ranks(*args, "--kubeconfig", str(kc), home=tmp_path, RANKS_CONFIG=str(bad)), ExitCode.NO_CONFIG,
                 str(bad), "invalid TOML")
    missing = tmp_path / "missing.toml"
    one_line(ranks("list", "--kubeconfig", str(kc), home=tmp_path, RANKS_CONFIG=str(missing)), ExitCode.NO_CONFIG,
             str(missing), "not found")
    # at the default place too ($XDG_CONFIG_HOME/ranks/config.toml)
    (tmp_path / "xdg" / "ranks").mkdir(parents=True)
    (tmp_path / "xdg" / "ranks" / "config.toml").write_text("read_only = [\n")
    one_line(ranks("projects", "--kubeconfig", str(kc), home=tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg")),
             ExitCode.NO_CONFIG, "config.toml", "invalid TOML")
    dashboard_refused(*in_pty("--kubeconfig", str(kc), home=tmp_path, RANKS_CONFIG=str(bad)), ExitCode.NO_CONFIG,
                      str(bad), "TOML")
    # well-formed TOML the dashboard cannot use: a wrong type
    typed = tmp_path / "typed.toml"
    typed.write_text("theme = 5\n")
    dashboard_refused(*in_pty("--kubeconfig", str(kc), home=tmp_path, RANKS_CONFIG=str(typed)), ExitCode.NO_CONFIG,
                      "theme")


def test_unknown_theme(tmp_path: Path) -> None:
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{closed_port()}")
    dashboard_refused(*in_pty("--kubeconfig", str(kc), "--theme", "nosuch", home=tmp_path), ExitCode.USAGE,
                      "--theme: unknown theme 'nosuch'", "dark")
    config = tmp_path / "config.toml"
    config.write_text('theme = "nosuch"\n')
    dashboard_refused(*in_pty("--kubeconfig", str(kc), home=tmp_path, RANKS_CONFIG=str(config)), ExitCode.USAGE,
                      f"{config}: theme: unknown theme 'nosuch'")
    # a one-shot command has no theme: the flag is a usage error, one line
    one_line(ranks("list", "--theme", "dark", "--kubeconfig", str(kc), home=tmp_path), ExitCode.USAGE, "--theme")


def test_failing_exec_credential_plugin(tmp_path: Path) -> None:
    """`users[].user.exec` whose command fails is a configuration problem (exit 3), in one line
    with what the plugin said, and no `ERROR:root:` line from the client's logging."""
    server = f"https://127.0.0.1:{closed_port()}"  # never reached: the credentials come first
    failing = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh",
                        "args": ["-c", "echo 'token expired, run login' >&2; exit 1"], "interactiveMode": "Never"}}
    kc = kubeconfig(tmp_path / "kc.yaml", server, user=failing)
    for args in ONE_SHOT:
        one_line(ranks(*args, "--kubeconfig", str(kc), home=tmp_path), ExitCode.NO_CONFIG,
                 "exec plugin failed", "returned 1", "token expired, run login")
    missing = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "no-such-plugin-xyz",
                        "interactiveMode": "Never"}}
    kc2 = kubeconfig(tmp_path / "kc2.yaml", server, user=missing)
    one_line(ranks("list", "--kubeconfig", str(kc2), home=tmp_path), ExitCode.NO_CONFIG, "no-such-plugin-xyz")
    # a plugin that prints no credential
    empty = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "sh", "interactiveMode": "Never",
                      "args": ["-c", 'echo \'{"apiVersion":"client.authentication.k8s.io/v1",'
                                     '"kind":"ExecCredential","status":{}}\'']}}
    kc3 = kubeconfig(tmp_path / "kc3.yaml", server, user=empty)
    one_line(ranks("get", "mnist", "--kubeconfig", str(kc3), home=tmp_path), ExitCode.NO_CONFIG, "missing token")
    # the dashboard: before the TUI
    code, out = in_pty("--kubeconfig", str(kc), home=tmp_path)
    assert code == ExitCode.NO_CONFIG and ALT_SCREEN not in out, out
    # (on a terminal the plugin's own stderr is the user's: kubectl shows it too)
    errors = [ln for ln in out.replace("\r", "").split("\n") if ln.startswith("ranks: error: ")]
    assert len(errors) == 1 and "exec plugin failed" in errors[0], out
    assert "Traceback" not in out and "ERROR:root" not in out


# -- a server that cannot be talked to ---------------------------------------------------------------------


def test_unreachable_server(tmp_path: Path) -> None:
    port = closed_port()
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{port}")
    for args in ONE_SHOT:
        one_line(ranks(*args, "--kubeconfig", str(kc), home=tmp_path), ExitCode.UNREACHABLE,
                 f"cannot reach the API server at https://127.0.0.1:{port}")


def test_server_that_accepts_and_never_answers(tmp_path: Path) -> None:
    """--request-timeout is honoured: exit 4 soon after it, for TLS (the handshake never
    completes) and plain HTTP (no response) alike."""
    with silent_server() as port:
        for scheme, commands in (("https", ONE_SHOT), ("http", (("list",), ("logs", "mnist")))):
            kc = kubeconfig(tmp_path / f"{scheme}.yaml", f"{scheme}://127.0.0.1:{port}")
            for args in commands:
                # (the server never answers: only the 1 s budget ends the command before the 60 s here)
                r = ranks(*args, "--kubeconfig", str(kc), "--request-timeout", "1s", home=tmp_path, timeout=60)
                one_line(r, ExitCode.UNREACHABLE, f"timed out talking to {scheme}://127.0.0.1:{port}",
                         "no answer within 1 s")


def test_dashboard_shows_a_silent_server(tmp_path: Path) -> None:
    """The dashboard on a server that never answers: the TUI says so (and keeps asking); q quits
    cleanly, exit 0."""
    with silent_server() as port:
        kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{port}")
        env = env_for(tmp_path)
        env.pop("NO_COLOR")
        tmux = Tmux(env, 120, 30, name="ranks-badcfg")
        try:
            tmux.start(f"{sys.executable} -m tui.cli --kubeconfig {kc} --request-timeout 1s; echo rc=$?; sleep 60",
                       ROOT)
            tmux.wait_for("timed out talking to https://127.0.0.1:", timeout=30)
            tmux.keys("q")
            screen = tmux.wait_for("rc=", timeout=15)
            assert "rc=0" in screen and "Traceback" not in screen, screen
        finally:
            tmux.kill()


# -- TLS and hostile cluster text: simcluster -----------------------------------------------------------------


@pytest.mark.simcluster(scenario="empty")
def test_bad_tls(simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    from simcluster.apiserver.tls import make_tls

    sim = simcluster.sim
    server = sim.url
    doc = yaml.safe_load(sim.kubeconfig_path.read_text())
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(make_tls().ca_pem).decode()
    wrong = tmp_path / "wrong-ca.yaml"  # a CA that did not sign the server's certificate
    wrong.write_text(yaml.safe_dump(doc))
    del doc["clusters"][0]["cluster"]["certificate-authority-data"]
    system = tmp_path / "system-ca.yaml"  # no CA: the server's self-signed chain against the system's CAs
    system.write_text(yaml.safe_dump(doc))
    for kc in (wrong, system):
        for args in ONE_SHOT:
            one_line(ranks(*args, "--kubeconfig", str(kc), home=tmp_path), ExitCode.TLS,
                     f"TLS verification failed for {server}", "certificate verify failed")
    # the dashboard: it cannot work, so it ends, and says why once the terminal is back
    code, out = in_pty("--kubeconfig", str(wrong), home=tmp_path)
    assert code == ExitCode.TLS, out
    tail = out[out.rfind("\x1b[?1049l") + len("\x1b[?1049l"):] if ALT_SCREEN in out else out
    text = re.sub(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[=>])", "", tail).replace("\r", "")
    lines = [ln for ln in text.split("\n") if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ranks: error: TLS verification failed"), out
    assert "Traceback" not in out


def hostile(sim: object) -> None:
    ns = "default"
    sneaky = "\u202egnp.exe\u202c \u2066x\u2069\u200e\u200f\u061c"
    j = job("PyTorchJob", "bidi", ns, {"Master": 1}, command=["python", f"train{sneaky}.py", "\x1b]0;pwned\x07"],
            labels={"ranks/user": "mallory"})
    sim.apply(j)  # type: ignore[attr-defined]
    sim.apply(pod("PyTorchJob", "bidi", ns, "Master", 0, phase="Pending",  # type: ignore[attr-defined]
                  unschedulable=f"0/1 nodes available{sneaky}\x1b[2J"))
    sim.apply({"apiVersion": "v1", "kind": "Event",  # type: ignore[attr-defined]
               "metadata": {"name": "bidi.1", "namespace": ns},
               "involvedObject": {"kind": "PyTorchJob", "name": "bidi", "namespace": ns}, "type": "Warning",
               "reason": "Odd\u202e", "message": f"evil{sneaky}\x1b]52;c;cHduZWQ=\x07 message", "count": 1,
               "firstTimestamp": "2026-11-01T00:00:05Z", "lastTimestamp": "2026-11-01T00:00:05Z"})


@pytest.mark.simcluster(scenario="empty")
def test_bidi_controls_never_reach_the_terminal(simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    """U+202E and the other bidi controls in a command, a scheduler message and an event: `get`
    and `list -o wide` strip them, as log lines do (and every escape sequence)."""
    simcluster.call(hostile, simcluster.sim)
    kc = str(simcluster.sim.kubeconfig_path)
    outputs = []
    for args in (("list", "-o", "wide"), ("get", "bidi"), ("get", "bidi", "-o", "wide")):
        r = ranks(*args, "--kubeconfig", kc, home=tmp_path)
        assert r.returncode == 0, (args, r.stderr)
        assert "\x1b" not in r.stdout + r.stderr, (args, r.stdout)
        assert not any(ch in r.stdout + r.stderr for ch in BIDI), (args, r.stdout)
        outputs.append(r.stdout)
    wide, get, _ = outputs
    assert "bidi" in wide and "0/1 nodes available" in wide, wide
    assert "traingnp.exe" in get and "evil" in get and "Odd" in get, get


# -- hostile argv: echoed, never acted on -----------------------------------------------------------------------


def test_argv_is_never_echoed_raw(tmp_path: Path) -> None:
    """ESC, newline and bidi controls typed as arguments come back visible (\\x1b, \\u202e), on
    one line, never as bytes the terminal acts on."""
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{closed_port()}")
    title = "a\x1b]0;x\x07b"
    for args in (("get", title), ("logs", title), ("get", "a\nb"), ("get", "a\u202eb"), ("list", "-p", title)):
        one_line(ranks(*args, "--kubeconfig", str(kc), home=tmp_path), ExitCode.USAGE, "is not a")
    line = one_line(ranks("list", "--kubeconfig", str(kc), "--context", f"{title}\u202e\nz", home=tmp_path),
                    ExitCode.NO_CONFIG, "not found in kubeconfig")
    assert r"a\x1b]0;x\x07b\u202e\nz" in line, line
    line = one_line(ranks("list", "--kubeconfig", f"/tmp/{title}\n.yaml", home=tmp_path), ExitCode.NO_CONFIG,
                    "does not exist")
    assert r"\x1b]0;x\x07b\n.yaml" in line, line
    one_line(ranks(title, home=tmp_path), ExitCode.USAGE, "No such command")
    one_line(ranks("list", "-o", "\x1b[2J", home=tmp_path), ExitCode.USAGE, "--output")
    one_line(ranks("list", "--request-timeout", f"1s{title}", home=tmp_path), ExitCode.USAGE, "is not a duration")
    one_line(ranks("logs", "mnist", "--since", title, "--kubeconfig", str(kc), home=tmp_path), ExitCode.USAGE,
             "--since", r"\x1b")


def test_since_must_be_a_duration(tmp_path: Path) -> None:
    """`--since ''` is not "no limit" and `--since '٣m'` (Arabic-Indic digit) is not 3 minutes:
    both exit 2 before any request."""
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{closed_port()}")
    for since, said in (("", '"" is not a duration'), ("٣m", '"٣m" is not a duration'),
                        ("１m", "is not a duration"), ("m", "is not a duration"), ("0s", "greater than 0")):
        one_line(ranks("logs", "mnist", "--since", since, "--kubeconfig", str(kc), home=tmp_path), ExitCode.USAGE,
                 "--since", said)
    one_line(ranks("list", "--request-timeout", "٣s", "--kubeconfig", str(kc), home=tmp_path), ExitCode.USAGE,
             "--request-timeout", "is not a duration")
    # a good one still goes on to the server (unreachable: exit 4)
    one_line(ranks("logs", "mnist", "--since", "3m", "--kubeconfig", str(kc), home=tmp_path), ExitCode.UNREACHABLE)
