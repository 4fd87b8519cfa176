"""The SSH door's one watch (issue #31): `ranks serve --ssh` lists and watches the cluster once, as
its own identity, and each session sees what the API server's RBAC lets its user read, decided by
SubjectAccessReviews (simcluster's RBAC objects: Roles, RoleBindings, ClusterRoleBindings).

One simcluster for the module (API objects only): teams a, b, c and `other`, one PyTorchJob each
with its pod. Who may read what (RBAC objects unless said):
- alice: a RoleBinding in team-a and one in team-b (the ClusterRole `ml-reader`);
- bob: through his group `team-c-devs` (a RoleBinding of the group in team-c);
- carol: in no group, no binding: nothing;
- dave: a Role in team-a on pytorchjobs alone: the job, not its pods;
- erin: a ClusterRoleBinding: every namespace.

The first test drives the door's hub in process (its SharedViews through socket pairs, as each
session's process has them) and tries the filter hard; the second runs 20 real OpenSSH sessions
and counts the API server's LISTs and WATCHes from simcluster's request log."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import pty
import select
import shlex
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as kclient
from kubernetes import config as kconfig

from simcluster.apiserver.auth import Rule
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.e2e.test_demo_tmux import clean_env
from tests.integration.test_ssh_serve import CONTEXT, env, keygen, ssh_binary
from tests.kubeflow_objects import job, pod
from tests.tmux_driver import Tmux
from tests.waiting import until, wait_for

ROOT = Path(__file__).resolve().parents[2]
TEAMS = {"team-a": "alpha-train", "team-b": "bravo-train", "team-c": "charlie-train", "other": "other-train"}
RBAC = "rbac.authorization.k8s.io"


def binding(name: str, ns: str | None, role: tuple[str, str], subject: tuple[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name} | ({"namespace": ns} if ns else {})
    return {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding" if ns else "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": RBAC, "kind": role[0], "name": role[1]},
            "subjects": [{"kind": subject[0], "name": subject[1], "apiGroup": RBAC}]}


def populate(sim: Any) -> None:
    for ns, name in TEAMS.items():
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        sim.apply(job("PyTorchJob", name, ns, {"Master": 1}))
        sim.apply(pod("PyTorchJob", name, ns, "Master", 0))
    # a pod waiting for a node: its scheduler message is read once, by the door, for every session
    sim.apply(pod("PyTorchJob", "charlie-train", "team-c", "Worker", 0, phase="Pending",
              unschedulable="0/4 nodes are available"))
    sim.apply({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": {"name": "ml-reader"},
               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]})
    sim.apply({"apiVersion": f"{RBAC}/v1", "kind": "Role", "metadata": {"name": "jobs-only", "namespace": "team-a"},
               "rules": [{"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["list", "watch"]}]})
    sim.apply(binding("alice-a", "team-a", ("ClusterRole", "ml-reader"), ("User", "alice")))
    sim.apply(binding("alice-b", "team-b", ("ClusterRole", "ml-reader"), ("User", "alice")))
    sim.apply(binding("devs-c", "team-c", ("ClusterRole", "ml-reader"), ("Group", "team-c-devs")))
    sim.apply(binding("dave-jobs", "team-a", ("Role", "jobs-only"), ("User", "dave")))
    sim.apply(binding("erin-all", None, ("ClusterRole", "ml-reader"), ("User", "erin")))


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(workdir=tmp_path_factory.mktemp("sim"), components=()) as t:
        t.call(populate, t.sim)
        yield t


def rbac_api(sim: ThreadedSimCluster) -> kclient.RbacAuthorizationV1Api:
    return kclient.RbacAuthorizationV1Api(kconfig.new_client_from_config(config_file=str(sim.sim.kubeconfig_path)))


# -- the filter, in process -----------------------------------------------------------------------------
def test_each_user_sees_what_the_api_server_lets_them_list_and_no_more(sim: ThreadedSimCluster) -> None:
    from monitors.connection import load_cluster_config
    from monitors.monitor import Monitor
    from monitors.shared_view import SharedView
    from sessions.ssh import hub as hub_module

    rbac = rbac_api(sim)

    def namespaces(view: SharedView, stream: tuple[str, str]) -> set[str]:
        return {k[0] for k in view.caches.get(stream, {})}

    pods, jobs = ("", "pods"), ("kubeflow.org", "pytorchjobs")

    async def main() -> None:
        hub = await hub_module.start_hub(str(sim.sim.kubeconfig_path), CONTEXT)
        try:
            views: dict[str, SharedView] = {}
            for user, groups in (("alice", ()), ("bob", ("team-c-devs",)), ("carol", ()), ("dave", ()),
                                 ("erin", ()), ("bob-alone", ())):
                name = "bob" if user == "bob-alone" else user  # (bob without his group)
                views[user] = SharedView(hub.session_end(name, groups))
                views[user].start()
            await asyncio.wait_for(asyncio.gather(*(v.synced.wait() for v in views.values())), 60)
            assert namespaces(views["alice"], pods) == namespaces(views["alice"], jobs) == {"team-a", "team-b"}
            assert not views["alice"].cluster_wide and views["alice"].namespaces == ("team-a", "team-b")
            assert ("", "nodes") in views["alice"].forbidden
            assert namespaces(views["bob"], pods) == namespaces(views["bob"], jobs) == {"team-c"}
            assert namespaces(views["bob-alone"], pods) == namespaces(views["carol"], jobs) == set()
            assert namespaces(views["carol"], pods) == set() and not views["carol"].cluster_wide
            assert namespaces(views["dave"], jobs) == {"team-a"} and namespaces(views["dave"], pods) == set()
            assert namespaces(views["erin"], pods) == set(TEAMS) and views["erin"].cluster_wide
            waiting = views["bob"].caches[pods][("team-c", "charlie-train-worker-0")]
            assert not waiting.partial and "0/4 nodes are available" in waiting.unschedulable
            assert ("", "nodes") not in views["erin"].forbidden
            # (every record a user holds is one the API server would have listed for them)
            assert all(k[0] in ("team-a", "team-b") for s in views["alice"].caches for k in views["alice"].caches[s]
                       if s not in (("", "namespaces"), ("", "nodes")))

            # a dashboard's monitor over alice's view: her teams' workloads, no LIST of its own; a
            # node's pods read whole in the namespaces she may read
            cfg = load_cluster_config(str(sim.sim.kubeconfig_path), CONTEXT, impersonate_user="alice")
            mon = Monitor(cfg, pod_rows=True, shared=SharedView(hub.session_end("alice", ())))
            since = time.time()
            await mon.start()
            await mon.wait_synced(60)
            try:
                assert {w.namespace for w in mon.model.workloads.values()} == {"team-a", "team-b"}
                assert mon.model.pods[("team-a", "alpha-train-master-0")].partial
                await mon.load_node_pods("node-1")
                assert not mon.model.pods[("team-a", "alpha-train-master-0")].partial
                assert not mon.model.pods[("team-b", "bravo-train-master-0")].partial
                mine = [r for r in sim.call(sim.sim.requests.since, since) if r.user == "alice"]
                assert [r.path for r in mine if r.verb == "watch" or (r.verb == "list" and not r.field_selector)] == []
            except BaseException:
                await mon.stop()
                raise

            # alice's RoleBinding in team-b deleted: her view of team-b goes (the RBAC watch: no
            # periodic recheck comes within this test's waits)
            hub.reviews.recheck = 3600.0
            await asyncio.to_thread(rbac.delete_namespaced_role_binding, "alice-b", "team-b")
            await until(lambda: namespaces(views["alice"], pods) == {"team-a"}
                        and namespaces(views["alice"], jobs) == {"team-a"}, what="alice's team-b view to go", timeout=60)
            assert views["alice"].namespaces == ("team-a",)
            # and from her dashboard's model and status
            await until(lambda: {w.namespace for w in mon.model.workloads.values()} == {"team-a"}
                        and mon.status.namespaces == ("team-a",), what="team-b gone from her dashboard's model", timeout=60)
            await mon.stop()
            # a change in team-b is not sent to her any more, one in team-a is
            sim.call(sim.sim.apply, pod("PyTorchJob", "bravo-train", "team-b", "Master", 1))
            sim.call(sim.sim.apply, pod("PyTorchJob", "alpha-train", "team-a", "Master", 1))
            await until(lambda: ("team-a", "alpha-train-master-1") in views["alice"].caches[pods], what="team-a's pod", timeout=60)
            await until(lambda: ("team-b", "bravo-train-master-1") in views["erin"].caches[pods], what="erin's", timeout=60)
            assert namespaces(views["alice"], pods) == {"team-a"}
            # and back
            await asyncio.to_thread(rbac.create_namespaced_role_binding, "team-b",
                                    binding("alice-b", "team-b", ("ClusterRole", "ml-reader"), ("User", "alice")))
            await until(lambda: ("team-b", "bravo-train-master-1") in views["alice"].caches[pods], what="team-b back", timeout=60)
            # a namespace created after login, then alice given it: its job reaches her; not bob
            sim.call(sim.sim.apply, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-d"}})
            sim.call(sim.sim.apply, job("PyTorchJob", "delta-train", "team-d", {"Master": 1}))
            await until(lambda: ("team-d", "PyTorchJob", "delta-train") in views["erin"].caches[jobs], what="erin's", timeout=60)
            assert "team-d" not in namespaces(views["alice"], jobs)
            await asyncio.to_thread(rbac.create_namespaced_role_binding, "team-d",
                                    binding("alice-d", "team-d", ("ClusterRole", "ml-reader"), ("User", "alice")))
            await until(lambda: "team-d" in namespaces(views["alice"], jobs), what="team-d to reach alice", timeout=60)
            assert namespaces(views["bob"], jobs) == {"team-c"} and namespaces(views["carol"], jobs) == set()
            # a grant the RBAC watch cannot see (simcluster's in-memory rules): found by the recheck
            hub.reviews.recheck = 1.0
            sim.call(sim.sim.authz.bind, "user:carol", Rule.of(("list",), namespaces=["other"]))
            await until(lambda: namespaces(views["carol"], jobs) == {"other"}, what="carol's grant to be rechecked", timeout=60)
            assert namespaces(views["carol"], pods) == {"other"}
            # reviews that cannot be asked (the API server failing them) keep the answers they had
            before = {u: (namespaces(v, pods), namespaces(v, jobs)) for u, v in views.items()}
            sim.call(sim.sim.faults.fail_next, "subjectaccessreviews", 500, 10_000)
            asked, kept = hub.reviews.asked, sum(len(a) for a in hub.reviews.answers.values())
            await until(lambda: hub.reviews.asked >= asked + kept, what="every answer asked again (the tick)", timeout=60)
            await hub.recheck()  # (and once more, its changes applied before the look below)
            assert {u: (namespaces(v, pods), namespaces(v, jobs)) for u, v in views.items()} == before
            sim.call(sim.sim.faults.clear)
            # a session that goes is forgotten; the others go on
            views["dave"].sock.close()
            await until(lambda: ("dave", ("system:authenticated",)) not in hub.audiences, what="dave's audience to go", timeout=60)
        finally:
            await hub.stop()

    asyncio.run(main())


def test_a_server_identity_that_may_not_watch_stops_in_one_line_unless_per_user_watch(
        sim: ThreadedSimCluster, tmp_path: Path) -> None:
    """The one watch needs `create subjectaccessreviews` and list/watch: without them, one line and
    exit 3 before `ready`; `--per-user-watch` needs impersonation alone."""
    sim.call(sim.sim.add_user, "impersonator-only",
             rules=(Rule.of(["impersonate"], ["users", "groups", "serviceaccounts"], [""]),))
    sim.call(sim.sim.write_kubeconfig)
    d = tmp_path / "ssh"
    d.mkdir(mode=0o700)
    keygen(d / "host")
    keygen(d / "me")
    args = [sys.executable, "-m", "tui.cli", "serve", "--ssh", "127.0.0.1:0", "--host-key", str(d / "host"),
            "--authorized-keys", str(d / "me.pub"), "--kubeconfig", str(sim.sim.kubeconfig_path),
            "--context", "ranks-sim-impersonator-only"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=ROOT, env=env(), stdin=subprocess.DEVNULL)
    assert r.returncode == 3 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("ranks: error: ") \
        and "subjectaccessreviews" in r.stderr and "--per-user-watch" in r.stderr, r.stderr
    proc = subprocess.Popen([*args, "--per-user-watch"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env(), stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready and proc.stdout.readline().startswith("ready: ssh=127.0.0.1:")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


# -- 20 real OpenSSH sessions ------------------------------------------------------------------------------
class RawSession:
    """`ssh -tt` on a pty of our own (no tmux): its output drained by a thread, kept in part."""

    def __init__(self, argv: list[str], environ: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 110, 0, 0))
        self.master = master
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=environ,
                                     start_new_session=True)
        os.close(slave)
        self.seen = bytearray()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.master], [], [], 1.0)
                if ready:
                    data = os.read(self.master, 65536)
                    if not data:
                        return
                    self.seen += data
                    del self.seen[:-200_000]
                elif self.proc.poll() is not None:
                    return
            except OSError:
                return

    def shows(self, text: str) -> bool:
        return text.encode() in self.seen

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.thread.join(5)
        with contextlib.suppress(OSError):
            os.close(self.master)


WATCHED = {"pods", "events", "resourcequotas", "namespaces", "nodes", "pytorchjobs", "tfjobs", "mpijobs",
           "xgboostjobs", "jaxjobs", "paddlejobs", "trainjobs", "jobsets", "distributedworkloads", "jobs"}


def lists_and_watches(sim: ThreadedSimCluster, since: float, until: float) -> dict[str, int]:
    """user -> the LISTs and WATCHes of what the dashboard watches, between two times."""
    out: dict[str, int] = {}
    for r in sim.call(sim.sim.requests.since, since):
        if r.at <= until and r.verb in ("list", "watch") and r.resource in WATCHED:
            out[r.user] = out.get(r.user, 0) + 1
    return out


def test_twenty_openssh_sessions_cost_the_api_server_no_list_or_watch_and_see_their_own(
        sim: ThreadedSimCluster, tmp_path: Path) -> None:
    ssh_binary()
    d = tmp_path / "ssh"
    d.mkdir(mode=0o700)
    keygen(d / "host")
    fingerprints = {user: keygen(d / user) for user in ("alice", "bob")}
    keys = d / "authorized"
    keys.mkdir(mode=0o700)
    for user in fingerprints:
        (keys / user).write_text((d / f"{user}.pub").read_text())
        (keys / user).chmod(0o600)
    users = d / "users.yaml"
    users.write_text(f"{fingerprints['alice']}: {{user: alice}}\n"
                     f"{fingerprints['bob']}: {{user: bob, groups: [team-c-devs]}}\n")
    users.chmod(0o600)
    err = tmp_path / "serve.err"
    with open(err, "w") as fh:
        server = subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "serve", "--ssh", "127.0.0.1:0", "--host-key", str(d / "host"),
             "--authorized-keys", str(keys), "--users", str(users), "--max-sessions", "30",
             "--max-sessions-per-user", "15", "--kubeconfig", str(sim.sim.kubeconfig_path), "--context", CONTEXT,
             "--prometheus", "http://127.0.0.1:9"],
            stdout=subprocess.PIPE, stderr=fh, text=True, cwd=ROOT, stdin=subprocess.DEVNULL, env=env())
    screens: list[Tmux] = []
    raw: list[RawSession] = []
    try:
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], 60)
        line = server.stdout.readline() if ready else ""
        assert line.startswith("ready: ssh=127.0.0.1:"), (line, err.read_text())
        port = int(line.strip().rsplit(":", 1)[1])

        def argv(user: str) -> list[str]:
            return [ssh_binary(), "-tt", "-F", "/dev/null", "-o", "StrictHostKeyChecking=no", "-o",
                    "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o",
                    "IdentitiesOnly=yes", "-i", str(d / user), "-p", str(port), "127.0.0.1"]

        def screen(user: str) -> Tmux:
            tmux = Tmux(clean_env(tmp_path), 110, 30, name=f"ranks-one-watch-{user}")
            screens.append(tmux)
            tmux.start(" ".join(shlex.quote(a) for a in argv(user)), tmp_path)
            return tmux

        # the first group: one session (alice's)
        t0 = time.time()
        alice = screen("alice")
        alice.wait_for(lambda s: "alpha-train" in s and "bravo-train" in s, timeout=60, why="alice's two teams")
        t1 = time.time()
        # the second group: nineteen more (bob's on a screen, nine of alice's, nine of bob's)
        bob = screen("bob")
        for i in range(18):
            raw.append(RawSession(argv("alice" if i % 2 else "bob"), clean_env(tmp_path)))
        bob.wait_for("charlie-train", timeout=90, why="bob's team")
        wait_for(lambda: all(r.shows("alpha-train" if i % 2 else "charlie-train") for i, r in enumerate(raw)),
                 timeout=120, what="every session's first picture",
                 detail=lambda: [i for i, r in enumerate(raw) if not r.shows("alpha-train" if i % 2 else "charlie")])
        t2 = time.time()
        first, second = lists_and_watches(sim, t0, t1), lists_and_watches(sim, t1, t2)
        print(f"LISTs and WATCHes: 1 session: {first}; 19 more: {second}")
        # no user's own LIST or WATCH, however many sessions; the door's own are not more for 20
        assert {u for u in (*first, *second) if u != "ranks-ssh"} == set(), (first, second)
        # nor a read of the pod waiting for a node (its scheduler message came with the door's view)
        assert [r.path for r in sim.call(sim.sim.requests.since, t0)
                if r.at <= t2 and r.path.endswith("/charlie-train-worker-0") and r.user == "bob"] == []
        assert second.get("ranks-ssh", 0) <= first.get("ranks-ssh", 0), (first, second)
        for i, r in enumerate(raw):  # each saw its own, and nothing of the other's teams
            mine, theirs = (("alpha-train", "bravo-train"), ("charlie-train",)) if i % 2 else \
                (("charlie-train",), ("alpha-train", "bravo-train"))
            assert all(r.shows(m) for m in mine) and not any(r.shows(t) for t in (*theirs, "other-train")), i
        assert "alpha-train" not in bob.screen() and "other-train" not in bob.screen()
        # alice's RoleBinding in team-b deleted: her view of it goes within 60 s
        rbac_api(sim).delete_namespaced_role_binding("alice-b", "team-b")
        alice.wait_for(lambda s: "bravo-train" not in s and "alpha-train" in s, timeout=60,
                       why="team-b gone from alice's dashboard")
        assert "charlie-train" in bob.screen()
    finally:
        for r in raw:
            r.close()
        for t in screens:
            t.kill()
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
