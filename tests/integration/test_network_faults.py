"""Network and server faults (issue #17, item 1), injected in simcluster or on the wire, against the
real client stack (`KubeClient`, the informers, `Monitor`, and the dashboard's `DataLoop`):

- the API server stopped for 20 s and back: the dashboard's model is fresh within 10 s of its
  return, with no ghost and no duplicate row;
- a watch on a silently dead connection (no FIN): the server goes quiet mid-stream, or a TCP proxy
  blackholes every connection; the read timeout notices and the watch resumes (no relist);
- 410 at watch start (an HTTP 410) and mid-stream (an in-band ERROR): relist, diffed, no ghosts;
- 429 with Retry-After: the client waits at least that long before asking again (watch and LIST);
- latency within and beyond the timeouts, then gone: connected again without a restart;
- a big first LIST whose transfer outlasts the request timeout completes (only silence counts);
- a pagination `continue` token that expired (410): listed again from scratch, in one piece.

Covered elsewhere: dropped watches resume without relist, 500s, 410 at watch start in band after
a compaction, the server restarted (tests/integration/test_monitor.py); the official client's view
of 410, Retry-After and restarts (tests/simcluster/test_api_client.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitors.connection import ClusterConfig, load_cluster_config
from monitors.dataloop import DataLoop, DataOptions, DataStatus, DataUpdate
from monitors.informer import Change, Informer
from monitors.kube import Kind, KubeClient
from monitors.monitor import Monitor
from monitors.parse import parse_pod
from monitors.records import PodRec
from monitors.row_informer import PodRowsInformer
from tests.faults import answered, assert_consumed, assert_fired
from tests.kubeflow_objects import job, pod
from tests.waiting import until

pytestmark = pytest.mark.simcluster(scenario="demo")
NS = "runai-team-a"
KEY = (NS, "PyTorchJob", "mnist")
PODS = Kind("", "v1", "pods")
ALL_PODS = r"^/api/v1/pods$"


def seed(sim: Any, name: str = "mnist", workers: int = 2, ns: str = NS) -> None:
    sim.apply(job("PyTorchJob", name, ns, {"Master": 1, "Worker": workers}, conditions=[("Running", "")]))
    sim.apply(pod("PyTorchJob", name, ns, "Master", 0, node="h100-node-01"))
    for i in range(workers):
        sim.apply(pod("PyTorchJob", name, ns, "Worker", i, node="h100-node-02"))


def config(sim: Any, request_timeout: float | None = None, kubeconfig: Path | None = None) -> ClusterConfig:
    cfg = load_cluster_config(str(kubeconfig or sim.kubeconfig_path), None)
    if request_timeout is not None:
        cfg.request_timeout = request_timeout
    return cfg


async def started(cfg: ClusterConfig, **kw: Any) -> Monitor:
    m = Monitor(cfg, backoff=kw.pop("backoff", (0.05, 0.3)), read_timeout=kw.pop("read_timeout", 5.0), **kw)
    await m.start()
    await m.wait_synced(20)
    return m


def ranks_of(m: Monitor, key: tuple[str, str, str] = KEY) -> list[str]:
    wl = m.model.workloads.get(key)
    return [r.pod for r in wl.ranks] if wl else []


async def watching(sim: Any, m: Monitor) -> None:
    await until(lambda: sim.store.watch_count >= len(m.informers), timeout=10, what="every informer watching")


def pods_rt(sim: Any) -> Any:
    return sim.registry.get("", "v1", "pods")


# -- the API server stopped for 20 s, then back ------------------------------------------------------


class Mirror:
    """What the dashboard's store holds, built only from the `DataUpdate`s the data loop sends it
    (as `RanksApp` applies them): keyed rows, forgotten on a reset. Bookkeeping that cannot be
    right (a row added twice, a change or removal of a row never added) is kept in `problems`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: dict[Any, Any] = {}
        self.problems: list[str] = []
        self.status: DataStatus | None = None
        self.synced = False
        self.phases: list[str] = []

    def __call__(self, u: DataUpdate) -> None:  # (on the data thread)
        with self.lock:
            if u.reset:
                self.rows.clear()
            d = u.diff.workloads
            for k, v in d.added.items():
                if k in self.rows:
                    self.problems.append(f"added twice: {k}")
                self.rows[k] = v
            for k, v in d.changed.items():
                if k not in self.rows:
                    self.problems.append(f"changed, never added: {k}")
                self.rows[k] = v
            for k in d.removed:
                if k not in self.rows:
                    self.problems.append(f"removed, never added: {k}")
                self.rows.pop(k, None)
            self.status = u.status
            self.synced = self.synced or u.synced
            if not self.phases or self.phases[-1] != u.status.phase:
                self.phases.append(u.status.phase)

    def ranks(self, key: tuple[str, str, str]) -> list[str] | None:
        with self.lock:
            w = self.rows.get(key)
            return None if w is None else [r.pod for r in w.ranks]

    def keyset(self) -> set[Any]:
        with self.lock:
            return set(self.rows)


async def test_dashboard_data_is_fresh_within_10s_after_the_server_was_down_for_20s(simcluster_async: Any) -> None:
    sim = simcluster_async
    seed(sim)
    seed(sim, "ending", workers=1)
    mirror = Mirror()
    # the dashboard's own settings: backoff 0.5 s to 30 s, no shortened timeouts
    data = DataLoop(config(sim), DataOptions(metrics=False, record_failures=False), on_update=mirror)
    data.start()
    try:
        await until(lambda: mirror.synced and mirror.ranks(KEY) == ["mnist-master-0", "mnist-worker-0",
                                                                   "mnist-worker-1"],
                    timeout=30, what="the first picture")
        down = asyncio.create_task(sim.restart(20.0))
        await until(lambda: mirror.status is not None and not mirror.status.connected, timeout=10,
                    what="the status says the server is gone")
        # while it is down: a rank goes and another comes, a workload ends, a new one starts
        rt = pods_rt(sim)
        sim.store.remove(rt, NS, "mnist-worker-0")
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 5, node="h100-node-03"))
        for name in ("ending-master-0", "ending-worker-0"):
            sim.store.remove(rt, NS, name)
        sim.store.remove(sim.registry.get("kubeflow.org", "v1", "pytorchjobs"), NS, "ending")
        seed(sim, "fresh", workers=1)
        await down
        expected = ["mnist-master-0", "mnist-worker-1", "mnist-worker-5"]
        await until(lambda: mirror.ranks(KEY) == expected and (NS, "PyTorchJob", "ending") not in mirror.keyset()
                    and mirror.ranks((NS, "PyTorchJob", "fresh")) == ["fresh-master-0", "fresh-worker-0"]
                    and mirror.status is not None and mirror.status.connected,
                    # (woken by the first answer: not after the backoff, 30 s by the end of the outage)
                    timeout=20, what="the changes made while the server was down",
                    detail=lambda: (mirror.keyset(), mirror.ranks(KEY), mirror.status))
        assert mirror.problems == [], mirror.problems
        assert "retrying" in mirror.phases, mirror.phases
        ranks = mirror.ranks(KEY) or []
        assert len(ranks) == len(set(ranks))
    finally:
        await asyncio.to_thread(data.stop)


# -- a silently dead connection: the read timeout ------------------------------------------------------


async def test_a_watch_gone_silent_mid_stream_is_resumed_after_the_read_timeout(simcluster_async: Any) -> None:
    """The server stops writing a watch and never closes it (simcluster's stall: no FIN)."""
    sim = simcluster_async
    seed(sim)
    m = await started(config(sim), read_timeout=1.0)
    try:
        await watching(sim, m)
        lists = m.list_requests
        sim.faults.stall_next(ALL_PODS, after_bytes=1)  # the next pods watch: one write, then silence
        sim.store.drop_watches()
        await watching(sim, m)
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 3, node="h100-node-03"))  # the last event sent
        await until(lambda: "mnist-worker-3" in ranks_of(m), what="the event before the silence")
        silent_since = time.monotonic()
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 4, node="h100-node-03"))  # never sent on that stream
        await until(lambda: "mnist-worker-4" in ranks_of(m), timeout=10, what="the event after the silence")
        took = time.monotonic() - silent_since
        assert took >= 0.9, f"arrived after {took:.2f} s: not through the silent watch's timeout"
        assert m.list_requests == lists, "a silent watch resumes from its resourceVersion, without a relist"
        assert_consumed(sim, ALL_PODS)
        assert sorted(ranks_of(m)) == sorted(set(ranks_of(m)))
    finally:
        await m.stop()


class Blackhole:
    """A TCP proxy to the API server that can go dark: every connection open then, and every new one
    while dark, stops carrying bytes either way and is never closed by the proxy (no FIN, no RST), as
    a dead NAT entry or a pulled cable looks. Connections made once it is light again work."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.dark = False
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Blackhole:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for w in self._writers:
            w.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        if self.dark:  # accepted, never answered
            with contextlib.suppress(Exception):
                while await reader.read(65536):
                    pass
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers.append(up_writer)
        dead = False

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, to_client: bool) -> None:
            nonlocal dead
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    if self.dark or dead:
                        dead = True  # dropped, and this connection never carries a byte again
                        continue
                    dst.write(data)
                    await dst.drain()
            if not (dead and to_client):  # (the client is never told the connection is gone)
                dst.close()

        await asyncio.gather(pump(reader, up_writer, False), pump(up_reader, writer, True))


async def test_a_blackholed_connection_is_noticed_by_the_timeouts_and_the_watches_resume(
        simcluster_async: Any, tmp_path: Path) -> None:
    sim = simcluster_async
    seed(sim)
    async with Blackhole(sim.port) as hole:
        doc = sim.kubeconfig()
        doc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{hole.port}"
        kubeconfig = tmp_path / "through-the-proxy.yaml"
        kubeconfig.write_text(yaml.safe_dump(doc))
        m = await started(config(sim, request_timeout=2.0, kubeconfig=kubeconfig), read_timeout=1.5,
                          backoff=(0.1, 1.0))
        try:
            await watching(sim, m)
            lists = m.list_requests
            hole.dark = True
            sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 4, node="h100-node-03"))
            await until(lambda: not m.status.connected, timeout=10, what="the dead watches noticed")
            assert any("no answer within" in why for why in m.status.retrying.values()), m.status.retrying
            await asyncio.sleep(1.0)
            assert "mnist-worker-4" not in ranks_of(m)  # (nothing came through the dark link)
            hole.dark = False
            await until(lambda: "mnist-worker-4" in ranks_of(m) and m.status.connected, timeout=10,
                        what="the watches resumed once the link works", detail=lambda: m.status.retrying)
            assert m.list_requests == lists, "resumed from resourceVersions, not relisted"
            assert sorted(ranks_of(m)) == sorted(set(ranks_of(m)))
        finally:
            await m.stop()


# -- 410: at watch start, mid-stream -----------------------------------------------------------------


async def test_an_http_410_at_watch_start_relists_without_ghosts(simcluster_async: Any) -> None:
    sim = simcluster_async
    seed(sim, workers=3)
    m = await started(config(sim))
    try:
        await watching(sim, m)
        lists = m.list_requests
        t0 = time.time()
        sim.faults.fail_next(ALL_PODS, 410, method="GET")  # the resumed watch is answered 410 Gone
        sim.store.drop_watches()
        # after the drop: no watch carries these, only the relist can show them
        sim.store.remove(pods_rt(sim), NS, "mnist-worker-0")
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 7, node="h100-node-03"))
        want = ["mnist-master-0", "mnist-worker-1", "mnist-worker-2", "mnist-worker-7"]
        await until(lambda: ranks_of(m) == want, timeout=10, what="the relist", detail=lambda: ranks_of(m))
        assert m.list_requests > lists
        assert_fired(sim, ALL_PODS, 410, since=t0, times=1)
        gone = [r for r in answered(sim, ALL_PODS, since=t0) if r.status == 410]
        assert gone[0].params.get("watch") in ("1", "true"), gone  # (the watch, not the LIST)
    finally:
        await m.stop()


async def test_an_in_band_410_mid_stream_relists_without_ghosts(simcluster_async: Any) -> None:
    sim = simcluster_async
    seed(sim, workers=3)
    m = await started(config(sim))
    try:
        await watching(sim, m)
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 5, node="h100-node-03"))
        await until(lambda: "mnist-worker-5" in ranks_of(m), what="an event on the open watch")
        lists = m.list_requests
        assert sim.store.expire_watches() >= len(m.informers)  # ERROR 410 on every open stream
        # from here no watch carries anything: the removal shows only through the relist
        sim.store.remove(pods_rt(sim), NS, "mnist-worker-0")
        sim.store.compact()
        want = ["mnist-master-0", "mnist-worker-1", "mnist-worker-2", "mnist-worker-5"]
        await until(lambda: ranks_of(m) == want, timeout=10, what="the relist", detail=lambda: ranks_of(m))
        assert m.list_requests > lists
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 6, node="h100-node-03"))
        await until(lambda: "mnist-worker-6" in ranks_of(m), what="watching again after the relist")
    finally:
        await m.stop()


# -- 429 with Retry-After ------------------------------------------------------------------------------


async def test_a_watch_answered_429_waits_retry_after_before_asking_again(simcluster_async: Any) -> None:
    sim = simcluster_async
    seed(sim)
    m = await started(config(sim))  # its own backoff: 0.05 s, far shorter than Retry-After
    try:
        await watching(sim, m)
        t0 = time.time()
        sim.faults.fail_next(ALL_PODS, 429, count=3, retry_after=1, method="GET")
        sim.store.drop_watches()
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 6, node="h100-node-03"))
        await until(lambda: "mnist-worker-6" in ranks_of(m), timeout=15, what="the watch after three 429s")
        asked = assert_fired(sim, ALL_PODS, 429, since=t0, times=3)
        gaps = [b.at - a.at for a, b in itertools.pairwise(asked)]
        assert all(g >= 0.99 for g in gaps), f"asked again after {gaps} s, Retry-After said 1"
        assert_consumed(sim, ALL_PODS)
    finally:
        await m.stop()


async def test_a_request_answered_429_is_asked_again_after_retry_after(simcluster_async: Any) -> None:
    sim = simcluster_async
    seed(sim)
    path = f"/api/v1/namespaces/{NS}/pods"
    t0 = time.time()
    sim.faults.fail_next(f"^{path}$", 429, count=2, retry_after=1)
    async with KubeClient(config(sim)) as client:
        doc = await client.get(path)
    assert sorted(p["metadata"]["name"] for p in doc["items"]) == ["mnist-master-0", "mnist-worker-0",
                                                                  "mnist-worker-1"]
    reads = answered(sim, f"^{path}$", since=t0)
    assert [r.status for r in reads] == [429, 429, 200]
    gaps = [b.at - a.at for a, b in itertools.pairwise(reads)]
    assert all(g >= 0.99 for g in gaps), gaps


# -- latency -------------------------------------------------------------------------------------------


async def test_latency_within_then_beyond_the_timeouts_then_gone(simcluster_async: Any) -> None:
    sim = simcluster_async
    seed(sim)
    sim.faults.latency = 0.4  # slow, within the timeouts: everything works
    m = await started(config(sim, request_timeout=1.0), read_timeout=1.0)
    try:
        sim.store.drop_watches()
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 3, node="h100-node-03"))
        await until(lambda: "mnist-worker-3" in ranks_of(m), what="an event through slow reconnects")
        sim.faults.latency = 1.5  # beyond them: no answer in time
        sim.store.drop_watches()
        await until(lambda: any("no answer within 1 s" in why for why in m.status.retrying.values()),
                    timeout=10, what="the status says the server does not answer", detail=lambda: m.status.retrying)
        sim.faults.latency = 0.0
        sim.apply(pod("PyTorchJob", "mnist", NS, "Worker", 4, node="h100-node-03"))
        await until(lambda: "mnist-worker-4" in ranks_of(m) and m.status.connected, timeout=10,
                    what="connected again", detail=lambda: m.status.retrying)
        assert sorted(ranks_of(m)) == sorted(set(ranks_of(m)))
    finally:
        await m.stop()


# -- a big first LIST slower than the request timeout ---------------------------------------------------

BIG_PODS = 1500
PADDING = 24_000  # bytes of annotation per pod: a LIST body of ~36 MB


def big_pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"big-{i:05d}", "namespace": "default",
                         "annotations": {"example.com/padding": "x" * PADDING}},
            "spec": {"containers": [{"name": "main", "image": "img"}], "nodeName": "h100-node-01"},
            "status": {"phase": "Running"}}


async def test_a_big_first_list_outlasting_the_request_timeout_completes(simcluster_async: Any) -> None:
    """Only silence counts against the request timeout (1 s here): a LIST body that takes 4 s to
    arrive, a piece every 0.1 s, completes; a server that stops sending is still cut off."""
    sim = simcluster_async
    for i in range(BIG_PODS):
        sim.apply(big_pod(i))
    path = "^/api/v1/namespaces/default/pods$"
    sim.faults.slow_body_next(path, seconds=4.0)
    got: list[Change[PodRec]] = []
    async with KubeClient(config(sim, request_timeout=1.0)) as client:
        inf: Informer[PodRec] = Informer(client, PODS, parse_pod, lambda r: r.key, lambda _i, c: got.extend(c),
                                         namespace="default", page_size=5000, watch=False, give_up_after=1.0)
        started_at = time.monotonic()
        await asyncio.wait_for(inf.run(), 60)
        took = time.monotonic() - started_at
    assert len(inf.cache) == BIG_PODS and len(got) == BIG_PODS
    assert took >= 3.5, f"the body took {took:.1f} s: the slow transfer was not exercised"
    assert_consumed(sim, path)
    # (the server logs a request when its handler returns, which may be just after the client read
    # the last byte of a streamed body)
    for _ in range(200):
        if answered(sim, path):
            break
        await asyncio.sleep(0.05)
    assert [r.status for r in answered(sim, path)] == [200], "one LIST, never cut off and asked again"


# -- an expired continue token ------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [False, True], ids=["objects", "table-rows"])
async def test_an_expired_continue_token_lists_again_from_scratch(simcluster_async: Any, rows: bool) -> None:
    """A compaction between pages: the continue token is 410; the informer drops the pages it had and
    lists again without pages (client-go's pager): what was removed meanwhile is not kept."""
    sim = simcluster_async
    rt = pods_rt(sim)
    for i in range(5):
        sim.apply(small_pod(f"p-{i}"))

    def between_the_pages() -> None:
        sim.store.remove(rt, "default", "p-0")  # on the first page, already read
        sim.apply(small_pod("p-9"))

    path = "^/api/v1/namespaces/default/pods$"
    sim.faults.expire_continue_next(path, before=between_the_pages)
    t0 = time.time()

    async def no_namespaces() -> list[str] | None:
        return ["default"]

    client = KubeClient(config(sim))
    sink: list[Change[PodRec]] = []
    common: dict[str, Any] = {"namespace": "default", "backoff_min": 0.05, "backoff_max": 0.3}
    inf: Informer[PodRec] = (
        PodRowsInformer(client, PODS, parse_pod, _key, lambda _i, c: sink.extend(c), namespaces=no_namespaces,
                        unsettled=False, rows_page=2, **common) if rows else
        Informer(client, PODS, parse_pod, _key, lambda _i, c: sink.extend(c), page_size=2, **common))
    inf.start()
    try:
        await asyncio.wait_for(inf.synced.wait(), 20)
        assert sorted(k[1] for k in inf.cache) == ["p-1", "p-2", "p-3", "p-4", "p-9"]  # type: ignore[index]
        lists = [r for r in answered(sim, path, since=t0) if "watch" not in r.params]
        assert [(r.status, "limit" in r.params, "continue" in r.params) for r in lists] == [
            (200, True, False), (410, True, True), (200, False, False)], lists
        assert_consumed(sim, path)
        sim.apply(small_pod("p-10"))
        await until(lambda: ("default", "p-10") in inf.cache, what="watching from the whole LIST's version")
    finally:
        await inf.stop()
        await client.close()


def _key(r: PodRec) -> Hashable:
    return r.key


def small_pod(name: str) -> dict[str, Any]:
    return {**big_pod(0), "metadata": {"name": name, "namespace": "default"}}

