"""The session's end of the SSH door's one watch (`monitors.shared_view`): frames read from the
socket the door made, a kind's records kept, its informer told what changed (and only that),
forbidden kinds and the door's retrying shown as such, the end of the view noticed."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from monitors.informer import InformerState
from monitors.kube import Kind
from monitors.shared_view import SharedInformer, SharedView, frame

PODS = Kind("", "v1", "pods")
NODES = Kind("", "v1", "nodes", namespaced=False)


def test_a_view_feeds_its_informers_what_changed_and_says_what_is_forbidden() -> None:
    async def main() -> None:
        door, session = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        view = SharedView(session)
        view.start()
        got: dict[str, list[Any]] = {"pods": [], "nodes": []}

        def informer(kind: Kind) -> SharedInformer:
            def sink(inf: Any, changes: list[Any]) -> None:
                got[kind.plural].append([(c.type, c.key, c.new) for c in changes])
            return SharedInformer(None, kind, lambda d: d, lambda r: r, sink, view=view)

        pods, nodes = informer(PODS), informer(NODES)
        pods.start()
        nodes.start()
        door.sendall(frame(("hello", {"kinds": {("", "pods"): PODS, ("", "nodes"): NODES}})))
        door.sendall(frame(("changes", ("", "pods"), [(("a", "p1"), "one"), (("a", "p2"), "two")])))
        door.sendall(frame(("access", {"cluster_wide": False, "namespaces": ["a"],
                                       "forbidden": {("", "nodes"): "nodes is forbidden"}})))
        door.sendall(frame(("synced",)))
        await asyncio.wait_for(pods.synced.wait(), 5)
        await asyncio.sleep(0.05)
        assert pods.cache == {("a", "p1"): "one", ("a", "p2"): "two"} and pods.state == InformerState.SYNCED
        assert nodes.state == InformerState.FORBIDDEN and nodes.error == "nodes is forbidden"
        assert view.namespaces == ("a",) and not view.cluster_wide
        told: list[tuple[str, ...]] = []
        view.access_listeners.append(lambda: told.append(view.namespaces))
        door.sendall(frame(("access", {"cluster_wide": False, "namespaces": [], "forbidden": {}})))
        for _ in range(100):
            if told:
                break
            await asyncio.sleep(0.01)
        assert told == [()] and nodes.state == InformerState.SYNCED  # (nodes no longer forbidden)
        # a change, one unchanged, one gone, one never seen gone: only what differs is told
        door.sendall(frame(("changes", ("", "pods"), [(("a", "p1"), "one"), (("a", "p2"), "TWO"),
                                                      (("a", "p1"), None), (("b", "x"), None)])))
        door.sendall(frame(("state", ("", "pods"), "retrying", "no answer from the API server")))
        for _ in range(100):
            if pods.state == InformerState.RETRYING:
                break
            await asyncio.sleep(0.01)
        assert got["pods"][-1] == [("changed", ("a", "p2"), "TWO"), ("removed", ("a", "p1"), None)]
        assert pods.cache == {("a", "p2"): "TWO"}
        assert pods.state == InformerState.RETRYING and pods.error == "no answer from the API server"
        door.close()  # the door went: the view ends, its informers say so
        await asyncio.wait_for(view.closed.wait(), 5)
        await asyncio.sleep(0.01)
        assert pods.state == InformerState.RETRYING and "ended" in pods.error
        await pods.stop()
        await nodes.stop()

    asyncio.run(main())


def test_a_dashboard_fed_by_the_door_makes_no_full_collection_of_its_own_after_its_first_picture(
        monkeypatch: Any) -> None:
    """From the door's view nothing is parsed, so the monitor leaves the one full collection to the
    dashboard's first picture (`tui.app.settle_heap`): ~40 ms less of each SSH session's start at
    20,000 pods (#31). Its informers are fed, its model built."""
    import gc

    from monitors.connection import ClusterConfig
    from monitors.monitor import Monitor
    from monitors.parse import parse_pod
    from tests.kubeflow_objects import pod

    collected: list[int] = []
    real = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(1) or real(*a))
    rec = parse_pod(pod("PyTorchJob", "train", "team", "Master", 0))

    async def main() -> None:
        door, session = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        door.sendall(frame(("hello", {"kinds": {("", "pods"): PODS}})))
        door.sendall(frame(("changes", ("", "pods"), [(rec.key, rec)])))
        door.sendall(frame(("access", {"cluster_wide": True, "namespaces": [], "forbidden": {}})))
        door.sendall(frame(("synced",)))
        mon = Monitor(ClusterConfig("https://127.0.0.1:9", "door", "", "alice"), pod_rows=True, events=False,
                      nodes=False, shared=SharedView(session))
        await mon.start()
        await mon.wait_synced(30)
        try:
            assert rec.key in mon.model.pods and collected == []
        finally:
            await mon.stop()
            door.close()

    asyncio.run(main())
