"""LogStream/LogEngine against a real HTTP server that misbehaves on purpose: a follow that stalls
silently (read timeout -> reopen from the last timestamp), a dropped connection, an escape sequence
split across chunks, an endless line."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from monitors.connection import ClusterConfig
from monitors.kube import KubeClient
from monitors.logs.engine import LogEngine, LogOptions
from monitors.logs.lines import LogLine, format_ts
from monitors.logs.stream import READ_LIMIT
from monitors.model import LiveModel
from monitors.parse import parse_pod

TK = "training.kubeflow.org/"
NS = "ns"
KEY = (NS, "PyTorchJob", "job")
BASE = 1_767_225_600_000_000_000
Handler = Callable[[web.Request, int], Awaitable[web.StreamResponse]]


def record(i: int, text: str | None = None) -> bytes:
    return f"{format_ts(BASE + i * 100_000_000)} {text if text is not None else f'line {i}'}\n".encode()


def model_with_pod(name: str = "job-worker-0") -> LiveModel:
    model = LiveModel()
    pod = {
        "metadata": {"name": name, "namespace": NS, "uid": "uid-1", "labels": {
            TK + "job-name": "job", TK + "replica-type": "worker", TK + "replica-index": "0",
            TK + "operator-name": "pytorchjob-controller"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "x"}]},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}]},
    }
    rec = parse_pod(pod)
    model.apply_pods([(rec.key, rec)])
    model.flush()
    assert KEY in model.workloads
    return model


class Server:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[dict[str, str]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> Server:
        app = web.Application()

        async def log(request: web.Request) -> web.StreamResponse:
            self.requests.append(dict(request.query))
            return await self.handler(request, len(self.requests))

        app.router.add_get("/api/v1/namespaces/{ns}/pods/{pod}/log", log)
        self.runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


async def start_stream(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    return resp


async def run_engine(server: Server, *, follow: bool, until: Callable[[list[LogLine]], bool],
                     timeout: float = 10.0, **opts: object) -> tuple[LogEngine, list[LogLine]]:
    client = KubeClient(ClusterConfig(server=server.url, context="t", namespace=NS, user="u"))
    eng = LogEngine(client, KEY, model_with_pod(), options=LogOptions(
        follow=follow, read_timeout=0.4, window=0.05, backoff_min=0.05, **opts))  # type: ignore[arg-type]
    got: list[LogLine] = []
    eng.subscribe(got.extend)
    await eng.start()
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while not until(got):
            if loop.time() > end:
                raise AssertionError(f"timed out; got {[ln.text for ln in got]}")
            await asyncio.sleep(0.02)
    finally:
        await eng.stop()
        await client.close()
    return eng, got


async def test_stalled_follow_reopens_from_last_timestamp_without_duplicates() -> None:
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        resp = await start_stream(request)
        if request.query.get("follow") != "true":
            await resp.write(b"".join(record(i) for i in range(3)))  # history
            await resp.write_eof()
            return resp
        if n == 2:  # first follow: a few lines, then silence with the connection open
            await resp.write(b"".join(record(i) for i in range(3, 6)))
            await asyncio.sleep(30)
            return resp
        # the reopen resends from the second of the last line (sinceTime has seconds precision)
        await resp.write(b"".join(record(i) for i in range(0, 10)))
        await asyncio.sleep(30)
        return resp

    async with Server(handler) as srv:
        eng, got = await run_engine(srv, follow=True, until=lambda g: len(g) >= 10 or any(
            ln.text == "line 9" for ln in g))
        await asyncio.sleep(0.2)
    assert [ln.text for ln in got] == [f"line {i}" for i in range(10)]
    assert len(srv.requests) >= 3
    reopen = srv.requests[2]
    assert reopen["follow"] == "true" and reopen["timestamps"] == "true"
    assert reopen["sinceTime"] == format_ts(BASE + 500_000_000)[:19] + "Z"
    s = next(iter(eng.streams.values()))
    assert s.stalls >= 1 and s.reopens >= 1


async def test_same_timestamp_different_content_is_not_dropped() -> None:
    same = format_ts(BASE + 100_000_000)

    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        resp = await start_stream(request)
        if request.query.get("follow") != "true":
            await resp.write(f"{same} a\n".encode())
            await resp.write_eof()
            return resp
        # resent "a" (seen) and "b" with the same timestamp (not seen), then new lines
        await resp.write(f"{same} a\n{same} b\n".encode() + record(5))
        await asyncio.sleep(30)
        return resp

    async with Server(handler) as srv:
        _, got = await run_engine(srv, follow=True, until=lambda g: any(ln.text == "line 5" for ln in g))
    assert [ln.text for ln in got] == ["a", "b", "line 5"]


async def test_dropped_connection_resumes() -> None:
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        resp = await start_stream(request)
        if request.query.get("follow") != "true":
            await resp.write_eof()
            return resp
        if n == 2:
            await resp.write(record(0) + record(1) + record(2)[:20])  # cut inside a line
            await asyncio.sleep(0.05)
            assert request.transport is not None
            request.transport.close()
            return resp
        assert request.query.get("sinceTime")
        await resp.write(b"".join(record(i) for i in range(0, 5)))
        await asyncio.sleep(30)
        return resp

    async with Server(handler) as srv:
        _, got = await run_engine(srv, follow=True, until=lambda g: any(ln.text == "line 4" for ln in g))
    assert [ln.text for ln in got] == [f"line {i}" for i in range(5)]


async def test_escape_sequence_split_across_chunks_never_leaks() -> None:
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        resp = await start_stream(request)
        ts = format_ts(BASE).encode()
        for piece in (ts + b" safe\x1b", b"]0;pwned", b"\x07 text \x1b[", b"2J done\n", ts + b" \x1b", b"[31mred\n"):
            await resp.write(piece)
            await asyncio.sleep(0.03)
        await resp.write_eof()
        return resp

    async with Server(handler) as srv:
        eng, got = await run_engine(srv, follow=False, until=lambda g: len(g) >= 2)
    assert [ln.text for ln in got] == ["safe text  done", "red"]
    assert got[1].safe.spans == ((0, 3, "red"),)
    assert all("\x1b" not in ln.text for ln in got)
    assert eng.done.is_set()


async def test_endless_line_is_cut_and_memory_bounded() -> None:
    big = 3 * READ_LIMIT

    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        resp = await start_stream(request)
        await resp.write(format_ts(BASE).encode() + b" ")
        chunk = b"z" * 65536
        for _ in range(big // len(chunk)):
            await resp.write(chunk)
        await resp.write(b"\n" + record(1))
        await resp.write_eof()
        return resp

    async with Server(handler) as srv:
        _, got = await run_engine(srv, follow=False, until=lambda g: len(g) >= 2)
    first = got[0]
    assert len(first.raw) <= READ_LIMIT + 65536
    assert first.text.endswith("more bytes not shown]")
    assert first.safe.truncated == big // 65536 * 65536 - (1 << 20)
    assert got[1].text == "line 1"


async def test_errors_are_notices_not_crashes() -> None:
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        body = b'{"kind":"Status","status":"Failure","reason":"BadRequest","code":400,' \
               b'"message":"container \\"main\\" in pod \\"job-worker-0\\" is waiting to start: ContainerCreating"}'
        return web.Response(status=400, body=body, content_type="application/json")

    async with Server(handler) as srv:
        client = KubeClient(ClusterConfig(server=srv.url, context="t", namespace=NS, user="u"))
        eng = LogEngine(client, KEY, model_with_pod(), options=LogOptions())
        await eng.start()
        await asyncio.wait_for(eng.wait(), 5)
        await eng.stop()
        await client.close()
    assert len(eng.buffer) == 0
    assert any("waiting to start" in n for n in eng.notices)


@pytest.mark.parametrize("tail", [2, 0])
async def test_tail_keeps_the_newest_merged_lines(tail: int) -> None:
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        assert request.query["tailLines"] == str(tail)
        resp = await start_stream(request)
        await resp.write(b"".join(record(i) for i in range(5)))
        await resp.write_eof()
        return resp

    async with Server(handler) as srv:
        client = KubeClient(ClusterConfig(server=srv.url, context="t", namespace=NS, user="u"))
        eng = LogEngine(client, KEY, model_with_pod(), options=LogOptions(tail=tail))
        await eng.start()
        await asyncio.wait_for(eng.wait(), 5)
        await eng.stop()
        await client.close()
    assert [ln.text for ln in eng.buffer] == [f"line {i}" for i in range(5 - tail, 5)]
