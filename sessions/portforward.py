"""Forwarding TCP connections to a port of a rank's pod, following the session as its pods change.

    follower = Follower(cfg, client, "pt-interactive", namespace="runai-team-a", rank=None)
    forward = PortForward(client, follower, 8888, notes=print)
    bound = await forward.listen(["localhost"], 18888)     # [("127.0.0.1", 18888), ("::1", 18888)]
    ...                                                    # or: await forward.serve(reader, writer)

Wire (conventions §6.3; the kubelet's WebSocket port-forward, what the official Python client
speaks): `pods/NAME/portforward?ports=P` upgraded with `v4.channel.k8s.io`; channel 0 carries the
data, channel 1 the kubelet's error; each starts with the port as 2 bytes, little-endian; one
WebSocket per local connection (so one connection's end or failure never touches another's).

`Follower` knows which pod is the rank now: it asks the pod every `POLL` seconds and, when the pod
is gone or another (a restart, a resume after suspend: same name, new uid, or a new name for an
MPI launcher), finds the rank again in its workload once it is Running and Ready; a connection
that comes meanwhile waits for it. The change is said once per new pod (`notes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from monitors import api_paths
from monitors.connection import ClusterConfig, ConnectionProblem, ExitCode
from monitors.kube import ApiProblem, KubeClient
from monitors.names import LookupProblem
from monitors.sanitize import clean

from .channel_socket import ChannelSocket, HandshakeRefused, ProtocolError
from .exec_bridge import ExecError
from .locate import find_workload, locate_workload
from .shell import NotYet, not_running_reason, pick_rank

PROTOCOL = "v4.channel.k8s.io"
DATA, ERROR = 0, 1
CHUNK = 1024 * 1024
BUFFER = 4 << 20  # bytes a local connection's writes may queue before the relay waits
POLL = 1.0  # seconds between looks at the followed pod
PROBE_WAIT = 1.5  # how long the first stream waits for the kubelet's refusal before calling the port open
PENDING_LIMIT = 300.0  # how long a connection waits for a replaced pod to be Ready again
OPEN_TRIES = 5  # refusals of the one pod (running, Ready) before a connection gives up

Notes = Callable[[str], None]


class ForwardError(Exception):
    """A forward that cannot start or go on: one line and a documented exit code."""

    def __init__(self, message: str, code: int = ExitCode.ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = int(code)


@dataclass(frozen=True)
class PortPair:
    local: int  # 0: any free port
    remote: int


def parse_pairs(specs: list[str] | tuple[str, ...]) -> list[PortPair]:
    """kubectl's `[LOCAL:]REMOTE` (`:REMOTE` and `0:REMOTE`: a free local port)."""
    pairs: list[PortPair] = []
    for spec in specs:
        local_s, sep, remote_s = spec.rpartition(":")
        if not sep:
            local_s = remote_s
        ports = []
        for part, what in ((local_s or "0", "local"), (remote_s, "remote")):
            if not part.isdigit() or not 0 <= int(part) < 65536 or (what == "remote" and int(part) == 0):
                raise ForwardError(f"invalid port {clean(spec, limit=40)!r}: the {what} port must be a number "
                                   f"from {1 if what == 'remote' else 0} to 65535 ([LOCAL:]REMOTE)", ExitCode.USAGE)
            ports.append(int(part))
        pairs.append(PortPair(ports[0], ports[1]))
    if not pairs:
        raise ForwardError("no port given: ranks port-forward WORKLOAD [LOCAL:]REMOTE...", ExitCode.USAGE)
    return pairs


def listen_addresses(addresses: list[str] | tuple[str, ...]) -> list[str]:
    """kubectl's `--address` values (comma-separated or repeated): `localhost` is 127.0.0.1 and
    ::1; anything else must be an IP address."""
    out: list[str] = []
    for item in addresses:
        for a in (x.strip() for x in item.split(",") if x.strip()):
            if a == "localhost":
                out += ["127.0.0.1", "::1"]
                continue
            try:
                out.append(str(ipaddress.ip_address(a)))
            except ValueError:
                raise ForwardError(f"{clean(a, limit=60)} is not a valid IP address", ExitCode.USAGE) from None
    return list(dict.fromkeys(out)) or ["127.0.0.1", "::1"]


# -- one stream to the pod ---------------------------------------------------------------------------------

class PodStream:
    """One WebSocket to one port of one pod (its two channels' port frames already read)."""

    def __init__(self, sock: ChannelSocket, early: list[tuple[int, bytes]]) -> None:
        self.sock = sock
        self.early = early  # messages that came with the port frames (the error, or the first data)
        self.error = ""

    @classmethod
    async def open(cls, client: KubeClient, namespace: str, pod: str, port: int) -> PodStream:
        path = api_paths.pod(namespace, pod, "portforward")
        try:
            sock = await ChannelSocket.connect(client, path, [("ports", str(port))], PROTOCOL)
        except HandshakeRefused as exc:
            raise await _refused(client, namespace, pod, exc) from None
        except ProtocolError as exc:
            raise ForwardError(f"the port-forward to {pod} did not start: {exc}", ExitCode.ERROR) from None
        except ConnectionProblem as exc:
            raise ForwardError(exc.message, exc.code) from None
        seen: set[int] = set()
        early: list[tuple[int, bytes]] = []
        try:
            async with asyncio.timeout(30):
                while seen != {DATA, ERROR}:
                    got = await sock.receive()
                    if got is None:
                        raise ForwardError(f"the port-forward to {pod} ended before it started", ExitCode.ERROR)
                    channel, body = got
                    if channel in seen or channel not in (DATA, ERROR):
                        early.append((channel, body))
                        continue
                    if len(body) != 2 or int.from_bytes(body, "little") != port:
                        raise ForwardError(f"the port-forward to {pod} answered for another port", ExitCode.ERROR)
                    seen.add(channel)
        except TimeoutError:
            sock.close()
            raise ForwardError(f"the port-forward to {pod} did not start: no answer", ExitCode.ERROR) from None
        except ForwardError:
            sock.close()
            raise
        return cls(sock, early)

    async def refusal(self, wait: float) -> str:
        """The kubelet's refusal if it comes within `wait` seconds ("" when it does not)."""
        for channel, body in self.early:
            if channel == ERROR:
                return body.decode(errors="replace")
        try:
            got = await asyncio.wait_for(self.sock.receive(), wait)
        except TimeoutError:
            return ""
        if got is not None:
            self.early.append(got)
            if got[0] == ERROR:
                return got[1].decode(errors="replace")
        return ""

    async def relay(self, reader: Reader, writer: Writer) -> str:
        """Bytes both ways until either side ends; the kubelet's error, if it said one."""
        _roomy(writer)
        down = _Downstream(self, writer)
        for channel, body in [*self.early, *self.sock.stream(down.piece)]:
            down.piece(channel, body)
        self.early = []

        async def to_pod() -> None:
            while data := await reader.read(CHUNK):
                self.sock.send(DATA, data)
                await self.sock.drain()

        up = asyncio.ensure_future(to_pod())
        ended = asyncio.ensure_future(asyncio.wait([self.sock.closed, down.broken],
                                                   return_when=asyncio.FIRST_COMPLETED))
        try:
            await asyncio.wait([up, ended], return_when=asyncio.FIRST_COMPLETED)
            if up.done() and not ended.done() and up.exception() is None:
                await ended  # the local side sent all it had: the answer still comes (v4 has no half-close)
        except ConnectionError:
            pass
        finally:
            for task in (up, ended):
                task.cancel()
            await asyncio.gather(up, ended, return_exceptions=True)
            await down.finish()
            await self.close()
        return self.error

    async def close(self) -> None:
        self.sock.close()


class _Downstream:
    """The pod's bytes to the local side as they come: written at once; while the local side
    has not taken what was written, the WebSocket is not read (its drain is awaited)."""

    def __init__(self, stream: PodStream, writer: Writer) -> None:
        self.stream, self.writer = stream, writer
        self.transport = getattr(writer, "transport", None)
        self.draining: asyncio.Task[None] | None = None
        self.broken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def piece(self, channel: int, body: bytes) -> None:
        if channel == ERROR:
            self.stream.error += body.decode(errors="replace")
            return
        if channel != DATA or not body or self.broken.done():
            return
        self.writer.write(body)
        if self.draining is None and (self.transport is None or self.transport.get_write_buffer_size() > CHUNK):
            self.stream.sock.pause_reading()
            self.draining = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        try:
            await self.writer.drain()
        except Exception:  # (the local side is gone: the relay ends)
            if not self.broken.done():
                self.broken.set_result(None)
            return
        finally:
            self.draining = None
        self.stream.sock.resume_reading()

    async def finish(self) -> None:
        if self.draining is not None:
            self.draining.cancel()
            await asyncio.gather(self.draining, return_exceptions=True)


def _roomy(writer: Any) -> None:
    """A larger write buffer on a socket's transport (4 MiB: the pod's bytes are written as they
    come and the WebSocket read again at once, rather than after each 64 KiB drained)."""
    transport = getattr(writer, "transport", None)
    with contextlib.suppress(AttributeError, RuntimeError, ValueError):
        transport.set_write_buffer_limits(high=BUFFER)  # type: ignore[union-attr]


class Reader(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class Writer(Protocol):
    def write(self, data: bytes) -> None: ...
    async def drain(self) -> None: ...
    def close(self) -> None: ...


async def _refused(client: KubeClient, namespace: str, pod: str, exc: HandshakeRefused) -> ForwardError:
    """The upgrade was refused: why, in one line (a GET of the pod tells a missing one)."""
    who = client.cfg.impersonate_user or client.cfg.user or "you"
    if exc.status == 403:
        return ForwardError(f'forbidden: {who} cannot create pods/portforward in the namespace "{namespace}"',
                            ExitCode.FORBIDDEN)
    if exc.status == 401:
        return ForwardError("unauthorized: the API server rejected the credentials", ExitCode.UNAUTHORIZED)
    try:
        raw = await client.get(api_paths.pod(namespace, pod))
    except ApiProblem as problem:
        return ForwardError(problem.one_line(), problem.exit_code)
    except ConnectionProblem as problem:
        return ForwardError(problem.message, problem.code)
    phase = (raw.get("status") or {}).get("phase", "")
    if phase != "Running":
        return ForwardError(f'pod "{pod}" is {phase or "not running"}; cannot forward to it', ExitCode.ERROR)
    return ForwardError(f"the API server refused the port-forward upgrade ({exc.status} {exc.message})")


# -- which pod is the rank now ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    namespace: str
    pod: str
    uid: str
    label: str
    workload: str


class Follower:
    """The pod of one rank of a workload, now (see the module docstring)."""

    def __init__(self, cfg: ClusterConfig, client: KubeClient, ref: str, *, namespace: str | None = None,
                 project: str | None = None, rank: str | None = None, notes: Notes | None = None) -> None:
        self.cfg, self.client, self.ref = cfg, client, ref
        self.namespace, self.project, self.rank = namespace, project, rank
        self.notes = notes or (lambda _text: None)
        self.target: Target | None = None
        self._fresh = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None
        self.replaced = 0  # pods followed after the first

    async def start(self, known: Target | None = None) -> Target:
        """The rank's pod now; it must run (else `ForwardError`, nothing waits). `known`: the pod the
        caller already knows is the rank's (the dashboard's), only checked (one GET)."""
        if known is not None:
            self.namespace = known.namespace
            target: Target | None = await self._check(known)
            why = f"{known.label} ({known.pod}) is not running and Ready"
        else:
            if self.namespace is None:
                wl = await locate_workload(self.cfg, self.ref, self.project)
                self.namespace = wl.namespace
            target, why = await self._find()
        if target is None:
            raise ForwardError(why, ExitCode.ERROR)
        self._set(target)
        self._watch = asyncio.ensure_future(self._follow())
        return target

    async def current(self) -> Target:
        """The pod to connect to, waiting (at most `PENDING_LIMIT`) while it is being replaced."""
        try:
            await asyncio.wait_for(self._fresh.wait(), PENDING_LIMIT)
        except TimeoutError:
            raise ForwardError(f"{self.ref}: no running pod for {self.rank or 'its lead rank'} "
                               f"after {PENDING_LIMIT:g}s", ExitCode.ERROR) from None
        assert self.target is not None
        return self.target

    def suspect(self) -> None:
        """A connection failed in a way a replaced pod explains: look again now."""
        self._fresh.clear()

    async def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch

    def _set(self, target: Target) -> None:
        old, self.target = self.target, target
        self._fresh.set()
        if old is not None and (old.uid, old.pod) != (target.uid, target.pod):
            self.replaced += 1
            self.notes(f"{target.workload} {target.label}: now pod {target.pod} (the pod was replaced); "
                       "forwarding to it")

    async def _find(self) -> tuple[Target | None, str]:
        """(the rank's running and Ready pod, or None and why not)."""
        assert self.namespace is not None
        try:
            wl = await find_workload(self.cfg, self.namespace, self.ref)
            r = pick_rank(wl, rank=self.rank)
        except (NotYet, LookupProblem) as exc:
            return None, exc.message
        except ExecError as exc:
            if exc.code == ExitCode.NOT_FOUND:
                raise ForwardError(exc.message, exc.code) from None
            return None, exc.message
        why = not_running_reason(r) or ("" if r.ready else f"{r.label} ({r.pod}) is not Ready")
        if why:
            return None, why
        raw = await self.client.get(api_paths.pod(self.namespace, r.pod))
        uid = str((raw.get("metadata") or {}).get("uid", ""))
        return Target(self.namespace, r.pod, uid, r.label, wl.name), ""

    async def _check(self, known: Target) -> Target | None:
        """`known` with its uid when its pod runs, Ready and not being deleted; else None."""
        try:
            raw = await self.client.get(api_paths.pod(known.namespace, known.pod))
        except ApiProblem as exc:
            if exc.status == 404:
                return None
            raise ForwardError(exc.one_line(), exc.exit_code) from None
        except ConnectionProblem as exc:
            raise ForwardError(exc.message, exc.code) from None
        meta, status = raw.get("metadata") or {}, raw.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
                    if isinstance(c, dict))
        if meta.get("deletionTimestamp") or status.get("phase") != "Running" or not ready:
            return None
        return Target(known.namespace, known.pod, str(meta.get("uid", "")), known.label, known.workload)

    async def _gone(self, target: Target) -> bool:
        try:
            raw = await self.client.get(api_paths.pod(target.namespace, target.pod))
        except ApiProblem as exc:
            return exc.status == 404
        meta = raw.get("metadata") or {}
        return str(meta.get("uid", "")) != target.uid or bool(meta.get("deletionTimestamp"))

    async def _follow(self) -> None:
        while True:
            await asyncio.sleep(POLL)
            target = self.target
            try:
                if target is not None and self._fresh.is_set() and not await self._gone(target):
                    continue
                self._fresh.clear()
                found, _why = await self._find()
            except (ApiProblem, ConnectionProblem, ForwardError, LookupProblem):
                continue
            if found is not None:
                self._set(found)


# -- forwarding ---------------------------------------------------------------------------------------------

class PortForward:
    """Local connections (a listener's, an SSH channel's) to one remote port of the followed rank."""

    def __init__(self, client: KubeClient, follower: Follower, remote: int, *, notes: Notes | None = None) -> None:
        self.client, self.follower, self.remote = client, follower, remote
        self.notes = notes or (lambda _text: None)
        self.servers: list[asyncio.Server] = []
        self.bound: list[tuple[str, int]] = []
        self.connections = 0
        self.on_connection: Callable[[], None] | None = None  # each accepted connection (kubectl's line)
        self._tasks: set[asyncio.Task[Any]] = set()

    async def probe(self) -> None:
        """Something listens on the remote port of the rank's pod now (else `ForwardError`)."""
        target = await self.follower.current()
        stream = await PodStream.open(self.client, target.namespace, target.pod, self.remote)
        try:
            said = await stream.refusal(PROBE_WAIT)
        finally:
            await stream.close()
        if said:
            raise ForwardError(f"nothing listens on port {self.remote} in {target.pod} ({target.label} of "
                               f"{target.workload}): {clean(said, limit=300)}", ExitCode.ERROR)

    async def listen(self, addresses: list[str], local: int) -> list[tuple[str, int]]:
        """Listen on `local` (0: a free port, the same on every address); the addresses bound.
        A port taken on every address (or on one named explicitly) is a `ForwardError`."""
        problems: list[str] = []
        for address in addresses:
            try:
                server = await asyncio.start_server(self._accepted, address, local, reuse_address=True, limit=BUFFER)
            except OSError as exc:
                problems.append(f"{_hostport(address, local)}: {exc.strerror or exc}")
                continue
            self.servers.append(server)
            port = server.sockets[0].getsockname()[1]
            local = local or port
            self.bound.append((address, port))
        if not self.bound or (problems and not _only_loopback_pair(addresses)):
            await self.close()
            raise ForwardError(f"unable to listen on {problems[0]}", ExitCode.ERROR)
        return self.bound

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        if self.on_connection is not None:
            self.on_connection()
        try:
            await self.serve(reader, writer)
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def serve(self, reader: Reader, writer: Writer) -> None:
        """One local connection, to its end (a failure is a note; the connection is closed)."""
        self.connections += 1
        try:
            stream = await self._open()
            said = await stream.relay(reader, writer)
            if said:
                if "pod not found" in said:
                    self.follower.suspect()
                self.notes(f"an error occurred forwarding {self.remote}: {clean(said, limit=400)}")
        except ForwardError as exc:
            self.notes(f"an error occurred forwarding {self.remote}: {exc.message}")
        except (ApiProblem, ConnectionProblem, LookupProblem) as exc:
            self.notes(f"an error occurred forwarding {self.remote}: {getattr(exc, 'message', exc)}")
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _open(self) -> PodStream:
        """A stream to the rank's pod now, waiting for a replaced pod to run again (a pod that runs
        and is Ready yet refuses `OPEN_TRIES` times in a row: that refusal)."""
        refused: dict[tuple[str, str], int] = {}
        while True:
            target = await self.follower.current()
            try:
                return await PodStream.open(self.client, target.namespace, target.pod, self.remote)
            except ForwardError as exc:
                if exc.code in (ExitCode.FORBIDDEN, ExitCode.UNAUTHORIZED):
                    raise
                seen = refused[(target.pod, target.uid)] = refused.get((target.pod, target.uid), 0) + 1
                if seen >= OPEN_TRIES:
                    raise
                self.follower.suspect()  # gone, not running: the follower finds its successor
                await asyncio.sleep(0.2)

    async def close(self) -> None:
        for server in self.servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self.servers = []


def _hostport(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def _only_loopback_pair(addresses: list[str]) -> bool:
    """kubectl's `localhost`: one of its two addresses failing (no IPv6) is no failure."""
    return sorted(addresses) == ["127.0.0.1", "::1"]


def forwarding_line(address: str, port: int, remote: int) -> str:
    """kubectl's words for a listening forward."""
    return f"Forwarding from {_hostport(address, port)} -> {remote}"
