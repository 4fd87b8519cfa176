"""`ssh -L LOCAL:DESTINATION:PORT`: a door user's local port to a port of a rank of their own session.

The destination names a workload, never a host or an address: `WORKLOAD` (in the user's own
project, else the one project they may read that has it), `WORKLOAD.PROJECT`, or
`RANK.WORKLOAD.PROJECT` (`worker-1.pt-interactive.team-a`; default the lead rank). Each part is a
DNS label; an IP address, `localhost` or anything else that is not such a name is refused at once.
The forward is checked and made as the key's identity (every request impersonated: finding the
workload, `pods/portforward`), so the cluster's RBAC decides; read-only mode refuses it as it
refuses `ranks port-forward`, and so does a key line's `no-port-forwarding` (or `restrict`). Each forward and each refusal is written to the audit log; a refusal
is the channel's open failure (`administratively prohibited: WHY`, which OpenSSH prints).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import asyncssh

from monitors.connection import ConnectionProblem, load_cluster_config
from monitors.kube import ApiProblem, KubeClient
from monitors.names import LookupProblem
from monitors.sanitize import clean

from ..portforward import Follower, ForwardError, PodStream, PortForward
from . import SSH_HOST_ENV as SSH_HOST_ENV  # (the door names it for its sessions)

if TYPE_CHECKING:
    from .keys import Grant, Identity
    from .server import Server

LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
SHAPE = "ssh -L PORT:WORKLOAD[.PROJECT]:PORT (or RANK.WORKLOAD.PROJECT)"


@dataclass(frozen=True)
class Destination:
    workload: str
    project: str | None = None
    rank: str | None = None


def destination(host: str) -> Destination | None:
    """The workload `host` names, or None when it names none (an address, a host name with more parts)."""
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(host.strip("[]"))
        return None
    parts = host.split(".")
    if host == "localhost" or not 1 <= len(parts) <= 3 or not all(LABEL.fullmatch(p) for p in parts):
        return None
    if len(parts) == 3:
        return Destination(parts[1], parts[2], parts[0])
    return Destination(parts[0], parts[1] if len(parts) == 2 else None)


def requested(server: Server, ident: Identity | None, peer: str, host: str, port: int, grant: Grant | None) -> Any:
    """What `connection_requested` returns: a coroutine opening the forward (its failure refuses the
    channel), or a refusal now (`ChannelOpenError`)."""
    who = ident.name if ident is not None else "?"
    asked = f"port forwarding to {host}:{port}"
    dest = destination(host)
    why = ""
    if ident is None:
        why = "not logged in"
    elif grant is not None and not grant.forwarding:
        why = "this key may not forward ports (no-port-forwarding)"
    elif server.cfg.read_only:
        why = "read-only mode: port forwarding is refused"
    elif dest is None:
        why = f"{clean(host, limit=80)} is not a workload: {SHAPE}"
    if why:
        server.audit.log("refused", user=who, peer=peer, what=f"{asked}: {why}")
        raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, why)
    assert ident is not None and dest is not None
    return _open(server, ident, peer, dest, host, port)


async def _open(server: Server, ident: Identity, peer: str, dest: Destination, host: str, port: int) -> Any:
    cfg = server.cfg
    asked = f"port forwarding to {host}:{port}"
    client: KubeClient | None = None
    follower: Follower | None = None
    try:
        kube = load_cluster_config(cfg.kubeconfig, cfg.context, impersonate_user=ident.user,
                                   impersonate_groups=ident.groups)
        if ident.namespace:
            kube.namespace = ident.namespace
        kube.request_timeout = cfg.request_timeout or kube.request_timeout
        client = KubeClient(kube)
        follower = Follower(kube, client, dest.workload, project=dest.project, rank=dest.rank)
        target = await follower.start()
        stream = await PodStream.open(client, target.namespace, target.pod, port)  # (pods/portforward, as them)
        said = await stream.refusal(0.5)
        await stream.close()
        if said:
            raise ForwardError(f"nothing listens on port {port} in {target.pod}")
    except (ForwardError, LookupProblem, ConnectionProblem, ApiProblem) as exc:
        why = clean(getattr(exc, "message", None) or (exc.one_line() if isinstance(exc, ApiProblem) else str(exc)),
                    limit=300)
        server.audit.log("refused", user=ident.name, peer=peer, what=f"{asked}: {why}")
        if follower is not None:
            await follower.close()
        if client is not None:
            await client.close()
        raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, why) from None
    server.audit.log("forward", user=ident.name, peer=peer,
                     what=f"{host}:{port} -> {target.namespace}/{target.pod}:{port}")
    fwd = PortForward(client, follower, port)

    async def relay(reader: asyncssh.SSHReader[bytes], writer: asyncssh.SSHWriter[bytes]) -> None:
        try:
            await fwd.serve(reader, writer)
        finally:
            await follower.close()
            await client.close()

    return asyncssh.stream.SSHTCPStreamSession(relay)


_LOGIN_NAME = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,63}")


def reached_as(conn: Any) -> str | None:
    """`user@address` as the client reached this server (the SSH connection's own end; the login
    name only when it is a plain one), for the lines the session tells the user to paste at home."""
    if conn is None:
        return None
    sock = conn.get_extra_info("sockname")
    host = sock[0] if isinstance(sock, tuple) and sock and isinstance(sock[0], str) else ""
    if not host:
        return None
    host = host.removeprefix("::ffff:") if "." in host else host  # (an IPv4 client on a dual-stack socket)
    name = conn.get_extra_info("username")
    return f"{name}@{host}" if isinstance(name, str) and _LOGIN_NAME.fullmatch(name) else host


def host_env(reached: str | None) -> dict[str, str]:
    """The session's `SSH_HOST_ENV` (`reached_as`), or nothing."""
    return {SSH_HOST_ENV: reached} if reached else {}
