"""What the read commands print: kubectl-style tables (aligned columns, no borders; widths in
terminal cells), JSON/YAML (`emit_structured`), a workload's `get`, its first failure, nodes and
projects. Cells are plain text sanitised by `monitors.sanitize.clean`; colour (status only) is
added when stdout is a terminal and NO_COLOR is unset.

Light at import (it is on the path of `ranks --help`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from monitors.humanize import age, gpus, mib, percent
from monitors.sanitize import clean

if TYPE_CHECKING:
    from monitors.model_views import NodeView, ProjectView, WorkloadView
    from monitors.records import EventRec

STATUS_COLOURS = {
    "Running": "32", "Succeeded": "36", "Failed": "31", "Degraded": "33", "Pending": "33",
    "Restarting": "33", "Suspended": "90", "CrashLoopBackOff": "31", "Error": "31", "OOMKilled": "31",
}


def colour_enabled() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], colour_col: int | None = None) -> str:
    from rich.cells import cell_len

    cells = [[clean(c) for c in row] for row in rows]
    widths = [cell_len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], cell_len(c))
    use_colour = colour_enabled()
    room = terminal_width()
    gap = "   "  # (as kubectl; two spaces when that makes the table fit the terminal: 80 columns)
    if room is not None and sum(widths) + 3 * (len(widths) - 1) > room:
        gap = "  "
    lines = []
    for r, row in enumerate([list(headers), *cells]):
        parts = []
        for i, c in enumerate(row):
            pad = " " * (widths[i] - cell_len(c)) if i < len(row) - 1 else ""
            text = c
            if use_colour and r > 0 and i == colour_col:
                code = STATUS_COLOURS.get(c.split(" ")[0])
                if code:
                    text = f"\x1b[{code}m{c}\x1b[0m"
            parts.append(text + pad)
        lines.append(gap.join(parts).rstrip())
    return "\n".join(lines)


def terminal_width() -> int | None:
    """The terminal's width when output goes to one (COLUMNS first, as the shell sets it); None
    when it is piped (the columns stay as they are for scripts)."""
    value = os.environ.get("COLUMNS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    if not sys.stdout.isatty():
        return None
    import shutil

    return shutil.get_terminal_size().columns


def emit_structured(data: Any, output: str) -> None:
    """`data` as JSON or YAML; controls, line separators and bidi controls in its strings escaped
    (`monitors.sanitize.json_safe`, `yaml_dump`)."""
    from monitors.sanitize import json_safe, yaml_dump

    if output == "json":
        import orjson

        sys.stdout.write(json_safe(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()))
        sys.stdout.write("\n")
    else:
        sys.stdout.write(yaml_dump(data, sort_keys=False))


def print_projects(projects: list[ProjectView], output: str) -> None:
    projects = sorted(projects, key=lambda p: p.name)
    if output in ("json", "yaml"):
        from monitors.export import project_json

        emit_structured({"projects": [project_json(p) for p in projects]}, output)
        return
    headers = ["PROJECT", "NAMESPACE", "GPU QUOTA", "GPUS ALLOCATED", "GPU UTIL", "RUNNING", "PENDING"]
    rows = [[p.name, p.namespace, gpus(p.gpu_quota), gpus(p.gpus_allocated), percent(p.gpu_util),
             str(p.running), str(p.pending)] for p in projects]
    from .fitting import PROJECT_DROP

    _print(headers, rows, "No projects found.", drop=PROJECT_DROP, output=output)


def print_workloads(wls: list[WorkloadView], output: str, *, show_project: bool,
                    empty: str = "No workloads found.") -> None:
    now = time.time()
    if output in ("json", "yaml"):
        from monitors.export import workload_json

        emit_structured({"workloads": [workload_json(w, now) for w in wls]}, output)
        return
    from monitors.diagnostics.leftovers import still_held

    headers = (["PROJECT"] if show_project else []) + ["NAME", "KIND", "STATUS", "RANKS", "GPUS", "GPU UTIL", "AGE"]
    if output == "wide":
        headers += ["FRAMEWORK", "INTERACTIVE", "USER", "REASON"]
    rows = []
    for w in wls:
        status = w.status if w.status not in ("Pending", "Degraded") or not w.reason else f"{w.status}"
        held = still_held(w) if w.status in ("Failed", "Succeeded") else None
        if held is not None:  # (its ranks still run on GPUs: `ranks get` says how to free them)
            status += f" ({held.mark})"
        row = ([w.project] if show_project else []) + [
            w.name, w.kind, status, f"{w.ranks_ready}/{w.ranks_total}",
            f"{gpus(w.gpus_allocated)}/{gpus(w.gpus_requested)}", percent(w.gpu_util),
            age(now - w.created if w.created else None),
        ]
        if output == "wide":
            row += [w.framework, "yes" if w.interactive else "no", w.user or "-", w.reason or "-"]
        rows.append(row)
    from .fitting import WORKLOAD_DROP

    _print(headers, rows, empty, colour="STATUS", drop=WORKLOAD_DROP, output=output)


def event_order(e: EventRec) -> tuple[float, int, str]:
    """When it happened: the last time seen, then (events of one second) the nanosecond clock
    that Kubernetes event recorders put in the name (`<object>.<hex UnixNano>`)."""
    _, _, suffix = e.name.rpartition(".")
    try:
        nanos = int(suffix, 16) if 8 <= len(suffix) <= 16 else 0
    except ValueError:
        nanos = 0
    return (e.last or 0.0, nanos, e.name)


def print_get(w: WorkloadView, events: list[EventRec], output: str, metrics_note: str, *,
              events_forbidden: str = "", max_events: int = 20, failure: Any = None,
              story: list[str] | None = None, diag: Any = None, held: str = "", gpu_line: str = "") -> None:
    now = time.time()
    out = sys.stdout
    pods_running = sum(1 for r in w.ranks if r.phase == "Running")
    pods_pending = sum(1 for r in w.ranks if r.phase == "Pending")
    pods_failed = sum(1 for r in w.ranks if r.phase == "Failed")
    header = [
        ("Name", w.name), ("Namespace", w.namespace), ("Project", w.project),
        ("Kind", f"{w.kind} ({w.framework})"), ("Status", w.status + (f": {w.reason}" if w.reason else "")),
        ("Interactive", "yes" if w.interactive else "no"), ("Age", age(now - w.created if w.created else None)),
        ("User", w.user or "-"),
        ("GPUs", f"{gpus(w.gpus_allocated)} allocated / {gpus(w.gpus_requested)} requested"),
        ("GPU util", percent(w.gpu_util)),
        ("Pods", f"{pods_running} running, {pods_pending} pending, {pods_failed} failed"),
        ("Command", w.command or "-"),
    ]
    if held:  # a finished job's ranks still running on GPUs (`diagnostics.leftovers`)
        header.append(("Still held", held))
    width = max(len(k) for k, _ in header) + 2
    for k, v in header:
        out.write(f"{k + ':':<{width}}{clean(v, limit=500)}\n")
    if w.conditions:
        out.write("Conditions:\n")
        out.write("  " + table(["TYPE", "STATUS", "REASON", "AGE"], [
            [c.type, c.status, c.reason or "-", age(now - c.at if c.at else None)] for c in w.conditions
        ]).replace("\n", "\n  ") + "\n")
    if failure is not None:
        print_failure(failure, now, gpu_line=gpu_line)
    elif w.first_failure is not None:
        f = w.first_failure
        out.write(clean(f"First failure: {f.label} (pod {f.pod}, container {f.container}) exited {f.exit_code}"
                        f" ({f.reason})") + "\n")
    if story:
        out.write("What happened:\n")
        for line in story:
            out.write(f"  - {clean(line, limit=500)}\n")
    health = diag.health if diag is not None else None
    if health is not None and not health.ok:
        out.write(f"Health: {clean(health.summary, limit=500)}\n" if health.hung else "Health:\n")
        for r in health.flagged:
            for flag, why in zip(r.flags, r.why, strict=False):
                out.write(f"  - {flag} {clean(r.label)}: {clean(why, limit=300)}\n")
    out.write("\n")
    headers = ["ROLE", "RANK", "POD", "STATUS", "RESTARTS", "NODE", "GPU%", "GPU MEM", "LAST LOG", "STEP", "LOSS",
               "AGE"]
    if output == "wide":
        headers += ["IP", "GPUS", "LEAD"]
    rows = []
    for r in w.ranks:
        mem = "-" if r.gpu_mem_used_mib is None else (
            f"{mib(r.gpu_mem_used_mib)}/{mib(r.gpu_mem_total_mib)}" if r.gpu_mem_total_mib else mib(r.gpu_mem_used_mib))
        last = diag.last_at(r.label) if diag is not None else None
        p = (diag.progress(r.label) if diag is not None else None) or {}
        loss = "-" if p.get("loss") is None else f"{p['loss']:.4g}"
        row = [r.label + (" *" if r.lead else ""), "-" if r.rank is None else str(r.rank), r.pod, r.status,
               str(r.restarts), r.node or "-", percent(r.gpu_util), mem, age(now - last) if last else "-",
               "-" if p.get("step") is None else str(p["step"]), loss, age(now - r.created if r.created else None)]
        if output == "wide":
            row += [r.pod_ip or "-", gpus(r.gpus), "yes" if r.lead else ""]
        rows.append(row)
    none = "No pods: they are gone (see What happened)." if story else "No pods yet."
    from .fitting import RANK_DROP, fit_columns, message_under, note_left_out, with_messages

    room = None if output == "wide" else terminal_width()  # (wide: every column, as kubectl's)
    headers, rows, left_out = fit_columns(headers, rows, RANK_DROP, room)
    out.write((table(headers, rows, colour_col=headers.index("STATUS")) if rows else none) + "\n")
    if rows:
        note_left_out(left_out, room)
    if metrics_note:
        out.write(f"\nGPU metrics: {clean(metrics_note)}\n")
    events = sorted(events, key=event_order)[-max_events:]  # the newest, oldest first
    if events_forbidden:
        out.write(f"\nEvents:  not shown: {clean(events_forbidden, limit=200)}\n")
    elif not events:
        out.write("\nEvents:  <none>\n")
    else:
        out.write("\nEvents:\n")
        rows = [[age(now - e.last if e.last else None), e.type, e.reason, f"{e.kind}/{e.object_name}", e.message]
                for e in events]
        columns = ["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        text = table(columns, rows)
        if room is not None and message_under(columns, rows, room - 2):  # each message under its event
            text = with_messages(table(columns[:-1], [r[:-1] for r in rows]), [r[-1] for r in rows], room - 2)
        out.write("  " + text.replace("\n", "\n  ") + "\n")


def print_failure(f: Any, now: float, indent: str = "", gpu_line: str = "") -> None:
    """The first failure's section: who, where, how, when; whether it is a recording; last lines."""
    out = sys.stdout
    rank = f" rank {f.rank}," if f.rank is not None else ""
    node = f" on node {f.node}" if f.node else ""
    when = f" {age(now - f.finished_at)} ago" if f.finished_at else ""
    out.write(clean(f"{indent}First failure: {f.label} ({f.role or 'rank'}{rank} pod {f.pod}{node}, container "
                    f"{f.container}) exited {f.exit_code}{' (' + f.reason + ')' if f.reason else ''}{when}",
                    limit=500) + "\n")
    if gpu_line:  # (its GPU raised an XID shortly before: `diagnostics.gpu_health`)
        out.write(clean(f"{indent}  {gpu_line}", limit=500) + "\n")
    if f.recorded_at is not None:
        out.write(f"{indent}  a recording made by ranks {age(now - f.recorded_at)} ago, while it watched "
                  "(the pods are gone)\n")
    if f.lines:
        source = " (its termination message)" if f.source == "termination message" else ""
        out.write(f"{indent}  last {len(f.lines)} lines{source}:\n")
        for line in f.lines:
            out.write(f"{indent}    {clean(line, limit=1000)}\n")
    elif f.recorded_at is None:
        out.write(f"{indent}  its log cannot be read (the pod is gone or restarted since)\n")


def print_nodes(nodes: list[NodeView], output: str) -> None:
    if output in ("json", "yaml"):
        from monitors.export import node_json

        emit_structured({"nodes": [node_json(n) for n in nodes]}, output)
        return
    headers = ["NODE", "POOL", "GPU MODEL", "GPUS", "ALLOCATED", "GPU UTIL", "GPU MEM", "STATUS"]
    if output == "wide":
        headers += ["PODS"]
    rows = []
    for n in nodes:
        status = ("Ready" if n.ready else "NotReady") + (",SchedulingDisabled" if n.unschedulable else "")
        row = [n.name, n.pool or "-", n.product or "-", gpus(n.gpus), gpus(n.gpus_allocated), percent(n.gpu_util),
               mib(n.gpu_mem_used_mib), status]
        if output == "wide":
            row.append(str(n.pods))
        rows.append(row)
    from .fitting import NODE_DROP

    _print(headers, rows, "No nodes found.", drop=NODE_DROP, output=output)


def _print(headers: list[str], rows: list[list[str]], empty: str, *, colour: str | None = None,
           drop: Sequence[str] = (), output: str = "table") -> None:
    """The table, its columns in `drop` left out in that order until it fits the terminal (not
    with `-o wide`, nor piped); the `colour` column's statuses coloured."""
    from .fitting import fit_columns, note_left_out

    if not rows:
        print(empty, file=sys.stderr)
        return
    room = None if output == "wide" else terminal_width()
    headers, rows, left_out = fit_columns(headers, rows, drop, room)
    sys.stdout.write(table(headers, rows, headers.index(colour) if colour in headers else None) + "\n")
    note_left_out(left_out, room)
