"""The SSH door's one watch (`ranks serve --ssh`, unless `--per-user-watch`): the cluster listed and
watched once, with the server's own identity, and each session served the part its user may read
(`monitors.shared_view` is the session's end; `access` asks the API server who may read what).

- what the dashboard watches: namespaces, nodes, pods (as rows, `row_informer`), resource quotas,
  events and every workload kind the server offers, cluster-wide; and the RBAC objects (roles,
  bindings), whose every change has each kept answer asked again at once; the pods waiting for a
  node are listed whole once at start (their scheduler message, which a row lacks); the pods'
  rows are claimed by their workloads once here (`pod_rows.infer`, as each dashboard's model would
  from the same workloads and the row's name), so a session keeps the record it is sent rather than
  a claimed copy of it;
- a session gets a record of kind K in namespace N when its user may `list` K in every namespace,
  or in N (a SubjectAccessReview for the user and groups, `access`); a Namespace when they may list
  namespaces or `get` that one; a node when they may list nodes (else nodes are forbidden to them,
  as their own LIST would be). A namespace not yet asked about (created after login) is asked
  about when something of it is to be sent; until the answer, nothing of it is;
- an answer that changes (revoked, granted) sends the records of that namespace as gone, or
  added; answers are asked again every `access.RECHECK` seconds and on any RBAC change;
- changes are coalesced (`COALESCE`) and each batch is pickled once for every identity shown the
  same namespaces of it, whatever the number of sessions; a first picture is made of each
  namespace's records of each kind, pickled once and kept until one of them changes, so a session
  that logs in costs the door no serialisation of what others were already sent (200 users who
  may read everything: one pickling, not 200); a session that goes (its end of the socket closed)
  is forgotten.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from monitors.connection import ClusterConfig, ConnectionProblem
from monitors.informer import RESTARTED, Change, Informer, InformerState
from monitors.kube import ApiProblem, Kind, KubeClient
from monitors.monitor import WORKLOAD_KINDS
from monitors.parse import parse_event, parse_job, parse_namespace, parse_node, parse_pod, parse_quota
from monitors.pod_rows import infer
from monitors.row_informer import PodRowsInformer
from monitors.shared_view import Stream, frame
from sessions.errors import SessionError

from .access import SAR_PATH, AccessReviews, Question, Who, review_body, who_of

COALESCE = 0.05  # seconds a change may wait for others (one message per batch)
TICK = 5.0  # seconds between two looks for answers due to be asked again
RBAC = "rbac.authorization.k8s.io"
RBAC_KINDS = ("roles", "rolebindings", "clusterroles", "clusterrolebindings")
NAMESPACES: Stream = ("", "namespaces")
NODES: Stream = ("", "nodes")
PODS: Stream = ("", "pods")
UNSCHEDULED = "status.phase=Pending,spec.nodeName="  # the pods read whole at start (their scheduler message)
SYNC_WITHIN = 600.0  # seconds the first LISTs may take before the server gives up starting

PERMISSIONS = ("grant it list and watch on what the dashboard shows and create on subjectaccessreviews "
               "(docs/ssh.md), or run with --per-user-watch")


@dataclass
class Audience:
    """What one identity's sessions are shown: per kind, the namespaces decided and those shown."""

    who: Who | None  # None: the server's own identity (shown everything)
    decided: dict[Stream, set[str]] = field(default_factory=dict)
    shown: dict[Stream, set[str]] = field(default_factory=dict)
    access: tuple[Any, ...] | None = None  # the last access message sent
    sessions: set[Subscriber] = field(default_factory=set)


class Subscriber:
    """One session's end: a queue of frames written in order by its own task."""

    def __init__(self, audience: Audience) -> None:
        self.audience = audience
        self.ready = False  # its first picture is sent: changes go to it from now on
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None

    def send(self, data: bytes) -> None:
        self.queue.put_nowait(data)


def _namespace_of(stream: Stream, rec: Any) -> str:
    if stream == NAMESPACES:
        return str(rec.name)
    if stream == NODES:
        return ""
    return str(rec.namespace)


class Hub:
    def __init__(self, cfg: ClusterConfig, client: KubeClient | None = None) -> None:
        self.cfg = cfg
        self.client = client or KubeClient(cfg)
        self.reviews = AccessReviews(self.client)
        self.kinds: dict[Stream, Kind] = {}
        self.informers: dict[Stream, Informer[Any, Any]] = {}
        self.rbac: list[Informer[Any, Any]] = []
        self.by_ns: dict[Stream, dict[str, set[Hashable]]] = {}
        self.audiences: dict[Who | None, Audience] = {}
        self._pending: dict[Stream, dict[Hashable, tuple[Any, str]]] = {}
        # a namespace's records of a kind as a first picture sends them, pickled once for every
        # session, until one of them changes (b"": none)
        self._pieces: dict[tuple[Stream, str], bytes] = {}
        self._workload_streams: set[Stream] = set()
        self._job_names: dict[tuple[str, str], dict[str, Any]] = {}  # (namespace, name) -> {kind: job}
        self._flush: asyncio.TimerHandle | None = None
        self._resolving: set[tuple[Who | None, Stream, str]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._rechecking = False
        self._recheck_again = False
        self.live = False  # the first LISTs are in

    # -- start, stop ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Discovery, the server's own rights, every informer's first LIST; SessionError (exit 3)
        when the server's identity may not do what the one watch needs."""
        try:
            self.kinds = await self.client.served_kinds()
            await self._check_rights()
        except (ApiProblem, ConnectionProblem, SessionError) as exc:
            await self.client.close()
            if isinstance(exc, SessionError):
                raise
            raise SessionError(f"the SSH server's one watch cannot start: {_said(exc)}", 3) from None

        def core(plural: str) -> Kind | None:
            return self.kinds.get(("", plural))

        self._add(core("namespaces"), parse_namespace, lambda r: r.name)
        self._add(core("nodes"), parse_node, lambda r: r.name)
        self._add(core("pods"), parse_pod, lambda r: r.key,
                  factory=functools.partial(PodRowsInformer, namespaces=self._namespace_names, unsettled=True))
        self._add(core("resourcequotas"), parse_quota, lambda r: (r.namespace, r.name))
        self._add(core("events"), parse_event, lambda r: (r.namespace, r.name))
        for group, plural, kind_name in WORKLOAD_KINDS:
            kind = self.kinds.get((group, plural))
            if kind is not None:
                self._add(kind, parse_job(kind_name, group, kind.version), lambda r: r.key)
                self._workload_streams.add((group, plural))
        for plural in RBAC_KINDS:
            kind = self.kinds.get((RBAC, plural))
            if kind is not None:
                inf: Informer[Any, Any] = Informer(self.client, kind, _meta, lambda r: (r[0], r[1]),
                                                   self._rbac_changed, backoff_max=10.0)
                self.rbac.append(inf)
        for inf in (*self.informers.values(), *self.rbac):
            inf.start()
        try:
            await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers.values())), SYNC_WITHIN)
        except TimeoutError:
            await self.stop()
            raise SessionError("the SSH server's one watch: the cluster's first LISTs took over "
                               f"{SYNC_WITHIN:g} s", 3) from None
        if (pods := self.informers.get(PODS)) is not None and pods.state == InformerState.FORBIDDEN:
            await self.stop()
            raise SessionError(f"the SSH server's identity may not list pods in every namespace: {PERMISSIONS}", 3)
        self._claim_rows()
        await self._read_pending()
        self.live = True
        self._spawn(self._tick())

    async def _read_pending(self) -> None:
        """The pods waiting for a node, listed whole once here (one field-selected LIST: a Table
        row has no scheduler message), or every session would read them as its user
        (`Monitor.explain_pending`). Those that come later come whole with the watch."""
        inf = self.informers.get(PODS)
        if inf is None:
            return
        recs: list[Any] = []
        try:
            async for doc in inf._pages(inf.kind.path(None), {"fieldSelector": UNSCHEDULED}):
                recs = [] if doc is RESTARTED else recs + inf._parse_items(doc.get("items") or ())
        except (ApiProblem, ConnectionProblem):
            return  # (the sessions read them as their users, as without the door)
        changes = []
        for rec in recs:
            prev = inf.cache.get(rec.key)
            if prev is not None and prev.partial:
                inf.cache[rec.key] = rec
                changes.append(Change("changed", rec.key, prev, rec))
        if changes:
            self._changed(PODS, inf, changes)

    def _claim_rows(self) -> None:
        """Every pod row claimed by its workload (the workloads' LISTs may have come after the
        rows'): the records sessions are sent."""
        inf = self.informers.get(PODS)
        if inf is None:
            return
        changes = []
        for key, rec in list(inf.cache.items()):
            if rec.partial:
                claimed = infer(rec, functools.partial(self._jobs_named, rec.namespace))
                if claimed is not rec:
                    inf.cache[key] = claimed
                    changes.append(Change("changed", key, rec, claimed))
        if changes:
            self._changed(PODS, inf, changes)

    def _jobs_named(self, namespace: str, name: str) -> list[Any]:
        """The workloads named `name` in `namespace`, in the order a dashboard's model tries them."""
        got = self._job_names.get((namespace, name))
        return [got[k] for k in sorted(got)] if got else []

    async def _check_rights(self) -> None:
        """May the server's identity ask the API server about others (create subjectaccessreviews)?"""
        try:
            await self.client.request("POST", SAR_PATH, body=review_body(("system:anonymous", ()), ("", "pods", "")))
        except ApiProblem as exc:
            if exc.status == 403:
                raise SessionError(f"the SSH server's identity may not create subjectaccessreviews: {PERMISSIONS}",
                                   3) from None
            raise

    async def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        if self._flush is not None:
            self._flush.cancel()
        await asyncio.gather(*(i.stop() for i in (*self.informers.values(), *self.rbac)), return_exceptions=True)
        for aud in self.audiences.values():
            for sub in aud.sessions:
                sub.send(b"")
        await self.client.close()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _add(self, kind: Kind | None, parse: Callable[[dict[str, Any]], Any], key: Callable[[Any], Hashable],
             factory: Callable[..., Informer[Any, Any]] = Informer) -> None:
        if kind is None:
            return
        stream = (kind.group, kind.plural)
        inf = factory(self.client, kind, parse, key, functools.partial(self._changed, stream),
                      on_state=functools.partial(self._state, stream))
        self.informers[stream] = inf
        self.by_ns[stream] = {}

    async def _namespace_names(self) -> list[str] | None:
        try:
            doc = await self.client.get("/api/v1/namespaces")
        except ApiProblem:
            return None
        items = doc.get("items")
        return [str(i["metadata"]["name"]) for i in items if isinstance(i, dict) and isinstance(i.get("metadata"), dict)
                and isinstance(i["metadata"].get("name"), str)] if isinstance(items, list) else []

    # -- what changed in the cluster -------------------------------------------------------------------
    def _changed(self, stream: Stream, inf: Informer[Any, Any], changes: list[Change[Any, Any]]) -> None:
        index = self.by_ns[stream]
        pending = self._pending.setdefault(stream, {})
        workloads = stream in self._workload_streams
        for c in changes:
            rec = c.new if c.new is not None else c.old
            ns = _namespace_of(stream, rec)
            if workloads:
                self._named(c.old, c.new)
            elif stream == PODS and self.live and c.new is not None and c.new.partial:  # (a relist's row)
                c = Change(c.type, c.key, c.old, infer(c.new, functools.partial(self._jobs_named, ns)))
                inf.cache[c.key] = c.new
            keys = index.setdefault(ns, set())
            if c.new is None:
                keys.discard(c.key)
            else:
                keys.add(c.key)
            pending[c.key] = (c.new, ns)
            self._pieces.pop((stream, ns), None)
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(COALESCE, self.flush)

    def _named(self, old: Any, new: Any) -> None:
        if old is not None:
            kinds = self._job_names.get((old.namespace, old.name))
            if kinds is not None:
                kinds.pop(old.kind, None)
                if not kinds:
                    del self._job_names[(old.namespace, old.name)]
        if new is not None:
            self._job_names.setdefault((new.namespace, new.name), {})[new.kind] = new

    def flush(self) -> None:
        """The changes since the last flush, to each audience the part it may see."""
        self._flush = None
        pending, self._pending = self._pending, {}
        for stream, batch in pending.items():
            by_ns: dict[str, list[tuple[Hashable, Any]]] = {}
            for key, (rec, ns) in batch.items():
                by_ns.setdefault(ns, []).append((key, rec))
            frames: dict[tuple[str, ...], bytes] = {}  # (the same namespaces seen: the same bytes)
            for aud in list(self.audiences.values()):
                ready = [s for s in aud.sessions if s.ready]
                if not ready:
                    continue
                seen_ns: list[str] = []
                for ns in by_ns:
                    seen = self._decided(aud, stream, ns)
                    if seen is None:
                        self._resolve(aud, stream, ns)
                    elif seen:
                        seen_ns.append(ns)
                if not seen_ns:
                    continue
                data = frames.get(tuple(seen_ns))
                if data is None:
                    data = frames[tuple(seen_ns)] = frame(("changes", stream,
                                                           [kv for ns in seen_ns for kv in by_ns[ns]]))
                for sub in ready:
                    sub.send(data)

    def _state(self, stream: Stream, inf: Informer[Any, Any]) -> None:
        state = "retrying" if inf.state in (InformerState.RETRYING, InformerState.UNAUTHORIZED,
                                            InformerState.FORBIDDEN) else "synced"
        data = frame(("state", stream, state, inf.error if state == "retrying" else ""))
        for aud in self.audiences.values():
            for sub in aud.sessions:
                if sub.ready:
                    sub.send(data)

    def _rbac_changed(self, inf: Informer[Any, Any], changes: list[Change[Any, Any]]) -> None:
        if self.live and all(i.synced.is_set() for i in self.rbac):
            self._spawn(self.recheck())

    # -- who sees what ---------------------------------------------------------------------------------
    def _questions(self, stream: Stream, ns: str) -> tuple[Question, Question | None]:
        """The question that shows a kind everywhere, and the one for namespace `ns` (None for a
        cluster-scoped kind)."""
        group, plural = stream
        if stream == NODES or not ns:
            return (group, plural, ""), None
        return (group, plural, ""), (group, plural, ns)

    def _visible(self, who: Who | None, stream: Stream, ns: str) -> bool | None:
        """From the kept answers: may `who` see `stream` in `ns`? None: not asked yet."""
        if who is None:
            return True
        wide, own = self._questions(stream, ns)
        everywhere = self.reviews.known(who, wide)
        if everywhere or (everywhere is False and own is None):
            return everywhere
        if everywhere is None:
            return None
        assert own is not None
        return self.reviews.known(who, own)

    async def _ask(self, who: Who | None, stream: Stream, ns: str) -> bool:
        if who is None:
            return True
        wide, own = self._questions(stream, ns)
        if await self.reviews.allowed(who, wide) or own is None:
            return self.reviews.known(who, wide) is True
        return await self.reviews.allowed(who, own)

    def _decided(self, aud: Audience, stream: Stream, ns: str) -> bool | None:
        if ns in aud.decided.get(stream, ()):
            return ns in aud.shown.get(stream, ())
        return None

    def _resolve(self, aud: Audience, stream: Stream, ns: str) -> None:
        """A namespace `aud` was never asked about (created after login): asked; if it may see
        it, its records now."""
        key = (aud.who, stream, ns)
        if key in self._resolving:
            return
        self._resolving.add(key)

        async def resolve() -> None:
            try:
                seen = await self._ask(aud.who, stream, ns)
            finally:
                self._resolving.discard(key)
            if ns in aud.decided.get(stream, set()):
                return  # (decided meanwhile, by a recheck or a new session)
            self._show(aud, {stream: ({ns} if seen else set(), {ns})})

        self._spawn(resolve())

    def _show(self, aud: Audience, decided: dict[Stream, tuple[set[str], set[str]]]) -> None:
        """New decisions of `aud` (per kind: the namespaces shown of those decided): the records of
        a namespace now shown are sent (as pickled for every session, `_piece`), those of one now
        hidden are sent as gone; to the sessions already sent their first picture (the others get
        theirs from `shown`)."""
        ready = [s for s in aud.sessions if s.ready]
        for stream, (shown, asked) in decided.items():
            before = aud.shown.setdefault(stream, set())
            aud.decided.setdefault(stream, set()).update(asked)
            gone: list[tuple[Hashable, Any]] = []
            index = self.by_ns.get(stream, {})
            for ns in asked:
                if ns in shown and ns not in before:
                    before.add(ns)
                    if ready and (piece := self._piece(stream, ns)):
                        for sub in ready:
                            sub.send(piece)
                elif ns not in shown and ns in before:
                    before.discard(ns)
                    if ready:
                        gone += [(k, None) for k in index.get(ns, ())]
            if gone:
                data = frame(("changes", stream, gone))
                for sub in ready:
                    sub.send(data)
        self._send_access(aud, ready)

    def _send_access(self, aud: Audience, to: list[Subscriber]) -> None:
        message = self._access(aud)
        if message != aud.access:
            data = frame(message)
            for sub in to:
                sub.send(data)
        aud.access = message

    def _access(self, aud: Audience) -> tuple[Any, ...]:
        who = aud.who
        wide = who is None or self.reviews.known(who, ("", "pods", "")) is True
        forbidden: dict[Stream, str] = {}
        if who is not None and NODES in self.informers and self.reviews.known(who, ("", "nodes", "")) is False:
            forbidden[NODES] = (f'nodes is forbidden: User "{who[0]}" cannot list resource "nodes" in API group "" '
                                "at the cluster scope")
        return ("access", {"cluster_wide": wide, "namespaces": sorted(aud.shown.get(PODS, ())),
                           "forbidden": forbidden})

    async def _decide_all(self, aud: Audience) -> dict[Stream, tuple[set[str], set[str]]]:
        """Every namespace of every kind, asked (kept answers are not asked again): each kind
        everywhere first, then, for the kinds not everywhere, each namespace."""
        who = aud.who
        asked = {stream: self._namespaces_of(stream) for stream in self.informers}
        if who is not None:
            await asyncio.gather(*(self.reviews.allowed(who, self._questions(s, "")[0]) for s, nss in asked.items()
                                   if nss))  # (a kind with nothing to decide is asked about when it has)
        decided: dict[Stream, tuple[set[str], set[str]]] = {}

        async def one(stream: Stream, ns: str) -> tuple[Stream, str, bool]:
            return stream, ns, await self._ask(who, stream, ns)

        jobs = []
        for stream, namespaces in asked.items():
            everywhere = who is None or (bool(namespaces) and self.reviews.known(who, self._questions(stream, "")[0])
                                         is True)
            decided[stream] = (set(namespaces) if everywhere else set(), set(namespaces))
            if not everywhere:
                jobs += [one(stream, ns) for ns in namespaces]
        for stream, ns, seen in await asyncio.gather(*jobs):
            if seen:
                decided[stream][0].add(ns)
        return decided

    def _namespaces_of(self, stream: Stream) -> set[str]:
        """The namespaces to decide for a kind at a session's start: for pods and namespaces every
        namespace known (the user's projects, even empty ones); for the other kinds those it has
        records in (the others are asked about when a record of theirs comes)."""
        if stream == NODES:
            return {""}
        held = {ns for ns, keys in self.by_ns.get(stream, {}).items() if keys}
        if stream in (PODS, NAMESPACES):
            held |= set(self.by_ns.get(NAMESPACES, {}))
        return held

    async def recheck(self, *, due_only: bool = False) -> None:
        """Kept answers asked again (on an RBAC change: all; on the tick: those due); what each
        audience sees follows the new answers."""
        if self._rechecking:
            self._recheck_again = self._recheck_again or not due_only
            return
        self._rechecking = True
        try:
            changed = await self.reviews.recheck_all(due_only=due_only)
            while self._recheck_again:
                self._recheck_again = False
                for who, qs in (await self.reviews.recheck_all()).items():
                    changed.setdefault(who, set()).update(qs)
        finally:
            self._rechecking = False
        for who in changed:
            aud = self.audiences.get(who)
            if aud is not None:
                self._show(aud, self._redecide(aud))

    def _redecide(self, aud: Audience) -> dict[Stream, tuple[set[str], set[str]]]:
        """Every decided namespace of `aud` again, from the kept answers."""
        out: dict[Stream, tuple[set[str], set[str]]] = {}
        for stream, asked in aud.decided.items():
            shown = {ns for ns in asked if self._visible(aud.who, stream, ns)}
            out[stream] = (shown, set(asked))
        return out

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            with contextlib.suppress(ConnectionProblem, ApiProblem, OSError):
                await self.recheck(due_only=True)

    # -- sessions ----------------------------------------------------------------------------------
    def session_end(self, user: str | None, groups: tuple[str, ...]) -> socket.socket:
        """A socket for a new session of this identity (user None: the server's own): the hub
        keeps one end, the session's process is given the other (`monitors.shared_view`)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.attach(None if user is None else who_of(user, groups), ours)
        return theirs

    def attach(self, who: Who | None, sock: socket.socket) -> None:
        """A session of `who` (None: the server's own identity) at the other end of `sock`."""
        aud = self.audiences.get(who)
        if aud is None:
            aud = self.audiences[who] = Audience(who)
        sub = Subscriber(aud)
        aud.sessions.add(sub)
        sub.task = self._spawn(self._serve(sub, sock))

    async def _serve(self, sub: Subscriber, sock: socket.socket) -> None:
        aud = sub.audience
        sock.setblocking(False)
        try:
            reader, writer = await asyncio.open_unix_connection(sock=sock)
        except OSError:
            sock.close()
            self._detach(sub)
            return
        gone = self._spawn(reader.read(1))  # (the session never writes: an answer is its end)
        try:
            writer.write(frame(("hello", {"kinds": {s: inf.kind for s, inf in self.informers.items()}})))
            self._show(aud, await self._decide_all(aud))
            # its first picture: what its audience is shown now (each namespace's records of a
            # kind as pickled for every session), then the changes from here on
            for stream, namespaces in aud.shown.items():
                for ns in sorted(namespaces):
                    if piece := self._piece(stream, ns):
                        writer.write(piece)
            writer.write(frame(aud.access or self._access(aud)))
            writer.write(frame(("synced",)))
            sub.ready = True
            await writer.drain()
            while True:
                getter = asyncio.ensure_future(sub.queue.get())
                await asyncio.wait({getter, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    break
                data = getter.result()
                while data:
                    writer.write(data)
                    data = sub.queue.get_nowait() if not sub.queue.empty() else None
                if data == b"":  # (the server is stopping)
                    break
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            gone.cancel()
            self._detach(sub)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _piece(self, stream: Stream, ns: str) -> bytes:
        """The records of kind `stream` in namespace `ns` as one frame (b"": none), pickled once
        and kept until one of them changes (`_changed`)."""
        got = self._pieces.get((stream, ns))
        if got is None:
            cache = self.informers[stream].cache
            recs = [(k, cache[k]) for k in self.by_ns.get(stream, {}).get(ns, ()) if k in cache]
            got = self._pieces[(stream, ns)] = frame(("changes", stream, recs)) if recs else b""
        return got

    def _detach(self, sub: Subscriber) -> None:
        aud = sub.audience
        aud.sessions.discard(sub)
        if not aud.sessions and self.audiences.get(aud.who) is aud:
            del self.audiences[aud.who]
            if aud.who is not None:
                self.reviews.forget(aud.who)

    @property
    def list_requests(self) -> int:
        return sum(i.lists for i in (*self.informers.values(), *self.rbac))


def _meta(obj: dict[str, Any]) -> tuple[str, str, str]:
    """An RBAC object as the door keeps it: (namespace, name, resourceVersion), its change is all
    that matters."""
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""), str(meta.get("resourceVersion") or ""))


def _said(exc: BaseException) -> str:
    if isinstance(exc, ApiProblem):
        return exc.one_line()
    return getattr(exc, "message", "") or str(exc)


async def start_hub(kubeconfig: str | None, context: str | None) -> Hub:
    """The one watch of `ranks serve --ssh`, with the server's own identity (its kubeconfig and
    context), its first picture in; SessionError (one line, exit 3) when it cannot be had."""
    from monitors.connection import load_cluster_config

    try:
        cfg = await asyncio.to_thread(load_cluster_config, kubeconfig, context)
    except ConnectionProblem as exc:
        raise SessionError(exc.message, int(exc.code)) from None
    hub = Hub(cfg)
    await hub.start()
    return hub
