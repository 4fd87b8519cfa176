"""`ranks sim` as a user runs it: one ready line, a working kubeconfig, nothing left behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from tests.kubectl_binary import kubectl_path
from tests.waiting import wait_for


def start(tmp: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "sim", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, line


def children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("tls", ["--tls", "--no-tls"])
def test_ready_line_kubeconfig_and_clean_exit(tmp_path, tls):
    kc = tmp_path / "kc.yaml"
    proc, line = start(tmp_path, "--scenario", "demo", "--kubeconfig", str(kc), tls)
    try:
        assert line.startswith("ready: kubeconfig=") and " server=" in line, line
        path, url = line.strip()[len("ready: kubeconfig="):].split(" server=")
        assert Path(path) == kc.resolve()
        assert url.startswith("https://127.0.0.1:" if tls == "--tls" else "http://127.0.0.1:")
        cfg = yaml.safe_load(kc.read_text())
        assert cfg["current-context"] == "ranks-sim"
        assert ("certificate-authority-data" in cfg["clusters"][0]["cluster"]) == (tls == "--tls")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")} | {"HOME": str(tmp_path)}
        nodes = subprocess.run([str(kubectl_path()), "--kubeconfig", str(kc), "get", "nodes", "-o", "name"],
                               capture_output=True, text=True, env=env, timeout=60)
        if tls == "--tls":
            assert nodes.returncode == 0, nodes.stderr
            assert len(nodes.stdout.split()) == 8
        else:
            # every request needs the token, and kubectl (client-go) sends credentials over TLS only
            assert nodes.returncode == 1 and "You must be logged in to the server" in nodes.stderr, nodes.stderr
            token = cfg["users"][0]["user"]["token"]
            req = urllib.request.Request(f"{url}/api/v1/nodes", headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, timeout=30) as resp:
                assert len(json.load(resp)["items"]) == 8
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(f"{url}/api/v1/nodes", timeout=30)
            assert err.value.code == 401
        port = int(url.rsplit(":", 1)[1])
        # the demo's workloads run as processes below simcluster
        kids = wait_for(lambda: k if len(k := children(proc.pid)) >= 5 else None, 20,
                        "the demo's workloads (5 processes or more)", interval=0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    assert rc == 0
    assert not port_open(port)
    assert not kc.exists()
    for pid in kids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


@pytest.mark.parametrize("content", [
    "apiVersion: v1\nkind: Config\nclusters:\n- name: prod\n  cluster: {server: https://x}\n",
    "root:x:0:0:root:/root:/bin/bash\n",  # any other file (it parses as a YAML string)
    "clusters: 3\n",
    "\udcff",
])
def test_refuses_to_overwrite_a_foreign_kubeconfig(tmp_path, content):
    kc = tmp_path / "config"
    kc.write_bytes(content.encode("utf-8", "surrogateescape"))
    proc = subprocess.run([sys.executable, "-m", "tui.cli", "sim", "--kubeconfig", str(kc)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("ranks: error: refusing to overwrite") and len(proc.stderr.splitlines()) == 1
    assert kc.read_bytes() == content.encode("utf-8", "surrogateescape")


def test_port_in_use_is_a_clean_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "tui.cli", "sim", "--port", str(port)],
                              capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"ranks: error: cannot listen on 127.0.0.1:{port}")
    assert "Traceback" not in proc.stderr
