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

from monitors.connection import ClusterConfig, ConnectionProblem, ExitCode, load_cluster_config
from monitors.kube import ApiProblem, KubeClient
from monitors.monitor import Monitor
from monitors.views import WorkloadView

from .cli_output import (
    emit_structured,
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


def _run(opts: dict[str, Any], body: Callable[[ClusterConfig], Awaitable[int]]) -> int:
    try:
        cfg = load_cluster_config(opts.get("kubeconfig"), opts.get("context"))
        return asyncio.run(body(cfg))
    except ConnectionProblem as exc:
        return _error(exc.message, exc.code)
    except ApiProblem as exc:
        return _error(exc.one_line(), exc.exit_code)
    except UserError as exc:
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
    """A project name (team-a) or a namespace name (runai-team-a) -> its namespace."""
    candidates = [project, f"runai-{project}"]
    forbidden = False
    for ns in candidates:
        try:
            await client.get(f"/api/v1/namespaces/{ns}")
            return ns
        except ApiProblem as exc:
            if exc.status == 403:
                forbidden = True
                continue
            if exc.status != 404:
                raise
    for label in ("runai/queue", "kai.scheduler/queue"):
        try:
            doc = await client.get("/api/v1/namespaces", {"labelSelector": f"{label}={project}"})
        except ApiProblem as exc:
            if exc.status == 403:
                forbidden = True
                break
            raise
        items = doc.get("items") or []
        if items:
            return items[0]["metadata"]["name"]
    if forbidden:
        # cannot read Namespace objects: trust the Run:ai naming rule, the watch will say if wrong
        return project if project.startswith("runai-") else f"runai-{project}"
    raise UserError(f'project "{project}" not found', ExitCode.NOT_FOUND)


async def _load(cfg: ClusterConfig, opts: dict[str, Any], namespaces: tuple[str, ...] | None,
                *, nodes: bool = True, events: bool = False, metrics_for: str = "pods") -> Monitor:
    """List everything needed once, then read GPU metrics once."""
    monitor = Monitor(cfg, once=True, events=events, nodes=nodes, scope=namespaces)
    try:
        await monitor.start()
        await monitor.wait_synced(timeout=300)
        await _read_metrics(cfg, opts, monitor, metrics_for)
    except BaseException:
        await monitor.stop()
        raise
    return monitor


async def _read_metrics(cfg: ClusterConfig, opts: dict[str, Any], monitor: Monitor, what: str) -> None:
    from monitors.gpu_feed import apply_snapshot, make_metrics

    model = monitor.model
    gm = make_metrics(cfg, opts.get("prometheus"))
    try:
        pods = [(r.namespace, r.pod) for w in model.workloads.values() for r in w.ranks
                if r.gpus > 0 and r.node and r.phase == "Running"]
        gm.set_shown(pods, namespaces={ns for ns, _ in pods}, all_nodes=(what == "nodes"))
        await gm.resolve_source()
        snap = await gm.refresh()
        apply_snapshot(model, snap)
        monitor.flush()
        monitor.metrics_note = snap.source.description if snap.source else ""
        monitor.metrics_problem = snap.reason if snap.state.value == "unavailable" else ""
    finally:
        await gm.aclose()


def _note_forbidden(monitor: Monitor) -> None:
    for name, msg in sorted(monitor.status.forbidden.items()):
        print(f"ranks: warning: cannot list {name}: {msg}", file=sys.stderr)


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
        namespaces: tuple[str, ...] | None = None
        if not all_projects:
            async with KubeClient(cfg) as probe:
                namespaces = (await resolve_project(probe, project) if project else cfg.namespace,)
        monitor = await _load(cfg, opts, namespaces, nodes=False)
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
    found = [w for w in wls if w.name == name and (not kind or w.kind.lower() in (kind.lower(), kind.lower() + "s"))]
    if not found:
        raise UserError(f'workload "{ref}" not found', ExitCode.NOT_FOUND)
    if len(found) > 1:
        kinds = ", ".join(f"{w.kind.lower()}/{w.name}" for w in found)
        raise UserError(f'"{ref}" names several workloads ({kinds}); use KIND/NAME', ExitCode.USAGE)
    return found[0]


def run_get(opts: dict[str, Any], ref: str, project: str | None, output: str) -> int:
    async def body(cfg: ClusterConfig) -> int:
        async with KubeClient(cfg) as probe:
            ns = await resolve_project(probe, project) if project else cfg.namespace
        monitor = await _load(cfg, opts, (ns,), nodes=False, events=True)
        try:
            _note_forbidden(monitor)
            wl = _pick(list(monitor.model.workloads.values()), ref)
            events = monitor.model.events_for(wl)
            if output in ("json", "yaml"):
                from monitors.export import get_json

                emit_structured(get_json(wl, events), output)
            else:
                print_get(wl, events, output, monitor.metrics_note)
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

