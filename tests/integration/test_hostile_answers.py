"""Answers no API server sends (issue #25, item 6): simcluster answers one path with HTML (a proxy's
login page), a JSON array or scalar where an object belongs, truncated JSON, or objects whose fields
have the wrong types, and the read commands run against it in this process (`tests.cli_inprocess`).
Each gives exit 0 or one `ranks: error:` line with a documented exit code, never an internal error.
The injected answer is checked to have been served (`tests.faults.answered`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from simcluster.cluster import ThreadedSimCluster
from tests.cli_inprocess import isolated, one_line_or_ok, run_cli
from tests.faults import answered
from tests.kubeflow_objects import job, pod

pytestmark = pytest.mark.simcluster(scenario="empty")

NS = "default"
HTML = b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please log in</body></html>\n"
BODIES: list[tuple[bytes, str]] = [
    (HTML, "text/html"),
    (b"[1, 2, 3]", "application/json"),
    (b"[]", "application/json"),
    (b"null", "application/json"),
    (b'"just a string"', "application/json"),
    (b"12345678901234567890123456789", "application/json"),
    (b'{"kind": "PodList", "items": [{"metadata": {"name": "x", "namesp', "application/json"),
    (b'{"kind": "Status", "code": "five hundred", "message": ["a"], "reason": {}}', "application/json"),
    (b'{"items": "not a list", "metadata": [], "groups": 7, "resources": "x", "status": []}', "application/json"),
    (b'{"items": [1, "a", null, [], {"metadata": 5}], "metadata": {"continue": 5, "resourceVersion": []}}',
     "application/json"),
    (b"\xff\xfe\x00garbage\x1b]0;title\x07", "application/octet-stream"),
    (b"", "application/json"),
]
# each path, with a command that asks for it (checked: the injected answer was served)
PLAN: list[tuple[str, tuple[str, ...]]] = [
    (r"^/api$", ("list", "-A")),
    (r"^/apis$", ("projects",)),
    (r"^/api/v1/namespaces$", ("list", "-A")),
    (r"^/api/v1/namespaces/default$", ("get", "mnist", "-p", NS)),
    (r"/namespaces/default/pods$", ("get", "mnist", "-p", NS, "-o", "json")),
    (r"^/api/v1/pods$", ("idle", "-A")),
    (r"/namespaces/default/pytorchjobs$", ("why", "mnist", "-p", NS)),
    (r"/namespaces/default/events$", ("get", "mnist", "-p", NS)),
    (r"^/api/v1/nodes$", ("top", "nodes")),
    (r"/resourcequotas$", ("projects",)),
    (r"/pods/mnist-worker-0/log$", ("logs", "mnist", "-p", NS, "--tail", "3")),
    (r"/pods/mnist-master-0/log$", ("get", "mnist", "-p", NS)),
]


def seed(sim: object) -> None:
    sim.apply(job("PyTorchJob", "mnist", NS, {"Master": 1, "Worker": 1}, conditions=[("Running", "")]))  # type: ignore[attr-defined]
    for rtype in ("Master", "Worker"):
        sim.apply(pod("PyTorchJob", "mnist", NS, rtype, 0))  # type: ignore[attr-defined]


@pytest.mark.parametrize(("path", "command"), PLAN, ids=[p.strip("^$").replace("\\", "") for p, _ in PLAN])
def test_an_answer_no_api_server_sends_is_one_line_or_survived(simcluster: ThreadedSimCluster, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch, path: str,
                                                              command: tuple[str, ...]) -> None:
    """Every bad body on `path`, once (asked again: the command succeeds) and every time (given up
    on with one line after --request-timeout)."""
    sim = simcluster.sim
    simcluster.call(seed, sim)
    for raw, ctype in BODIES:
        for count in (1, 1000):
            t0 = time.time()
            simcluster.call(sim.faults.answer_next, path, raw, content_type=ctype, count=count)
            try:
                with isolated(monkeypatch, tmp_path):
                    r = run_cli(*command, "--kubeconfig", str(sim.kubeconfig_path), "--request-timeout", "1s")
            finally:
                simcluster.call(sim.faults.clear)
            one_line_or_ok(r)
            assert answered(simcluster, path, since=t0), (path, command, "the injected answer was never asked for")
