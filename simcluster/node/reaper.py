"""Nothing left behind: pod processes die with simcluster, even when it is SIGKILLed.

Two mechanisms:

- every container process is started in its own session (so its process group and session id
  are its pid) with `PR_SET_PDEATHSIG=SIGKILL`, so the direct child dies with the thread that
  started it (the pods' namespace holders, `podns`, die with their helper, which dies with it);
- a reaper: a tiny helper process (`python -I -S .../reaper.py <pid>`, its own session, SIGINT
  and SIGHUP ignored) that reads `g<id>` / `p<pid>` lines (register a process group+session id / a single pid) and
  `-g<id>` / `-p<pid>` (forget) from a pipe. When the pipe closes (simcluster exited, however it
  died) or on SIGTERM (its own `PR_SET_PDEATHSIG`), it drains what is left in the pipe, sends
  SIGKILL to every registered process group and to every process whose process group or session
  is registered (found in /proc, repeated until none is left), then exits.

Processes that leave the container's session (`setsid`, daemons) are tracked only through their
pod's mount namespace, where it has one (below). The helper
finds them with `procfs` (loaded by its path: the helper runs without the package); `signal_ids`
signals process groups and, with a `procfs.ProcessTable`, every other member of their sessions.
A pod's mount namespace (`n<inode>`) may be registered too: every process in it is killed, those
that left their container's session included (sshd's sessions and what they started).
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (see below)
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .procfs import ProcessTable

log = logging.getLogger("simcluster.reaper")

# `concurrent.futures.thread` registers a pair of fork hooks (acquire its lock before a fork,
# release it after, in the parent). A `preexec_fn` makes every Popen run the fork hooks; were
# that module first imported by another thread (asyncio's default executor, at shutdown) while
# a Popen is between its "before" and "after" hooks, the "after" would release a lock that the
# "before" never took ("release unlocked lock", on stderr). Imported above, before any fork.

PR_SET_PDEATHSIG = 1

try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - not Linux
    _libc = None


# signals a container's processes start with the default action for, whatever the process that
# runs simcluster ignores or blocks (a test runner, a daemon): Ctrl-C in a pod's terminal interrupts
RESET_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP, signal.SIGTTIN,
                 signal.SIGTTOU, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGCHLD, signal.SIGPIPE)


def pdeathsig_preexec(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A `preexec_fn`: the child gets `sig` when the thread that started it ends, and starts with
    no signal blocked and the default action for `RESET_SIGNALS`, as a container runtime starts
    a container's process."""
    parent = os.getpid()
    libc = _libc

    def setup() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        for s in RESET_SIGNALS:
            signal.signal(s, signal.SIG_DFL)
        if libc is not None:
            libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return setup


def procfs_mount_ns(pid: int) -> int | None:
    """The inode of a process's mount namespace (as `procfs.mount_ns`; this module runs by path too)."""
    try:
        return os.stat(f"/proc/{pid}/ns/mnt").st_ino
    except OSError:
        return None


def _procfs_by_path() -> ModuleType:
    """`procfs`, loaded from the file next to this one (the helper has no package to import from)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "procfs.py")
    spec = importlib.util.spec_from_file_location("simcluster_procfs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _helper_main(parent: int) -> None:
    """The helper process (`python -S reaper.py <parent pid>`): the stdlib and procfs.py only."""
    import fcntl

    procfs = _procfs_by_path()
    groups: set[int] = set()
    pids: set[int] = set()
    spaces: set[int] = set()  # pods' mount namespaces: every process in one
    buf = [b""]
    me = os.getpid()

    def parse(data: bytes) -> None:
        buf[0] += data
        *lines, buf[0] = buf[0].split(b"\n")
        for line in lines:
            drop = line.startswith(b"-")
            if drop:
                line = line[1:]
            try:
                kind, n = line[:1], int(line[1:])
            except ValueError:
                continue
            if n <= 1 or n == me:
                continue
            target = groups if kind == b"g" else pids if kind == b"p" else spaces if kind == b"n" else None
            if target is not None:
                (target.discard if drop else target.add)(n)

    def scan() -> list[int]:
        return [p.pid for p in procfs.live_processes()
                if p.pid != me and (p.pgrp in groups or p.session in groups
                                    or (spaces and procfs.mount_ns(p.pid) in spaces))]

    def kill_all(*_: object) -> None:
        with contextlib.suppress(OSError):  # drain what is still in the pipe
            fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)
            while data := os.read(0, 65536):
                parse(data)
        for g in groups:
            with contextlib.suppress(OSError):
                os.killpg(g, signal.SIGKILL)
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        for _attempt in range(20):
            left = scan()
            if not left:
                break
            for p in left:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
        os._exit(0)

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, kill_all)
    if _libc is not None:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        kill_all()
    sys.stdout.write("ok\n")
    sys.stdout.flush()
    while True:
        try:
            data = os.read(0, 65536)
        except InterruptedError:
            continue
        if not data:
            break
        parse(data)
    kill_all()


class Reaper:
    """The parent side of the reaper helper. Synchronous and cheap: one small pipe write."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._groups: set[int] = set()
        self._pids: set[int] = set()
        self._spaces: set[int] = set()
        self._own = {os.getpgrp(), os.getsid(0), os.getpid()}
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", __file__, str(os.getpid())],  # -I: not simcluster/ on sys.path
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )
        assert self._proc.stdout is not None
        if self._proc.stdout.readline() != b"ok\n":  # ready: PR_SET_PDEATHSIG is in place
            log.error("reaper: the helper process did not start; processes may outlive a killed simcluster")
        self._proc.stdout.close()
        if self._groups or self._pids or self._spaces:
            self._send("".join([*(f"g{g}\n" for g in self._groups), *(f"p{p}\n" for p in self._pids),
                                *(f"n{n}\n" for n in self._spaces)]))

    def _send(self, text: str) -> None:
        if self._closed:
            return
        for attempt in range(2):
            proc = self._proc
            if proc is None or proc.stdin is None:
                return
            try:
                proc.stdin.write(text.encode())
                proc.stdin.flush()
                return
            except (BrokenPipeError, ValueError, OSError):
                if attempt:
                    log.warning("reaper: cannot reach the helper process")
                    return
                log.warning("reaper: helper process gone, starting a new one")
                with contextlib.suppress(Exception):
                    proc.kill()
                self.start()
                return

    def is_own(self, ident: int) -> bool:
        """An id that must never be killed wholesale: simcluster's own group or session."""
        return ident in self._own or ident <= 1

    def add_group(self, pgid: int) -> None:
        if self.is_own(pgid) or pgid in self._groups:
            return
        self._groups.add(pgid)
        self._send(f"g{pgid}\n")

    def remove_group(self, pgid: int) -> None:
        if pgid in self._groups:
            self._groups.discard(pgid)
            self._send(f"-g{pgid}\n")

    def add_pid(self, pid: int) -> None:
        if self.is_own(pid) or pid in self._pids:
            return
        self._pids.add(pid)
        self._send(f"p{pid}\n")

    def remove_pid(self, pid: int) -> None:
        if pid in self._pids:
            self._pids.discard(pid)
            self._send(f"-p{pid}\n")

    def add_mount_ns(self, inode: int) -> None:
        """Every process in this mount namespace (a pod's) is killed with simcluster."""
        if inode in self._spaces or inode == procfs_mount_ns(os.getpid()):
            return
        self._spaces.add(inode)
        self._send(f"n{inode}\n")

    def remove_mount_ns(self, inode: int) -> None:
        if inode in self._spaces:
            self._spaces.discard(inode)
            self._send(f"-n{inode}\n")

    def close(self, timeout: float = 5.0) -> None:
        """Close the pipe: the helper kills whatever is still registered, then exits."""
        proc = self._proc
        self._closed = True
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(1)
        self._proc = None


def signal_ids(ids: Iterable[int], sig: int, table: ProcessTable | None = None) -> None:
    """Send `sig` to process groups `ids` and to every other member of those sessions."""
    ids = [i for i in ids if i > 1]
    for i in ids:
        with contextlib.suppress(OSError):
            os.killpg(i, sig)
    if table is not None:
        for pid in table.members(ids, force=True):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)


if __name__ == "__main__":
    _helper_main(int(sys.argv[1]))
