"""`ranks get`'s read of the one workload it names (`monitors.one_workload`), not of its whole
namespace: the project's lookup, discovery and the GPU metrics source at once, then the workload's
objects, pods and events, then its pods' events, its GPU metrics and what the command reads
alongside (the ranks' tails). None when the narrow read is not conclusive: the caller
(`loading.locate`) then lists the namespace as before, which says every error as it always did.

Light at import (it is on the path of `ranks --help`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from monitors.connection import ClusterConfig

if TYPE_CHECKING:
    from monitors.model_views import WorkloadView
    from monitors.monitor import Monitor


async def load_one(cfg: ClusterConfig, opts: dict[str, Any], project: str | None, namespace: str, ref: str, *,
                   events: bool, metrics: bool, failures: bool,
                   alongside: Callable[[Monitor], Awaitable[None]] | None = None
                   ) -> tuple[Monitor, WorkloadView] | None:
    """The workload `ref` in `project` (resolved; exit 8 or 7 as `resolve_project` says) or, without
    one, in `namespace`, and a monitor holding it alone (with its events, with `events`; its GPU
    metrics read, with `metrics`); None when that read cannot stand for the namespace's."""
    import asyncio

    from monitors.connection import DEFAULT_REQUEST_TIMEOUT
    from monitors.monitor import Monitor
    from monitors.names import LookupProblem
    from monitors.one_workload import read_one_workload, read_pod_events
    from sessions.locate import pick_workload

    from .loading import read_metrics, resolve_project

    monitor = Monitor(cfg, once=True, events=events, nodes=False, scope=())
    kinds = asyncio.ensure_future(monitor.client.served_kinds())
    kinds.add_done_callback(lambda t: t.cancelled() or t.exception())
    gm = source = None
    done = False
    try:
        if metrics:  # the GPU metrics source is looked for while the workload is read
            from monitors.gpu_feed import make_metrics

            gm = make_metrics(cfg, opts.get("prometheus"), timeout=cfg.request_timeout or DEFAULT_REQUEST_TIMEOUT)
            gm.discovery_namespaces = () if project else (namespace,)
            source = asyncio.ensure_future(gm.resolve_source())
            source.add_done_callback(lambda t: t.cancelled() or t.exception())
        if project:
            namespace = await resolve_project(monitor.client, project)
        try:
            monitor.kinds = await kinds
        except Exception:  # (the namespace's read says it)
            return None
        if not await read_one_workload(monitor, namespace, ref, events=events):
            return None
        try:
            wl = pick_workload(monitor.model.workloads.values(), ref)
        except LookupProblem:  # (not there, or several: the namespace's read says which, as always)
            return None
        after: list[Awaitable[object]] = []
        if events:
            after.append(read_pod_events(monitor, wl))
        if alongside is not None:
            after.append(alongside(monitor))
        if gm is not None and source is not None:
            await source
            after.append(read_metrics(gm, monitor, "pods", failures=failures))
        await asyncio.gather(*after)
        done = True
        return monitor, pick_workload(monitor.model.workloads.values(), ref)
    finally:
        if not kinds.done():
            kinds.cancel()
        if source is not None and not done:
            source.cancel()
        if gm is not None:
            await gm.aclose()
        if not done:
            await monitor.stop()
