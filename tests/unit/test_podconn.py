"""simcluster.node.podconn: a pod's bytes read into the frames that carry them (room left for the
header), a burst in bulk mode (SO_RCVLOWAT) and its tail still delivered while the connection
stays open, then a small write at once."""

from __future__ import annotations

import asyncio

from simcluster.node.podconn import PodConn

CHUNK = 64 * 1024
BURST = 64  # chunks: 4 MiB


def test_a_burst_its_tail_and_then_a_small_write_all_come_while_the_connection_stays_open() -> None:
    async def body() -> None:
        more = asyncio.Event()

        async def server(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            for i in range(BURST):
                writer.write(bytes([i]) * CHUNK)
                await writer.drain()
            writer.write(b"tail")
            await writer.drain()
            await more.wait()
            writer.write(b"one line\n")
            await writer.drain()
            await asyncio.sleep(30)  # (open until the test ends)

        srv = await asyncio.start_server(server, "127.0.0.1", 0)
        conn = await PodConn.connect("127.0.0.1", srv.sockets[0].getsockname()[1], 5)
        got = bytearray()
        sizes: list[int] = []
        arrived = asyncio.Event()

        async def send(region: memoryview, n: int) -> None:
            assert len(region) == 3 + n and bytes(region[:3]) == b"hdr"  # (the room left for a header)
            got.extend(region[3:])
            sizes.append(n)
            arrived.set()

        async def frame(region: memoryview, n: int) -> None:
            region[:3] = b"hdr"
            await send(region, n)

        pump = asyncio.ensure_future(conn.pump(3, frame, reuse=True))
        expected = b"".join(bytes([i]) * CHUNK for i in range(BURST)) + b"tail"
        async with asyncio.timeout(30):
            while len(got) < len(expected):
                arrived.clear()
                await arrived.wait()
        assert bytes(got) == expected  # the tail too, though the connection is still open
        more.set()
        async with asyncio.timeout(30):
            while not got.endswith(b"one line\n"):
                arrived.clear()
                await arrived.wait()
        pump.cancel()
        conn.close()
        srv.close()

    asyncio.run(body())
