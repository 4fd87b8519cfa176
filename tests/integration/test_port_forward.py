"""`ranks port-forward` and `ranks submit --port/--jupyter` against simcluster (#29): a session's
Jupyter (the image's stand-in, on its pod's own address) reached through ranks and through a real
kubectl, followed across a deleted pod, and each way it cannot start said in one line with its
exit code.

One cluster serves the module: team-a's session `nb` (submitted with `ranks submit --interactive
--jupyter --port 7000:metrics`), team-b's `other`; alice may use team-a only."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitors import api_paths
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.conftest import Kubectl
from tests.integration.test_shell_exec_convert import api_delete, clean_env, pods_of
from tests.waiting import one_line_error, wait_for

ROOT = Path(__file__).resolve().parents[2]
RANKS = [sys.executable, "-m", "tui.cli"]
A, B = "runai-team-a", "runai-team-b"
IMAGE = "nvcr.io/nvidia/pytorch:24.10-py3"


def setup(sim: Any) -> None:
    for node in gpu_nodes(2, 4, pool="main", prefix="main-node"):
        sim.apply(node)
    sim.apply(namespace(A, {"runai/queue": "team-a"}))
    sim.apply(namespace(B, {"runai/queue": "team-b"}))
    sim.add_namespace_reader("alice", [A], write=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="empty", components=("operators", "scheduler", "kubelet", "exec"),
                       workdir=tmp_path_factory.mktemp("ports")) as t:
        t.call(setup, t.sim)
        yield t


@pytest.fixture(scope="module")
def env(cluster: ThreadedSimCluster) -> dict[str, str]:
    return clean_env(cluster.sim.workdir / "home", Path(cluster.sim.kubeconfig_path))


def ranks(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RANKS, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL)


def ready_pod(t: ThreadedSimCluster, ns: str, job: str) -> dict[str, Any] | None:
    for p in pods_of_ns(t, ns, job).values():
        conds = (p.get("status") or {}).get("conditions") or ()
        if not p["metadata"].get("deletionTimestamp") and any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in conds):
            return p
    return None


def pods_of_ns(t: ThreadedSimCluster, ns: str, job: str) -> dict[str, dict[str, Any]]:
    return pods_of(t, job) if ns == A else t.call(lambda: {
        p["metadata"]["name"]: p for p in t.sim.store.objects(("", "pods"), ns)
        if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-name") == job})


@pytest.fixture(scope="module")
def sessions(cluster: ThreadedSimCluster, env: dict[str, str]) -> str:
    """`nb` in team-a (Jupyter and a declared port 7000) and `other` in team-b, Running and serving:
    nb's output of `ranks submit`."""
    r = ranks(env, "submit", "nb", "--framework", "pytorch", "--workers", "0", "-i", IMAGE, "--interactive",
              "--jupyter", "--port", "7000:metrics", "-p", "team-a")
    assert r.returncode == 0, r.stderr
    r2 = ranks(env, "submit", "other", "--framework", "pytorch", "--workers", "0", "-i", IMAGE, "--interactive",
               "--jupyter", "-p", "team-b")
    assert r2.returncode == 0, r2.stderr
    for ns, job in ((A, "nb"), (B, "other")):
        pod = wait_for(lambda ns=ns, job=job: ready_pod(cluster, ns, job), timeout=60, what=f"{job} Ready")
        wait_for(lambda pod=pod: _listens(pod["status"]["podIP"], 8888), timeout=30, what=f"{job}'s Jupyter")
    return r.stdout


def _listens(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=2):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(port: int, path: str = "/") -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode(errors="replace")
    finally:
        conn.close()


def page(port: int) -> str | None:
    """The notebook's page through the forward (its login page, as Jupyter answers without a token)."""
    try:
        status, body = http_get(port, "/login")
    except OSError:
        return None
    return body if status == 200 and "Jupyter" in body else None


class Forward:
    """A running `ranks port-forward`, its stdout and stderr read as they come."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen([*RANKS, "port-forward", *args], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, sink in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, sink), daemon=True).start()

    @staticmethod
    def _read(stream: Any, sink: list[str]) -> None:
        for line in stream:
            sink.append(line.rstrip("\n"))

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def test_submit_declares_the_ports_and_says_how_to_reach_them(cluster: ThreadedSimCluster, sessions: str) -> None:
    assert "its ports: ranks port-forward nb -p team-a 7000:7000 8888:8888" in sessions
    pod = ready_pod(cluster, A, "nb")
    assert pod is not None
    ports = pod["spec"]["containers"][0]["ports"]
    declared = [(p["containerPort"], p.get("name")) for p in ports]
    assert declared[:2] == [(7000, "metrics"), (8888, "jupyter")]  # (then the operator's 23456)


def test_port_forward_serves_the_page_and_follows_a_replaced_pod(cluster: ThreadedSimCluster, env: dict[str, str],
                                                                 sessions: str) -> None:
    local = free_port()
    fwd = Forward(env, "nb", "-p", "team-a", f"{local}:8888", "--address", "127.0.0.1")
    try:
        wait_for(lambda: fwd.out, timeout=60, what="the forward's first line", detail=lambda: fwd.err)
        assert fwd.out[0] == f"Forwarding from 127.0.0.1:{local} -> 8888", (fwd.out, fwd.err)
        assert "Jupyter" in wait_for(lambda: page(local), timeout=30, what="the page through the forward")
        assert f"Handling connection for {local}" in fwd.out
        old = ready_pod(cluster, A, "nb")
        assert old is not None
        api_delete(cluster, api_paths.pod(A, old["metadata"]["name"]))  # (as kubectl delete pod)
        new = wait_for(lambda: (p := ready_pod(cluster, A, "nb")) and p["metadata"]["uid"] != old["metadata"]["uid"]
                       and p, timeout=90, what="the new pod Ready")
        assert new
        assert "Jupyter" in wait_for(lambda: page(local), timeout=30, what="the page again, from the new pod")
        notes = [ln for ln in fwd.err if "was replaced" in ln]
        assert len(notes) == 1, fwd.err
        assert fwd.proc.poll() is None
    finally:
        code = fwd.stop()
    assert code == 130, (code, fwd.err)


def test_kubectl_port_forward_reaches_the_same_server(kubectl_bin: Path, cluster: ThreadedSimCluster,
                                                      sessions: str) -> None:
    pod = ready_pod(cluster, A, "nb")
    assert pod is not None
    local = free_port()
    kubectl = Kubectl(kubectl_bin, Path(cluster.sim.kubeconfig_path))
    proc = kubectl.popen("port-forward", "-n", A, f"pod/{pod['metadata']['name']}", f"{local}:8888")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"Forwarding from 127.0.0.1:{local} -> 8888"
        assert "Jupyter" in wait_for(lambda: page(local), timeout=30, what="the page through kubectl")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_what_stops_a_forward_is_one_line(cluster: ThreadedSimCluster, env: dict[str, str], sessions: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = ranks(env, "port-forward", "nb", "-p", "team-a", f"{port}:8888", "--address", "127.0.0.1")
        one_line_error(r, 1, f"unable to listen on 127.0.0.1:{port}", "in use")
    r = ranks(env, "port-forward", "nb", "-p", "team-a", f"{free_port()}:9999")
    one_line_error(r, 1, "nothing listens on port 9999 in nb-master-0")
    r = ranks(env, "--context", "ranks-sim-alice", "port-forward", "other", "-p", "team-b", "8888")
    one_line_error(r, 7, "forbidden")
    r = ranks(env, "--read-only", "port-forward", "nb", "-p", "team-a", "8888")
    one_line_error(r, 2, "read-only")
    r = ranks(env, "port-forward", "nb", "-p", "team-a", "88888")
    one_line_error(r, 2, "88888")
    r = ranks(env, "port-forward", "nb", "-p", "team-a", "--rank", "worker-7", "8888")
    one_line_error(r, 8, "worker-7")
    assert os.environ.get("KUBECONFIG") != env["KUBECONFIG"]  # (the tests' own never touched)


def admin_call(t: ThreadedSimCluster, fn: Any) -> Any:
    """`fn(cfg, client)` (a coroutine function) with the cluster admin's client, on a loop of its own."""
    import asyncio

    from monitors.connection import load_cluster_config
    from monitors.kube import KubeClient

    cfg = load_cluster_config(str(t.sim.kubeconfig_path), None)

    async def body() -> Any:
        async with KubeClient(cfg) as client:
            return await fn(cfg, client)

    return asyncio.run(body())


def test_a_ranks_ports_are_read_in_its_pod(cluster: ThreadedSimCluster, sessions: str) -> None:
    from sessions.ports import rank_ports

    pod = ready_pod(cluster, A, "nb")
    assert pod is not None
    rows = admin_call(cluster, lambda cfg, client: rank_ports(client, A, pod, "master-0"))
    by_port = {r.port: r for r in rows}
    assert by_port[8888].listening and by_port[8888].kind == "Jupyter" and by_port[8888].declared == "jupyter"
    assert "jupyter lab" in by_port[8888].command and by_port[8888].address == pod["status"]["podIP"]
    assert not by_port[7000].listening and by_port[7000].declared == "metrics"  # declared, nothing there yet
    assert by_port[23456].declared == "pytorchjob-port"


def test_the_dashboards_forward_gives_jupyters_url_with_its_token(cluster: ThreadedSimCluster,
                                                                  sessions: str) -> None:
    from sessions.ports import ForwardSet

    pod = ready_pod(cluster, A, "nb")
    assert pod is not None

    async def go(cfg: Any, client: Any) -> tuple[str, int, str]:
        import asyncio

        forwards = ForwardSet()
        try:
            item = await forwards.start(cfg, client, workload="nb", namespace=A, label="master-0",
                                        pod=pod["metadata"]["name"], port=8888, kind="Jupyter")
            again = await forwards.start(cfg, client, workload="nb", namespace=A, label="master-0",
                                         pod=pod["metadata"]["name"], port=8888, kind="Jupyter")
            assert again.id == item.id  # (one forward per port)
            path = item.url.split(str(item.local), 1)[1]
            status, body = await asyncio.to_thread(http_get, item.local, path)
            return item.url, status, body
        finally:
            await forwards.close()

    url, status, body = admin_call(cluster, go)
    assert "/?token=" in url and url.startswith("http://127.0.0.1:"), url
    assert status == 200 and "notebook server in" in body, (status, body)  # past the login: the token works


def test_a_dashboard_forward_to_jupyter_gets_the_new_pods_token(cluster: ThreadedSimCluster, sessions: str) -> None:
    """The Jupyter of a replaced pod has a token of its own: the forward's URL takes it (the old one
    only reaches the login page) and a note says so."""
    from sessions.ports import ForwardSet

    old = wait_for(lambda: ready_pod(cluster, A, "nb"), timeout=90, what="nb Ready")

    async def go(cfg: Any, client: Any) -> tuple[str, str, list[str], tuple[int, str]]:
        import asyncio

        forwards = ForwardSet()
        try:
            item = await forwards.start(cfg, client, workload="nb", namespace=A, label="master-0",
                                        pod=old["metadata"]["name"], port=8888, kind="Jupyter")
            first = item.url
            await asyncio.to_thread(api_delete, cluster, api_paths.pod(A, old["metadata"]["name"]))
            for _ in range(900):  # (the new pod Ready, its Jupyter up: 90 s at most)
                if item.url != first:
                    break
                await asyncio.sleep(0.1)
            path = item.url.split(str(item.local), 1)[1]
            got = await asyncio.to_thread(http_get, item.local, path)
            return first, item.url, list(item.notes), got
        finally:
            await forwards.close()

    first, url, notes, (status, body) = admin_call(cluster, go)
    assert "?token=" in first and "?token=" in url and url != first, (first, url, notes)
    assert url.split("?")[0] == first.split("?")[0]  # (the same local port)
    assert status == 200 and "notebook server in" in body, (status, body)  # the new token works
    assert notes[-1] == f"Jupyter's token changed with the new pod: {url}", notes
    assert any("(the pod was replaced)" in n for n in notes), notes


async def open_ports_view(app: Any, pilot: Any, project: str, name: str) -> Any:
    """The Ports view of `name`, opened from the command palette ("Ports PROJECT/NAME"), its ports read."""
    from rich.text import Text
    from textual.command import CommandList, CommandPalette
    from textual.widgets import Static

    from tests.dashboard_kit import type_text, wait_screen
    from tests.waiting import pilot_wait
    from tui.screens.ports import PortsScreen

    await pilot_wait(pilot, lambda: (A, "PyTorchJob", name) in app.store.workloads, what=f"{name} in the model",
                     timeout=30)
    await pilot.press("colon")  # (the palette's "Ports PROJECT/NAME" opens the view from anywhere)
    palette = await wait_screen(pilot, CommandPalette)
    await type_text(pilot, f"Ports {project}/{name}")
    hits = palette.query_one(CommandList)
    await pilot_wait(pilot, lambda: hits.option_count >= 1 and "Ports" in str(hits.get_option_at_index(0).prompt),
                     what="the palette's Ports hit", timeout=30)
    await pilot.press("enter")
    if isinstance(app.screen, CommandPalette):  # (the first Enter may only highlight)
        await pilot.press("enter")
    screen = await wait_screen(pilot, PortsScreen)

    def state() -> str:
        found = screen.query("#ports-state")
        content = found[0].content if found and isinstance(found[0], Static) else ""
        return content.plain if isinstance(content, Text) else str(content)

    await pilot_wait(pilot, lambda: "port(s) of" in state(), what="the ports read", timeout=60)
    return screen, state


async def test_the_ports_view_forwards_and_stops_from_its_list(cluster: ThreadedSimCluster, sessions: str) -> None:
    from tests.dashboard_kit import make_app
    from tests.waiting import pilot_wait
    from tui.widgets.keyed_table import KeyedTable

    app = make_app(cluster.sim.kubeconfig_path, metrics=False)
    async with app.run_test(size=(120, 36)) as pilot:
        screen, state = await open_ports_view(app, pilot, "team-a", "nb")
        await pilot.press("down")  # (master-0's 7000, then its 8888)
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: "forwarded: open http://127.0.0.1:" in state(), what="the URL", timeout=30)
        url = state().split("open ", 1)[1].strip()
        local = int(url.split(":")[2].split("/")[0])
        assert "Jupyter" in (page(local) or "")
        forwards = screen.query_one("#forwards", KeyedTable)
        assert forwards.row_count == 1
        await pilot.press("tab")
        await pilot_wait(pilot, lambda: forwards.has_focus, what="the list of forwards focused", timeout=10)
        await pilot.press("ctrl+d")
        await pilot_wait(pilot, lambda: forwards.row_count == 0 and "forward stopped" in state(),
                         what="the forward stopped", timeout=30)
        assert page(local) is None


async def test_the_ports_view_says_what_became_of_a_forward_to_a_port_nothing_listens_on(
        cluster: ThreadedSimCluster, sessions: str) -> None:
    """nb declares 7000 and nothing listens there: Enter forwards it and says so; a connection to its
    URL ends at once, and the view says why (the pod's refusal, from the forward's notes) and counts
    it, with no key pressed."""
    from tests.dashboard_kit import make_app
    from tests.waiting import pilot_wait
    from tui.widgets.keyed_table import KeyedTable

    app = make_app(cluster.sim.kubeconfig_path, metrics=False)
    async with app.run_test(size=(120, 36)) as pilot:
        screen, state = await open_ports_view(app, pilot, "team-a", "nb")
        ports = screen.query_one("#ports", KeyedTable)
        assert ports.cursor_key == ("master-0", 7000), ports.cursor_key
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: "forwarded: open http://127.0.0.1:" in state(), what="the URL", timeout=30)
        assert "(nothing listened on 7000 in its pod when read: it answers once something does)" in state()
        local = int(state().split("open ", 1)[1].split(":")[2].split("/")[0])
        assert page(local) is None  # (the connection ends: nothing answers in the pod)
        await pilot_wait(pilot, lambda: "nb master-0:7000: a connection was refused in the pod: nothing listens on "
                         "7000 there" in state(), what="the refusal said", timeout=30)
        forwards = screen.query_one("#forwards", KeyedTable)
        assert forwards.row_count == 1
        assert [f.connections for f in screen.forwarded] == [1]  # (counted without a key: the list is read again)
        # the note is said once: after ctrl+r's words, the next reading of the forwards leaves them
        await pilot.press("ctrl+r")
        await pilot_wait(pilot, lambda: "port(s) of" in state(), what="the ports read again", timeout=60)
        before = screen.forwarded
        await pilot_wait(pilot, lambda: screen.forwarded is not before, what="the forwards read again", timeout=30)
        assert "port(s) of" in state() and "refused" not in state(), state()


async def test_over_the_ssh_door_the_ports_view_gives_the_line_to_paste(
        cluster: ThreadedSimCluster, sessions: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the door the dashboard's machine is the server: Enter starts nothing there and shows the
    `ssh -L` line for the user's own machine."""
    from sessions.ssh import SSH_SESSION_ENV
    from tests.dashboard_kit import make_app
    from tests.waiting import pilot_wait
    from tui.screens.ports import forwards_of

    monkeypatch.setenv(SSH_SESSION_ENV, "1")
    app = make_app(cluster.sim.kubeconfig_path, metrics=False)
    async with app.run_test(size=(120, 36)) as pilot:
        _screen, state = await open_ports_view(app, pilot, "team-a", "nb")
        assert "the ssh -L line" in state()
        await pilot.press("down")  # (master-0's 7000, then its 8888)
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: "ssh -N -L" in state(), what="the line to paste", timeout=30)
        assert "ssh -N -L 8888:master-0.nb.team-a:8888 <this server>" in state(), state()
        assert forwards_of(app.data).rows() == []  # nothing listens on the server


async def test_p_on_the_workloads_list_opens_the_ports_of_the_row(cluster: ThreadedSimCluster, sessions: str) -> None:
    """`P` where `s` opens a shell: the list's selected workload's ports (as from its detail)."""
    from tests.dashboard_kit import make_app, move_to, wait_screen
    from tests.waiting import pilot_wait
    from tui.screens.lists import WorkloadsScreen
    from tui.screens.ports import PortsScreen

    app = make_app(cluster.sim.kubeconfig_path, metrics=False)
    key = (A, "PyTorchJob", "nb")
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and key in app.screen.table.order,
                         what="nb in the list", timeout=60)
        assert isinstance(app.screen, WorkloadsScreen)
        await move_to(pilot, app.screen.table, key)
        await pilot.press("P")
        screen = await wait_screen(pilot, PortsScreen)
        assert screen.wl.key == key
