"""`pods/exec` over the Kubernetes WebSocket protocol, bridged to any byte stream.

    async with await ExecSession.open(client, ns, pod, ["bash"], container="pytorch", tty=True) as s:
        code = await s.bridge(source, sink, resizes)

`source` is anything with ``async read() -> bytes`` (b"" at end of input): a local terminal, an
SSH channel, a pipe. `sink(channel, data)` receives stdout (1) and stderr (2). `resizes` is an
async iterator of (columns, rows). The remote exit status becomes the return value.

Protocol (conventions §6.3): subprotocols ``v5.channel.k8s.io`` then ``v4.channel.k8s.io``; every
frame is one channel byte then the payload (0 stdin, 1 stdout, 2 stderr, 3 status, 4 resize,
255 close on v5); the exit status arrives once on channel 3 as a ``Status``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp
import orjson

from monitors import api_paths
from monitors.connection import ConnectionProblem, ExitCode
from monitors.kube import ApiProblem, KubeClient

STDIN, STDOUT, STDERR, STATUS, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
LOST = 255  # exit status when the connection dropped before the remote side reported one


class ByteSource(Protocol):
    async def read(self) -> bytes: ...


Sink = Callable[[int, bytes], Awaitable[None] | None]


class ExecError(Exception):
    """Exec could not start (forbidden, no such pod or container, unreachable): one line + exit code."""

    def __init__(self, message: str, code: int = ExitCode.ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = int(code)


@dataclass
class ExecOutcome:
    exit_code: int
    message: str = ""  # why, when the command did not exit by itself (pod died, connection lost)
    lost: bool = False


def exit_code_of(status: Any) -> tuple[int, str]:
    """(exit code, message) from the Status of channel 3. It comes from outside: anything but a
    Status object, or an exit code that is no number from 0 to 255, is a failure (1) with what it said."""
    if not isinstance(status, dict):
        return 1, "the command's end was not reported as a Status"
    if status.get("status") == "Success":
        return 0, ""
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    for cause in causes if isinstance(causes, list) else ():
        if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
            code = cause.get("message")
            if isinstance(code, str) and re.fullmatch(r"[0-9]{1,3}", code.strip()) and int(code) <= 255:
                return int(code), ""
    said = next((v for v in (status.get("message"), status.get("reason")) if isinstance(v, str) and v), "")
    return 1, said or "the command failed"


class ExecSession:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse, tty: bool) -> None:
        self.ws = ws
        self.tty = tty
        self.v5 = ws.protocol == PROTOCOLS[0]
        self.status: dict[str, Any] | None = None
        self._stdin_busy = False  # the pump is sending what `read` gave it
        self._stdin_rest: asyncio.Future[None] | None = None  # a send of `_send_typed` waiting for flow control

    @classmethod
    async def open(cls, client: KubeClient, namespace: str, pod: str, command: Sequence[str], *,
                   container: str | None = None, tty: bool = False, stdin: bool = True,
                   ) -> ExecSession:
        params: list[tuple[str, str]] = [("command", c) for c in command]
        params += [("stdin", "true" if stdin else "false"), ("stdout", "true"),
                   ("stderr", "false" if tty else "true"), ("tty", "true" if tty else "false")]
        if container:
            params.append(("container", container))
        path = api_paths.pod(namespace, pod, "exec")
        try:
            ws = await client.websocket(path, params, PROTOCOLS)
        except aiohttp.WSServerHandshakeError as exc:
            raise await _handshake_problem(client, namespace, pod, container, exc) from None
        except ConnectionProblem as exc:
            raise ExecError(exc.message, exc.code) from None
        return cls(ws, tty)

    async def __aenter__(self) -> ExecSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()

    # -- sending -------------------------------------------------------------------------------------
    async def send(self, channel: int, data: bytes) -> None:
        # (no lock: an uncompressed frame is written whole before send_bytes first yields, so
        # frames go out whole and in the order sent; aiohttp locks compressed ones itself)
        await self.ws.send_bytes(bytes([channel]) + data)

    async def write_stdin(self, data: bytes) -> None:
        await self.send(STDIN, data)

    async def resize(self, columns: int, rows: int) -> None:
        await self.send(RESIZE, orjson.dumps({"Width": int(columns), "Height": int(rows)}))

    async def close_stdin(self) -> bool:
        """Half-close stdin (v5 only); False when the server speaks v4 (stdin stays open)."""
        if not self.v5:
            return False
        await self.send(CLOSE, bytes([STDIN]))
        return True

    # -- running ---------------------------------------------------------------------------------------
    async def receive(self, sink: Sink) -> ExecOutcome:
        """Pump output to `sink` until the remote side closes; the exit status is the outcome."""
        binary, ends = aiohttp.WSMsgType.BINARY, (aiohttp.WSMsgType.ERROR, aiohttp.WSMsgType.CLOSED,
                                                  aiohttp.WSMsgType.CLOSING)
        async for msg in self.ws:  # (on every key's echo: kept short)
            if msg.type is binary:
                data = msg.data
                if not data:
                    continue
                ch = data[0]
                if ch in (STDOUT, STDERR):
                    if len(data) > 1:
                        result = sink(ch, data[1:])
                        if result is not None:
                            await result
                elif ch == STATUS:
                    with contextlib.suppress(orjson.JSONDecodeError):
                        self.status = orjson.loads(data[1:])
            elif msg.type in ends:
                break
        if self.status is None:
            return ExecOutcome(LOST, "the connection to the pod was lost", lost=True)
        code, message = exit_code_of(self.status)
        return ExecOutcome(code, message)

    async def bridge(self, source: ByteSource | None, sink: Sink,
                     resizes: AsyncIterator[tuple[int, int]] | None = None) -> ExecOutcome:
        """Copy `source` to stdin and resizes to channel 4 while output goes to `sink`."""
        tasks: list[asyncio.Future[Any]] = []
        if source is not None:
            tasks.append(asyncio.ensure_future(self._pump_in(source)))
        if resizes is not None:
            tasks.append(asyncio.ensure_future(self._pump_resizes(resizes)))
        try:
            return await self.receive(sink)
        finally:
            if self._stdin_rest is not None:
                tasks.append(self._stdin_rest)
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    async def _pump_in(self, source: ByteSource) -> None:
        hand_over = getattr(source, "hand_over", None)  # (LocalTerminal: see _send_typed)
        if hand_over is not None:
            hand_over(self._send_typed)
        try:
            while True:
                data = await source.read()
                self._stdin_busy = True
                if self._stdin_rest is not None:
                    try:
                        await self._stdin_rest
                    except (ConnectionResetError, aiohttp.ClientError, RuntimeError):
                        return
                    finally:
                        self._stdin_rest = None
                if not data:
                    with contextlib.suppress(Exception):
                        await self.close_stdin()
                    return
                try:
                    await self.write_stdin(data)
                except (ConnectionResetError, aiohttp.ClientError, RuntimeError):
                    return
                self._stdin_busy = False
        finally:
            if hand_over is not None:
                hand_over(None)

    def _send_typed(self, data: bytes) -> bool:
        """Send `data` to stdin from the source's own reader callback: True when it went out (or is
        going: the frame is written before a send first yields, to wait for flow control, whose rest
        runs as a task the pump waits for). Each key of a shell goes this way: its echo does not wait
        for the pump's task to be woken. False, and the source keeps `data` for `read`, while the
        pump sends (order kept), after a failed send (the pump sends again and sees the failure)."""
        rest = self._stdin_rest
        if self._stdin_busy or (rest is not None and (not rest.done() or rest.cancelled()
                                                      or rest.exception() is not None)):
            return False
        self._stdin_rest = None
        send = self.ws.send_bytes(bytes([STDIN]) + data)
        try:
            waits_for = send.send(None)
        except StopIteration:
            return True
        except (ConnectionResetError, aiohttp.ClientError, RuntimeError):
            return False  # (nothing was written)
        self._stdin_rest = asyncio.ensure_future(_step_on(send, waits_for))
        return True

    async def _pump_resizes(self, resizes: AsyncIterator[tuple[int, int]]) -> None:
        async for cols, rows in resizes:
            try:
                await self.resize(cols, rows)
            except (ConnectionResetError, aiohttp.ClientError, RuntimeError):
                return


async def _step_on(coro: Coroutine[Any, Any, Any], waits_for: Any) -> None:
    """The rest of `coro`, stepped once outside a task where it yielded `waits_for` (a future, or
    None for a bare yield): stepped on as a task would, each time what it waits for is done."""
    while True:
        try:
            if waits_for is None:
                await asyncio.sleep(0)
            else:
                await asyncio.wait((waits_for,))
        except asyncio.CancelledError:
            coro.close()
            raise
        try:
            waits_for = coro.send(None)
        except StopIteration:
            return


async def _handshake_problem(client: KubeClient, namespace: str, pod: str, container: str | None,
                             exc: aiohttp.WSServerHandshakeError) -> ExecError:
    """The upgrade was refused; a plain GET of the pod says why in the server's words."""
    status = exc.status
    try:
        raw = await client.get(api_paths.pod(namespace, pod))
    except ApiProblem as problem:
        return ExecError(problem.one_line(), problem.exit_code)
    except ConnectionProblem as problem:
        return ExecError(problem.message, problem.code)
    if status == 403:
        who = client.cfg.impersonate_user or client.cfg.user or "you"
        return ExecError(f'forbidden: {who} cannot create pods/exec in the namespace "{namespace}"',
                         ExitCode.FORBIDDEN)
    if status == 401:
        return ExecError("unauthorized: the API server rejected the credentials", ExitCode.UNAUTHORIZED)
    containers = [c.get("name") for c in (raw.get("spec") or {}).get("containers") or []]
    if container and container not in containers:
        return ExecError(f'container "{container}" is not in pod "{pod}" (containers: {", ".join(containers)})',
                         ExitCode.NOT_FOUND)
    phase = (raw.get("status") or {}).get("phase", "")
    if phase != "Running":
        return ExecError(f'pod "{pod}" is {phase or "not running"}; cannot exec into it', ExitCode.ERROR)
    return ExecError(f"the API server refused the exec upgrade ({status} {exc.message})", ExitCode.ERROR)
