"""`ranks serve --ssh` under faults (issue #17, item 7), with the real OpenSSH client and raw sockets:
malformed protocol traffic, a flood of connections, the login grace and the idle timeout, a client
killed mid-session (also while its dashboard is still being started), agent/X11/dynamic forwarding,
wrong keys. Throughout, a user already connected keeps being served and nothing is left behind:
the server's descendant processes are counted before and after.

The cases `tests/integration/test_ssh_serve.py` already covers (-L/-R/-W/sftp refused, garbage and
a burst of 150 connections, a client that disappears, a dead template) are not repeated here."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.test_ssh_serve import CONTEXT, ROOT, Served, dashboard_client, env, keygen, ssh_binary
from tests.waiting import descendants, wait_for

# the dashboards read the demo's objects; nothing needs to run in the cluster
pytestmark = pytest.mark.simcluster(scenario="demo")

MARKER = "ranks: alice 127.0.0.1:"  # each session's process is titled USER PEER
GRACE = 5.0  # the login grace these servers are given (RANKS_SSH_LOGIN_GRACE)
PROMPT = 2.5  # malformed traffic is dropped at once: well within the grace


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_sockets(pid: int) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                out.add(link[8:-1])
    return out


def _tcp_rows() -> list[list[str]]:
    rows = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(name) as fh:
            rows += [line.split() for line in fh.readlines()[1:]]
    return rows


def listening(pid: int) -> int:
    """The process's listening sockets: TCP in state LISTEN, unix ones that accept."""
    mine = _socket_inodes(pid)
    n = sum(1 for r in _tcp_rows() if r[3] == "0A" and r[9] in mine)
    with open("/proc/net/unix") as fh:
        n += sum(1 for line in fh.readlines()[1:] if (f := line.split()) and f[3] == "00010000" and f[6] in mine)
    return n


def connected_on(pid: int, port: int) -> int:
    """The process's TCP connections whose local port is `port` (clients of its SSH server)."""
    mine = _socket_inodes(pid)
    return sum(1 for r in _tcp_rows() if r[3] == "01" and r[9] in mine and int(r[1].rsplit(":", 1)[1], 16) == port)


@pytest.fixture
def serve(simcluster, tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """`serve(*flags, setup=None, **environment)`: `ranks serve --ssh` on simcluster (alice's key
    authorized, `stranger` not), its login grace GRACE, `flags` added to its own; `setup(dir)` runs
    on its directory of keys before it starts; stopped with SIGTERM at the end (exit 0, no
    descendant left)."""
    ssh_binary()
    started: list[Served] = []

    def start(*flags: str, setup: Callable[[Path], None] | None = None, **extra: str) -> Served:
        d = tmp_path / "ssh"
        d.mkdir(mode=0o700)
        keygen(d / "host")
        alice_fp = keygen(d / "alice")
        keygen(d / "stranger")
        keys = d / "authorized"
        keys.mkdir(mode=0o700)
        (keys / "alice").write_text((d / "alice.pub").read_text())
        users = d / "users.yaml"
        users.write_text(f"{alice_fp}: {{user: alice}}\n")
        if setup is not None:
            setup(d)
        kubeconfig = simcluster.sim.kubeconfig_path
        err = tmp_path / "serve.err"
        with open(err, "w") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tui.cli", "serve", "--ssh", "127.0.0.1:0", "--host-key", str(d / "host"),
                 "--authorized-keys", str(keys), "--users", str(users), "--max-sessions-per-user", "3",
                 "--kubeconfig", str(kubeconfig), "--context", CONTEXT, *flags],
                stdout=subprocess.PIPE, stderr=fh, text=True, cwd=ROOT, stdin=subprocess.DEVNULL,
                env={**env(), "RANKS_SSH_LOGIN_GRACE": f"{GRACE:g}", **extra})
        served = Served(0, d, kubeconfig, proc, err, int(simcluster.sim.url.rsplit(":", 1)[1]))
        started.append(served)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline() if ready else ""
        assert line.startswith("ready: ssh=127.0.0.1:"), (line, err.read_text())
        served.port = int(line.strip().rsplit(":", 1)[1])
        wait_for(lambda: any("ranks: dashboard template" in cmd for cmd in descendants(proc.pid).values()), 30,
                 "the warm template")
        return served

    yield start
    for served in started:
        try:
            if served.proc.poll() is None:
                left = descendants(served.proc.pid)
                served.proc.send_signal(signal.SIGTERM)
                assert served.proc.wait(timeout=20) == 0, served.audit()
                gone = [pid for pid in left if os.path.exists(f"/proc/{pid}")]
                wait_for(lambda g=gone: not [p for p in g if os.path.exists(f"/proc/{p}")], 10,
                         "the server's processes to end with it", detail=lambda g=gone: g)
        finally:
            if served.proc.poll() is None:
                served.proc.kill()
                served.proc.wait()


def baseline(served: Served) -> dict[int, str]:
    """The server's descendants while no session is open: the warm template alone."""
    found = wait_for(lambda: (d := descendants(served.proc.pid)) and len(d) == 1 and d, 30,
                     "the warm template as the server's only descendant",
                     detail=lambda: descendants(served.proc.pid))
    assert "ranks: dashboard template" in next(iter(found.values())), found
    return found


def sessions(served: Served) -> list[int]:
    """This server's sessions (alice's dashboards, zombies too), not another test's: its descendants
    titled with the session's user and peer."""
    return [pid for pid, cmd in descendants(served.proc.pid).items() if MARKER in cmd]


def same_processes(served: Served, before: dict[int, str], within: float, what: str) -> None:
    # (the same processes: their state letter, R or S, is not compared)
    wait_for(lambda: descendants(served.proc.pid).keys() == before.keys() and not sessions(served), within, what,
             detail=lambda: (descendants(served.proc.pid), sessions(served)))


def closed_by(sock: socket.socket, deadline: float) -> float:
    """Read until the server closes the connection; when that was (monotonic clock), or fail at `deadline`."""
    sock.settimeout(0.1)
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return time.monotonic()
        except TimeoutError:
            continue
        except ConnectionResetError:
            return time.monotonic()
    raise AssertionError("the server kept the connection open")


def raw(port: int, payload: bytes = b"", *, half_close: bool = False) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    with contextlib.suppress(OSError):  # (the server may have closed it before all of it went)
        if payload:
            s.sendall(payload)
        if half_close:
            s.shutdown(socket.SHUT_WR)
    return s


def quit_dashboard(client: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """q: the dashboard ends and ssh exits 0; (its stdout, its stderr when piped apart)."""
    assert client.stdin is not None
    client.stdin.write(b"q")
    client.stdin.flush()
    out, err = client.communicate(timeout=20)
    assert client.returncode == 0, (client.returncode, (out or b"")[-2000:])
    return out or b"", err or b""


def kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


BANNER = b"SSH-2.0-probe_1.0\r\n"


def test_malformed_traffic_and_wrong_keys_leave_a_connected_user_served(serve: Callable[..., Served]) -> None:
    served = serve()
    before = baseline(served)
    client = dashboard_client(served)
    try:
        wait_for(lambda: sessions(served), 30, "alice's dashboard")
        rss0 = rss_mb(served.proc.pid)
        # dropped at once: a banner that is not SSH's, an SSH-1 client, a version line without an
        # end, a packet length of 4 GB or over the limit, a packet whose padding is longer than itself,
        # a packet cut short by the client closing its side
        t0 = time.monotonic()
        prompt = {
            "garbage banner": raw(served.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            "SSH-1": raw(served.port, b"SSH-1.5-old\r\n"),
            "endless version line": raw(served.port, b"SSH-2.0-" + b"x" * 70000),
            "4 GB packet length": raw(served.port, BANNER + struct.pack(">I", 0xFFFFFFFF) + b"\x04" + b"\0" * 11),
            "oversized packet length": raw(served.port, BANNER + struct.pack(">I", 1 << 20) + b"\x04" + b"\0" * 11),
            "padding longer than the packet": raw(served.port, BANNER + struct.pack(">IB", 12, 200) + b"\x14" * 11),
            "truncated packet, then EOF": raw(served.port, BANNER + struct.pack(">IB", 1000, 4) + b"\x14" * 100,
                                              half_close=True),
        }
        t_held = time.monotonic()
        # held until the login grace ends: nothing at all, a banner alone, a truncated packet
        held = {
            "silent": raw(served.port),
            "banner only": raw(served.port, BANNER),
            "truncated packet": raw(served.port, BANNER + struct.pack(">IB", 1000, 4) + b"\x14" * 100),
        }
        # wrong keys, several at once, while all of that is open
        strangers = [subprocess.Popen(served.ssh("projects", key="stranger"), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(), text=True)
                     for _ in range(6)]
        for what, s in prompt.items():
            with s:
                took = closed_by(s, t0 + PROMPT) - t0
                assert took < PROMPT, (what, took)
        for what, s in held.items():
            with s:
                took = closed_by(s, t_held + GRACE + 6) - t_held
                assert took >= GRACE - 1, (what, took)  # (not dropped as malformed: held for the grace)
        for p in strangers:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 255 and "Permission denied (publickey)" in err, (p.returncode, err)
        # a client offering key after key is closed after the sixth one not authorized (sshd's
        # MaxAuthTries): alice's key, offered seventh, is never looked at
        for i in range(5):
            keygen(served.dir / f"other{i}")
        many = tuple(a for i in range(5) for a in ("-i", str(served.dir / f"other{i}")))
        many = (*many, "-i", str(served.dir / "alice"))
        r = served.run("projects", key="stranger", opts=many)
        assert r.returncode == 255 and "too many authentication failures" in r.stderr.lower(), (r.returncode, r.stderr)
        wait_for(lambda: "what='login: 6 keys not authorized'" in served.audit(), 10, "the refused login audited")
        # the server kept serving: alice logs in again, her dashboard still answers, memory is as it was
        r = served.run("projects")
        assert r.returncode == 0, r.stderr
        assert sessions(served)
        assert rss_mb(served.proc.pid) < rss0 + 30, (rss0, rss_mb(served.proc.pid))
        quit_dashboard(client)
        audit = served.audit()
        assert audit.count("refused user=? ") == 7, audit  # (the six strangers, the one with many keys)
        assert "login user=" in audit and all(ln.split("login user=")[1].startswith("alice ")
                                              for ln in audit.splitlines() if "login user=" in ln), audit
        assert served.proc.poll() is None
        same_processes(served, before, 15, "no process left of alice's sessions")
    finally:
        kill(client)


def test_a_flood_of_connections_is_bounded_and_a_good_client_gets_in(serve: Callable[..., Served]) -> None:
    """Connections that never log in hold at most MAX_UNAUTHENTICATED (64) places at once: more
    take the place of the oldest, so a real client still logs in while the flood goes on."""
    served = serve()
    sockets0 = open_sockets(served.proc.pid)
    stop = threading.Event()
    stats = {"opened": 0, "refused": 0, "most_server_sockets": 0}
    live: list[socket.socket] = []

    def flood() -> None:  # up to 120 connections open at once, each sending a banner and then nothing
        while not stop.is_set():
            if len(live) >= 120:
                live.pop(0).close()
            try:
                s = socket.create_connection(("127.0.0.1", served.port), timeout=2)
                s.sendall(BANNER)
                live.append(s)
                stats["opened"] += 1
            except OSError:
                stats["refused"] += 1
            if stats["opened"] % 20 == 0:
                stats["most_server_sockets"] = max(stats["most_server_sockets"], open_sockets(served.proc.pid))
            time.sleep(0.01)

    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    try:
        wait_for(lambda: stats["opened"] >= 150, 30, "the flood under way")
        for _ in range(3):
            t0 = time.monotonic()
            r = served.run("projects", timeout=60)
            assert r.returncode == 0, (r.returncode, r.stderr, stats)
            print(f"a login during the flood: {time.monotonic() - t0:.2f} s ({stats['opened']} connections so far)")
        assert flooder.is_alive()
    finally:
        stop.set()
        flooder.join(10)
        for s in live:
            s.close()
    # the server held at most 64 of the flood's connections (+ the good client's, the template's socket)
    assert stats["most_server_sockets"] - sockets0 <= 64 + 10, (stats, sockets0)
    assert served.proc.poll() is None
    wait_for(lambda: open_sockets(served.proc.pid) <= sockets0, 15, "the flood's connections closed",
             detail=lambda: open_sockets(served.proc.pid))
    print(f"flood: {stats}")


def test_an_idle_session_is_closed_and_an_active_one_is_not(serve: Callable[..., Served]) -> None:
    served = serve(RANKS_SSH_IDLE_TIMEOUT="5")
    before = baseline(served)
    idle = dashboard_client(served)
    active = dashboard_client(served)
    assert active.stdin is not None

    def type_for(seconds: float, until: Callable[[], bool] = lambda: False) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            active.stdin.write(b"\x1b[B")  # (down: a key every half second)
            active.stdin.flush()
            time.sleep(0.5)

    try:
        wait_for(lambda: len(sessions(served)) == 2, 30, "two dashboards")
        type_for(30, until=lambda: idle.poll() is not None)
        out, _ = idle.communicate(timeout=5)
        assert b"ranks: closed after 5 seconds without input" in out, out[-2000:]
        wait_for(lambda: len(sessions(served)) == 1, 10, "the idle dashboard's process gone")
        type_for(11)  # over twice the timeout: the session typed into is kept
        assert active.poll() is None
        audit = served.audit()
        assert audit.count(" idle user=alice ") == 1, audit
        quit_dashboard(active)
        same_processes(served, before, 15, "no process left of either session")
    finally:
        kill(idle)
        kill(active)


def test_a_client_killed_mid_session_leaves_nothing_behind(serve: Callable[..., Served]) -> None:
    served = serve()
    before = baseline(served)
    template = next(iter(before))
    # 1. killed while its dashboard runs
    client = dashboard_client(served)
    try:
        wait_for(lambda: sessions(served), 30, "alice's dashboard")
        assert len(descendants(served.proc.pid)) > len(before)
        time.sleep(1.0)  # (drawing)
        client.send_signal(signal.SIGKILL)
        client.wait()
        same_processes(served, before, 15, "the dashboard's process gone")
    finally:
        kill(client)
    # 2. killed while its dashboard is still being started (the template is slow to answer): the
    # process started after the client went is ended as soon as it exists
    n_logout = served.audit().count("logout user=alice")
    os.kill(template, signal.SIGSTOP)
    client = dashboard_client(served)
    try:
        wait_for(lambda: served.audit().count("dashboard user=alice") == 2, 20, "the second session asked for")
        time.sleep(0.5)
        client.send_signal(signal.SIGKILL)
        client.wait()
        wait_for(lambda: served.audit().count("logout user=alice") > n_logout, 10, "the logout seen")
    finally:
        os.kill(template, signal.SIGCONT)
        kill(client)
    same_processes(served, before, 20, "no process of the session started after its client went")
    # the server counts no session of alice's any more: three dashboards may open (--max-sessions-per-user 3)
    clients = [dashboard_client(served) for _ in range(3)]
    try:
        wait_for(lambda: len(sessions(served)) == 3, 40, "three dashboards",
                 detail=lambda: served.audit()[-2000:])
        for c in clients:
            quit_dashboard(c)
    finally:
        for c in clients:
            kill(c)
    same_processes(served, before, 15, "no process left")


def test_agent_x11_and_dynamic_forwarding_are_refused(serve: Callable[..., Served], tmp_path: Path) -> None:
    """ssh -A -X -D: no agent socket, no X11 display, no connection made for the client (-L, -R
    and -W are in test_ssh_serve)."""
    served = serve()
    before = baseline(served)
    listening0, clients0 = listening(served.proc.pid), connected_on(served.proc.pid, served.port)
    (tmp_path / "xauthority").write_bytes(b"")
    agent_sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(agent_sock)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    target = socket.create_server(("127.0.0.1", 0))  # what a forward would reach: nothing may connect
    target.settimeout(0.5)
    target_port = target.getsockname()[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        socks_port = s.getsockname()[1]
    fwd_env = {**env(), "TERM": "xterm-256color", "SSH_AUTH_SOCK": str(agent_sock), "DISPLAY": "127.0.0.1:0",
               "XAUTHORITY": str(tmp_path / "xauthority")}
    client: subprocess.Popen[bytes] | None = None
    try:
        wait_for(agent_sock.exists, 10, "the local ssh-agent")
        with open(tmp_path / "ssh.err", "wb") as err:
            client = subprocess.Popen(  # (trusted X11: no X server is asked for a cookie; a fake one is sent)
                served.ssh(opts=("-tt", "-v", "-A", "-X", "-o", "ForwardX11Trusted=yes",
                                 "-D", f"127.0.0.1:{socks_port}")),
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, env=fwd_env)
        pid = wait_for(lambda: sessions(served), 30, "alice's dashboard")[0]
        with open(f"/proc/{pid}/environ", "rb") as fh:
            environ = dict(kv.split(b"=", 1) for kv in fh.read().split(b"\0") if b"=" in kv)
        assert not {b"SSH_AUTH_SOCK", b"DISPLAY", b"SSH_CONNECTION", b"SSH_CLIENT"} & environ.keys(), environ.keys()
        # no agent or X11 listener was made for the session: the server holds its one connection more
        with open("/proc/net/unix") as fh:
            assert "asyncssh-" not in fh.read()
        # (counted by kind: the server's own connections to the API server and to each dashboard's
        # view of its one watch come and go with the sessions)
        assert listening(served.proc.pid) == listening0, (listening0, listening(served.proc.pid))
        assert connected_on(served.proc.pid, served.port) == clients0 + 1
        # -D: a SOCKS5 CONNECT through the client; the server refuses the channel, nothing connects
        wait_for(lambda: b"Local forwarding listening" in (tmp_path / "ssh.err").read_bytes()
                 or b"Local connections to" in (tmp_path / "ssh.err").read_bytes(), 10, "the SOCKS listener")
        with socket.create_connection(("127.0.0.1", socks_port), timeout=10) as c:
            c.settimeout(10)
            c.sendall(b"\x05\x01\x00")
            assert c.recv(2) == b"\x05\x00"
            c.sendall(b"\x05\x01\x00\x01" + socket.inet_aton("127.0.0.1") + struct.pack(">H", target_port)
                      + b"GET / HTTP/1.0\r\n\r\n")
            got = b""
            with contextlib.suppress(OSError):
                while chunk := c.recv(4096):
                    got += chunk
        wait_for(lambda: f"port forwarding to 127.0.0.1:{target_port}" in served.audit(), 10,
                 "the dynamic forward's refusal audited")
        with pytest.raises(TimeoutError):
            target.accept()[0].close()
        assert b"HTTP" not in got, got
        assert client.stdin is not None
        client.stdin.write(b"q")
        client.stdin.flush()
        client.communicate(timeout=20)
        err_text = (tmp_path / "ssh.err").read_text(errors="replace")
        assert client.returncode == 0, err_text[-3000:]
        assert "Requesting X11 forwarding" in err_text and "X11 forwarding request failed" in err_text, err_text[-3000:]
        assert "Requesting authentication agent forwarding" in err_text, err_text[-3000:]
        audit = served.audit()  # (asyncssh refuses both itself: each refusal is audited all the same)
        assert "refused user=alice from=127.0.0.1:" in audit and "what='agent forwarding'" in audit, audit
        assert "what='X11 forwarding'" in audit, audit
    finally:
        if client is not None:
            kill(client)
        agent.kill()
        agent.wait()
        target.close()
    same_processes(served, before, 15, "no process left")


def test_the_time_limits_come_from_the_config_else_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from sessions.errors import SessionError
    from sessions.ssh.config import ServeConfig

    cfg = ServeConfig("127.0.0.1", 0, "host", "keys")
    monkeypatch.delenv("RANKS_SSH_LOGIN_GRACE", raising=False)
    monkeypatch.delenv("RANKS_SSH_IDLE_TIMEOUT", raising=False)
    assert cfg.timeouts() == (30.0, 0.0)  # 30 s to log in; never idle
    monkeypatch.setenv("RANKS_SSH_LOGIN_GRACE", "4")
    monkeypatch.setenv("RANKS_SSH_IDLE_TIMEOUT", "900")
    assert cfg.timeouts() == (4.0, 900.0)
    assert ServeConfig("127.0.0.1", 0, "host", "keys", login_grace=10, idle_timeout=0).timeouts() == (10.0, 0.0)
    for bad in ("-1", "soon", "nan", "inf"):
        monkeypatch.setenv("RANKS_SSH_IDLE_TIMEOUT", bad)
        with pytest.raises(SessionError) as exc:
            cfg.timeouts()
        assert exc.value.code == 2 and "RANKS_SSH_IDLE_TIMEOUT" in exc.value.message


def test_a_key_listed_for_two_users_is_refused_at_start_and_on_reload(serve: Callable[..., Served]) -> None:
    """Warned about at start and again on reload, and refused (it would act as whichever user came
    first); listed for one user again, it logs in as that user. (alice's key is in the user map,
    which names its one identity: the `stranger` key is the one listed twice.)"""
    def bob_and_carol_have_the_same_key(d: Path) -> None:
        for user in ("bob", "carol"):
            (d / "authorized" / user).write_text((d / "stranger.pub").read_text())

    served = serve(setup=bob_and_carol_have_the_same_key)
    keys = served.dir / "authorized"
    err = served.audit()
    assert "ranks: warning: the key SHA256:" in err and "is listed for bob and carol; refused" in err, err
    r = served.run("projects", key="stranger")
    assert r.returncode == 255 and "Permission denied" in r.stderr, (r.returncode, r.stderr)
    assert served.run("projects").returncode == 0  # (alice, whose key is hers alone)
    (keys / "carol").unlink()
    wait_for(lambda: served.run("projects", key="stranger").returncode == 0, 20,
             "the key accepted once listed for bob alone")
    assert "login user=bob" in served.audit()
    (keys / "dave").write_text((served.dir / "stranger.pub").read_text())
    wait_for(lambda: "is listed for bob and dave; refused" in served.audit(), 20, "the warning on reload")
    r = served.run("projects", key="stranger")
    assert r.returncode == 255 and "Permission denied" in r.stderr, (r.returncode, r.stderr)
