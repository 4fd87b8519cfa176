"""Identity (issue #17, item 2): expired credentials and namespace-scoped RBAC, against simcluster.

- A token that expires (401): the monitor and the dashboard say "unauthorized (401) ... expired
  ... log in again or refresh the token" and keep the last data; once the kubeconfig (or its
  token file) is rewritten with fresh credentials they continue without a restart, within
  seconds. One-shot commands end with that one line and exit 6; the dashboard started with
  expired credentials exits 6 with it.
- A user limited to one namespace: list, projects, top projects, get, why and logs work in it;
  elsewhere each says forbidden in one line (exit 7); top nodes is forbidden.
- A user who may read a project but not write it: submit (create), delete and suspend are refused
  with one line naming the verb (exit 7), and nothing is changed.

Covered elsewhere: a project one may not read (tests/integration/test_cli_first_hour.py::
test_a_forbidden_project_is_one_line_exit_7), the dashboard of a namespace-limited user
(tests/integration/test_dashboard.py::test_namespace_limited_user_sees_own_project_and_forbidden_nodes),
the dashboard keeping its data on a 401 (test_cli_first_hour.py::
test_dashboard_keeps_the_data_when_credentials_expire), forbidden exec and shell
(tests/integration/test_shell_exec_convert.py::test_exec_and_shell_forbidden_by_rbac), submit and
delete in a project one may not read (tests/integration/test_submit.py::test_rbac_forbidden_project),
the monitor of a namespace-limited user (tests/integration/test_monitor.py::test_namespace_limited_user).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.text import Text

from monitors.connection import load_cluster_config
from monitors.dataloop import DataOptions
from monitors.kube import UNAUTHORIZED_LINE
from monitors.monitor import Monitor
from simcluster.apiserver.auth import READ_VERBS, Rule
from simcluster.cluster import ThreadedSimCluster
from tests.faults import answered
from tests.kubeflow_objects import job, pod
from tests.waiting import one_line_error, pilot_wait, until, wait_for
from themes import load_themes
from tui.app import RanksApp
from tui.screens.base import Banner
from tui.settings import Settings

pytestmark = pytest.mark.simcluster(scenario="demo")
ROOT = Path(__file__).resolve().parents[2]
A, B = "runai-team-a", "runai-team-b"
KEY = (A, "PyTorchJob", "mnist")
MUTATING = ("POST", "PUT", "PATCH", "DELETE")


def seed(sim: Any, name: str = "mnist", ns: str = A, *, workers: int = 1, runnable: bool = False) -> None:
    """A PyTorchJob and its pods; `runnable`: without a status, so the kubelet runs them (each prints
    a line and sleeps)."""
    sim.apply(job("PyTorchJob", name, ns, {"Master": 1, "Worker": workers}, conditions=[("Running", "")]))
    for rtype, i in [("Master", 0), *(("Worker", w) for w in range(workers))]:
        p = pod("PyTorchJob", name, ns, rtype, i, node="h100-node-01", gpus=0,
                command=["sh", "-c", f"echo hello from {rtype.lower()}-{i}; sleep 600"])
        if runnable:
            p.pop("status", None)
        sim.apply(p)


def ranks(*args: str, kubeconfig: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(RANKS_CONFIG="", NO_COLOR="1", XDG_CONFIG_HOME=str(kubeconfig.parent / "no-config"))
    return subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL)


def reader(sim: Any, name: str, path: Path) -> tuple[str, Path]:
    """A user who may read everything (cluster-wide), with a kubeconfig of their own."""
    token = sim.add_user(name, rules=(Rule.of(READ_VERBS),))
    return token, sim.write_kubeconfig(path, user=name)


def ranks_of(m: Monitor) -> list[str]:
    wl = m.model.workloads.get(KEY)
    return [r.pod for r in wl.ranks] if wl else []


def plain(widget: Any) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def banner(app: RanksApp) -> str:
    b = app.screen.query(Banner)
    return plain(b.first()) if b and b.first().has_class("-shown") else ""


# -- token expiry: the monitor --------------------------------------------------------------------------


async def test_expired_token_is_said_and_a_rewritten_kubeconfig_is_used_without_restart(
        simcluster_async: Any, tmp_path: Path) -> None:
    sim = simcluster_async
    seed(sim)
    old, kubeconfig = reader(sim, "dana", tmp_path / "dana.yaml")
    m = Monitor(load_cluster_config(str(kubeconfig), None))  # the dashboard's backoff: 0.5 s to 30 s
    await m.start()
    await m.wait_synced(20)
    try:
        sim.authz.expire(old)
        sim.store.drop_watches()  # the watches come back to a 401
        await until(lambda: m.status.retrying and set(m.status.retrying.values()) == {UNAUTHORIZED_LINE},
                    timeout=10, what="every informer unauthorized", detail=lambda: m.status.retrying)
        assert "expired" in UNAUTHORIZED_LINE and "log in again or refresh the token" in UNAUTHORIZED_LINE
        await asyncio.sleep(1.5)
        assert not m.status.connected and ranks_of(m) == ["mnist-master-0", "mnist-worker-0"]  # data kept
        # `kubectl login`-style refresh: a new token written into the same kubeconfig
        new = sim.add_user("dana")  # (her rules stay bound to her name)
        sim.write_kubeconfig(kubeconfig, user="dana")
        sim.apply(pod("PyTorchJob", "mnist", A, "Worker", 8, node="h100-node-02"))
        await until(lambda: m.status.connected and "mnist-worker-8" in ranks_of(m), timeout=60,
                    what="going on with the new token",
                    detail=lambda: m.status.retrying)
        assert m.cfg.credentials_key()[0] == f"Bearer {new}"
    finally:
        await m.stop()


async def test_a_rewritten_token_file_is_used_at_once(simcluster_async: Any, tmp_path: Path) -> None:
    sim = simcluster_async
    seed(sim)
    old = sim.add_user("erin", rules=(Rule.of(READ_VERBS),))
    token_file = tmp_path / "token"
    token_file.write_text(old + "\n")
    doc = sim.kubeconfig()
    doc["users"] = [{"name": "erin", "user": {"tokenFile": str(token_file)}}]
    doc["contexts"] = [{"name": "erin", "context": {"cluster": "ranks-sim", "user": "erin"}}]
    doc["current-context"] = "erin"
    kubeconfig = tmp_path / "erin.yaml"
    kubeconfig.write_text(yaml.safe_dump(doc))
    m = Monitor(load_cluster_config(str(kubeconfig), None), backoff=(2.0, 30.0))
    await m.start()
    await m.wait_synced(20)
    try:
        sim.authz.expire(old)
        asked = {i.name: i.watches for i in m.informers}
        sim.store.drop_watches()
        # each informer refused twice more: its next try is 8 s away (backoff 2, 4, 8 s); the
        # rewritten file is used by waking it (test_a_refused_client_wakes_when_its_credentials_change)
        await until(lambda: all(i.state.value == "unauthorized" and i.watches >= asked[i.name] + 2
                                for i in m.informers), timeout=30, what="every informer refused twice more",
                    detail=lambda: [(i.name, i.state.value, i.watches) for i in m.informers])
        token_file.write_text(sim.add_user("erin") + "\n")  # as a credential helper rewrites it
        sim.apply(pod("PyTorchJob", "mnist", A, "Worker", 8, node="h100-node-02"))
        await until(lambda: m.status.connected and "mnist-worker-8" in ranks_of(m), timeout=60,
                    what="going on with the new token",
                    detail=lambda: m.status.retrying)
    finally:
        await m.stop()


# -- token expiry: one-shot commands and the dashboard ---------------------------------------------------


def test_one_shot_commands_with_an_expired_token_say_so_in_one_line_and_exit_6(
        simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    simcluster.call(seed, sim)
    token, kubeconfig = simcluster.call(reader, sim, "dana", tmp_path / "dana.yaml")
    assert ranks("list", "-A", kubeconfig=kubeconfig).returncode == 0
    simcluster.call(sim.authz.expire, token)
    for args in (["list", "-A"], ["projects"], ["top", "nodes"], ["get", "mnist", "-p", "team-a"],
                 ["why", "mnist", "-p", "team-a"], ["logs", "mnist", "-p", "team-a"]):
        r = ranks(*args, kubeconfig=kubeconfig)
        one_line_error(r, 6, UNAUTHORIZED_LINE)
        assert token not in r.stderr + r.stdout


async def test_dashboard_started_with_an_expired_token_exits_6_saying_so(
        simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    token, kubeconfig = simcluster.call(reader, sim, "dana", tmp_path / "dana.yaml")
    simcluster.call(sim.authz.expire, token)
    app = RanksApp(load_cluster_config(str(kubeconfig), None), Settings(), themes=load_themes(None),
                   data_options=DataOptions(metrics=False))
    async with app.run_test(size=(160, 40)):
        deadline = time.monotonic() + 30
        while not app.exit_message and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    # (`ranks` exits with the app's result and prints its message as one `ranks: error:` line)
    assert app.return_value == 6 and app.exit_message == UNAUTHORIZED_LINE, (app.return_value, app.exit_message)


async def test_dashboard_says_credentials_expired_then_continues_once_the_kubeconfig_is_refreshed(
        simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    simcluster.call(seed, sim)
    token, kubeconfig = simcluster.call(reader, sim, "dana", tmp_path / "dana.yaml")
    app = RanksApp(load_cluster_config(str(kubeconfig), None), Settings(), themes=load_themes(None),
                   data_options=DataOptions(metrics=False))
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot_wait(pilot, lambda: app.store.synced and KEY in app.store.workloads, timeout=30,
                         what="the first picture")
        simcluster.call(sim.authz.expire, token)
        simcluster.call(sim.store.drop_watches)
        await pilot_wait(pilot, lambda: "expired" in banner(app), timeout=30, what="the banner",
                         detail=lambda: banner(app))
        assert UNAUTHORIZED_LINE in banner(app)
        assert KEY in app.store.workloads  # the last data stays on screen
        simcluster.call(sim.add_user, "dana")
        simcluster.call(sim.write_kubeconfig, kubeconfig, "dana")
        simcluster.call(seed, sim, "after")
        await pilot_wait(pilot, lambda: (A, "PyTorchJob", "after") in app.store.workloads and not banner(app),
                         timeout=15, what="the dashboard going on with the refreshed kubeconfig",
                         detail=lambda: banner(app))
        assert app.return_code is None


# -- namespace-scoped RBAC -------------------------------------------------------------------------------


@pytest.mark.simcluster(scenario="demo", components=("kubelet",))
def test_a_namespace_limited_user_reads_her_project_and_is_told_forbidden_elsewhere(
        simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    simcluster.call(seed, sim, runnable=True)
    simcluster.call(seed, sim, "bert", B)
    alice = simcluster.call(sim.write_kubeconfig, tmp_path / "alice.yaml", "alice")  # runai-team-a only
    # in her project: every read works
    r = ranks("projects", "-o", "json", kubeconfig=alice)
    assert r.returncode == 0, r.stderr
    assert [p["name"] for p in json.loads(r.stdout)["projects"]] == ["team-a"], r.stdout
    r = ranks("top", "projects", kubeconfig=alice)
    assert r.returncode == 0 and "team-a" in r.stdout and "team-b" not in r.stdout, (r.stdout, r.stderr)
    r = ranks("get", "mnist", "-p", "team-a", kubeconfig=alice)
    assert r.returncode == 0 and "mnist-worker-0" in r.stdout, r.stderr
    r = ranks("why", "mnist", "-p", "team-a", kubeconfig=alice)
    assert r.returncode == 0, r.stderr

    def logs() -> subprocess.CompletedProcess[str] | None:
        r = ranks("logs", "mnist", "-p", "team-a", kubeconfig=alice)
        return r if r.returncode == 0 and "hello from worker-0" in r.stdout else None

    r = wait_for(logs, 30, "alice reads her job's logs", interval=0.5)
    assert "hello from master-0" in r.stdout
    # elsewhere: forbidden, one line each
    for args in (["get", "bert", "-p", "team-b"], ["why", "bert", "-p", "team-b"], ["logs", "bert", "-p", "team-b"],
                 ["list", "-p", "team-b"]):
        one_line_error(ranks(*args, kubeconfig=alice), 7, 'alice may not read project "team-b"')
    one_line_error(ranks("top", "nodes", kubeconfig=alice), 7, "forbidden", "nodes")


def test_a_read_only_user_may_not_create_delete_or_suspend(simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    sim = simcluster.sim
    simcluster.call(seed, sim)
    simcluster.call(sim.add_namespace_reader, "viewer", [A])  # get, list, watch in runai-team-a
    viewer = simcluster.call(sim.write_kubeconfig, tmp_path / "viewer.yaml", "viewer")
    assert ranks("get", "mnist", "-p", "team-a", kubeconfig=viewer).returncode == 0
    t0 = time.time()
    line = one_line_error(ranks("submit", "v1", "--framework", "pytorch", "-i", "img", "--workers", "1", "-p",
                                "team-a", "--interactive", kubeconfig=viewer), 7, "forbidden", "viewer")
    assert "pytorchjobs" in line and "create" in line and A in line, line
    line = one_line_error(ranks("delete", "mnist", "-p", "team-a", "--yes", kubeconfig=viewer), 7, "forbidden")
    assert "delete" in line and "mnist" in line, line
    line = one_line_error(ranks("suspend", "mnist", "-p", "team-a", kubeconfig=viewer), 7, "forbidden")
    assert "mnist" in line, line
    # the server refused each one: nothing changed
    refused = [r for r in answered(simcluster, "", since=t0) if r.method in MUTATING]
    assert refused and all(r.status == 403 for r in refused), [(r.method, r.path, r.status) for r in refused]
    assert simcluster.call(sim.store.find, ("kubeflow.org", "pytorchjobs"), A, "mnist") is not None
