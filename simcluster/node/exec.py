"""`pods/exec` over WebSocket: commands run as local processes in a pod's runtime (see kubelet).

Component `exec` (`SimCluster(components=("kubelet", "exec"))`): registers the `pods/exec`
subresource. A request is checked as the API server does (pod, container, node), then as the
kubelet does (pod known, container running), upgraded to a WebSocket with one of the
remote-command subprotocols (`simcluster.exec_channels`), and the command is started:

- with `tty=true` in a new pseudo-terminal that becomes the controlling terminal of a new session
  (stderr merged into stdout, resize messages applied with TIOCSWINSZ, the first one before the
  command starts when it arrives promptly); otherwise with pipes, stdin only if requested;
- with the container's environment, in its working directory (`/workspace` unless the container
  sets `workingDir`) and, where the pod has them, in the pod's mount and UTS namespaces (`podns`:
  nsenter execs the command in place), in its own session and process group, registered with the
  pod runtime for cleanup.

The exit status goes on the error channel as a `Status`, then the socket is closed normally. If
the pod is deleted or the container stops, the session's processes are killed (the command then
reports 128 + the signal, e.g. 137, as a container runtime does) and the socket closed. When the client goes
away, the session's processes are killed. SPDY is not served: a SPDY upgrade gets a 400 Status.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import secrets
import signal
import stat
import struct
import subprocess
import termios
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from ..apiserver.errors import ApiError, not_found
from ..apiserver.store import Event
from . import exec_channels as chan
from .podnet import joiner
from .procfs import pid_exists, session_members
from .reaper import pdeathsig_preexec

if TYPE_CHECKING:
    from ..apiserver.server import Ctx
    from ..cluster import SimCluster
    from .podruntime import PodRuntime

log = logging.getLogger("simcluster.exec")

POD_KEY = ("", "pods")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
READ_CHUNK = 32 * 1024
FIRST_RESIZE_WAIT = 0.25  # how long a tty session waits for the client's first size before starting
DRAIN_AFTER_EXIT = 1.0  # how long output may keep flowing after the command exits
WATCH_INTERVAL = 0.5  # how often a session checks that its container still runs
CLOSE_TIMEOUT = 5.0  # how long to wait for the client's close frame


def install(sim: SimCluster) -> ExecService:
    svc = ExecService(sim)
    sim.server.subresources["pods/exec"] = svc.handle
    sim.store.listen(svc.on_event)
    sim.on_stop(svc.stop)
    sim.exec_service = svc
    from . import portforward  # the kubelet's streaming server serves port-forward beside exec

    portforward.install(sim)
    return svc


class KubeletError(Exception):
    """The kubelet refused the stream (before any process started)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class StartError(Exception):
    """The runtime could not start the command (runc's wording in `detail`)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ExecService:
    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.sessions: set[ExecSession] = set()
        self.started = 0  # sessions that got as far as starting a process
        self._stopping = False

    # -- request -------------------------------------------------------------------------------
    async def handle(self, ctx: Ctx) -> web.StreamResponse:
        request = ctx.request
        ns, name = ctx.namespace or "default", ctx.name or ""
        st = self.sim.store.find(POD_KEY, ns, name)
        if st is None:
            raise not_found("pods", "", name)
        pod = st.obj
        opts = chan.ExecOptions.from_query(ctx.query)
        container, err = chan.resolve_container(pod, opts.container)
        if err is not None or container is None:
            raise ApiError(400, err or "container not found")
        if not (pod.get("spec") or {}).get("nodeName"):
            raise ApiError(400, f"pod {name} does not have a host assigned")
        upgrade = request.headers.get("Upgrade", "").lower()
        if upgrade != "websocket":
            if upgrade.startswith("spdy"):
                raise ApiError(
                    400,
                    "unable to upgrade connection: simcluster serves pods/exec over WebSocket only "
                    f"({chan.V5}, {chan.V4}); {request.headers.get('Upgrade')} is not supported",
                )
            raise ApiError(400, "Upgrade request required")
        try:
            proto = chan.negotiate(chan.offered_protocols(request.headers.getall("Sec-WebSocket-Protocol", [])))
        except chan.ProtocolError as exc:
            raise ApiError(400, str(exc)) from None
        if not opts.stdin and not opts.stdout and not opts.stderr:
            raise ApiError(400, "you must specify at least 1 of stdin, stdout, stderr")
        if not opts.command:
            raise ApiError(400, "you must specify at least one command for the container")
        if self._stopping:
            raise ApiError(503, "the server is shutting down")
        try:
            runtime = self._runtime(ns, name, container)
        except KubeletError as exc:
            if not proto.translated:
                # The runtime's own WebSocket server answers the upgrade with the error.
                raise ApiError(exc.code, exc.message) from None
            runtime = None
            kubelet_error: KubeletError | None = exc
        else:
            kubelet_error = None

        ws = web.WebSocketResponse(
            protocols=(proto.name,) if proto.name else (),
            compress=False,
            autoping=True,
            timeout=CLOSE_TIMEOUT,
            max_msg_size=16 * 1024 * 1024,
            decode_text=False,
        )
        await ws.prepare(request)
        session = ExecSession(self, ws, proto, opts, ns, name, pod["metadata"].get("uid", ""), container, runtime)
        if kubelet_error is not None:
            # Behind the v5 translator the socket is already upgraded when the kubelet refuses.
            await session.send(opts.first_channel, b"")
            await session.finish(chan.internal_error(f"unable to upgrade connection: {kubelet_error.message}"))
            return ws
        self.sessions.add(session)
        try:
            await session.run()
        finally:
            self.sessions.discard(session)
        return ws

    def _runtime(self, ns: str, name: str, container: str) -> PodRuntime:
        """The pod's runtime with `container` running, or the kubelet's refusal."""
        kubelet = self.sim.kubelet
        runtime = kubelet.runtime(ns, name) if kubelet is not None else None
        if runtime is None:
            raise KubeletError(404, "pod does not exist")
        if not runtime.is_running(container):
            raise KubeletError(500, f'container not found ("{container}")')
        return runtime

    def still_running(self, session: ExecSession) -> str | None:
        """None while the session's pod and container live on, else why they do not."""
        st = self.sim.store.find(POD_KEY, session.namespace, session.pod)
        if st is None or st.obj["metadata"].get("uid", "") != session.uid:
            return "pod deleted"
        try:
            self._runtime(session.namespace, session.pod, session.container)
        except KubeletError as exc:
            return exc.message
        except Exception as exc:  # a runtime bug must not keep processes alive
            return f"runtime error: {exc}"
        return None

    # -- pod events ----------------------------------------------------------------------------
    def on_event(self, ev: Event) -> None:
        if ev.tkey != POD_KEY or not self.sessions:
            return
        meta = ev.obj.get("metadata", {})
        key = (meta.get("namespace", ""), meta.get("name", ""))
        for session in list(self.sessions):
            if (session.namespace, session.pod) != key:
                continue
            if ev.type == "DELETED":
                session.kill("pod deleted")
            else:
                # Check once the kubelet has finished reacting to the change.
                asyncio.get_running_loop().call_soon(session.check)

    async def stop(self) -> None:
        self._stopping = True
        sessions = list(self.sessions)
        for session in sessions:
            session.kill("cluster stopping")
        if sessions:
            await asyncio.wait([s.done for s in sessions], timeout=3.0)


class ExecSession:
    """One exec stream: a process, its I/O pumps, the WebSocket reader and a watchdog."""

    def __init__(
        self,
        service: ExecService,
        ws: web.WebSocketResponse,
        proto: chan.Protocol,
        opts: chan.ExecOptions,
        namespace: str,
        pod: str,
        uid: str,
        container: str,
        runtime: PodRuntime | None,
    ) -> None:
        self.service = service
        self.ws = ws
        self.proto = proto
        self.opts = opts
        self.namespace = namespace
        self.pod = pod
        self.uid = uid
        self.container = container
        self.runtime = runtime
        self.loop = asyncio.get_running_loop()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.master: int | None = None  # pty master (tty sessions)
        self.stdin_fd: int | None = None  # where stdin frames are written (pipe or pty master)
        self.stdin_closed = False
        self.last_stdin_byte = b"\n"
        self.resize = chan.ResizeParser()
        self.size: tuple[int, int] | None = None
        self.pending_stdin: list[bytes] = []
        self.stdin_eof_pending = False  # the client closed stdin before the command started
        self.client_gone = False
        self.killed: str | None = None
        self.done: asyncio.Future[None] = self.loop.create_future()
        self._exit: asyncio.Future[int | None] = self.loop.create_future()
        self._reaper: asyncio.Task[None] | None = None
        self._closer: asyncio.Future[bool] | None = None

    @property
    def rt(self) -> PodRuntime:
        """The pod's runtime (a session the kubelet refused has none, and never runs)."""
        if self.runtime is None:
            raise RuntimeError("the exec session has no pod runtime")
        return self.runtime

    # -- lifecycle -----------------------------------------------------------------------------
    async def run(self) -> None:
        reader: asyncio.Task[None] | None = None
        watchdog: asyncio.Task[None] | None = None
        pumps: list[asyncio.Task[None]] = []
        try:
            await self.send(self.opts.first_channel, b"")
            if self.opts.tty:
                await self._await_first_size()
            if self.client_gone:
                return
            try:
                out_fds = self._spawn()
            except StartError as exc:
                await self.finish(chan.runtime_error(self._start_failure(exc.detail), self.proto))
                return
            except Exception as exc:  # e.g. the runtime could not give the environment
                log.exception("exec %s/%s: cannot start %s", self.namespace, self.pod, self.opts.command)
                await self.finish(chan.runtime_error(f"error executing command in container: {exc}", self.proto))
                return
            self.service.started += 1
            pumps = [asyncio.ensure_future(self._pump(fd, ch)) for fd, ch in out_fds]
            # What the client sent while the command was starting goes first, in order.
            pending, self.pending_stdin = self.pending_stdin, []
            for data in pending:
                await self._write_stdin(data)
            if self.stdin_eof_pending:
                self._close_stdin()
            reader = asyncio.ensure_future(self._read_client())
            watchdog = asyncio.ensure_future(self._watch())
            code = await self._wait_exit()
            if pumps:
                _, still = await asyncio.wait(pumps, timeout=DRAIN_AFTER_EXIT)
                if still:  # something left in the session holds the output open
                    self._kill_session()
                    await asyncio.wait(still, timeout=1.0)
            if self.killed or self.client_gone:
                self._kill_session()
            if reader is not None:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
            if self.client_gone:
                return
            if code is None:
                status = chan.internal_error("error executing command in container: lost track of the process")
            elif code == 0:
                status = chan.success_status()
            else:
                status = chan.exit_status(code, self.opts.command, self.proto)
            await self.finish(status)
        except Exception:
            log.exception("exec session %s/%s failed", self.namespace, self.pod)
            self._kill_session()
            with contextlib.suppress(Exception):
                await self.ws.close()
        finally:
            for task in (reader, watchdog, *pumps):
                if task is not None and not task.done():
                    task.cancel()
            if self.pid is not None and not self._exit.done():
                self._kill_session()
            self._close_fds()
            if (self.runtime is not None and self.pid is not None and self._exit.done()
                    and not session_members(self.pid)):
                with contextlib.suppress(Exception):
                    self.runtime.unregister_child(self.pid)
            if not self.done.done():
                self.done.set_result(None)

    async def finish(self, status: dict[str, Any]) -> None:
        """Report the status on the error channel, then close the socket normally."""
        payload = chan.status_payload(status, self.proto)
        if payload is not None:
            await self.send(chan.ERROR, payload)
        with contextlib.suppress(Exception):
            await self.ws.close()

    def kill(self, reason: str) -> None:
        if self.killed is None:
            self.killed = reason
            log.debug("exec %s/%s: %s, killing the session", self.namespace, self.pod, reason)
        if self.pid is not None:
            self._kill_session()
        elif not self.done.done():
            self.client_gone = True  # not started yet: just end the stream
            self._closer = asyncio.ensure_future(self.ws.close())

    def check(self) -> None:
        if self.done.done() or self.killed:
            return
        reason = self.service.still_running(self)
        if reason is not None:
            self.kill(reason)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            self.check()

    # -- client --------------------------------------------------------------------------------
    async def send(self, channel: int, data: bytes) -> None:
        if self.client_gone or self.ws.closed:
            return
        frame = chan.encode(self.proto, channel, data)
        try:
            if self.proto.binary:
                await self.ws.send_bytes(frame)
            else:
                await self.ws.send_str(frame.decode("ascii"))
        except (ConnectionError, RuntimeError):
            self._client_left()

    def _client_left(self) -> None:
        if not self.client_gone:
            self.client_gone = True
            if self.pid is not None:
                self._kill_session()

    async def _await_first_size(self) -> None:
        """Let the client's first resize message size the terminal before the command starts."""
        deadline = self.loop.time() + FIRST_RESIZE_WAIT
        while self.size is None and not self.client_gone:
            left = deadline - self.loop.time()
            if left <= 0:
                return
            try:
                msg = await self.ws.receive(timeout=left)
            except TimeoutError:
                return
            await self._on_message(msg)

    async def _read_client(self) -> None:
        while not self.client_gone:
            msg = await self.ws.receive()
            await self._on_message(msg)

    async def _on_message(self, msg: Any) -> None:
        if msg.type in (WSMsgType.BINARY, WSMsgType.TEXT):
            data = msg.data if isinstance(msg.data, bytes) else str(msg.data).encode()
            frame = chan.decode(self.proto, data)
            if frame is not None:
                await self._on_frame(frame)
        elif msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
            self._client_left()

    async def _on_frame(self, frame: chan.Frame) -> None:
        if frame.close:
            if frame.channel == chan.STDIN:
                self._close_stdin()
            return
        if frame.channel == chan.STDIN:
            if not self.opts.stdin or self.stdin_closed or self.stdin_eof_pending or not frame.data:
                return
            if self.pid is None:
                self.pending_stdin.append(frame.data)
            else:
                await self._write_stdin(frame.data)
        elif frame.channel == chan.RESIZE and self.opts.tty:
            for size in self.resize.feed(frame.data):
                self.size = size
                self._apply_size()

    # -- process -------------------------------------------------------------------------------
    def _environment(self) -> dict[str, str]:
        env = {str(k): str(v) for k, v in dict(self.rt.container_env(self.container)).items()}
        env.setdefault("PATH", DEFAULT_PATH)
        env.setdefault("HOME", self.rt.home)
        if self.opts.tty:
            env.setdefault("TERM", "xterm")
        return env

    def _host(self, path: str) -> str:
        """An in-pod path as the host reaches it (the same path without pod namespaces)."""
        holder = self.rt.holder
        return str(holder.host_path(path)) if holder is not None else path

    def _resolve(self, argv0: str, env: dict[str, str], cwd: str) -> str:
        """The executable as runc finds it (its path in the pod), or runc's error."""
        if "/" in argv0:
            path = argv0 if os.path.isabs(argv0) else os.path.join(cwd, argv0)
            try:
                mode = os.stat(self._host(path)).st_mode
            except OSError:
                raise StartError(f'exec: "{argv0}": stat {argv0}: no such file or directory') from None
            if stat.S_ISDIR(mode) or not os.access(self._host(path), os.X_OK):
                raise StartError(f'exec: "{argv0}": permission denied')
            return path
        found = self.rt.find_executable(argv0, env, cwd)
        if found is None:
            raise StartError(f'exec: "{argv0}": executable file not found in $PATH')
        return found

    def _start_failure(self, detail: str) -> str:
        exec_id = secrets.token_hex(32)
        return (
            "error executing command in container: failed to exec in container: "
            f'failed to start exec "{exec_id}": OCI runtime exec failed: exec failed: '
            f"unable to start container process: {detail}: unknown"
        )

    def _spawn(self) -> list[tuple[int, int | None]]:
        """Start the command; returns the output fds to pump and their channels."""
        cwd = self.rt.working_dir(self.container)
        env = self._environment()
        argv = list(self.opts.command)
        with contextlib.suppress(Exception):  # in-pod volume paths, as the kubelet maps its own argv
            argv = [self.rt.rewriter.rewrite(a) for a in argv]
        if not os.path.isdir(self._host(cwd)):
            raise StartError(f'chdir to cwd ("{cwd}") set in config.json failed: no such file or directory')
        executable = self._resolve(argv[0], env, cwd)
        root = cwd
        if self.rt.holder is not None:
            argv, root = self.rt.command(argv, cwd)  # nsenter ... -- argv, in the pod's namespaces
            executable = argv[0]
        outputs: list[tuple[int, int | None]] = []
        if self.opts.tty:
            master, slave = os.openpty()
            try:
                if self.size is not None:
                    _set_winsize(slave, self.size)
                proc = self._popen(argv, executable, root, env, slave, slave, slave, tty=True)
            except BaseException:
                os.close(master)
                raise
            finally:
                os.close(slave)
            os.set_blocking(master, False)
            self.master = master
            self.stdin_fd = master if self.opts.stdin else None
            outputs.append((master, chan.STDOUT if self.opts.stdout else None))
        else:
            r_in = w_in = None
            out_pipes: list[tuple[int, int]] = []
            try:
                if self.opts.stdin:
                    r_in, w_in = os.pipe()
                r_out, w_out = os.pipe()
                out_pipes.append((r_out, w_out))
                r_err, w_err = os.pipe()
                out_pipes.append((r_err, w_err))
                proc = self._popen(
                    argv, executable, root, env,
                    r_in if r_in is not None else subprocess.DEVNULL, w_out, w_err, tty=False,
                )
            except BaseException:
                for fd in (r_in, w_in, *(fd for pair in out_pipes for fd in pair)):
                    if fd is not None:
                        os.close(fd)
                raise
            for fd in (r_in, w_out, w_err):
                if fd is not None:
                    os.close(fd)
            if w_in is not None:
                os.set_blocking(w_in, False)
                self.stdin_fd = w_in
            os.set_blocking(r_out, False)
            os.set_blocking(r_err, False)
            outputs.append((r_out, chan.STDOUT if self.opts.stdout else None))
            outputs.append((r_err, chan.STDERR if self.opts.stderr else None))
        self.proc = proc
        self.pid = proc.pid
        with contextlib.suppress(Exception):
            self.rt.register_child(proc.pid)
        self._reaper = self.loop.create_task(self._reap(proc))
        if self.killed or self.client_gone:
            self._kill_session()
        return outputs

    def _popen(
        self, argv: list[str], executable: str, cwd: str, env: dict[str, str],
        stdin: int, stdout: int, stderr: int, *, tty: bool,
    ) -> subprocess.Popen[bytes]:
        # Only a terminal needs code in the child (fork instead of the much faster vfork); other
        # commands are covered against simcluster dying by the kubelet's reaper (register_child).
        # (a pod with its own cgroup needs code in the child too: `podnet.joiner`)
        preexec = joiner(self.rt.cgroup, _tty_child_setup() if tty else None)
        try:
            return subprocess.Popen(
                argv, executable=executable, cwd=cwd, env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                start_new_session=True, close_fds=True, preexec_fn=preexec,
            )
        except PermissionError:
            raise StartError(f'exec: "{argv[0]}": permission denied') from None
        except FileNotFoundError as exc:
            if exc.filename == cwd or not os.path.isdir(cwd):
                raise StartError(f"chdir to cwd (\"{cwd}\") set in config.json failed: no such file or directory") from None
            raise StartError(f'exec: "{argv[0]}": stat {argv[0]}: no such file or directory') from None
        except OSError as exc:
            raise StartError(f'exec: "{argv[0]}": {exc.strerror or exc}') from None
        except subprocess.SubprocessError as exc:
            raise StartError(f"could not set up the terminal: {exc}") from None

    async def _reap(self, proc: subprocess.Popen[bytes]) -> None:
        code: int | None
        try:
            try:
                pidfd = os.pidfd_open(proc.pid)
            except (AttributeError, OSError):
                pidfd = None
            if pidfd is not None:
                try:
                    await _readable(self.loop, pidfd)
                finally:
                    os.close(pidfd)
                _, status = os.waitpid(proc.pid, 0)
            else:
                _, status = await self.loop.run_in_executor(None, os.waitpid, proc.pid, 0)
            rc = os.waitstatus_to_exitcode(status)
            code = 128 - rc if rc < 0 else rc
            proc.returncode = rc
        except ChildProcessError:
            code = None  # reaped elsewhere
            proc.returncode = -1
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("exec: waiting for %s failed", proc.pid)
            code = None
        if not self._exit.done():
            self._exit.set_result(code)

    async def _wait_exit(self) -> int | None:
        return await self._exit

    def _kill_session(self) -> None:
        """Kill every process of the command's session (its own and any process groups it made)."""
        if self.pid is None:
            return
        if self._exit.done() and pid_exists(self.pid):
            # We reaped our leader, so this is a new process with a recycled pid. The kernel does
            # not recycle a pid still used as a session or group id, so our session is empty.
            return
        kill_session(self.pid)

    # -- streams -------------------------------------------------------------------------------
    async def _pump(self, fd: int, channel: int | None) -> None:
        try:
            while True:
                try:
                    data = os.read(fd, READ_CHUNK)
                except BlockingIOError:
                    await _readable(self.loop, fd)
                    continue
                except OSError:  # EIO: the pty's last slave closed
                    return
                if not data:
                    return
                if channel is not None:
                    await self.send(channel, data)
        finally:
            # The pty master stays open until the command has exited: closing it hangs the
            # terminal up, and a program that closes its stdio before exiting (GNU cat does)
            # would die of the SIGHUP. `_close_fds` closes it at the end.
            if fd != self.master:
                with contextlib.suppress(OSError):
                    os.close(fd)

    async def _write_stdin(self, data: bytes) -> None:
        view = memoryview(data)
        while view and self.stdin_fd is not None and not self.stdin_closed:
            fd = self.stdin_fd
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                await _writable(self.loop, fd)
                continue
            except OSError:  # the process closed its stdin or exited
                self._close_stdin(send_eof=False)
                return
            view = view[n:]
        if data:
            self.last_stdin_byte = data[-1:]

    def _close_stdin(self, *, send_eof: bool = True) -> None:
        if self.stdin_closed:
            return
        if self.pid is None:
            self.stdin_eof_pending = True
            return
        self.stdin_closed = True
        fd, self.stdin_fd = self.stdin_fd, None
        if fd is None:
            return
        if fd == self.master:
            # A terminal has no half-close: type the EOF character (twice after a partial line).
            if send_eof:
                eof = b"\x04" if self.last_stdin_byte in (b"\n", b"\r") else b"\x04\x04"
                with contextlib.suppress(OSError):
                    os.write(fd, eof)
            return
        with contextlib.suppress(OSError):
            os.close(fd)

    def _apply_size(self) -> None:
        if self.master is not None and self.size is not None:
            with contextlib.suppress(OSError):
                _set_winsize(self.master, self.size)

    def _close_fds(self) -> None:
        if self.stdin_fd is not None and self.stdin_fd != self.master:
            with contextlib.suppress(OSError):
                os.close(self.stdin_fd)
        self.stdin_fd = None
        if self.master is not None:
            with contextlib.suppress(OSError):
                os.close(self.master)
            self.master = None


# -- helpers --------------------------------------------------------------------------------------


def _tty_child_setup() -> Callable[[], None]:
    """The child's set-up after setsid(): make the pty on stdin the controlling terminal, and die
    with the thread that started it (as the kubelet's own processes do)."""
    deathsig = pdeathsig_preexec()

    def setup() -> None:
        deathsig()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    return setup


def _set_winsize(fd: int, size: tuple[int, int]) -> None:
    width, height = size
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


async def _readable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    fut: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not fut.done():
            fut.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await fut
    finally:
        loop.remove_reader(fd)


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    fut: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not fut.done():
            fut.set_result(None)

    loop.add_writer(fd, ready)
    try:
        await fut
    finally:
        loop.remove_writer(fd)


def kill_session(sid: int) -> None:
    """SIGKILL the process group `sid` and every other process still in session `sid`."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, signal.SIGKILL)
    for pid in session_members(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError as exc:
            if exc.errno not in (errno.ESRCH, errno.EPERM):
                raise
