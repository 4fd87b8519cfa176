"""The ceiling of a forwarded port on this machine: two best-case Python relays, no framing.

`python -m tests.perf.relay_ceiling server HOST:PORT CERT KEY` relays each TLS connection it
accepts to HOST:PORT (simcluster's place on the path); `... client HOST:PORT CA` relays each plain
connection it accepts to a TLS connection to HOST:PORT (ranks port-forward's place).
`--plain` drops TLS on the middle leg. Each prints the port it listens on, then serves until killed.

What they leave out of a port-forward is everything but the bytes: no WebSocket or channel frames,
no event loop (a blocking thread per direction, 1 MiB reads), TLS through memory BIOs so each
socket call moves up to 1 MiB. So their throughput is what four processes (curl, two relays, the
server) get out of this machine's cores with TLS on the middle leg, the bound any relay pair written
in Python meets here (test_bench_portforward.py::test_relay_ceiling).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import ssl
import threading
from typing import Protocol

CHUNK = 1 << 20


class Pipe(Protocol):
    def recv_into(self, buf: memoryview, /) -> int: ...
    def sendall(self, data: memoryview, /) -> None: ...
    def shutdown(self, how: int, /) -> None: ...


class TlsPipe:
    """A TLS connection over a blocking socket through memory BIOs (one lock: OpenSSL's connection
    is not for two threads at once; the socket calls happen outside it)."""

    def __init__(self, sock: socket.socket, ctx: ssl.SSLContext, *, server: bool) -> None:
        self.sock, self.incoming, self.outgoing = sock, ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_side=server,
                                server_hostname=None if server else "localhost")
        self.lock = threading.Lock()
        self.raw = bytearray(CHUNK)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    raise ConnectionResetError("the peer left in the handshake") from None
        self._flush()

    def _flush(self) -> None:
        with self.lock:
            data = self.outgoing.read()
        if data:
            self.sock.sendall(data)

    def _fill(self) -> bool:
        n = self.sock.recv_into(self.raw)
        if n:
            with self.lock:
                self.incoming.write(memoryview(self.raw)[:n])
        return bool(n)

    def recv_into(self, buf: memoryview) -> int:
        got = 0
        while True:
            try:
                while got < len(buf):
                    with self.lock:
                        n = self.tls.read(len(buf) - got, buf[got:])
                    if not n:
                        return got
                    got += n
                return got
            except ssl.SSLWantReadError:
                if got or not self._fill():
                    return got

    def sendall(self, data: memoryview) -> None:
        with self.lock:
            self.tls.write(data)
        self._flush()

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)


def pump(src: Pipe, dst: Pipe) -> None:
    """Bytes from `src` to `dst` until `src` ends; then `dst`'s write side is shut."""
    buf = memoryview(bytearray(CHUNK))
    with contextlib.suppress(OSError):
        while n := src.recv_into(buf):
            dst.sendall(buf[:n])
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def relay(a: Pipe, b: Pipe) -> None:
    threading.Thread(target=pump, args=(a, b), daemon=True).start()
    pump(b, a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("role", choices=("server", "client"))
    ap.add_argument("to", help="HOST:PORT")
    ap.add_argument("files", nargs="*", help="server: CERT KEY; client: CA")
    ap.add_argument("--plain", action="store_true", help="no TLS on the middle leg")
    args = ap.parse_args()
    ctx: ssl.SSLContext | None = None
    if not args.plain and args.role == "server":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.files[0], args.files[1])
    elif not args.plain:
        ctx = ssl.create_default_context(cafile=args.files[0])

    host, port = args.to.rsplit(":", 1)

    def serve(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            out = socket.create_connection((host, int(port)))
            if ctx is None:
                relay(conn, out)
            elif args.role == "server":
                relay(TlsPipe(conn, ctx, server=True), out)
            else:
                relay(conn, TlsPipe(out, ctx, server=False))

    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
