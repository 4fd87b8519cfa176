"""`ranks port-forward WORKLOAD [LOCAL:]REMOTE...`: a rank's ports on this machine, as kubectl's
`port-forward` (its arguments and lines), following the session when its pods are replaced.

It prints `Forwarding from 127.0.0.1:LOCAL -> REMOTE` for each address and port it listens on,
`Handling connection for LOCAL` for each connection, one line when the rank's pod was replaced
and the forward follows the new one; it runs until Ctrl-C (which ends it within a second). One
line and an exit code for what stops it from starting: a local port taken (1), nothing listening
on a remote port (1), the workload or rank not found (8), forbidden (7), read-only mode (2).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from monitors.connection import ClusterConfig, ExitCode

from .errors import UserError
from .guards import read_only_refusal
from .options import PROJECT, command, global_options, group_project, merge_globals, workload_argument
from .running import run

CTRL_C_GRACE = 0.8  # seconds from Ctrl-C to the end, at most


@command("port-forward", reads_only=False)
@workload_argument
@click.argument("ports", nargs=-1, required=True, metavar="[LOCAL:]REMOTE...")
@PROJECT
@click.option("--rank", "rank", metavar="R", default=None,
              help="This rank (worker-2, or a rank number); default: the lead (launcher, master, chief).")
@click.option("--address", "addresses", multiple=True, metavar="ADDR", default=("localhost",), show_default=True,
              help="Addresses to listen on (comma-separated or repeated; localhost is 127.0.0.1 and ::1).")
@global_options
@click.pass_context
def port_forward_command(ctx: click.Context, /, workload: str, ports: tuple[str, ...], project: str | None,
                         rank: str | None, addresses: tuple[str, ...], **kw: Any) -> None:
    """Forward local ports to a rank's pod: ranks port-forward pt-interactive 18888:8888

    Each [LOCAL:]REMOTE listens on LOCAL (a free port for :REMOTE or 0:REMOTE) and reaches port
    REMOTE of the rank's pod; when the pod is replaced (a restart, a resume) the forward follows
    the new one. Runs until Ctrl-C.
    """
    sys.exit(run_port_forward(merge_globals(ctx, kw), workload, group_project(ctx, project), ports=ports,
                              rank=rank, addresses=addresses))


def run_port_forward(opts: dict[str, Any], ref: str, project: str | None, *, ports: tuple[str, ...],
                     rank: str | None, addresses: tuple[str, ...]) -> int:
    from sessions.portforward import ForwardError, listen_addresses, parse_pairs

    refused = read_only_refusal(opts, f"forward ports of {ref}")
    if refused is not None:
        return refused
    from .sessions import fast_loop

    fast_loop()  # (uvloop where installed: the relay's every byte crosses the loop twice)
    try:
        pairs = parse_pairs(ports)
        hosts = listen_addresses(addresses)
    except ForwardError as exc:
        from .errors import error

        return error(exc.message, exc.code)

    async def body(cfg: ClusterConfig) -> int:
        import asyncio

        from monitors.kube import KubeClient
        from monitors.sanitize import clean
        from sessions.portforward import Follower, PortForward, forwarding_line

        def note(text: str) -> None:
            print(f"ranks: {clean(text, limit=600)}", file=sys.stderr, flush=True)

        async with KubeClient(cfg) as client:
            follower = Follower(cfg, client, ref, project=project, rank=rank, notes=note)
            forwards: list[PortForward] = []
            try:
                await follower.start()
                forwards += [PortForward(client, follower, pair.remote, notes=note) for pair in pairs]
                await asyncio.gather(*(fwd.probe() for fwd in forwards))  # (each waits for a refusal)
                for pair, fwd in zip(pairs, forwards, strict=True):
                    for address, port in await fwd.listen(hosts, pair.local):
                        print(forwarding_line(address, port, pair.remote), flush=True)
                    fwd.on_connection = _handling(pair.local or fwd.bound[0][1])
                await asyncio.Event().wait()  # until Ctrl-C
            except ForwardError as exc:
                raise UserError(exc.message, ExitCode(exc.code)) from None
            finally:
                for fwd in forwards:
                    await fwd.close()
                await follower.close()
        return ExitCode.OK

    return run(opts, body, interrupt_grace=CTRL_C_GRACE)


def _handling(local: int) -> Any:
    def say() -> None:
        print(f"Handling connection for {local}", flush=True)
    return say
