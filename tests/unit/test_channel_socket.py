"""sessions.channel_socket: the v4 channel WebSocket the port-forward relay reads as a stream.

Against aiohttp's WebSocket server (another implementation of RFC 6455) for the common path, and
against a server written frame by frame here for what aiohttp never sends: a message in
fragments with a ping between them, a close, a refused or wrong upgrade."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import struct
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import WSMsgType, web

from monitors.connection import ClusterConfig
from monitors.kube import KubeClient
from sessions.channel_socket import GUID, ChannelSocket, HandshakeRefused, ProtocolError

PROTOCOL = "v4.channel.k8s.io"
BIG = os.urandom(3 << 20)


def client_for(url: str) -> KubeClient:
    return KubeClient(ClusterConfig(server=url, context="t", namespace="n", user="u",
                                    _auth=lambda: {"Authorization": "Bearer sekret"}))


def test_a_stream_both_ways_through_aiohttps_server() -> None:
    """Port frames as messages, then 3 MiB to the client as pieces of one message and 3 MiB from
    it in 1 MiB messages, byte for byte; the server's close ends it."""
    seen: dict[str, object] = {}

    async def handler(request: web.Request) -> web.WebSocketResponse:
        seen["auth"] = request.headers.get("Authorization")
        seen["query"] = request.query.get("ports")
        ws = web.WebSocketResponse(protocols=(PROTOCOL,))
        await ws.prepare(request)
        await ws.send_bytes(b"\x00" + (8888).to_bytes(2, "little"))
        await ws.send_bytes(b"\x01" + (8888).to_bytes(2, "little"))
        await ws.send_bytes(b"\x00" + BIG)
        got = bytearray()
        async for msg in ws:
            assert msg.type == WSMsgType.BINARY and msg.data[0] == 0
            got += msg.data[1:]
            if len(got) >= len(BIG):
                break
        seen["up"] = bytes(got)
        await ws.send_bytes(b"\x01" + b"done")
        await ws.close()
        return ws

    async def body() -> None:
        app = web.Application()
        app.router.add_get("/pf", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        async with client_for(f"http://127.0.0.1:{port}") as client:
            sock = await ChannelSocket.connect(client, "/pf", [("ports", "8888")], PROTOCOL)
            assert await sock.receive() == (0, (8888).to_bytes(2, "little"))
            assert await sock.receive() == (1, (8888).to_bytes(2, "little"))
            down: dict[int, bytearray] = {0: bytearray(), 1: bytearray()}
            for channel, piece in sock.stream(lambda c, p: down[c].extend(p)):
                down[channel] += piece
            for at in range(0, len(BIG), 1 << 20):
                sock.send(0, BIG[at:at + (1 << 20)])
                await sock.drain()
            await asyncio.wait_for(sock.closed, 30)
            assert bytes(down[0]) == BIG and bytes(down[1]) == b"done"
            assert sock.close_code == 1000
        await runner.cleanup()

    asyncio.run(body())
    assert seen == {"auth": "Bearer sekret", "query": "8888", "up": BIG}


def server_frame(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    first = (0x80 if fin else 0) | opcode
    if len(payload) < 126:
        return struct.pack("!BB", first, len(payload)) + payload
    return struct.pack("!BBH", first, 126, len(payload)) + payload


async def read_client_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One frame from the client: it must be masked (RFC 6455 5.3); (opcode, unmasked payload)."""
    b0, b1 = await reader.readexactly(2)
    assert b1 & 0x80, "a client frame without a mask"
    size = b1 & 0x7F
    if size == 126:
        size = struct.unpack("!H", await reader.readexactly(2))[0]
    elif size == 127:
        size = struct.unpack("!Q", await reader.readexactly(8))[0]
    key = await reader.readexactly(4)
    data = await reader.readexactly(size)
    return b0 & 0x0F, bytes(b ^ key[i % 4] for i, b in enumerate(data))


Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, dict[str, str]], Awaitable[None]]


async def raw_server(script: Script) -> tuple[asyncio.Server, str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:])
                  if k}
        try:
            await script(reader, writer, fields)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def upgrade(fields: dict[str, str], protocol: str | None = PROTOCOL, accept: str | None = None) -> bytes:
    key = fields["sec-websocket-key"].encode()
    accept = accept or base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Accept: {accept}"] + ([f"Sec-WebSocket-Protocol: {protocol}"] if protocol else [])
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_fragments_a_ping_between_them_and_a_close() -> None:
    """A message in three frames (its channel byte in the first) with a ping after the first: the
    ping is answered with a masked pong of the same payload, the message comes whole, the
    server's close is answered with a close of its code."""
    answers: list[tuple[int, bytes]] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fields: dict[str, str]) -> None:
        assert fields["sec-websocket-protocol"] == PROTOCOL and fields["upgrade"] == "websocket"
        writer.write(upgrade(fields) + server_frame(0x2, b"\x01hel", fin=False) + server_frame(0x9, b"are you there"))
        writer.write(server_frame(0x0, b"lo ", fin=False))
        await writer.drain()
        answers.append(await read_client_frame(reader))
        writer.write(server_frame(0x0, b"world" * 100) + server_frame(0x8, struct.pack("!H", 1001)))
        await writer.drain()
        answers.append(await read_client_frame(reader))

    async def body() -> None:
        server, url = await raw_server(script)
        async with client_for(url) as client:
            sock = await ChannelSocket.connect(client, "/pf", [], PROTOCOL)
            assert await sock.receive() == (1, b"hello " + b"world" * 100)
            assert await sock.receive() is None
            assert sock.close_code == 1001
        server.close()

    asyncio.run(body())
    assert answers == [(0xA, b"are you there"), (0x8, struct.pack("!H", 1001))]


@pytest.mark.parametrize(("answer", "error"), [
    (b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", "403"),
    (None, "did not upgrade"),  # a wrong Sec-WebSocket-Accept
    (b"", "did not accept the v4.channel.k8s.io protocol"),  # no subprotocol echoed
])
def test_a_refused_or_wrong_upgrade(answer: bytes | None, error: str) -> None:
    async def script(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter, fields: dict[str, str]) -> None:
        if answer is None:
            writer.write(upgrade(fields, accept="d3Jvbmc="))
        elif answer == b"":
            writer.write(upgrade(fields, protocol=None))
        else:
            writer.write(answer)
        await writer.drain()
        await asyncio.sleep(1)

    async def body() -> None:
        server, url = await raw_server(script)
        async with client_for(url) as client:
            with pytest.raises((HandshakeRefused, ProtocolError)) as caught:
                await ChannelSocket.connect(client, "/pf", [], PROTOCOL)
            assert error in str(caught.value)
            if error == "403":
                assert isinstance(caught.value, HandshakeRefused) and caught.value.status == 403
        server.close()

    asyncio.run(body())
