"""`ranks why WORKLOAD`: why a workload is pending, or what is wrong with it (#15).

Lists the workload's project once (pods, jobs, quotas, events) and the nodes, then prints
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
            forbidden = sorted(n for n in monitor.status.forbidden if n.startswith(("nodes", "events")))
            for name in forbidden:
                print(f"ranks: warning: forbidden to list {name}; the answer leaves them out", file=sys.stderr)
            from sessions.shell import ranks_command

            # (one project's pods were listed; the lines it offers run as pasted)
            d = explain(monitor.model, wl.key, cluster_pods=False, command=ranks_command(cfg) or "ranks",
                        me=cfg.impersonate_user or cfg.user, idle_threshold=configured_threshold())
            d = with_health(d, diag.health)
            if output in ("json", "yaml"):
                emit_structured(diagnosis_json(d, wl), output)
            else:
                print(diagnosis_text(d, wl))
            return ExitCode.OK
        finally:
            await monitor.stop()

    return run(opts, body)


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
