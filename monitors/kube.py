"""An asyncio client for the Kubernetes API that hands back raw bytes (parsed with orjson by callers).

No model objects are built: large LISTs and busy watches cost one fast JSON parse per object.
Errors become `ApiProblem` (the server answered with a Status) or `ConnectionProblem` (no answer).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from .connection import ClusterConfig, ConnectionProblem, ExitCode


@dataclass(frozen=True, slots=True)
class Kind:
    """A served resource: group ("" for core), version, plural, namespaced."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        p = f"{root}/namespaces/{namespace}/{self.plural}" if namespace and self.namespaced else f"{root}/{self.plural}"
        return f"{p}/{name}" if name else p


class ApiProblem(Exception):
    """The API server answered with an error Status."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def exit_code(self) -> ExitCode:
        return {
            401: ExitCode.UNAUTHORIZED,
            403: ExitCode.FORBIDDEN,
            404: ExitCode.NOT_FOUND,
        }.get(self.status, ExitCode.ERROR)

    def one_line(self) -> str:
        if self.status == 401:
            return "unauthorized (401): the server rejected the credentials; log in again or refresh the token"
        text = self.message.splitlines()[0] if self.message else self.reason
        return f"{self.reason.lower() if self.status == 403 else 'server said'}: {text}" if self.status != 404 else text


def problem_from_body(status: int, body: bytes) -> ApiProblem:
    try:
        st = orjson.loads(body)
        if isinstance(st, dict) and st.get("kind") == "Status":
            return ApiProblem(status, str(st.get("reason") or status), str(st.get("message") or ""))
    except orjson.JSONDecodeError:
        pass
    text = body[:200].decode("utf-8", "replace").strip()
    return ApiProblem(status, f"HTTP {status}", text or f"HTTP {status}")


class KubeClient:
    def __init__(self, cfg: ClusterConfig, *, timeout: float = 30.0) -> None:
        self.cfg = cfg
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool | None = None

    @property
    def server(self) -> str:
        return self.cfg.server.rstrip("/")

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            if self._ssl is None:
                try:
                    self._ssl = self.cfg.ssl_context()
                except (OSError, ssl.SSLError) as exc:
                    raise ConnectionProblem(f"cannot load TLS files: {exc}", ExitCode.TLS) from None
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=300, limit_per_host=300)
            self._session = aiohttp.ClientSession(
                connector=connector, json_serialize=lambda o: orjson.dumps(o).decode(), auto_decompress=True
            )
        return self._session

    def _headers(self, accept: str = "application/json") -> list[tuple[str, str]]:
        h = [("Accept", accept), *self.cfg.headers().items(), *self.cfg.impersonation_groups()]
        return h

    def _connection_problem(self, exc: BaseException) -> ConnectionProblem:
        if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
            return ConnectionProblem(
                f"TLS verification failed for {self.server}: {exc.__class__.__name__}: {_short(exc)}", ExitCode.TLS
            )
        if isinstance(exc, TimeoutError | asyncio.TimeoutError):
            return ConnectionProblem(f"timed out talking to {self.server}", ExitCode.UNREACHABLE)
        return ConnectionProblem(f"cannot reach the API server at {self.server}: {_short(exc)}", ExitCode.UNREACHABLE)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> bytes:
        session = self._get_session()
        headers = self._headers()
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            headers.append(("Content-Type", content_type))
        try:
            async with session.request(
                method, self.server + path, params=_params(params), data=data, headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout or self.timeout),
            ) as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    raise problem_from_body(resp.status, raw)
                return raw
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise self._connection_problem(exc) from None

    async def websocket(self, path: str, params: list[tuple[str, str]], protocols: tuple[str, ...]
                        ) -> aiohttp.ClientWebSocketResponse:
        """A WebSocket upgrade of `path` (exec, attach, port-forward). A refused upgrade raises
        `aiohttp.WSServerHandshakeError` (its status; the body is not available); no answer
        raises `ConnectionProblem`."""
        session = self._get_session()
        try:
            return await session.ws_connect(
                self.server + path, params=params, headers=self._headers("*/*"), protocols=protocols,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0), autoping=True, heartbeat=None,
                max_msg_size=0, compress=0,
            )
        except aiohttp.WSServerHandshakeError:
            raise
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise self._connection_problem(exc) from None

    async def get(self, path: str, params: Mapping[str, Any] | None = None, timeout: float | None = None) -> Any:
        return orjson.loads(await self.request("GET", path, params=params, timeout=timeout))

    async def stream_lines(
        self,
        path: str,
        params: Mapping[str, Any] | list[tuple[str, str]] | None = None,
        *,
        read_timeout: float = 75.0,
        connect_timeout: float = 15.0,
        on_open: Callable[[], None] | None = None,
    ) -> AsyncIterator[bytes]:
        """Yield newline-delimited chunks of a streaming response (watch, follow logs).

        `read_timeout`: no byte for that long means the connection is dead (raises TimeoutError).
        """
        session = self._get_session()
        try:
            async with session.get(
                self.server + path, params=_params(params), headers=self._headers(),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout),
            ) as resp:
                if resp.status >= 400:
                    raise problem_from_body(resp.status, await resp.read())
                if on_open is not None:
                    on_open()
                buf = b""
                async for chunk in resp.content.iter_any():
                    buf += chunk
                    if b"\n" in buf:
                        *lines, buf = buf.split(b"\n")
                        for line in lines:
                            if line:
                                yield line
                if buf.strip():
                    yield buf
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
            return  # the stream ended early: callers resume from what they saw
        except (aiohttp.ClientError, OSError) as exc:
            raise self._connection_problem(exc) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- discovery -----------------------------------------------------------------------------
    async def served_kinds(self) -> dict[tuple[str, str], Kind]:
        """(group, plural) -> Kind for every resource the server offers (preferred version)."""
        out: dict[tuple[str, str], Kind] = {}
        core = await self.get("/api/v1")
        for r in core.get("resources", []):
            if "/" not in r["name"]:
                out[("", r["name"])] = Kind("", "v1", r["name"], bool(r.get("namespaced")))
        groups = await self.get("/apis")

        async def one(group: str, version: str) -> None:
            try:
                doc = await self.get(f"/apis/{group}/{version}")
            except ApiProblem:
                return
            for r in doc.get("resources", []):
                if "/" not in r["name"] and (group, r["name"]) not in out:
                    out[(group, r["name"])] = Kind(group, version, r["name"], bool(r.get("namespaced")))

        jobs = []
        for g in groups.get("groups", []):
            versions = [g["preferredVersion"]["version"]] + [
                v["version"] for v in g.get("versions", []) if v["version"] != g["preferredVersion"]["version"]
            ]
            for v in versions:
                jobs.append(one(g["name"], v))
        await asyncio.gather(*jobs)
        return out


def _params(params: Mapping[str, Any] | list[tuple[str, str]] | None) -> list[tuple[str, str]] | None:
    if params is None:
        return None
    items = params if isinstance(params, list) else list(params.items())
    out = []
    for k, v in items:
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        out.append((k, str(v)))
    return out


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
