"""A user's first hour with `ranks` (issue #11): a project one may not read, names, slow and
failing servers, `ranks get`'s events, the demo's kubeconfig. Real processes against simcluster
(faults injected through `sim.faults`), and the dashboard through `App.run_test()`."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.text import Text

from monitors.connection import load_cluster_config
from monitors.dataloop import DataOptions, DataStatus, DataUpdate
from monitors.model_views import KeyedDiff, ModelDiff
from simcluster.apiserver.auth import READ_VERBS, Rule
from simcluster.cluster import ThreadedSimCluster
from tests.dashboard_kit import make_app
from tests.faults import answered, assert_fired
from tests.kubeflow_objects import job, pod
from tests.waiting import one_line_error, pilot_wait
from tui.app import DataArrived, RanksApp
from tui.screens.base import Banner, Crumbs
from tui.screens.lists import EmptyNote, WorkloadsScreen
from tui.settings import Settings

pytestmark = pytest.mark.simcluster(scenario="demo")
ROOT = Path(__file__).resolve().parents[2]
A, B = "runai-team-a", "runai-team-b"
T0 = 1_793_491_205  # 2026-11-01T00:00:05Z, the events' second


def ranks(*args: str, kubeconfig: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(RANKS_CONFIG="", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL)


def event(ns: str, kind: str, name: str, reason: str, nanos: int, when: str = "2026-11-01T00:00:05Z") -> dict:
    """An Event as Kubernetes' recorders make it: named <object>.<hex UnixNano>, seconds in lastTimestamp."""
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.{nanos:x}", "namespace": ns},
            "involvedObject": {"kind": kind, "name": name, "namespace": ns}, "type": "Normal", "reason": reason,
            "message": f"{reason} {name}", "count": 1, "firstTimestamp": when, "lastTimestamp": when}


def seed(sim: Any) -> None:
    sim.apply(job("MPIJob", "hvd-interactive", A, {"Launcher": 1, "Worker": 1}, command=["sleep", "infinity"],
                  conditions=[("Running", "")]))
    sim.apply(pod("MPIJob", "hvd-interactive", A, "Launcher", None, gpus=0, name="hvd-interactive-launcher-x1",
                  node="h100-node-01"))
    sim.apply(pod("MPIJob", "hvd-interactive", A, "Worker", 0, node="h100-node-01"))
    sim.apply(job("PyTorchJob", "bert-crash", B, {"Master": 1, "Worker": 1}, conditions=[("Failed", "")]))
    sim.apply(pod("PyTorchJob", "bert-crash", B, "Master", 0, node="a100-node-01"))
    sim.apply(pod("PyTorchJob", "bert-crash", B, "Worker", 0, node="a100-node-01", phase="Failed",
                  terminated=(1, "Error")))
    for ns in (A, B):
        sim.apply(job("PyTorchJob", "twin", ns, {"Master": 1}))
    base = T0 * 10**9
    # one second, written in an order that is neither the names' nor the time's
    sim.apply(event(B, "Pod", "bert-crash-master-0", "Started", base + 300))
    sim.apply(event(B, "Pod", "bert-crash-worker-0", "Scheduled", base + 100))
    sim.apply(event(B, "PyTorchJob", "bert-crash", "Failed", base + 9 * 10**8 + 5, "2026-11-01T00:00:06Z"))
    sim.apply(event(B, "Pod", "bert-crash-worker-0", "Started", base + 200))


@pytest.fixture
def cluster(simcluster: ThreadedSimCluster) -> ThreadedSimCluster:
    simcluster.call(seed, simcluster.sim)
    return simcluster


@pytest.fixture
def alice(cluster: ThreadedSimCluster, tmp_path: Path) -> Path:
    return cluster.call(cluster.sim.write_kubeconfig, tmp_path / "alice.kubeconfig", user="alice")


# -- item 4: a project one may not read ------------------------------------------------------------


def test_a_forbidden_project_is_one_line_exit_7(cluster: ThreadedSimCluster, alice: Path) -> None:
    said = 'forbidden: alice may not read project "team-b"'
    for args in (["get", "bert-crash", "-p", "team-b"], ["list", "-p", "team-b"],
                 ["logs", "bert-crash", "-p", "team-b"], ["logs", "-f", "bert-crash", "-p", "team-b"],
                 ["logs", "bert-crash", "-p", "team-b", "--first-failure"], ["-p", "team-b", "list"]):
        one_line_error(ranks(*args, kubeconfig=alice, timeout=30), 7, said)
    one_line_error(ranks("get", "bert-crash", "-p", B, kubeconfig=alice), 7, f'alice may not read project "{B}"')
    # a namespace that exists but is not hers is not guessed as runai-research: forbidden too
    one_line_error(ranks("list", "-p", "research", kubeconfig=alice, timeout=30), 7,
                   'alice may not read project "research"')
    # one who may see every Namespace object but not inside team-b: the same, not an empty list
    def carol() -> Path:
        sim = cluster.sim
        sim.add_user("carol", rules=(Rule.of(("get", "list"), ["namespaces"], [""]),
                                     Rule.of(READ_VERBS, namespaces=[A])))
        return sim.write_kubeconfig(alice.parent / "carol.kubeconfig", user="carol")

    one_line_error(ranks("list", "-p", "team-b", kubeconfig=cluster.call(carol)), 7,
                   'forbidden: carol may not read project "team-b" (cannot list pods in runai-team-b)')
    # her own project still works, by name or namespace
    for p in ("team-a", A):
        r = ranks("list", "-p", p, "-o", "json", kubeconfig=alice)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert '"hvd-interactive"' in r.stdout


async def test_dashboard_says_once_that_gpu_metrics_are_forbidden(cluster: ThreadedSimCluster, tmp_path: Path) -> None:
    """dave reads team-a, not the GPU metrics (alice is granted them, as docs/ssh.md says): one line
    says what is missing and how it is granted."""
    def dave() -> Path:
        cluster.sim.add_namespace_reader("dave", [A])
        return cluster.sim.write_kubeconfig(tmp_path / "dave.kubeconfig", user="dave")

    app = make_app(cluster.call(dave), Settings())
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot_wait(pilot, lambda: "GPU metrics are forbidden to dave" in banner(app), what="the GPU metrics banner", timeout=30)
        assert banner(app).count("GPU metrics") == 1, banner(app)
        line = next(ln for ln in banner(app).splitlines() if "GPU metrics are forbidden" in ln)
        assert line.endswith("GPU metrics are forbidden to dave: HTTP 403: grant get on services, services/proxy in "
                             "Prometheus' namespace or get, list on pods, pods/proxy in the DCGM exporters' "
                             "(docs/ssh.md), or set --prometheus URL"), line
        assert isinstance(app.screen, WorkloadsScreen) and app.store.workloads  # her data is shown below


# -- item 5: names ---------------------------------------------------------------------------------


def test_a_name_unique_among_the_projects_is_found_without_p(cluster: ThreadedSimCluster) -> None:
    kc = cluster.sim.kubeconfig_path  # its context's namespace is "default"
    r = ranks("get", "hvd-interactive", kubeconfig=kc)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^Namespace:\s+runai-team-a$", r.stdout, re.M), r.stdout
    one_line_error(ranks("get", "twin", kubeconfig=kc), 2, "several projects", A, B, "-p")
    one_line_error(ranks("get", "nosuch", kubeconfig=kc), 8, 'workload "nosuch" not found')
    r = ranks("get", "mpijob/hvd-interactive", "-o", "json", kubeconfig=kc)
    assert r.returncode == 0 and '"namespace": "runai-team-a"' in r.stdout, r.stderr
    # logs find it the same way (one-shot and following)
    r = ranks("logs", "hvd-interactive", "--tail", "1", "-o", "json", kubeconfig=kc)
    # (found: its ranks are read; this cluster runs no kubelet, so their logs are not found, which is
    # an error as for any rank whose log cannot be read)
    assert r.returncode == 1 and "cannot read the logs of 2 ranks (launcher, worker-0)" in r.stderr, r.stderr
    one_line_error(ranks("logs", "twin", kubeconfig=kc), 2, "several projects", A, B, "-p")


def test_an_empty_list_says_where_it_looked_and_unknown_choices_are_refused(cluster: ThreadedSimCluster) -> None:
    """A new user's `ranks list` looks in the context's namespace (default here, where nothing
    runs), then where the dashboard looks (every project they may read), and says so; a list that
    finds nothing says where it looked; a status or a rank that cannot exist is an error."""
    kc = cluster.sim.kubeconfig_path
    r = ranks("list", kubeconfig=kc)
    assert r.returncode == 0 and r.stdout.split()[:2] == ["PROJECT", "NAME"] and "bert-crash" in r.stdout, r
    assert r.stderr.strip() == ("ranks: note: default (the context's namespace) holds no workload; looked in every "
                                "project you may read"), r.stderr
    r = ranks("list", "--status", "Suspended", kubeconfig=kc)
    assert r.returncode == 0 and r.stdout == "", r
    assert r.stderr.strip().endswith("No Suspended workloads in any project you may read."), r.stderr
    r = ranks("list", "-p", "team-b", "--status", "running", kubeconfig=kc)
    assert r.returncode == 0 and r.stderr.strip() == "No Running workloads in runai-team-b.", r
    r = ranks("list", "-A", "--status", "FAILED", kubeconfig=kc)
    assert r.returncode == 0 and "bert-crash" in r.stdout and "hvd-interactive" not in r.stdout, r
    one_line_error(ranks("list", "-A", "--status", "bogus", kubeconfig=kc), 2, "--status", "'bogus'", "'running'")
    one_line_error(ranks("logs", "hvd-interactive", "--rank", "worker-9", kubeconfig=kc), 8,
                   'no rank "worker-9" in mpijob/hvd-interactive (ranks: launcher, worker-0)')
    r = ranks("logs", "hvd-interactive", "--rank", "worker-0,worker-9", "--tail", "1", kubeconfig=kc)
    assert 'no rank "worker-9"' in r.stderr, r  # the rank that exists is read (no kubelet here: its log is not found)
    assert r.returncode == 1 and "cannot read the log of worker-0/" in r.stderr, r


def test_names_are_checked_before_any_request(cluster: ThreadedSimCluster) -> None:
    kc = cluster.sim.kubeconfig_path
    since = time.time()
    cases = [(["list", "-p", "default/pods"], "-p"), (["list", "-p", "team-a?x="], "-p"),
             (["list", "-p", "team-a,x!=y"], "-p"), (["get", "x", "-p", "runai-team-a/../b"], "-p"),
             (["get", "Foo_bar"], "WORKLOAD"), (["logs", "a/b/c"], "WORKLOAD"), (["-p", "Team A"], "-p"),
             (["exec", "x?y", "--all", "--", "true"], "WORKLOAD")]
    for args, where in cases:
        line = one_line_error(ranks(*args, kubeconfig=kc, timeout=20), 2, where)
        assert "lower-case" in line or "KIND" in line, line
    assert [r.path for r in cluster.sim.requests.since(since)] == []  # nothing was sent


async def test_dashboard_says_the_project_does_not_exist(cluster: ThreadedSimCluster, alice: Path) -> None:
    for kubeconfig, project, said in [(cluster.sim.kubeconfig_path, "nosuch", 'project "nosuch" not found'),
                                      (alice, "team-b", 'alice may not read project "team-b"')]:
        app = make_app(kubeconfig, Settings(), start_project=project)
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot_wait(pilot, lambda s=said, a=app: s in banner(a), what=f"the banner saying {said}", timeout=30)
            assert isinstance(app.screen, WorkloadsScreen) and app.screen.namespace == project
        # data already on its way when the app closed (its screens gone) is let go, not an error
        assert app.screen_stack == []
        app._data(DataArrived(DataUpdate(ModelDiff(KeyedDiff(), KeyedDiff(), KeyedDiff(), status_changed=True),
                                         DataStatus(phase="live"), synced=True)))


# -- item 10: slow and failing servers -------------------------------------------------------------


def waves(records: list[Any], latency: float) -> list[list[str]]:
    """Requests grouped by when they reached the server: one group per sequential round trip
    (concurrent requests arrive together; the next ones wait for their answers, `latency` later)."""
    out: list[list[str]] = []
    last = None
    for r in sorted(records, key=lambda r: r.at):
        if last is None or r.at - last > latency / 2:
            out.append([])
        out[-1].append(r.path + ("?" + r.query if r.query else ""))
        last = r.at
    return out


@pytest.mark.simcluster(scenario="demo", components=("dcgm",))
def test_start_up_takes_one_round_trip_before_the_list(cluster: ThreadedSimCluster) -> None:
    latency = 1.0
    kc = cluster.sim.kubeconfig_path
    cluster.call(setattr, cluster.sim.faults, "latency", latency)
    try:
        for args, lists in [(["list", "-A", "-o", "json"], "/apis/kubeflow.org/v1/pytorchjobs?limit="),
                            # (`get` reads its workload alone: its pods by their label, #31)
                            (["get", "bert-crash", "-p", "team-b"],
                             f"/namespaces/{B}/pods?labelSelector=training.kubeflow.org")]:
            since = time.time()
            r = ranks(*args, kubeconfig=kc)
            took = time.time() - since
            assert r.returncode == 0, r.stderr
            trips = waves(cluster.sim.requests.since(since), latency)
            # the latency was applied: at least the round trip before the lists and the lists' own
            assert took >= 2 * latency, took
            first_list = next(i for i, w in enumerate(trips) if any(lists in p for p in w))
            # discovery, the access check, the project and the GPU metrics source together; then
            # the LISTs; then the exporters' scrape (it was 8 round trips before: 41 s at 5 s each)
            assert first_list == 1 and len(trips) <= 3, [w[:4] for w in trips]
    finally:
        cluster.call(setattr, cluster.sim.faults, "latency", 0.0)


def test_a_server_that_keeps_failing_ends_within_the_request_timeout(cluster: ThreadedSimCluster) -> None:
    since = time.time()
    cluster.call(cluster.sim.faults.fail_next, r"/pytorchjobs$", 500, 100_000)
    # the 2 s budget ends it (retrying the 500 for ever would run into this call's limit)
    r = ranks("list", "-A", "--request-timeout", "2s", kubeconfig=cluster.sim.kubeconfig_path, timeout=180)
    one_line_error(r, 1, "injected failure (500)")
    # the server did keep failing: every list of the jobs got the injected 500
    fired = assert_fired(cluster, r"/pytorchjobs$", 500, since=since)
    assert len(fired) == len(answered(cluster, r"/pytorchjobs$", since=since)), "a list got through"


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """Accepts connections, reads what comes, never answers (a hung API server or proxy)."""
    srv = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []
    done = threading.Event()

    def serve() -> None:
        srv.settimeout(0.1)
        while not done.is_set():
            with contextlib.suppress(OSError):
                conn, _ = srv.accept()
                conns.append(conn)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        done.set()
        t.join(2)
        for c in conns:
            c.close()
        srv.close()


def kubeconfig_for(path: Path, port: int) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hung",
        "clusters": [{"name": "hung", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "contexts": [{"name": "hung", "context": {"cluster": "hung", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    return path


def test_a_server_that_never_answers_ends_at_the_request_timeout(tmp_path: Path) -> None:
    with silent_server() as port:
        # (the 1 s budget ends it, not this call's limit)
        r = ranks("list", "-A", "--request-timeout", "1s", kubeconfig=kubeconfig_for(tmp_path / "kc", port),
                  timeout=180)
    one_line_error(r, 4, f"timed out talking to http://127.0.0.1:{port}", "no answer within 1 s")


async def test_dashboard_says_it_waits_for_a_server_that_does_not_answer(tmp_path: Path) -> None:
    with silent_server() as port:
        cfg = load_cluster_config(str(kubeconfig_for(tmp_path / "kc", port)), None)
        app = make_app(cfg, Settings(), data_options=DataOptions(waiting_after=0.3))
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot_wait(pilot, lambda: "waiting for the server" in banner(app), what="the waiting banner", timeout=30)
            assert f"no answer from http://127.0.0.1:{port}" in banner(app)
            assert "waiting for the server" in plain(app.screen.query_one(Crumbs))
            assert "connecting" not in plain(app.screen.query_one(Crumbs))
            # where the rows would be, too (not "connecting" on an empty table)
            await pilot_wait(pilot, lambda: "waiting for the API server" in plain(app.screen.query_one(EmptyNote)),
                             what="the empty table's note", timeout=30)


async def test_dashboard_keeps_the_data_when_credentials_expire(cluster: ThreadedSimCluster) -> None:
    app = make_app(cluster.sim.kubeconfig_path, Settings())
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot_wait(pilot, lambda: app.store.synced and len(app.store.workloads) == 4, what="the first sync", timeout=30)
        cluster.call(cluster.sim.authz.expire, cluster.sim.admin_token)
        cluster.call(cluster.sim.store.drop_watches)  # the watches come back to a 401
        await pilot_wait(pilot, lambda: "unauthorized (401)" in banner(app), what="the 401 banner", timeout=30)
        assert "log in again or refresh the token" in banner(app)
        assert len(app.store.workloads) == 4 and app.return_code is None  # the last data stays on screen


# -- item 11: get's events, the demo's kubeconfig ------------------------------------------------------


def test_get_events_in_time_order_and_none_on_one_line(cluster: ThreadedSimCluster) -> None:
    kc = cluster.sim.kubeconfig_path
    r = ranks("get", "bert-crash", "-p", "team-b", kubeconfig=kc)
    assert r.returncode == 0, r.stderr
    events = r.stdout.split("\nEvents:\n", 1)[1].splitlines()
    assert events[0].split()[:5] == ["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"], events
    assert [ln.split()[2:4] for ln in events[1:]] == [
        ["Scheduled", "Pod/bert-crash-worker-0"], ["Started", "Pod/bert-crash-worker-0"],
        ["Started", "Pod/bert-crash-master-0"], ["Failed", "PyTorchJob/bert-crash"]], events
    r = ranks("get", "hvd-interactive", "-p", "team-a", kubeconfig=kc)
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip().endswith("\n\nEvents:  <none>"), r.stdout


def test_the_demo_leaves_no_kubeconfig_behind(tmp_path: Path) -> None:
    from tui.cli.dashboard import demo_cluster

    with demo_cluster(tmp_path, prometheus=False) as (kubeconfig, _url):
        assert kubeconfig == tmp_path / "kubeconfig" and kubeconfig.exists()
    assert not (tmp_path / "kubeconfig").exists()


# -- helpers ----------------------------------------------------------------------------------------


def plain(widget: Any) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def banner(app: RanksApp) -> str:
    b = app.screen.query(Banner)
    return plain(b.first()) if b and b.first().has_class("-shown") else ""


