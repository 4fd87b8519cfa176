"""The API server's proxies: ``pods/proxy``, ``services/proxy`` and ``nodes/proxy``.

URL forms (as on a real API server; see conventions §5.5)::

    /api/v1/namespaces/{ns}/pods/[https:]{name}[:port]/proxy/{path}
    /api/v1/namespaces/{ns}/services/[https:]{name}[:port-name-or-number]/proxy/{path}
    /api/v1/nodes/[https:]{name}[:port]/proxy/{path}

Pod IPs in simcluster are fake, so backends are found through a `PortMap`: whoever serves a
pod's container port on this machine (the DCGM exporter, a Prometheus started for a demo, the
kubelet for a pod process listening on a port) registers ``(namespace, pod, containerPort) ->
(host, port)``. A service proxy resolves the service port (by name or number) to the target port
of a Ready pod matching the service's selector that has a mapping, as the Endpoints would.
Method, query string and body are forwarded; responses are streamed, not buffered. The caller's
credentials (Authorization, impersonation headers) are not forwarded to the backend.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp
from aiohttp import web
from yarl import URL

from ..apiserver.errors import ApiError, not_found

if TYPE_CHECKING:
    from ..apiserver.server import Ctx
    from ..cluster import SimCluster

log = logging.getLogger("simcluster.proxy")

VALID_SCHEMES = ("", "http", "https")
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "trailers", "transfer-encoding", "upgrade", "host",
})
DROP_REQUEST = HOP_BY_HOP | {"authorization", "content-length"}
SMALL_BODY = 1 << 20
CHUNK = 64 * 1024
KUBELET_PORT = 10250


class PortMap:
    """Where a pod's (or node's) port is really served on this machine."""

    def __init__(self) -> None:
        self._pods: dict[tuple[str, str, int], tuple[str, int]] = {}
        self._nodes: dict[tuple[str, int], tuple[str, int]] = {}

    # -- pods --------------------------------------------------------------------------------
    def register(self, namespace: str, pod_name: str, container_port: int, host: str, port: int) -> None:
        self._pods[(namespace, pod_name, int(container_port))] = (host, int(port))

    def unregister(self, namespace: str, pod_name: str, container_port: int | None = None) -> None:
        """Forget one port of a pod, or all of them when `container_port` is None."""
        if container_port is not None:
            self._pods.pop((namespace, pod_name, int(container_port)), None)
            return
        for key in [k for k in self._pods if k[0] == namespace and k[1] == pod_name]:
            del self._pods[key]

    def lookup(self, namespace: str, pod_name: str, container_port: int) -> tuple[str, int] | None:
        return self._pods.get((namespace, pod_name, int(container_port)))

    def pod_ports(self, namespace: str, pod_name: str) -> dict[int, tuple[str, int]]:
        return {k[2]: v for k, v in self._pods.items() if k[0] == namespace and k[1] == pod_name}

    # -- nodes -------------------------------------------------------------------------------
    def register_node(self, node: str, node_port: int, host: str, port: int) -> None:
        self._nodes[(node, int(node_port))] = (host, int(port))

    def unregister_node(self, node: str, node_port: int | None = None) -> None:
        for key in [k for k in self._nodes if k[0] == node and (node_port is None or k[1] == node_port)]:
            del self._nodes[key]

    def lookup_node(self, node: str, node_port: int) -> tuple[str, int] | None:
        return self._nodes.get((node, int(node_port)))

    def __len__(self) -> int:
        return len(self._pods) + len(self._nodes)


def portmap(sim: SimCluster) -> PortMap:
    """The cluster's PortMap, created on first use."""
    if sim.portmap is None:
        sim.portmap = PortMap()
    return sim.portmap


def split_scheme_name_port(ident: str) -> tuple[str, str, str] | None:
    """``[scheme:]name[:port]`` as the API server splits it (`SplitSchemeNamePort`)."""
    parts = ident.split(":")
    if len(parts) == 1:
        scheme, name, port = "", parts[0], ""
    elif len(parts) == 2:
        scheme, name, port = "", parts[0], parts[1]
    elif len(parts) == 3:
        scheme, name, port = parts
    else:
        return None
    if not name or scheme not in VALID_SCHEMES:
        return None
    return scheme, name, port


def _unavailable(message: str) -> ApiError:
    return ApiError(503, message)


def _unreachable(addr: str, port: int | str) -> ApiError:
    return _unavailable(f"error trying to reach service: dial tcp {addr}:{port}: connect: connection refused")


def _pod_ready(pod: dict[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def _container_ports(pod: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in (pod.get("spec") or {}).get("containers") or ():
        if isinstance(c, dict):
            out.extend(p for p in c.get("ports") or () if isinstance(p, dict))
    return out


def _resolve_target(pod: dict[str, Any], target: Any) -> int | None:
    """A service targetPort (number or name) -> the pod's container port number."""
    if isinstance(target, int):
        return target
    if isinstance(target, str):
        if target.isdigit():
            return int(target)
        for p in _container_ports(pod):
            if p.get("name") == target and isinstance(p.get("containerPort"), int):
                return int(p["containerPort"])
    return None


def _selects(selector: dict[str, str], labels: dict[str, str] | None) -> bool:
    labels = labels or {}
    return all(labels.get(k) == v for k, v in selector.items())


class Proxy:
    """The three proxy subresource handlers and the HTTP client they share."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.store = sim.store
        self.ports = portmap(sim)
        self._session: aiohttp.ClientSession | None = None
        self._rr = itertools.count()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=5, sock_connect=5),
                auto_decompress=False,
                trust_env=False,
                connector=aiohttp.TCPConnector(limit=0, force_close=False),
            )
        return self._session

    # -- handlers ----------------------------------------------------------------------------
    async def pods(self, ctx: Ctx) -> web.StreamResponse:
        parsed = split_scheme_name_port(ctx.name or "")
        if parsed is None:
            raise ApiError(400, f"invalid pod request {ctx.name!r}")
        scheme, name, port_s = parsed
        ns = ctx.namespace or ""
        st = self.store.find(("", "pods"), ns, name)
        if st is None:
            raise not_found("pods", "", name)
        pod = st.obj
        if not port_s:
            ports = _container_ports(pod)
            port_s = str(ports[0].get("containerPort", "")) if ports else ""
        port = _resolve_target(pod, port_s) if port_s else 80
        if port is None:
            raise ApiError(400, f"invalid pod request {ctx.name!r}: unknown port {port_s!r}")
        addr = (pod.get("status") or {}).get("podIP") or name
        target = self.ports.lookup(ns, name, port)
        if target is None:
            raise _unreachable(addr, port)
        return await self.forward(ctx, scheme or "http", target, (addr, port))

    async def services(self, ctx: Ctx) -> web.StreamResponse:
        parsed = split_scheme_name_port(ctx.name or "")
        if parsed is None:
            raise ApiError(400, f"invalid service request {ctx.name!r}")
        scheme, name, port_s = parsed
        ns = ctx.namespace or ""
        st = self.store.find(("", "services"), ns, name)
        if st is None:
            raise not_found("services", "", name)
        svc = st.obj
        spec = svc.get("spec") or {}
        ports = [p for p in spec.get("ports") or () if isinstance(p, dict)]
        svc_port: dict[str, Any] | None = None
        if port_s.isdigit():
            svc_port = next((p for p in ports if p.get("port") == int(port_s)), None)
            if svc_port is None:
                raise _unavailable(f"no service port {int(port_s)} found for service {name!r}".replace("'", '"'))
        elif port_s:
            svc_port = next((p for p in ports if p.get("name") == port_s), None)
        elif len(ports) == 1:
            svc_port = ports[0]
        else:
            svc_port = next((p for p in ports if not p.get("name")), None)
        no_endpoints = _unavailable(f'no endpoints available for service "{name}"')
        selector = spec.get("selector")
        if svc_port is None or not isinstance(selector, dict) or not selector:
            raise no_endpoints
        target = svc_port.get("targetPort", svc_port.get("port"))
        publish_not_ready = bool(spec.get("publishNotReadyAddresses"))
        candidates: list[tuple[dict[str, Any], int]] = []
        for pst in self.store.items(("", "pods"), ns):
            pod = pst.obj
            if not _selects(selector, pod["metadata"].get("labels")):
                continue
            if not (_pod_ready(pod) or (publish_not_ready and not pod["metadata"].get("deletionTimestamp"))):
                continue
            cport = _resolve_target(pod, target)
            if cport is not None:
                candidates.append((pod, cport))
        if not candidates:
            raise no_endpoints
        mapped = [
            (pod, cport, addr)
            for pod, cport in candidates
            if (addr := self.ports.lookup(ns, pod["metadata"]["name"], cport)) is not None
        ]
        if not mapped:
            pod, cport = candidates[0]
            raise _unreachable((pod.get("status") or {}).get("podIP") or pod["metadata"]["name"], cport)
        pod, cport, addr = mapped[next(self._rr) % len(mapped)]
        shown = ((pod.get("status") or {}).get("podIP") or pod["metadata"]["name"], cport)
        return await self.forward(ctx, scheme or "http", addr, shown)

    async def nodes(self, ctx: Ctx) -> web.StreamResponse:
        parsed = split_scheme_name_port(ctx.name or "")
        if parsed is None:
            raise ApiError(400, f"invalid node request {ctx.name!r}")
        scheme, name, port_s = parsed
        st = self.store.find(("", "nodes"), "", name)
        if st is None:
            raise not_found("nodes", "", name)
        if port_s and not port_s.isdigit():
            raise ApiError(400, f"invalid node request {ctx.name!r}")
        port = int(port_s) if port_s else KUBELET_PORT
        if not port_s and not scheme:
            scheme = "https"
        addrs = (st.obj.get("status") or {}).get("addresses") or ()
        ip = next((a.get("address") for a in addrs if a.get("type") == "InternalIP"), name)
        target = self.ports.lookup_node(name, port)
        if target is None:
            raise _unreachable(ip, port)
        return await self.forward(ctx, scheme or "http", target, (ip, port))

    # -- forwarding --------------------------------------------------------------------------
    @staticmethod
    def _rest_path(ctx: Ctx) -> tuple[str, str]:
        """(the URL prefix up to ``/proxy`` as sent, the decoded path after it, starting with "/")."""
        segs = ctx.request.path.split("/")
        for i in range(2, len(segs)):
            if segs[i] == "proxy" and segs[i - 1] == ctx.name and segs[i - 2] == ctx.rt.plural:
                raw = ctx.request.raw_path.split("?", 1)[0].split("/")
                prefix = "/".join(raw[: i + 1]) if len(raw) == len(segs) else "/".join(segs[: i + 1])
                return prefix, "/" + "/".join(segs[i + 1:])
        return "", "/" + ctx.subpath

    async def forward(
        self, ctx: Ctx, scheme: str, target: tuple[str, int], shown: tuple[str, int | str]
    ) -> web.StreamResponse:
        req = ctx.request
        prefix, rest = self._rest_path(ctx)
        url = URL.build(
            scheme=scheme, host=target[0], port=target[1],
            path=quote(rest, safe="/:@!$&'()*+,;=-._~"), query_string=req.raw_path.partition("?")[2],
            encoded=True,
        )
        headers = {k: v for k, v in req.headers.items()
                   if k.lower() not in DROP_REQUEST and not k.lower().startswith("impersonate-")}
        peer = req.remote or ""
        if peer:
            prior = req.headers.get("X-Forwarded-For")
            headers["X-Forwarded-For"] = f"{prior}, {peer}" if prior else peer
        data: Any = None
        if req.body_exists:
            if req.content_length is not None and req.content_length <= SMALL_BODY:
                data = await req.read()
            else:
                data = req.content
        try:
            upstream = await self.session().request(
                req.method, url, headers=headers, data=data, allow_redirects=False,
                ssl=scheme != "https",  # the real proxy does not verify backends
            )
        except (TimeoutError, aiohttp.ClientError, OSError):
            raise _unreachable(*shown) from None
        try:
            resp = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for k, v in upstream.headers.items():
                lk = k.lower()
                if lk in HOP_BY_HOP:
                    continue
                if lk == "location" and v.startswith("/") and not v.startswith("//") and prefix:
                    v = prefix + v
                resp.headers.add(k, v)
            await resp.prepare(req)
            with contextlib.suppress(aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
                async for chunk in upstream.content.iter_chunked(CHUNK):
                    await resp.write(chunk)
            with contextlib.suppress(ConnectionError, RuntimeError):
                await resp.write_eof()
            return resp
        finally:
            if upstream.content.at_eof():
                upstream.release()
            else:
                upstream.close()  # the client went away mid-stream: drop the backend connection


def install(sim: SimCluster) -> None:
    """Register the pod, service and node proxies (idempotent) and attach ``sim.portmap``."""
    if sim.proxy is not None:
        return
    proxy = Proxy(sim)
    sim.proxy = proxy
    sim.server.subresources["pods/proxy"] = proxy.pods
    sim.server.subresources["services/proxy"] = proxy.services
    sim.server.subresources["nodes/proxy"] = proxy.nodes
    sim.on_stop(proxy.close)
