"""Printing the CLI's tables (kubectl style: aligned columns, no borders) and JSON/YAML.

Cells are plain text sanitised by `monitors.sanitize.clean`; colour (status only) is added when
stdout is a terminal and NO_COLOR is unset. Widths count terminal cells (wide characters).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson
import yaml
from rich.cells import cell_len

from monitors.export import node_json, project_json, workload_json
from monitors.humanize import age, gpus, mib, percent
from monitors.records import EventRec
from monitors.sanitize import clean
from monitors.views import NodeView, ProjectView, WorkloadView

STATUS_COLOURS = {
    "Running": "32", "Succeeded": "36", "Failed": "31", "Degraded": "33", "Pending": "33",
    "Restarting": "33", "Suspended": "90", "CrashLoopBackOff": "31", "Error": "31", "OOMKilled": "31",
}


def colour_enabled() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], colour_col: int | None = None) -> str:
    cells = [[clean(c) for c in row] for row in rows]
    widths = [cell_len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], cell_len(c))
    use_colour = colour_enabled()
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
        lines.append("   ".join(parts).rstrip())
    return "\n".join(lines)


def emit_structured(data: Any, output: str) -> None:
    if output == "json":
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def print_projects(projects: list[ProjectView], output: str) -> None:
    projects = sorted(projects, key=lambda p: p.name)
    if output in ("json", "yaml"):
        emit_structured({"projects": [project_json(p) for p in projects]}, output)
        return
    headers = ["PROJECT", "NAMESPACE", "GPU QUOTA", "GPUS ALLOCATED", "GPU UTIL", "RUNNING", "PENDING"]
    rows = [[p.name, p.namespace, gpus(p.gpu_quota), gpus(p.gpus_allocated), percent(p.gpu_util),
             str(p.running), str(p.pending)] for p in projects]
    _print(headers, rows, "No projects found.")


def print_workloads(wls: list[WorkloadView], output: str, *, show_project: bool) -> None:
    now = time.time()
    if output in ("json", "yaml"):
        emit_structured({"workloads": [workload_json(w, now) for w in wls]}, output)
        return
    headers = (["PROJECT"] if show_project else []) + ["NAME", "KIND", "STATUS", "RANKS", "GPUS", "GPU UTIL", "AGE"]
    if output == "wide":
        headers += ["FRAMEWORK", "INTERACTIVE", "USER", "REASON"]
    rows = []
    for w in wls:
        status = w.status if w.status not in ("Pending", "Degraded") or not w.reason else f"{w.status}"
        row = ([w.project] if show_project else []) + [
            w.name, w.kind, status, f"{w.ranks_ready}/{w.ranks_total}",
            f"{gpus(w.gpus_allocated)}/{gpus(w.gpus_requested)}", percent(w.gpu_util),
            age(now - w.created if w.created else None),
        ]
        if output == "wide":
            row += [w.framework, "yes" if w.interactive else "no", w.user or "-", w.reason or "-"]
        rows.append(row)
    _print(headers, rows, "No workloads found.", colour_col=headers.index("STATUS"))


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
              events_forbidden: str = "", max_events: int = 20) -> None:
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
    width = max(len(k) for k, _ in header) + 2
    for k, v in header:
        out.write(f"{k + ':':<{width}}{clean(v)}\n")
    if w.conditions:
        out.write("Conditions:\n")
        out.write("  " + table(["TYPE", "STATUS", "REASON", "AGE"], [
            [c.type, c.status, c.reason or "-", age(now - c.at if c.at else None)] for c in w.conditions
        ]).replace("\n", "\n  ") + "\n")
    if w.first_failure is not None:
        f = w.first_failure
        out.write(clean(f"First failure: {f.label} (pod {f.pod}, container {f.container}) exited {f.exit_code}"
                        f" ({f.reason})") + "\n")
    out.write("\n")
    headers = ["ROLE", "RANK", "POD", "STATUS", "RESTARTS", "NODE", "GPU%", "GPU MEM", "AGE"]
    if output == "wide":
        headers += ["IP", "GPUS", "LEAD"]
    rows = []
    for r in w.ranks:
        mem = "-" if r.gpu_mem_used_mib is None else (
            f"{mib(r.gpu_mem_used_mib)}/{mib(r.gpu_mem_total_mib)}" if r.gpu_mem_total_mib else mib(r.gpu_mem_used_mib))
        row = [r.label + (" *" if r.lead else ""), "-" if r.rank is None else str(r.rank), r.pod, r.status,
               str(r.restarts), r.node or "-", percent(r.gpu_util), mem, age(now - r.created if r.created else None)]
        if output == "wide":
            row += [r.pod_ip or "-", gpus(r.gpus), "yes" if r.lead else ""]
        rows.append(row)
    out.write((table(headers, rows, colour_col=3) if rows else "No pods yet.") + "\n")
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
        out.write("  " + table(["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"], rows).replace("\n", "\n  ") + "\n")


def print_nodes(nodes: list[NodeView], output: str) -> None:
    if output in ("json", "yaml"):
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
    _print(headers, rows, "No nodes found.")


def _print(headers: list[str], rows: list[list[str]], empty: str, colour_col: int | None = None) -> None:
    if not rows:
        print(empty, file=sys.stderr)
        return
    sys.stdout.write(table(headers, rows, colour_col) + "\n")
