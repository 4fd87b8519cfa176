"""`ranks submit | shell | exec | convert | delete | suspend | resume`: the commands that create,
enter and change workloads (`sessions/` does the work; this module asks, prints and exits).

Each is one line on success, `ranks: error: MESSAGE` and a documented exit code on failure.
Read-only mode (`--read-only`, or `read_only = true` in the config file) refuses each of them with
exit code 2 before anything is sent; `submit --dry-run` and `convert --dry-run` change nothing and
are allowed. `shell` and `exec` talk to the exec WebSocket directly (no kubectl); the terminal is
put in raw mode only for the session and restored on every way out.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import click

from monitors.connection import ClusterConfig, ExitCode

from .errors import UserError, error, user_error
from .guards import confirm, read_only_refusal
from .loading import resolve_project
from .options import PROJECT, command, global_options, group_project, merge_globals, workload_argument
from .printers import emit_structured
from .running import INTERRUPT_GRACE, run

if TYPE_CHECKING:
    from monitors.kube import KubeClient
    from monitors.model_views import RankView, WorkloadView
    from sessions.lifecycle import Target
    from sessions.manifests import SubmitSpec
    from sessions.shell import ShellTarget

FRAMEWORK_NAMES = ("mpi", "pytorch", "tensorflow", "xgboost")
WAIT_POLL = 1.0


# -- the commands ------------------------------------------------------------------------------------------

@command("submit", reads_only=False)
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
@click.option("--port", "ports", multiple=True, metavar="PORT[:NAME]",
              help="Declare a container port on the lead replica (repeatable), e.g. 8888:jupyter.")
@click.option("--jupyter", is_flag=True,
              help="Start Jupyter (port 8888) on the lead replica of the session, if the image has it.")
@click.option("--tensorboard", default=None, metavar="LOGDIR",
              help="Start TensorBoard on LOGDIR (port 6006) on the lead replica of the session, if the image has it.")
@PROJECT
@click.option("--dry-run", is_flag=True, help="Print the manifest; create nothing.")
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default=None,
              help="Print the manifest (--dry-run) or the created object in this format.")
@global_options
@click.pass_context
def submit_command(ctx: click.Context, /, name: str, project: str | None, **kw: Any) -> None:
    """Submit a distributed job NAME: interactive (a session to shell into) or unattended (--command).

    The job is labelled with its project and with you (ranks/user); an existing name is an error,
    never replaced.
    """
    opts = merge_globals(ctx, kw)
    sys.exit(run_submit(opts, name=name, project=group_project(ctx, project), **kw))


@command("shell", reads_only=False)
@workload_argument
@PROJECT
@click.option("--rank", "rank", metavar="R", default=None, help="This rank (worker-2, or a rank number).")
@click.option("--pod", "pod", metavar="POD", default=None, help="This pod of the workload.")
@click.option("-c", "--container", metavar="NAME", default=None, help="This container (default: the main one).")
@click.option("--wait", is_flag=True, help="If the pod is not running yet, wait for it without asking.")
@global_options
@click.pass_context
def shell_cmd(ctx: click.Context, /, workload: str, project: str | None, rank: str | None, pod: str | None,
              container: str | None, wait: bool, **kwargs: Any) -> None:
    """A shell in the lead pod of WORKLOAD (MPI launcher, PyTorch master, TF chief), or another rank's.

    Prints the world size, the hostfile or master address and ready-to-paste horovodrun / mpirun /
    torchrun lines first. Commands are recorded with their exit status and time in ~/.ranks_history
    in the pod (see `ranks convert --from-history`). The exit status is the shell's.
    """
    if rank and pod:
        raise click.UsageError("--rank and --pod cannot be used together")
    sys.exit(run_shell(merge_globals(ctx, kwargs), workload, group_project(ctx, project), rank=rank, pod=pod,
                       container=container, wait=wait))


@command("exec", reads_only=False, context_settings={"ignore_unknown_options": True})
@workload_argument
@PROJECT
@click.option("--all", "all_ranks", is_flag=True, help="Every rank.")
@click.option("--rank", "ranks", multiple=True, metavar="R[,R...]", help="These ranks (labels or rank numbers).")
@click.option("-c", "--container", metavar="NAME", default=None, help="This container (default: the main one).")
@click.option("-v", "--verbose", is_flag=True, help="Print every rank's exit status, also when all succeeded.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@global_options
@click.pass_context
def exec_cmd(ctx: click.Context, /, workload: str, project: str | None, all_ranks: bool, ranks: tuple[str, ...],
             container: str | None, verbose: bool, command: tuple[str, ...], **kwargs: Any) -> None:
    """Run a command on several ranks of WORKLOAD at once: ranks exec WORKLOAD --all -- CMD...

    Output lines are prefixed with the rank. When a rank fails, every rank's exit status is
    printed at the end (always with -v) and the exit status is 1.
    """
    sys.exit(run_exec(merge_globals(ctx, kwargs), workload, group_project(ctx, project), all_ranks=all_ranks,
                      ranks=ranks, container=container, command=command, verbose=verbose))


@command("delete", reads_only=False)
@workload_argument
@PROJECT
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation (needed without a terminal).")
@global_options
@click.pass_context
def delete_command(ctx: click.Context, /, workload: str, project: str | None, yes: bool, **kw: Any) -> None:
    """Delete WORKLOAD (NAME or KIND/NAME) and its pods; asks first unless --yes."""
    sys.exit(run_delete(merge_globals(ctx, kw), workload, group_project(ctx, project), yes))


@command("suspend", reads_only=False)
@workload_argument
@PROJECT
@click.option("-y", "--yes", is_flag=True, help="Do not ask (an interactive session is asked about on a terminal).")
@global_options
@click.pass_context
def suspend_command(ctx: click.Context, /, workload: str, project: str | None, yes: bool, **kw: Any) -> None:
    """Suspend WORKLOAD (runPolicy.suspend): the operator deletes its pods and keeps the job.

    An interactive session's pods lose their files: ranks keeps the launches of its shells first
    (convert --from-history still finds them), says so, and asks on a terminal unless --yes.
    """
    sys.exit(run_suspend(merge_globals(ctx, kw), workload, group_project(ctx, project), yes))


@command("resume", reads_only=False)
@workload_argument
@PROJECT
@global_options
@click.pass_context
def resume_command(ctx: click.Context, /, workload: str, project: str | None, **kw: Any) -> None:
    """Resume a suspended WORKLOAD: the operator recreates its pods."""
    sys.exit(run_resume(merge_globals(ctx, kw), workload, group_project(ctx, project)))


# -- submit ------------------------------------------------------------------------------------------------

async def project_name(client: KubeClient, namespace: str) -> str:
    """The Run:ai project of a namespace (its runai/queue label, else runai-<project>), else the
    namespace itself."""
    from monitors import api_paths
    from monitors.kube import ApiProblem

    try:
        ns = await client.get(api_paths.namespace(namespace))
    except ApiProblem:
        ns = {}
    labels = (ns.get("metadata") or {}).get("labels") or {}
    for key in ("runai/queue", "kai.scheduler/queue"):
        if labels.get(key):
            return str(labels[key])
    return namespace[len("runai-"):] if namespace.startswith("runai-") else namespace


def spec_from_options(name: str, kw: dict[str, Any]) -> SubmitSpec:
    from sessions.manifests import SubmitSpec

    return SubmitSpec(
        name=name, framework=kw["framework"], image=kw["image"], workers=kw["workers"],
        gpus=kw.get("gpus") or 0, gpu_portion=kw.get("gpu_portion"), slots_per_worker=kw.get("slots_per_worker"),
        cpu=kw.get("cpu"), memory=kw.get("memory"), env=tuple(kw.get("env") or ()),
        volumes=tuple(kw.get("volumes") or ()), node_pool=kw.get("node_pool"),
        interactive=bool(kw.get("interactive")), command=kw.get("command"),
        ports=tuple(kw.get("ports") or ()), jupyter=bool(kw.get("jupyter")), tensorboard=kw.get("tensorboard"),
    )


def run_submit(opts: dict[str, Any], *, name: str, project: str | None, dry_run: bool = False,
               output: str | None = None, **kw: Any) -> int:
    """`ranks submit`: validate, render, create (or print with --dry-run). Exit code."""
    from monitors.kube import KubeClient
    from sessions.errors import SessionError
    from sessions.manifests import spec_problems
    from sessions.submit import submit

    if not dry_run:
        refused = read_only_refusal(opts, f"submit {name}")
        if refused is not None:
            return refused
    spec = spec_from_options(name, kw)
    local = [p for p in spec_problems(spec) if p.flag != "--project"]
    if local:  # before touching the cluster
        return error(local[0].message, ExitCode.USAGE)

    async def body(cfg: ClusterConfig) -> int:
        async with KubeClient(cfg) as client:
            spec.namespace = await resolve_project(client, project) if project else cfg.namespace
            spec.project = await project_name(client, spec.namespace)
            spec.user = cfg.impersonate_user or cfg.user
            try:
                obj = await submit(client, spec, dry_run=dry_run)
            except SessionError as exc:
                raise user_error(exc) from None
        if dry_run or output:
            emit_structured(obj, output or "yaml")
            return ExitCode.OK
        fw = spec.fw
        where = f" -p {project}" if project else ""
        hint = (f"; when it runs: ranks shell {spec.name}{where}" if spec.interactive
                else f"; follow it: ranks logs {spec.name}{where} -f")
        from sessions.manifests import session_ports

        ports = " ".join(f"{p}:{p}" for p, _ in session_ports(spec))
        if ports:
            hint += f"; its ports: ranks port-forward {spec.name}{where} {ports}"
        print(f"{fw.kind.lower()}.kubeflow.org/{spec.name} created in {spec.namespace}{hint}")
        return ExitCode.OK

    return run(opts, body)


# -- delete, suspend, resume -----------------------------------------------------------------------------------

async def _target(cfg: ClusterConfig, ref: str, project: str | None) -> tuple[Target, WorkloadView]:
    from sessions.errors import SessionError
    from sessions.lifecycle import target_of
    from sessions.locate import locate_workload

    wl = await locate_workload(cfg, ref, project)
    try:
        return target_of(wl), wl
    except SessionError as exc:
        raise user_error(exc) from None


def run_delete(opts: dict[str, Any], workload: str, project: str | None, yes: bool) -> int:
    """`ranks delete`: asks on a terminal unless --yes; without a terminal, --yes is required. An
    interactive session's shell histories are kept first (ranks' history store)."""
    from monitors.kube import KubeClient
    from sessions.errors import SessionError
    from sessions.lifecycle import delete

    refused = read_only_refusal(opts, f"delete {workload}")
    if refused is not None:
        return refused
    if not yes and not sys.stdin.isatty():
        return error(f"refusing to delete {workload} without confirmation: stdin is not a terminal; "
                     "pass --yes to delete", ExitCode.USAGE)

    async def body(cfg: ClusterConfig) -> int:
        target, wl = await _target(cfg, workload, project)
        async with KubeClient(cfg) as client:
            note = await _keep_session(cfg, client, wl, "delete")
            if not yes:
                what = "interactive session" if wl.interactive else "workload"
                pods = f", {len(wl.ranks)} pod{'s' if len(wl.ranks) != 1 else ''}" if wl.ranks else ""
                if note:
                    print(f"ranks: note: {note}", file=sys.stderr)
                if not confirm(f"Delete {what} {target.ref} in {target.namespace} ({wl.status}{pods})?"):
                    print(f"ranks: {target.ref} not deleted", file=sys.stderr)
                    return ExitCode.ERROR
            try:
                await delete(client, target)
            except SessionError as exc:
                raise user_error(exc) from None
        print(f"{target.ref} deleted from {target.namespace}")
        return ExitCode.OK

    return run(opts, body)


async def _keep_session(cfg: ClusterConfig, client: KubeClient, wl: WorkloadView, verb: str) -> str:
    """An interactive session's histories saved before `verb` (suspend, delete) takes its pods;
    what that loses and keeps, to say ("" for other workloads)."""
    if not wl.interactive:
        return ""
    from sessions.history_store import store_for
    from sessions.session_history import keep_before_losing, loss_note

    return loss_note(verb, wl, await keep_before_losing(client, wl, store_for(cfg)))


def _run_suspend(opts: dict[str, Any], workload: str, project: str | None, value: bool, yes: bool = False) -> int:
    from monitors.kube import KubeClient
    from sessions.errors import SessionError
    from sessions.lifecycle import set_suspended

    verb = "suspend" if value else "resume"
    refused = read_only_refusal(opts, f"{verb} {workload}")
    if refused is not None:
        return refused

    async def body(cfg: ClusterConfig) -> int:
        target, wl = await _target(cfg, workload, project)
        async with KubeClient(cfg) as client:
            note = await _keep_session(cfg, client, wl, verb) if value and wl.status != "Suspended" else ""
            if note:
                print(f"ranks: note: {note}", file=sys.stderr)
                if not yes and sys.stdin.isatty() and not confirm(f"Suspend interactive session {target.ref} in "
                                                                  f"{target.namespace}?"):
                    print(f"ranks: {target.ref} not suspended", file=sys.stderr)
                    return ExitCode.ERROR
            try:
                changed = await set_suspended(client, target, value)
            except SessionError as exc:
                raise user_error(exc) from None
        if not changed:
            print(f"{target.ref} was already {'suspended' if value else 'running (not suspended)'}")
        elif value:
            print(f"{target.ref} suspended (its pods are being deleted; 'ranks resume {workload}' brings them back)")
        else:
            print(f"{target.ref} resumed (the operator recreates its pods)")
        return ExitCode.OK

    return run(opts, body)


def run_suspend(opts: dict[str, Any], workload: str, project: str | None, yes: bool = False) -> int:
    return _run_suspend(opts, workload, project, True, yes)


def run_resume(opts: dict[str, Any], workload: str, project: str | None) -> int:
    return _run_suspend(opts, workload, project, False)


# -- shell ---------------------------------------------------------------------------------------------------

def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        answer = input(question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


async def wait_until_running(cfg: ClusterConfig, ref: str, project: str | None, pick: dict[str, Any],
                             timeout: float | None = None) -> tuple[WorkloadView, RankView]:
    """Until the chosen rank's pod runs (Ctrl-C gives up)."""
    import asyncio
    import time

    from sessions.locate import locate_workload
    from sessions.shell import NotYet, not_running_reason, pick_rank

    deadline = None if timeout is None else time.monotonic() + timeout
    last: str | None = ""
    while True:
        wl = await locate_workload(cfg, ref, project)
        rank: RankView | None = None
        why: str | None
        try:
            rank = pick_rank(wl, **pick)
        except NotYet as exc:
            why = exc.message
        else:
            why = not_running_reason(rank)
        if why is None and rank is not None:
            return wl, rank
        if wl.status in ("Failed", "Succeeded"):
            raise UserError(f"{wl.name} is {wl.status}; {why}", ExitCode.ERROR)
        if why != last:
            print(f"ranks: waiting: {why}", file=sys.stderr)
            last = why
        if deadline is not None and time.monotonic() > deadline:
            raise UserError(f"timed out waiting: {why}", ExitCode.ERROR)
        await asyncio.sleep(WAIT_POLL)


async def open_target(cfg: ClusterConfig, client: KubeClient, ref: str, project: str | None, *, rank: str | None,
                      pod: str | None, container: str | None, wait: bool) -> ShellTarget:
    """The rank to open a shell in, waiting for it (asked, or `wait`) when it does not run yet."""
    from sessions.locate import locate_workload
    from sessions.shell import NotYet, not_running_reason, pick_rank, shell_target

    pick = {"rank": rank, "pod": pod}
    wl = await locate_workload(cfg, ref, project)
    try:
        r: RankView | None = pick_rank(wl, **pick)
        why = not_running_reason(r) if r is not None else None
    except NotYet as exc:
        r, why = None, exc.message
    if why is not None or r is None:
        if wl.status in ("Failed", "Succeeded"):
            raise UserError(f"{wl.name} is {wl.status}; {why}", ExitCode.ERROR)
        if not wait and not _ask(f"{why}\nwait until it runs? [y/N] "):
            raise UserError(f"{why} (use --wait to wait for it)", ExitCode.ERROR)
        wl, r = await wait_until_running(cfg, ref, project, pick)
    assert r is not None
    return await shell_target(client, wl, r, container)


def fast_loop() -> None:
    """uvloop for the interactive commands, where each keystroke crosses the loop four times
    (about 15 % of the echo latency against kubectl's Go); the plain loop if it is missing."""
    import asyncio

    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


@contextlib.contextmanager
def startup_gc() -> Iterator[None]:
    """No garbage collection while a command loads its modules, then those objects frozen out of
    every later collection. The ~80 automatic collections the imports of `ranks shell` set off
    find nothing to free (modules, classes and functions live as long as the process), and the
    monitor's full collection after its LIST (`release_memory`) then scans only what came after:
    40 to 60 ms on 2 shared cores, about 10 % of the start to the banner."""
    import gc

    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def run_shell(opts: dict[str, Any], ref: str, project: str | None, *, rank: str | None, pod: str | None,
              container: str | None, wait: bool) -> int:
    with startup_gc():  # everything the shell imports, before its first request
        from monitors.kube import KubeClient
        from monitors.sanitize import clean
        from sessions import locate  # noqa: F401 (for open_target)
        from sessions.exec_bridge import ExecError
        from sessions.history_store import store_for
        from sessions.shell import explain_end, run_shell_session
        from sessions.terminal import LocalTerminal

        refused = read_only_refusal(opts, f"open a shell in {ref}")  # as k9s: a shell can change anything
        if refused is not None:
            return refused
        fast_loop()

    async def body(cfg: ClusterConfig) -> int:
        async with KubeClient(cfg) as client:
            try:
                target = await open_target(cfg, client, ref, project, rank=rank, pod=pod, container=container,
                                           wait=wait)
                outcome = await run_shell_session(client, target, LocalTerminal(), store=store_for(cfg))
            except ExecError as exc:
                raise UserError(exc.message, ExitCode(exc.code)) from None
            why = await explain_end(client, target, outcome)
            if why:
                print(f"\r\nranks: error: {clean(why)}", file=sys.stderr)
            return outcome.exit_code

    return run(opts, body)


# -- exec ------------------------------------------------------------------------------------------------------

def run_exec(opts: dict[str, Any], ref: str, project: str | None, *, all_ranks: bool, ranks: Sequence[str],
             container: str | None, command: Sequence[str], verbose: bool = False) -> int:
    import asyncio
    import time

    from monitors.kube import KubeClient
    from monitors.sanitize import clean
    from sessions.exec_all import run_on_ranks, select_ranks
    from sessions.exec_bridge import ExecError
    from sessions.history_store import store_for
    from sessions.locate import locate_workload
    from sessions.session_history import record_exec
    from sessions.shell import not_running_reason

    if not command:
        return error("no command given: ranks exec WORKLOAD --all -- CMD...", ExitCode.USAGE)
    refused = read_only_refusal(opts, f"run commands in {ref}")
    if refused is not None:
        return refused
    if all_ranks == bool(ranks):
        return error("choose the ranks: --all, or --rank R[,R...]", ExitCode.USAGE)
    wanted = [w for item in ranks for w in item.split(",") if w]

    async def body(cfg: ClusterConfig) -> int:
        async with KubeClient(cfg) as client:
            wl = await locate_workload(cfg, ref, project)
            try:
                chosen = select_ranks(wl, None if all_ranks else wanted)
            except ExecError as exc:
                raise UserError(exc.message, ExitCode(exc.code)) from None
            if not chosen:
                raise UserError(f"{wl.name} has no pods yet", ExitCode.ERROR)
            stopped = [why for r in chosen if (why := not_running_reason(r)) is not None]
            if stopped:
                raise UserError("not running: " + "; ".join(stopped), ExitCode.ERROR)
            shown = {r.label: clean(r.label, limit=80) for r in chosen}  # (cluster text: no escapes)
            width = max(len(v) for v in shown.values())
            out = sys.stdout.buffer

            def on_line(r: RankView, channel: int, line: bytes) -> None:
                stream = out if channel == 1 else sys.stderr.buffer
                stream.write(f"[{shown.get(r.label, ''):<{width}}] ".encode() + line)
                stream.flush()

            start = time.time()
            results = await run_on_ranks(client, wl, chosen, command, on_line, container=container)
            if wl.interactive:  # a launch run this way is one convert can take (sessions.session_history)
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(record_exec, store_for(cfg), wl, command, results, start)
            refused = {(r.error, r.code) for r in results if r.outcome is None}
            if len(refused) == 1 and all(r.outcome is None for r in results):
                message, code = refused.pop()  # the same refusal everywhere (RBAC, unreachable): say it once
                raise UserError(message, ExitCode(code) if code in set(ExitCode) else ExitCode.ERROR)
            failed = sum(not res.ok for res in results)
            if failed or verbose:  # a summary only when it says something (or asked for with -v)
                for res in results:
                    why = f" ({clean(res.error)})" if res.error else ""
                    print(f"{res.rank.label}: exit {res.exit_code}{why}", file=sys.stderr)
            return ExitCode.OK if not failed else ExitCode.ERROR

    return run(opts, body, interrupt_grace=INTERRUPT_GRACE)
