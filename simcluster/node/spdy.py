"""SPDY/3.1 framing, as far as the port-forward streams need it (the server's side of a session).

kubectl (client-go `tools/portforward`) speaks SPDY/3.1 to the kubelet's streaming server, since
1.31 tunnelled inside a WebSocket whose subprotocol is `SPDY/3.1+portforward.k8s.io` (each binary
message carries the next bytes of the SPDY session; message boundaries mean nothing). What is
here follows the SPDY/3 draft and moby/spdystream's framer, which client-go uses:

- a control frame: 1 bit set, 15-bit version (3), 16-bit type, 8-bit flags, 24-bit length, data;
  a data frame: 1 bit clear, 31-bit stream id, 8-bit flags (FIN = 1), 24-bit length, data;
- SYN_STREAM (1): stream id, associated stream id, priority (3 bits), slot, header block;
  SYN_REPLY (2) and HEADERS (8): stream id, header block; RST_STREAM (3): stream id, status;
  SETTINGS (4), PING (6): its id, echoed; GOAWAY (7); WINDOW_UPDATE (9) (spdystream ignores it);
- a header block is zlib-compressed with the SPDY/3 dictionary, one compression context per
  direction for the whole session, each block ended by a sync flush; inside, a 32-bit count of
  pairs, then each name and value with a 32-bit length (names lowercase; NUL separates values).

No I/O: `Parser.feed` takes bytes and returns frames, the `*_frame` functions build bytes.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

VERSION = 3
SYN_STREAM = 1
SYN_REPLY = 2
RST_STREAM = 3
SETTINGS = 4
PING = 6
GOAWAY = 7
HEADERS = 8
WINDOW_UPDATE = 9
FLAG_FIN = 0x01
MAX_DATA = (1 << 24) - 1
RST_PROTOCOL_ERROR = 1
RST_CANCEL = 5

_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
    "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
    "content-base", "content-encoding", "content-language", "content-length", "content-location",
    "content-md5", "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host",
    "if-match", "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified",
    "location", "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer",
    "retry-after", "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via",
    "warning", "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url",
    "public", "set-cookie", "keep-alive", "origin",
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, "
    "Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,"
    "application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdch"
    "charset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)
# The SPDY/3 header compression dictionary (the draft's, 1,423 bytes).
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()


class SpdyError(ValueError):
    """The peer sent what SPDY/3.1 does not allow (the session ends)."""


@dataclass
class Frame:
    """A parsed frame: `control` frames have a `kind`; data frames a `stream` and `data`."""

    control: bool
    kind: int = 0
    flags: int = 0
    stream: int = 0
    data: bytes = b""
    headers: dict[str, list[str]] = field(default_factory=dict)
    value: int = 0  # PING's id, RST_STREAM's status, WINDOW_UPDATE's delta

    @property
    def fin(self) -> bool:
        return bool(self.flags & FLAG_FIN)


class Parser:
    """Bytes of a session in, frames out (with its own header decompressor)."""

    def __init__(self, max_frame: int = MAX_DATA) -> None:
        self._buf = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self.max_frame = max_frame

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        out: list[Frame] = []
        while len(self._buf) >= 8:
            length = int.from_bytes(self._buf[5:8], "big")
            if length > self.max_frame:
                raise SpdyError(f"frame of {length} bytes")
            if len(self._buf) < 8 + length:
                break
            head, body = bytes(self._buf[:8]), bytes(self._buf[8:8 + length])
            del self._buf[:8 + length]
            out.append(self._frame(head, body))
        return out

    def _frame(self, head: bytes, body: bytes) -> Frame:
        first, flags = struct.unpack(">I", head[:4])[0], head[4]
        if not first & 0x80000000:
            return Frame(False, flags=flags, stream=first & 0x7FFFFFFF, data=body)
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise SpdyError(f"SPDY version {version}")
        frame = Frame(True, kind=kind, flags=flags)
        if kind == SYN_STREAM:
            self._need(body, 10)
            frame.stream = struct.unpack(">I", body[:4])[0] & 0x7FFFFFFF
            frame.headers = self._headers(body[10:])
        elif kind in (SYN_REPLY, HEADERS):
            self._need(body, 4)
            frame.stream = struct.unpack(">I", body[:4])[0] & 0x7FFFFFFF
            frame.headers = self._headers(body[4:])
        elif kind in (RST_STREAM, WINDOW_UPDATE):
            self._need(body, 8)
            stream, value = struct.unpack(">II", body[:8])
            frame.stream, frame.value = stream & 0x7FFFFFFF, value & 0x7FFFFFFF
        elif kind == PING:
            self._need(body, 4)
            frame.value = struct.unpack(">I", body[:4])[0]
        elif kind == GOAWAY:
            self._need(body, 4)
            frame.stream = struct.unpack(">I", body[:4])[0] & 0x7FFFFFFF
        return frame

    @staticmethod
    def _need(body: bytes, n: int) -> None:
        if len(body) < n:
            raise SpdyError("short control frame")

    def _headers(self, block: bytes) -> dict[str, list[str]]:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as exc:
            raise SpdyError(f"header block: {exc}") from None
        if len(raw) < 4:
            raise SpdyError("empty header block")
        count, pos = struct.unpack(">I", raw[:4])[0], 4
        headers: dict[str, list[str]] = {}
        for _ in range(count):
            name, pos = _string(raw, pos)
            value, pos = _string(raw, pos)
            headers.setdefault(name.lower(), []).extend(value.split("\x00"))
        return headers


def _string(raw: bytes, pos: int) -> tuple[str, int]:
    if pos + 4 > len(raw):
        raise SpdyError("truncated header block")
    n = struct.unpack(">I", raw[pos:pos + 4])[0]
    if pos + 4 + n > len(raw):
        raise SpdyError("truncated header block")
    return raw[pos + 4:pos + 4 + n].decode("utf-8", "replace"), pos + 4 + n


class Writer:
    """Frames out, with the session's own header compressor."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zdict=DICTIONARY)

    def _block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack(">I", len(headers)) + b"".join(
            struct.pack(">I", len(k)) + k.lower().encode() + struct.pack(">I", len(v.encode())) + v.encode()
            for k, v in headers.items())
        return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def syn_reply(self, stream: int, headers: dict[str, str] | None = None, *, fin: bool = False) -> bytes:
        return control(SYN_REPLY, FLAG_FIN if fin else 0, struct.pack(">I", stream) + self._block(headers or {}))

    def syn_stream(self, stream: int, headers: dict[str, str], *, fin: bool = False) -> bytes:
        """(What a client sends: the tests' own SPDY client uses it.)"""
        body = struct.pack(">IIBB", stream, 0, 0, 0) + self._block(headers)
        return control(SYN_STREAM, FLAG_FIN if fin else 0, body)


def control(kind: int, flags: int, body: bytes) -> bytes:
    return struct.pack(">IB", 0x80000000 | VERSION << 16 | kind, flags) + len(body).to_bytes(3, "big") + body


DATA_HEADER = 8  # bytes before a data frame's data


def data_header(stream: int, length: int, *, fin: bool = False) -> bytes:
    return struct.pack(">IB", stream & 0x7FFFFFFF, FLAG_FIN if fin else 0) + length.to_bytes(3, "big")


def data_frame(stream: int, data: bytes, *, fin: bool = False) -> bytes:
    return data_header(stream, len(data), fin=fin) + data


def rst_stream(stream: int, status: int = RST_CANCEL) -> bytes:
    return control(RST_STREAM, 0, struct.pack(">II", stream, status))


def ping(ping_id: int) -> bytes:
    return control(PING, 0, struct.pack(">I", ping_id))


def window_update(stream: int, delta: int) -> bytes:
    return control(WINDOW_UPDATE, 0, struct.pack(">II", stream, delta))
