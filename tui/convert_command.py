"""`ranks convert`: an interactive session becomes an unattended training job (see sessions.convert)."""

from __future__ import annotations

import sys
from typing import Any

from monitors.connection import ClusterConfig, ExitCode
from monitors.kube import KubeClient
from monitors.sanitize import clean
from monitors.views import WorkloadView
from sessions import convert
from sessions.errors import SessionError
from sessions.exec_all import run_on_ranks
from sessions.lifecycle import delete, get, target_of
from sessions.shell import history_command, launch_commands, pick_rank

from .cli_commands import UserError, _error, _run
from .session_commands import _confirm, _refuse_if_read_only, _user_error
from .shell_command import load_workload


async def session_history(client: KubeClient, wl: WorkloadView) -> list[str]:
    """Launch commands from the session's shell history (lead pod), most recent first."""
    lead = pick_rank(wl)
    chunks: list[bytes] = []
    results = await run_on_ranks(client, wl, [lead], history_command(),
                                 lambda _r, ch, line: chunks.append(line) if ch == 1 else None)
    if not results[0].ok:
        raise UserError(f"cannot read the shell history in {lead.pod}: "
                        f"{clean(results[0].error) or 'exit ' + str(results[0].exit_code)}", ExitCode.ERROR)
    return launch_commands(b"".join(chunks).decode("utf-8", "replace"))


def choose(commands: list[str], *, yes: bool) -> str:
    """The most recent with --yes or without a terminal to ask on; else the user's pick."""
    if yes or len(commands) == 1 or not sys.stdin.isatty():
        return commands[0]
    print("launch commands in the session's history (most recent first):", file=sys.stderr)
    for i, cmd in enumerate(commands[:9], 1):
        print(f"  {i}) {clean(cmd, limit=300)}", file=sys.stderr)
    import click

    try:
        pick = click.prompt("use which", default=1, type=click.IntRange(1, min(9, len(commands))), err=True)
    except (click.exceptions.Abort, EOFError):
        raise UserError("no command chosen", ExitCode.ERROR) from None
    return commands[pick - 1]


def run_convert(opts: dict[str, Any], ref: str, project: str | None, *, command: str | None, from_history: bool,
                name: str | None, delete_interactive: bool, dry_run: bool, yes: bool) -> int:
    if command and from_history:
        return _error("--command and --from-history cannot be used together", ExitCode.USAGE)
    if not command and not from_history:
        return _error("say what the job runs: --command CMD, or --from-history", ExitCode.USAGE)
    if not dry_run:
        refused = _refuse_if_read_only(opts, f"convert {ref}")
        if refused is not None:
            return refused
        if not yes and not sys.stdin.isatty():
            return _error("refusing to submit without confirmation: stdin is not a terminal; pass --yes",
                          ExitCode.USAGE)

    async def body(cfg: ClusterConfig) -> int:
        async with KubeClient(cfg) as client:
            wl = await load_workload(cfg, client, ref, project)
            if not wl.interactive:
                raise UserError(f"{wl.kind.lower()}/{wl.name} is not an interactive session (its lead runs "
                                f"{clean(wl.command, limit=80) or 'its own command'})", ExitCode.USAGE)
            try:
                source = target_of(wl)
                cmd = command
                if from_history:
                    found = await session_history(client, wl)
                    if not found:
                        raise UserError("no horovodrun, mpirun or torchrun in the session's shell history "
                                        f"(~/.ranks_history in {wl.name}'s lead pod); use --command",
                                        ExitCode.ERROR)
                    cmd = choose(found, yes=yes)
                assert cmd is not None
                job = await get(client, source)
                new = convert.unattended(job, cmd, name)
                print(convert.diff(job, new), end="")
                if dry_run:
                    print("ranks: dry run: nothing was created", file=sys.stderr)
                    return ExitCode.OK
                new_ref = f"{source.kind.lower()}/{new['metadata']['name']}"
                if not yes and not _confirm(f"Submit {new_ref} in {source.namespace}?"):
                    print("ranks: nothing was created", file=sys.stderr)
                    return ExitCode.ERROR
                created = await convert.create(client, source, new)
                print(f"{created.ref} created in {created.namespace}, running: {clean(cmd, limit=200)}")
                if delete_interactive:
                    await delete(client, source)
                    print(f"{source.ref} deleted from {source.namespace}")
            except SessionError as exc:
                raise _user_error(exc) from None
            return ExitCode.OK

    return _run(opts, body)
