"""The SSH door's one watch, as a session sees it (`ranks serve --ssh`; the door's side is
`sessions.ssh.hub`).

The door lists and watches the cluster once, with its own identity, and hands each session the
part its user may read, as the API server decides it (SubjectAccessReviews): over a socket the
server made for this session alone (`$RANKS_SHARED_VIEW_FD`), so the session is whoever the server
made it for, never what it says. The session reads, never writes; the door sends frames (a 4-byte
length, then a pickle: the server's own records, read only by its own sessions):

- `("hello", {"kinds": {(group, plural): Kind}})`: what the cluster serves (no discovery here);
- `("access", {"cluster_wide": bool, "namespaces": [...], "forbidden": {stream: message}})`:
  whether the user may list pods in every namespace, else where they may; the kinds they may not
  list at all (shown as forbidden, as a LIST of theirs would be);
- `("changes", stream, [(key, record or None), ...])`: what changed of a kind (`stream`:
  (group, plural)) that the user may see: added or changed records, None for a record gone or no
  longer theirs to see (access revoked);
- `("state", stream, state, message)`: the door's informer of a kind is retrying or synced again;
- `("synced",)`: the first complete picture has been sent.

`SharedView` keeps, per kind, the records this user may see (the informers of the session's
`Monitor` are `SharedInformer`s over it: no request of theirs reaches the API server); actions and
the reads of single objects still go to the API server as the user (impersonation).
"""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import struct
from collections.abc import Callable, Hashable
from typing import Any

from .informer import Change, Informer, InformerState
from .kube import Kind

ENV = "RANKS_SHARED_VIEW_FD"
HEADER = struct.Struct("!I")
Stream = tuple[str, str]  # (group, plural)


def frame(message: tuple[Any, ...]) -> bytes:
    """One message as the door sends it."""
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


class SharedView:
    """The session's end of the door's one watch: what this user may see, kind by kind."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.kinds: dict[Stream, Kind] = {}
        self.cluster_wide = False
        self.namespaces: tuple[str, ...] = ()
        self.forbidden: dict[Stream, str] = {}
        self.states: dict[Stream, tuple[str, str]] = {}
        self.caches: dict[Stream, dict[Hashable, Any]] = {}
        self.listeners: dict[Stream, list[Callable[[list[tuple[Hashable, Any]]], None]]] = {}
        self.state_listeners: list[Callable[[Stream], None]] = []
        self.access_listeners: list[Callable[[], None]] = []  # told when the user's access changed
        self.hello = asyncio.Event()
        self.synced = asyncio.Event()
        self.closed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_environment(cls) -> SharedView | None:
        """The view the door handed this process (`$RANKS_SHARED_VIEW_FD`), None without one."""
        text = os.environ.get(ENV, "")
        if not text.isdigit():
            return None
        try:
            os.set_inheritable(int(text), False)  # (not for what this process starts)
            sock = socket.socket(fileno=int(text))
        except OSError:
            return None
        os.environ.pop(ENV, None)  # (taken once: what this process starts does not inherit it)
        return cls(sock)

    def start(self) -> None:
        """Read the door's messages on the running loop (once; later calls do nothing)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._read(), name="shared view")

    async def _read(self) -> None:
        self.sock.setblocking(False)
        try:
            reader, _writer = await asyncio.open_unix_connection(sock=self.sock, limit=1 << 20)
            while True:
                head = await reader.readexactly(HEADER.size)
                (size,) = HEADER.unpack(head)
                self.apply(pickle.loads(await reader.readexactly(size)))
        except (asyncio.IncompleteReadError, OSError):
            pass
        finally:
            self.closed.set()
            self.hello.set()  # (nobody waits for what will never come)
            self.synced.set()

    def apply(self, message: tuple[Any, ...]) -> None:
        """One message of the door (see the module's docstring)."""
        what = message[0]
        if what == "hello":
            self.kinds = dict(message[1]["kinds"])
            self.hello.set()
        elif what == "access":
            info = message[1]
            self.cluster_wide = bool(info["cluster_wide"])
            self.namespaces = tuple(info["namespaces"])
            before = set(self.forbidden)
            self.forbidden = dict(info["forbidden"])
            for stream in before | set(self.forbidden):
                for fn in self.state_listeners:
                    fn(stream)
            for told in list(self.access_listeners):
                told()
        elif what == "changes":
            stream, changes = message[1], message[2]
            cache = self.caches.setdefault(stream, {})
            for key, rec in changes:
                if rec is None:
                    cache.pop(key, None)
                else:
                    cache[key] = rec
            for listener in self.listeners.get(stream, ()):
                listener(changes)
        elif what == "state":
            self.states[message[1]] = (message[2], message[3])
            for fn in self.state_listeners:
                fn(message[1])
        elif what == "synced":
            self.synced.set()

    def listen(self, stream: Stream, fn: Callable[[list[tuple[Hashable, Any]]], None]) -> None:
        self.listeners.setdefault(stream, []).append(fn)

    def unlisten(self, stream: Stream, fn: Callable[[list[tuple[Hashable, Any]]], None]) -> None:
        with_fn = self.listeners.get(stream, [])
        if fn in with_fn:
            with_fn.remove(fn)


class SharedInformer(Informer[Any, Any]):
    """An informer of one kind fed by the door's view (`SharedView`) instead of a LIST and a WATCH:
    the same cache, states and changes to its sink, no request."""

    def __init__(self, *args: Any, view: SharedView, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.view = view
        self.stream: Stream = (self.kind.group, self.kind.plural)

    async def run(self) -> None:
        view = self.view
        await view.synced.wait()
        self._install(dict(view.caches.get(self.stream, {})), "shared")
        self._state_now(self.stream)
        view.listen(self.stream, self._changes)
        view.state_listeners.append(self._state_now)
        try:
            await view.closed.wait()
            self._set_state(InformerState.RETRYING, "the SSH server's view of the cluster ended")
            await asyncio.Event().wait()  # (until stopped)
        finally:
            view.unlisten(self.stream, self._changes)
            if self._state_now in view.state_listeners:
                view.state_listeners.remove(self._state_now)

    def _changes(self, batch: list[tuple[Hashable, Any]]) -> None:
        out: list[Change[Any, Any]] = []
        for key, rec in batch:
            prev = self.cache.get(key)
            if rec is None:
                if prev is not None:
                    del self.cache[key]
                    out.append(Change("removed", key, prev, None))
            elif prev != rec:
                self.cache[key] = rec
                out.append(Change("added" if prev is None else "changed", key, prev, rec))
        if out:
            self.sink(self, out)

    def _state_now(self, stream: Stream) -> None:
        if stream != self.stream:
            return
        if stream in self.view.forbidden:
            self._set_state(InformerState.FORBIDDEN, self.view.forbidden[stream])
            return
        state, message = self.view.states.get(stream, ("synced", ""))
        self._set_state(InformerState.RETRYING if state == "retrying" else InformerState.SYNCED, message)
