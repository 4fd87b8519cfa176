"""The one-shot CLI commands over the live model: projects, list, get, top.

Each lists what it needs (no watch), reads GPU metrics once, prints, and exits with a documented
code. Cluster text is sanitised (monitors.sanitize) and printed as plain `rich.text.Text`.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from monitors.connection import (
    DEFAULT_REQUEST_TIMEOUT,
    ClusterConfig,
    ConnectionProblem,
    ExitCode,
    load_cluster_config,
)
from monitors.kube import ApiProblem, KubeClient
from monitors.monitor import WORKLOAD_KINDS, Monitor
from monitors.names import LookupProblem, find_workload_namespaces, who
from monitors.names import resolve_project as _resolve_project
from monitors.sanitize import clean
from monitors.views import WorkloadView

from .cli_output import (
    emit_structured,
    event_order,
    print_get,
    print_nodes,
    print_projects,
    print_workloads,
)


class UserError(Exception):
    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def configure(cfg: ClusterConfig, opts: dict[str, Any]) -> ClusterConfig:
    """The command line's settings that go with the connection (--request-timeout)."""
    timeout = opts.get("request_timeout")
    if timeout is not None:
        cfg.request_timeout = float(timeout) or None  # 0: no limit
    return cfg


def _run(opts: dict[str, Any], body: Callable[[ClusterConfig], Awaitable[int]]) -> int:
    try:
        cfg = configure(load_cluster_config(opts.get("kubeconfig"), opts.get("context")), opts)
        return asyncio.run(body(cfg))
    except ConnectionProblem as exc:
        return _error(exc.message, exc.code)
    except ApiProblem as exc:
        return _error(clean(exc.one_line(), limit=500), exc.exit_code)
    except (UserError, LookupProblem) as exc:
        return _error(exc.message, exc.code)
    except TimeoutError as exc:
        return _error(str(exc) or "timed out", ExitCode.UNREACHABLE)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return ExitCode.OK


def _error(message: str, code: int) -> int:
    print(f"ranks: error: {message}", file=sys.stderr)
    return int(code)


async def resolve_project(client: KubeClient, project: str) -> str:
    """A project name (team-a) or a namespace name (runai-team-a) -> its namespace; a project
    that does not exist is exit 8, one the user may not read exit 7 (`monitors.names`)."""
    try:
        return await _resolve_project(client, project, user=client.cfg.impersonate_user or client.cfg.user)
    except LookupProblem as exc:
        raise UserError(exc.message, exc.code) from None


async def _load(cfg: ClusterConfig, opts: dict[str, Any], where: str | tuple[str, ...] | None,
                *, nodes: bool = True, events: bool = False, metrics_for: str = "pods",
                metrics: bool = True) -> Monitor:
    """List everything needed once, then read GPU metrics once.

    `where`: a project name to resolve (str), namespaces (tuple), or None for every project.
    Independent requests go out together: discovery with the project lookup, the GPU metrics
    source with the LISTs; a namespace whose pods may not be listed is exit 7, not an empty list."""
    project = where if isinstance(where, str) else None
    monitor = Monitor(cfg, once=True, events=events, nodes=nodes, scope=() if project else where)
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
        except BaseException:
            if metrics:
                source.cancel()
            raise
        _check_readable(monitor, project)
        if gm is not None:
            await source
            await _read_metrics(gm, monitor, metrics_for)
    except BaseException:
        await monitor.stop()
        raise
    finally:
        if gm is not None:
            await gm.aclose()
    return monitor


def _check_readable(monitor: Monitor, project: str | None) -> None:
    """A project whose pods may not be listed is an error (exit 7), not an empty answer."""
    denied = monitor.pods_forbidden()
    scoped = monitor.scope or monitor.status.namespaces
    if monitor.status.cluster_wide or not scoped or not all(ns in denied for ns in scoped):
        return
    ns = scoped[0]
    name = who(denied[ns], monitor.cfg.impersonate_user or monitor.cfg.user or "you")
    what = f'project "{project}"' if project else f"namespace {ns}"
    raise UserError(f"forbidden: {clean(name)} may not read {what} (cannot list pods in {ns})", ExitCode.FORBIDDEN)


async def _read_metrics(gm: Any, monitor: Monitor, what: str) -> None:
    from monitors.gpu_feed import apply_snapshot

    model = monitor.model
    pods = [(r.namespace, r.pod) for w in model.workloads.values() for r in w.ranks
            if r.gpus > 0 and r.node and r.phase == "Running"]
    gm.set_shown(pods, namespaces={ns for ns, _ in pods}, all_nodes=(what == "nodes"))
    snap = await gm.refresh()
    apply_snapshot(model, snap)
    monitor.flush()
    monitor.metrics_note = snap.source.description if snap.source else ""
    monitor.metrics_problem = snap.reason if snap.state.value == "unavailable" else ""


def _note_forbidden(monitor: Monitor) -> None:
    """One line for what may not be listed (per namespace), not one per kind."""
    by_ns: dict[str, list[str]] = {}
    for inf in monitor.informers:
        if inf.name in monitor.status.forbidden:
            by_ns.setdefault(inf.namespace or "", []).append(inf.kind.plural)
    for ns, plurals in sorted(by_ns.items()):
        where = f" in {ns}" if ns else " in any namespace"
        print(f"ranks: warning: forbidden to list {', '.join(sorted(plurals))}{where}; not shown",
              file=sys.stderr)


def run_projects(opts: dict[str, Any], output: str) -> int:
    async def body(cfg: ClusterConfig) -> int:
        monitor = await _load(cfg, opts, None, nodes=False)
        try:
            _note_forbidden(monitor)
            print_projects(list(monitor.model.projects.values()), output)
            return ExitCode.OK
        finally:
            await monitor.stop()

    return _run(opts, body)


def run_list(opts: dict[str, Any], project: str | None, all_projects: bool, status: str | None, mine: bool,
             output: str) -> int:
    if project and all_projects:
        return _error("-p/--project and -A/--all-projects cannot be used together", ExitCode.USAGE)

    async def body(cfg: ClusterConfig) -> int:
        where: str | tuple[str, ...] | None = None if all_projects else (project or (cfg.namespace,))
        monitor = await _load(cfg, opts, where, nodes=False)
        namespaces = None if all_projects else monitor.scope
        try:
            _note_forbidden(monitor)
            wls = list(monitor.model.workloads.values())
            if status:
                wls = [w for w in wls if w.status.lower() == status.lower()]
            if mine:
                me = cfg.impersonate_user or cfg.user
                wls = [w for w in wls if w.user == me]
            wls.sort(key=lambda w: (w.namespace, w.name))
            print_workloads(wls, output, show_project=namespaces is None)
            return ExitCode.OK
        finally:
            await monitor.stop()

    return _run(opts, body)


def _pick(wls: list[WorkloadView], ref: str) -> WorkloadView:
    kind, _, name = ref.rpartition("/")
    kind = kind.split(".")[0].lower()  # pytorchjob.kubeflow.org/mnist as kubectl spells it
    found = [w for w in wls if w.name == name and (not kind or w.kind.lower() in (kind, kind + "s"))]
    if not found:
        raise UserError(f'workload "{ref}" not found', ExitCode.NOT_FOUND)
    if len(found) > 1:
        kinds = ", ".join(f"{w.kind.lower()}/{w.name}" for w in found)
        raise UserError(f'"{ref}" names several workloads ({kinds}); use KIND/NAME', ExitCode.USAGE)
    return found[0]


async def locate(cfg: ClusterConfig, opts: dict[str, Any], ref: str, project: str | None, *,
                 events: bool = False, metrics: bool = False) -> tuple[Monitor, WorkloadView]:
    """The workload `ref` and a monitor that listed its namespace. With -p, in that project;
    without, in the context's namespace, else in the one project (among those the user may read)
    that has a workload of that name; several such projects are listed (exit 2)."""
    kinds = None
    try:
        monitor = await _load(cfg, opts, project or (cfg.namespace,), nodes=False, events=events, metrics=metrics)
    except UserError as exc:
        if project or exc.code != ExitCode.FORBIDDEN:
            raise  # the context's namespace may not be read: look where the user may
    else:
        try:
            return monitor, _pick(list(monitor.model.workloads.values()), ref)
        except UserError as exc:
            kinds = monitor.kinds
            await monitor.stop()
            if project or exc.code != ExitCode.NOT_FOUND:
                raise
    ns = await search_namespace(cfg, ref, kinds)
    monitor = await _load(cfg, opts, (ns,), nodes=False, events=events, metrics=metrics)
    try:
        return monitor, _pick(list(monitor.model.workloads.values()), ref)
    except BaseException:
        await monitor.stop()
        raise


async def search_namespace(cfg: ClusterConfig, ref: str, kinds: dict[tuple[str, str], Any] | None = None) -> str:
    """The one namespace, among those the user may read, with a workload named `ref` (asked
    when it is not in the context's namespace and no -p was given); none is exit 8, several exit 2
    with the projects listed."""
    kind, _, name = ref.rpartition("/")
    kind = kind.split(".")[0].lower()
    probe = Monitor(cfg, once=True, events=False, nodes=False)
    try:
        kinds = kinds if kinds is not None else await probe.client.served_kinds()
        wanted = [k for g, p, kname in WORKLOAD_KINDS if (k := kinds.get((g, p))) is not None
                  and (not kind or kname.lower() in (kind, kind[:-1]))]
        visible = await probe.readable_namespaces()
        namespaces = await find_workload_namespaces(probe.client, wanted, name, visible or ())
    finally:
        await probe.stop()
    if not namespaces:
        raise UserError(f'workload "{ref}" not found in {cfg.namespace} or any other project you may read',
                        ExitCode.NOT_FOUND)
    if len(namespaces) > 1:
        raise UserError(f'workload "{ref}" exists in several projects ({", ".join(namespaces)}); '
                        "choose one with -p PROJECT", ExitCode.USAGE)
    return namespaces[0]


def run_get(opts: dict[str, Any], ref: str, project: str | None, output: str) -> int:
    async def body(cfg: ClusterConfig) -> int:
        monitor, wl = await locate(cfg, opts, ref, project, events=True, metrics=True)
        try:
            _note_forbidden(monitor)
            events = sorted(monitor.model.events_for(wl, 10_000), key=event_order)[-20:]  # the newest 20
            if output in ("json", "yaml"):
                from monitors.export import get_json

                emit_structured(get_json(wl, events), output)
            else:
                print_get(wl, events, output, monitor.metrics_note,
                          events_forbidden=monitor.status.forbidden.get(f"events in {wl.namespace}", ""))
            return ExitCode.OK
        finally:
            await monitor.stop()

    return _run(opts, body)


def run_top(opts: dict[str, Any], what: str, output: str) -> int:
    async def body(cfg: ClusterConfig) -> int:
        monitor = await _load(cfg, opts, None, nodes=(what == "nodes"), metrics_for=what)
        try:
            if what == "nodes":
                forbidden = [m for n, m in monitor.status.forbidden.items() if n.startswith("nodes")]
                if forbidden:
                    raise UserError(f"forbidden: {forbidden[0]}", ExitCode.FORBIDDEN)
                print_nodes(sorted(monitor.model.nodes.values(), key=lambda n: n.name), output)
            else:
                _note_forbidden(monitor)
                print_projects(list(monitor.model.projects.values()), output)
            problem = monitor.metrics_problem
            if problem and output in ("table", "wide"):
                print(f"ranks: note: GPU metrics unavailable: {problem}", file=sys.stderr)
            return ExitCode.OK
        finally:
            await monitor.stop()

    return _run(opts, body)

