from __future__ import annotations

import json
import os
import subprocess

from tests.kubectl_binary import kubectl_path


def test_kubectl_binary_is_v1_35() -> None:
    path = kubectl_path()
    assert path.is_file()
    assert os.access(path, os.X_OK)
    assert path.name == "kubectl"
    assert path.parent.name == "kubectl-v1.35"
    proc = subprocess.run(
        [str(path), "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "KUBECONFIG": os.devnull},
    )
    version = json.loads(proc.stdout)["clientVersion"]
    assert version["gitVersion"].startswith("v1.35")
    assert version["major"] == "1"
    assert version["minor"].startswith("35")


def test_kubectl_path_is_cached() -> None:
    assert kubectl_path() is kubectl_path()
