"""`ranks gpus`: every GPU of the cluster, one row each: its figures from the DCGM exporter's own
fields, who holds it (pod, workload, rank, project, user), and its marks (idle but allocated,
unclaimed but busy, hot, throttled, erroring); `--doctor` says what keeps figures away.

The GPUs are read once (`GpuMetrics.read_fleet`: one Prometheus query per field group, or every
exporter) while the cluster is listed; where an exporter has no pod labels, the GPUs of its node
are attributed by the UUIDs each running GPU pod there reports (`sessions.gpu_uuids`, one exec
per pod), and the output says so.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from monitors.connection import ClusterConfig, ExitCode

from .errors import error
from .options import ALL, PROJECT, command, global_options, group_project, merge_globals
from .running import run

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from monitors.gpu_fleet import Fleet, Gpu, Owner, PodKey
    from monitors.gpu_owners import GpuOwners
    from monitors.monitor import Monitor
    from monitors.records import PodRec

SORTS = ("util", "mem", "temp", "power", "age")
# the table's columns, the first left out first at 80 columns (NODE, GPU and FLAGS stay)
DROP = ("SM", "ECC", "USER", "PROJECT", "POWER", "MODEL", "MEM", "XID", "THROTTLE", "TEMP", "OWNER", "UTIL")


@command("gpus", reads_only=True)
@PROJECT
@ALL
@click.option("--node", "node", metavar="NODE", default=None, help="Only the GPUs of this node.")
@click.option("--idle", is_flag=True, help="Only GPUs a pod holds that are idle.")
@click.option("--sort", "sort", type=click.Choice(SORTS), default=None,
              help="Sort by utilisation, memory, temperature, power (highest first) or age (held longest first).")
@click.option("--doctor", is_flag=True, help="Say what keeps GPU figures away, one line each.")
@click.option("-o", "--output", type=click.Choice(["table", "wide", "json"]), default="table", show_default=True,
              help="Output format.")
@global_options
@click.pass_context
def gpus_command(ctx: click.Context, /, project: str | None, all_projects: bool, node: str | None, idle: bool,
                 sort: str | None, doctor: bool, output: str, **kwargs: Any) -> None:
    """Every GPU: utilisation, memory, temperature, power, clocks, errors, and who holds it.

    Without -p or -A, the GPUs held in the context's namespace (every GPU when it holds no
    workload); -A every GPU of every node, the free ones too.
    """
    sys.exit(run_gpus(merge_globals(ctx, kwargs), group_project(ctx, project), all_projects, node, idle, sort,
                      doctor, output))


def run_gpus(opts: dict[str, Any], project: str | None, all_projects: bool, node: str | None, idle: bool,
             sort: str | None, doctor: bool, output: str) -> int:
    if project and all_projects:
        return error("-p/--project and -A/--all-projects cannot be used together", ExitCode.USAGE)
    if node is not None:
        from monitors.names import node_problem

        problem = node_problem(node)
        if problem:
            return error(f"--node: {problem}", ExitCode.USAGE)

    async def body(cfg: ClusterConfig) -> int:
        import asyncio

        from monitors import gpu_fleet_child
        from monitors.connection import DEFAULT_REQUEST_TIMEOUT

        def metrics() -> Any:
            from monitors.gpu_feed import make_metrics

            return make_metrics(cfg, opts.get("prometheus"), timeout=cfg.request_timeout or DEFAULT_REQUEST_TIMEOUT)

        # every GPU read in a child process (the other core) while the cluster is listed here; forked
        # first (the child imports what reading needs; this process what listing needs, meanwhile)
        apart = gpu_fleet_child.start(metrics, direct=doctor)
        from monitors.gpu_owners import GpuOwners

        from .where import load_where

        owners = GpuOwners()
        reading = asyncio.ensure_future(apart.result() if apart is not None else gpu_fleet_child.in_process(
            metrics(), doctor))
        try:
            # (the pods' rows go to `owners`, not into a model: each one's owner is all this needs; the
            # nodes only for the doctor)
            monitor, looked = await load_where(cfg, opts, project, all_projects, nodes=doctor, pod_rows=True,
                                               metrics=False, pods_to=owners.sink)
            try:
                await owners.read_unclaimed(monitor)
            except BaseException:
                await monitor.stop()
                raise
            placed = owners.owners()  # (while the GPUs are still being read)
        except BaseException:
            reading.cancel()
            if apart is not None:
                apart.close()
            raise
        try:
            read, source = await reading
            return await _report(monitor, looked, read, source, owners, placed, node=node, idle=idle, sort=sort,
                                 doctor=doctor, output=output)
        finally:
            await monitor.stop()

    from monitors.gc_pause import gc_paused

    with gc_paused():  # (a one-shot read: what it builds lives until it exits; no collection pass over it)
        return run(opts, body)


async def _report(monitor: Monitor, looked: Any, read: Any, source: Any, owners: GpuOwners,
                  placed: dict[PodKey, Owner], *, node: str | None, idle: bool, sort: str | None, doctor: bool,
                  output: str) -> int:
    from monitors.diagnostics.gpu_doctor import NodeGpus, diagnose, unlabelled_nodes
    from monitors.gpu_fleet import place
    from monitors.gpu_fleet_source import direct_of
    from monitors.gpu_samples import SourceKind
    from monitors.sanitize import clean

    fleet = read.fleet
    place(fleet, placed)
    held = owners.held()
    if doctor:
        gpu_nodes = {n.name: NodeGpus(n.gpus, held.get(n.name, 0.0)) for n in monitor.model.nodes.values()
                     if n.gpus > 0}
    else:  # (the nodes are not listed: only the doctor says which GPU nodes have no series)
        gpu_nodes = {n: NodeGpus(0.0, h) for n, h in held.items()}
    by_uuid: dict[str, int] = {}
    unread: list[str] = []
    untold: list[str] = []
    migs = 0
    direct = direct_of(read)
    bare = unlabelled_nodes(fleet, gpu_nodes, direct)
    if bare and not read.problem:
        by_uuid, migs, untold, unread = await _by_uuid(monitor, fleet, bare, placed, owners.pods.values())
    if doctor:
        prom = source is not None and source.kind in (SourceKind.PROMETHEUS, SourceKind.PROMETHEUS_VIA_APISERVER)
        lines = diagnose(fleet, gpu_nodes, no_source=read.problem, prometheus=prom, direct=direct, by_uuid=by_uuid)
        lines += untold + [f"could not read the GPUs pod {u} reports" for u in unread]
        where = source.description if source is not None else "no source"
        if output == "json":
            from .printers import emit_structured

            emit_structured({"source": clean(where), "problems": [clean(x, limit=1000) for x in lines]}, "json")
        else:
            print(f"GPU metrics: {clean(where)}")
            for line in lines or ["nothing wrong: every GPU node's exporter serves its fields and pod labels"]:
                print(f"- {clean(line, limit=1000)}")
        return ExitCode.OK
    if read.problem:
        print(f"ranks: error: GPU metrics unavailable: {clean(read.problem, limit=500)} (ranks gpus --doctor says more)",
              file=sys.stderr)
        return ExitCode.UNREACHABLE
    gpus = _chosen(fleet, looked, node, idle)
    from monitors.gpu_fleet import sort_key

    gpus.sort(key=sort_key(sort or ""))
    notes = fleet.missing_notes()
    if by_uuid:
        mig = f" ({migs} of them MIG devices, by their GPU's UUID and instance)" if migs else ""
        notes.append(f"{_plural(sum(by_uuid.values()), 'GPU')}{mig} of {', '.join(sorted(by_uuid))} attributed by "
                     "UUID (the exporter there has no pod labels): from what each pod reports")
    notes += untold + [f"could not read the GPUs pod {u} reports" for u in unread]
    notes += read.warnings
    if output == "json":
        from monitors.gpu_fleet_export import fleet_json

        from .printers import emit_structured

        emit_structured(fleet_json(gpus, fleet, notes, source.description if source else ""), "json")
        return ExitCode.OK
    _print_table(gpus, output)
    for n in notes:  # (once per view: a "-" says "not exported", the note says by whom and why)
        print(f"ranks: note: {clean(n, limit=1000)}", file=sys.stderr)
    return ExitCode.OK


def _chosen(fleet: Fleet, looked: Any, node: str | None, idle: bool) -> list[Gpu]:
    gpus = list(fleet.gpus.values())
    if looked.namespaces is not None:  # a project (or the context's namespace): the GPUs its pods hold
        spaces = set(looked.namespaces)
        gpus = [g for g in gpus if g.owner is not None and g.owner.namespace in spaces]
    if node is not None:
        gpus = [g for g in gpus if g.node == node]
    if idle:
        gpus = [g for g in gpus if "idle" in g.flags]
    return gpus


async def _by_uuid(monitor: Monitor, fleet: Fleet, nodes: list[str], owners: Mapping[PodKey, Owner],
                   listed: Iterable[PodRec]) -> tuple[dict[str, int], int, list[str], list[str]]:
    """The GPUs (and MIG devices) of `nodes` attributed by what their running GPU pods (of those
    `listed`) report; (node -> GPUs attributed, how many of them MIG devices, the MIG devices whose
    pods could not be told apart, the pods that could not be read)."""
    from monitors.gpu_fleet import attribute_by_uuid
    from sessions.gpu_uuids import reported_uuids

    wanted = set(nodes)
    pods = sorted({(p.namespace, p.name, None) for p in listed  # (a workload's or not)
                   if p.node in wanted and p.gpus > 0 and p.phase == "Running"})
    got = await reported_uuids(monitor.client, pods)
    before = {k for k, g in fleet.gpus.items() if g.owned_by == "uuid"}
    _, untold = attribute_by_uuid(fleet, nodes, got.uuids, owners)
    counts: dict[str, int] = dict.fromkeys(nodes, 0)
    migs = 0
    for k, g in fleet.gpus.items():
        if g.owned_by == "uuid" and k not in before:
            counts[g.node] = counts.get(g.node, 0) + 1
            migs += bool(g.instance)
    return counts, migs, untold, [f"{ns}/{pod} ({why})" for (ns, pod), why in sorted(got.failed.items())]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _print_table(gpus: list[Gpu], output: str) -> None:
    from monitors.gpu_fleet_export import row_cells

    from .fitting import fit_columns, note_left_out
    from .printers import table, terminal_width

    headers = ["NODE", "GPU", "MODEL", "UTIL", "MEM", "TEMP", "POWER", "SM", "THROTTLE", "XID", "ECC", "OWNER",
               "PROJECT", "USER", "FLAGS"]
    if output == "wide":
        headers += ["UUID", "MIG", "BY"]
    rows = [row_cells(g, wide=output == "wide") for g in gpus]
    room = None if output == "wide" else terminal_width()
    headers, rows, left_out = fit_columns(headers, rows, DROP, room)
    if not rows:
        print("No GPUs found.", file=sys.stderr)
        return
    sys.stdout.write(table(headers, rows) + "\n")
    note_left_out(left_out, room)
