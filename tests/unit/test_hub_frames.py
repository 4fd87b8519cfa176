"""The SSH door's one watch pickles what it sends once for every session shown the same thing
(`sessions.ssh.hub`, issue #31's figures: a first frame with 200 sessions open): a namespace's
records of a kind are pickled once for every first picture until one of them changes, and a batch
of changes once for every identity that may see the same namespaces of it. Each session still gets
exactly what its user may see."""

from __future__ import annotations

import asyncio
import time
from typing import Any, NamedTuple

import pytest

from monitors.informer import Change
from monitors.kube import Kind
from monitors.shared_view import SharedView
from sessions.ssh import hub as hub_module
from sessions.ssh.access import who_of

PODS = ("", "pods")


class Rec(NamedTuple):
    namespace: str
    name: str
    text: str


class Pods:
    """What the hub reads of an informer here: its kind and its cache."""

    def __init__(self, recs: dict[tuple[str, str], Any]) -> None:
        self.kind = Kind("", "v1", "pods")
        self.cache = dict(recs)


def count_pickled_changes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Every batch of changes the door pickles, as it pickles it (the hub's `frame` counted)."""
    pickled: list[tuple[Any, ...]] = []
    real = hub_module.frame

    def counting(message: tuple[Any, ...]) -> bytes:
        if message[0] == "changes":
            pickled.append(message)
        return real(message)

    monkeypatch.setattr(hub_module, "frame", counting)
    return pickled


def test_each_namespace_is_pickled_once_for_every_session_and_each_batch_once_per_view(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pickled = count_pickled_changes(monkeypatch)
    recs = {("team-a", f"a-{i}"): Rec("team-a", f"a-{i}", "") for i in range(3)} | {("team-b", "b-0"): Rec("team-b", "b-0", "")}

    async def main() -> None:
        hub = hub_module.Hub(None, client=object())  # type: ignore[arg-type]  # (no request is made)
        inf = Pods(recs)
        hub.informers = {PODS: inf}  # type: ignore[dict-item]
        hub.by_ns = {PODS: {"team-a": {k for k in recs if k[0] == "team-a"}, "team-b": {("team-b", "b-0")}}}
        now = time.monotonic()
        users = {"alice": (True, False), "bob": (True, False), "carol": (True, False), "dave": (False, True)}
        for user, (everywhere, team_b) in users.items():  # (the API server's answers, as kept)
            hub.reviews.answers[who_of(user, ())] = {("", "pods", ""): (everywhere, now),
                                                     ("", "pods", "team-a"): (everywhere, now),
                                                     ("", "pods", "team-b"): (everywhere or team_b, now)}
        views = {}
        for user in users:
            views[user] = SharedView(hub.session_end(user, ()))
            views[user].start()
            await asyncio.wait_for(views[user].synced.wait(), 10)
        for user, (everywhere, _) in users.items():
            want = recs if everywhere else {k: v for k, v in recs.items() if k[0] == "team-b"}
            assert views[user].caches.get(PODS, {}) == want, user
        # each namespace pickled once, whatever the number of sessions that were sent it
        assert sorted(len(m[2]) for m in pickled) == [1, 3]
        pickled.clear()

        # a change in team-b: one batch for all four (the same namespace seen); one in team-a:
        # one batch for alice, bob and carol, none for dave
        b0, a0 = Rec("team-b", "b-0", "running"), Rec("team-a", "a-0", "running")
        inf.cache[b0[:2]], inf.cache[a0[:2]] = b0, a0
        hub._changed(PODS, inf, [Change("changed", b0[:2], recs[b0[:2]], b0)])  # type: ignore[arg-type]
        hub.flush()
        hub._changed(PODS, inf, [Change("changed", a0[:2], recs[a0[:2]], a0)])  # type: ignore[arg-type]
        hub.flush()
        assert [[k for k, _ in m[2]] for m in pickled] == [[("team-b", "b-0")], [("team-a", "a-0")]]

        def caught_up() -> bool:
            return all(v.caches.get(PODS, {}).get(b0[:2]) == b0 for v in views.values())

        for _ in range(200):
            if caught_up():
                break
            await asyncio.sleep(0.01)
        assert caught_up()
        assert ("team-a", "a-0") not in views["dave"].caches[PODS]
        assert all(views[u].caches[PODS][a0[:2]] == a0 for u in ("alice", "bob", "carol"))
        # sessions that log in now: the changed namespaces pickled again once, then kept
        pickled.clear()
        late = []
        for user in ("erin", "frank"):
            hub.reviews.answers[who_of(user, ())] = {("", "pods", ""): (True, now)}
            late.append(SharedView(hub.session_end(user, ())))
            late[-1].start()
            await asyncio.wait_for(late[-1].synced.wait(), 10)
            assert late[-1].caches[PODS] == inf.cache
        assert sorted(len(m[2]) for m in pickled) == [1, 3]
        for t in list(hub._tasks):
            t.cancel()
        for v in (*views.values(), *late):
            v.sock.close()

    asyncio.run(main())


def test_a_piece_is_made_again_once_its_namespace_changed() -> None:
    async def main() -> None:
        hub = hub_module.Hub(None, client=object())  # type: ignore[arg-type]
        one, two = Rec("team-a", "a-0", "one"), Rec("team-a", "a-0", "two")
        inf = Pods({("team-a", "a-0"): one})
        hub.informers = {PODS: inf}  # type: ignore[dict-item]
        hub.by_ns = {PODS: {"team-a": {("team-a", "a-0")}}}
        first = hub._piece(PODS, "team-a")
        assert hub._piece(PODS, "team-a") is first
        assert hub._piece(PODS, "team-z") == b""
        inf.cache[("team-a", "a-0")] = two
        hub._changed(PODS, inf, [Change("changed", ("team-a", "a-0"), one, two)])  # type: ignore[arg-type]
        again = hub._piece(PODS, "team-a")
        assert again != first and b"two" in again
        if hub._flush is not None:
            hub._flush.cancel()

    asyncio.run(main())


def test_the_door_claims_each_row_once_and_a_session_keeps_the_record_it_is_sent() -> None:
    """The pods' rows are claimed by their workloads in the door (as each dashboard's model would
    from the same workloads); a session's model keeps the record it is sent, not a claimed copy
    (each session at 20,000 pods about 4.6 MB less, #31). A workload the user may not see leaves
    the row unclaimed in their model, as their own LIST would."""
    from monitors.model import LiveModel
    from monitors.pod_rows import pods_from_table
    from tests.unit.test_pod_rows import COLUMNS, job, row

    jobs_stream = ("kubeflow.org", "pytorchjobs")
    train = job("PyTorchJob", "train", ("Master", 1, 1.0), ("Worker", 2, 2.0))
    rows = pods_from_table({"columnDefinitions": COLUMNS, "rows": [
        row(n, "1/1", "Running") for n in ("train-master-0", "train-worker-0", "train-worker-1", "lone-0")]}, "team")

    async def main() -> None:
        hub = hub_module.Hub(None, client=object())  # type: ignore[arg-type]
        pods, jobs = Pods({r.key: r for r in rows}), Pods({train.key: train})
        hub.informers = {PODS: pods, jobs_stream: jobs}  # type: ignore[dict-item]
        hub.by_ns = {PODS: {}, jobs_stream: {}}
        hub._workload_streams = {jobs_stream}
        hub._changed(jobs_stream, jobs, [Change("added", train.key, None, train)])  # type: ignore[arg-type]
        hub._claim_rows()
        worker = pods.cache[("team", "train-worker-1")]
        assert worker.partial and worker.label("training.kubeflow.org/replica-type") == "worker"
        assert worker.owner is not None and worker.owner.name == "train" and worker.gpus == 2.0
        assert pods.cache[("team", "lone-0")] is rows[3]  # (no workload of that name: as it was)
        hub.live = True  # a row from a relist, once serving: claimed as it comes
        claimed = pods.cache[rows[1].key]
        hub._changed(PODS, pods, [Change("changed", rows[1].key, claimed, rows[1])])  # type: ignore[arg-type]
        assert pods.cache[rows[1].key] == claimed and hub._pending[PODS][rows[1].key][0] == claimed

        model = LiveModel()
        model.apply_jobs([(train.key, train)])
        model.apply_pods(list(pods.cache.items()))
        assert all(model.pods[k] is pods.cache[k] for k in pods.cache)
        assert [r.label for r in model.flush() and model.workloads[train.key].ranks] == \
            ["master-0", "worker-0", "worker-1"]
        blind = LiveModel()  # (a user who may not list the workload: the row as their LIST gives it)
        blind.apply_pods([(worker.key, worker)])
        assert blind.pods[worker.key].labels == () and blind.pods[worker.key].owner is None
        if hub._flush is not None:
            hub._flush.cancel()

    asyncio.run(main())


def test_a_namespace_granted_to_several_users_is_pickled_once_for_all(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pickled = count_pickled_changes(monkeypatch)
    recs = {("team-a", "a-0"): Rec("team-a", "a-0", ""), ("team-b", "b-0"): Rec("team-b", "b-0", ""),
            ("team-b", "b-1"): Rec("team-b", "b-1", "")}

    async def main() -> None:
        hub = hub_module.Hub(None, client=object())  # type: ignore[arg-type]
        hub.informers = {PODS: Pods(recs)}  # type: ignore[dict-item]
        hub.by_ns = {PODS: {"team-a": {("team-a", "a-0")}, "team-b": {("team-b", "b-0"), ("team-b", "b-1")}}}
        now = time.monotonic()

        def answers(team_b: bool) -> dict[Any, Any]:
            return {("", "pods", ""): (False, now), ("", "pods", "team-a"): (True, now),
                    ("", "pods", "team-b"): (team_b, now)}

        views = {}
        for user in ("alice", "bob"):
            hub.reviews.answers[who_of(user, ())] = answers(False)
            views[user] = SharedView(hub.session_end(user, ()))
            views[user].start()
            await asyncio.wait_for(views[user].synced.wait(), 10)
        # a user whose session is not ready yet: deciding sends nothing (its first picture will)
        hub.reviews.answers[who_of("carol", ())] = answers(True)
        carol = hub_module.Audience(who_of("carol", ()))
        pickled.clear()
        hub._show(carol, await hub._decide_all(carol))
        assert pickled == [] and carol.shown[PODS] == {"team-a", "team-b"}
        # team-b granted to alice and bob (a recheck's new answers): pickled once for both
        for user in ("alice", "bob"):
            hub.reviews.answers[who_of(user, ())] = answers(True)
            aud = hub.audiences[who_of(user, ())]
            hub._show(aud, hub._redecide(aud))
        assert [sorted(k for k, _ in m[2]) for m in pickled] == [[("team-b", "b-0"), ("team-b", "b-1")]]
        for _ in range(200):
            if all(len(v.caches[PODS]) == 3 for v in views.values()):
                break
            await asyncio.sleep(0.01)
        assert all(v.caches[PODS] == recs for v in views.values())
        for t in list(hub._tasks):
            t.cancel()
        for v in views.values():
            v.sock.close()

    asyncio.run(main())


def test_a_kind_a_user_may_list_everywhere_is_decided_without_a_look_at_each_namespace() -> None:
    """A login decides each kind for each namespace; a kind the user may list everywhere is shown
    everywhere from that one answer (at 52 namespaces and 15 kinds: 780 looks per login, #31)."""
    recs = {(f"team-{i}", "p"): Rec(f"team-{i}", "p", "") for i in range(5)}

    async def main() -> None:
        hub = hub_module.Hub(None, client=object())  # type: ignore[arg-type]
        events = ("", "events")  # (a kind with no record: not asked about at login)
        hub.informers = {PODS: Pods(recs), events: Pods({})}  # type: ignore[dict-item]
        hub.by_ns = {PODS: {k[0]: {k} for k in recs}, events: {}}
        now = time.monotonic()
        looks: list[str] = []
        real = hub._ask

        async def ask(who: Any, stream: Any, ns: str) -> bool:
            looks.append(ns)
            return await real(who, stream, ns)

        hub._ask = ask  # type: ignore[method-assign]
        hub.reviews.answers[who_of("erin", ())] = {("", "pods", ""): (True, now)}
        erin = hub_module.Audience(who_of("erin", ()))
        asked = hub.reviews.asked
        assert await hub._decide_all(erin) == {PODS: ({k[0] for k in recs}, {k[0] for k in recs}),
                                               events: (set(), set())}
        assert looks == [] and hub.reviews.asked == asked
        hub.reviews.answers[who_of("alice", ())] = {("", "pods", ""): (False, now)} | {
            ("", "pods", f"team-{i}"): (i < 2, now) for i in range(5)}
        alice = hub_module.Audience(who_of("alice", ()))
        assert await hub._decide_all(alice) == {PODS: ({"team-0", "team-1"}, {k[0] for k in recs}),
                                                events: (set(), set())}
        assert sorted(looks) == sorted(k[0] for k in recs)

    asyncio.run(main())
