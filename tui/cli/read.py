"""`ranks projects | list | get | top`: the one-shot commands over the live model.

Each lists what it needs (no watch), reads GPU metrics once, prints, and exits with a documented
code. Cluster text is sanitised (monitors.sanitize) and printed as plain text.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

from monitors.connection import ClusterConfig, ExitCode
from monitors.model import WORKLOAD_STATUSES

from .errors import UserError, error
from .loading import load_monitor, load_recording
from .options import (
    ALL,
    OUTPUT,
    PROJECT,
    command,
    global_options,
    group_project,
    merge_globals,
    workload_argument,
)
from .printers import emit_structured, event_order, print_get, print_nodes, print_projects, print_workloads
from .running import run

if TYPE_CHECKING:
    from monitors.monitor import Monitor


@command("projects", reads_only=True)
@OUTPUT
@global_options
@click.pass_context
def projects_command(ctx: click.Context, /, output: str, **kwargs: Any) -> None:
    """Projects (Run:ai namespaces, or plain namespaces) with GPU quota, allocation and use."""
    sys.exit(run_projects(merge_globals(ctx, kwargs), output))


@command("list", reads_only=True)
@PROJECT
@ALL
@click.option("--status", "status", type=click.Choice(WORKLOAD_STATUSES, case_sensitive=False), default=None,
              help="Only workloads with this status.")
@click.option("--mine", is_flag=True, help="Only workloads I submitted.")
@OUTPUT
@global_options
@click.pass_context
def list_command(ctx: click.Context, /, project: str | None, all_projects: bool, status: str | None, mine: bool,
                 output: str, **kwargs: Any) -> None:
    """Distributed workloads of a project (default: the context's) or of all projects."""
    sys.exit(run_list(merge_globals(ctx, kwargs), group_project(ctx, project), all_projects, status, mine, output))


@command("get", reads_only=True)
@workload_argument
@PROJECT
@OUTPUT
@global_options
@click.pass_context
def get_command(ctx: click.Context, /, workload: str, project: str | None, output: str, **kwargs: Any) -> None:
    """One workload: header, every rank with placement and GPU use, recent events.

    WORKLOAD is a name, or KIND/NAME (pytorchjob/mnist) when names clash.
    """
    sys.exit(run_get(merge_globals(ctx, kwargs), workload, group_project(ctx, project), output))


@command("top", reads_only=True)
@click.argument("what", type=click.Choice(["nodes", "projects"]), default="nodes")
@OUTPUT
@global_options
@click.pass_context
def top_command(ctx: click.Context, /, what: str, output: str, **kwargs: Any) -> None:
    """GPU allocation and utilisation per node or per project."""
    sys.exit(run_top(merge_globals(ctx, kwargs), what, output))


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
        monitor = await load_monitor(cfg, opts, None, nodes=False, pod_rows=True, workloads="status")
        try:
            _note_forbidden(monitor)
            print_projects(list(monitor.model.projects.values()), output)
            return ExitCode.OK
        finally:
            await monitor.stop()

    return run(opts, body)


def run_list(opts: dict[str, Any], project: str | None, all_projects: bool, status: str | None, mine: bool,
             output: str) -> int:
    if project and all_projects:
        return error("-p/--project and -A/--all-projects cannot be used together", ExitCode.USAGE)

    async def body(cfg: ClusterConfig) -> int:
        from .where import load_where

        monitor, looked = await load_where(cfg, opts, project, all_projects, nodes=False, pod_rows=True,
                                           pending_reasons=True)
        try:
            if looked.note():
                print(looked.note(), file=sys.stderr)
            _note_forbidden(monitor)
            wls = list(monitor.model.workloads.values())
            if status:
                wls = [w for w in wls if w.status.lower() == status.lower()]
            if mine:
                me = cfg.impersonate_user or cfg.user
                wls = [w for w in wls if w.user == me]
            wls.sort(key=lambda w: (w.namespace, w.name))
            print_workloads(wls, output, show_project=looked.every_project,
                            empty=_no_workloads(looked.where(), status, mine))
            return ExitCode.OK
        finally:
            await monitor.stop()

    return run(opts, body)


def _no_workloads(where: str, status: str | None, mine: bool) -> str:
    """What an empty list says: what was looked for and where (`where.Looked.where`)."""
    what = "No " + (f"{status.capitalize()} " if status else "") + "workloads" + (" of yours" if mine else "")
    return f"{what} {where}."


def run_get(opts: dict[str, Any], ref: str, project: str | None, output: str) -> int:
    async def body(cfg: ClusterConfig) -> int:
        from .diagnose import located_with_tails

        monitor, wl, diag = await located_with_tails(cfg, opts, ref, project, events=True, alone=True)
        try:
            _note_forbidden(monitor)
            all_events = monitor.model.events_for(wl, 10_000)
            events = sorted(all_events, key=event_order)[-20:]  # the newest 20
            failure, story = await postmortem(cfg, monitor, wl, all_events, diag=diag)
            from monitors.diagnostics.leftovers import still_held
            from sessions.own_command import ranks_command

            held = still_held(wl)
            command = ranks_command(cfg) or "ranks"
            from monitors.diagnostics.gpu_health import failure_gpu_line

            gpu_line = failure_gpu_line(wl, monitor.model.gpu_xids)
            if output in ("json", "yaml"):
                from monitors.export import get_json

                doc = get_json(wl, events)
                doc["first_failure"] = failure.to_json() if failure is not None else None
                if doc["first_failure"] is not None:
                    doc["first_failure"]["gpu"] = gpu_line or None
                doc["what_happened"] = story
                doc["health"] = diag.health.to_json() if diag.health is not None else None
                doc["still_held"] = None if held is None else {
                    "ranks": list(held.ranks), "gpus": held.gpus, "nodes": list(held.nodes),
                    "since": _iso(held.since), "free_with": held.delete_line(command)}
                flags = {h.label: list(h.flags) for h in diag.health.ranks} if diag.health is not None else {}
                for r, rank in zip(wl.ranks, doc["ranks"], strict=True):
                    label = r.label
                    at = diag.last_at(label)
                    p = diag.progress(label) or {}
                    rank.update(last_log=_iso(at), silent_seconds=None if at is None else round(time.time() - at, 1),
                                step=p.get("step"), loss=p.get("loss"), flags=flags.get(label, []))
                emit_structured(doc, output)
            else:
                print_get(wl, events, output, monitor.metrics_note,
                          events_forbidden=monitor.status.forbidden.get(f"events in {wl.namespace}", ""),
                          failure=failure, story=story, diag=diag, gpu_line=gpu_line,
                          held=held.sentence(time.time(), command) if held is not None else "")
            return ExitCode.OK
        finally:
            await monitor.stop()

    from monitors.gc_pause import gc_paused

    # (one workload read once: what it builds lives until the command exits; ~150 passes of the
    # cyclic GC over what the imports allocate cost more than they would free)
    with gc_paused():
        return run(opts, body)


async def postmortem(cfg: ClusterConfig, monitor: Monitor, wl: Any, events: list[Any],
                     lines: int = 10, diag: Any = None) -> tuple[Any, list[str]]:
    """The first failure with its last lines (the pods' log, as `diag` read it alongside the
    metrics: the rank's tail when the failed container never restarted, else its previous
    instance; else their termination message; else the flight recorder's recording when the pods
    are gone) and what happened to a finished workload whose pods are gone."""
    import dataclasses

    from monitors.diagnostics.postmortem import first_failure_of, what_happened
    from monitors.flight_store import store_for
    from monitors.logs.first_failure import first_failure_report

    recording = None
    if wl.first_failure is None and wl.status in ("Failed", "Succeeded"):
        recording = await load_recording(store_for(cfg), wl)
    failure = first_failure_of(wl, recording)
    if failure is not None and failure.recorded_at is None:
        rank = next((r for r in wl.ranks if r.pod == failure.pod), None)
        tail = diag.tails.get(failure.label) if diag is not None else None
        read: tuple[str, ...] | None = None
        if diag is not None and diag.failure_lines:
            read = diag.failure_lines
        elif rank is not None and rank.restarts == 0 and tail is not None and tail.lines:
            read = tuple(t for _, t in tail.lines[-lines:])
        elif diag is None:
            report = await first_failure_report(monitor.client, wl, lines=lines)
            read = tuple(ln.text for ln in report.lines) if report is not None and report.lines else None
        if read:
            failure = dataclasses.replace(failure, lines=read, source="log")
        elif failure.message:  # the log cannot be read: what FallbackToLogsOnError kept
            failure = dataclasses.replace(failure, lines=tuple(failure.message.splitlines()[-lines:]),
                                          source="termination message")
    return failure, what_happened(wl, events, recording)


def _iso(t: float | None) -> str | None:
    from monitors.logs.lines import format_ts

    return format_ts(int(t * 1e9)) if t else None


def run_top(opts: dict[str, Any], what: str, output: str) -> int:
    async def body(cfg: ClusterConfig) -> int:
        monitor = await load_monitor(cfg, opts, None, nodes=(what == "nodes"), metrics_for=what,
                                     pod_rows=True, workloads="none" if what == "nodes" else "status")
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

    return run(opts, body)
