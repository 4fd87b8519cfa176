"""The informer pattern: one LIST+WATCH loop per kind (and per namespace when not cluster-wide).

- the first LIST is paginated (`limit=500`); WATCH continues from its resourceVersion with bookmarks;
- a watch that ends normally is resumed from the last seen resourceVersion, without relisting;
- only 410 Expired relists, and the relist is diffed against the cache (no ghosts, no duplicates);
- errors back off with jitter from 0.5 s to 30 s, never shorter than the server's Retry-After; a
  server that cannot be reached is asked again at least every `reconnect_max` seconds, and any
  answer the client gets (another informer reconnected) wakes the others at once;
- a silent connection (no byte, no FIN) is noticed by the read timeout and the watch resumed;
- a pagination `continue` token that expired (410) lists again from scratch without pages, as
  client-go's pager does (a compaction between pages cannot make it fail again);
- 401 marks the informer unauthorized; the client reads the kubeconfig again, and a rewritten
  kubeconfig or token file is tried at once (no restart);
- 403 marks the informer forbidden (shown as such, not as empty) and retries slowly;
- without watch (one-shot commands) a failing LIST is retried for `give_up_after` seconds (the
  request timeout) and then raises the server's error; 401 and errors that asking again will not
  fix (404, 400) raise at once.
"""

from __future__ import annotations

import asyncio
import enum
import random
from collections.abc import AsyncIterator, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Generic

import orjson
from typing_extensions import TypeVar

from .connection import ConnectionProblem, ExitCode
from .gc_pause import gc_paused
from .kube import ApiProblem, Kind, KubeClient, parse_object

R = TypeVar("R")
K = TypeVar("K", bound=Hashable, default=Hashable)  # a record's key in the cache (`Informer(key=...)`)
RETRIABLE = frozenset({408, 429, 500, 502, 503, 504})  # worth asking again (one-shot LISTs too)


class InformerState(enum.Enum):
    SYNCING = "syncing"
    SYNCED = "synced"
    RETRYING = "retrying"  # lost the connection or got an error; cache kept, backing off
    FORBIDDEN = "forbidden"
    UNAUTHORIZED = "unauthorized"


@dataclass(frozen=True, slots=True)
class Change(Generic[R, K]):
    type: str  # "added" | "changed" | "removed"
    key: K
    old: R | None
    new: R | None


class Expired(Exception):
    pass


# a page of `Informer._pages` that means "the pages so far are void: the LIST starts again" (its
# continue token expired); consumers drop what they collected
RESTARTED: dict[str, Any] = {"kind": "Restarted"}


class Informer(Generic[R, K]):
    def __init__(
        self,
        client: KubeClient,
        kind: Kind,
        parse: Callable[[dict[str, Any]], R],
        key: Callable[[R], K],
        sink: Callable[[Informer[R, K], list[Change[R, K]]], None],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        backoff_min: float = 0.5,
        backoff_max: float = 30.0,
        read_timeout: float = 75.0,
        watch_timeout: tuple[int, int] = (240, 300),
        on_state: Callable[[Informer[R, K]], None] | None = None,
        watch: bool = True,
        give_up_after: float = 30.0,
        reconnect_max: float = 4.0,
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
        self.reconnect_max = reconnect_max  # the longest wait to ask a server that cannot be reached
        self.cache: dict[K, R] = {}
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
            answers = self.client.answers  # (what the server answered others from now on counts)
            at_least = 0.0  # the server's Retry-After
            unreachable = False  # no answer at all: ask again soon, and when another request gets one
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
                at_least = exc.retry_after or 0.0
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
                unreachable = True
            if self.watch_enabled and loop.time() - attempt > 2 * self.backoff_max:
                delay = self.backoff_min  # a watch that lasted, then failed: a fresh failure
            jitter = max(delay * random.uniform(0.8, 1.2), at_least)
            if unreachable:
                jitter = min(jitter, self.reconnect_max * random.uniform(0.8, 1.2))
            if not self.watch_enabled and failing_since is not None \
                    and loop.time() - failing_since + jitter > self.give_up_after:
                raise self._last_error  # a one-shot LIST ends with the error, never a silent wait
            if unreachable and jitter > self.backoff_min:  # (woken by others' answers at most this often)
                await asyncio.sleep(self.backoff_min)
                jitter -= self.backoff_min
            await self.client.pause(jitter, until_answer=answers if unreachable else None,
                                    until_credentials=self.state == InformerState.UNAUTHORIZED)
            delay = min(self.backoff_max, delay * 2)

    async def _relist(self) -> None:
        fresh: dict[K, R] = {}
        rv = ""
        async for doc in self._pages(self.kind.path(self.namespace), self._params()):
            if doc is RESTARTED:
                fresh, rv = {}, ""
                continue
            rv = rv or resource_version(doc) or ""
            for rec in self._parse_items(doc.get("items") or ()):
                fresh[self.key(rec)] = rec
        self._install(fresh, rv)

    async def _pages(self, path: str, params: dict[str, Any], accept: str = "application/json",
                     page_size: int | None = None) -> AsyncIterator[dict[str, Any]]:
        """Each page of a paginated LIST (`limit`, then `continue` until the server has no more).

        A continue token the server no longer honours (410 Expired: compacted between pages)
        yields RESTARTED, then the whole LIST again in one piece (no `limit`: it cannot expire
        again), as client-go's pager does; the consumer drops the pages it had."""
        token: str | None = None
        whole = False
        while True:
            page = dict(params) if whole else {**params, "limit": page_size or self.page_size}
            if token:
                page["continue"] = token
            try:
                raw = await self.client.request("GET", path, params=page, accept=accept)
            except ApiProblem as exc:
                if exc.status != 410 or not token:
                    raise
                token, whole = None, True
                yield RESTARTED
                continue
            self.lists += 1
            # A page builds ~100k objects at once: pause the cyclic GC, which would otherwise rescan
            # the whole heap several times per page (it cost 10x the parse itself).
            with gc_paused():  # (not an object: BadAnswer, asked again, as after any failed LIST)
                doc = parse_object(raw, f"GET {path}", self.client.server)
            del raw
            yield doc
            meta = doc.get("metadata") if isinstance(doc, dict) else None
            token = meta.get("continue") if isinstance(meta, dict) else None
            if not token or not isinstance(token, str) or whole:
                return

    def _parse_items(self, items: Iterable[dict[str, Any]]) -> list[R]:
        out: list[R] = []
        if not isinstance(items, list):
            return out
        with gc_paused():
            for item in items:
                try:
                    out.append(self.parse(item))
                except Exception:  # one malformed object must not stop the informer
                    continue
        return out

    def _differs(self, prev: R, rec: R) -> bool:
        """Whether `rec` is a change of `prev` (the same key's record before)."""
        return prev != rec

    def _install(self, fresh: dict[K, R], rv: str) -> None:
        """A complete LIST's records as the cache, told to the sink as changes against the old one
        (a relist after 410 shows no ghost and no duplicate)."""
        old = self.cache
        changes: list[Change[R, K]] = []
        for k, rec in fresh.items():
            prev = old.get(k)
            if prev is None:
                changes.append(Change("added", k, None, rec))
            elif self._differs(prev, rec):
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
            connect_timeout=min(15.0, self.read_timeout),  # (a handshake that hangs is as silent)
            on_open=lambda: self._set_state(InformerState.SYNCED),
        ):
            try:
                ev = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(ev, dict):  # (not an event: skipped, as a line that is not JSON)
                continue
            etype = ev.get("type")
            obj = ev.get("object")
            if not isinstance(obj, dict):
                obj = {}
            if etype == "ERROR":
                code = obj.get("code")
                if code == 410:
                    raise Expired()
                raise ApiProblem(code if isinstance(code, int) and 400 <= code < 600 else 500,
                                 str(obj.get("reason") or "Error"), str(obj.get("message") or ""))
            rv = resource_version(obj)
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
            change: Change[R, K] | None = None
            if etype in ("ADDED", "MODIFIED"):
                if prev is None or self._differs(prev, rec):
                    self.cache[k] = rec
                    change = Change("added" if prev is None else "changed", k, prev, rec)
            elif etype == "DELETED" and prev is not None:
                del self.cache[k]
                change = Change("removed", k, prev, None)
            if rv:
                self.rv = rv
            if change is not None:
                self.sink(self, [change])  # the model coalesces bursts into one update


def resource_version(obj: Any) -> str | None:
    """`metadata.resourceVersion` of a decoded object or list, None unless it is a string."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return rv if isinstance(rv, str) else None
