"""Shared fixtures: simcluster (in-process), the official client, a real kubectl."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["simcluster.pytest_plugin"]

# pytest-xdist's workers (execnet) start with COLUMNS=80 and LINES=24 set: the commands a test starts
# would take them for their terminal's size (`make test` runs two workers; a test alone runs none).
# A test that wants a width says so itself.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _ctrl_c_as_a_shell_gives_it() -> None:
    """The commands tests start get SIGINT as a user's interactive shell gives it to a foreground
    command (default action, not blocked), whatever the test runner or an earlier test left."""
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.fixture
def k8s(simcluster):
    """The official kubernetes client configured from simcluster's kubeconfig."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(simcluster.sim.kubeconfig_path))
    yield client, api
    api.close()


@pytest.fixture(scope="session")
def kubectl_bin() -> Path:
    from tests.kubectl_binary import kubectl_path

    return kubectl_path()


class Kubectl:
    def __init__(self, binary: Path, kubeconfig: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig

    def run(self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60,
            context: str | None = None) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.binary), "--kubeconfig", str(self.kubeconfig)]
        if context:
            cmd += ["--context", context]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
        env["HOME"] = str(self.kubeconfig.parent)  # kubectl's discovery cache stays per test
        proc = subprocess.run([*cmd, *args], input=input, capture_output=True, text=True,
                              timeout=timeout, env=env)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc

    def popen(self, *args: str, context: str | None = None, env: dict[str, str] | None = None
              ) -> subprocess.Popen[str]:
        """kubectl ARGS running; `env`: variables of its own (KUBECTL_PORT_FORWARD_WEBSOCKETS...)."""
        cmd = [str(self.binary), "--kubeconfig", str(self.kubeconfig)]
        if context:
            cmd += ["--context", context]
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("KUBE")}, **(env or {})}
        env["HOME"] = str(self.kubeconfig.parent)
        return subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)


@pytest.fixture
def kubectl(kubectl_bin: Path, simcluster) -> Iterator[Kubectl]:
    yield Kubectl(kubectl_bin, simcluster.sim.kubeconfig_path)
