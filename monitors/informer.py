"""The informer pattern: one LIST+WATCH loop per kind (and per namespace when not cluster-wide).

- the first LIST is paginated (`limit=500`); WATCH continues from its resourceVersion with bookmarks;
- a watch that ends normally is resumed from the last seen resourceVersion, without relisting;
- only 410 Expired relists, and the relist is diffed against the cache (no ghosts, no duplicates);
- errors back off with jitter from 0.5 s to 30 s; a silent connection is noticed by a read timeout;
- 403 marks the informer forbidden (shown as such, not as empty) and retries slowly;
- without watch (one-shot commands) a failing LIST is retried for `give_up_after` seconds (the
  request timeout) and then raises the server's error; 401 and errors that asking again will not
  fix (404, 400) raise at once.
"""

from __future__ import annotations

import asyncio
import enum
import gc
import random
from collections.abc import AsyncIterator, Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson

from .connection import ConnectionProblem, ExitCode
from .kube import ApiProblem, Kind, KubeClient

R = TypeVar("R")
RETRIABLE = frozenset({408, 429, 500, 502, 503, 504})  # worth asking again (one-shot LISTs too)


class InformerState(enum.Enum):
    SYNCING = "syncing"
    SYNCED = "synced"
    RETRYING = "retrying"  # lost the connection or got an error; cache kept, backing off
    FORBIDDEN = "forbidden"
    UNAUTHORIZED = "unauthorized"


@dataclass(frozen=True, slots=True)
class Change(Generic[R]):
    type: str  # "added" | "changed" | "removed"
    key: Hashable
    old: R | None
    new: R | None


class Expired(Exception):
    pass


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC off while a burst of acyclic objects is built (a parsed page)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class Informer(Generic[R]):
    def __init__(
        self,
        client: KubeClient,
        kind: Kind,
        parse: Callable[[dict[str, Any]], R],
        key: Callable[[R], Hashable],
        sink: Callable[[Informer[R], list[Change[R]]], None],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        backoff_min: float = 0.5,
        backoff_max: float = 30.0,
        read_timeout: float = 75.0,
        watch_timeout: tuple[int, int] = (240, 300),
        on_state: Callable[[Informer[R]], None] | None = None,
        watch: bool = True,
        give_up_after: float = 30.0,
    ) -> None:
        self.client = client
        self.kind = kind
        self.parse = parse
        self.key = key
        self.sink = sink
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.backoff_min = backoff_min
        self.backoff_max = backoff_max
        self.read_timeout = read_timeout
        self.watch_timeout = watch_timeout
        self.on_state = on_state
        self.watch_enabled = watch
        self.give_up_after = give_up_after  # without watch: how long a failing LIST is retried
        self.cache: dict[Hashable, R] = {}
        self.rv: str | None = None
        self.state = InformerState.SYNCING
        self.error = ""
        self.synced = asyncio.Event()
        self.lists = 0
        self.watches = 0
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._last_error: Exception = ConnectionProblem("no answer", ExitCode.UNREACHABLE)

    @property
    def name(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.kind.plural}{where}"

    @property
    def task(self) -> asyncio.Task[None] | None:
        """The task running this informer (None before `start` and after `stop`)."""
        return self._task

    def start(self) -> asyncio.Task[None]:
        self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer {self.name}")
        return self._task

    async def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def _set_state(self, state: InformerState, error: str = "") -> None:
        if state != self.state or error != self.error:
            self.state, self.error = state, error
            if self.on_state:
                self.on_state(self)

    def _params(self) -> dict[str, Any]:
        p: dict[str, Any] = {}
        if self.label_selector:
            p["labelSelector"] = self.label_selector
        if self.field_selector:
            p["fieldSelector"] = self.field_selector
        return p

    async def run(self) -> None:
        delay = self.backoff_min
        failing_since: float | None = None
        loop = asyncio.get_running_loop()
        while not self._stopped:
            attempt = loop.time()
            try:
                if self.rv is None:
                    await self._relist()
                    if not self.watch_enabled:
                        return
                await self._watch()
                delay = self.backoff_min
            except Expired:
                self.rv = None  # the only reason to relist
                continue
            except ApiProblem as exc:
                if exc.status == 410:
                    self.rv = None
                    continue
                if exc.status == 403:
                    self._set_state(InformerState.FORBIDDEN, exc.message)
                    self.synced.set()  # "forbidden" is an answer: do not keep callers waiting
                    if not self.watch_enabled:
                        return
                    delay = self.backoff_max
                elif exc.status == 401:
                    self._set_state(InformerState.UNAUTHORIZED, exc.message)
                    if not self.watch_enabled:
                        raise  # a one-shot command says so (exit 6), never prints a partial picture
                else:
                    self._set_state(InformerState.RETRYING, exc.message)
                    if not self.watch_enabled and exc.status not in RETRIABLE:
                        raise  # 404, 400...: asking again will not help
                    self._last_error = exc
                    failing_since = attempt if failing_since is None else failing_since
            except (ConnectionProblem, TimeoutError) as exc:
                self._set_state(InformerState.RETRYING, getattr(exc, "message", "") or "connection timed out")
                self._last_error = exc if isinstance(exc, ConnectionProblem) else ConnectionProblem(
                    "timed out reading from the API server", ExitCode.UNREACHABLE, timed_out=True)
                failing_since = attempt if failing_since is None else failing_since
            jitter = delay * random.uniform(0.8, 1.2)
            if not self.watch_enabled and failing_since is not None \
                    and loop.time() - failing_since + jitter > self.give_up_after:
                raise self._last_error  # a one-shot LIST ends with the error, never a silent wait
            await asyncio.sleep(jitter)
            delay = min(self.backoff_max, delay * 2)

    async def _relist(self) -> None:
        fresh: dict[Hashable, R] = {}
        rv = ""
        async for doc in self._pages(self.kind.path(self.namespace), self._params()):
            rv = rv or (doc.get("metadata") or {}).get("resourceVersion", "")
            for rec in self._parse_items(doc.get("items") or ()):
                fresh[self.key(rec)] = rec
        self._install(fresh, rv)

    async def _pages(self, path: str, params: dict[str, Any], accept: str = "application/json",
                     page_size: int | None = None) -> AsyncIterator[dict[str, Any]]:
        """Each page of a paginated LIST (`limit`, then `continue` until the server has no more)."""
        token: str | None = None
        while True:
            page = {**params, "limit": page_size or self.page_size}
            if token:
                page["continue"] = token
            raw = await self.client.request("GET", path, params=page, accept=accept)
            self.lists += 1
            # A page builds ~100k objects at once: pause the cyclic GC, which would otherwise rescan
            # the whole heap several times per page (it cost 10x the parse itself).
            with gc_paused():
                doc = orjson.loads(raw)
            del raw
            yield doc
            token = (doc.get("metadata") or {}).get("continue")
            if not token:
                return

    def _parse_items(self, items: Iterable[dict[str, Any]]) -> list[R]:
        out: list[R] = []
        with gc_paused():
            for item in items:
                try:
                    out.append(self.parse(item))
                except Exception:  # one malformed object must not stop the informer
                    continue
        return out

    def _install(self, fresh: dict[Hashable, R], rv: str) -> None:
        """A complete LIST's records as the cache, told to the sink as changes against the old one
        (a relist after 410 shows no ghost and no duplicate)."""
        old = self.cache
        changes: list[Change[R]] = []
        for k, rec in fresh.items():
            prev = old.get(k)
            if prev is None:
                changes.append(Change("added", k, None, rec))
            elif prev != rec:
                changes.append(Change("changed", k, prev, rec))
        for k, prev in old.items():
            if k not in fresh:
                changes.append(Change("removed", k, prev, None))
        self.cache = fresh
        self.rv = rv
        self._set_state(InformerState.SYNCED)
        self.synced.set()
        if changes or not old:
            self.sink(self, changes)

    async def _watch(self) -> None:
        params = {
            **self._params(),
            "watch": "1",
            "resourceVersion": self.rv,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": random.randint(*self.watch_timeout),
        }
        self.watches += 1
        async for line in self.client.stream_lines(
            self.kind.path(self.namespace), params, read_timeout=self.read_timeout,
            on_open=lambda: self._set_state(InformerState.SYNCED),
        ):
            try:
                ev = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            etype = ev.get("type")
            obj = ev.get("object") or {}
            if etype == "ERROR":
                code = obj.get("code")
                if code == 410:
                    raise Expired()
                raise ApiProblem(int(code or 500), str(obj.get("reason") or "Error"), str(obj.get("message") or ""))
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if etype == "BOOKMARK":
                if rv:
                    self.rv = rv
                continue
            self._set_state(InformerState.SYNCED)
            try:
                rec = self.parse(obj)
            except Exception:  # a malformed object is skipped, the stream goes on
                if rv:
                    self.rv = rv
                continue
            k = self.key(rec)
            prev = self.cache.get(k)
            change: Change[R] | None = None
            if etype in ("ADDED", "MODIFIED"):
                if prev != rec:
                    self.cache[k] = rec
                    change = Change("added" if prev is None else "changed", k, prev, rec)
            elif etype == "DELETED" and prev is not None:
                del self.cache[k]
                change = Change("removed", k, prev, None)
            if rv:
                self.rv = rv
            if change is not None:
                self.sink(self, [change])  # the model coalesces bursts into one update

