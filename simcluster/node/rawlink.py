"""An HTTP connection upgraded to a protocol aiohttp does not know (kubectl's `Upgrade: SPDY/3.1`):
its bytes both ways, once the handler has taken the connection from aiohttp.

aiohttp's server upgrades to WebSocket only; any other `Upgrade` it leaves as a plain request,
and would read what follows the answer as the next request. So the handler writes the `101
Switching Protocols` itself and sets this protocol on the connection's transport (TLS or not):
the client's bytes come here (`receive`), the answer's go out through `send` (waiting while the
transport's buffer is over its high mark). When the connection ends, aiohttp's own protocol is
told (its server forgets the connection and the handler's request ends as for any client gone).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Any

from aiohttp import web

BUFFER = 4 << 20  # the client's bytes held before the connection is not read; the transport's high mark


class RawLink(asyncio.Protocol):
    """The connection of `request`, raw (see the module docstring)."""

    def __init__(self, request: web.BaseRequest) -> None:
        transport = request.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("the client is gone")
        self.transport: Any = transport
        self.previous = request.protocol
        self.loop = asyncio.get_running_loop()
        self.chunks: collections.deque[bytes] = collections.deque()
        self.held = 0
        self.ended = False
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self.drained: asyncio.Future[None] | None = None
        self.transport.set_protocol(self)
        with contextlib.suppress(AttributeError, RuntimeError, ValueError):
            self.transport.set_write_buffer_limits(high=BUFFER)
        if hasattr(self.transport, "is_reading") and not self.transport.is_reading():
            self.transport.resume_reading()

    async def send(self, data: bytes | memoryview) -> None:
        if self.transport.is_closing():
            raise ConnectionResetError("the client is gone")
        self.transport.write(data)
        if self.paused:
            self.drained = self.loop.create_future()
            await self.drained

    async def receive(self) -> bytes | None:
        """The client's next bytes; None at its end."""
        while not self.chunks:
            if self.ended:
                return None
            self.waiter = self.loop.create_future()
            await self.waiter
        data = self.chunks.popleft()
        self.held -= len(data)
        if self.held < BUFFER // 2 and not self.ended:
            with contextlib.suppress(RuntimeError):
                self.transport.resume_reading()
        return data

    async def close(self) -> None:
        self.transport.close()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    # -- asyncio.Protocol -----------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.held += len(data)
        if self.held > BUFFER:
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.ended = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self._wake()
        self.resume_writing()
        self.previous.connection_lost(exc)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.drained is not None and not self.drained.done():
            self.drained.set_result(None)
