"""`ranks why WORKLOAD`: why a workload is pending, or what is wrong with it (#15).

Lists the workload's project once (pods, jobs, quotas, events) and the nodes (for a pending job,
also every project's pods on the nodes that could take one of its pods: `Monitor.count_node_pods`,
so that what it says of free GPUs and of who holds them is what the nodes hold), then prints
`monitors.diagnostics.why.explain`'s answer: one line, then one line per finding. Cluster text is
sanitised (monitors.sanitize) and printed as plain text. Exit 0 with an answer, whatever it says;
the documented codes otherwise (8: no such workload).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from monitors.connection import ClusterConfig, ExitCode
from monitors.sanitize import clean

from .options import PROJECT, command, global_options, group_project, merge_globals, workload_argument
from .printers import emit_structured
from .running import run

if TYPE_CHECKING:
    from monitors.diagnostics.why import Diagnosis
    from monitors.model_views import WorkloadView


@command("why", reads_only=True)
@workload_argument
@PROJECT
@click.option("-o", "--output", type=click.Choice(["text", "json", "yaml"]), default="text", show_default=True,
              help="Output format.")
@global_options
@click.pass_context
def why_command(ctx: click.Context, /, workload: str, project: str | None, output: str, **kwargs: Any) -> None:
    """Why a workload is pending (gang, node fit, taints, quota, the scheduler's words), or what is
    wrong with a running one (ranks not ready, restarts, the rank that failed first, a hang, a
    straggler or a silent or idle rank).

    WORKLOAD is a name, or KIND/NAME (pytorchjob/mnist) when names clash.
    """
    sys.exit(run_why(merge_globals(ctx, kwargs), workload, group_project(ctx, project), output))


def run_why(opts: dict[str, Any], ref: str, project: str | None, output: str) -> int:
    async def body(cfg: ClusterConfig) -> int:
        from monitors.diagnostics.why import explain

        from .diagnose import located_with_tails, with_health
        from .idle import configured_threshold

        monitor, wl, diag = await located_with_tails(cfg, opts, ref, project, events=True, nodes=True)
        try:
            used = ("nodes", "events") if wl.status == "Pending" else ("events",)  # (nodes: a pending job's fit)
            forbidden = sorted(n for n in monitor.status.forbidden if n.startswith(used))
            for name in forbidden:
                print(f"ranks: warning: forbidden to list {name}; the answer leaves them out", file=sys.stderr)
            from monitors.diagnostics.why import nodes_to_count
            from sessions.own_command import ranks_command

            # one project's pods were listed: a pending job's nodes are read whole (other projects'
            # GPUs there decide whether it fits, and whose it waits for); the lines it offers run as pasted
            counted = (monitor.status.cluster_wide
                       or await monitor.count_node_pods(nodes_to_count(monitor.model, wl.key)))
            d = explain(monitor.model, wl.key, cluster_pods=counted, command=ranks_command(cfg) or "ranks",
                        me=cfg.impersonate_user or cfg.user, idle_threshold=configured_threshold())
            d = with_health(d, diag.health)
            from monitors.diagnostics.gpu_health import with_gpu_findings

            d = with_gpu_findings(d, wl, monitor.model.gpu_xids)
            autopsy = await kept_autopsy(cfg, wl) if any(f.kind in STACK_KINDS for f in d.findings) else None
            if output in ("json", "yaml"):
                data = diagnosis_json(d, wl)
                if autopsy is not None:
                    data["autopsy"] = {"taken_at": autopsy[0] or None, "groups": list(autopsy[1])}
                emit_structured(data, output)
            else:
                from .fitting import wrap_words
                from .printers import terminal_width

                print(wrap_words(diagnosis_text(d, wl), terminal_width()))
                if autopsy is not None:
                    print(autopsy_text(autopsy, wl, cfg))
            return ExitCode.OK
        finally:
            await monitor.stop()

    return run(opts, body)


STACK_KINDS = ("hang", "straggler")  # where the stacks of its ranks say what the logs cannot


async def kept_autopsy(cfg: ClusterConfig, wl: WorkloadView) -> tuple[float, tuple[str, ...]]:
    """(when, its lines) of the workload's last hang autopsy kept by `ranks stacks`; (0, ()) none."""
    import asyncio

    from monitors.flight_store import store_for

    try:
        rec = await asyncio.to_thread(store_for(cfg).load, wl.namespace, wl.kind, wl.name, wl.uid)
    except OSError:
        rec = None
    return (rec.autopsy_at, rec.autopsy) if rec is not None and rec.autopsy else (0.0, ())


def autopsy_text(autopsy: tuple[float, tuple[str, ...]], wl: WorkloadView, cfg: ClusterConfig) -> str:
    """The last autopsy's groups, a line each; or the command that takes one."""
    import time

    from monitors.humanize import age

    at, lines = autopsy
    if not lines:
        from sessions.own_command import ranks_command

        return (f"  stacks: {ranks_command(cfg) or 'ranks'} stacks {clean(wl.name)} -p {clean(wl.project)} "
                "shows where each rank is")
    return "\n".join([f"  stacks: the last autopsy, {age(max(0.0, time.time() - at))} ago (ranks stacks):",
                      *(f"    {clean(line, limit=300)}" for line in lines)])


def diagnosis_text(d: Diagnosis, wl: WorkloadView) -> str:
    lines = [f"{clean(wl.name)} ({clean(wl.kind)}, project {clean(wl.project)}) is {clean(d.status)}: "
             f"{clean(d.summary)}"]
    said = {clean(d.summary).rstrip(".")}
    for f in d.findings:  # (no sentence twice: one the summary or another finding said already is left out)
        text = clean(f.text)
        if text.rstrip(".") not in said:
            said.add(text.rstrip("."))
            lines.append(f"  {f.kind}: {text}")
    return "\n".join(lines)


def diagnosis_json(d: Diagnosis, wl: WorkloadView) -> dict[str, Any]:
    data = d.to_json()
    data.update(project=wl.project, summary=clean(d.summary),
                findings=[{"kind": f.kind, "text": clean(f.text)} for f in d.findings])
    return {key: clean(v) if isinstance(v, str) else v for key, v in data.items()}
