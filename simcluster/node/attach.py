"""`pods/attach`: what `kubectl debug -it` and `kubectl attach` open on an ephemeral container
started with `stdin` (and `tty`).

The kubelet holds such a container's stdio for its whole run (`Console`): a pseudo-terminal when
`tty` is set (the container's controlling terminal, resized by the client), else pipes. What the
container writes goes to every attached client (channel 1, and 2 for a non-tty stderr) and is
otherwise dropped (simcluster keeps no log of ephemeral containers); what a client types goes to
its stdin. When a client leaves, the container runs on, unless `stdinOnce` is set: then its stdin
ends (an EOF typed on a terminal), as the runtime closes it after the first attach. The stream
ends when the container does, with `Success` on the error channel, as the kubelet's CRI attach
ends. The protocol is exec's WebSocket one (`exec_channels`: v5/v4.channel.k8s.io, what kubectl
1.35 speaks); attaching to a container without a console is refused with one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from ..apiserver.errors import ApiError, not_found
from . import exec_channels as chan
from .exec import CLOSE_TIMEOUT, READ_CHUNK, _set_winsize

if TYPE_CHECKING:
    from ..apiserver.server import Ctx
    from ..cluster import SimCluster

POD_KEY = ("", "pods")
Chunk = tuple[int, bytes] | None  # (channel, data); None: the container's stdio closed


class Console:
    """An attachable container's stdin and output, held by the kubelet (see the module docstring)."""

    def __init__(self, *, tty: bool, stdin_once: bool) -> None:
        self.tty = tty
        self.stdin_once = stdin_once
        self.subscribers: set[asyncio.Queue[Chunk]] = set()
        self._readers: list[int] = []
        self.closed = False
        if tty:
            self.master, slave = pty.openpty()
            self.stdin_fd: int | None = self.master
            self._child = (slave, slave, slave)
            self._outputs = [(self.master, chan.STDOUT)]
        else:
            r_in, self.stdin_fd = os.pipe()
            r_out, w_out = os.pipe()
            r_err, w_err = os.pipe()
            self.master = -1
            self._child = (r_in, w_out, w_err)
            self._outputs = [(r_out, chan.STDOUT), (r_err, chan.STDERR)]
        self._open = len(self._outputs)

    def child_stdio(self) -> tuple[int, int, int]:
        """The container's stdin, stdout and stderr (for `Popen`)."""
        return self._child

    def spawned(self) -> None:
        """The container started: the kubelet keeps only its own ends, and reads the output."""
        for fd in set(self._child):
            with contextlib.suppress(OSError):
                os.close(fd)
        loop = asyncio.get_running_loop()
        for fd, channel in self._outputs:
            os.set_blocking(fd, False)
            loop.add_reader(fd, self._readable, fd, channel)
            self._readers.append(fd)

    def _readable(self, fd: int, channel: int) -> None:
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:  # EIO: the terminal's last user left
            data = b""
        if data:
            for q in self.subscribers:
                q.put_nowait((channel, data))
            return
        asyncio.get_running_loop().remove_reader(fd)
        self._readers.remove(fd)
        self._open -= 1
        if not self._open:
            for q in self.subscribers:
                q.put_nowait(None)

    def write(self, data: bytes) -> None:
        if self.stdin_fd is None or not data:
            return
        with contextlib.suppress(OSError):  # (the container closed its stdin or ended)
            os.write(self.stdin_fd, data)

    def end_stdin(self) -> None:
        """EOF: typed on a terminal (it has no half-close), the pipe closed otherwise."""
        fd, self.stdin_fd = self.stdin_fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            if self.tty:
                os.write(fd, b"\x04")
            else:
                os.close(fd)

    def resize(self, size: tuple[int, int]) -> None:
        if self.tty and not self.closed:
            with contextlib.suppress(OSError):
                _set_winsize(self.master, size)

    def close(self) -> None:
        """The container ended: every attached stream ends, every descriptor is closed."""
        if self.closed:
            return
        self.closed = True
        loop = asyncio.get_running_loop()
        for fd in self._readers:
            loop.remove_reader(fd)
        fds = {fd for fd, _ in self._outputs} | ({self.stdin_fd} if self.stdin_fd is not None else set())
        self._readers, self.stdin_fd = [], None
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        for q in self.subscribers:
            q.put_nowait(None)


def console_for(c: dict[str, Any]) -> Console | None:
    """A console for the container spec `c` when it asks for stdin, else None."""
    if not c.get("stdin"):
        return None
    return Console(tty=bool(c.get("tty")), stdin_once=bool(c.get("stdinOnce")))


async def serve(sim: SimCluster, ctx: Ctx) -> web.StreamResponse:
    request = ctx.request
    ns, name = ctx.namespace or "default", ctx.name or ""
    st = sim.store.find(POD_KEY, ns, name)
    if st is None:
        raise not_found("pods", "", name)
    opts = chan.ExecOptions.from_query(ctx.query)
    container, err = chan.resolve_container(st.obj, opts.container)
    if err is not None or container is None:
        raise ApiError(400, err or "container not found")
    rt = sim.kubelet.runtime(ns, name) if sim.kubelet is not None else None
    run = rt.ephemeral.get(container) if rt is not None else None
    console = run.console if run is not None and run.running else None
    if console is None or console.closed:
        if rt is None or not rt.is_running(container):
            raise ApiError(400, f'container "{container}" of pod {name} is not running')
        raise ApiError(400, f'container "{container}" of pod {name} has no stdin to attach to (simcluster '
                            "attaches to ephemeral containers started with stdin: kubectl debug -i)")
    if request.headers.get("Upgrade", "").lower() != "websocket":
        raise ApiError(400, "unable to upgrade connection: simcluster serves pods/attach over WebSocket only "
                            f"({chan.V5}, {chan.V4})")
    try:
        proto = chan.negotiate(chan.offered_protocols(request.headers.getall("Sec-WebSocket-Protocol", [])))
    except chan.ProtocolError as exc:
        raise ApiError(400, str(exc)) from None
    if not opts.stdin and not opts.stdout and not opts.stderr:
        raise ApiError(400, "you must specify at least 1 of stdin, stdout, stderr")
    ws = web.WebSocketResponse(protocols=(proto.name,) if proto.name else (), compress=False, autoping=True,
                               timeout=CLOSE_TIMEOUT, max_msg_size=16 * 1024 * 1024, decode_text=False)
    await ws.prepare(request)
    await _stream(ws, proto, opts, console)
    return ws


async def _stream(ws: web.WebSocketResponse, proto: chan.Protocol, opts: chan.ExecOptions, console: Console) -> None:
    """One client on the console, until the container ends (Success) or the client leaves."""
    queue: asyncio.Queue[Chunk] = asyncio.Queue()
    console.subscribers.add(queue)
    resize = chan.ResizeParser()

    async def send(channel: int, data: bytes) -> None:
        frame = chan.encode(proto, channel, data)
        await (ws.send_bytes(frame) if proto.binary else ws.send_str(frame.decode("ascii")))

    async def from_client() -> None:
        async for msg in ws:
            if msg.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
                continue
            data = msg.data if isinstance(msg.data, bytes) else str(msg.data).encode()
            frame = chan.decode(proto, data)
            if frame is None:
                continue
            if frame.channel == chan.STDIN and opts.stdin:
                if frame.close:
                    console.end_stdin()
                else:
                    console.write(frame.data)
            elif frame.channel == chan.RESIZE and opts.tty:
                for size in resize.feed(frame.data):
                    console.resize(size)

    reader = asyncio.ensure_future(from_client())
    try:
        await send(opts.first_channel, b"")
        while True:
            getting = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getting, reader}, return_when=asyncio.FIRST_COMPLETED)
            if getting not in done:
                getting.cancel()
                return  # the client left
            chunk = getting.result()
            if chunk is None:
                payload = chan.status_payload(chan.success_status(), proto)
                if payload is not None:
                    await send(chan.ERROR, payload)
                return
            channel, data = chunk
            if (channel == chan.STDOUT and opts.stdout) or (channel == chan.STDERR and opts.stderr):
                await send(channel, data)
    except (ConnectionError, RuntimeError):
        return
    finally:
        console.subscribers.discard(queue)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
        if console.stdin_once and opts.stdin:
            console.end_stdin()
        with contextlib.suppress(Exception):
            await ws.close()


def install(sim: SimCluster) -> None:
    async def handler(ctx: Ctx) -> web.StreamResponse:
        return await serve(sim, ctx)

    sim.server.subresources["pods/attach"] = handler
