"""Finding Prometheus (or the DCGM exporters) through the Kubernetes API server, GET only.

The user's own credentials are used (`ApiEndpoint`): those of the connection (`credentials`, the
one source every path to the cluster takes them from as each request goes out: a rotated token or a
rewritten kubeconfig is picked up, a 401 reads the kubeconfig again and asks once more), or fixed
ones (server URL, headers such as a bearer token, CA path / verify flag, client certificate), or a
ready `requests.Session` given by the caller.
All functions here are synchronous (requests); `monitors.metrics` runs them in a thread.

Prometheus services (conventions §5.5), in this order:

1. ``monitoring/prometheus-k8s`` (kube-prometheus), port 9090 or the port named ``web``;
2. any ``prometheus-operated`` (prometheus-operator's governing service), port 9090 / ``web``;
3. any service named ``*-prometheus`` (kube-prometheus-stack) with port 9090 or a port named
   ``http-web`` / ``web``;
4. any ``prometheus-server`` (the community chart; its first port, 80 by default).

Services are listed cluster-wide (``GET /api/v1/services``); on 403, namespace by namespace
(the namespaces the caller names, ``monitoring``, and those ``GET /api/v1/namespaces`` returns
when allowed); and where listing is forbidden the well-known names are fetched directly.
`locate_prometheus` then checks the candidates in order through the service proxy
(``/api/v1/namespaces/<ns>/services/<svc>:<port>/proxy/api/v1/query?query=1``) and returns the
first that answers, with notes on what was tried.

DCGM exporter pods (the fallback): label ``app=nvidia-dcgm-exporter`` (GPU Operator) or
``app.kubernetes.io/name=dcgm-exporter`` (the exporter's chart), cluster-wide or, on 403, in the
usual namespaces; each is scraped through the pod proxy
``/api/v1/namespaces/<ns>/pods/<pod>:9400/proxy/metrics``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import requests
from urllib3 import HTTPHeaderDict

from . import api_paths

__all__ = [
    "EXPORTER_SELECTORS",
    "ApiEndpoint",
    "ExporterPod",
    "PromService",
    "describe_request_error",
    "find_exporter_pods",
    "find_prometheus_services",
    "http_get",
    "locate_prometheus",
    "missing_permission",
    "probe_prometheus",
    "rank_services",
]

PROM_PORT = 9090
EXPORTER_PORT = 9400
EXPORTER_SELECTORS = ("app=nvidia-dcgm-exporter", "app.kubernetes.io/name=dcgm-exporter")
EXPORTER_NAMESPACES = ("gpu-operator", "nvidia-gpu-operator", "dcgm-exporter", "monitoring", "kube-system")
PROM_NAMESPACES = ("monitoring", "prometheus", "kube-prometheus-stack", "observability")
KNOWN_PROM_NAMES = ("prometheus-k8s", "prometheus-operated", "kube-prometheus-stack-prometheus",
                    "prometheus-kube-prometheus-prometheus", "monitoring-kube-prometheus-prometheus",
                    "prometheus-server")
MAX_NAMESPACES = 50
MAX_PROBES = 5
PARALLEL = 32  # GETs of one discovery step sent at once


class Credentials(Protocol):
    """Where a request's credentials come from as it goes out (`connection.ClusterConfig`)."""

    def headers(self) -> dict[str, str]: ...

    def impersonation_groups(self) -> list[tuple[str, str]]: ...

    def credentials_key(self) -> tuple[str, ...]: ...

    def requests_verify(self) -> str | bool: ...

    def requests_cert(self) -> tuple[str, str] | None: ...

    def reread_after_401(self, sent: tuple[str, ...]) -> bool: ...


@dataclass(frozen=True)
class ApiEndpoint:
    """How to reach the API server as the user: base URL and `credentials` (read for each request),
    or fixed ones: headers (``Authorization``), `verify` (CA bundle path or bool), client
    certificate ``(cert, key)``; or a ready `session`."""

    server: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # (a token: never in a repr)
    verify: str | bool = True
    cert: tuple[str, str] | None = None
    session: requests.Session | None = field(default=None, compare=False, repr=False)
    server_hostname: str | None = None  # the kubeconfig's tls-server-name: SNI and the certificate's name
    credentials: Credentials | None = field(default=None, compare=False, repr=False)

    def new_session(self) -> requests.Session:
        """The caller's session if given, else a new one carrying the credentials (or the fixed
        headers, verify and cert) and the TLS server name."""
        if self.session is not None:
            return self.session
        s = requests.Session() if self.credentials is None else _CredentialedSession(self.credentials)
        s.headers.update(self.headers)
        s.verify = self.verify if self.credentials is None else self.credentials.requests_verify()
        s.cert = self.cert if self.credentials is None else self.credentials.requests_cert()
        adapter = _NamedAdapter(self.server_hostname, pool_maxsize=PARALLEL)  # discovery asks in parallel
        s.mount("https://", adapter)
        s.mount("http://", adapter)
        return s

    def url(self, path: str) -> str:
        return self.server.rstrip("/") + path


class _CredentialedSession(requests.Session):
    """A session whose every request carries the credentials as they are when it goes out (headers,
    CA, client certificate); a 401 reads the kubeconfig again (`Credentials.reread_after_401`) and,
    when the credentials changed, the request is sent once more with them."""

    def __init__(self, credentials: Credentials) -> None:
        super().__init__()
        self.credentials = credentials

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        creds = self.credentials
        retried = False
        while True:
            sent = creds.credentials_key()
            try:
                headers = {**creds.headers(), **(kwargs.get("headers") or {})}
            except Exception as exc:  # (credentials no header can carry: a ConnectionProblem saying so)
                raise requests.exceptions.InvalidHeader(str(exc)) from None
            resp = super().request(method, url, *args, **{**kwargs, "headers": headers,
                                                          "verify": creds.requests_verify(),
                                                          "cert": creds.requests_cert()})
            if resp.status_code != 401 or retried or not creds.reread_after_401(sent):
                return resp
            retried = True
            resp.close()

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        """Each impersonated group as a header of its own, as kubectl sends them (a header mapping
        holds one value per name: urllib3's HTTPHeaderDict writes repeated ones)."""
        groups = self.credentials.impersonation_groups()
        if groups:
            headers = HTTPHeaderDict({k: v for k, v in request.headers.items() if k.lower() != "impersonate-group"})
            for name, value in groups:
                headers.add(name, value)
            request.headers = headers  # type: ignore[assignment]  # (a MutableMapping[str, str] as requests needs)
        return super().send(request, **kwargs)


class _NamedAdapter(requests.adapters.HTTPAdapter):
    """An adapter whose TLS connections send `server_hostname` as SNI and check the certificate
    against it (urllib3's pool keyword), as kubectl does with `tls-server-name`."""

    def __init__(self, server_hostname: str | None, **kwargs: Any) -> None:
        self._server_hostname = server_hostname
        super().__init__(**kwargs)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        if self._server_hostname:
            kwargs["server_hostname"] = self._server_hostname
        super().init_poolmanager(*args, **kwargs)


@dataclass(frozen=True)
class PromService:
    """A Prometheus service reached through the API server's service proxy."""

    namespace: str
    name: str
    port: str  # number or port name
    scheme: str = ""  # "" (http) or "https"

    @property
    def path(self) -> str:
        return api_paths.proxy("services", self.namespace, self.name, self.port, scheme=self.scheme)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}:{self.port}" if self.port else f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class ExporterPod:
    namespace: str
    name: str
    node: str = ""
    port: int = EXPORTER_PORT

    @property
    def path(self) -> str:
        return api_paths.proxy("pods", self.namespace, self.name, self.port, "metrics")


# -- HTTP --------------------------------------------------------------------------------------


def describe_request_error(exc: BaseException, timeout: float | None = None) -> str:
    """A short, human reason for a requests exception (no 300-character urllib3 chains)."""
    text = str(exc)
    if isinstance(exc, requests.Timeout) or "timed out" in text or "TimeoutError" in text:
        return f"timed out after {timeout:g} s" if timeout else "timed out"
    if isinstance(exc, requests.exceptions.SSLError):
        return "TLS error: " + (text.split("SSLError(", 1)[-1][:160] if "SSLError(" in text else text[:160])
    for marker in ("[Errno", "Errno"):
        i = text.find(marker)
        if i >= 0:
            tail = text[i:].split("]", 1)[-1].strip().rstrip("'\")").strip()
            if tail:
                return tail[0].lower() + tail[1:] if tail[:1].isupper() else tail
    if isinstance(exc, requests.ConnectionError):
        if "Connection refused" in text:
            return "connection refused"
        if "RemoteDisconnected" in text or "Connection aborted" in text:
            return "connection closed by the server"
        return "cannot connect"
    return f"{type(exc).__name__}: {text[:160]}"


def http_get(session: requests.Session, url: str, timeout: float,
             params: Mapping[str, str] | None = None) -> requests.Response:
    """GET with the session's own `verify`/`cert` passed explicitly: requests lets
    ``REQUESTS_CA_BUNDLE`` override a session's CA otherwise, and the kubeconfig's CA must win."""
    return session.get(url, params=params, timeout=timeout, allow_redirects=False,
                       verify=session.verify, cert=session.cert)


def _get(session: requests.Session, api: ApiEndpoint, path: str, timeout: float,
         params: Mapping[str, str] | None = None) -> tuple[int, Any]:
    """GET a JSON document; (status, parsed body or None). Raises requests exceptions."""
    resp = http_get(session, api.url(path), timeout, params)
    try:
        doc = resp.json()
    except ValueError:
        doc = None
    return resp.status_code, doc


def _parallel(fn: Callable[[Any], Any], items: Iterable[Any], workers: int = PARALLEL) -> list[Any]:
    """`fn` over `items` in a few threads (independent GETs: one round trip, not one per item),
    results in order. Exceptions propagate."""
    items = list(items)
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items)), thread_name_prefix="discovery") as pool:
        return list(pool.map(fn, items))


def forbidden_notes(notes: Iterable[str]) -> bool:
    """The notes of a discovery say that listing was refused (HTTP 403)."""
    return any(n.endswith("HTTP 403") for n in notes)


def missing_permission(notes: Iterable[str], candidates: Iterable[PromService] = ()) -> str:
    """What the API server refused to a discovery that found no GPU metrics, in RBAC terms, and how
    it is granted (the Role in docs/ssh.md): one line for the dashboard's banner ("" when nothing
    was refused). A Prometheus service found but refused through the proxy names that one."""
    notes = list(notes)
    for svc in candidates:
        if any(n.startswith(f"{svc}: HTTP 403") for n in notes):
            return (f"HTTP 403 from Prometheus {svc} through the API server: grant get on services/proxy in "
                    f"{svc.namespace} (docs/ssh.md), or set --prometheus URL")
    if not forbidden_notes(notes):
        return ""
    return ("HTTP 403: grant get on services, services/proxy in Prometheus' namespace or get, list on pods, "
            "pods/proxy in the DCGM exporters' (docs/ssh.md), or set --prometheus URL")


def _items(doc: Any) -> list[dict[str, Any]]:
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        return [i for i in doc["items"] if isinstance(i, dict)]
    return []


def _obj(value: Any) -> dict[str, Any]:
    """A field of an answer that should hold an object (anything else: as if empty)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# -- Prometheus services ------------------------------------------------------------------------


def _ports(svc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [p for p in _list(_obj(svc.get("spec")).get("ports")) if isinstance(p, dict)]


def _port_for(svc: Mapping[str, Any], names: tuple[str, ...], number: int | None = PROM_PORT) -> str | None:
    ports = _ports(svc)
    for p in ports:
        if number is not None and p.get("port") == number:
            return str(number)
    for p in ports:
        if _str(p.get("name")) in names and isinstance(p.get("port"), int):
            return str(p["port"])
    return None


def _tier(svc: Mapping[str, Any]) -> tuple[int, str] | None:
    meta = _obj(svc.get("metadata"))
    name, ns = _str(meta.get("name")), _str(meta.get("namespace"))
    if name == "prometheus-k8s" and ns == "monitoring":
        port = _port_for(svc, ("web",))
        return (0, port) if port else None
    if name == "prometheus-operated":
        port = _port_for(svc, ("web",))
        return (1, port) if port else None
    if name.endswith("-prometheus"):
        port = _port_for(svc, ("http-web", "web"))
        return (2, port) if port else None
    if name == "prometheus-server":
        ports = _ports(svc)
        port = _port_for(svc, ("http", "web"), number=80)
        if port is None and ports and isinstance(ports[0].get("port"), int):
            port = str(ports[0]["port"])
        return (3, port) if port else None
    return None


def rank_services(services: Iterable[Mapping[str, Any]]) -> list[PromService]:
    """Prometheus candidates among Service objects, best first (see the module docstring)."""
    ranked: list[tuple[int, int, str, str, PromService]] = []
    seen: set[tuple[str, str]] = set()
    for svc in services:
        meta = _obj(svc.get("metadata"))
        ns, name = _str(meta.get("namespace")), _str(meta.get("name"))
        if not ns or not name or (ns, name) in seen:
            continue
        t = _tier(svc)
        if t is None:
            continue
        seen.add((ns, name))
        ranked.append((t[0], 0 if ns == "monitoring" else 1, ns, name, PromService(ns, name, t[1])))
    ranked.sort(key=lambda r: r[:4])
    return [r[4] for r in ranked]


def find_prometheus_services(api: ApiEndpoint, namespaces: Iterable[str] = (), *, timeout: float = 5.0,
                             session: requests.Session | None = None) -> tuple[list[PromService], list[str]]:
    """Candidate Prometheus services, best first, and notes on what was tried (GET only).

    Raises requests exceptions when the API server cannot be reached at all."""
    s = session or api.new_session()
    notes: list[str] = []
    # the namespace list is asked with the services (needed only when those are refused)
    (status, doc), (st, nsdoc) = _parallel(lambda path: _get(s, api, path, timeout),
                                           ["/api/v1/services", "/api/v1/namespaces"])
    if status == 200:
        return rank_services(_items(doc)), notes
    notes.append(f"listing services in all namespaces: HTTP {status}")
    wanted = list(dict.fromkeys([*namespaces, *PROM_NAMESPACES]))
    if st == 200:
        names = [_str(_obj(i.get("metadata")).get("name")) for i in _items(nsdoc)]
        wanted += [n for n in names if n and n not in wanted]
    wanted = wanted[:MAX_NAMESPACES]
    services: list[dict[str, Any]] = []
    unlisted: list[str] = []
    listed = _parallel(lambda ns: _get(s, api, api_paths.resource("", "v1", "services", ns), timeout), wanted)
    for ns, (st, sdoc) in zip(wanted, listed, strict=True):
        if st == 200:
            services.extend(_items(sdoc))
        else:
            unlisted.append(ns)
    if unlisted:
        notes.append(f"cannot list services in {len(unlisted)} namespace(s); trying well-known names")
        paths = [api_paths.resource("", "v1", "services", ns, name)
                 for ns in unlisted for name in KNOWN_PROM_NAMES if name != "prometheus-k8s" or ns == "monitoring"]
        for st, sdoc in _parallel(lambda path: _get(s, api, path, timeout), paths):
            if st == 200 and isinstance(sdoc, dict):
                services.append(sdoc)
    return rank_services(services), notes


def probe_prometheus(api: ApiEndpoint, svc: PromService, *, timeout: float = 5.0,
                     session: requests.Session | None = None) -> str | None:
    """None when the service answers a trivial query through the proxy, else the reason."""
    s = session or api.new_session()
    try:
        resp = http_get(s, api.url(svc.path + api_paths.prometheus_api("query")), timeout, {"query": "1"})
    except requests.RequestException as exc:
        return describe_request_error(exc, timeout)
    try:
        doc = resp.json()
    except ValueError:
        doc = None
    if resp.status_code == 200 and isinstance(doc, dict) and doc.get("status") == "success":
        return None
    msg = doc.get("message") or doc.get("error") if isinstance(doc, dict) else None
    return f"HTTP {resp.status_code}" + (f": {str(msg)[:200]}" if msg else "")


def locate_prometheus(api: ApiEndpoint, namespaces: Iterable[str] = (), *, timeout: float = 5.0
                      ) -> tuple[PromService | None, list[PromService], list[str]]:
    """(the first candidate that answers or None, all candidates, notes). GET only."""
    s = api.new_session()
    try:
        candidates, notes = find_prometheus_services(api, namespaces, timeout=timeout, session=s)
    except requests.RequestException as exc:
        return None, [], [f"API server: {describe_request_error(exc, timeout)}"]
    if not candidates:
        notes.append("no Prometheus service found")
    for svc in candidates[:MAX_PROBES]:
        why = probe_prometheus(api, svc, timeout=timeout, session=s)
        if why is None:
            return svc, candidates, notes
        notes.append(f"{svc}: {why}")
    return None, candidates, notes


# -- DCGM exporter pods -------------------------------------------------------------------------


def _exporter_port(pod: Mapping[str, Any]) -> int:
    ports: list[dict[str, Any]] = []
    for c in _list(_obj(pod.get("spec")).get("containers")):
        if isinstance(c, dict):
            ports.extend(p for p in _list(c.get("ports")) if isinstance(p, dict))
    for p in ports:
        if _str(p.get("name")) in ("metrics", "gpu-metrics") and isinstance(p.get("containerPort"), int):
            return int(p["containerPort"])
    for p in ports:
        if p.get("containerPort") == EXPORTER_PORT:
            return EXPORTER_PORT
    return EXPORTER_PORT


def _exporter(pod: Mapping[str, Any]) -> ExporterPod | None:
    meta = _obj(pod.get("metadata"))
    status = _obj(pod.get("status"))
    if meta.get("deletionTimestamp") or status.get("phase") not in (None, "Running"):
        return None
    ns, name = _str(meta.get("namespace")), _str(meta.get("name"))
    if not ns or not name:
        return None
    node = _str(_obj(pod.get("spec")).get("nodeName"))
    return ExporterPod(ns, name, node, _exporter_port(pod))


def find_exporter_pods(api: ApiEndpoint, namespaces: Iterable[str] = (), *, timeout: float = 5.0,
                       session: requests.Session | None = None,
                       selectors: Iterable[str] = EXPORTER_SELECTORS) -> tuple[list[ExporterPod], list[str]]:
    """Running DCGM exporter pods, sorted by (namespace, name), and notes. GET only; the
    selectors (and, where listing everywhere is refused, the namespaces) are asked at once.

    Raises requests exceptions when the API server cannot be reached at all."""
    s = session or api.new_session()
    notes: list[str] = []
    found: dict[tuple[str, str], ExporterPod] = {}
    selectors = list(selectors)
    namespaces = list(namespaces)

    def everywhere(selector: str) -> tuple[int, Any]:
        return _get(s, api, "/api/v1/pods", timeout, {"labelSelector": selector})

    def add(doc: Any) -> None:
        for pod in _items(doc):
            e = _exporter(pod)
            if e is not None:
                found[(e.namespace, e.name)] = e

    refused = []
    for selector, (status, doc) in zip(selectors, _parallel(everywhere, selectors), strict=True):
        if status == 200:
            add(doc)
        else:
            notes.append(f"listing pods {selector} in all namespaces: HTTP {status}")
            refused.append(selector)
    asks = [(ns, sel) for sel in refused for ns in dict.fromkeys([*EXPORTER_NAMESPACES, *namespaces])]
    for st, ndoc in _parallel(lambda a: _get(s, api, api_paths.pod(a[0]), timeout, {"labelSelector": a[1]}), asks):
        if st == 200:
            add(ndoc)
    if not found:
        notes.append("no DCGM exporter pod found")
    return [found[k] for k in sorted(found)], notes


def status_message(body: bytes | str) -> str:
    """The ``message`` of an API server Status body, or a short excerpt of the body."""
    text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and doc.get("message"):
        return str(doc["message"])[:200]
    return " ".join(text.split())[:200]
