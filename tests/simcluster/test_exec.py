"""`pods/exec` over WebSocket with real clients: the official Python client, websocket-client with
older subprotocols, and kubectl v1.35 (also interactively under a pseudo-terminal), against pods
that the simcluster kubelet runs as local processes."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import ssl
import struct
import subprocess
import termios
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import websocket
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream

from simcluster.scenarios.nodes import gpu_node
from tests.waiting import processes_matching, unique_sleep, wait_for

pytestmark = pytest.mark.simcluster(components=("kubelet", "exec"))

NODE = "node-0"


# -- helpers --------------------------------------------------------------------------------------


def pod_manifest(name: str, containers: list[dict] | None = None, *, node: str | None = NODE,
                 restart: str = "Always") -> dict:
    spec: dict[str, Any] = {
        "restartPolicy": restart,
        "containers": containers or [{
            "name": "main", "image": "busybox", "command": ["sleep", "3600"],
            "env": [{"name": "WORLD_SIZE", "value": "4"}, {"name": "RANK", "value": "0"}],
        }],
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def running(simcluster, name: str, container: str = "main") -> bool:
    def check() -> bool:
        rt = simcluster.sim.kubelet.runtime("default", name)
        return rt is not None and rt.is_running(container)

    return simcluster.call(check)


def start_pod(simcluster, core, name: str, containers: list[dict] | None = None, **kw: Any) -> Path:
    """Create a pod bound to a node, wait until the kubelet runs it; returns its root directory."""
    simcluster.call(simcluster.sim.apply, gpu_node(NODE, 8))
    core.create_namespaced_pod("default", pod_manifest(name, containers, **kw))
    first = (containers or [{"name": "main"}])[0]["name"]
    wait_for(lambda: running(simcluster, name, first), what=f"pod {name} running", timeout=20)
    return Path(simcluster.call(lambda: simcluster.sim.kubelet.runtime("default", name).root))



def exec_ws(core, name: str, command: list[str], **kw: Any):
    opts = {"stdin": False, "stdout": True, "stderr": True, "tty": False, **kw}
    return stream(core.connect_get_namespaced_pod_exec, name, "default", command=command,
                  _preload_content=False, **opts)


def error_status(ws) -> dict:
    ws.run_forever(timeout=10)
    assert not ws.is_open()
    return json.loads(ws.read_channel(3))


def raw_ws(simcluster, name: str, query: str, protocols: list[str]) -> websocket.WebSocket:
    """A bare websocket-client connection (the library the Python client uses), to choose the
    subprotocols ourselves."""
    sim = simcluster.sim
    ca = sim.workdir / "exec-test-ca.pem"
    ca.write_bytes(sim.ca_pem)
    ws = websocket.WebSocket(sslopt={"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": str(ca)})
    url = f"wss://{sim.host}:{sim.port}/api/v1/namespaces/default/pods/{name}/exec?{query}"
    ws.connect(url, header=[f"Authorization: Bearer {sim.admin_token}"], subprotocols=protocols, timeout=10)
    return ws


def read_frames(ws: websocket.WebSocket) -> list[tuple[int, bytes]]:
    frames = []
    while True:
        op, frame = ws.recv_data_frame(True)
        if op == websocket.ABNF.OPCODE_CLOSE:
            return frames
        frames.append((op, frame.data))


# -- the official Python client ---------------------------------------------------------------------


def test_env_cwd_and_stderr_without_tty(simcluster, core):
    start_pod(simcluster, core, "env")
    ws = exec_ws(core, "env", ["sh", "-c", "echo $WORLD_SIZE $RANK; pwd; echo oops >&2; echo $HOME"])
    ws.run_forever(timeout=10)
    assert ws.returncode == 0
    # the container's working directory (the image's WORKDIR) and HOME
    workdir, home = simcluster.call(lambda: (lambda rt: (rt.working_dir("main"), rt.home))(
        simcluster.sim.kubelet.runtime("default", "env")))
    assert ws.read_stdout() == f"4 0\n{workdir}\n{home}\n"
    assert ws.read_stderr() == "oops\n"
    assert ws.subprotocol == "v5.channel.k8s.io"
    # _preload_content=True: the output of both streams, joined
    out = stream(core.connect_get_namespaced_pod_exec, "env", "default", command=["printenv", "WORLD_SIZE"],
                 stderr=True, stdin=False, stdout=True, tty=False)
    assert out == "4\n"


def test_stdin_round_trip_and_v5_close(simcluster, core):
    start_pod(simcluster, core, "cat")
    ws = exec_ws(core, "cat", ["cat"], stdin=True)
    ws.write_stdin("hello\n")
    assert ws.readline_stdout(timeout=5) == "hello"
    ws.write_stdin(b"\x00bin\xffary\n")
    assert ws.readline_stdout(timeout=5) == "\x00bin\ufffdary"
    ws.close_channel(0)  # EOF: cat ends
    ws.run_forever(timeout=10)
    assert ws.returncode == 0
    # EOF reaches a program that needs it to finish
    ws = exec_ws(core, "cat", ["wc", "-c"], stdin=True)
    for _ in range(3):
        ws.write_stdin("123456\n")
    ws.close_channel(0)
    ws.run_forever(timeout=10)
    assert ws.returncode == 0 and ws.read_stdout().strip() == "21"


def test_exit_codes_and_status(simcluster, core):
    start_pod(simcluster, core, "codes")
    for code in (0, 1, 3, 255):
        ws = exec_ws(core, "codes", ["sh", "-c", f"exit {code}"])
        ws.run_forever(timeout=10)
        assert ws.returncode == code
    status = error_status(exec_ws(core, "codes", ["sh", "-c", "exit 3"]))
    assert status == {
        "metadata": {}, "status": "Failure",
        "message": "command terminated with non-zero exit code: command terminated with exit code 3",
        "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    }
    assert error_status(exec_ws(core, "codes", ["true"])) == {"metadata": {}, "status": "Success"}
    # killed by a signal: 128 + signal number, as the runtime reports it
    ws = exec_ws(core, "codes", ["sh", "-c", "kill -9 $$"])
    ws.run_forever(timeout=10)
    assert ws.returncode == 137


def test_command_not_found_is_a_runtime_error(simcluster, core):
    start_pod(simcluster, core, "nf")
    status = error_status(exec_ws(core, "nf", ["nosuch-binary"]))
    assert status["reason"] == "InternalError" and status["code"] == 500
    assert status["message"].startswith(
        "Internal error occurred: Internal error occurred: error executing command in container: "
        "failed to exec in container: failed to start exec \"")
    assert status["message"].endswith(
        'OCI runtime exec failed: exec failed: unable to start container process: '
        'exec: "nosuch-binary": executable file not found in $PATH: unknown')
    status = error_status(exec_ws(core, "nf", ["/no/such/file"]))
    assert 'exec: "/no/such/file": stat /no/such/file: no such file or directory' in status["message"]


def test_tty_resize_and_stty_size(simcluster, core):
    start_pod(simcluster, core, "tty")
    ws = exec_ws(core, "tty", ["sh"], stdin=True, tty=True)
    ws.write_channel(4, json.dumps({"Width": 101, "Height": 33}))
    ws.write_stdin("stty size; tty; echo T=$TERM\n")
    out = ""
    deadline = time.monotonic() + 10
    while "T=xterm" not in out and time.monotonic() < deadline:
        ws.update(timeout=0.5)
        out += ws.read_stdout(timeout=0) or ""
    assert "33 101\r\n" in out and "/dev/pts/" in out and "T=xterm\r\n" in out
    ws.write_channel(4, json.dumps({"Width": 200, "Height": 50}) + "\n")
    ws.write_stdin("echo err >&2; stty size\n")
    out = ""
    deadline = time.monotonic() + 10
    while "50 200" not in out and time.monotonic() < deadline:
        ws.update(timeout=0.5)
        out += ws.read_stdout(timeout=0) or ""
    assert "50 200" in out and "err\r\n" in out  # stderr is merged into the terminal
    assert ws.peek_stderr() == ""
    ws.write_stdin("exit 5\n")
    ws.run_forever(timeout=10)
    assert ws.returncode == 5


def test_tty_first_size_applies_before_start(simcluster, core):
    start_pod(simcluster, core, "tty2")
    ws = exec_ws(core, "tty2", ["stty", "size"], stdin=True, tty=True)
    ws.write_channel(4, json.dumps({"Width": 77, "Height": 22}))
    ws.run_forever(timeout=10)
    assert ws.returncode == 0
    assert ws.read_stdout() == "22 77\r\n"


def test_tty_input_and_eof_sent_before_start(simcluster, core):
    start_pod(simcluster, core, "early")
    ws = exec_ws(core, "early", ["cat"], stdin=True, tty=True)
    ws.write_stdin("abc\n")
    ws.write_stdin("partial")
    ws.close_channel(0)  # on a terminal: the EOF character, twice after a partial line
    ws.run_forever(timeout=10)
    assert ws.returncode == 0
    out = ws.read_stdout()
    # the terminal's echo and cat's copy of each piece (their interleaving depends on timing)
    assert out.count("abc\r\n") == 2 and out.count("partial") == 2 and len(out) == 24, out


def test_api_server_errors_before_upgrade(simcluster, core):
    start_pod(simcluster, core, "two", containers=[
        {"name": "a", "image": "x", "command": ["sleep", "3600"]},
        {"name": "b", "image": "x", "command": ["sleep", "3600"]},
    ])
    with pytest.raises(ApiException) as exc:
        exec_ws(core, "two", ["true"])
    assert "400" in str(exc.value)
    assert "a container name must be specified for pod two, choose one of: [a b]" in str(exc.value)
    with pytest.raises(ApiException) as exc:
        exec_ws(core, "two", ["true"], container="zz")
    assert "container zz is not valid for pod two" in str(exc.value)
    ws = exec_ws(core, "two", ["sh", "-c", "echo $0"], container="b")
    ws.run_forever(timeout=10)
    assert ws.returncode == 0
    core.create_namespaced_pod("default", pod_manifest("unbound", node=None))
    with pytest.raises(ApiException) as exc:
        exec_ws(core, "unbound", ["true"])
    assert "pod unbound does not have a host assigned" in str(exc.value)
    with pytest.raises(ApiException) as exc:
        exec_ws(core, "missing", ["true"])
    assert 'pods \\"missing\\" not found' in str(exc.value) or 'pods "missing" not found' in str(exc.value)


def test_completed_pod_container_not_found(simcluster, core, kubectl):
    simcluster.call(simcluster.sim.apply, gpu_node(NODE, 8))
    core.create_namespaced_pod("default", pod_manifest(
        "done", [{"name": "main", "image": "x", "command": ["true"]}], restart="Never"))
    wait_for(lambda: core.read_namespaced_pod("done", "default").status.phase == "Succeeded",
             what="pod done to succeed", timeout=20)
    # v5: the socket is upgraded by the API server's translator, then the kubelet refuses
    status = error_status(exec_ws(core, "done", ["true"]))
    assert status["message"] == 'Internal error occurred: unable to upgrade connection: container not found ("main")'
    assert status["reason"] == "InternalError"
    # kubectl checks the phase itself
    proc = kubectl.run("exec", "done", "--", "true", check=False)
    assert proc.returncode == 1
    assert "cannot exec into a container in a completed pod; current phase is Succeeded" in proc.stderr


# -- older subprotocols -------------------------------------------------------------------------------


def test_v4_protocol_frames_and_status(simcluster, core):
    start_pod(simcluster, core, "v4")
    ws = raw_ws(simcluster, "v4", "command=sh&command=-c&command=echo+out%3B+echo+err+%3E%262%3B+exit+3"
                "&stdout=true&stderr=true", ["v4.channel.k8s.io"])
    assert ws.subprotocol == "v4.channel.k8s.io"
    frames = read_frames(ws)
    ws.close()
    binary = websocket.ABNF.OPCODE_BINARY
    assert frames[0] == (binary, b"\x01")  # the empty frame announcing the streams
    data = {ch: b"".join(d[1:] for op, d in frames[1:] if d[0] == ch) for ch in (1, 2, 3)}
    assert data[1] == b"out\n" and data[2] == b"err\n"
    assert data[3] == (
        b'{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: '
        b'error executing command [sh -c echo out; echo err >&2; exit 3], exit code 3",'
        b'"reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}'
    )
    assert all(op == binary for op, _ in frames)


def test_base64_and_legacy_protocols(simcluster, core):
    start_pod(simcluster, core, "b64")
    ws = raw_ws(simcluster, "b64", "command=cat&stdin=true&stdout=true", ["v4.base64.channel.k8s.io"])
    ws.send("0" + base64.b64encode(b"ping\n").decode())
    op, frame = ws.recv_data_frame(True)
    assert (op, frame.data) == (websocket.ABNF.OPCODE_TEXT, b"1")  # the empty stdout frame
    op, frame = ws.recv_data_frame(True)
    assert frame.data[:1] == b"1" and base64.b64decode(frame.data[1:]) == b"ping\n"
    ws.close()  # v4 has no half-close: closing the socket ends the session
    # channel.k8s.io: errors are plain text on channel 3, nothing on success
    ws = raw_ws(simcluster, "b64", "command=sh&command=-c&command=exit+2&stdout=true", ["channel.k8s.io"])
    frames = read_frames(ws)
    ws.close()
    assert b"".join(d[1:] for _, d in frames if d[:1] == b"\x03") == (
        b"command terminated with non-zero exit code: error executing command [sh -c exit 2], exit code 2")
    # a kubelet refusal reaches a pre-v5 client as the upgrade's HTTP answer
    core.create_namespaced_pod("default", pod_manifest(
        "gone", [{"name": "main", "image": "x", "command": ["true"]}], restart="Never"))
    wait_for(lambda: core.read_namespaced_pod("gone", "default").status.phase == "Succeeded",
             what="pod gone to succeed", timeout=20)
    with pytest.raises(websocket.WebSocketBadStatusException) as exc:
        raw_ws(simcluster, "gone", "command=true&stdout=true", ["v4.channel.k8s.io"])
    assert exc.value.status_code == 500
    assert b'container not found (\\"main\\")' in exc.value.resp_body


# -- session lifetime ---------------------------------------------------------------------------------


def test_session_killed_when_pod_deleted(simcluster, core):
    start_pod(simcluster, core, "victim")
    background, foreground = unique_sleep(3172), unique_sleep(3173)
    ws = exec_ws(core, "victim", ["sh", "-c", f"echo ready; {background} & {foreground}"])
    assert ws.readline_stdout(timeout=5) == "ready"
    wait_for(lambda: processes_matching(foreground), what="exec'd process", timeout=20)
    core.delete_namespaced_pod("victim", "default", grace_period_seconds=0)
    ws.run_forever(timeout=10)
    assert not ws.is_open()
    assert ws.returncode >= 128  # killed, reported as 128 + signal
    wait_for(lambda: not processes_matching(background) and not processes_matching(foreground), timeout=10,
             what="session processes to go")


def test_session_killed_when_container_exits(simcluster, core):
    root = start_pod(simcluster, core, "short", containers=[
        {"name": "main", "image": "x", "command": ["sh", "-c", "while [ ! -e stop ]; do sleep 0.05; done"]},
    ], restart="Never")
    sleep = unique_sleep(3174)
    ws = exec_ws(core, "short", ["sh", "-c", f"echo ready; exec {sleep}"])
    assert ws.readline_stdout(timeout=5) == "ready"
    (root / "workspace" / "stop").touch()  # the container's working directory, /workspace
    ws.run_forever(timeout=10)
    assert not ws.is_open()
    assert ws.returncode == 137
    wait_for(lambda: not processes_matching(sleep), timeout=10, what="exec'd process to go")


def test_client_disconnect_kills_the_session(simcluster, core):
    start_pod(simcluster, core, "drop")
    sleep = unique_sleep(3175)
    ws = exec_ws(core, "drop", ["sh", "-c", f"echo ready; {sleep}"], stdin=True)
    assert ws.readline_stdout(timeout=5) == "ready"
    assert processes_matching(sleep)
    ws.close()
    wait_for(lambda: not processes_matching(sleep), timeout=10, what="exec'd process to go")
    wait_for(lambda: not simcluster.call(lambda: len(simcluster.sim.exec_service.sessions)), timeout=5,
             what="session to end")


# -- kubectl --------------------------------------------------------------------------------------------


def test_kubectl_exec_exit_code_and_env(simcluster, core, kubectl):
    start_pod(simcluster, core, "kx")
    proc = kubectl.run("exec", "kx", "--", "sh", "-c", "echo out; exit 3", check=False)
    assert proc.returncode == 3
    assert proc.stdout == "out\n"
    assert proc.stderr == "command terminated with exit code 3\n"
    env = kubectl.run("exec", "kx", "--", "env").stdout.splitlines()
    assert "WORLD_SIZE=4" in env and "RANK=0" in env
    assert kubectl.run("exec", "-i", "kx", "--", "cat", input="a\nb\n").stdout == "a\nb\n"
    proc = kubectl.run("exec", "kx", "--", "nosuch", check=False)
    assert proc.returncode == 1
    assert 'exec: "nosuch": executable file not found in $PATH' in proc.stderr
    # kubectl used the WebSocket (GET + upgrade), never the SPDY fallback (POST)
    methods = {r.method for r in simcluster.sim.requests.since(0) if r.path.endswith("/kx/exec")}
    assert methods == {"GET"}
    # a refused WebSocket upgrade makes kubectl retry over SPDY, which fails the same way
    proc = kubectl.run("exec", "kx", "-c", "bad", "--", "true", check=False)
    assert proc.returncode == 1
    assert proc.stderr == "Error from server (BadRequest): container bad is not valid for pod kx\n"
    # SPDY itself is not served: a clean 400 Status, not a hang
    sim = simcluster.sim
    ca = sim.workdir / "exec-test-ca.pem"
    ca.write_bytes(sim.ca_pem)
    req = urllib.request.Request(
        f"{sim.url}/api/v1/namespaces/default/pods/kx/exec?command=true&stdout=true", method="POST",
        headers={"Authorization": f"Bearer {sim.admin_token}", "Connection": "Upgrade",
                 "Upgrade": "SPDY/3.1", "X-Stream-Protocol-Version": "v4.channel.k8s.io"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, context=ssl.create_default_context(cafile=str(ca)), timeout=10)
    assert err.value.code == 400
    body = json.loads(err.value.read())
    assert body["kind"] == "Status" and "SPDY/3.1 is not supported" in body["message"]
    # exec is `create` on pods/exec: a read-only user may not
    simcluster.call(simcluster.sim.add_namespace_reader, "viewer", ["default"])
    proc = kubectl.run("exec", "kx", "--", "true", context="ranks-sim-viewer", check=False)
    assert proc.returncode == 1
    assert 'User "viewer" cannot create resource "pods/exec" in API group "" in the namespace "default"' in proc.stderr


class Terminal:
    """A program on a pseudo-terminal we hold the master side of."""

    def __init__(self, argv: list[str], env: dict[str, str], rows: int, cols: int) -> None:
        self.master, slave = os.openpty()
        self.resize(rows, cols, fd=slave)
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self.seen = b""

    def resize(self, rows: int, cols: int, fd: int | None = None) -> None:
        fcntl.ioctl(self.master if fd is None else fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def expect(self, needle: bytes, timeout: float = 10.0) -> bytes:
        deadline = time.monotonic() + timeout
        while needle not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{needle!r} not seen in {self.seen[-500:]!r}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"terminal closed before {needle!r}: {self.seen[-500:]!r}")
                self.seen += chunk
        head, _, self.seen = self.seen.partition(needle)
        return head + needle

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def test_kubectl_exec_interactive_tty(simcluster, core, kubectl):
    start_pod(simcluster, core, "shell")
    sleep = unique_sleep(3176)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["HOME"] = str(kubectl.kubeconfig.parent)
    term = Terminal([str(kubectl.binary), "--kubeconfig", str(kubectl.kubeconfig), "exec", "-it", "shell",
                     "--", "sh"], env, rows=40, cols=120)
    try:
        term.expect(b"# ")
        term.send(b"stty size\r")
        term.expect(b"40 120\r\n")
        term.resize(50, 132)  # kubectl sees SIGWINCH and sends a resize message
        deadline = time.monotonic() + 30
        while True:
            term.send(b"stty size\r")
            if b"50 132" in term.expect(b"# "):
                break
            assert time.monotonic() < deadline, "resize never reached the exec'd terminal"
        term.send(b"echo hel''lo\r")
        term.expect(b"hello\r\n")
        term.expect(b"# ")
        # keystroke echo round trip: our terminal -> kubectl -> WebSocket -> exec pty -> back (how fast:
        # tests/perf/test_bench_shell.py and test_bench_exec.py)
        for i in range(30):
            key = bytes([ord("a") + i % 26])
            term.send(key)
            term.expect(key)
        term.send(b"\x15")  # ^U: drop the typed line
        term.send(f"{sleep} &\r".encode())
        term.expect(b"# ")
        assert processes_matching(sleep)
        term.send(b"exit 4\r")
        assert term.proc.wait(15) == 4
    finally:
        term.close()
    # the background job held the terminal: the session's leftovers are cleaned up
    wait_for(lambda: not processes_matching(sleep), timeout=10, what="background job to go")
