"""The server's side of the dashboard template (`python -m tui.cli.zygote`, started by argv: this
room never imports the UI): dashboards forked from a process that has imported everything once,
so a session's first frame does not wait for imports. Each child looks to the server like an
`asyncio.subprocess.Process`: `pid`, `returncode`, `await wait()`.

When the template cannot start, or dies, sessions are started as fresh processes instead (slower
first frame, same behaviour) until the server has started a new one; the dead template's children
live on (watched through pidfds), their exit statuses unknown and counted as 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
from collections.abc import Callable
from typing import Any, Protocol

READY_WITHIN = 60.0
SPAWN_WITHIN = 10.0


class Child(Protocol):
    """What the server needs of a session's process (an `asyncio.subprocess.Process` is one)."""

    pid: int

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...


class ZygoteChild:
    def __init__(self, pid: int, exited: asyncio.Future[int]) -> None:
        self.pid = pid
        self._exited = exited

    @property
    def returncode(self) -> int | None:
        return self._exited.result() if self._exited.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)


class Zygote:
    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self.alive = False
        self._done = False
        self._ready: asyncio.Future[bool] | None = None
        self._spawning: dict[int, asyncio.Future[int]] = {}
        self._exits: dict[int, asyncio.Future[int]] = {}
        self._next = 0

    async def start(self, env: dict[str, str], cwd: str | None = None) -> bool:
        """Start the template and wait until it has imported the dashboard; False if it could not."""
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tui.cli.zygote", str(theirs.fileno()), pass_fds=(theirs.fileno(),),
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, env=env, cwd=cwd,
                start_new_session=True)
        except OSError:
            ours.close()
            return False
        finally:
            theirs.close()
        ours.setblocking(False)
        self.sock = ours
        self._ready = loop.create_future()
        loop.add_reader(ours.fileno(), self._readable)
        try:
            self.alive = await asyncio.wait_for(asyncio.shield(self._ready), READY_WITHIN)
        except TimeoutError:
            self.alive = False
        if not self.alive:
            await self.close()
        return self.alive

    def _readable(self) -> None:
        assert self.sock is not None
        while True:
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._gone()
                return
            with contextlib.suppress(ValueError, TypeError, KeyError):
                self._message(json.loads(data))

    def _message(self, msg: dict[str, Any]) -> None:
        if msg.get("ready") and self._ready is not None and not self._ready.done():
            self._ready.set_result(True)
        elif "exit" in msg:
            fut = self._exit_of(int(msg["pid"]))
            if not fut.done():
                fut.set_result(int(msg["exit"]))
        elif "id" in msg:
            waiter = self._spawning.pop(msg["id"], None) if msg["id"] is not None else None
            if waiter is not None and not waiter.done():
                if "pid" in msg:
                    waiter.set_result(int(msg["pid"]))
                else:
                    waiter.set_exception(OSError(str(msg.get("error", "the template refused"))))

    def _exit_of(self, pid: int) -> asyncio.Future[int]:
        fut = self._exits.get(pid)
        if fut is None:
            fut = self._exits[pid] = asyncio.get_running_loop().create_future()
        return fut

    def _gone(self) -> None:
        """The template died (or is closing): nothing more will be heard of its children."""
        if self._done:
            return
        self._done = True
        self.alive = False
        if self.sock is not None:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self.sock.fileno())
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(False)
        for waiter in self._spawning.values():
            if not waiter.done():
                waiter.set_exception(OSError("the dashboard template is gone"))
        self._spawning.clear()
        loop = asyncio.get_running_loop()
        for pid, fut in self._exits.items():  # its children live on (reparented): watch them ourselves
            if fut.done():
                continue
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:  # (gone already)
                fut.set_result(1)
                continue

            def ended(pidfd: int = pidfd, fut: asyncio.Future[int] = fut) -> None:
                loop.remove_reader(pidfd)
                os.close(pidfd)
                if not fut.done():
                    fut.set_result(1)  # (how it ended went with the template)

            loop.add_reader(pidfd, ended)

    async def spawn(self, args: list[str], env: dict[str, str], tty: int, audit_fd: int | None,
                    title: str, shared_fd: int | None = None) -> ZygoteChild:
        """`ranks ARGS` forked from the template on the terminal `tty` (its controlling terminal),
        given the audit pipe and its end of the door's one watch (`shared_fd`); OSError when the
        template cannot (the caller starts a fresh process instead)."""
        if not self.alive or self.sock is None:
            raise OSError("no dashboard template")
        self._next += 1
        rid = self._next
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._spawning[rid] = waiter
        fds = [tty] + ([audit_fd] if audit_fd is not None else []) + ([shared_fd] if shared_fd is not None else [])
        msg = json.dumps({"id": rid, "args": args, "env": env, "audit": audit_fd is not None,
                          "shared": shared_fd is not None, "title": title}).encode()
        try:
            socket.send_fds(self.sock, [msg], fds)
        except OSError:
            self._spawning.pop(rid, None)
            raise
        try:
            pid = await asyncio.wait_for(waiter, SPAWN_WITHIN)
        except TimeoutError:
            self._spawning.pop(rid, None)
            raise OSError("the dashboard template did not answer") from None
        return ZygoteChild(pid, self._exit_of(pid))

    async def close(self) -> None:
        self._gone()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None and self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()



TEMPLATE_RETRY = 2.0  # seconds before the dashboard template is started again after it died


class HasZygote(Protocol):
    zygote: Zygote | None


async def keep_template(env: Callable[[str | None], dict[str, str]], started: asyncio.Future[None],
                        server: HasZygote) -> None:
    """The warm dashboard template (`server.zygote`), started again (after a pause) whenever it
    dies; meanwhile sessions start as fresh processes. `started` is set after the first attempt."""
    warned = False
    while True:
        zygote = Zygote()
        ok = await zygote.start(env(None))
        if not started.done():
            started.set_result(None)
        if ok:
            server.zygote = zygote
            warned = False
            assert zygote.proc is not None
            await zygote.proc.wait()
            server.zygote = None
            await zygote.close()
        elif not warned:
            warned = True
            print("ranks: warning: no warm dashboard template; sessions start as fresh processes (slower)",
                  file=sys.stderr, flush=True)
        await asyncio.sleep(TEMPLATE_RETRY)
