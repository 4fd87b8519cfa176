"""The cluster listed once for a command: `load_monitor` lists what a command needs (no watch)
with GPU metrics read once, `locate` finds the workload a command names with a monitor that listed
it, `resolve_project` (a project name -> its namespace), `load_recording` (a flight recording).

Light at import (it is on the path of `ranks --help`): the monitor, aiohttp... are imported inside
the function that uses them.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from monitors.connection import ClusterConfig, ExitCode
from monitors.sanitize import clean

from .errors import UserError

if TYPE_CHECKING:
    from monitors.kube import KubeClient
    from monitors.model import WorkloadViews
    from monitors.model_views import WorkloadView
    from monitors.monitor import Monitor


async def resolve_project(client: KubeClient, project: str) -> str:
    """A project name (team-a) or a namespace name (runai-team-a) -> its namespace; a project
    that does not exist is exit 8, one the user may not read exit 7 (`monitors.names`)."""
    from monitors.names import LookupProblem
    from monitors.names import resolve_project as resolve

    try:
        return await resolve(client, project, user=client.cfg.impersonate_user or client.cfg.user)
    except LookupProblem as exc:
        raise UserError(exc.message, exc.code) from None


async def load_monitor(cfg: ClusterConfig, opts: dict[str, Any], where: str | tuple[str, ...] | None,
                       *, nodes: bool = True, events: bool = False, metrics_for: str = "pods",
                       metrics: bool = True, alongside: Callable[[Monitor], Awaitable[None]] | None = None,
                       pod_rows: bool = False, pending_reasons: bool = False, widen: bool = False,
                       failures: bool = False, pods_to: Callable[[Any], Callable[..., None]] | None = None,
                       workloads: WorkloadViews = "full") -> Monitor:
    """List everything needed once, then read GPU metrics once.

    `where`: a project name to resolve (str), namespaces (tuple), or None for every project.
    `widen` (`where` being the context's namespace): when it holds no workload or may not be read,
    every project the user may read is listed instead (the monitor's `scope` is then None; the
    rule of the read commands, `tui.cli.where`); a user who may read no project at all gets the
    context's namespace's refusal (exit 7).
    Independent requests go out together: discovery with the project lookup, the GPU metrics
    source with the LISTs; a namespace whose pods may not be listed is exit 7, not an empty list.
    `pod_rows`: pods as Table rows (views of workloads, projects and nodes; no pod specs), and with
    `pending_reasons` the scheduler's message of each pending workload (one pod read whole each).
    `pods_to`: where the pods go instead of the model (`Monitor`). `workloads`: what the model builds
    of the workloads (`LiveModel.workload_views`: their status alone for `projects`, nothing for
    `top nodes`)."""
    import asyncio

    from monitors.connection import DEFAULT_REQUEST_TIMEOUT
    from monitors.monitor import Monitor

    project = where if isinstance(where, str) else None
    scope = () if isinstance(where, str) else where  # (a project's namespace: once it is resolved)
    monitor = Monitor(cfg, once=True, events=events, nodes=nodes, scope=scope, pod_rows=pod_rows, unsettled=False,
                      pods_to=pods_to)
    monitor.model.workload_views = workloads
    gm = None
    try:
        monitor.prefetch()
        if metrics:  # the GPU metrics source is looked for while the cluster is listed
            from monitors.gpu_feed import make_metrics

            gm = make_metrics(cfg, opts.get("prometheus"), timeout=cfg.request_timeout or DEFAULT_REQUEST_TIMEOUT)
            gm.discovery_namespaces = tuple(monitor.scope or ())
            source = asyncio.ensure_future(gm.resolve_source())
            source.add_done_callback(lambda t: t.cancelled() or t.exception())  # not waited for on errors
        if project:
            try:
                monitor.scope = (await resolve_project(monitor.client, project),)
            except BaseException:
                if metrics:
                    source.cancel()
                raise
        try:
            await monitor.start()
            await monitor.wait_synced()
            refused = _readable(monitor, project, widen)
            if widen and (refused is not None or not monitor.model.workloads):
                await monitor.stop()
                monitor = Monitor(cfg, once=True, events=events, nodes=nodes, scope=None, pod_rows=pod_rows,
                                  unsettled=False, pods_to=pods_to)
                monitor.model.workload_views = workloads
                await monitor.start()
                await monitor.wait_synced()
                if refused is not None and not monitor.status.cluster_wide and not monitor.status.namespaces:
                    raise refused
        except BaseException:
            if metrics:
                source.cancel()
            raise
        # one more round trip at most: what rows do not tell (GPUs of pods outside workloads, why
        # jobs wait), the GPU metrics and what the command reads alongside, all at once
        after: list[Awaitable[object]] = []
        if pod_rows:
            after += [monitor.read_unclaimed(), *([monitor.explain_pending()] if pending_reasons else [])]
        if alongside is not None:
            after.append(alongside(monitor))
        if gm is not None:
            await source
            after.append(read_metrics(gm, monitor, metrics_for, failures=failures))
        await asyncio.gather(*after)
    except BaseException:
        await monitor.stop()
        raise
    finally:
        if gm is not None:
            await gm.aclose()
    return monitor


def _readable(monitor: Monitor, project: str | None, widen: bool) -> UserError | None:
    """`_check_readable`; with `widen`, its refusal is returned (to look further) rather than raised."""
    try:
        _check_readable(monitor, project)
    except UserError as exc:
        if not widen or exc.code != ExitCode.FORBIDDEN:
            raise
        return exc
    return None


def _check_readable(monitor: Monitor, project: str | None) -> None:
    """A project whose pods may not be listed is an error (exit 7), not an empty answer."""
    from monitors.names import who

    denied = monitor.pods_forbidden()
    scoped = monitor.scope or monitor.status.namespaces
    if monitor.status.cluster_wide or not scoped or not all(ns in denied for ns in scoped):
        return
    ns = scoped[0]
    name = who(denied[ns], monitor.cfg.impersonate_user or monitor.cfg.user or "you")
    what = f'project "{project}"' if project else f"namespace {ns}"
    raise UserError(f"forbidden: {clean(name)} may not read {what} (cannot list pods in {ns})", ExitCode.FORBIDDEN)


async def load_recording(store: Any, wl: WorkloadView) -> Any:
    """The flight recording of `wl` (`FlightStore.load`, off the loop), or None; a store whose
    directory is not the user's own is said in one note and not read."""
    import asyncio

    from monitors.state_dir import PrivateDirError

    try:
        return await asyncio.to_thread(store.load, wl.namespace, wl.kind, wl.name, wl.uid)
    except PrivateDirError as exc:
        print(f"ranks: note: the flight recording is not read: {clean(str(exc), limit=500)}", file=sys.stderr)
        return None


def seed_history(gm: Any, model: Any, pods: Iterable[tuple[str, str]], before: float) -> None:
    """The utilisation history a refresh brought (Prometheus' range query) as the model's GPU
    history of those pods, before the readings of now are applied (the one-shot commands judge
    idleness and hangs over time, not from one reading)."""
    from collections import deque

    from monitors.model import HISTORY

    for ns, pod in pods:
        series = [(t, v) for t, v in gm.history(ns, pod) if t < before]
        if series:
            model.gpu_history[(ns, pod)] = deque(series, maxlen=HISTORY)


async def read_metrics(gm: Any, monitor: Monitor, what: str = "pods",
                       only: Callable[[WorkloadView], bool] | None = None, *, failures: bool = False) -> None:
    """One GPU metrics refresh for the running GPU pods (of the workloads `only` keeps; nothing is
    sent when there are none), its history seeding the model's, then its readings applied; with
    `failures`, the XIDs the first failed ranks' GPUs raised in the minutes before they exited
    (`xid_failures`)."""
    from monitors.gpu_feed import apply_snapshot

    model = monitor.model
    if model.workload_views == "full":
        pods = sorted({(r.namespace, r.pod) for w in model.workloads.values() if only is None or only(w)
                       for r in w.ranks if r.gpus > 0 and r.node and r.phase == "Running"})
    else:  # the same pods, from the model's grouping (no rank views)
        pods = sorted(pk for pk in model.pod_workload if (p := model.pods.get(pk)) is not None
                      and p.gpus > 0 and p.node and p.phase == "Running")
    if not pods and only is not None:
        return
    gm.set_shown(pods, namespaces={ns for ns, _ in pods}, all_nodes=(what == "nodes"))
    snap = await gm.refresh()
    seed_history(gm, model, pods, snap.at)
    apply_snapshot(model, snap)
    monitor.flush()
    monitor.metrics_note = snap.source.description if snap.source else ""
    monitor.metrics_problem = snap.reason if snap.state.value == "unavailable" else ""
    if failures:
        await xid_failures(gm, model)


XID_BEFORE = 120.0  # seconds before a rank's exit its GPUs' XIDs are looked for (the banner says those of a minute)


async def xid_failures(gm: Any, model: Any, most: int = 16) -> None:
    """The XIDs the GPUs of the first failed ranks of the model's workloads raised before they
    exited (at most `most`, within the last hour: one range query from Prometheus), into the model."""
    import time

    now = time.time()
    failed = sorted(((w.namespace, w.first_failure.pod), w.first_failure.at, _created(w)) for w in model.workloads.values()
                    if w.first_failure is not None and w.first_failure.at and now - w.first_failure.at < 3600)[:most]
    if not failed:
        return
    # (from the failed pod's creation at the earliest: an earlier pod of the same name, a rerun of the
    # job, is not this one, and its GPUs' XIDs are not this failure's)
    start = min(max(at - XID_BEFORE, created or 0.0) for _, at, created in failed)
    end = max(at for _, at, _ in failed) + 5
    model.gpu_xids.update(await gm.xid_history([pk for pk, _, _ in failed], start, min(end, now)))


def _created(w: Any) -> float | None:
    """When the pod of the workload's first failed rank was created (None: not known)."""
    return next((r.created for r in w.ranks if r.pod == w.first_failure.pod), None)


async def locate(cfg: ClusterConfig, opts: dict[str, Any], ref: str, project: str | None, *,
                 events: bool = False, metrics: bool = False, nodes: bool = False,
                 alongside: Callable[[Monitor], Awaitable[None]] | None = None,
                 failures: bool = False, alone: bool = False) -> tuple[Monitor, WorkloadView]:
    """The workload `ref` and a monitor that listed its namespace (and the nodes, `nodes`). With -p,
    in that project; without, in the context's namespace, else in the one project (among those the
    user may read) that has a workload of that name; several such projects are listed (exit 2).
    `alone` (no `nodes`): the monitor holds the workload alone where that read is conclusive
    (`one_workload.load_one`), else it lists the namespace."""
    from monitors.names import LookupProblem
    from sessions.locate import pick_workload, search_namespace

    if alone and not nodes and (project or cfg.namespace):
        from .one_workload import load_one

        found = await load_one(cfg, opts, project, cfg.namespace, ref, events=events, metrics=metrics,
                               failures=failures, alongside=alongside)
        if found is not None:
            return found
    kinds = None
    try:
        monitor = await load_monitor(cfg, opts, project or (cfg.namespace,), nodes=nodes, events=events,
                                     metrics=metrics, alongside=alongside, failures=failures)
    except UserError as exc:
        if project or exc.code != ExitCode.FORBIDDEN:
            raise  # the context's namespace may not be read: look where the user may
    else:
        try:
            return monitor, pick_workload(monitor.model.workloads.values(), ref)
        except LookupProblem as exc:
            kinds = monitor.kinds
            await monitor.stop()
            if project or exc.code != ExitCode.NOT_FOUND:
                raise
    ns = await search_namespace(cfg, ref, kinds)
    monitor = await load_monitor(cfg, opts, (ns,), nodes=nodes, events=events, metrics=metrics,
                                 alongside=alongside, failures=failures)
    try:
        return monitor, pick_workload(monitor.model.workloads.values(), ref)
    except BaseException:
        await monitor.stop()
        raise

