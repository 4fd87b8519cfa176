"""A WebSocket of Kubernetes' channel protocol (`v4.channel.k8s.io`), the client's end, on a
connection of its own: each channel's bytes streamed as they arrive, read straight into one buffer.

    sock = await ChannelSocket.connect(client, "/api/v1/namespaces/ns/pods/p/portforward",
                                       [("ports", "8888")], "v4.channel.k8s.io")
    channel, body = await sock.receive()       # whole messages, until `stream` is called
    sock.stream(lambda channel, piece: ...)    # then each piece of a message as it comes
    sock.send(0, b"GET / HTTP/1.1...")         # one message: the channel's byte, then the data
    await sock.drain()
    await sock.closed                          # the server's close, or the connection's end

For the port-forward relay (`sessions.portforward`): a message API (aiohttp's WebSocket) copies
each message three times on its way, holds a message back until it is whole, and pauses the
socket after every message over its 128 KiB queue, which kept a forward near a third of a direct
connection. Here the TLS layer decrypts into this protocol's buffer (`asyncio.BufferedProtocol`)
and each piece of a data frame is handed on as it is read (one copy, into the `bytes` given on).

RFC 6455 as a client speaks it: the upgrade (`Sec-WebSocket-Key` and the server's `Accept`
checked, the subprotocol the server must echo), frames to the server masked with a random key,
the server's frames unmasked, fragmented messages (the channel is the message's first byte),
ping answered with pong, close answered with close. No extension is offered (no compression).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import hashlib
import importlib
import os
import ssl
import struct
import urllib.parse
from collections.abc import Callable

from monitors.kube import KubeClient


def _mask_python(key: bytes, data: bytearray) -> None:
    for i in range(4):
        data[i::4] = data[i::4].translate(bytes(b ^ key[i] for b in range(256)))


def _compiled_mask() -> Callable[[bytes, bytearray], None]:
    """aiohttp's compiled masking (RFC 6455 5.3, in place), else the same in Python."""
    try:
        helpers = importlib.import_module("aiohttp._websocket.helpers")
    except ImportError:  # pragma: no cover
        return _mask_python
    return getattr(helpers, "websocket_mask", _mask_python)


_mask = _compiled_mask()

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
BUFFER = 512 * 1024  # the receive buffer (what one read may fill: TLS holds back 256 KiB at most)
ROOM = 64 * 1024  # less free room than this at the buffer's end: what is left moves to its start
HEAD_LIMIT = 64 * 1024  # the upgrade's answer (status line and headers)
CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
HANDSHAKE_TIMEOUT = 60.0  # seconds for the connection, TLS and the upgrade's answer (a client's timeout wins)

Sink = Callable[[int, bytes], None]


class HandshakeRefused(Exception):
    """The server answered the upgrade with something other than 101 (its status and reason)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status, self.message = status, reason


class ProtocolError(Exception):
    """The server broke RFC 6455 (or answered the upgrade wrongly): the connection is closed."""


def frame_header(opcode: int, length: int, *, masked: bool) -> bytes:
    """The first bytes of a final frame of `length` payload bytes (without the masking key)."""
    first, bit = 0x80 | opcode, 0x80 if masked else 0
    if length < 126:
        return struct.pack("!BB", first, bit | length)
    if length < 1 << 16:
        return struct.pack("!BBH", first, bit | 126, length)
    return struct.pack("!BBQ", first, bit | 127, length)


class ChannelSocket(asyncio.BufferedProtocol):
    """One WebSocket of the channel protocol (see the module docstring)."""

    def __init__(self, key: bytes, protocol: str) -> None:
        self._key, self._protocol = key, protocol
        loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.upgraded: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()  # the server's close or the connection's end
        self.close_code: int | None = None
        self._buf = bytearray(BUFFER)
        self._view = memoryview(self._buf)
        self._start = self._end = 0
        self._head = True  # still reading the upgrade's answer
        self._need = 0  # payload bytes of the current data frame still to come
        self._fin = False
        self._in_message = False
        self._channel = -1  # the current message's channel (-1: its first byte is still to come)
        self._message = bytearray()  # the current message, while messages are assembled
        self._messages: collections.deque[tuple[int, bytes]] = collections.deque()
        self._arrived: asyncio.Future[None] | None = None
        self._sink: Sink | None = None
        self._close_sent = False
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None

    # -- connecting -------------------------------------------------------------------------------------

    @classmethod
    async def connect(cls, client: KubeClient, path: str, params: list[tuple[str, str]], protocol: str
                      ) -> ChannelSocket:
        """The upgraded socket (`HandshakeRefused` with the server's status; `ConnectionProblem`
        when the server cannot be reached). A 401 reads the kubeconfig again and, when the
        credentials changed, asks once more (as `KubeClient.websocket`)."""
        refreshed = False
        while True:
            headers = client.headers("*/*")
            sent = client.credentials_sent(headers)
            try:
                return await cls._connect(client, path, params, protocol, headers)
            except HandshakeRefused as exc:
                if exc.status == 401 and not refreshed:
                    refreshed = True
                    if await client.credentials_rejected(sent):
                        continue
                raise

    @classmethod
    async def _connect(cls, client: KubeClient, path: str, params: list[tuple[str, str]], protocol: str,
                       headers: list[tuple[str, str]]) -> ChannelSocket:
        url = urllib.parse.urlsplit(client.server)
        target = urllib.parse.quote(url.path.rstrip("/") + path) + (f"?{urllib.parse.urlencode(params)}" if params else "")
        made = client.tls_context()
        tls = made if isinstance(made, ssl.SSLContext) else None  # (False: the server's URL is http)
        key = base64.b64encode(os.urandom(16))
        sock = cls(key, protocol)
        host = url.hostname or ""
        port = url.port or (443 if tls else 80)
        authority = f"[{host}]" if ":" in host else host
        if url.port:
            authority += f":{port}"
        lines = [f"GET {target} HTTP/1.1", f"Host: {authority}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key.decode()}", "Sec-WebSocket-Version: 13",
                 f"Sec-WebSocket-Protocol: {protocol}", *(f"{k}: {v}" for k, v in headers)]
        if any(c in line for line in lines for c in "\r\n\0"):
            raise ProtocolError("a header of the upgrade holds a line break")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(client.timeout or HANDSHAKE_TIMEOUT):
                await loop.create_connection(
                    lambda: sock, host, port, ssl=tls,
                    server_hostname=(client.server_hostname or host) if tls else None)
                assert sock.transport is not None
                sock.transport.write(request)
                await sock.upgraded
        except (HandshakeRefused, ProtocolError):
            sock.abort()
            raise
        except (OSError, TimeoutError) as exc:  # (ssl.SSLError is an OSError)
            sock.abort()
            raise client.connection_problem(exc) from None
        return sock

    # -- receiving ----------------------------------------------------------------------------------------

    async def receive(self) -> tuple[int, bytes] | None:
        """The next whole message as (channel, body); None once the socket is closed."""
        while not self._messages:
            if self.closed.done():
                return None
            self._arrived = asyncio.get_running_loop().create_future()
            await asyncio.wait([self._arrived, self.closed], return_when=asyncio.FIRST_COMPLETED)
        return self._messages.popleft()

    def stream(self, sink: Sink) -> list[tuple[int, bytes]]:
        """From now on each piece of a message goes to `sink(channel, piece)` as it is read; the
        messages received and not yet taken (and the start of the current one) are returned."""
        left = list(self._messages)
        self._messages.clear()
        if self._message and self._channel >= 0:
            left.append((self._channel, bytes(self._message)))
        self._message = bytearray()
        self._sink = sink
        return left

    def pause_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    # -- sending ------------------------------------------------------------------------------------------

    def send(self, channel: int, data: bytes) -> None:
        """One binary message on `channel` (masked, as a client's frames must be)."""
        payload = bytearray(1 + len(data))
        payload[0] = channel
        payload[1:] = data
        self._send_frame(BINARY, payload)

    async def drain(self) -> None:
        """Wait while the connection's write buffer is over its high mark (ConnectionResetError
        once the socket is closed)."""
        if self.closed.done() or self.transport is None or self.transport.is_closing():
            raise ConnectionResetError("the WebSocket is closed")
        if self._write_paused:
            if self._drained is None or self._drained.done():
                self._drained = asyncio.get_running_loop().create_future()
            await asyncio.wait([self._drained, self.closed], return_when=asyncio.FIRST_COMPLETED)

    def close(self, code: int = 1000) -> None:
        """Say close (once) and close the connection (what is written is sent first)."""
        if self.transport is None or self.transport.is_closing():
            return
        if not self._close_sent and not self._head:
            self._close_sent = True
            self._send_frame(CLOSE, bytearray(struct.pack("!H", code)))
        self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def _send_frame(self, opcode: int, payload: bytearray) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        key = os.urandom(4)
        _mask(key, payload)
        self.transport.writelines([frame_header(opcode, len(payload), masked=True) + key, payload])

    # -- asyncio.BufferedProtocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # (uvloop's is no asyncio.Transport subclass)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._start == self._end:
            self._start = self._end = 0
        elif len(self._buf) - self._end < ROOM and self._start:
            left = self._end - self._start
            self._buf[:left] = self._view[self._start:self._end]
            self._start, self._end = 0, left
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        try:
            if self._head and not self._read_head():
                return
            self._read_frames()
        except ProtocolError as exc:
            self._fail(exc)

    def eof_received(self) -> bool | None:
        return None  # (the transport closes)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.upgraded.done():
            self.upgraded.set_exception(exc or ConnectionResetError("the server closed the connection"))
        if not self.closed.done():
            self.closed.set_result(None)
        for waiter in (self._drained, self._arrived):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    # -- parsing --------------------------------------------------------------------------------------------

    def _fail(self, exc: Exception) -> None:
        if not self.upgraded.done():
            self.upgraded.set_exception(exc)
        self.abort()

    def _read_head(self) -> bool:
        """The upgrade's answer, once whole: checked (True: frames follow)."""
        end = self._buf.find(b"\r\n\r\n", self._start, self._end)
        if end < 0:
            if self._end - self._start > HEAD_LIMIT:
                raise ProtocolError("the answer to the upgrade has no end")
            return False
        head = bytes(self._view[self._start:end]).decode("latin-1")
        self._start = end + 4
        status_line, *rest = head.split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise ProtocolError(f"the upgrade was answered with {status_line[:80]!r}")
        status, reason = int(parts[1]), parts[2] if len(parts) > 2 else ""
        if status != 101:
            self.upgraded.set_exception(HandshakeRefused(status, reason))
            self.abort()
            return False
        fields: dict[str, str] = {}
        for line in rest:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        accept = base64.b64encode(hashlib.sha1(self._key + GUID).digest()).decode()
        connection = {t.strip().lower() for t in fields.get("connection", "").split(",")}
        if (fields.get("upgrade", "").lower() != "websocket" or "upgrade" not in connection
                or fields.get("sec-websocket-accept") != accept):
            raise ProtocolError("the server did not upgrade to a WebSocket")
        if fields.get("sec-websocket-protocol") != self._protocol:
            raise ProtocolError(f"the server did not accept the {self._protocol} protocol "
                                f"(it chose {fields.get('sec-websocket-protocol') or 'none'!r})")
        self._head = False
        self.upgraded.set_result(None)
        return True

    def _read_frames(self) -> None:
        buf, view = self._buf, self._view
        while True:
            avail = self._end - self._start
            if self._need:
                if not avail:
                    return
                take = min(avail, self._need)
                at = self._start
                self._start += take
                self._need -= take
                if self._channel < 0:
                    self._channel = buf[at]
                    at += 1
                if at < self._start:
                    self._piece(view[at:self._start])
                if not self._need and self._fin:
                    self._message_end()
                continue
            if avail < 2:
                return
            b0, b1 = buf[self._start], buf[self._start + 1]
            opcode, fin, size = b0 & 0x0F, bool(b0 & 0x80), b1 & 0x7F
            if b0 & 0x70 or b1 & 0x80:
                raise ProtocolError("a frame with reserved bits or a mask from the server")
            head = 2 if size < 126 else 4 if size == 126 else 10
            if avail < head:
                return
            if size == 126:
                size = struct.unpack_from("!H", buf, self._start + 2)[0]
            elif size == 127:
                size = struct.unpack_from("!Q", buf, self._start + 2)[0]
            if opcode >= CLOSE:
                if not fin or size > 125:
                    raise ProtocolError("a fragmented or long control frame")
                if avail < head + size:
                    return
                body = bytes(view[self._start + head:self._start + head + size])
                self._start += head + size
                self._control(opcode, body)
                continue
            if opcode == CONTINUATION:
                if not self._in_message:
                    raise ProtocolError("a continuation frame outside a message")
            elif opcode == BINARY:
                if self._in_message:
                    raise ProtocolError("a new message before the last one ended")
                self._in_message, self._channel = True, -1
            else:
                raise ProtocolError(f"a frame of opcode {opcode} (the channel protocol is binary)")
            self._start += head
            self._need, self._fin = size, fin
            if not size and fin:
                self._message_end()

    def _piece(self, piece: memoryview) -> None:
        if self._sink is not None:
            self._sink(self._channel, bytes(piece))
        else:
            self._message += piece

    def _message_end(self) -> None:
        if self._sink is None and self._channel >= 0:
            self._messages.append((self._channel, bytes(self._message)))
            if self._arrived is not None and not self._arrived.done():
                self._arrived.set_result(None)
        self._message = bytearray()
        self._in_message, self._channel = False, -1

    def _control(self, opcode: int, body: bytes) -> None:
        if opcode == PING:
            self._send_frame(PONG, bytearray(body))
        elif opcode == CLOSE:
            self.close_code = struct.unpack("!H", body[:2])[0] if len(body) >= 2 else 1005
            if not self._close_sent:
                self._close_sent = True
                self._send_frame(CLOSE, bytearray(body[:2]))
            if not self.closed.done():
                self.closed.set_result(None)
            if self._arrived is not None and not self._arrived.done():
                self._arrived.set_result(None)
            if self.transport is not None:
                self.transport.close()

