"""An informer fed answers no real API server sends (#17, bad objects): a LIST page that is not an
object, items that are not a list, watch lines that are JSON but not events, events whose object
or metadata are of the wrong type, a non-numeric ERROR code. None stops it: bad pages are asked
again, bad events are skipped, and the good ones around them arrive.

The client here stands for the wire (bytes in, lines out); the informer and the parser are ours."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from monitors.informer import Informer, InformerState
from monitors.kube import Kind
from monitors.parse import parse_pod

PODS = Kind("", "v1", "pods")


def pod(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": rv},
            "spec": {}, "status": {"phase": "Running"}}


class Wire:
    """Scripted answers: LIST bodies in turn, then watch streams (lists of lines) in turn."""

    def __init__(self, lists: list[bytes], watches: list[list[bytes]]) -> None:
        self.lists, self.watches = lists, watches
        self.list_calls = self.watch_calls = 0
        self.answers = 0  # (KubeClient's count of answers: the informer's backoff wakes on it)
        self.server = "https://wire.example"

    async def pause(self, seconds: float, **_: Any) -> None:
        await asyncio.sleep(seconds)

    async def request(self, method: str, path: str, params: Any = None, accept: str = "") -> bytes:
        self.list_calls += 1
        return self.lists.pop(0) if self.lists else orjson.dumps({"metadata": {"resourceVersion": "9"}, "items": []})

    async def stream_lines(self, path: str, params: Any, read_timeout: float = 0,
                           on_open: Callable[[], None] | None = None, **_: Any) -> AsyncIterator[bytes]:
        self.watch_calls += 1
        lines = self.watches.pop(0) if self.watches else []
        if on_open:
            on_open()
        for line in lines:
            yield line
        if not self.watches:
            await asyncio.sleep(3600)  # the last watch stays open


async def run(wire: Wire, until: Callable[[Informer[Any]], bool]) -> Informer[Any]:
    inf: Informer[Any] = Informer(wire, PODS, parse_pod, lambda r: r.key, lambda i, c: None,  # type: ignore[arg-type]
                                  namespace="ns", backoff_min=0.01, backoff_max=0.02)
    inf.start()
    try:
        for _ in range(500):
            await asyncio.sleep(0.01)
            assert inf.task is not None and not inf.task.done(), inf.task.exception() if inf.task else None
            if until(inf):
                return inf
        raise AssertionError(f"not reached: {sorted(inf.cache)}")
    finally:
        await inf.stop()


async def test_a_list_answer_that_is_not_an_object_is_asked_again() -> None:
    good = orjson.dumps({"metadata": {"resourceVersion": "5"}, "items": [pod("a", "5")]})
    wire = Wire([b"[1, 2]", b'"text"', b"null", good], [[]])
    inf = await run(wire, lambda i: ("ns", "a") in i.cache)
    assert wire.list_calls == 4 and inf.rv == "5"


async def test_a_list_whose_items_and_metadata_are_of_the_wrong_type_is_an_empty_list() -> None:
    wire = Wire([orjson.dumps({"metadata": [], "items": 7})], [[orjson.dumps({"type": "ADDED", "object": pod("a", "6")})]])
    inf = await run(wire, lambda i: ("ns", "a") in i.cache)
    assert wire.list_calls == 1 and inf.rv == "6"


async def test_watch_lines_that_are_not_events_are_skipped_and_the_good_ones_arrive() -> None:
    first = orjson.dumps({"metadata": {"resourceVersion": "1"}, "items": []})
    lines = [b"[]", b"42", b"null", b'"x"', b"{not json",
             orjson.dumps({"type": "ADDED", "object": []}),
             orjson.dumps({"type": "ADDED", "object": {"metadata": "zzz"}}),
             orjson.dumps({"type": "ADDED", "object": {"metadata": {"name": 5, "resourceVersion": ["2"]}}}),
             orjson.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": {"x": 1}}}}),
             orjson.dumps({"type": "ADDED", "object": pod("b", "3")})]
    wire = Wire([first], [lines])
    inf = await run(wire, lambda i: ("ns", "b") in i.cache)
    assert inf.rv == "3" and inf.state is InformerState.SYNCED and list(inf.cache) == [("ns", "b")]


async def test_a_watch_error_with_a_code_of_the_wrong_type_is_retried_not_fatal() -> None:
    first = orjson.dumps({"metadata": {"resourceVersion": "1"}, "items": []})
    bad = [orjson.dumps({"type": "ERROR", "object": {"code": "teapot", "message": "?"}})]
    also = [b'{"type": "ERROR", "object": {"code": 1000000000000000000000000000000}}']
    wire = Wire([first], [bad, also, [orjson.dumps({"type": "ADDED", "object": pod("c", "4")})]])
    inf = await run(wire, lambda i: ("ns", "c") in i.cache)
    assert wire.watch_calls == 3 and inf.rv == "4"
