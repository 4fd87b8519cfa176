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

from . import api_paths
from .connection import ClusterConfig, ConnectionProblem, ExitCode


@dataclass(frozen=True, slots=True)
class Kind:
    """A served resource: group ("" for core), version, plural, namespaced."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        return api_paths.resource(self.group, self.version, self.plural, namespace if self.namespaced else None,
                                  name or None)


class ApiProblem(Exception):
    """The API server answered with an error Status (`retry_after`: the seconds its Retry-After
    header asked the client to wait before asking again, None without one)."""

    def __init__(self, status: int, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after

    @property
    def exit_code(self) -> ExitCode:
        return {
            401: ExitCode.UNAUTHORIZED,
            403: ExitCode.FORBIDDEN,
            404: ExitCode.NOT_FOUND,
        }.get(self.status, ExitCode.ERROR)

    def one_line(self) -> str:
        if self.status == 401:
            return UNAUTHORIZED_LINE
        text = self.message.splitlines()[0] if self.message else self.reason
        return f"{self.reason.lower() if self.status == 403 else 'server said'}: {text}" if self.status != 404 else text


UNAUTHORIZED_LINE = ("unauthorized (401): the server rejected the credentials (expired or revoked); "
                     "log in again or refresh the token")
RETRY_AFTER_MAX = 60.0  # s: the longest Retry-After honoured (a longer one is waited this long)
RETRIES_AFTER = 3  # a 429 (and a GET's 5xx) with Retry-After is asked again this often by `request`


def problem_from_body(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> ApiProblem:
    retry_after = retry_after_seconds(headers.get("Retry-After") if headers is not None else None)
    try:
        st = orjson.loads(body)
        if isinstance(st, dict) and st.get("kind") == "Status":
            return ApiProblem(status, str(st.get("reason") or status), str(st.get("message") or ""), retry_after)
    except orjson.JSONDecodeError:
        pass
    text = body[:200].decode("utf-8", "replace").strip()
    return ApiProblem(status, f"HTTP {status}", text or f"HTTP {status}", retry_after)


class BadAnswer(ConnectionProblem):
    """The server answered a request with success and a body the Kubernetes API never sends (a
    proxy's HTML login page, a JSON array or scalar where an object belongs, cut-off JSON): exit 1,
    one line saying what came back."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.ERROR)


def parse_object(raw: bytes, what: str, server: str = "") -> dict[str, Any]:
    """`raw` (an answer's body) as a JSON object; `BadAnswer` naming `what` (e.g. "GET /api")
    when it is anything else."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        head = raw.lstrip()[:200].lower()
        if head.startswith((b"<!doctype html", b"<html")) or b"<body" in head:
            kind = "an HTML page"
        elif not raw.strip():
            kind = "empty"
        else:
            kind = f"not JSON ({str(exc).split(':')[0]})"
        doc, detail = None, kind
    else:
        if isinstance(doc, dict):
            return doc
        detail = "a JSON " + {list: "array", str: "string", type(None): "null", bool: "boolean"}.get(type(doc), "number")
    where = f" at {server}" if server else ""
    raise BadAnswer(f"the server{where} answered {what} with {detail}, not a Kubernetes object "
                    "(is the kubeconfig's server the API server, and not a proxy in front of it?)")


def retry_after_seconds(value: str | None) -> float | None:
    """The seconds a Retry-After header asks for (its delta form, as kube-apiserver sends it;
    capped at RETRY_AFTER_MAX), None when absent or not a number."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if seconds != seconds:  # NaN
        return None
    return max(0.0, min(seconds, RETRY_AFTER_MAX))


AGGREGATED = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")


class KubeClient:
    def __init__(self, cfg: ClusterConfig, *, timeout: float | None = None) -> None:
        """`timeout`: seconds a request may go without a byte from the server (default: the
        config's `request_timeout`; None in both means no limit). Only silence counts: a long
        body that keeps coming (a 400 MB LIST on a slow link) is never cut off."""
        self.cfg = cfg
        self.timeout = timeout if timeout is not None else cfg.request_timeout
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool | None = None
        self._pending: dict[int, float] = {}  # request id -> when it was sent (streams excluded)
        self._answered = 0.0  # monotonic time of the last answer
        self._next_id = 0
        self._heard_waiters: set[asyncio.Future[None]] = set()  # `pause(until_answer=True)` callers
        self.answers = 0  # responses received (any status): `pause(until_answer=...)` compares it
        self._refresh_lock: asyncio.Lock | None = None
        self._session_tls: tuple[str, ...] = ()  # the TLS files the session's connections were made with

    @property
    def server(self) -> str:
        return self.cfg.server.rstrip("/")

    @property
    def server_hostname(self) -> str | None:
        """The name the server's certificate is checked against and sent as SNI: the kubeconfig's
        `tls-server-name` when it has one (as kubectl), else the server URL's host."""
        return self.cfg.tls_server_name or None

    def tls_context(self) -> ssl.SSLContext | bool:
        """The TLS settings of the client's connections (False: plain HTTP), made on first use."""
        if self._ssl is None:
            try:
                self._ssl = self.cfg.ssl_context()
            except (OSError, ssl.SSLError) as exc:
                raise ConnectionProblem(f"cannot load TLS files: {exc}", ExitCode.TLS) from None
            self._session_tls = self.cfg.tls_files()
        return self._ssl

    def session(self) -> aiohttp.ClientSession:
        """The HTTP session (made on first use, with the cluster's TLS settings); for readers that
        stream a response themselves (`monitors.logs.stream`)."""
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self.tls_context(), limit=300, limit_per_host=300)
            # (the default timeout bounds what passes none: a WebSocket upgrade the server never answers)
            self._session = aiohttp.ClientSession(
                connector=connector, json_serialize=lambda o: orjson.dumps(o).decode(), auto_decompress=True,
                timeout=idle_timeout(self.timeout),
            )
        return self._session

    def headers(self, accept: str = "application/json", as_self: bool = False) -> list[tuple[str, str]]:
        """The headers of every request: Accept, credentials, impersonation (none `as_self`: the
        credentials' own identity, for discovery an impersonated user may not do)."""
        if as_self:
            return [("Accept", accept), *((k, v) for k, v in self.cfg.headers().items()
                                          if not k.startswith("Impersonate-"))]
        return [("Accept", accept), *self.cfg.headers().items(), *self.cfg.impersonation_groups()]

    def connection_problem(self, exc: BaseException, seconds: float | None = None) -> ConnectionProblem:
        """What a failed connection means for the user (TLS, timed out, unreachable), with its exit
        code; `seconds`: the silence that timed out (default: the client's timeout)."""
        if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError | ssl.SSLError):
            # what the verification said, without the wrapping
            cert = getattr(exc, "certificate_error", exc if isinstance(exc, ssl.SSLCertVerificationError) else None)
            why = getattr(cert, "verify_message", None) or getattr(cert, "reason", None)
            unknown_issuer = getattr(cert, "verify_code", None) in (18, 19, 20, 21)  # self-signed, unknown CA
            hint = " (is the kubeconfig's certificate-authority the server's CA?)" if unknown_issuer else ""
            detail = f"certificate verify failed: {why}{hint}" if why else f"{exc.__class__.__name__}: {_short(exc)}"
            return ConnectionProblem(f"TLS verification failed for {self.server}: {detail}", ExitCode.TLS)
        if isinstance(exc, TimeoutError | asyncio.TimeoutError):
            limit = seconds if seconds is not None else self.timeout
            after = f" (no answer within {limit:g} s)" if limit else ""
            return ConnectionProblem(f"timed out talking to {self.server}{after}", ExitCode.UNREACHABLE,
                                     timed_out=True)
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
        accept: str = "application/json",
        as_self: bool = False,
    ) -> bytes:
        return (await self._request(method, path, params=params, body=body, content_type=content_type,
                                    timeout=timeout, accept=accept, as_self=as_self))[1]

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        accept: str = "application/json",
        as_self: bool = False,
    ) -> tuple[str, bytes]:
        """(the answer's content type, its body); an error status raises `ApiProblem`.

        `timeout` (default: the client's) bounds each wait for the server (connecting, the
        answer, every read of its body), never the whole transfer. A 401 reads the kubeconfig
        again and, if the credentials changed (refreshed token, re-run exec plugin), asks once
        more; a 429 (or a GET's 5xx) with Retry-After is asked again after waiting as long as the
        server said, up to RETRIES_AFTER times while that fits in `timeout`, as client-go does."""
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
        limit = timeout or self.timeout
        loop = asyncio.get_running_loop()
        waited = 0.0
        retries = 0
        refreshed = False
        while True:
            headers = self.headers(accept, as_self)
            if data is not None:
                headers.append(("Content-Type", content_type))
            sent = self.credentials_sent(headers)
            session = self.session()
            rid = self._next_id = self._next_id + 1
            self._pending[rid] = loop.time()
            try:
                async with session.request(
                    method, self.server + path, params=_params(params), data=data, headers=headers,
                    timeout=idle_timeout(limit), server_hostname=self.server_hostname,
                ) as resp:
                    self._answered = loop.time()
                    self._heard()
                    raw = await resp.read()
                    if resp.status < 400:
                        return resp.headers.get("Content-Type", ""), raw
                    problem = problem_from_body(resp.status, raw, resp.headers)
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise self.connection_problem(exc, limit) from None
            finally:
                self._pending.pop(rid, None)
            if problem.status == 401 and not refreshed:
                refreshed = True
                if await self.credentials_rejected(sent):
                    continue
            wait = problem.retry_after
            if wait is not None and retries < RETRIES_AFTER and \
                    (problem.status == 429 or (problem.status >= 500 and method == "GET")) and \
                    (not limit or waited + wait <= limit):
                retries += 1
                waited += wait
                await asyncio.sleep(wait)
                continue
            raise problem

    async def credentials_rejected(self, sent: tuple[str, ...]) -> bool:
        """The server answered 401 to credentials `sent` (`ClusterConfig.credentials_key`): the
        kubeconfig is read again (`ClusterConfig.reread_after_401`, shared with every other path
        to the cluster); True when the credentials are now different, so asking again may succeed."""
        if self._refresh_lock is None:
            self._refresh_lock = asyncio.Lock()
        async with self._refresh_lock:  # (one thread at a time from this loop: the config has its own lock)
            changed = self.cfg.credentials_key() != sent or await asyncio.to_thread(self.cfg.reread_after_401, sent)
            if changed and self._ssl is not None and self.cfg.tls_files() != self._session_tls:
                await self._renew_session()  # a new client certificate needs new connections
            return changed

    def credentials_now(self) -> tuple[str, ...]:
        """What identifies the credentials a request sent now carries (for `credentials_rejected`)."""
        return self.cfg.credentials_key()

    def credentials_sent(self, headers: list[tuple[str, str]]) -> tuple[str, ...]:
        """The credentials a request with `headers` carries (`ClusterConfig.credentials_key`)."""
        return (next((v for k, v in headers if k == "Authorization"), ""), *self.cfg.tls_files())

    def credentials_changed_since(self, stamp: object) -> bool:
        """The kubeconfig (or its token file) is no longer as it was at `stamp`."""
        return self.cfg.source_stamp() != stamp

    async def _renew_session(self) -> None:
        old, self._session, self._ssl = self._session, None, None
        if old is not None:
            await old.close()

    def _heard(self) -> None:
        """The server answered something: wake those waiting for it (`pause`)."""
        self.answers += 1
        waiters, self._heard_waiters = self._heard_waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def pause(self, seconds: float, *, until_answer: int | None = None, until_credentials: bool = False) -> None:
        """Sleep `seconds`, or less: with `until_answer` (the client's `answers` when the caller's
        request went out), until the server has answered any request of this client since (one
        informer reconnecting after an outage wakes the others, at once if that happened before
        the pause); with `until_credentials`, until the kubeconfig or its token file changes
        (checked twice a second: rewritten credentials are used at once)."""
        if until_answer is not None and self.answers != until_answer:
            return
        if until_answer is None and not until_credentials:
            await asyncio.sleep(seconds)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        stamp = self.cfg.source_stamp()
        fut: asyncio.Future[None] = loop.create_future()
        if until_answer is not None:
            self._heard_waiters.add(fut)
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    return
                step = min(left, 0.5) if until_credentials else left
                done, _ = await asyncio.wait({fut}, timeout=step)
                if done:
                    return
                if until_credentials and self.credentials_changed_since(stamp):
                    return
        finally:
            self._heard_waiters.discard(fut)
            if not fut.done():
                fut.cancel()

    def silent_for(self) -> float:
        """Seconds the server has not answered while requests wait (0 when none waits)."""
        if not self._pending:
            return 0.0
        now = asyncio.get_running_loop().time()
        return max(0.0, now - max(self._answered, min(self._pending.values())))

    async def websocket(self, path: str, params: list[tuple[str, str]], protocols: tuple[str, ...]
                        ) -> aiohttp.ClientWebSocketResponse:
        """A WebSocket upgrade of `path` (exec, attach, port-forward). A refused upgrade raises
        `aiohttp.WSServerHandshakeError` (its status; the body is not available); no answer
        raises `ConnectionProblem`. A 401 reads the kubeconfig again and, if the credentials
        changed, asks once more, as `request` does."""
        refreshed = False
        while True:
            headers = self.headers("*/*")
            sent = self.credentials_sent(headers)
            session = self.session()
            try:
                return await session.ws_connect(
                    self.server + path, params=params, headers=headers, protocols=protocols,
                    server_hostname=self.server_hostname,
                    timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0), autoping=True, heartbeat=None,
                    max_msg_size=0, compress=0,
                )
            except aiohttp.WSServerHandshakeError as exc:
                if exc.status == 401 and not refreshed:
                    refreshed = True
                    if await self.credentials_rejected(sent):
                        continue
                raise
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                raise self.connection_problem(exc) from None

    async def get(self, path: str, params: Mapping[str, Any] | None = None, timeout: float | None = None
                  ) -> dict[str, Any]:
        """GET `path` as a JSON object (`BadAnswer` when the answer is anything else)."""
        return parse_object(await self.request("GET", path, params=params, timeout=timeout), f"GET {path}",
                            self.server)

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
        refreshed = False
        while True:
            headers = self.headers()
            sent = self.credentials_sent(headers)
            session = self.session()
            try:
                async with session.get(
                    self.server + path, params=_params(params), headers=headers,
                    timeout=aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout),
                    server_hostname=self.server_hostname,
                ) as resp:
                    self._heard()
                    if resp.status >= 400:
                        problem = problem_from_body(resp.status, await resp.read(), resp.headers)
                        if problem.status == 401 and not refreshed:
                            refreshed = True
                            if await self.credentials_rejected(sent):
                                continue  # (the refreshed credentials are tried once at once)
                        raise problem
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
                    return
            except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
                return  # the stream ended early: callers resume from what they saw
            except (aiohttp.ClientError, OSError) as exc:
                # (a silent connection: aiohttp's ServerTimeoutError, both a ClientError and a
                # TimeoutError, after `read_timeout` without a byte)
                raise self.connection_problem(exc, read_timeout) from None

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
        """(group, plural) -> Kind for every resource the server offers (preferred version).

        One round trip where the server offers aggregated discovery (`apidiscovery.k8s.io/v2`,
        Kubernetes 1.30+: /api and /apis list every resource); otherwise /api/v1 and /apis, then
        each group version, all at once."""
        (core_type, core_raw), (apis_type, apis_raw) = await asyncio.gather(
            self._request("GET", "/api", accept=AGGREGATED), self._request("GET", "/apis", accept=AGGREGATED))
        out: dict[tuple[str, str], Kind] = {}
        core = parse_object(core_raw, "GET /api", self.server)
        apis = parse_object(apis_raw, "GET /apis", self.server)
        if _aggregated(core_type) and _aggregated(apis_type):
            for doc in (core, apis):
                for item in _objects(doc.get("items")):
                    group = _name(_object(item.get("metadata")).get("name"))
                    for v in _objects(item.get("versions")):  # preferred first
                        version = _name(v.get("version"))
                        for r in _objects(v.get("resources")):
                            key = (group, _name(r.get("resource")))
                            if key[1] and version and key not in out:
                                out[key] = Kind(group, version, key[1], r.get("scope") != "Cluster")
            return out

        async def one(group: str, version: str) -> list[dict[str, Any]]:
            try:
                doc = await self.get(api_paths.group_version(group, version))
            except (ApiProblem, BadAnswer):
                if not group:
                    raise
                return []
            return [r for r in _objects(doc.get("resources")) if _name(r.get("name")) and "/" not in r["name"]]

        wanted: list[tuple[str, str]] = [("", "v1")]
        for g in _objects(apis.get("groups")):
            name = _name(g.get("name"))
            listed = [_name(v.get("version")) for v in _objects(g.get("versions"))]
            preferred = _name(_object(g.get("preferredVersion")).get("version")) or next(iter(listed), "")
            versions = [preferred] + [v for v in listed if v != preferred]
            wanted += [(name, v) for v in versions if name and v]
        answers = await asyncio.gather(*(one(g, v) for g, v in wanted))
        for (group, version), resources in zip(wanted, answers, strict=True):  # preferred version first
            for r in resources:
                if (group, r["name"]) not in out:
                    out[(group, r["name"])] = Kind(group, version, r["name"], bool(r.get("namespaced")))
        return out


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _objects(value: Any) -> list[dict[str, Any]]:
    """The objects of a list in an answer (anything else in it, or a list that is not one: none)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _name(value: Any) -> str:
    """A name or version in an answer: a string, else empty (never `str()` of a list or a number)."""
    return value if isinstance(value, str) else ""


def idle_timeout(seconds: float | None) -> aiohttp.ClientTimeout:
    """`seconds` for connecting and for each wait on the server (its answer, every read of its
    body), no deadline on the whole request: a long body that keeps coming completes."""
    return aiohttp.ClientTimeout(total=None, sock_connect=seconds, sock_read=seconds)


def _aggregated(content_type: str) -> bool:
    """An APIGroupDiscoveryList answer (`as=APIGroupDiscoveryList` in its media type)."""
    params = {p.strip().partition("=")[0]: p.strip().partition("=")[2] for p in content_type.split(";")[1:]}
    return params.get("as") == "APIGroupDiscoveryList" and params.get("g") == "apidiscovery.k8s.io"


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
