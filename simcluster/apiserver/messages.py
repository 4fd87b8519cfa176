"""HTTP messages as kube-apiserver reads and writes them: request bodies (their media types;
JSON, YAML or Kubernetes protobuf), a browser's request refused, and answers (JSON, a Status for
an error, big bodies written in pieces, a slowed one spread over time)."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import orjson
import yaml
from aiohttp import web

from . import protobuf_bodies
from .errors import ApiError
from .store import dumps

MAX_BODY = 3 * 1024 * 1024  # the real API server's request body limit
JSON = "application/json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
# What a request body may be (kube-apiserver's media types): objects as JSON, YAML or protobuf,
# patches in the four patch types. Anything else (text/plain, form encodings: what a web page can
# send without a CORS preflight) is 415, before it is read. A body without a Content-Type is read
# as JSON, as kube-apiserver does (the official Python client, v37, sends creates that way); a
# page cannot send one unnoticed: a browser's POST carries an Origin, refused, and no token.
BODY_TYPES = (JSON, "application/yaml", PROTOBUF)
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml")

LIST_CHUNK = 1 << 20  # a LIST body is written in pieces of about this size, not joined whole
SLOW_PIECES = 40  # a slowed body (`Faults.slow_body_next`) is sent in this many pieces


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=dumps(obj), status=status, content_type=JSON, headers=headers)


def decode_body(raw: bytes, content_type: str, what: str = "request body") -> Any:
    """A request body as kube-apiserver reads it: JSON (also when no type is given), YAML, or
    Kubernetes protobuf for the built-in kinds; any other media type is refused with 415."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == PROTOBUF:
        try:
            return protobuf_bodies.decode(raw)
        except protobuf_bodies.BodyError as exc:
            raise ApiError(exc.status, exc.message, reason="UnsupportedMediaType" if exc.status == 415 else None
                           ) from None
    if media and media not in BODY_TYPES:
        raise unsupported_media_type(BODY_TYPES)
    try:
        if "yaml" in media:
            return yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        return orjson.loads(raw)
    except (orjson.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ApiError(400, f"error decoding {what}: {msg}") from None


def unsupported_media_type(accepted: tuple[str, ...]) -> ApiError:
    return ApiError(415, "the body of the request was in an unknown format - accepted media types include: "
                         + ", ".join(accepted), reason="UnsupportedMediaType")


def check_body_media_type(request: web.Request) -> None:
    """415 for a request body that is not JSON, YAML or protobuf (untyped: JSON), or for PATCH
    not one of the patch types (untyped too)."""
    if not request.body_exists:
        return
    media = request.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if request.method == "PATCH":
        if media not in PATCH_TYPES:
            raise unsupported_media_type(PATCH_TYPES)
    elif media and media not in BODY_TYPES:
        raise unsupported_media_type(BODY_TYPES)


def is_proxy_path(path: str) -> bool:
    """`.../{pods,services,nodes}/<name>/proxy[/...]`: bodies there are the backend's, as they come."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
    else:
        return False
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        rest = rest[2:]
    return len(rest) >= 3 and rest[2] == "proxy"


def cross_origin(request: web.Request) -> str | None:
    """Why a browser's request is refused (None when it is not one): a CORS preflight (OPTIONS),
    or an `Origin` other than the API server's own (scheme, port and the address the client
    connected to, or `localhost` on loopback). A page elsewhere, a DNS-rebound name included,
    cannot talk to simcluster; clients that send their own origin (websocket-client does) can."""
    if request.method == "OPTIONS":
        return "CORS preflight requests are refused: simcluster serves no browser"
    origin = request.headers.get("Origin")
    if origin is None:
        return None
    refused = f'cross-origin requests are refused: origin "{_printable(origin)}" is not the API server'
    try:
        u = urlsplit(origin.strip())
        port = u.port
    except ValueError:
        return refused
    scheme = "https" if request.secure else "http"
    sock = request.transport.get_extra_info("sockname") if request.transport is not None else None
    if u.scheme != scheme or not u.hostname or not isinstance(sock, tuple) or u.path not in ("", "/"):
        return refused
    local, local_port = str(sock[0]), int(sock[1])
    if (port or (443 if scheme == "https" else 80)) != local_port:
        return refused
    names = {local.lower()}
    try:
        if ipaddress.ip_address(local).is_loopback:
            names.add("localhost")
    except ValueError:
        pass
    return None if u.hostname.lower() in names else refused


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)[:200]


def raw_response(raw: bytes, status: int = 200) -> web.Response:
    return web.Response(body=raw, status=status, content_type=JSON)


def error_response(err: ApiError) -> web.Response:
    return json_response(err.status(), err.code, headers=err.headers or None)


async def send_slowly(request: web.Request, body: bytes, seconds: float) -> web.StreamResponse:
    """`body` in SLOW_PIECES pieces spread evenly over `seconds` (a slow link: the transfer
    takes that long, and the longest silence is seconds / SLOW_PIECES)."""
    resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
    resp.content_length = len(body)
    await resp.prepare(request)
    view = memoryview(body)
    step = max(1, -(-len(body) // SLOW_PIECES))
    pause = seconds / SLOW_PIECES
    for i in range(0, len(body), step):
        await resp.write(view[i:i + step])
        await asyncio.sleep(pause)
    await resp.write_eof()
    return resp


async def send_body(request: web.Request, body: bytes) -> web.StreamResponse:
    """A JSON body; a big one written a megabyte at a time (aiohttp hands a body given whole to
    the transport in one piece, which is several times slower for hundreds of megabytes)."""
    if len(body) <= LIST_CHUNK:
        return raw_response(body)
    resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
    resp.content_length = len(body)
    await resp.prepare(request)
    view = memoryview(body)
    for i in range(0, len(body), LIST_CHUNK):
        await resp.write(view[i:i + LIST_CHUNK])
    await resp.write_eof()
    return resp


async def send_list(request: web.Request, head: bytes, items: Iterable[bytes]) -> web.StreamResponse:
    """A list body: small ones in one piece; big ones written as they are joined, a megabyte
    at a time, so a 100,000-pod LIST is neither copied whole nor held twice in memory."""
    parts: list[bytes] = []
    size = 0
    for raw in items:
        parts.append(raw)
        size += len(raw)
    total = len(head) + size + max(0, len(parts) - 1) + 2
    if total <= LIST_CHUNK:
        return raw_response(b"".join((head, b",".join(parts), b"]}")))
    resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
    resp.content_length = total
    await resp.prepare(request)
    await resp.write(head)
    chunk: list[bytes] = []
    chunk_size = 0
    first = True
    for raw in parts:
        if not first:
            chunk.append(b",")
        first = False
        chunk.append(raw)
        chunk_size += len(raw)
        if chunk_size >= LIST_CHUNK:
            await resp.write(b"".join(chunk))
            chunk, chunk_size = [], 0
    chunk.append(b"]}")
    await resp.write(b"".join(chunk))
    await resp.write_eof()
    return resp
