"""`ranks idle`: interactive sessions whose GPUs all read under a threshold now (#15).

Lists where the read commands look (`tui.cli.where`: -p PROJECT; -A all; else the context's
namespace, or every project you may read when it holds no workload) once, reads GPU metrics
once for the GPU pods of its interactive sessions only, then prints
`monitors.diagnostics.idle.idle_sessions`, most idle GPU-hours first:

    ranks idle -A -o json
    {"sessions": [{"name", "namespace", "project", "user", "gpus", "idle_since", "idle_gpu_hours"}]}

The threshold is `idle_threshold_percent` in the configuration file (default 5), or --threshold.
The one metrics refresh also asks Prometheus for the utilisation history of those pods (its
`query_range` over the poller's history window, 10 minutes): it goes into the model's GPU
history, so a session busy a few minutes ago is idle only since then. Without Prometheus (DCGM
exporters scraped) there is only the reading of now. Cluster text is sanitised; idle_since is
RFC 3339 UTC.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

from monitors.connection import ClusterConfig, ExitCode

from .errors import error
from .options import ALL, PROJECT, command, global_options, group_project, merge_globals
from .printers import emit_structured, table
from .running import run

if TYPE_CHECKING:
    from monitors.diagnostics.idle import IdleSession
    from monitors.metrics import GpuMetrics
    from monitors.monitor import Monitor

OUTPUT = click.option("-o", "--output", type=click.Choice(["text", "table", "json", "yaml"]), default="text",
                      show_default=True, help="Output format (table is text).")


def _threshold(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is None or ctx.resilient_parsing:
        return None
    if not 0 < value <= 100:
        raise click.BadParameter(f"must be more than 0 and at most 100 (got {value:g})", ctx=ctx, param=param)
    return value


@command("idle", reads_only=True)
@PROJECT
@ALL
@click.option("--threshold", "threshold", metavar="PERCENT", type=float, default=None, callback=_threshold,
              help="GPU utilisation (%) under which a GPU is idle (default: idle_threshold_percent in the "
                   "config, else 5).")
@OUTPUT
@global_options
@click.pass_context
def idle_command(ctx: click.Context, /, project: str | None, all_projects: bool, threshold: float | None,
                 output: str, **kwargs: Any) -> None:
    """Interactive sessions holding GPUs that all read under a threshold now: since when, and the
    GPU-hours idle so far (GPUs x idle hours), most first. Training jobs are never listed; a session
    without GPU readings is unknown, not idle."""
    sys.exit(run_idle(merge_globals(ctx, kwargs), group_project(ctx, project), all_projects, threshold, output))


def configured_threshold() -> float:
    """`idle_threshold_percent` from the configuration file (its default when there is none)."""
    from themes import ConfigFileError
    from tui.settings import load_settings

    from .errors import UserError

    try:
        return load_settings().idle_threshold_percent
    except ConfigFileError as exc:
        raise UserError(str(exc).splitlines()[0] if str(exc) else "invalid configuration",
                        ExitCode.NO_CONFIG) from None


def run_idle(opts: dict[str, Any], project: str | None, all_projects: bool, threshold: float | None,
             output: str) -> int:
    if project and all_projects:
        return error("-p/--project and -A/--all-projects cannot be used together", ExitCode.USAGE)

    async def body(cfg: ClusterConfig) -> int:
        import asyncio

        from monitors.connection import DEFAULT_REQUEST_TIMEOUT
        from monitors.diagnostics.idle import idle_sessions
        from monitors.gpu_feed import make_metrics

        from .where import load_where

        limit = threshold if threshold is not None else configured_threshold()
        gm = make_metrics(cfg, opts.get("prometheus"), timeout=cfg.request_timeout or DEFAULT_REQUEST_TIMEOUT)
        gm.discovery_namespaces = () if all_projects or project else (cfg.namespace,)
        # the metrics source is looked for while the cluster is listed (as load_monitor does)
        source = asyncio.ensure_future(gm.resolve_source())
        source.add_done_callback(lambda t: t.cancelled() or t.exception())
        try:
            monitor, looked = await load_where(cfg, opts, project, all_projects, nodes=False, metrics=False)
            try:
                if looked.note():
                    print(looked.note(), file=sys.stderr)
                await source
                await read_session_metrics(gm, monitor)
                sessions = idle_sessions(monitor.model, time.time(), limit)
                print_idle(sessions, output, show_project=looked.every_project, threshold=limit,
                           where=looked.where())
                problem = monitor.metrics_problem
                if problem and output in ("text", "table"):
                    print(f"ranks: note: GPU metrics unavailable: {problem}", file=sys.stderr)
                return ExitCode.OK
            finally:
                await monitor.stop()
        finally:
            source.cancel()
            await gm.aclose()

    return run(opts, body)


async def read_session_metrics(gm: GpuMetrics, monitor: Monitor) -> None:
    """One metrics refresh for the running GPU pods of the interactive sessions (nothing is sent
    when there are none); the utilisation history the refresh brought (Prometheus' range query)
    seeds the model's GPU history before the readings of now are applied."""
    from .loading import read_metrics

    await read_metrics(gm, monitor, only=lambda w: w.interactive)


def print_idle(sessions: list[IdleSession], output: str, *, show_project: bool, threshold: float,
               now: float | None = None, where: str = "") -> None:
    if output in ("json", "yaml"):
        emit_structured({"sessions": [s.to_json() for s in sessions]}, output)
        return
    from monitors.diagnostics.idle import format_gpu_hours, rfc3339
    from monitors.humanize import age, gpus

    now = time.time() if now is None else now
    headers = (["PROJECT"] if show_project else []) + ["NAME", "USER", "GPUS", "IDLE SINCE", "IDLE FOR",
                                                        "GPU-HOURS"]
    rows = [([s.project] if show_project else []) + [
        s.name, s.user or "-", gpus(s.gpus), rfc3339(s.idle_since), age(now - s.idle_since),
        format_gpu_hours(s.idle_gpu_hours)] for s in sessions]
    if not rows:
        print(f"No interactive session holds idle GPUs {where + ' ' if where else ''}(all under {threshold:g}% now).",
              file=sys.stderr)
        return
    sys.stdout.write(table(headers, rows) + "\n")
