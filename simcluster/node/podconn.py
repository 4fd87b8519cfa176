"""A port-forward's connection to a pod's port, read straight into the messages sent to the client.

Each read of the pod's bytes lands in a fresh region of a large buffer, after room left for the
header of the frame that carries it (a v4 channel byte, a SPDY data frame's 8 bytes): the caller
writes the header there and sends the region whole, so the bytes are never copied on their way
to the WebSocket (a StreamReader copies them twice, a prefix once more). A region is not
reused (unless the caller knows its transport keeps none of it): what a transport still holds of
it stays as it was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable

POOL = 4 << 20  # the buffer regions are cut from
READ = 1 << 20  # the most one read takes
MIN_READ = 256 * 1024  # a buffer with less room left than this is left for a new one
BULK = 64 * 1024  # a read this large: the pod's server is sending in bulk (see `_read`)
LOWAT = 512 * 1024  # in bulk, what the socket gathers before it wakes the loop
TAIL_WAIT = 0.002  # in bulk, how long less than that waits before it is read anyway

Send = Callable[[memoryview, int], Awaitable[None]]


class PodConn:
    """A connected non-blocking socket to the pod's server (see the module docstring)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.bulk = False

    @classmethod
    async def connect(cls, host: str, port: int, timeout: float) -> PodConn:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (host, port)), timeout)
        except BaseException:
            sock.close()
            raise
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock)

    async def pump(self, headroom: int, send: Send, *, reuse: bool = False) -> None:
        """The pod's bytes to `send(region, n)` until its end of file (or a reset): `region` is
        `headroom` bytes for the frame's header, then the `n` bytes read. `reuse`: `send` leaves
        nothing of the region behind once it returns (a TLS transport encrypts what it is given at
        once), so one region serves every read."""
        buf, pos = memoryview(bytearray(0)), 0
        with contextlib.suppress(ConnectionError):
            while True:
                if reuse and len(buf):
                    pos = 0
                elif len(buf) - pos < headroom + MIN_READ:
                    buf, pos = memoryview(bytearray(headroom + READ if reuse else POOL)), 0
                n = await self._read(buf[pos + headroom:min(len(buf), pos + headroom + READ)])
                if not n:
                    return
                await send(buf[pos:pos + headroom + n], n)
                pos += headroom + n

    async def _read(self, region: memoryview) -> int:
        """The next bytes into `region` (0: the pod's end). A read of `BULK` bytes or more turns
        bulk mode on: the socket wakes the loop only once `LOWAT` bytes are in (SO_RCVLOWAT),
        so a fast server's 64 KiB writes go on as 1 MiB messages rather than one each; what
        stays under the mark is read after `TAIL_WAIT`, and a short read turns it off again."""
        while True:
            if not self.bulk:
                n = await self.loop.sock_recv_into(self.sock, region)
            else:
                try:
                    n = await asyncio.wait_for(self.loop.sock_recv_into(self.sock, region), TAIL_WAIT)
                except TimeoutError:
                    try:
                        n = self.sock.recv_into(region)
                    except BlockingIOError:  # (nothing came at all)
                        self._bulk(False)
                        continue
            if self.bulk != (n >= BULK):
                self._bulk(n >= BULK)
            return n

    def _bulk(self, on: bool) -> None:
        self.bulk = on
        with contextlib.suppress(OSError):
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, LOWAT if on else 1)

    async def write(self, data: bytes) -> None:
        """The client's bytes to the pod (ConnectionError once the pod's end is gone)."""
        await self.loop.sock_sendall(self.sock, data)

    def write_eof(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.loop.remove_reader(self.sock.fileno())
            self.loop.remove_writer(self.sock.fileno())
        self.sock.close()
