"""A Prometheus whose answer stalls mid-body (issue #25, item 5: the inactivity timeout covers every
body, the GPU metrics' too): the real `ranks` as a subprocess against simcluster, `--prometheus`
pointing at a server that sends its headers and the start of a JSON body, then nothing while
it holds the connection open. The read commands end after `--request-timeout` with the cluster's
figures, GPU figures `-` and one note saying why (or, for `ranks gpus`, whose figures are the
point, exit 4 in one line), never waiting for the body."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simcluster.cluster import ThreadedSimCluster
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.simcluster(scenario="demo", components=("operators", "scheduler", "kubelet"))


@pytest.fixture
def stalled_prometheus() -> Iterator[tuple[str, list[socket.socket]]]:
    """http://127.0.0.1:PORT answering every request with 200, headers and 20 bytes of a 100 kB body."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def one(conn: socket.socket) -> None:
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = conn.recv(4096)
            if not data:
                return
            buf += data
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
                     b'{"status":"success",')
        held.append(conn)  # (kept open, silent, until the test ends)

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", held
    finally:
        stop.set()
        t.join(10)
        server.close()
        for c in held:
            c.close()


def ranks(kubeconfig: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "XDG_STATE_HOME": str(home / "state"),
           "XDG_CONFIG_HOME": str(home / "config"), "NO_COLOR": "1", "COLUMNS": "200", "LANG": "C.UTF-8"}
    return subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)


def started(k8s: tuple[Any, Any]) -> bool:
    """Every pod placed on a node has left Pending: the kubelet has started the demo's processes."""
    client, api = k8s
    pods = client.CoreV1Api(api).list_pod_for_all_namespaces().items
    return bool(pods) and all(p.status.phase != "Pending" for p in pods if p.spec.node_name)


def test_a_prometheus_answer_that_stalls_mid_body_ends_after_the_request_timeout(
        simcluster: ThreadedSimCluster, k8s: tuple[Any, Any], stalled_prometheus: tuple[str, list[socket.socket]],
        tmp_path: Path) -> None:
    url, held = stalled_prometheus
    kc = simcluster.sim.kubeconfig_path
    # The 2 s budget is for the stalled Prometheus; the cluster answers it as well, so the commands
    # wait for the demo's start (dozens of processes spawned from the server's loop) to be over.
    wait_for(lambda: started(k8s), 120, "the demo's pods started")
    r = ranks(kc, tmp_path, "list", "-p", "team-a", "--prometheus", url, "--request-timeout", "2s")
    assert r.returncode == 0 and "llama-finetune" in r.stdout, (r.returncode, r.stderr)
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith("llama-finetune"))
    assert " - " in row and "%" not in row, row  # no GPU figure read, none made up
    r = ranks(kc, tmp_path, "top", "--prometheus", url, "--request-timeout", "2s")
    assert r.returncode == 0, (r.returncode, r.stderr)
    notes = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(notes) == 1 and notes[0].startswith("ranks: note: GPU metrics unavailable: Prometheus at ") \
        and "timed out after 2 s" in notes[0], r.stderr
    r = ranks(kc, tmp_path, "gpus", "-p", "team-a", "--prometheus", url, "--request-timeout", "2s")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 4 and len(lines) == 1 and "timed out after 2 s" in lines[0], (r.returncode, r.stderr)
    assert lines[0].startswith("ranks: error: GPU metrics unavailable: "), lines
    assert "internal error" not in r.stderr and held, "the stalled server was asked"
