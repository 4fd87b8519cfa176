"""Benchmarks: each prints its figures (run with `make bench`, i.e. pytest -s -m perf)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/perf/" in str(item.fspath):
            item.add_marker(pytest.mark.perf)


@dataclass
class SimProcess:
    proc: subprocess.Popen[str]
    kubeconfig: Path
    url: str
    token: str
    ca: Path

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0


def start_sim(tmp: Path, *args: str, timeout: float = 180) -> SimProcess:
    kc = tmp / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "sim", "--kubeconfig", str(kc), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("ready:") or not line:
            break
    if not line.startswith("ready:"):
        proc.kill()
        raise RuntimeError(f"simcluster did not start: {proc.stderr.read() if proc.stderr else ''}")
    cfg = yaml.safe_load(kc.read_text())
    import base64

    ca = tmp / "ca.pem"
    ca.write_bytes(base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"]))
    token = next(u["user"]["token"] for u in cfg["users"] if u["name"] == "admin")
    return SimProcess(proc, kc, cfg["clusters"][0]["cluster"]["server"], token, ca)


@pytest.fixture
def sim_process(tmp_path: Path) -> Iterator[callable]:
    started: list[SimProcess] = []

    def start(*args: str) -> SimProcess:
        sp = start_sim(tmp_path, *args)
        started.append(sp)
        return sp

    yield start
    for sp in started:
        sp.proc.send_signal(signal.SIGTERM)
        try:
            sp.proc.wait(30)
        except subprocess.TimeoutExpired:
            sp.proc.kill()


def kubectl_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["HOME"] = str(home)
    return env
