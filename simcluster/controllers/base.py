"""A small controller runtime: store events -> a de-duplicated work queue -> async reconcile.

Controllers run on the cluster's event loop and write to the store directly (no HTTP), as
in-process components of the control plane. Each subscribes to the kinds it cares about and
maps every event to the keys it must reconcile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..store import Event, TypeKey, now_rfc3339

if TYPE_CHECKING:
    from ..cluster import SimCluster

log = logging.getLogger("simcluster.controllers")

Key = tuple[Any, ...]


class Controller:
    """Subclass: set `watches`, implement `keys_for(event)` and `async reconcile(key)`."""

    name = "controller"
    watches: tuple[TypeKey, ...] = ()

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.store = sim.store
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._pending: set[Key] = set()
        self._task: asyncio.Task[None] | None = None
        self._timers: set[asyncio.TimerHandle] = set()

    # -- wiring --------------------------------------------------------------------------------
    def start(self) -> None:
        self.store.listen(self._on_event)
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
        for key in self.initial_keys():
            self.enqueue(key)

    async def stop(self) -> None:
        for t in self._timers:
            t.cancel()
        self._timers.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def initial_keys(self) -> Iterable[Key]:
        return ()

    def _on_event(self, ev: Event) -> None:
        if ev.tkey in self.watches:
            for key in self.keys_for(ev):
                self.enqueue(key)

    def keys_for(self, ev: Event) -> Iterable[Key]:
        return ()

    def enqueue(self, key: Key) -> None:
        if key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    def enqueue_after(self, delay: float, key: Key) -> None:
        loop = asyncio.get_running_loop()
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            self.enqueue(key)

        handle = loop.call_later(max(0.0, delay), fire)
        self._timers.add(handle)

    async def _run(self) -> None:
        while True:
            key = await self._queue.get()
            self._pending.discard(key)
            try:
                await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # a controller bug must not stop the cluster
                log.exception("%s: reconcile %s failed", self.name, key)

    async def reconcile(self, key: Key) -> None:
        raise NotImplementedError


def record_event(
    sim: SimCluster,
    obj: dict[str, Any],
    type_: str,
    reason: str,
    message: str,
    component: str,
    *,
    host: str | None = None,
) -> None:
    """Record a core/v1 Event about `obj`, aggregating repeats the way the real recorder does."""
    meta = obj["metadata"]
    ns = meta.get("namespace") or "default"
    rt = sim.registry.get("", "v1", "events")
    assert rt is not None
    now = now_rfc3339()
    index: dict[tuple[str, str, str, str], str] = sim.__dict__.setdefault("_event_index", {})
    ikey = (ns, str(meta.get("uid")), reason, message)
    existing = index.get(ikey)
    if existing is not None and sim.store.find(rt.key, ns, existing) is not None:
        def bump(o: dict[str, Any]) -> None:
            o["count"] = o.get("count", 1) + 1
            o["lastTimestamp"] = now

        sim.store.mutate(rt, ns, existing, bump)
        return
    stamp = format(int(datetime.now(UTC).timestamp() * 1e9), "x")
    source: dict[str, str] = {"component": component}
    if host:
        source["host"] = host
    event_name = f"{meta['name']}.{stamp}"
    index[ikey] = event_name
    sim.store.create(
        rt,
        {
            "metadata": {"name": event_name, "namespace": ns},
            "involvedObject": {
                "kind": obj.get("kind"),
                "namespace": meta.get("namespace", ""),
                "name": meta["name"],
                "uid": meta.get("uid"),
                "apiVersion": obj.get("apiVersion"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "source": source,
            "reportingComponent": component,
            "reportingInstance": host or "",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        },
        ns,
    )
