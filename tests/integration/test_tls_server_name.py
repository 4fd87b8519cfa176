"""TLS as kubectl (issue #25, item 7): the kubeconfig's `tls-server-name` is the name the API
server's certificate is checked against (and sent as SNI), for every connection ranks makes (its
requests and LISTs, log streams, exec's WebSocket, the GPU metrics' discovery through the API
server), both ways: ranks accepts what a real kubectl v1.35 accepts and refuses what it refuses, on
the same kubeconfigs.

simcluster's certificate names 127.0.0.1, localhost, kubernetes and kubernetes.default. A TCP
proxy on 127.0.0.2 (a loopback address the certificate does not name) reaches it under a name
that only `tls-server-name` can make good."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from monitors.connection import ExitCode, load_cluster_config
from simcluster.cluster import ThreadedSimCluster
from tests.integration.test_exec_terminal import Proxy
from tests.integration.test_logs import kf_pod, phase_of, seed
from tests.kubectl_binary import kubectl_path
from tests.waiting import wait_for

pytestmark = [pytest.mark.simcluster(components=("kubelet", "exec")), pytest.mark.kubectl]
ROOT = Path(__file__).resolve().parents[2]

# (via the proxy, tls-server-name, accepted?)
CASES = [
    (False, None, True),
    (False, "kubernetes.default", True),
    (False, "wrong.example", False),  # ranks accepted it: the name was ignored
    (True, None, False),
    (True, "kubernetes.default", True),  # ranks refused it: the name was ignored
    (True, "localhost", True),
    (True, "127.0.0.1", True),
    (True, "wrong.example", False),
]


def variant(sim: Any, tmp: Path, server: str, name: str | None) -> Path:
    doc = yaml.safe_load(sim.kubeconfig_path.read_text())
    for c in doc["clusters"]:
        c["cluster"]["server"] = server
        if name is not None:
            c["cluster"]["tls-server-name"] = name
    path = tmp / f"kc-{server.split(':')[1].strip('/')}-{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def env(home: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_", "XDG_"))}
    out.update(HOME=str(home), NO_COLOR="1")
    return out


def kubectl(kc: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(kubectl_path()), "--kubeconfig", str(kc), "--request-timeout", "10s", *args],
                          capture_output=True, text=True, timeout=60, env=env(home))


def ranks(kc: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", "--kubeconfig", str(kc), "--request-timeout", "10s", *args],
                          capture_output=True, text=True, timeout=90, env=env(home), cwd=ROOT)


def test_tls_server_name_is_honoured_as_kubectl_does(simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    simcluster.call(seed, sim, "tls", [kf_pod("tls", "Master", 0, ["sh", "-c", "echo hello from tls; sleep 600"])],
                    workers=0)
    wait_for(lambda: simcluster.call(phase_of, sim, "tls-master-0") == "Running", what="running", timeout=30)
    with Proxy(("127.0.0.1", sim.port), host="127.0.0.2") as proxy:
        for via_proxy, name, accepted in CASES:
            server = f"https://127.0.0.2:{proxy.port}" if via_proxy else sim.url
            kc = variant(sim, tmp_path, server, name)
            home = tmp_path / f"home-{via_proxy}-{name}"
            home.mkdir()
            k = kubectl(kc, home, "get", "pods", "-n", "default", "-o", "name")
            assert (k.returncode == 0) == accepted, ("kubectl", server, name, k.stderr)
            if not accepted:
                assert "x509" in k.stderr or "certificate" in k.stderr, k.stderr
            for args in (("list", "-A"), ("logs", "tls", "-p", "default"),
                         ("exec", "tls", "-p", "default", "--rank", "master-0", "--", "echo", "exec-ok")):
                r = ranks(kc, home, *args)
                if accepted:
                    assert r.returncode == 0, (args, server, name, r.stderr)
                else:
                    assert r.returncode == ExitCode.TLS, (args, server, name, r.returncode, r.stdout, r.stderr)
                    assert "TLS verification failed" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
            if accepted:
                assert "hello from tls" in ranks(kc, home, "logs", "tls", "-p", "default").stdout
            # the GPU metrics' discovery (requests, through the API server) checks the same name
            cfg = load_cluster_config(str(kc))
            from monitors.gpu_feed import api_endpoint

            api = api_endpoint(cfg)
            session = api.new_session()
            try:
                resp = session.get(api.url("/api/v1/namespaces"), timeout=10, verify=session.verify)
                assert accepted, (server, name, "requests accepted a certificate kubectl refuses")
                assert resp.status_code == 200
            except requests.exceptions.SSLError:
                assert not accepted, (server, name, "requests refused a certificate kubectl accepts")
            finally:
                session.close()
