"""The object store: one increasing resourceVersion, retained watch history, owner cascade.

Runs on the server's event loop only (no locks). Every object is kept as a dict and, from the
first time something needs it (a LIST, a GET, a watch event), as its compact JSON bytes too, so a
LIST of 100,000 pods is a join of byte strings, not a re-encode, and objects nobody reads in full
are never encoded. Stored objects are never modified in place: every write commits a new dict.

Watch events carry the object before the change (`Event.prev`), so a selector-filtered watch sees
what kube-apiserver's watch cache sends: an object that starts matching arrives as ADDED, one that
stops matching as DELETED (its last matching state, with the event's resourceVersion).
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import copy
import random
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from .errors import ApiError, already_exists, conflict, expired, not_found
from .resources import Registry, ResourceType, types_from_crd

ObjKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped
TypeKey = tuple[str, str]  # (group, plural)

_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"
CRD_KEY: TypeKey = ("apiextensions.k8s.io", "customresourcedefinitions")
NS_KEY: TypeKey = ("", "namespaces")


_NOW: list[Any] = [0, ""]


def now_rfc3339() -> str:
    """The current time as the API server writes timestamps (formatted once a second)."""
    sec = int(time.time())
    if sec != _NOW[0]:
        _NOW[0], _NOW[1] = sec, datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(_NOW[1])


def rfc3339_at(sec: int) -> str:
    """Whole epoch seconds as the API server writes timestamps."""
    return datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shortened_deletion(meta: dict[str, Any], grace: int) -> str:
    """The deletionTimestamp once a deletion's grace period is shortened to `grace` (kube-apiserver's
    `rest.BeforeDelete`): moved back by the old period, forward by the new one, never into the past."""
    try:
        at = datetime.fromisoformat(str(meta["deletionTimestamp"]).replace("Z", "+00:00")).timestamp()
        old = int(meta.get("deletionGracePeriodSeconds") or 0)
    except (KeyError, TypeError, ValueError):
        return now_rfc3339()
    return rfc3339_at(max(int(at) - old + grace, int(time.time())))


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)


class Stored:
    """One stored version of an object: the dict (never modified once stored), its
    resourceVersion, and its compact JSON, encoded on first use and then kept."""

    __slots__ = ("_raw", "obj", "rv")

    def __init__(self, obj: dict[str, Any], raw: bytes | None, rv: int) -> None:
        self.obj = obj
        self._raw = raw
        self.rv = rv

    @property
    def raw(self) -> bytes:
        raw = self._raw
        if raw is None:
            raw = self._raw = orjson.dumps(self.obj)
        return raw

    @property
    def encoded(self) -> bool:
        return self._raw is not None


@dataclass(slots=True)
class Event:
    """A committed change: ADDED | MODIFIED | DELETED, the stored version it made (for DELETED, the
    object as it was deleted, with the deletion's resourceVersion) and the object before it."""

    type: str
    tkey: TypeKey
    st: Stored
    prev: dict[str, Any] | None = None

    @property
    def rv(self) -> int:
        return self.st.rv

    @property
    def obj(self) -> dict[str, Any]:
        return self.st.obj

    @property
    def raw(self) -> bytes:
        return self.st.raw

    @property
    def namespace(self) -> str:
        return str(self.st.obj.get("metadata", {}).get("namespace", ""))


Filter = Callable[[dict[str, Any]], bool]


def filtered_event(ev: Event, accept: Filter | None) -> Event | None:
    """What a watcher with selector `accept` is sent for `ev`, as kube-apiserver's watch cache
    decides it from the object before and after: nothing (neither matches), ADDED (only the new
    one matches), MODIFIED (both), DELETED with the old object's content at the event's
    resourceVersion (only the old one matches)."""
    if accept is None:
        return ev
    cur_ok = ev.type != "DELETED" and accept(ev.st.obj)
    old = ev.prev if ev.type != "DELETED" else ev.st.obj
    old_ok = old is not None and accept(old)
    if cur_ok:
        if old_ok or ev.type == "ADDED":
            return ev
        return Event("ADDED", ev.tkey, ev.st, ev.prev)
    if not old_ok:
        return None
    if ev.type == "DELETED":
        return ev
    assert old is not None
    gone = {**old, "metadata": {**old.get("metadata", {}), "resourceVersion": str(ev.st.rv)}}
    return Event("DELETED", ev.tkey, Stored(gone, None, ev.st.rv), old)


@dataclass(eq=False)
class Watcher:
    tkey: TypeKey
    namespace: str | None
    accept: Filter | None  # None: every object of the type (in the namespace)
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)
    max_backlog: int = 100_000
    closed: bool = False
    expired: bool = False  # ended by `ObjectStore.expire_watches`: told 410 Expired, in band

    def offer(self, ev: Event) -> None:
        if self.closed or ev.tkey != self.tkey:
            return
        if self.namespace and ev.namespace != self.namespace:
            return
        out = filtered_event(ev, self.accept)
        if out is None:
            return
        ev = out
        if self.queue.qsize() >= self.max_backlog:
            self.close()  # a watcher too slow to keep up is dropped, as the real server does
            return
        self.queue.put_nowait(ev)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.queue.put_nowait(None)


class ObjectStore:
    """The API server's objects (`sim.store`), their resourceVersions, history and watchers."""

    def __init__(self, registry: Registry, history: int = 50_000) -> None:
        self.registry = registry
        self.rv = 1
        self._data: dict[TypeKey, dict[ObjKey, Stored]] = {}
        self._sorted: dict[TypeKey, list[ObjKey] | None] = {}
        self._history: deque[Event] = deque()
        self._history_max = history
        self.compacted_rv = 1  # events with rv <= this are no longer retained
        self._watchers: set[Watcher] = set()
        self._listeners: list[Callable[[Event], None]] = []
        self._rng = random.Random()
        self._owned: dict[str, set[tuple[TypeKey, ObjKey]]] = {}
        # per type, (label, value) -> the objects carrying it: a LIST with an equality label selector
        # looks at those alone, not at every object of the type (the sim's Python is far slower per
        # object than kube-apiserver's watch cache, and it answers one request at a time)
        self._labelled: dict[TypeKey, dict[tuple[str, str], set[ObjKey]]] = {}

    # -- reading -----------------------------------------------------------------------------
    def bucket(self, tkey: TypeKey) -> dict[ObjKey, Stored]:
        return self._data.setdefault(tkey, {})

    def get(self, rt: ResourceType, namespace: str | None, name: str) -> Stored:
        st = self.bucket(rt.key).get((namespace or "" if rt.namespaced else "", name))
        if st is None:
            raise not_found(rt.plural, rt.group, name)
        return st

    def find(self, tkey: TypeKey, namespace: str, name: str) -> Stored | None:
        return self._data.get(tkey, {}).get((namespace, name))

    def sorted_keys(self, tkey: TypeKey) -> list[ObjKey]:
        keys = self._sorted.get(tkey)
        if keys is None:
            keys = sorted(self.bucket(tkey))
            self._sorted[tkey] = keys
        return keys

    def labelled(self, tkey: TypeKey, pairs: Iterable[tuple[str, str]]) -> list[ObjKey] | None:
        """The keys (sorted) of the objects of `tkey` that may carry every one of these (label,
        value) pairs: those carrying the rarest of them (a superset when several are given: the
        selector is still applied to each); None when no pair is given (every object may match)."""
        index = self._labelled.get(tkey, {})
        found: list[set[ObjKey]] = [index.get(pair, set()) for pair in pairs]
        if not found:
            return None
        rarest = min(found, key=len)
        return sorted(rarest)

    def key_range(self, tkey: TypeKey, namespace: str | None) -> tuple[list[ObjKey], int, int]:
        """The sorted keys of a type and where a namespace's lie in them ([lo, hi): all of them
        without one), as kube-apiserver's watch cache finds a namespace's objects by its index, not
        by reading every object of the type."""
        keys = self.sorted_keys(tkey)
        return keys, *self.namespace_bounds(keys, namespace)

    @staticmethod
    def namespace_bounds(keys: list[ObjKey], namespace: str | None) -> tuple[int, int]:
        """Where a namespace's keys lie in sorted keys ([lo, hi): all of them without one)."""
        if not namespace:
            return 0, len(keys)
        # (namespace + NUL: after every name of the namespace, before any longer namespace's)
        return bisect.bisect_left(keys, (namespace, "")), bisect.bisect_left(keys, (namespace + "\0", ""))

    def items(
        self, tkey: TypeKey, namespace: str | None = None, accept: Filter | None = None
    ) -> Iterable[Stored]:
        bucket = self.bucket(tkey)
        keys, lo, hi = self.key_range(tkey, namespace)
        for i in range(lo, hi):
            st = bucket.get(keys[i])
            if st is not None and (accept is None or accept(st.obj)):
                yield st

    def objects(self, tkey: TypeKey, namespace: str | None = None) -> list[dict[str, Any]]:
        return [st.obj for st in self.items(tkey, namespace)]

    def count(self, tkey: TypeKey) -> int:
        return len(self._data.get(tkey, {}))

    # -- writing -----------------------------------------------------------------------------
    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _commit(self, rt: ResourceType, key: ObjKey, obj: dict[str, Any], etype: str) -> Stored:
        rv = self._next_rv()
        obj["metadata"]["resourceVersion"] = str(rv)
        bucket = self.bucket(rt.key)
        prev = bucket.get(key)
        self._index_owners(rt.key, key, prev.obj if prev else None, None if etype == "DELETED" else obj)
        self._index_labels(rt.key, key, prev.obj if prev else None, None if etype == "DELETED" else obj)
        st = Stored(obj, None, rv)  # encoded when first needed
        if etype == "DELETED":
            bucket.pop(key, None)
            self._sorted[rt.key] = None
        else:
            if prev is None:
                self._sorted[rt.key] = None
            bucket[key] = st
        ev = Event(etype, rt.key, st, prev.obj if prev is not None else None)
        self._history.append(ev)
        while len(self._history) > self._history_max:
            self.compacted_rv = self._history.popleft().rv
        for w in list(self._watchers):
            w.offer(ev)
        for fn in list(self._listeners):
            fn(ev)
        if rt.key == CRD_KEY:
            self._sync_crd(obj, etype)
        return st

    def _index_owners(
        self, tkey: TypeKey, key: ObjKey, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        def uids(o: dict[str, Any] | None) -> set[str]:
            if o is None:
                return set()
            return {r.get("uid", "") for r in o["metadata"].get("ownerReferences") or ()}

        before, after = uids(old), uids(new)
        for uid in before - after:
            deps = self._owned.get(uid)
            if deps is not None:
                deps.discard((tkey, key))
                if not deps:
                    del self._owned[uid]
        for uid in after - before:
            self._owned.setdefault(uid, set()).add((tkey, key))

    def _index_labels(
        self, tkey: TypeKey, key: ObjKey, old: dict[str, Any] | None, new: dict[str, Any] | None
    ) -> None:
        before = _labels_of(old)
        after = _labels_of(new)
        if before == after:
            return
        index = self._labelled.setdefault(tkey, {})
        for pair in before.items() - after.items():
            keys = index.get(pair)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[pair]
        for pair in after.items() - before.items():
            index.setdefault(pair, set()).add(key)

    def dependents(self, owner_uid: str) -> list[tuple[TypeKey, ObjKey]]:
        return sorted(self._owned.get(owner_uid, ()))

    def _sync_crd(self, crd: dict[str, Any], etype: str) -> None:
        for t in types_from_crd(crd):
            if etype == "DELETED":
                self.registry.remove(t.group, t.version, t.plural)
            else:
                self.registry.add(t)
        if etype == "DELETED":
            spec = crd.get("spec") or {}
            tkey = (spec.get("group", ""), (spec.get("names") or {}).get("plural", ""))
            for st in list(self.bucket(tkey).values()):
                rt = self.registry.find_plural(*tkey)
                if rt is None:
                    self._data.pop(tkey, None)
                    self._sorted.pop(tkey, None)
                    self._labelled.pop(tkey, None)
                    break
                self.remove(rt, st.obj["metadata"].get("namespace", ""), st.obj["metadata"]["name"])

    def generate_name(self, prefix: str) -> str:
        return prefix + "".join(self._rng.choice(_GENERATE_CHARS) for _ in range(5))

    def create(
        self, rt: ResourceType, obj: dict[str, Any], namespace: str | None = None, *, keep_uid: bool = False
    ) -> Stored:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self.generate_name(meta["generateName"])
        name = meta.get("name", "")
        ns = (namespace or meta.get("namespace") or "") if rt.namespaced else ""
        if rt.namespaced:
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        key = (ns, name)
        if key in self.bucket(rt.key):
            raise already_exists(rt.plural, rt.group, name)
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        if not (keep_uid and meta.get("uid")):
            meta["uid"] = str(uuid.uuid4())
        if "creationTimestamp" not in meta:
            meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        for k in ("resourceVersion", "deletionTimestamp", "selfLink"):
            meta.pop(k, None)
        if rt.key == NS_KEY:
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj.setdefault("status", {})["phase"] = "Active"
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        return self._commit(rt, key, obj, "ADDED")

    def update(
        self,
        rt: ResourceType,
        obj: dict[str, Any],
        *,
        expect_rv: str | None = None,
        subresource: str | None = None,
        whole: bool = False,
    ) -> Stored:
        """Replace an object. With the status subresource, `status` and the rest are split
        (unless `whole`: internal writers replace spec and status together)."""
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace", "") if rt.namespaced else ""
        key = (ns, meta.get("name", ""))
        cur = self.bucket(rt.key).get(key)
        if cur is None:
            raise not_found(rt.plural, rt.group, key[1])
        if expect_rv and expect_rv != cur.obj["metadata"].get("resourceVersion"):
            raise conflict(rt.plural, rt.group, key[1])
        old = cur.obj
        new = obj
        if subresource == "status":
            new = copy.deepcopy(old)
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
        elif "status" in rt.subresources and rt.key != NS_KEY and not whole:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        nmeta = new["metadata"]
        # immutable metadata kept from the stored object
        for k in ("uid", "creationTimestamp", "namespace", "deletionTimestamp"):
            if k in old["metadata"]:
                nmeta[k] = old["metadata"][k]
        new["apiVersion"] = rt.api_version
        new["kind"] = rt.kind
        gen = old["metadata"].get("generation", 1)
        if subresource is None and new.get("spec") != old.get("spec"):
            gen += 1
        nmeta["generation"] = gen
        if nmeta.get("deletionTimestamp") and not nmeta.get("finalizers"):
            return self.remove(rt, ns, key[1])
        if _same_content(old, new):
            return cur  # a no-op update does not bump the resourceVersion, as on a real server
        return self._commit(rt, key, new, "MODIFIED")

    def mutate(
        self, rt: ResourceType, namespace: str, name: str, fn: Callable[[dict[str, Any]], None]
    ) -> Stored:
        """Internal controllers' read-modify-write (no conflict possible on one loop)."""
        cur = self.get(rt, namespace, name)
        obj = copy.deepcopy(cur.obj)
        fn(obj)
        if _same_content(cur.obj, obj):
            return cur
        return self._commit(rt, (namespace if rt.namespaced else "", name), obj, "MODIFIED")

    def replace_built(
        self, rt: ResourceType, namespace: str, name: str, build: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> Stored:
        """Internal controllers' copy-on-write write: `build(current)` returns a new object that may
        share unchanged parts with the stored one (stored objects are never modified in place), which
        saves `mutate`'s deep copy on hot paths."""
        cur = self.get(rt, namespace, name)
        return self._commit(rt, (namespace if rt.namespaced else "", name), build(cur.obj), "MODIFIED")

    def remove(self, rt: ResourceType, namespace: str | None, name: str, *, propagation: str = "Background") -> Stored:
        ns = namespace or "" if rt.namespaced else ""
        cur = self.bucket(rt.key).get((ns, name))
        if cur is None:
            raise not_found(rt.plural, rt.group, name)
        obj = _new_version(cur.obj)
        if obj["metadata"].get("finalizers") and rt.key != NS_KEY:
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = now_rfc3339()
                obj["metadata"]["deletionGracePeriodSeconds"] = 0
                return self._commit(rt, (ns, name), obj, "MODIFIED")
            return cur
        if rt.key == NS_KEY:
            self._delete_namespace_contents(name)
        st = self._commit(rt, (ns, name), obj, "DELETED")
        self._cascade(obj["metadata"]["uid"], propagation)
        return st

    def mark_deleting(self, rt: ResourceType, namespace: str, name: str, grace: int) -> Stored:
        """Graceful deletion: set deletionTimestamp and leave removal to the kubelet. As
        kube-apiserver (`rest.BeforeDelete`): the timestamp is when the grace period ends, now plus
        `grace` seconds, so that it less deletionGracePeriodSeconds says when the deletion was asked."""
        cur = self.get(rt, namespace, name)
        if cur.obj["metadata"].get("deletionTimestamp"):
            return cur
        obj = _new_version(cur.obj)
        obj["metadata"]["deletionTimestamp"] = rfc3339_at(int(time.time()) + max(0, grace))
        obj["metadata"]["deletionGracePeriodSeconds"] = grace
        return self._commit(rt, (namespace, name), obj, "MODIFIED")

    def _delete_namespace_contents(self, namespace: str) -> None:
        for rt in self.registry:
            if not rt.namespaced:
                continue
            for key in [k for k in self.bucket(rt.key) if k[0] == namespace]:
                if key in self.bucket(rt.key):
                    self._force_remove(rt, key)

    def _force_remove(self, rt: ResourceType, key: ObjKey) -> None:
        cur = self.bucket(rt.key).get(key)
        if cur is None:
            return
        self._commit(rt, key, _new_version(cur.obj), "DELETED")

    def _cascade(self, owner_uid: str, propagation: str) -> None:
        """Garbage-collect dependents whose ownerReferences name the deleted owner."""
        for tkey, (ns, name) in self.dependents(owner_uid):
            rt = self.registry.find_plural(*tkey)
            if rt is None or (ns, name) not in self.bucket(tkey):
                continue
            if propagation == "Orphan":
                self.mutate(rt, ns, name, _drop_owner(owner_uid))
            else:
                self.remove(rt, ns, name, propagation=propagation)

    # -- watching ----------------------------------------------------------------------------
    def watch(
        self,
        rt: ResourceType,
        namespace: str | None,
        accept: Filter | None,
        resource_version: str | None,
    ) -> tuple[Watcher, list[Event]]:
        """Register a watcher; returns it with the events it must be sent first.

        No resourceVersion (or "0"): synthetic ADDED events for the current objects.
        A resourceVersion: the retained events after it, in order (filtered as live events are:
        an object leaving the selection is DELETED), or 410 Expired if it is older than the
        retained window (`compacted_rv`).
        """
        w = Watcher(rt.key, namespace, accept)
        initial: list[Event] = []
        if not resource_version or resource_version == "0":
            for st in self.items(rt.key, namespace, accept):
                initial.append(Event("ADDED", rt.key, st))
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise ApiError(400, f'invalid resource version "{resource_version}"') from None
            if since < self.compacted_rv:
                raise expired(f"too old resource version: {since} ({self.compacted_rv})")
            if since < self.rv:
                newer: list[Event] = []
                for ev in reversed(self._history):  # in rv order: walk back to `since` only
                    if ev.rv <= since:
                        break
                    newer.append(ev)
                for ev in reversed(newer):
                    if ev.tkey != rt.key:
                        continue
                    if namespace and ev.namespace != namespace:
                        continue
                    out = filtered_event(ev, accept)
                    if out is not None:
                        initial.append(out)
        self._watchers.add(w)
        return w, initial

    def unwatch(self, w: Watcher) -> None:
        self._watchers.discard(w)
        w.closed = True

    def drop_watches(self) -> int:
        n = len(self._watchers)
        for w in list(self._watchers):
            w.close()
        self._watchers.clear()
        return n

    def expire_watches(self) -> int:
        """End every open watch with an in-band ERROR 410 Expired after what it was already sent
        (as kube-apiserver does when a watcher's resourceVersion falls out of its window
        mid-stream); events committed from now on are not sent to them."""
        n = len(self._watchers)
        for w in list(self._watchers):
            w.expired = True
            w.close()
        self._watchers.clear()
        return n

    @property
    def watch_count(self) -> int:
        return len(self._watchers)

    def watching(self, tkey: TypeKey, namespace: str | None) -> int:
        """Open watches of one type in one namespace (None: cluster-wide ones)."""
        return sum(1 for w in self._watchers if w.tkey == tkey and w.namespace == namespace and not w.closed)

    def compact(self) -> None:
        """Forget all history: a watch from any earlier resourceVersion now gets 410."""
        self._history.clear()
        self.compacted_rv = self.rv

    def listen(self, fn: Callable[[Event], None]) -> None:
        """Internal controllers subscribe to every committed event (synchronously)."""
        self._listeners.append(fn)

    # -- continue tokens ---------------------------------------------------------------------
    @staticmethod
    def encode_continue(rv: int, after: ObjKey) -> str:
        payload = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": f"{after[0]}/{after[1]}\0"})
        return base64.urlsafe_b64encode(payload).decode()

    def decode_continue(self, token: str) -> tuple[int, ObjKey]:
        try:
            data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            ns, _, name = data["start"].rstrip("\0").partition("/")
            rv = int(data["rv"])
        except Exception:
            raise ApiError(400, "continue key is not valid: incorrect encoded start resourceVersion") from None
        if rv < self.compacted_rv:
            raise expired(
                "The provided continue parameter is too old to display a consistent list result. "
                "You can start a new list without the continue parameter, or use the continue "
                "token in this response to retrieve the remainder of the results."
            )
        return rv, (ns, name)


def _labels_of(obj: dict[str, Any] | None) -> dict[str, str]:
    """An object's labels that a selector can match (string values)."""
    labels = obj["metadata"].get("labels") if obj is not None else None
    if not isinstance(labels, dict):
        return {}
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


def _new_version(obj: dict[str, Any]) -> dict[str, Any]:
    """A new version of a stored object whose metadata alone will change: its own metadata dict,
    everything else shared with the stored version (which is never modified in place)."""
    return {**obj, "metadata": dict(obj.get("metadata") or {})}


def _same_content(a: dict[str, Any], b: dict[str, Any]) -> bool:
    ma, mb = a.get("metadata", {}), b.get("metadata", {})
    if {k: v for k, v in a.items() if k != "metadata"} != {k: v for k, v in b.items() if k != "metadata"}:
        return False
    skip = {"resourceVersion", "managedFields"}
    return {k: v for k, v in ma.items() if k not in skip} == {k: v for k, v in mb.items() if k not in skip}


def _drop_owner(uid: str) -> Callable[[dict[str, Any]], None]:
    def fn(obj: dict[str, Any]) -> None:
        refs = [r for r in obj["metadata"].get("ownerReferences") or () if r.get("uid") != uid]
        if refs:
            obj["metadata"]["ownerReferences"] = refs
        else:
            obj["metadata"].pop("ownerReferences", None)

    return fn
