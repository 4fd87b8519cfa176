"""GPU metrics per pod and per node from DCGM exporter series: the poller. What it hands out is in
`gpu_samples` (re-exported here), the rules of the states in `gpu_states`, the sources and how each
is asked in `gpu_sources`.

No UI imports. Typical use::

    gm = GpuMetrics(api=ApiEndpoint(server, {"Authorization": "Bearer ..."}, verify=ca_path),
                    interval=15.0)                    # or GpuMetrics("http://prometheus:9090")
    await gm.resolve_source()                         # -> MetricsSource (str(): "prometheus(URL)"...)
    gm.set_shown([("team-a", "mnist-worker-0"), ...], namespaces=["team-a"], nodes=["gpu-node-1"])
    snap = await gm.refresh()                         # one MetricsSnapshot
    snap.pods[("team-a", "mnist-worker-0")]           # PodMetrics(state, sample, reason)
    gm.history("team-a", "mnist-worker-0")            # [(unix time, util %), ...] for sparklines
    await gm.run(on_snapshot, stop_event)             # periodic; returns when stop is set
    await gm.aclose()

Sources (`MetricsSource`, decided by `resolve_source`):

- ``prometheus(URL)``: a URL given by the user (``--prometheus URL`` or config);
- ``prometheus-via-apiserver(ns/service)``: found through the API server (`prom_discovery`) and
  queried through its service proxy with the user's credentials;
- ``exporter-scrape``: no Prometheus answers, so every DCGM exporter pod's ``/metrics`` is fetched
  through the pod proxy and parsed (`monitors.exposition`); history then builds up from refreshes;
- ``none``: neither was found (discovery is retried every `rediscover_after` seconds).

Queries (`monitors.promql`): per refresh one aggregated instant query per field for all pods of
the shown namespaces (both ``namespace``/``pod`` and ``exported_*`` spellings), the same per node
when nodes are shown, and one ``query_range`` (step = `interval`, over `history_window`; none when
`history_window` is 0, e.g. for one-shot CLI reads) of the utilisation of the shown pods. The util
query goes first: when it fails the source is down and the rest is not sent. Requests run in a private thread pool (requests
is blocking), `timeout` seconds each; the asyncio loop is never blocked.

Refreshes never overlap: `refresh()` called while one runs returns that one's result, and `run()`
skips ticks that fall due while a refresh is still running (counted in `skipped`); an explicit
`resolve_source()` waits for a running refresh. The source is resolved again every
`rediscover_after` seconds while it is ``exporter-scrape``/``none`` or while a discovered
Prometheus keeps failing (never for a URL given by the user).

States (`MetricState`), per pod and per node, describing the utilisation value:

- ``OK``: a fresh, valid value; or, while the source fails, the last good value when it is at
  most `stale_after` (3 intervals) old (reason says so);
- ``NO_DATA``: the source answered but has no usable value for this pod: no series at all
  (sample None), or only NaN/±Inf/out-of-range utilisation (sample with util None, other fields
  as valid as they are, reason says why);
- ``STALE``: the source fails (or answered partially) and the last good value is older than
  `stale_after`; the old sample is kept for display, marked stale;
- ``UNAVAILABLE``: the source fails and there is no last good value younger than `expire_after`
  (default: `history_window`, at least 2 x `stale_after`); sample None, reason = why (connection refused, HTTP 503, timed out).

The snapshot's own `state` is ``OK`` when the source answered (``reason`` lists warnings of a
partial answer), ``UNAVAILABLE`` with the reason when it did not or when there is no source,
``NO_DATA`` when nothing is shown. A missing value is None, never 0; the XID is the last non-zero
code seen for the pod while polling (0 when none, None without series).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import requests

from . import promql
from .gpu_samples import (
    GpuSample,
    MetricsSnapshot,
    MetricsSource,
    MetricState,
    NodeGpu,
    PodMetrics,
    SourceKind,
)
from .gpu_sources import Found, PromHttp, Scrape, discover, given, scrape
from .gpu_states import GpuStates
from .model_views import GpuXid
from .prom_discovery import ApiEndpoint
from .promql import Answer, PodKey, PromError, Reading

if TYPE_CHECKING:
    from .gpu_fleet_source import FleetRead

log = logging.getLogger("ranks.monitors.metrics")

__all__ = [
    "GpuMetrics",
    "GpuSample",
    "MetricState",
    "MetricsSnapshot",
    "MetricsSource",
    "NodeGpu",
    "PodMetrics",
    "SourceKind",
]

T = TypeVar("T")
MIN_INTERVAL = 0.2
MAX_POD_REGEX = 4000  # longer pod alternations make the history query filter by namespace only


# -- the poller ---------------------------------------------------------------------------------


class GpuMetrics:
    """Polls GPU metrics for what is shown; see the module docstring."""

    def __init__(
        self,
        prometheus_url: str | None = None,
        api: ApiEndpoint | None = None,
        *,
        prometheus_headers: Mapping[str, str] | None = None,
        prometheus_verify: str | bool = True,
        interval: float = 15.0,
        timeout: float = 5.0,
        history_window: float = 600.0,
        metric_names: Mapping[str, str] | None = None,
        exclude_pods: str | None = promql.DEFAULT_EXCLUDE_PODS,
        discovery_namespaces: Iterable[str] = (),
        stale_after: float | None = None,
        expire_after: float | None = None,
        rediscover_after: float = 120.0,
        clock: Callable[[], float] = time.time,
        max_workers: int = 8,
    ) -> None:
        self.prometheus_url = prometheus_url.rstrip("/") if prometheus_url else None
        self.api = api
        self.prometheus_headers = dict(prometheus_headers or {})
        self.prometheus_verify = prometheus_verify
        self.interval = max(MIN_INTERVAL, float(interval))
        self.timeout = float(timeout)
        self.history_window = float(history_window)
        self.names = promql.metric_names(metric_names)
        self.exclude_pods = exclude_pods
        self.discovery_namespaces = tuple(discovery_namespaces)
        stale = 3 * self.interval if stale_after is None else float(stale_after)
        self.states = GpuStates(stale, max(self.history_window, 2 * stale) if expire_after is None
                                else float(expire_after))
        self.rediscover_after = rediscover_after
        self.clock = clock
        self._workers = max(2, max_workers)
        self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="gpu-metrics")
        self._source: MetricsSource | None = None
        self._resolved_at = 0.0
        self._client: PromHttp | None = None
        self._session: requests.Session | None = None
        self._pods: frozenset[PodKey] = frozenset()
        self._namespaces: frozenset[str] = frozenset()
        self._nodes: frozenset[str] = frozenset()
        self._all_nodes = False
        self._history: dict[PodKey, list[tuple[float, float]]] = {}
        self._task: asyncio.Future[MetricsSnapshot] | None = None
        self._failing_since: float | None = None
        # built again only when what is shown changes (a refresh every few seconds of 15,000 pods
        # shown, the same each time, was most of an idle dashboard's data thread): the history
        # query of the pods shown, and the failed answer while no pod or node had a good sample
        self._history_q: tuple[frozenset[PodKey], str | None] | None = None
        self._failed_memo: tuple[tuple[Any, ...], tuple[Any, Any]] | None = None
        self.last: MetricsSnapshot | None = None
        self.refreshes = 0  # refreshes actually run
        self.joined = 0  # refresh() calls that joined a running refresh
        self.skipped = 0  # run() ticks skipped because a refresh overran

    # -- configuration -------------------------------------------------------------------------
    @property
    def source(self) -> MetricsSource | None:
        return self._source

    def set_shown(self, pods: Iterable[tuple[str, str]], namespaces: Iterable[str] = (),
                  nodes: Iterable[str] = (), *, all_nodes: bool = False) -> None:
        """What is on screen: pods (their namespaces are added to `namespaces`), and nodes for the
        node view (`all_nodes` for every node). Takes effect at the next refresh."""
        self._pods = frozenset((str(ns), str(p)) for ns, p in pods)
        self._namespaces = frozenset(namespaces) | {ns for ns, _ in self._pods}
        self._nodes = frozenset(nodes)
        self._all_nodes = all_nodes
        for key in [k for k in self._history if k not in self._pods]:
            del self._history[key]

    def history(self, namespace: str, pod: str) -> list[tuple[float, float]]:
        """Utilisation history [(unix time, %), ...] of a shown pod, oldest first."""
        return list(self._history.get((namespace, pod), ()))

    # -- lifecycle -----------------------------------------------------------------------------
    async def aclose(self) -> None:
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()

    async def __aenter__(self) -> GpuMetrics:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _call(self, fn: Callable[[], T]) -> T:
        """`fn()` in the pool (blocking requests), off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    # -- source --------------------------------------------------------------------------------
    async def resolve_source(self) -> MetricsSource:
        """Decide the source: the given URL, else discovery through the API server, else the
        exporter-scrape fallback, else none. Waits for a running refresh first."""
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(task)
        return await self._resolve()

    async def _resolve(self) -> MetricsSource:
        self._resolved_at = self.clock()
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None
        if self.prometheus_url:
            found = given(self.prometheus_url, self.prometheus_headers, self.prometheus_verify, self.timeout)
        elif self.api is None:
            found = Found(MetricsSource(SourceKind.NONE, notes=("no Prometheus URL and no API server",)))
        else:
            namespaces = tuple(dict.fromkeys([*self.discovery_namespaces, *sorted(self._namespaces)]))
            found = await discover(self.api, namespaces, self.timeout, self._call)
        self._source, self._client = found.source, found.client
        self._session = found.session or self._session
        return self._source

    def nothing_to_ask(self) -> bool:
        """No source, and not yet time to look for one again: a refresh of the same pods would
        answer what the last one did (the dashboard skips it)."""
        src = self._source
        return (src is not None and src.kind is SourceKind.NONE and self.last is not None
                and not self._should_rediscover(self.clock()))

    def _should_rediscover(self, now: float) -> bool:
        src = self._source
        if src is None:
            return True
        if self.prometheus_url or self.api is None:
            return False
        if now - self._resolved_at < self.rediscover_after:
            return False
        if src.kind in (SourceKind.NONE, SourceKind.EXPORTER_SCRAPE):
            return True
        return self._failing_since is not None and now - self._failing_since >= self.rediscover_after

    async def read_fleet(self, *, direct: bool = False) -> FleetRead:
        """Every GPU of the cluster, one row each (`gpu_fleet_source.read_fleet`: one query per
        field group, or every exporter read); `direct`: exporters read beside Prometheus too."""
        if self._source is None or self._should_rediscover(self.clock()):
            await self._resolve()
        assert self._source is not None
        from .gpu_fleet_source import read_fleet  # (`ranks gpus` and the GPUs tab only)

        return await read_fleet(self._source, self._client, self._session, self.api, self._call, self.timeout,
                                direct=direct, workers=self._workers)

    async def xid_history(self, pods: Iterable[PodKey], start: float, end: float) -> dict[PodKey, GpuXid]:
        """The first XID each pod's GPUs raised between `start` and `end`, and on which GPU: one
        range query per namespace, from Prometheus' history ({} from the exporters: no history)."""
        src, wanted = self._source, set(pods)
        if src is None or self._client is None or not wanted or src.kind not in (
                SourceKind.PROMETHEUS, SourceKind.PROMETHEUS_VIA_APISERVER):
            return {}
        out: dict[PodKey, GpuXid] = {}
        step = max(1.0, (end - start) / 2000)
        for ns in sorted({ns for ns, _ in wanted}):
            q = promql.xid_history_query(self.names, ns, sorted(p for n, p in wanted if n == ns),
                                         exclude_pods=self.exclude_pods)
            ans = await self._fetch("query_range", {"query": q, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                    "step": f"{step:g}"})
            if isinstance(ans, PromError):
                continue
            for pk, node, gpu, code, t in promql.first_xids(ans.result):
                if pk in wanted and (pk not in out or t < out[pk].at):
                    out[pk] = GpuXid(pk[0], pk[1], node, gpu, code, t)
        return out

    # -- refreshing ----------------------------------------------------------------------------
    async def refresh(self) -> MetricsSnapshot:
        """One refresh; a call made while one is running gets that one's result."""
        task = self._task
        if task is not None and not task.done():
            self.joined += 1
        else:
            task = self._task = asyncio.ensure_future(self._refresh_once())
        return await asyncio.shield(task)

    async def run(self, on_snapshot: Callable[[MetricsSnapshot], Any], stop: asyncio.Event) -> None:
        """Refresh every `interval` until `stop` is set; ticks due during a refresh are skipped."""
        loop = asyncio.get_running_loop()
        next_due = loop.time()
        while not stop.is_set():
            snap = await self.refresh()
            if stop.is_set():
                break
            try:
                on_snapshot(snap)
            except Exception:  # a consumer bug must not kill the poller
                log.exception("on_snapshot failed")
            next_due += self.interval
            now = loop.time()
            if now > next_due:
                missed = int((now - next_due) // self.interval) + 1
                self.skipped += missed
                next_due += missed * self.interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, next_due - now))

    async def _refresh_once(self) -> MetricsSnapshot:
        start = time.monotonic()
        self.refreshes += 1
        now = self.clock()
        if self._should_rediscover(now):
            await self._resolve()
        src = self._source
        assert src is not None
        if src.kind in (SourceKind.PROMETHEUS, SourceKind.PROMETHEUS_VIA_APISERVER):
            snap = await self._refresh_prometheus(src, now)
        elif src.kind is SourceKind.EXPORTER_SCRAPE:
            snap = await self._refresh_scrape(src, now)
        else:
            snap = self._failed(src, now, src.description, queries=0)
        self.states.prune(now)
        if snap.state is MetricState.UNAVAILABLE:
            if self._failing_since is None:
                self._failing_since = now
        else:
            self._failing_since = None
        snap = MetricsSnapshot(snap.source, snap.state, snap.reason, snap.pods, snap.nodes, snap.at,
                               snap.warnings, snap.queries, time.monotonic() - start)
        self.last = snap
        return snap

    # -- Prometheus ----------------------------------------------------------------------------
    async def _fetch(self, endpoint: str, params: Mapping[str, Any]) -> Answer | PromError:
        client = self._client
        assert client is not None
        try:
            return await asyncio.wait_for(self._call(lambda: client.fetch(endpoint, params)), self.timeout + 1.0)
        except PromError as exc:
            return exc
        except TimeoutError:
            return PromError("unavailable", f"timed out after {self.timeout:g} s")
        except Exception as exc:  # a bug or an odd answer must become a state, not a crash
            return PromError("unavailable", f"{type(exc).__name__}: {exc}")

    async def _refresh_prometheus(self, src: MetricsSource, now: float) -> MetricsSnapshot:
        pods, namespaces = self._pods, self._namespaces
        node_filter = None if self._all_nodes else self._nodes
        pod_q = promql.pod_queries(self.names, namespaces, exclude_pods=self.exclude_pods)
        node_q = promql.node_queries(self.names, node_filter)
        jobs: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        for k, q in pod_q.items():
            jobs[("pod", k)] = ("query", {"query": q})
        for k, q in node_q.items():
            jobs[("node", k)] = ("query", {"query": q})
        if pods and self.history_window > 0:
            if self._history_q is None or self._history_q[0] is not pods:
                shown = sorted({p for _, p in pods})
                pod_filter = shown if len(promql.alternation(shown)) <= MAX_POD_REGEX else None
                self._history_q = (pods, promql.history_query(self.names, {ns for ns, _ in pods}, pod_filter,
                                                              exclude_pods=self.exclude_pods))
            hq = self._history_q[1]
            step = self.interval
            end = (now // step) * step
            jobs[("history", "util")] = ("query_range", {
                "query": hq, "start": f"{end - self.history_window:.3f}", "end": f"{end:.3f}", "step": f"{step:g}",
            })
        if not jobs:
            return MetricsSnapshot(src, MetricState.NO_DATA, "nothing shown", {}, {}, now)
        primary = ("pod", "util") if ("pod", "util") in jobs else next(iter(jobs))
        first = await self._fetch(*jobs[primary])
        answers: dict[tuple[str, str], Answer | PromError] = {primary: first}
        if isinstance(first, PromError) and first.kind == "unavailable":
            return self._failed(src, now, f"{src.description}: {first.message}", queries=1)
        rest = [k for k in jobs if k != primary]
        results = await asyncio.gather(*(self._fetch(*jobs[k]) for k in rest))
        answers.update(zip(rest, results, strict=True))

        warnings: list[str] = []
        partial_pods = partial_nodes = False
        pod_fields: dict[str, dict[Any, Reading]] = {}
        node_fields: dict[str, dict[Any, Reading]] = {}
        for (scope, fkey), ans in answers.items():
            if isinstance(ans, PromError):
                warnings.append(f"{scope} {fkey}: {ans.message}")
                if fkey == "util" and scope in ("pod", "node"):
                    partial_pods |= scope == "pod"
                    partial_nodes |= scope == "node"
                continue
            for w in ans.warnings:
                if w not in warnings:
                    warnings.append(w)
            if ans.warnings and scope == "pod":
                partial_pods = True
            if ans.warnings and scope == "node":
                partial_nodes = True
            if scope == "history":
                self._set_history(promql.parse_matrix(ans.result, promql.pod_key, promql.HISTORY_FIELD), pods)
                continue
            f = promql.FIELDS_BY_KEY[fkey]
            target = pod_fields if scope == "pod" else node_fields
            key = promql.pod_key if scope == "pod" else promql.node_key
            target[fkey] = promql.parse_vector(ans.result, key, f)
        partial_reason = "partial answer: " + "; ".join(warnings) if warnings else ""
        pod_out = self.states.assemble(
            pod_fields, pods, self.states.pods, now, partial_reason if partial_pods else "",
            extra=lambda k: k[0] in namespaces, cls=PodMetrics,
        ) if pod_q else {}
        node_out = self.states.assemble(
            node_fields, self._nodes, self.states.nodes, now, partial_reason if partial_nodes else "",
            extra=lambda k: True, cls=NodeGpu,
        ) if node_q else {}
        return MetricsSnapshot(src, MetricState.OK, "; ".join(warnings), pod_out, node_out, now,
                               tuple(warnings), queries=len(answers))

    def _set_history(self, series: dict[Any, list[tuple[float, float]]], pods: frozenset[PodKey]) -> None:
        for key in pods:
            self._history[key] = series.get(key, [])

    def _append_history(self, out: Mapping[Any, PodMetrics], pods: frozenset[PodKey]) -> None:
        """Without range queries (exporter scrape), history is built from our own refreshes."""
        cutoff = self.clock() - self.history_window
        for key in pods:
            pm = out.get(key)
            hist = self._history.setdefault(key, [])
            if pm is not None and pm.state is MetricState.OK and pm.sample is not None \
                    and pm.sample.util is not None and (not hist or hist[-1][0] < pm.sample.at):
                hist.append((pm.sample.at, pm.sample.util))
            while hist and hist[0][0] < cutoff:
                hist.pop(0)

    # -- exporter scrape -----------------------------------------------------------------------
    async def _refresh_scrape(self, src: MetricsSource, now: float) -> MetricsSnapshot:
        api, session = self.api, self._session
        assert api is not None and session is not None
        pods, namespaces = self._pods, self._namespaces
        exporters = list(src.exporters)
        budget = self.timeout * (2 + len(exporters) / self._workers)  # each scrape has `timeout`
        try:
            # asyncio.timeout, not wait_for: on 3.11 a cancelled wait_for leaves the gather's
            # CancelledError unretrieved (logged at exit)
            async with asyncio.timeout(budget):
                scrapes: list[Scrape] = await asyncio.gather(
                    *(self._call(functools.partial(scrape, session, api, e, self.timeout)) for e in exporters))
        except TimeoutError:
            return self._failed(src, now, f"{src.description}: timed out", queries=len(exporters))
        errors = [s.error for s in scrapes if s.error]
        if exporters and len(errors) == len(exporters):
            return self._failed(src, now, f"DCGM exporter scrape failed: {errors[0]}", queries=len(exporters))
        samples = [s for sc in scrapes for s in sc.samples]
        pod_fields = self._transpose(promql.aggregate_samples(samples, self.names, promql.pod_key))
        node_fields = self._transpose(promql.aggregate_samples(samples, self.names, promql.node_key))
        warnings = tuple(errors)
        partial = "partial answer: " + "; ".join(errors) if errors else ""
        pod_out = self.states.assemble(pod_fields, pods, self.states.pods, now, partial,
                                 extra=lambda k: k[0] in namespaces, cls=PodMetrics) if namespaces else {}
        want_nodes = self._all_nodes or bool(self._nodes)
        node_out = self.states.assemble(node_fields, self._nodes, self.states.nodes, now, partial,
                                  extra=(lambda k: self._all_nodes), cls=NodeGpu) if want_nodes else {}
        self._append_history(pod_out, pods)
        return MetricsSnapshot(src, MetricState.OK, "; ".join(errors), pod_out, node_out, now, warnings,
                               queries=len(exporters))

    @staticmethod
    def _transpose(per_key: Mapping[Any, Mapping[str, Reading]]) -> dict[str, dict[Any, Reading]]:
        out: dict[str, dict[Any, Reading]] = {}
        for key, fields in per_key.items():
            for fkey, r in fields.items():
                out.setdefault(fkey, {})[key] = r
        return out

    # -- states --------------------------------------------------------------------------------
    def _failed(self, src: MetricsSource, now: float, reason: str, *, queries: int) -> MetricsSnapshot:
        nodes = set(self._nodes) | (set(self.states.nodes) if self._all_nodes else set())
        if self.states.pods or self.states.nodes:  # (last good samples: each ages, reckoned again)
            pod_out, node_out = self.states.failed(self._pods, nodes, now, reason)
        else:  # none: the same answer while the same is shown and the source fails the same way
            key = (self._pods, nodes, reason)
            memo = self._failed_memo
            if memo is None or memo[0][0] is not self._pods or memo[0][1:] != key[1:]:
                memo = self._failed_memo = (key, self.states.failed(self._pods, nodes, now, reason))
            pod_out, node_out = memo[1]
        return MetricsSnapshot(src, MetricState.UNAVAILABLE, reason, pod_out, node_out, now, (), queries)

