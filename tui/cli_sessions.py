"""`ranks submit | delete | suspend | resume | convert`: the commands that create and change workloads.

Registered on the `cli` group when tui.cli imports this module (its last line).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from .cli import PROJECT, _group_project, _merge_globals, cli, global_options, workload_argument

FRAMEWORK_NAMES = ("mpi", "pytorch", "tensorflow", "xgboost")


@cli.command("submit")
@click.argument("name")
@click.option("--framework", type=click.Choice(FRAMEWORK_NAMES), required=True,
              help="mpi (MPIJob: launcher + workers), pytorch (PyTorchJob: master + workers), "
                   "tensorflow (TFJob: chief + workers) or xgboost (XGBoostJob: master + workers).")
@click.option("-i", "--image", required=True, metavar="IMAGE", help="Container image of every replica.")
@click.option("--workers", type=click.IntRange(0, None), required=True, metavar="N",
              help="Worker replicas (plus the launcher, master or chief).")
@click.option("-g", "--gpus", type=click.IntRange(0, None), default=None, metavar="GPUS_PER_WORKER",
              help="Whole GPUs per worker (and per master/chief).")
@click.option("--gpu-portion", type=float, default=None, metavar="F",
              help="A fraction of one GPU per worker (Run:ai gpu-fraction), e.g. 0.5.")
@click.option("--slots-per-worker", type=int, default=None, metavar="K",
              help="MPI processes per worker (default: GPUs per worker, at least 1).")
@click.option("--cpu", default=None, metavar="C", help="CPU request per replica (e.g. 8, 500m).")
@click.option("--memory", default=None, metavar="M", help="Memory request per replica (e.g. 32Gi).")
@click.option("--env", multiple=True, metavar="K=V", help="An environment variable (repeatable).")
@click.option("--volume", "volumes", multiple=True, metavar="PVC:PATH",
              help="Mount a PersistentVolumeClaim at PATH (PVC:PATH:ro read-only; repeatable).")
@click.option("--node-pool", default=None, metavar="P", help="Run on this node pool (run.ai/node-pool).")
@click.option("--interactive", is_flag=True,
              help="A session: the launcher (MPI) or every replica runs `sleep infinity`, for `ranks shell`.")
@click.option("--command", default=None, metavar="CMD",
              help="Run CMD (via /bin/sh -c) on the launcher (MPI) or on every replica.")
@PROJECT
@click.option("--dry-run", is_flag=True, help="Print the manifest; create nothing.")
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default=None,
              help="Print the manifest (--dry-run) or the created object in this format.")
@global_options
@click.pass_context
def submit_command(ctx: click.Context, name: str, project: str | None, **kw: Any) -> None:
    """Submit a distributed job NAME: interactive (a session to shell into) or unattended (--command).

    The job is labelled with its project and with you (ranks/user); an existing name is an error,
    never replaced.
    """
    from .session_commands import run_submit

    opts = _merge_globals(ctx, kw)
    sys.exit(run_submit(opts, name=name, project=_group_project(ctx, project), **kw))


@cli.command("delete")
@workload_argument
@PROJECT
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation (needed without a terminal).")
@global_options
@click.pass_context
def delete_command(ctx: click.Context, workload: str, project: str | None, yes: bool, **kw: Any) -> None:
    """Delete WORKLOAD (NAME or KIND/NAME) and its pods; asks first unless --yes."""
    from .session_commands import run_delete

    sys.exit(run_delete(_merge_globals(ctx, kw), workload, _group_project(ctx, project), yes))


@cli.command("suspend")
@workload_argument
@PROJECT
@global_options
@click.pass_context
def suspend_command(ctx: click.Context, workload: str, project: str | None, **kw: Any) -> None:
    """Suspend WORKLOAD (runPolicy.suspend): the operator deletes its pods and keeps the job."""
    from .session_commands import run_suspend

    sys.exit(run_suspend(_merge_globals(ctx, kw), workload, _group_project(ctx, project)))


@cli.command("resume")
@workload_argument
@PROJECT
@global_options
@click.pass_context
def resume_command(ctx: click.Context, workload: str, project: str | None, **kw: Any) -> None:
    """Resume a suspended WORKLOAD: the operator recreates its pods."""
    from .session_commands import run_resume

    sys.exit(run_resume(_merge_globals(ctx, kw), workload, _group_project(ctx, project)))


@cli.command("convert")
@workload_argument
@PROJECT
@click.option("--command", "command", metavar="CMD", default=None,
              help="What the job runs (a shell command line), instead of sleep infinity.")
@click.option("--from-history", "from_history", is_flag=True,
              help="Pick the command from the session's shell history (latest horovodrun/mpirun/torchrun first).")
@click.option("--name", metavar="NEW", default=None, help="Name of the new job (default: WORKLOAD-train).")
@click.option("--delete-interactive", is_flag=True, help="Delete the interactive session once the job is created.")
@click.option("--dry-run", is_flag=True, help="Show the diff and create nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask (needed without a terminal).")
@global_options
@click.pass_context
def convert_command(ctx: click.Context, workload: str, project: str | None, command: str | None,
                    from_history: bool, name: str | None, delete_interactive: bool, dry_run: bool, yes: bool,
                    **kw: Any) -> None:
    """Turn the interactive session WORKLOAD into an unattended training job.

    Same image, resources, env, volumes, node pool and replicas; the launcher (MPI) or every replica
    runs the command instead of sleep infinity; runPolicy backoffLimit 3, cleanPodPolicy Running,
    ttlSecondsAfterFinished one day. Shows the diff and asks before submitting.
    """
    from .convert_command import run_convert

    sys.exit(run_convert(_merge_globals(ctx, kw), workload, _group_project(ctx, project), command=command,
                         from_history=from_history, name=name, delete_interactive=delete_interactive,
                         dry_run=dry_run, yes=yes))
