"""A warm template of the dashboard for the SSH door (`ranks serve --ssh`): one process that has
imported the dashboard once and forks a child per session, so a session's first frame does not
wait for Python to import Textual, aiohttp and the app again (about 0.8 s of the 1 s a fresh
`ranks` process needs on 2 cores), and the sessions share those pages.

`python -m tui.cli.zygote FD`: FD is one end of a SOCK_SEQPACKET socket pair with the server
(`sessions.ssh.zygote_client`). Messages are JSON:

- zygote -> server `{"ready": true}` once the imports are done;
- server -> zygote `{"id": N, "args": [...], "env": {...}, "audit": bool, "shared": bool, "title": "..."}`
  with fds (the pty's slave end, then the audit pipe's write end when `audit`, then the session's
  end of the door's one watch when `shared`, `monitors.shared_view`): a child is forked, made a
  session leader with the pty as its controlling terminal and stdin/stdout/stderr, given exactly
  `env`, titled `title` for `ps`, and runs `ranks ARGS`; the answer is `{"id": N, "pid": PID}` (or `{"id": N, "error": ...}`);
- zygote -> server `{"pid": PID, "exit": CODE}` when a child ends (CODE as `subprocess`'s
  returncode: negative for a signal).

It exits when the server's end closes. It never runs a thread or an event loop itself, so forking
is safe; each child starts its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import io
import json
import os
import random
import select
import signal
import socket
import sys
import termios
from typing import Any

import setproctitle

MAX_FDS = 3  # the terminal, the audit pipe, the door's one watch


def _preload() -> None:
    """What every dashboard imports, imported once here (the children inherit it)."""
    import yaml  # noqa: F401

    import tui.app
    import tui.cli.dashboard
    import tui.cli.group
    import tui.settings  # noqa: F401

    setproctitle.setproctitle("ranks: dashboard template (ranks serve --ssh)")
    gc.collect()
    gc.freeze()  # (the children leave these objects' pages shared)


def _send(sock: socket.socket, msg: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        sock.send(json.dumps(msg).encode())


def _child(req: dict[str, Any], fds: list[int], keep_closed: list[int]) -> None:
    """In the forked child: become the session's `ranks` process; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        for fd in keep_closed:
            with contextlib.suppress(OSError):
                os.close(fd)
        setproctitle.setproctitle(str(req.get("title") or "ranks"))  # (`ps`: whose session it is)
        random.seed()  # (not the template's sequence: every session its own retry jitter)
        os.setsid()
        slave = fds[0]
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for target in (0, 1, 2):
            os.dup2(slave, target)
        os.close(slave)
        env = {str(k): str(v) for k, v in req.get("env", {}).items()}
        if req.get("audit") and len(fds) > 1:
            env["RANKS_AUDIT_FD"] = str(fds[1])
        if req.get("shared") and len(fds) > 1 + bool(req.get("audit")):  # (its end of the door's one watch)
            from monitors.shared_view import ENV

            env[ENV] = str(fds[-1])
        os.environ.clear()
        os.environ.update(env)
        # the standard streams again, on the terminal (the template's were pipes); the original ones
        # too (Final to the type checker), as what Textual's suspend writes to is sys.__stdout__
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(  # type: ignore[misc]  # (the child's own terminal)
            io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(  # type: ignore[misc]  # (the same)
            io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True)
        sys.stderr = sys.__stderr__ = io.TextIOWrapper(  # type: ignore[misc]  # (the same)
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True)
        sys.argv = ["ranks", *req["args"]]
        # (the template's objects stay frozen: the collector never walks them, so their pages stay
        # shared with the template and the other sessions instead of being copied into each)
        from tui.cli.group import main

        try:
            main(list(req["args"]))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # (a child never returns into the template's loop)
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(sock: socket.socket) -> None:
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server's terminal's Ctrl-C is the server's
    _send(sock, {"ready": True})
    while True:
        ready, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in ready:
            with contextlib.suppress(OSError):
                while os.read(wake_r, 512):
                    pass
        while True:  # every child that ended, whatever woke us
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _send(sock, {"pid": pid, "exit": os.waitstatus_to_exitcode(status)})
        if sock.fileno() not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, MAX_FDS)
        except InterruptedError:
            continue
        except OSError:
            return reap_all()
        if not data:
            return reap_all()  # the server is gone
        try:
            req = json.loads(data)
            rid = req["id"]
            if not fds or not isinstance(req.get("args"), list):
                raise ValueError("a request needs args and a terminal")
        except (ValueError, KeyError, TypeError) as exc:
            for fd in fds:
                os.close(fd)
            _send(sock, {"id": None, "error": str(exc)})
            continue
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            _send(sock, {"id": rid, "error": f"cannot fork: {exc.strerror or exc}"})
            continue
        if pid == 0:
            _child(req, fds, [sock.fileno(), wake_r, wake_w])
        for fd in fds:
            os.close(fd)
        _send(sock, {"id": rid, "pid": pid})


def reap_all(within: float = 5.0) -> None:
    """The server is gone: its sessions' terminals closed with it, so they end (SIGHUP); wait for
    them (`within` seconds, then SIGKILL), and reap every one. A child left unreaped by an exiting
    template would be a zombie of whatever adopts it (an init that never reaps: a container's)."""
    import time

    deadline = time.monotonic() + within
    killed = False
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # none left
        if pid:
            continue
        if time.monotonic() > deadline and not killed:
            for child in _children():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(child, signal.SIGKILL)
            killed = True
        time.sleep(0.05)


def _children() -> list[int]:
    """This process's children (from /proc: a session's pid is not otherwise known here)."""
    me, out = str(os.getpid()), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError), open(f"/proc/{entry}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[1].decode() == me:
                    out.append(int(entry))
    return out


def main() -> None:
    try:
        fd = int(sys.argv[1])
    except (IndexError, ValueError):
        print("usage: python -m tui.cli.zygote FD (started by `ranks serve --ssh`)", file=sys.stderr)
        sys.exit(2)
    sock = socket.socket(fileno=fd)
    _preload()
    serve(sock)


if __name__ == "__main__":
    main()
