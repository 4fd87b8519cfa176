"""`ranks convert` and `ranks debug`: the round trip between an interactive session and an
unattended training job (`sessions/` does the work; this module asks, prints and exits).

convert takes the session's newest launch that exited 0 on every node it spans (its shells'
histories, read from every running rank and from what ranks kept of them, and the launches
`ranks exec` ran), or `--command`; a session that was deleted is converted from what ranks kept
of it. debug makes a session from a failed or running job, its command in the session's shell
history; converting that session shows the new job's diff against the original.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from monitors.connection import ClusterConfig, ExitCode

from .errors import UserError, error, user_error
from .guards import confirm, read_only_refusal
from .loading import resolve_project
from .options import PROJECT, command, global_options, group_project, merge_globals, workload_argument
from .printers import emit_structured
from .running import run

if TYPE_CHECKING:
    from monitors.kube import KubeClient
    from monitors.model_views import WorkloadView
    from monitors.monitor import Monitor
    from sessions.history_store import HistoryStore, SavedSession
    from sessions.launches import Launch
    from sessions.lifecycle import Target


@command("convert", reads_only=False)
@workload_argument
@PROJECT
@click.option("--command", "command", metavar="CMD", default=None,
              help="What the job runs (a shell command line), instead of sleep infinity.")
@click.option("--from-history", "from_history", is_flag=True,
              help="The last launch (horovodrun, mpirun, mpiexec, torchrun, deepspeed, python -m "
                   "torch.distributed.run) in the session's shell history that exited 0.")
@click.option("--allow-failed", "allow_failed", is_flag=True,
              help="With --from-history: take the last launch even if it did not exit 0 (with a warning).")
@click.option("--name", metavar="NEW", default=None, help="Name of the new job (default: WORKLOAD-train).")
@click.option("--delete-interactive", is_flag=True, help="Delete the interactive session once the job is created.")
@click.option("--secret-env", metavar="SECRET", default=None,
              help="Put the launch's secrets (HF_TOKEN=..., --password ...) in a new Secret SECRET the job's env "
                   "refers to (without it, or --allow-secrets, a launch with secrets is refused).")
@click.option("--allow-secrets", is_flag=True, help="Keep the launch's secrets in the job's spec, as typed.")
@click.option("--dry-run", is_flag=True, help="Show the diff and create nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask (needed without a terminal).")
@global_options
@click.pass_context
def convert_command(ctx: click.Context, /, workload: str, project: str | None, command: str | None,
                    from_history: bool, allow_failed: bool, name: str | None, delete_interactive: bool,
                    secret_env: str | None, allow_secrets: bool, dry_run: bool, yes: bool, **kw: Any) -> None:
    """Turn the interactive session WORKLOAD into an unattended training job.

    Same image, resources, env, volumes, node pool and replicas; the launcher (MPI) or every replica
    runs the command instead of sleep infinity; runPolicy backoffLimit 3, cleanPodPolicy Running,
    ttlSecondsAfterFinished one week. The session's pod and host names in the command become the
    new job's ($MASTER_ADDR, $MASTER_PORT, $RANK and the MPI hostfile where the operator provides
    them); what the launch's shell exported goes into the job's env. Secrets in the launch go into a
    Secret (--secret-env) or stay with --allow-secrets; their values are never printed. Shows the
    diff and asks before submitting.
    """
    sys.exit(run_convert(merge_globals(ctx, kw), workload, group_project(ctx, project), command=command,
                         from_history=from_history, allow_failed=allow_failed, name=name,
                         delete_interactive=delete_interactive, dry_run=dry_run, yes=yes, secret_env=secret_env,
                         allow_secrets=allow_secrets))


@command("debug", reads_only=False)
@workload_argument
@PROJECT
@click.option("--name", metavar="NAME", default=None, help="Name of the session (default: WORKLOAD-debug).")
@click.option("--same-nodes", is_flag=True,
              help="Keep each replica type on the nodes the job's pods ran on (a required node affinity).")
@click.option("--dry-run", is_flag=True, help="Print the session's manifest; create nothing.")
@click.option("-o", "--output", type=click.Choice(["yaml", "json"]), default=None,
              help="Print the manifest (--dry-run) or the created object in this format.")
@global_options
@click.pass_context
def debug_command(ctx: click.Context, /, workload: str, project: str | None, name: str | None, same_nodes: bool,
                  dry_run: bool, output: str | None, **kw: Any) -> None:
    """An interactive session made from the job WORKLOAD (failed or running), to fix it by hand.

    Same image, env, volumes, resources, framework and replicas; every replica runs sleep infinity
    (an MPIJob's launcher; its workers keep their command); the job's command is in the session's
    shell history (up-arrow in `ranks shell` runs it as the job did). `ranks convert SESSION
    --from-history` then makes the fixed job, showing its diff against WORKLOAD.
    """
    sys.exit(run_debug(merge_globals(ctx, kw), workload, group_project(ctx, project), name=name,
                       same_nodes=same_nodes, dry_run=dry_run, output=output))


def run_debug(opts: dict[str, Any], ref: str, project: str | None, *, name: str | None, same_nodes: bool,
              dry_run: bool, output: str | None) -> int:
    from monitors.kube import KubeClient
    from monitors.sanitize import clean
    from sessions.debug import create_session, failure_of, nodes_of, session_from
    from sessions.errors import SessionError
    from sessions.history_store import store_for
    from sessions.lifecycle import get, target_of
    from sessions.locate import locate_workload
    from sessions.shell import ranks_command

    if not dry_run:
        refused = read_only_refusal(opts, f"create a debug session of {ref}")
        if refused is not None:
            return refused

    async def body(cfg: ClusterConfig) -> int:
        wl = await locate_workload(cfg, ref, project)
        if wl.interactive:
            raise UserError(f"{wl.kind.lower()}/{wl.name} is an interactive session already: ranks shell {wl.name}",
                            ExitCode.USAGE)
        async with KubeClient(cfg) as client:
            try:
                target = target_of(wl)
                job = await get(client, target)
                nodes = nodes_of(wl) if same_nodes else None
                if same_nodes and not nodes:
                    raise UserError(f"no node is known for the pods of {wl.name} (they are gone): run without "
                                    "--same-nodes", ExitCode.ERROR)
                failure = failure_of(wl)
                session = session_from(job, name, nodes=nodes, failure=failure)
                if dry_run:
                    emit_structured(session, output or "yaml")
                    return ExitCode.OK
                created = await create_session(client, target, session, job, store_for(cfg))
            except SessionError as exc:
                raise user_error(exc) from None
        if output:
            emit_structured(created, output)
            return ExitCode.OK
        new = created["metadata"]["name"]
        cli = ranks_command(cfg) or "ranks"
        where = f" -p {project}" if project else ""
        print(f"{target.kind.lower()}.{target.group}/{new} created in {target.namespace}: {wl.name}'s spec, every "
              f"{'launcher' if wl.kind == 'MPIJob' else 'replica'} running sleep infinity"
              + (f", on {', '.join(sorted({n for ns in (nodes or {}).values() for n in ns}))}" if nodes else ""))
        print(f"ranks: when it runs: {cli} shell {new}{where} (up-arrow recalls {clean(wl.name)}'s command); "
              f"then {cli} convert {new}{where} --from-history", file=sys.stderr)
        return ExitCode.OK

    return run(opts, body)


# -- convert ---------------------------------------------------------------------------------------------------

def choose(found: list[Launch], *, yes: bool, allow_failed: bool, where: str) -> Launch:
    """The launch to convert (`pick_launch`: the last that exited 0), said on stderr; on a terminal
    without --yes, when there are several to choose from, the user's pick (that one first)."""
    import time

    from monitors.sanitize import clean
    from sessions.launches import launch_choices, pick_launch

    now = time.time()
    chosen, note = pick_launch(found, allow_failed=allow_failed, now=now, where=where)
    choices = [chosen] + [c for c in launch_choices(found, allow_failed=allow_failed) if c.command != chosen.command]
    if yes or len(choices) == 1 or not sys.stdin.isatty():
        print(f"ranks: {note}", file=sys.stderr)
        return chosen
    print("launches in the session's history" + ("" if allow_failed else " that exited 0") + ":", file=sys.stderr)
    for i, launch in enumerate(choices[:9], 1):
        print(f"  {i}) {launch.when(now)}, {launch.outcome()}: {clean(launch.shown, limit=300)}", file=sys.stderr)
    try:
        pick = click.prompt("use which", default=1, type=click.IntRange(1, min(9, len(choices))), err=True)
    except (click.exceptions.Abort, EOFError):
        raise UserError("no command chosen", ExitCode.ERROR) from None
    return choices[pick - 1]


def run_convert(opts: dict[str, Any], ref: str, project: str | None, *, command: str | None, from_history: bool,
                name: str | None, delete_interactive: bool, dry_run: bool, yes: bool,
                allow_failed: bool = False, secret_env: str | None = None, allow_secrets: bool = False) -> int:
    from monitors.kube import KubeClient
    from monitors.sanitize import clean
    from sessions import convert
    from sessions.errors import SessionError
    from sessions.history_store import store_for
    from sessions.launch_env import Exports, masked, prepare
    from sessions.lifecycle import delete
    from sessions.names import subdomain_problem

    if secret_env is not None and allow_secrets:
        return error("--secret-env and --allow-secrets cannot be used together", ExitCode.USAGE)
    if secret_env is not None and (why := subdomain_problem(secret_env)):
        return error(f"--secret-env {secret_env!r}: {why}", ExitCode.USAGE)

    if command and from_history:
        return error("--command and --from-history cannot be used together", ExitCode.USAGE)
    if not command and not from_history:
        return error("say what the job runs: --command CMD, or --from-history", ExitCode.USAGE)
    if allow_failed and not from_history:
        return error("--allow-failed goes with --from-history", ExitCode.USAGE)
    if not dry_run:
        refused = read_only_refusal(opts, f"convert {ref}")
        if refused is not None:
            return refused
        if not yes and not sys.stdin.isatty():
            return error("refusing to submit without confirmation: stdin is not a terminal; pass --yes",
                         ExitCode.USAGE)

    async def body(cfg: ClusterConfig) -> int:
        async with KubeClient(cfg) as client:
            store = store_for(cfg)
            source = await convert_source(cfg, opts, client, store, ref, project, from_history=from_history)
            try:
                return await convert_it(cfg, client, source)
            finally:
                if source.monitor is not None:
                    await source.monitor.stop()

    async def convert_it(cfg: ClusterConfig, client: KubeClient, source: ConvertSource) -> int:
        delete_session = delete_interactive
        wl = source.workload
        try:
            cmd, exports = command, Exports()
            if from_history:
                launch = choose(source.launches, yes=yes or dry_run, allow_failed=allow_failed, where=source.where)
                cmd, exports = launch.command, launch.exports
            assert cmd is not None
            prep = prepare(cmd, exports, secret=secret_env, allow=allow_secrets)
            new = convert.unattended(source.job, prep.command, name or source.default_name, base=source.base,
                                     env=prep.env)
            if source.base is not None:
                print(f"ranks: {source.target.name} is a debug session of {source.base['metadata']['name']}: "
                      "the new job is that job with the command, its diff against it", file=sys.stderr)
            print(masked(convert.diff(source.base or source.job, new), prep.values), end="")
            for line in prep.notes():
                print(f"ranks: note: {clean(masked(line, prep.values), limit=600)}", file=sys.stderr)
            runs = masked(convert.command_of(new), prep.values)
            if convert.leftovers(runs, convert.session_names(source.job)):
                print(f'ranks: note: the command still names "{source.target.name}" (not as a pod or host of '
                      "the session, which are renamed): check it is meant for the new job", file=sys.stderr)
            if wl is not None and source.monitor is not None and not delete_session:
                delete_session = await offer_the_sessions_gpus(cfg, source, new, ask=not (yes or dry_run))
            if dry_run:
                print("ranks: dry run: nothing was created", file=sys.stderr)
                return ExitCode.OK
            question, destroys = convert.confirmation(source.target.kind, new["metadata"]["name"],
                                                      source.target.namespace,
                                                      delete_session=delete_session and wl is not None)
            if not yes and not confirm(question, default=not destroys):
                print("ranks: nothing was created", file=sys.stderr)
                return ExitCode.ERROR
            created = await convert.create(client, source.target, new,
                                           (prep.secret, prep.secret_data) if prep.secret else None)
            print(f"{created.ref} created in {created.namespace}, running: {clean(runs, limit=200)}")
            if delete_session and wl is not None:
                await delete(client, source.target)
                print(f"{source.target.ref} deleted from {source.target.namespace}")
        except SessionError as exc:
            raise user_error(exc) from None
        return ExitCode.OK

    return run(opts, body)


@dataclass
class ConvertSource:
    """What convert starts from: the live session (`workload`), or what ranks kept of a deleted
    one (`workload` None); its job, its launches, where they were read."""

    workload: WorkloadView | None
    target: Target
    job: dict[str, Any]
    launches: list[Launch]
    where: str
    base: dict[str, Any] | None = None  # a debug session's original job
    default_name: str | None = None
    monitor: Monitor | None = None  # the session's project and the nodes, listed (stopped by the caller)


async def convert_source(cfg: ClusterConfig, opts: dict[str, Any], client: KubeClient, store: HistoryStore, ref: str,
                         project: str | None, *, from_history: bool) -> ConvertSource:
    """The session to convert: the live one (its launches read from every running rank and from
    what ranks kept), else, when it was deleted, the last ranks kept of it (its spec and launches)."""
    import asyncio

    from monitors.names import LookupProblem
    from monitors.sanitize import clean
    from sessions.errors import SessionError
    from sessions.lifecycle import Target, get, target_of
    from sessions.session_history import launches_of, session_launches

    from .loading import locate

    try:
        monitor, wl = await locate(cfg, opts, ref, project, nodes=True, metrics=True)
    except LookupProblem as exc:
        if exc.code != ExitCode.NOT_FOUND:
            raise
        saved = await asyncio.to_thread(_kept_session, cfg, store, ref, project and await resolve_project(client, project))
        if saved is None or not saved.job:
            raise
        job = saved.job
        target = Target(saved.namespace, saved.kind, saved.name, str(job.get("apiVersion") or ""))
        labels = sorted({h.label for h in saved.histories} | {r.label for r in saved.runs})
        print(f"ranks: note: {target.ref} no longer exists in {target.namespace}; converting what ranks kept of "
              "it (its spec and launches)", file=sys.stderr)
        base, default = await _original(client, target, job, saved)
        return ConvertSource(None, target, job, launches_of(saved, job, labels),
                             f"the history ranks kept of {saved.name}", base, default)
    try:
        if not wl.interactive:
            raise UserError(f"{wl.kind.lower()}/{wl.name} is not an interactive session (its lead runs "
                            f"{clean(wl.command, limit=80) or 'its own command'})", ExitCode.USAGE)
        try:
            target = target_of(wl)
            job = await get(client, target)
            found = await session_launches(client, wl, store, job) if from_history else []
        except SessionError as exc:
            raise user_error(exc) from None
        saved = await asyncio.to_thread(store.load, wl.namespace, wl.kind, wl.name, wl.uid)
        base, default = await _original(client, target, job, saved)
    except BaseException:
        await monitor.stop()
        raise
    return ConvertSource(wl, target, job, found, f"~/.ranks_history in {wl.name}'s pods and what ranks kept of it",
                         base, default, monitor)


async def offer_the_sessions_gpus(cfg: ClusterConfig, source: ConvertSource, new: dict[str, Any], *, ask: bool) -> bool:
    """Before submitting: whether the new job would start now. When it would wait, say on what (its
    own session first); when the session holds what it needs, offer to delete the session once the
    job is created (asked on a terminal; otherwise said, with the flag that does it). The answer."""
    import time

    from monitors.diagnostics.holders import gpu_fit
    from monitors.diagnostics.why import PodShape, nodes_with_room
    from monitors.sanitize import clean
    from sessions import convert
    from sessions.shell import ranks_command

    wl, monitor = source.workload, source.monitor
    assert wl is not None and monitor is not None
    now = time.time()
    demands = convert.gpu_demands(new)
    if not monitor.status.cluster_wide:  # (every project's pods on the nodes it could use: their free GPUs)
        await monitor.count_node_pods(nodes_with_room(monitor.model, [
            PodShape("", d.pods, d.gpus_per_pod, d.selector, d.tolerations) for d in demands]))
    fit = gpu_fit(monitor.model, wl.namespace, demands, me=cfg.impersonate_user or cfg.user, now=now, first=wl.key)
    for line in convert.waits_on(fit, wl.key, now, ranks_command(cfg) or "ranks"):
        print(f"ranks: note: {clean(line, limit=400)}", file=sys.stderr)
    if not any(h.key == wl.key for h in fit.holders):
        return False
    if ask and sys.stdin.isatty():
        return confirm(f"Delete the session {wl.name} once the job is created, so that the job can start?")
    print("ranks: note: --delete-interactive deletes the session once the job is created", file=sys.stderr)
    return False


async def _original(client: KubeClient, target: Target, job: dict[str, Any], saved: SavedSession | None
                    ) -> tuple[dict[str, Any] | None, str | None]:
    from sessions.debug import original
    from sessions.errors import SessionError

    try:
        return await original(client, target, job, saved)
    except SessionError as exc:
        raise user_error(exc) from None


def _kept_session(cfg: ClusterConfig, store: HistoryStore, ref: str, namespace: str | None) -> SavedSession | None:
    """The newest session ranks kept named `ref` (in `namespace`, else the context's, else any)."""
    kind, _, name = ref.rpartition("/")
    kind = kind.split(".")[0].lower()
    for ns in ([namespace] if namespace else [cfg.namespace, "*"]):
        found = [s for s in store.find(ns, name) if not kind or s.kind.lower() in (kind, kind.rstrip("s"))]
        if found:
            return max(found, key=lambda s: s.saved_at)
    return None
