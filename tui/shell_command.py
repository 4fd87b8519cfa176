"""`ranks shell` and `ranks exec`: a TTY in a rank's pod, and one command on several ranks.

Both talk to the exec WebSocket directly (no kubectl). The terminal is put in raw mode only for
the session and restored on every way out.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from typing import Any

from monitors.connection import ClusterConfig, ExitCode
from monitors.kube import ApiProblem, KubeClient, seg
from monitors.sanitize import clean
from monitors.views import RankView, WorkloadView
from sessions.exec_all import run_on_ranks, select_ranks
from sessions.exec_bridge import ExecError, ExecOutcome, ExecSession
from sessions.shell import (
    NotYet,
    ShellTarget,
    banner,
    default_container,
    not_running_reason,
    pick_rank,
    shell_command,
)
from sessions.terminal import LocalTerminal

from .cli_commands import UserError, _run
from .session_commands import _refuse_if_read_only, locate_workload

WAIT_POLL = 1.0


async def load_workload(cfg: ClusterConfig, client: KubeClient, ref: str, project: str | None) -> WorkloadView:
    return await locate_workload(cfg, ref, project)


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    try:
        answer = input(question)
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


async def wait_until_running(cfg: ClusterConfig, client: KubeClient, ref: str, project: str | None,
                             pick: dict[str, Any], timeout: float | None = None) -> tuple[WorkloadView, RankView]:
    """Until the chosen rank's pod runs (Ctrl-C gives up)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    last = ""
    while True:
        wl = await load_workload(cfg, client, ref, project)
        try:
            rank: RankView | None = pick_rank(wl, **pick)
        except NotYet as exc:
            rank, why = None, exc.message
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
    pick = {"rank": rank, "pod": pod}
    wl = await load_workload(cfg, client, ref, project)
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
        wl, r = await wait_until_running(cfg, client, ref, project, pick)
    assert r is not None
    raw = await client.get(f"/api/v1/namespaces/{seg(wl.namespace)}/pods/{seg(r.pod)}")
    workers = [x for x in wl.ranks if x.role == "worker"]
    return ShellTarget(wl, r, default_container(raw, container), raw, workers)


async def run_shell_session(client: KubeClient, target: ShellTarget, term: LocalTerminal, *,
                            quiet: bool = False) -> ExecOutcome:
    """The banner, then the shell over `term` until it exits or the connection drops."""
    if not quiet:
        term.sink(1, banner(target).encode())
    tty = term.is_tty
    session = await ExecSession.open(client, target.workload.namespace, target.rank.pod, shell_command(),
                                     container=target.container, tty=tty, stdin=True)
    try:
        with term:
            return await session.bridge(term, term.sink, term.resizes() if tty else None)
    finally:
        await session.close()


async def explain_end(client: KubeClient, target: ShellTarget, outcome: ExecOutcome) -> str:
    """Why a shell ended other than by `exit` (the pod died, the connection dropped); "" if it did."""
    if not outcome.lost and outcome.exit_code < 128:
        return ""
    try:
        raw = await client.get(f"/api/v1/namespaces/{seg(target.workload.namespace)}/pods/{seg(target.rank.pod)}")
    except ApiProblem as exc:
        if exc.status == 404:
            return f"pod {target.rank.pod} was deleted during the shell"
        return ""
    except Exception:
        return outcome.message
    uid = (target.pod.get("metadata") or {}).get("uid")
    if uid and (raw.get("metadata") or {}).get("uid") != uid:
        return f"pod {target.rank.pod} was deleted during the shell (a new pod of that name replaced it)"
    phase = (raw.get("status") or {}).get("phase", "")
    deleting = bool((raw.get("metadata") or {}).get("deletionTimestamp"))
    if deleting or phase in ("Failed", "Succeeded"):
        return f"pod {target.rank.pod} stopped during the shell ({'deleting' if deleting else phase})"
    return outcome.message if outcome.lost else ""


def fast_loop() -> None:
    """uvloop for the interactive commands, where each keystroke crosses the loop four times
    (about 15 % of the echo latency against kubectl's Go); the plain loop if it is missing."""
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def run_shell(opts: dict[str, Any], ref: str, project: str | None, *, rank: str | None, pod: str | None,
              container: str | None, wait: bool) -> int:
    refused = _refuse_if_read_only(opts, f"open a shell in {ref}")  # as k9s: a shell can change anything
    if refused is not None:
        return refused
    fast_loop()
    async def body(cfg: ClusterConfig) -> int:
        async with KubeClient(cfg) as client:
            try:
                target = await open_target(cfg, client, ref, project, rank=rank, pod=pod, container=container,
                                           wait=wait)
                outcome = await run_shell_session(client, target, LocalTerminal())
            except ExecError as exc:
                raise UserError(exc.message, ExitCode(exc.code)) from None
            why = await explain_end(client, target, outcome)
            if why:
                print(f"\r\nranks: error: {clean(why)}", file=sys.stderr)
            return outcome.exit_code

    return _run(opts, body)


def run_exec(opts: dict[str, Any], ref: str, project: str | None, *, all_ranks: bool, ranks: Sequence[str],
             container: str | None, command: Sequence[str], verbose: bool = False) -> int:
    if not command:
        return _usage("no command given: ranks exec WORKLOAD --all -- CMD...")
    refused = _refuse_if_read_only(opts, f"run commands in {ref}")
    if refused is not None:
        return refused
    if all_ranks == bool(ranks):
        return _usage("choose the ranks: --all, or --rank R[,R...]")
    wanted = [w for item in ranks for w in item.split(",") if w]

    async def body(cfg: ClusterConfig) -> int:
        async with KubeClient(cfg) as client:
            wl = await load_workload(cfg, client, ref, project)
            try:
                chosen = select_ranks(wl, None if all_ranks else wanted)
            except ExecError as exc:
                raise UserError(exc.message, ExitCode(exc.code)) from None
            if not chosen:
                raise UserError(f"{wl.name} has no pods yet", ExitCode.ERROR)
            stopped = [why for r in chosen if (why := not_running_reason(r)) is not None]
            if stopped:
                raise UserError("not running: " + "; ".join(stopped), ExitCode.ERROR)
            width = max(len(r.label) for r in chosen)
            out = sys.stdout.buffer

            def on_line(r: RankView, channel: int, line: bytes) -> None:
                stream = out if channel == 1 else sys.stderr.buffer
                stream.write(f"[{r.label:<{width}}] ".encode() + line)
                stream.flush()

            results = await run_on_ranks(client, wl, chosen, command, on_line, container=container)
            refused = {(r.error, r.code) for r in results if r.outcome is None}
            if len(refused) == 1 and all(r.outcome is None for r in results):
                message, code = refused.pop()  # the same refusal everywhere (RBAC, unreachable): say it once
                raise UserError(message, ExitCode(code) if code in iter(ExitCode) else ExitCode.ERROR)
            failed = sum(not res.ok for res in results)
            if failed or verbose:  # a summary only when it says something (or asked for with -v)
                for res in results:
                    why = f" ({clean(res.error)})" if res.error else ""
                    print(f"{res.rank.label}: exit {res.exit_code}{why}", file=sys.stderr)
            return ExitCode.OK if not failed else ExitCode.ERROR

    return _run(opts, body)


def _usage(message: str) -> int:
    print(f"ranks: error: {message}", file=sys.stderr)
    return int(ExitCode.USAGE)
