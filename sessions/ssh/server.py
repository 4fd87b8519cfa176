"""The SSH server: public-key logins only, each key acting as its identity (`keys`); each session
runs a child `ranks` process as that identity (impersonation, so the cluster's RBAC decides), the
server's settings given to it out of band (`Server.settings`, read by `tui.cli.door`), never as
words after the user's:

- a shell request with a pty: the dashboard, on a pty of the client's size (window-change resizes
  it; the kernel sends the child SIGWINCH), in its own session and process group;
- an exec request of a read-only subcommand (`list -A -o json`): that command, stdout/stderr/exit
  status passed through, within the command limits (CPU, time, per user, a lower priority);
  `files [NAME]`: the user's own files (`user_files`, with `--user-files`);
- `ssh -L` to a rank's port of the user's session (`forwarding`); anything else is refused in one line:
  no pty, other commands, subsystems (sftp), other port/agent/X11 forwarding, session limits.

A client that goes away has its child's process group terminated (then killed), also when it went
while its child was being started. Time limits: a connection must log in within the login grace
(`login_grace`, 30 s); a logged-in connection without input from its client (keys, window changes,
new channels) for `idle_timeout` has its sessions ended with a message and is closed (off unless
set); a client that stops answering keepalives is dropped after 90 s; one that has offered
`MAX_AUTH_TRIES` keys that are not authorized is closed (each refused login is audited). At most
`MAX_UNAUTHENTICATED` connections may be logging in at once: past that, a new one takes the place
of the oldest that has not even begun to log in (a flood of silent connections cannot lock
clients out), else it is dropped. Nothing here blocks the event loop: the pty is read with
`add_reader`, children are asyncio subprocesses.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import shlex
import signal
import socket
import struct
import sys
import termios
import time
from collections.abc import Coroutine
from typing import Any

import asyncssh

from monitors.humanize import plural
from monitors.shared_view import ENV as SHARED_VIEW_ENV
from sessions.action_log import ENV as ACTION_FD_ENV
from sessions.errors import SessionError

from . import SERVER_SETTINGS_ENV, SSH_PORT_ENV, SSH_SESSION_ENV, USER_FILES_ENV, forwarding, user_files
from .audit import Audit
from .config import ServeConfig, pin_cluster, span
from .hub import Hub, start_hub
from .keys import Grant, Identity, KeyRing, load_keyring, signature
from .zygote_client import Child, Zygote, keep_template

COMMAND_NICE = 10  # a command's priority below the dashboards' (and the server's)
NO_PTY = "ranks: this server serves the dashboard; connect with a terminal (ssh -t)"
KEEPALIVE = 30
KILL_GRACE = 2.0
DRAIN_AFTER_EXIT = 2.0  # once a session's process ended: how long its last output may take to drain
MAX_UNAUTHENTICATED = 64  # connections still logging in at once (floods: see the module docstring)
MAX_AUTH_TRIES = 6  # keys a connection may offer that are not authorized; then it is closed (sshd's MaxAuthTries)
RELOAD_EVERY = 2.0  # seconds between looks at the authorized keys and the user map
# the child gets the pty as its controlling terminal (so shells from the dashboard get job control)
# (and is titled for `ps`: `ranks: USER PEER`; argv: TITLE ARGS...)
_CTTY = ("import fcntl, runpy, sys, termios, setproctitle; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
         "setproctitle.setproctitle(sys.argv[1]); sys.argv = ['ranks', *sys.argv[2:]]; "
         "runpy.run_module('tui.cli', run_name='__main__', alter_sys=True)")


class Server:
    """The shared state: the key ring, the audit log, the live sessions."""

    def __init__(self, cfg: ServeConfig, ring: KeyRing, audit: Audit) -> None:
        self.cfg, self.ring, self.audit = cfg, ring, audit
        self.sessions: set[Session] = set()
        self.pending: dict[Connection, None] = {}  # connections still logging in, oldest first
        self.idle_timeout = cfg.timeouts()[1]
        self.zygote: Zygote | None = None  # dashboards forked warm (tui.cli.zygote); None: fresh processes
        self.hub: Hub | None = None  # the one watch every dashboard is served from (None: --per-user-watch)
        self.port = cfg.port  # (the one listened on, once known)
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def unauthenticated(self) -> int:
        return len(self.pending)

    def background(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A task the server holds on to until it ends (the loop keeps only weak references)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def count(self, user: str, *, commands: bool = False) -> int:
        """`user`'s open sessions (`commands`: only those running a command)."""
        return sum(1 for s in self.sessions if s.conn_server.identity and s.conn_server.identity.name == user
                   and (not commands or s.command is not None))

    @staticmethod
    def child_argv(args: list[str]) -> list[str]:
        """A session's process: `ranks ARGS`, the user's words and nothing after them (the server's
        settings go out of band: `settings`, `child_env`)."""
        return [sys.executable, "-m", "tui.cli", *args]

    def settings(self, ident: Identity, *, command: bool) -> dict[str, Any]:
        """What the session's `ranks` runs with, whatever its command line says (`tui.cli.door`):
        the server's context, endpoint and timeout, the key's identity, read-only mode; for a
        command, its CPU limit and lower priority."""
        cfg = self.cfg
        out: dict[str, Any] = {
            "context": cfg.context, "request_timeout": cfg.request_timeout, "prometheus": cfg.prometheus,
            "as_user": ident.user, "as_groups": list(ident.groups) or None, "namespace": ident.namespace,
            "read_only": True if cfg.read_only else None}
        if command:
            out.update(cpu_seconds=cfg.command_cpu or None, nice=COMMAND_NICE)
        return {k: v for k, v in out.items() if v is not None}

    def child_env(self, term: str | None, settings: dict[str, Any] | None = None,
                  files: str | None = None, reached: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(
            ("SSH_", "KUBECONFIG", SERVER_SETTINGS_ENV, USER_FILES_ENV, SSH_PORT_ENV, forwarding.SSH_HOST_ENV))}
        env[SSH_PORT_ENV] = str(self.port)  # (with `reached`, the lines to paste on the user's machine)
        env.update(forwarding.host_env(reached))
        if files is not None:  # the user's own directory (`user_files`): where the dashboard saves
            env[USER_FILES_ENV] = files
        if self.cfg.kubeconfig_files:  # the server's, however it was given
            env["KUBECONFIG"] = os.pathsep.join(self.cfg.kubeconfig_files)
        env.update(self.cfg.extra_env)
        env.setdefault("LANG", "C.UTF-8")
        env[SSH_SESSION_ENV] = "1"  # the shell banner's hints are not for this machine
        if settings is not None:
            env[SERVER_SETTINGS_ENV] = json.dumps(settings)
        if term:
            env["TERM"] = term
        else:
            env.pop("TERM", None)
        return env


class Connection(asyncssh.SSHServer):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.identity: Identity | None = None
        self.grant: Grant | None = None
        self._candidate: Grant | None = None
        self.peer = "?"
        self.addr = ""
        self.conn: asyncssh.SSHServerConnection | None = None
        self.sessions: set[Session] = set()  # this connection's session channels
        self.began_auth = False
        self.keys_refused = 0
        self.last_input = 0.0  # (loop time) the client's last keys, window change or new channel
        self._idle_timer: asyncio.TimerHandle | None = None
        self._lost = False

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        addr = conn.get_extra_info("peername")
        self.peer = f"{addr[0]}:{addr[1]}" if addr else "?"
        self.addr = addr[0] if addr else ""
        pending = self.server.pending
        if len(pending) >= MAX_UNAUTHENTICATED:
            # a flood: the oldest connection that has not even begun to log in makes room (silent
            # connections cannot lock clients out); when every one of them is logging in, this goes
            stale = next((c for c in pending if not c.began_auth), None)
            if stale is None:
                conn.disconnect(asyncssh.DISC_TOO_MANY_CONNECTIONS, "too many connections logging in; try again")
                return
            stale._uncount()
            if stale.conn is not None:
                stale.conn.abort()
        pending[self] = None

    def _uncount(self) -> None:
        self.server.pending.pop(self, None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._uncount()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self.identity is not None:
            self.server.audit.log("logout", user=self.identity.name, peer=self.peer)
        elif self.keys_refused:
            self.server.audit.log("refused", user="?", peer=self.peer,
                                  what=f"login: {self.keys_refused} key{'s' if self.keys_refused > 1 else ''} "
                                       "not authorized")

    def begin_auth(self, username: str) -> bool:
        self.began_auth = True
        return True

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        grant = self.server.ring.lookup(key, self.addr, self.addr)  # (from= patterns: the address)
        self._candidate = grant  # the signed request comes last, right before auth_completed
        if grant is None:
            self.keys_refused += 1
            if self.keys_refused >= MAX_AUTH_TRIES and self.conn is not None:
                self.conn.disconnect(asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE, "too many authentication failures")
        return grant is not None

    def auth_completed(self) -> None:
        self._uncount()
        self.grant = self._candidate
        self.identity = self.grant.identity if self.grant is not None else None
        if self.identity is not None:
            self.server.audit.log("login", user=self.identity.name, peer=self.peer)
        self.touch()
        if self.server.idle_timeout > 0:
            self._arm_idle(self.server.idle_timeout)

    # -- idle connections ---------------------------------------------------------------------------
    def touch(self) -> None:
        """The client did something (keys, a window change, a new channel): not idle."""
        self.last_input = asyncio.get_running_loop().time()

    def _arm_idle(self, after: float) -> None:
        self._idle_timer = asyncio.get_running_loop().call_later(after, self._idle_check)

    def _idle_check(self) -> None:
        self._idle_timer = None
        if self._lost:
            return
        left = self.last_input + self.server.idle_timeout - asyncio.get_running_loop().time()
        if left > 0:
            self._arm_idle(left)
        else:
            self.server.background(self._close_idle())

    async def _close_idle(self) -> None:
        """Idle past the timeout: each session's process ends (its screen restored), the client is
        told why, then the connection closes."""
        idle = self.server.idle_timeout
        message = f"ranks: closed after {span(idle)} without input"
        self.server.audit.log("idle", user=self.identity.name if self.identity else "?", peer=self.peer,
                              what=f"{idle:g}s without input")
        await asyncio.gather(*(s.end(message) for s in list(self.sessions)), return_exceptions=True)
        if self.conn is not None and not self._lost:
            self.conn.disconnect(asyncssh.DISC_BY_APPLICATION, message)

    # -- forwarding: -L to a port of the user's own session (`forwarding`), the rest refused -----
    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> Any:
        self.touch()  # (a new channel is the client's input)
        return forwarding.requested(self.server, self.identity, self.peer, dest_host, dest_port, self.grant)

    def server_requested(self, listen_host: str, listen_port: int) -> bool:
        self._refused(f"remote forwarding of {listen_host}:{listen_port}")
        return False

    def unix_connection_requested(self, dest_path: str) -> bool:
        self._refused("unix socket forwarding")
        raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED, "forwarding is refused")

    def unix_server_requested(self, listen_path: str) -> bool:
        self._refused("remote unix socket forwarding")
        return False

    def session_requested(self) -> asyncssh.SSHServerSession[bytes]:
        self.touch()
        return Session(self.server, self)

    def _refused(self, what: str) -> None:
        self.server.audit.log("refused", user=self.identity.name if self.identity else "?", peer=self.peer, what=what)


class Session(asyncssh.SSHServerSession[bytes]):
    def __init__(self, server: Server, conn_server: Connection) -> None:
        self.server, self.conn_server = server, conn_server
        self.chan: asyncssh.SSHServerChannel[bytes] | None = None
        self.term: str | None = None
        self.size: tuple[int, int] = (80, 24)
        self.command: str | None = None
        self.proc: Child | None = None
        self.stdin: asyncio.StreamWriter | None = None  # a command on pipes: its stdin
        self.master: int | None = None
        self.task: asyncio.Task[None] | None = None
        self._pending = bytearray()
        self._audit_buf = bytearray()
        self._closed = False
        self._farewell: str | None = None  # said after the child is gone (SIGTERM: server shutting down)
        self._exit_status: int | None = None  # the client's exit status whatever the child's (a limit)
        self._time_limit: asyncio.TimerHandle | None = None
        self._writable = asyncio.Event()  # the channel takes more (asyncssh's flow control)
        self._writable.set()

    # -- requests ---------------------------------------------------------------------------------
    def connection_made(self, chan: asyncssh.SSHServerChannel[bytes]) -> None:
        self.chan = chan
        self.conn_server.sessions.add(self)
        self._audit_forwarding_requests(chan)

    def pty_requested(self, term_type: str, term_size: tuple[int, int, int, int], term_modes: Any) -> bool:
        self.term = term_type or "xterm"
        if term_size[0] and term_size[1]:
            self.size = (term_size[0], term_size[1])
        return True

    def shell_requested(self) -> bool:
        return True

    def exec_requested(self, command: str) -> bool:
        self.command = command
        return True

    def subsystem_requested(self, subsystem: str) -> bool:
        self.conn_server._refused(f"subsystem {subsystem}")
        return False

    def _audit_forwarding_requests(self, chan: asyncssh.SSHServerChannel[bytes]) -> None:
        """asyncssh refuses agent and X11 forwarding itself (`agent_forwarding=False`,
        `x11_forwarding=False`) without asking the session: its handlers of those channel requests
        (looked up on the channel by name) are wrapped so that each refusal is audited too."""
        for request, what in (("auth_agent_req_at_openssh_dot_com", "agent forwarding"),
                              ("x11_req", "X11 forwarding")):
            name = f"_process_{request}_request"
            handler = getattr(chan, name, None)
            if handler is None:
                continue

            def audited(packet: Any, handler: Any = handler, what: str = what) -> Any:
                self.conn_server._refused(what)
                return handler(packet)

            setattr(chan, name, audited)

    def session_started(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    def data_received(self, data: bytes, datatype: Any) -> None:
        self.conn_server.touch()
        if self.master is not None:
            self._pending += data
            self._flush()
        elif self.stdin is not None:  # (a command on pipes)
            self.stdin.write(data)

    def eof_received(self) -> bool:
        if self.stdin is not None:
            self.stdin.close()
        return True

    def terminal_size_changed(self, width: int, height: int, pixwidth: int, pixheight: int) -> None:
        self.conn_server.touch()
        if width and height:
            self.size = (width, height)
            if self.master is not None:
                self._set_size()
                if self.proc is not None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(self.proc.pid, signal.SIGWINCH)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._stop_timer()
        self.server.sessions.discard(self)
        self.conn_server.sessions.discard(self)
        if self.proc is not None and self.proc.returncode is None:
            self.server.background(self.terminate())
        # (a process still being started is ended as soon as it is: `_started`)

    def _started(self, proc: Child) -> Child:
        """`proc` is the session's process now; the client may have gone while it was started."""
        self.proc = proc
        if self._closed:
            self.server.background(self.terminate())
        return proc

    # -- running ------------------------------------------------------------------------------------
    def _refuse(self, message: str, what: str, status: int = 1) -> None:
        self.conn_server._refused(what)
        assert self.chan is not None
        nl = "\r\n" if self.term else "\n"
        self.chan.write_stderr((message + nl).encode())
        self.chan.exit(status)

    async def _run(self) -> None:
        ident = self.conn_server.identity
        assert self.chan is not None and ident is not None
        if self._closed:  # (the client went before its request was looked at)
            return
        cfg = self.server.cfg
        if len(self.server.sessions) >= cfg.max_sessions:
            return self._refuse(f"ranks: the server is full ({cfg.max_sessions} sessions); try again later",
                                "session (server full)")
        if self.server.count(ident.name) >= cfg.max_sessions_per_user:
            return self._refuse(f"ranks: {ident.name} has {cfg.max_sessions_per_user} sessions open already; "
                                "close one first", "session (per-user limit)")
        grant = self.conn_server.grant
        if grant is not None and grant.command is not None:  # command="...": that, whatever was asked
            self.command = grant.command
        if self.command is not None:
            try:
                args = shlex.split(self.command)
            except ValueError:
                args = []
            served = (*cfg.commands, "files") if cfg.user_files else cfg.commands
            if not args or args[0] not in served:
                return self._refuse("ranks: error: only these read-only commands run over ssh: "
                                    + ", ".join(sorted(served)), f"exec {self.command}", 2)
            cap = cfg.max_commands_per_user
            if cap and self.server.count(ident.name, commands=True) >= cap:
                return self._refuse(f"ranks: {ident.name} has {plural(cap, 'command')} running already; wait for "
                                    "one to end", "exec (per-user command limit)")
            self.server.sessions.add(self)
            self.server.audit.log("exec", user=ident.name, peer=self.conn_server.peer, what=self.command)
            if args[0] == "files":  # the user's own files (`--user-files`), served by the server itself
                return await self._files(ident, args[1:])
            if cfg.command_time:
                self._time_limit = asyncio.get_running_loop().call_later(cfg.command_time, self._time_is_up)
            # the user's words as they are: the server's settings go out of band (a flag of the
            # server's among them is refused by the command itself, exactly as it parses it)
            argv, settings = self.server.child_argv(args), self.server.settings(ident, command=True)
            if self.term and (grant is None or grant.pty):  # ssh -t: on a pty, as OpenSSH's sshd does
                return await self._on_pty(argv, settings)
            return await self._exec(argv, settings)
        if self.term is None:
            return self._refuse(NO_PTY, "session without a pty")
        if grant is not None and not grant.pty:
            return self._refuse("ranks: this key may not open the dashboard (no-pty); it runs read-only commands",
                                "session (key has no-pty)")
        self.server.sessions.add(self)
        self.server.audit.log("dashboard", user=ident.name, peer=self.conn_server.peer)
        files = None
        if cfg.user_files:
            try:
                files = str(await asyncio.to_thread(user_files.user_dir, cfg.user_files, ident.user))
            except SessionError as exc:  # (its saves are refused, as without --user-files)
                print(f"ranks: warning: {ident.name}: {exc.message}", file=sys.stderr, flush=True)
        await self._on_pty(self.server.child_argv([]), self.server.settings(ident, command=False), files,
                           shared=self.server.hub.session_end(ident.user, ident.groups) if self.server.hub else None)

    async def _exec(self, argv: list[str], settings: dict[str, Any]) -> None:
        assert self.chan is not None
        env = self.server.child_env(None, settings, reached=forwarding.reached_as(self.conn_server.conn))
        env["NO_COLOR"] = "1"
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=env, start_new_session=True)
        self._started(proc)
        assert proc.stdout is not None and proc.stderr is not None
        self.stdin = proc.stdin
        chan = self.chan
        assert chan is not None  # (connection_made came first)

        async def pump(reader: asyncio.StreamReader, stderr: bool) -> None:
            while chunk := await reader.read(65536):
                if self._closed:
                    continue
                if stderr:
                    chan.write_stderr(chunk)
                else:
                    chan.write(chunk)

        await asyncio.gather(pump(proc.stdout, False), pump(proc.stderr, True))
        rc = await proc.wait()
        self._finish(rc)

    async def _files(self, ident: Identity, args: list[str]) -> None:
        """`ssh HOST files`: the user's own files (name, size, time), oldest first; `ssh HOST files
        NAME`: that file's bytes on stdout. Read by the server (`user_files`: no path, no link),
        never by a process the user's words start."""
        assert self.chan is not None and self.server.cfg.user_files is not None
        nl = "\r\n" if self.term else "\n"
        try:
            if len(args) > 1 or (args and args[0].startswith("-")):
                raise SessionError("usage: ssh HOST files [NAME] (the list of your files, or one of them)", 2)
            where = await asyncio.to_thread(user_files.user_dir, self.server.cfg.user_files, ident.user)
            if not args:
                for name, size, mtime in await asyncio.to_thread(user_files.listing, where):
                    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(mtime))
                    self.chan.write(f"{name}\t{size}\t{stamp}{nl}".encode())
                return self._finish(0)
            fd = await asyncio.to_thread(user_files.open_file, where, args[0])
        except SessionError as exc:
            self.chan.write_stderr(f"ranks: error: {exc.message}{nl}".encode())
            return self._finish(exc.code)
        try:
            while chunk := await asyncio.to_thread(os.read, fd, 1 << 20):
                if self._closed:
                    break
                self.chan.write(chunk)
                await self._writable.wait()
        except OSError as exc:
            self.chan.write_stderr(f"ranks: error: cannot read {args[0]}: {exc.strerror or exc}{nl}".encode())
            return self._finish(1)
        finally:
            os.close(fd)
        self._finish(0)

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    def _finish(self, rc: int) -> None:
        self.server.sessions.discard(self)
        self._stop_timer()
        if not self._closed and self.chan is not None:
            if self._farewell:
                nl = "\r\n" if self.term else "\n"
                self.chan.write_stderr(f"{nl}{self._farewell}{nl}".encode())
            if self._exit_status is not None:
                rc = self._exit_status
            self.chan.exit(rc if rc >= 0 else 128 - rc)

    def _stop_timer(self) -> None:
        if self._time_limit is not None:
            self._time_limit.cancel()
            self._time_limit = None

    def _time_is_up(self) -> None:
        """The command ran for the server's limit (`--command-time-limit`): ended, said, audited."""
        self._time_limit = None
        if self.proc is None or self.proc.returncode is not None or self._closed:
            return
        limit = span(self.server.cfg.command_time)
        ident = self.conn_server.identity
        self.server.audit.log("limit", user=ident.name if ident else "?", peer=self.conn_server.peer,
                              what=f"stopped after {limit}: {self.command}")
        self._exit_status = 1
        self.server.background(self.terminate(f"ranks: error: stopped after {limit}: the server's limit for one "
                                              "command (ranks serve --command-time-limit)"))

    def _set_size(self) -> None:
        cols, rows = self.size
        if self.master is not None:
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def _audit_pipe(self) -> tuple[int, int]:
        """A pipe whose write end the dashboard gets (`RANKS_AUDIT_FD`): each line it writes there is
        a mutating action, logged with this session's user and address (`sessions.action_log`)."""
        loop = asyncio.get_running_loop()
        rd, wr = os.pipe()
        os.set_blocking(rd, False)

        def readable() -> None:
            data = _read_some(rd, 4096)
            if data is None:
                return
            if not data:
                loop.remove_reader(rd)
            self._audit_feed(data)

        loop.add_reader(rd, readable)
        return rd, wr

    def _audit_feed(self, data: bytes) -> None:
        self._audit_buf += data
        while (nl := self._audit_buf.find(b"\n")) >= 0:
            line = bytes(self._audit_buf[:nl]).decode("utf-8", "replace")
            del self._audit_buf[:nl + 1]
            ident = self.conn_server.identity
            self.server.audit.log("action", user=ident.name if ident else "?", peer=self.conn_server.peer, what=line)
        del self._audit_buf[:-4096]  # (a line that never ends stays bounded)

    async def _on_pty(self, argv: list[str], settings: dict[str, Any], files: str | None = None,
                      shared: socket.socket | None = None) -> None:
        """`argv` on a pty of the client's size, made its controlling terminal; its bytes both ways
        (`shared`: its end of the door's one watch, `hub`)."""
        loop = asyncio.get_running_loop()
        master, slave = os.openpty()
        self.master = master
        os.set_blocking(master, False)
        self._set_size()
        audit_rd, audit_wr = self._audit_pipe()
        env = self.server.child_env(self.term, settings, files, forwarding.reached_as(self.conn_server.conn))
        env[ACTION_FD_ENV] = str(audit_wr)
        if shared is not None:
            env[SHARED_VIEW_ENV] = str(shared.fileno())
        try:
            proc = self._started(await self._spawn_on(slave, audit_wr, argv, env, shared))
        except BaseException:  # (nothing of the session is kept open)
            loop.remove_reader(audit_rd)
            os.close(audit_rd)
            self.master = None
            loop.remove_writer(master)
            os.close(master)
            raise
        finally:
            os.close(slave)
            os.close(audit_wr)
            if shared is not None:
                shared.close()
        done = loop.create_future()

        def readable() -> None:
            data = _read_some(master, 65536)
            if data is None:
                return
            if not data:
                loop.remove_reader(master)
                if not done.done():
                    done.set_result(None)
                return
            if not self._closed and self.chan is not None:
                self.chan.write(data)

        loop.add_reader(master, readable)
        exited = asyncio.ensure_future(proc.wait())
        try:
            await asyncio.wait({done, exited}, return_when=asyncio.FIRST_COMPLETED)
            if not done.done():  # its last output drains, unless something it left holds the terminal open
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(done), DRAIN_AFTER_EXIT)
            rc = await exited
        finally:
            exited.cancel()
            loop.remove_reader(master)
            loop.remove_writer(master)
            self.master = None
            os.close(master)
            with contextlib.suppress(OSError):  # the last actions, written just before the end
                while data := os.read(audit_rd, 65536):
                    self._audit_feed(data)
            loop.remove_reader(audit_rd)
            os.close(audit_rd)
        self._finish(rc)

    async def _spawn_on(self, tty: int, audit_fd: int, argv: list[str], env: dict[str, str],
                        shared: socket.socket | None = None) -> Child:
        """The session's process on the terminal `tty`: forked from the warm template when there is
        one (`argv` is `python -m tui.cli ARGS`), else a fresh process."""
        zygote = self.server.zygote
        ident = self.conn_server.identity
        title = f"ranks: {ident.name if ident else '?'} {self.conn_server.peer}"
        assert argv[1:3] == ["-m", "tui.cli"]
        if zygote is not None and zygote.alive:
            try:
                return await zygote.spawn(argv[3:], env, tty, audit_fd, title, shared.fileno() if shared else None)
            except OSError:
                pass  # (it died: a fresh process, same behaviour)
        return await asyncio.create_subprocess_exec(
            sys.executable, "-c", _CTTY, title, *argv[3:], stdin=tty, stdout=tty, stderr=tty,
            env=env, start_new_session=True, pass_fds=(audit_fd, *((shared.fileno(),) if shared else ())))

    def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        master = self.master
        if master is None:
            return
        try:
            n = os.write(master, bytes(self._pending[:65536]))
            del self._pending[:n]
        except BlockingIOError:
            pass
        except OSError:
            self._pending.clear()
        if self._pending:
            loop.add_writer(master, self._flush)
        else:
            loop.remove_writer(master)

    async def end(self, message: str) -> None:
        """End the session: its process (as `terminate`), then its exit status and `message`."""
        await self.terminate(message)
        if self.task is not None and not self.task.done():
            with contextlib.suppress(TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(self.task), DRAIN_AFTER_EXIT + 1)

    async def terminate(self, message: str | None = None) -> None:
        """End the child's process group: SIGHUP and SIGTERM, SIGKILL after a grace; `message` is
        told to the client once the child is gone (its screen restored)."""
        self._farewell = message
        proc = self.proc
        if proc is None or proc.returncode is not None:
            if message and not self._closed and self.chan is not None:
                self._finish(1)
            return
        for sig in (signal.SIGHUP, signal.SIGTERM):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
        try:
            await asyncio.wait_for(proc.wait(), KILL_GRACE)
        except TimeoutError:
            pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # whatever the group still holds
        await proc.wait()


def _read_some(fd: int, n: int) -> bytes | None:
    """What a non-blocking fd has: None when nothing yet, b"" at its end (or once it failed)."""
    try:
        return os.read(fd, n)
    except BlockingIOError:
        return None
    except OSError:
        return b""


async def _serve(cfg: ServeConfig, ready: Any) -> int:
    seen = await asyncio.to_thread(signature, cfg.authorized_keys, cfg.users)  # (before reading: no change missed)
    ring = await asyncio.to_thread(load_keyring, cfg.authorized_keys, cfg.users, cfg.as_user)
    try:
        host_key = asyncssh.read_private_key(cfg.host_key)
    except (OSError, asyncssh.KeyImportError) as exc:
        raise SessionError(f"cannot read the host key {cfg.host_key}: {getattr(exc, 'strerror', None) or exc}",
                           2) from None
    login_grace, _ = cfg.timeouts()
    if cfg.user_files:
        await asyncio.to_thread(user_files.check_base, cfg.user_files)
    await asyncio.to_thread(pin_cluster, cfg)  # (an exec credential plugin may run)
    audit = Audit(cfg.audit_log)
    for w in ring.warnings:
        print(f"ranks: warning: {w}", file=sys.stderr)
    server = Server(cfg, ring, audit)
    if not cfg.per_user_watch:
        try:
            server.hub = await start_hub(cfg.kubeconfig, cfg.context)  # (as `pin_cluster` read them)
        except SessionError:
            audit.close()
            raise
    try:
        acceptor = await asyncssh.create_server(
            lambda: Connection(server), cfg.host, cfg.port, server_host_keys=[host_key],
            login_timeout=login_grace, keepalive_interval=KEEPALIVE, keepalive_count_max=3,
            password_auth=False, kbdint_auth=False, gss_host=None, agent_forwarding=False,
            x11_forwarding=False, allow_scp=False, line_editor=False, encoding=None)
    except OSError as exc:
        audit.close()
        if server.hub is not None:
            await server.hub.stop()
        raise SessionError(f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror or exc}", 1) from None
    port = server.port = acceptor.sockets[0].getsockname()[1]
    template: asyncio.Task[None] | None = None
    if os.environ.get("RANKS_SSH_TEMPLATE", "1") != "0":  # (0: every session a fresh process)
        started = asyncio.get_running_loop().create_future()
        template = asyncio.get_running_loop().create_task(keep_template(server.child_env, started, server))
        await started
    reloader = asyncio.get_running_loop().create_task(_reload(server, seen))
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[int] = loop.create_future()

    def stopping(sig: int) -> None:
        if not stop.done():
            stop.set_result(sig)

    for sig in (signal.SIGINT, signal.SIGTERM):  # (before `ready`: a SIGTERM right after it is heard)
        loop.add_signal_handler(sig, stopping, sig)
    ready(f"{cfg.host}:{port}")
    try:
        await stop
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        reloader.cancel()
        if template is not None:
            template.cancel()
        acceptor.close()
        await asyncio.gather(*(s.terminate("ranks: server shutting down") for s in list(server.sessions)),
                             return_exceptions=True)
        await asyncio.sleep(0.1)  # the exit statuses go out before the connections close
        if server.zygote is not None:
            await server.zygote.close()
        if server.hub is not None:
            await server.hub.stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(acceptor.wait_closed(), 5)
        audit.close()
    return 0


async def _reload(server: Server, last: tuple[object, ...]) -> None:
    """Re-read the authorized keys and the user map when they change: new logins use the new ring,
    open sessions are kept. A broken file keeps the last good ring (one warning)."""
    cfg = server.cfg
    while True:
        await asyncio.sleep(RELOAD_EVERY)
        now = await asyncio.to_thread(signature, cfg.authorized_keys, cfg.users)
        if now == last:
            continue
        last = now
        try:
            server.ring = await asyncio.to_thread(load_keyring, cfg.authorized_keys, cfg.users, cfg.as_user)
        except (SessionError, OSError, ValueError) as exc:
            why = exc.message if isinstance(exc, SessionError) else str(exc)
            print(f"ranks: warning: keeping the previous keys: {why}", file=sys.stderr, flush=True)
            continue
        for w in server.ring.warnings:
            print(f"ranks: warning: {w}", file=sys.stderr, flush=True)
        server.audit.log("reload", user="-", peer="-", what=f"{len(server.ring.identities)} keys")


def serve(cfg: ServeConfig, ready: Any) -> int:
    """Run the server until SIGINT/SIGTERM (exit 0); `ready(HOST:PORT)` once it listens.
    SessionError (one line, its code) when it cannot start."""
    return asyncio.run(_serve(cfg, ready))
