"""Where GPU metrics come from, and how each source is asked (`metrics.GpuMetrics` polls them):

- a Prometheus URL the user gave (`given`);
- else, through the API server (`discover`, with `prom_discovery`): a Prometheus service, queried
  through its service proxy, or else the DCGM exporter pods, each scraped through its pod proxy
  (`scrape`), or else none (with what was refused, in RBAC terms).

Everything here that talks is blocking (requests): the poller runs it in its thread pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import requests

from . import api_paths, exposition, promql
from .gpu_samples import MetricsSource, SourceKind
from .prom_discovery import (
    EXPORTER_SELECTORS,
    ApiEndpoint,
    ExporterPod,
    describe_request_error,
    find_exporter_pods,
    http_get,
    locate_prometheus,
    missing_permission,
    status_message,
)
from .promql import Answer, PromError

T = TypeVar("T")
# runs a blocking function off the event loop (the poller's thread pool)
Call = Callable[[Callable[[], T]], Awaitable[T]]


class PromHttp:
    """Prometheus' HTTP API (`query`, `query_range`) read whole: its `warnings` kept, every failure
    a `PromError` (what prometheus-api-client's `custom_query` would drop or lump together).
    Blocking."""

    def __init__(self, url: str, session: requests.Session, headers: Mapping[str, str] | None = None,
                 timeout: float = 5.0) -> None:
        self.url = url
        self.session = session
        self.headers = dict(headers) if headers else None
        self.timeout = timeout

    def fetch(self, endpoint: str, params: Mapping[str, Any]) -> Answer:
        try:
            resp = self.session.request(
                method="GET", url=self.url + api_paths.prometheus_api(endpoint), params=dict(params),
                headers=self.headers, verify=self.session.verify, cert=self.session.cert, timeout=self.timeout,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            raise PromError("unavailable", describe_request_error(exc, self.timeout)) from None
        return promql.parse_response(resp.status_code, resp.content)

    def close(self) -> None:
        self.session.close()


@dataclass
class Scrape:
    """One exporter's samples, or why it could not be read."""

    exporter: ExporterPod
    samples: list[exposition.Sample] = field(default_factory=list)
    error: str = ""


def scrape(session: requests.Session, api: ApiEndpoint, exp: ExporterPod, timeout: float) -> Scrape:
    """An exporter's /metrics through the API server's pod proxy (blocking)."""
    try:
        resp = http_get(session, api.url(exp.path), timeout)
    except requests.RequestException as exc:
        return Scrape(exp, error=f"{exp.namespace}/{exp.name}: {describe_request_error(exc, timeout)}")
    if resp.status_code != 200:
        return Scrape(exp, error=f"{exp.namespace}/{exp.name}: HTTP {resp.status_code}: "
                                 f"{status_message(resp.content)}")
    parsed = exposition.parse(resp.content)
    samples = parsed.samples
    if exp.node:  # an exporter without NODE_NAME has no Hostname: use the pod's node
        samples = [
            s if ("Hostname" in s.labels or "hostname" in s.labels)
            else exposition.Sample(s.name, {**s.labels, "Hostname": exp.node}, s.value, s.timestamp_ms)
            for s in samples
        ]
    return Scrape(exp, samples)


@dataclass(frozen=True)
class Found:
    """A source, and what asks it: a Prometheus client, or the session the exporters are scraped with."""

    source: MetricsSource
    session: requests.Session | None = None
    client: PromHttp | None = None


def given(url: str, headers: Mapping[str, str], verify: str | bool, timeout: float) -> Found:
    """The Prometheus at the URL the user gave (never looked for again)."""
    session = requests.Session()
    session.verify = verify
    return Found(MetricsSource(SourceKind.PROMETHEUS, url=url), session, PromHttp(url, session, headers, timeout))


async def discover(api: ApiEndpoint, namespaces: tuple[str, ...], timeout: float, call: Call[Any]) -> Found:
    """Prometheus and the DCGM exporters looked for through the API server at once (one round
    trip, not one per step); Prometheus wins when both are found."""

    async def exporters_for(selector: str) -> tuple[list[ExporterPod], list[str]]:
        try:
            found: tuple[list[ExporterPod], list[str]] = await call(
                lambda: find_exporter_pods(api, namespaces, timeout=timeout, selectors=(selector,)))
            return found
        except requests.RequestException as exc:
            return [], [f"API server: {describe_request_error(exc, timeout)}"]

    (svc, candidates, notes), *by_selector = await asyncio.gather(
        call(lambda: locate_prometheus(api, namespaces, timeout=timeout)),
        *(exporters_for(sel) for sel in EXPORTER_SELECTORS))
    if svc is not None:
        url = api.url(svc.path)
        session = api.new_session()
        return Found(MetricsSource(SourceKind.PROMETHEUS_VIA_APISERVER, url=url, service=svc, notes=tuple(notes)),
                     session, PromHttp(url, session, None, timeout))
    found = {(e.namespace, e.name): e for pods, _n in by_selector for e in pods}
    exporters = [found[k] for k in sorted(found)]
    enotes = list(dict.fromkeys(n for _p, ns in by_selector for n in ns))
    if exporters:
        enotes = [n for n in enotes if n != "no DCGM exporter pod found"]
    notes = [*notes, *enotes]
    if exporters:
        return Found(MetricsSource(SourceKind.EXPORTER_SCRAPE, exporters=tuple(exporters), notes=tuple(notes)),
                     api.new_session())
    # nothing found where we were not allowed to look: what is missing, and how it is granted
    return Found(MetricsSource(SourceKind.NONE, notes=tuple(notes), forbidden=missing_permission(notes, candidates)))
