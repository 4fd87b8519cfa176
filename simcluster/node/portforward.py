"""`pods/portforward`: a TCP connection to a port a pod's process listens on, over a WebSocket.

Installed with the `exec` component (the kubelet's streaming server serves both). The wire forms
a real API server and kubelet answer:

- `SPDY/3.1+portforward.k8s.io` (kubectl since 1.31, client-go's `tools/portforward` tunnelling
  dialer): the WebSocket's binary messages carry a SPDY/3.1 session (`spdy`); or, kubectl's
  fallback (the WebSocket refused, or KUBECTL_PORT_FORWARD_WEBSOCKETS=false), the same session
  on the connection itself: `Upgrade: SPDY/3.1` with `X-Stream-Protocol-Version:
  portforward.k8s.io` answered `101 Switching Protocols` (`rawlink`). For each local
  connection the client opens an error stream and a data stream (headers `streamType`, `port`,
  `requestID`); each gets a SYN_REPLY; once both of a request are there the pod's port is dialled
  and bytes flow on the data stream (a FIN from the client half-closes the pod connection; the
  pod's end of file is a FIN back); what went wrong is written on the error stream, which is then
  closed (the client waits for that end).
- `v4.channel.k8s.io` / `v4.base64.channel.k8s.io` (or no subprotocol: the kubelet's own
  WebSocket server; the official Python client's `portforward`): `?ports=P[,Q]`, one connection
  per port for the life of the socket; port i has channel 2i for data and 2i+1 for errors, and
  the server's first frame on each is the port as 2 bytes, little-endian. The socket ends when
  every port's connection has ended.

The port is the pod's when one of its processes listens on it (`listeners`: its pod address,
127.0.0.1 or every address; the pods share the machine's network); a port nothing of the pod
listens on is refused as the kubelet (containerd) words it, on the error stream. Pods the kubelet
does not run (the DCGM exporters) are reached through `sim.portmap`. The sessions of a pod end
when it is deleted.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import TYPE_CHECKING, Any, Protocol, cast

from aiohttp import WSMsgType, web

from ..apiserver.errors import ApiError, not_found
from ..apiserver.store import Event
from . import spdy
from .exec_channels import offered_protocols
from .listeners import dial_address, listening
from .podconn import PodConn
from .rawlink import RawLink

if TYPE_CHECKING:
    from ..apiserver.server import Ctx
    from ..cluster import SimCluster

log = logging.getLogger("simcluster.portforward")

POD_KEY = ("", "pods")
SPDY_PROTOCOL = "portforward.k8s.io"  # (X-Stream-Protocol-Version)
PROTOCOL_HEADER = "X-Stream-Protocol-Version"
TUNNEL = f"SPDY/3.1+{SPDY_PROTOCOL}"
CHANNELS = ("v4.channel.k8s.io", "v4.base64.channel.k8s.io")
BUFFER = 4 << 20  # bytes buffered per direction before a side waits (asyncio's 64 KiB halves throughput)
CONNECT_TIMEOUT = 5.0


def install(sim: SimCluster) -> PortForwardService:
    svc = PortForwardService(sim)
    sim.server.subresources["pods/portforward"] = svc.handle
    sim.store.listen(svc.on_event)
    sim.on_stop(svc.stop)
    return svc


class Closable(Protocol):
    async def close(self) -> Any: ...


Send = Callable[[bytes], Awaitable[None]]
Receive = Callable[[], Awaitable["bytes | None"]]


class Refused(Exception):
    """The kubelet's words for a port it cannot reach (written on the error stream)."""


def parse_ports(values: list[str]) -> list[int]:
    """`ports` query values (repeated or comma-separated), checked as the kubelet checks them."""
    ports: list[int] = []
    for value in values:
        if not value:
            raise ApiError(400, 'query parameter "port" cannot be empty')
        for p in value.split(","):
            if not p.isdigit() or not 0 < int(p) < 65536:
                raise ApiError(400, f'unable to parse "{p}" as a port: must be 1-65535')
            ports.append(int(p))
    if not ports:
        raise ApiError(400, 'query parameter "port" is required')
    return ports


class PortForwardService:
    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.sessions: dict[tuple[str, str], set[Closable]] = {}  # the connections to each pod
        self.forwarded = 0  # connections made to a pod's port

    async def handle(self, ctx: Ctx) -> web.StreamResponse:
        request = ctx.request
        ns, name = ctx.namespace or "default", ctx.name or ""
        st = self.sim.store.find(POD_KEY, ns, name)
        if st is None:
            raise not_found("pods", "", name)
        pod = st.obj
        if not (pod.get("spec") or {}).get("nodeName"):
            raise ApiError(400, f"pod {name} does not have a host assigned")
        upgrade = request.headers.get("Upgrade", "").lower()
        if upgrade != "websocket":
            if "spdy/3.1" in upgrade:
                return await self.spdy_upgrade(ctx, pod)
            raise ApiError(400, "Upgrade request required")
        offered = offered_protocols(request.headers.getall("Sec-WebSocket-Protocol", []))
        chosen = next((p for p in offered if p == TUNNEL or p in CHANNELS), None)
        if offered and chosen is None:
            raise ApiError(400, f"requested protocol(s) are not supported: [{' '.join(offered)}]; "
                                f"supports [{TUNNEL} {' '.join(CHANNELS)}]")
        ports = parse_ports(list(ctx.query.getall("ports", []))) if chosen != TUNNEL else []
        self._on_its_node(ns, name)
        uid = str(pod["metadata"].get("uid", ""))
        ws = web.WebSocketResponse(protocols=(chosen,) if chosen else (), compress=False, autoping=True,
                                   timeout=5.0, max_msg_size=64 * 1024 * 1024)
        await ws.prepare(request)
        with contextlib.suppress(AttributeError, RuntimeError):
            request.transport.set_write_buffer_limits(high=BUFFER)  # type: ignore[union-attr]
        if chosen == TUNNEL:
            await self._serve(ns, name, ws, SpdySession.over_websocket(self, ws, ns, name, uid))
        else:
            await self._serve(ns, name, ws, ChannelSession(self, ws, chosen != CHANNELS[1], ns, name, uid, ports))
        return ws

    async def spdy_upgrade(self, ctx: Ctx, pod: dict[str, Any]) -> web.StreamResponse:
        """SPDY/3.1 on the connection itself (kubectl's fallback when the WebSocket is refused, and
        with KUBECTL_PORT_FORWARD_WEBSOCKETS=false), as the kubelet's `handleHTTPStreams` answers it:
        the protocol negotiated from `X-Stream-Protocol-Version`, then `101 Switching Protocols`."""
        request, ns, name = ctx.request, ctx.namespace or "default", ctx.name or ""
        if "upgrade" not in request.headers.get("Connection", "").lower():
            raise ApiError(400, "unable to upgrade: missing upgrade headers in request")
        offered = offered_protocols(request.headers.getall(PROTOCOL_HEADER, []))
        if not offered:
            raise ApiError(400, f"unable to upgrade: {PROTOCOL_HEADER} is required")
        if SPDY_PROTOCOL not in offered:
            raise ApiError(403, f"unable to upgrade: unable to negotiate protocol: client supports "
                                f"[{' '.join(offered)}], server accepts [{SPDY_PROTOCOL}]",
                           headers={"X-Accepted-Stream-Protocol-Versions": SPDY_PROTOCOL})
        self._on_its_node(ns, name)
        uid = str(pod["metadata"].get("uid", ""))
        link = RawLink(request)
        await link.send(("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                         f"{PROTOCOL_HEADER}: {SPDY_PROTOCOL}\r\nDate: {formatdate(usegmt=True)}\r\n\r\n").encode())
        await self._serve(ns, name, link, SpdySession(self, link.send, link.receive, ns, name, uid,
                                                      _encrypts_at_once(request.transport)))
        return web.StreamResponse(status=101)  # (not sent: the connection is closed; aiohttp ends the request)

    def _on_its_node(self, ns: str, name: str) -> None:
        if self.sim.kubelet is None or (self.sim.kubelet.runtime(ns, name) is None
                                        and not (self.sim.portmap and self.sim.portmap.pod_ports(ns, name))):
            raise ApiError(404, f'pod "{name}" not found on its node')

    async def _serve(self, ns: str, name: str, conn: Closable, session: SpdySession | ChannelSession) -> None:
        key = (ns, name)
        self.sessions.setdefault(key, set()).add(conn)
        try:
            await session.run()
        except Exception:
            log.exception("port-forward %s/%s failed", ns, name)
        finally:
            self.sessions.get(key, set()).discard(conn)
            with contextlib.suppress(Exception):
                await conn.close()

    async def dial(self, ns: str, name: str, uid: str, port: int) -> PodConn:
        """A connection to the pod's `port` (`Refused` with the kubelet's words)."""
        st = self.sim.store.find(POD_KEY, ns, name)
        kubelet = self.sim.kubelet
        rt = kubelet.runtime(ns, name) if kubelet is not None else None
        sandbox = uid.replace("-", "")
        refused = Refused(
            f"error forwarding port {port} to pod {sandbox}, uid : failed to execute portforward in network "
            f'namespace "/var/run/netns/cni-{uid}": failed to connect to localhost:{port} inside namespace '
            f'"{sandbox}", IPv4: dial tcp4 127.0.0.1:{port}: connect: connection refused IPv6 dial tcp6 '
            f"[::1]:{port}: connect: connection refused ")
        if st is None or str(st.obj["metadata"].get("uid", "")) != uid:
            raise Refused(f"error forwarding port {port} to pod {sandbox}, uid : pod not found")
        target: tuple[str, int] | None
        if rt is not None:
            bound = (await asyncio.to_thread(listening, rt.pids(), port)).get(port)
            target = (dial_address(bound), port) if bound else None
        else:
            target = self.sim.portmap.lookup(ns, name, port) if self.sim.portmap else None
        if target is None:
            raise refused
        try:
            conn = await PodConn.connect(target[0], target[1], CONNECT_TIMEOUT)
        except (OSError, TimeoutError):
            raise refused from None
        self.forwarded += 1
        return conn

    def on_event(self, ev: Event) -> None:
        if ev.tkey != POD_KEY or ev.type != "DELETED" or not self.sessions:
            return
        meta = ev.obj.get("metadata", {})
        for ws in list(self.sessions.get((meta.get("namespace", ""), meta.get("name", "")), ())):
            asyncio.get_running_loop().create_task(ws.close())

    async def stop(self) -> None:
        for sockets in list(self.sessions.values()):
            for ws in list(sockets):
                with contextlib.suppress(Exception):
                    await ws.close()


def _encrypts_at_once(conn: Any) -> bool:
    """The connection (a WebSocket, a transport) is TLS: what is written to it is encrypted
    before the write returns (asyncio's and uvloop's SSL transports), so a buffer written from
    may be filled again."""
    return conn is not None and conn.get_extra_info("ssl_object") is not None


def _close(conn: PodConn | None) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()


class ChannelSession:
    """The v4 channel protocol: one pod connection per port of `?ports=`."""

    def __init__(self, svc: PortForwardService, ws: web.WebSocketResponse, binary: bool,
                 ns: str, name: str, uid: str, ports: list[int]) -> None:
        self.svc, self.ws, self.binary = svc, ws, binary
        self.encrypted = _encrypts_at_once(ws)
        self.ns, self.name, self.uid, self.ports = ns, name, uid, ports
        loop = asyncio.get_running_loop()
        self.writers: list[asyncio.Future[PodConn | None]] = [loop.create_future() for _ in ports]

    async def send(self, channel: int, data: bytes) -> None:
        if self.binary:
            await self.ws.send_bytes(bytes((channel,)) + data)
        else:
            await self.ws.send_str(chr(ord("0") + channel) + base64.b64encode(data).decode())

    async def run(self) -> None:
        for i, port in enumerate(self.ports):
            await self.send(2 * i, port.to_bytes(2, "little"))
            await self.send(2 * i + 1, port.to_bytes(2, "little"))
        forwards = [asyncio.create_task(self.forward(i, p)) for i, p in enumerate(self.ports)]
        reader: asyncio.Future[None] = asyncio.ensure_future(self.read_client())
        every: asyncio.Future[None] = asyncio.ensure_future(self._all(forwards))
        try:
            await asyncio.wait([reader, every], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, every, *forwards):
                task.cancel()
            for fut in self.writers:
                if fut.done() and not fut.cancelled():
                    _close(fut.result())

    @staticmethod
    async def _all(forwards: list[asyncio.Task[None]]) -> None:
        await asyncio.gather(*forwards)

    async def forward(self, i: int, port: int) -> None:
        try:
            conn = await self.svc.dial(self.ns, self.name, self.uid, port)
        except Refused as exc:
            self.writers[i].set_result(None)
            await self.send(2 * i + 1, str(exc).encode())
            return
        self.writers[i].set_result(conn)
        if not self.binary:
            await conn.pump(0, lambda region, _n: self.send(2 * i, bytes(region)))
            return

        async def send(region: memoryview, _n: int) -> None:
            region[0] = 2 * i  # (the channel's byte, in the room left before the bytes read)
            await self.ws.send_bytes(cast(bytes, region))  # (aiohttp sends a memoryview as it is)

        await conn.pump(1, send, reuse=self.encrypted)

    async def read_client(self) -> None:
        async for msg in self.ws:
            if msg.type == WSMsgType.BINARY:
                payload: bytes = msg.data
                if not payload:
                    continue
                channel, data = payload[0], payload[1:]
            elif msg.type == WSMsgType.TEXT:
                text: str = msg.data
                if not text:
                    continue
                channel = ord(text[0]) - ord("0")
                try:
                    data = base64.b64decode(text[1:])
                except ValueError:
                    continue
            else:
                break
            i = channel // 2
            if channel % 2 or not 0 <= i < len(self.writers) or not data:
                continue
            conn = await self.writers[i]
            if conn is not None:
                with contextlib.suppress(ConnectionError):
                    await conn.write(data)


@dataclass
class _Request:
    """One forwarded connection of a SPDY session: its two streams and its pod connection."""

    port: int
    data: int = 0
    error: int = 0
    conn: PodConn | None = None
    pending: list[bytes] = field(default_factory=list)
    client_done: bool = False
    task: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)


class SpdySession:
    """A SPDY/3.1 session (kubectl's): tunnelled in the WebSocket (`over_websocket`), or on the
    upgraded connection itself (`RawLink`)."""

    def __init__(self, svc: PortForwardService, send: Send, receive: Receive, ns: str, name: str, uid: str,
                 encrypted: bool) -> None:
        self.svc, self.send, self.receive, self.ns, self.name, self.uid = svc, send, receive, ns, name, uid
        self.encrypted = encrypted
        self.parser = spdy.Parser()
        self.out = spdy.Writer()
        self.requests: dict[str, _Request] = {}
        self.by_stream: dict[int, _Request] = {}

    @classmethod
    def over_websocket(cls, svc: PortForwardService, ws: web.WebSocketResponse, ns: str, name: str, uid: str
                       ) -> SpdySession:
        async def receive() -> bytes | None:
            msg = await ws.receive()
            return msg.data if msg.type == WSMsgType.BINARY else None

        return cls(svc, ws.send_bytes, receive, ns, name, uid, _encrypts_at_once(ws))

    async def run(self) -> None:
        try:
            while (data := await self.receive()) is not None:
                for frame in self.parser.feed(data):
                    if not await self.on_frame(frame):
                        return
        except spdy.SpdyError as exc:
            log.info("port-forward %s/%s: %s", self.ns, self.name, exc)
        finally:
            for req in self.requests.values():
                if req.task is not None:
                    req.task.cancel()
                _close(req.conn)

    async def on_frame(self, frame: spdy.Frame) -> bool:
        if not frame.control:
            req = self.by_stream.get(frame.stream)
            if req is not None and frame.stream == req.data:
                await self.client_data(req, frame.data, frame.fin)
            return True
        if frame.kind == spdy.SYN_STREAM:
            await self.send(self.out.syn_reply(frame.stream))
            self.new_stream(frame)
        elif frame.kind == spdy.RST_STREAM:
            req = self.by_stream.get(frame.stream)
            if req is not None:
                if req.task is not None:
                    req.task.cancel()
                _close(req.conn)
        elif frame.kind == spdy.PING:
            await self.send(spdy.ping(frame.value))
        elif frame.kind == spdy.GOAWAY:
            return False
        return True

    def new_stream(self, frame: spdy.Frame) -> None:
        def one(name: str) -> str:
            return (frame.headers.get(name) or [""])[0]

        kind, port_s, rid = one("streamtype"), one("port"), one("requestid")
        if not rid:  # (a client older than the header: the kubelet pairs error N with data N+2)
            rid = str(frame.stream - 2 if kind == "data" else frame.stream)
        req = self.requests.get(rid)
        if req is None:
            req = self.requests[rid] = _Request(int(port_s) if port_s.isdigit() else 0)
        if kind == "data":
            req.data = frame.stream
        elif kind == "error":
            req.error = frame.stream
        else:
            return
        self.by_stream[frame.stream] = req
        if req.data and req.error and req.task is None:
            req.task = asyncio.ensure_future(self.forward(req))

    async def client_data(self, req: _Request, data: bytes, fin: bool) -> None:
        if not req.ready.is_set():
            if data:
                req.pending.append(data)
            req.client_done = req.client_done or fin
            return
        if req.conn is None:
            return
        with contextlib.suppress(ConnectionError, OSError):
            if data:
                await req.conn.write(data)
            if fin:
                req.conn.write_eof()

    async def forward(self, req: _Request) -> None:
        try:
            if not 0 < req.port < 65536:
                raise Refused(f"invalid port header: {req.port}")
            req.conn = await self.svc.dial(self.ns, self.name, self.uid, req.port)
        except Refused as exc:
            req.ready.set()
            await self.send(spdy.data_frame(req.error, str(exc).encode()))
            await self.send(spdy.data_frame(req.error, b"", fin=True))
            await self.send(spdy.data_frame(req.data, b"", fin=True))
            return
        pending, req.pending = req.pending, []
        req.ready.set()
        for data in pending:
            await self.client_data(req, data, False)
        if req.client_done:
            await self.client_data(req, b"", True)
        async def send(region: memoryview, n: int) -> None:
            region[:spdy.DATA_HEADER] = spdy.data_header(req.data, n)  # (in the room left before the bytes)
            await self.send(cast(bytes, region))  # (aiohttp sends a memoryview as it is)

        await req.conn.pump(spdy.DATA_HEADER, send, reuse=self.encrypted)
        await self.send(spdy.data_frame(req.data, b"", fin=True))
        await self.send(spdy.data_frame(req.error, b"", fin=True))
        _close(req.conn)
