"""A small controller runtime: store events -> a de-duplicated work queue -> async reconcile.

Controllers run on the cluster's event loop and write to the store directly (no HTTP), as
in-process components of the control plane. Each subscribes to the kinds it cares about and
maps every event to the keys it must reconcile.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError
from ..apiserver.store import Event, ObjectStore, TypeKey, now_rfc3339

if TYPE_CHECKING:
    from ..cluster import SimCluster

log = logging.getLogger("simcluster.controllers")

_stamp: tuple[int, str] = (0, "")


def now() -> str:
    """now_rfc3339(), formatted once per second (timestamps have second resolution)."""
    global _stamp
    sec = int(time.time())
    if _stamp[0] != sec:
        _stamp = (sec, now_rfc3339())
    return _stamp[1]

Key = tuple[Any, ...]


class Controller(abc.ABC):
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

    @abc.abstractmethod
    async def reconcile(self, key: Key) -> None:
        """Bring the object named by `key` to its desired state."""


def keys_of(store: ObjectStore, tkey: TypeKey) -> Iterable[Key]:
    """(namespace, name) of every stored object of one type: a controller's initial keys."""
    for st in store.items(tkey):
        yield (st.obj["metadata"].get("namespace", ""), st.obj["metadata"]["name"])


def event_keys(ev: Event, own: TypeKey, owner_kind: str, owner_group: str = "") -> Iterable[Key]:
    """What to reconcile for a store event: the object itself when it is of type `own` (and not
    deleted), else the owner its controller ownerReference names when that is a `owner_kind` (of
    API group `owner_group`, when given)."""
    meta = ev.obj.get("metadata") or {}
    if ev.tkey == own:
        if ev.type != "DELETED":
            yield (meta.get("namespace", ""), meta.get("name", ""))
        return
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") and ref.get("kind") == owner_kind and (
                not owner_group or str(ref.get("apiVersion", "")).startswith(owner_group + "/")):
            yield (meta.get("namespace", ""), ref.get("name", ""))
            return


class EventRecorder:
    """core/v1 Events, aggregated like client-go's recorder (same object, reason and message:
    count + 1), with an index instead of a scan of the namespace's Events."""

    _seq = itertools.count()

    def __init__(self, sim: SimCluster, component: str) -> None:
        self.sim = sim
        self.component = component
        self._index: dict[tuple[str, str, str, str], tuple[str, str]] = {}

    def event(self, obj: dict[str, Any], type_: str, reason: str, message: str, *, host: str | None = None) -> None:
        store = self.sim.store
        rt = self.sim.registry.get("", "v1", "events")
        if rt is None:
            return
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        stamp = now_rfc3339()
        key = (str(meta.get("uid")), type_, reason, message)
        known = self._index.get(key)
        if known is not None and store.find(("", "events"), *known) is not None:

            def bump(o: dict[str, Any]) -> None:
                o["count"] = int(o.get("count") or 1) + 1
                o["lastTimestamp"] = stamp

            store.mutate(rt, known[0], known[1], bump)
            return
        name = f"{meta.get('name', 'unknown')}.{time.time_ns() + next(self._seq):x}"
        source: dict[str, str] = {"component": self.component}
        if host:
            source["host"] = host
        ev = {
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {
                "kind": obj.get("kind"),
                "namespace": meta.get("namespace", ""),
                "name": meta.get("name"),
                "uid": meta.get("uid"),
                "apiVersion": obj.get("apiVersion"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "source": source,
            "reportingComponent": self.component,
            "reportingInstance": host or "",
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        if store.find(("", "namespaces"), "", ns) is None:
            return  # the namespace is going away; nothing to attach the event to
        try:
            store.create(rt, ev, ns)
        except ApiError:
            return
        if len(self._index) > 200_000:
            self._index.clear()
        self._index[key] = (ns, name)

    def forget(self, uid: str) -> None:
        for key in [k for k in self._index if k[0] == uid]:
            del self._index[key]


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
    """Record a core/v1 Event about `obj` with the shared recorder of `component`."""
    rec = sim.event_recorders.get(component)
    if rec is None:
        rec = sim.event_recorders[component] = EventRecorder(sim, component)
    rec.event(obj, type_, reason, message, host=host)
