"""simcluster's `faults.answer_next`: a request answered with a body of the test's choosing (what a
proxy or a broken server sends), as many times as told, then served as before."""

from __future__ import annotations

import pytest
import requests

from simcluster.cluster import ThreadedSimCluster
from tests.faults import assert_consumed, assert_fired


@pytest.mark.simcluster(scenario="empty")
def test_answer_next_serves_the_body_then_the_api_again(simcluster: ThreadedSimCluster) -> None:
    sim = simcluster.sim
    s = requests.Session()
    s.verify = str(sim.ca_path) if getattr(sim, "ca_path", None) else False
    s.headers["Authorization"] = f"Bearer {sim.admin_token}"
    url = sim.url + "/api/v1/namespaces"
    simcluster.call(sim.faults.answer_next, r"^/api/v1/namespaces$", b"<html>login</html>", count=2)
    for _ in range(2):
        r = s.get(url, timeout=10)
        assert r.status_code == 200 and r.text == "<html>login</html>" and r.headers["Content-Type"] == "text/html"
    assert r.status_code == 200
    assert s.get(url, timeout=10).json()["kind"] == "NamespaceList"
    assert_consumed(simcluster, r"^/api/v1/namespaces$")
    assert_fired(simcluster, r"^/api/v1/namespaces$", 200, times=3)
    simcluster.call(sim.faults.answer_next, r"/pods$", b"[1]", content_type="application/json", status=503,
                    method="POST")
    assert s.get(sim.url + "/api/v1/pods", timeout=10).json()["kind"] == "PodList"  # (a GET: not this rule)
    simcluster.call(sim.faults.clear)
    assert not simcluster.call(lambda: sim.faults.answer_rules)
