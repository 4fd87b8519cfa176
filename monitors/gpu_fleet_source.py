"""Every GPU's series read at once, for `ranks gpus` and the GPUs tab (`gpu_fleet` makes the rows).

From Prometheus: one instant query per field group (`gpu_fleet.GROUPS`), never one per GPU or
node: the identity group keeps the labels that tell a GPU and its owner (utilisation, by node,
index, UUID, model, MIG instance and the pod labels in every spelling); the others keep the metric
name and the GPU's place only::

    max by (Hostname, hostname, gpu, UUID, ..., exported_pod, ...) (DCGM_FI_DEV_GPU_UTIL)
    max by (__name__, Hostname, hostname, gpu, GPU_I_ID) ({__name__=~"DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_FB_FREE"})

From the exporters themselves (no Prometheus; or beside it, for the doctor's comparison): each
one's ``/metrics`` through the API server's pod proxy (`gpu_sources.scrape`), where a label that
is there but empty (an idle GPU's ``pod=""``) can be told from one that is not there at all.
Blocking calls run through `call` (the poller's thread pool).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import requests

from .diagnostics.gpu_doctor import Direct, fields_in
from .gpu_fleet import (
    FIELDS,
    GROUPS,
    IDENTITY_METRIC,
    NODE_LABELS,
    POD_LABEL_KEYS,
    SPARSE_GROUPS,
    Fleet,
    Triple,
    build,
    build_from,
    gpu_key,
    owner_labels,
)
from .gpu_samples import MetricsSource, SourceKind
from .gpu_sources import PromHttp, Scrape, scrape
from .prom_discovery import ApiEndpoint, ExporterPod, find_exporter_pods
from .promql import Answer, PromError, promql_string

T = TypeVar("T")
Call = Callable[[Callable[[], T]], Awaitable[T]]
IDENTITY_BY = (*NODE_LABELS, "gpu", "UUID", "uuid", "modelName", "GPU_I_PROFILE", "GPU_I_ID", "namespace", "pod",
               "container", "exported_namespace", "exported_pod", "exported_container", "pod_namespace", "pod_name",
               "container_name")
PLACE_BY = ("__name__", *NODE_LABELS, "gpu", "GPU_I_ID")


@dataclass
class FleetRead:
    """One reading of every GPU: the rows, how many requests, and what went wrong (`problem`: the
    source failed; `warnings`: a group or an exporter did)."""

    fleet: Fleet
    queries: int = 0
    problem: str = ""
    warnings: list[str] = field(default_factory=list)
    scraped: dict[str, Scrape] = field(default_factory=dict)  # node -> its exporter read directly


def group_query(group: str) -> str:
    """The instant query of one field group, over every node. The error counters are asked only
    where they are not 0 (nearly none of 40,000 GPUs), with one count per node and field saying what
    each node serves: a GPU without a series there reads 0 (`gpu_fleet.build`, `SPARSE`)."""
    if group == "identity":
        return f"max by ({', '.join(IDENTITY_BY)}) ({IDENTITY_METRIC})"
    names = promql_string("|".join(n for f in FIELDS if f.group == group for n in f.names))
    if group in SPARSE_GROUPS:
        return (f"max by ({', '.join(PLACE_BY)}) ({{__name__=~{names}}} != 0) or "
                f"count by (__name__, {', '.join(NODE_LABELS)}) ({{__name__=~{names}}})")
    return f"max by ({', '.join(PLACE_BY)}) ({{__name__=~{names}}})"


def triples_of(answers: Iterable[Answer], default_name: str) -> Iterator[Triple]:
    """Each vector element of the answers as (name, labels, value) (`gpu_fleet.build_from`); an
    element that is not one (a hostile or broken answer) is left out."""
    for answer in answers:
        for s in answer.result:
            try:
                labels, value = s["metric"], s["value"]
                if labels.__class__ is not dict or value.__class__ is not list or len(value) != 2:
                    continue
                v = float(value[1])
                name = labels.get("__name__") or default_name
            except (TypeError, ValueError, KeyError, IndexError):
                continue
            if name.__class__ is str:
                yield name, labels, v


async def read_prometheus(client: PromHttp, call: Call[Any], timeout: float) -> FleetRead:
    """Every GPU from Prometheus, one query per field group, all at once."""

    async def ask(group: str) -> Answer | PromError:
        query = group_query(group)
        try:
            answer: Answer = await asyncio.wait_for(call(lambda: client.fetch("query", {"query": query})),
                                                    timeout + 1.0)
            return answer
        except PromError as exc:
            return exc
        except TimeoutError:
            return PromError("unavailable", f"timed out after {timeout:g} s")

    answers = await asyncio.gather(*(ask(g) for g in GROUPS))
    read: list[Answer] = []
    warnings: list[str] = []
    for group, ans in zip(GROUPS, answers, strict=True):
        if isinstance(ans, PromError):
            if group == "identity":
                return FleetRead(Fleet(), len(GROUPS), problem=ans.message)
            warnings.append(f"{group} fields: {ans.message}")
            continue
        warnings.extend(w for w in ans.warnings if w not in warnings)
        read.append(ans)
    return FleetRead(build_from(triples_of(read, IDENTITY_METRIC), sparse=True), len(GROUPS), warnings=warnings)


def exact_pod_labels(samples: Sequence[Any]) -> bool:
    """Whether an exporter's own series carry the pod label keys (empty on idle GPUs counts)."""
    return any(POD_LABEL_KEYS & s.labels.keys() for s in samples)


async def read_exporters(session: requests.Session, api: ApiEndpoint, exporters: Sequence[ExporterPod],
                         call: Call[Any], timeout: float, workers: int = 8) -> FleetRead:
    """Every GPU from its exporter's own page, read through the pod proxy."""
    budget = timeout * (2 + len(exporters) / max(1, workers))
    try:
        async with asyncio.timeout(budget):
            scrapes: list[Scrape] = await asyncio.gather(
                *(call(functools.partial(scrape, session, api, e, timeout)) for e in exporters))
    except TimeoutError:
        return FleetRead(Fleet(), len(exporters), problem="the DCGM exporters did not answer in time")
    errors = [s.error for s in scrapes if s.error]
    if exporters and len(errors) == len(exporters):
        return FleetRead(Fleet(), len(exporters), problem=f"DCGM exporter scrape failed: {errors[0]}")
    samples = [s for sc in scrapes for s in sc.samples]
    by_node: dict[str, Scrape] = {}
    pod_labels: dict[str, bool] = {}
    for sc in scrapes:
        node = sc.exporter.node or next((k[0] for s in sc.samples if (k := gpu_key(s.labels))), "")
        if node and not sc.error:
            by_node[node] = sc
            pod_labels[node] = exact_pod_labels(sc.samples)
    return FleetRead(build(samples, pod_labels=pod_labels), len(exporters), warnings=errors, scraped=by_node)


def scrape_owners(sc: Scrape) -> int:
    """How many of an exporter's GPUs its own page gives an owner."""
    return len({gpu_key(s.labels) for s in sc.samples if owner_labels(s.labels) is not None})


def direct_of(read: FleetRead) -> dict[str, Direct]:
    """What each exporter read directly says of itself (the doctor compares it with Prometheus)."""
    return {n: Direct(fields_in(s.name for s in sc.samples), exact_pod_labels(sc.samples), scrape_owners(sc))
            for n, sc in read.scraped.items()}


MAX_DIRECT = 16  # exporters read beside Prometheus for the doctor's comparison


async def read_fleet(source: MetricsSource, client: PromHttp | None, session: requests.Session | None,
                     api: ApiEndpoint | None, call: Call[Any], timeout: float, *, direct: bool = False,
                     workers: int = 8) -> FleetRead:
    """Every GPU from the poller's source (`metrics.GpuMetrics.read_fleet`); with `direct` and a
    Prometheus source, up to `MAX_DIRECT` exporters are read beside it (`FleetRead.scraped`)."""
    if source.kind in (SourceKind.PROMETHEUS, SourceKind.PROMETHEUS_VIA_APISERVER) and client is not None:
        read = await read_prometheus(client, call, timeout)
        if direct and api is not None and not read.problem:
            try:
                exporters, _notes = await call(lambda: find_exporter_pods(api, timeout=timeout))
            except requests.RequestException:
                exporters = []
            if exporters:
                beside = await read_exporters(api.new_session(), api, exporters[:MAX_DIRECT], call, timeout, workers)
                read.scraped = beside.scraped
                read.queries += beside.queries
        return read
    if source.kind is SourceKind.EXPORTER_SCRAPE and session is not None and api is not None:
        return await read_exporters(session, api, source.exporters, call, timeout, workers)
    return FleetRead(Fleet(), 0, problem=source.description)
