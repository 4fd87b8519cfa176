"""`ranks stacks WORKLOAD`: the hang autopsy (#28). Every rank's Python stack read in its pod
(py-spy through pods/exec, `sessions.stacks`), merged STAT-style: the frames the ranks share, the
branches where they part, the smallest groups first (the odd ones out, marked `!`), each group with
its ranks' last log line, the seconds since it and their GPUs' utilisation. Cluster text is
cleaned when parsed and printed as plain text; `-o json` goes through `json_safe`.

Exit 0 when at least one rank's stack was read (those not read are named, with why); otherwise one
`ranks: error:` line saying what is missing (py-spy in the image, the ptrace the kernel refused,
RBAC for pods/exec: 7) and how to fix it.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import click

from monitors.connection import ClusterConfig, ExitCode

from .errors import UserError
from .options import PROJECT, command, global_options, group_project, merge_globals, workload_argument
from .running import run

if TYPE_CHECKING:
    from monitors.model_views import WorkloadView
    from sessions.stacks.collect import Autopsy
    from sessions.stacks.render import PodInfo

    from .diagnose import RankDiagnostics


def parse_ranks(values: tuple[str, ...]) -> frozenset[int] | None:
    """`--rank 3 --rank 5,7`: global rank numbers; None when none was given; ValueError otherwise."""
    from monitors.sanitize import shown

    if not values:
        return None
    out: set[int] = set()
    for item in values:
        words = item.split(",")
        for w in words:
            if not (w.strip().isdigit() and len(w.strip()) < 10):
                raise ValueError(f"--rank takes rank numbers (R[,R...]), not {shown(w or item, limit=40)}")
            out.add(int(w))
    return frozenset(out)


@command("stacks", reads_only=True)
@workload_argument
@PROJECT
@click.option("--rank", "ranks", multiple=True, metavar="R[,R...]", help="Only these ranks (global rank numbers).")
@click.option("--native", is_flag=True, help="Native frames too (C, C++, CUDA: py-spy --native).")
@click.option("--all-threads", is_flag=True, help="Every thread of each rank, not only its main thread.")
@click.option("--image", metavar="IMAGE", default=None,
              help="A debug image with py-spy, run as an ephemeral container beside a training container whose "
                   "image lacks it (default: stacks_image in the config). Changes the pod: not in read-only mode.")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format.")
@global_options
@click.pass_context
def stacks_command(ctx: click.Context, /, workload: str, project: str | None, ranks: tuple[str, ...],
                   native: bool, all_threads: bool, image: str | None, output: str, **kwargs: Any) -> None:
    """Where every rank of WORKLOAD is: its Python stack, read in its pod with py-spy, merged
    into one tree (the frames ranks share, the branches where they part, the odd ones out first).

    Which process is which rank comes from its own environment (RANK, OMPI_COMM_WORLD_RANK,
    PMI_RANK, HOROVOD_RANK...); launchers, wrappers and data-loader workers are named apart.
    The image needs py-spy, and the kernel must let it attach (SYS_PTRACE); otherwise --image (or
    stacks_image in the config) names a debug image with py-spy, run as an ephemeral container
    beside the training container, as kubectl debug --target does. A read that hangs is given up
    after --request-timeout, naming the ranks not read.
    """
    try:
        wanted = parse_ranks(ranks)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if image is not None and not image.strip():
        raise click.UsageError("--image needs an image name")
    sys.exit(run_stacks(merge_globals(ctx, kwargs), workload, group_project(ctx, project), wanted,
                        native=native, all_threads=all_threads, output=output, image=image))


def pod_info(wl: WorkloadView, diag: RankDiagnostics) -> dict[str, PodInfo]:
    from sessions.stacks.render import PodInfo

    out: dict[str, PodInfo] = {}
    for r in wl.ranks:
        tail = diag.tails.get(r.label)
        line = tail.lines[-1][1] if tail is not None and tail.lines else None
        out[r.label] = PodInfo(line, tail.last_at if tail is not None else r.last_log, r.gpu_util)
    return out


def refusal(a: Autopsy) -> UserError | None:
    """Nothing read: the one reason (what is missing and how to fix it), with its exit code."""
    if a.stacks:
        return None
    if a.problems:
        return UserError(a.problems[0], ExitCode.FORBIDDEN if "forbidden" in a.problems[0] else ExitCode.ERROR)
    reasons = sorted({u.why for u in a.unread})
    if not reasons:  # (every pod listed, no process of the ranks asked for in them)
        return UserError("no process in its pods says one of the ranks asked for (--rank)", ExitCode.NOT_FOUND)
    if len(reasons) == 1:
        code = ExitCode.FORBIDDEN if reasons[0].startswith("forbidden") else ExitCode.ERROR
        return UserError(f"no rank's stack could be read: {reasons[0]}", code)
    return UserError("no rank's stack could be read: " + "; ".join(reasons[:3]), ExitCode.ERROR)


async def keep(cfg: ClusterConfig, wl: WorkloadView, lines: list[str], at: float) -> None:
    """The autopsy's short form (a line a group) kept with the workload's flight recording, where
    `ranks why` shows it."""
    import asyncio

    from monitors.flight_store import store_for
    from monitors.sanitize import clean
    from monitors.state_dir import PrivateDirError

    try:
        await asyncio.to_thread(store_for(cfg).add_autopsy, wl.namespace, wl.kind, wl.name, wl.uid, tuple(lines), at)
    except (OSError, PrivateDirError) as exc:
        print(f"ranks: note: the autopsy is not kept: {clean(str(exc), limit=300)}", file=sys.stderr)


def configured_image() -> str | None:
    """`stacks_image` of the configuration file (None without one)."""
    from themes import ConfigFileError
    from tui.settings import load_settings

    try:
        return load_settings().stacks_image
    except ConfigFileError as exc:
        raise UserError(str(exc).splitlines()[0] if str(exc) else "invalid configuration", ExitCode.NO_CONFIG) from None


def run_stacks(opts: dict[str, Any], ref: str, project: str | None, wanted: frozenset[int] | None, *,
               native: bool, all_threads: bool, output: str, image: str | None = None) -> int:
    from .guards import read_only_reason

    async def body(cfg: ClusterConfig) -> int:
        from monitors.kube import KubeClient
        from monitors.sanitize import clean, json_safe
        from sessions.stacks import render
        from sessions.stacks.collect import Options, autopsy, running_ranks

        from .diagnose import located_with_tails

        monitor, wl, diag = await located_with_tails(cfg, opts, ref, project)
        try:
            pods = running_ranks(wl)
            if not pods:
                raise UserError(f"{clean(wl.name)} has no running pod to read stacks in (it is {clean(wl.status)})",
                                ExitCode.ERROR)
            options = Options(native=native, all_threads=all_threads, ranks=wanted,
                              timeout=cfg.request_timeout or None, image=image or configured_image(),
                              read_only=read_only_reason(opts) is not None)
            async with KubeClient(cfg) as client:
                a = await autopsy(client, wl, pods, options)
            for label, name in a.debug_containers:
                print(f"ranks: note: read {clean(label)} from the debug container {clean(name)} (it ends by itself)",
                      file=sys.stderr)
            problem = refusal(a)
            if problem is not None:
                raise problem
            if wanted is not None:
                missing = sorted(wanted - {s.rank for s in a.stacks} - {u.rank for u in a.unread if u.rank is not None})
                if missing:
                    print(f"ranks: warning: no process says rank {', '.join(map(str, missing))}", file=sys.stderr)
            info, now = pod_info(wl, diag), time.time()
            await keep(cfg, wl, [render.group_line(v, now) for v in render.annotate(a, info)[1]], a.taken_at)
            if output == "json":
                import orjson

                sys.stdout.write(json_safe(orjson.dumps(render.to_json(a, info, now), option=orjson.OPT_INDENT_2)
                                           .decode()) + "\n")
            else:
                print(render.text(a, info, now))
            return ExitCode.OK
        finally:
            await monitor.stop()

    return run(opts, body)
