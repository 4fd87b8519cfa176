"""simcluster's `faults.answer_next`: a request answered with a body of the test's choosing (what a
proxy or a broken server sends), as many times as told, then served as before."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from simcluster.cluster import ThreadedSimCluster
from tests.faults import assert_consumed, assert_fired


def session(sim: Any, tmp: Path) -> tuple[requests.Session, str]:
    doc = yaml.safe_load(sim.kubeconfig_path.read_text())
    ca = tmp / "ca.crt"
    ca.write_bytes(base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]))
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {sim.admin_token}"
    return s, str(ca)


@pytest.mark.simcluster(scenario="empty")
def test_answer_next_serves_the_body_then_the_api_again(simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    s, ca = session(sim, tmp_path)
    url = sim.url + "/api/v1/namespaces"
    t0 = time.time()
    simcluster.call(sim.faults.answer_next, r"^/api/v1/namespaces$", b"<html>login</html>", count=2)
    for _ in range(2):
        r = s.get(url, timeout=10, verify=ca)
        assert r.status_code == 200 and r.text == "<html>login</html>" and r.headers["Content-Type"] == "text/html"
    assert s.get(url, timeout=10, verify=ca).json()["kind"] == "NamespaceList"
    assert_consumed(simcluster, r"^/api/v1/namespaces$")
    assert_fired(simcluster, r"^/api/v1/namespaces$", 200, times=3, since=t0)
    simcluster.call(sim.faults.answer_next, r"/pods$", b"[1]", content_type="application/json", status=503,
                    method="POST")
    assert s.get(sim.url + "/api/v1/pods", timeout=10, verify=ca).json()["kind"] == "PodList"  # (a GET: not it)
    simcluster.call(sim.faults.clear)
    assert not simcluster.call(lambda: sim.faults.answer_rules)


@pytest.mark.simcluster(scenario="empty")
def test_delay_next_holds_one_path_while_the_rest_answer(simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    s, ca = session(sim, tmp_path)
    simcluster.call(sim.faults.delay_next, r"^/api/v1/namespaces$", 30.0)
    with pytest.raises(requests.exceptions.ReadTimeout):
        s.get(sim.url + "/api/v1/namespaces", timeout=1, verify=ca)
    assert s.get(sim.url + "/api/v1/pods", timeout=10, verify=ca).json()["kind"] == "PodList"
    assert_consumed(simcluster, r"^/api/v1/namespaces$")
    assert s.get(sim.url + "/api/v1/namespaces", timeout=10, verify=ca).json()["kind"] == "NamespaceList"
