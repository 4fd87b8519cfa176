"""Processes as /proc shows them: the one scanner of live processes (pid, process group, session)
and the other things simcluster reads there (signal handlers, CPU times, uptime).

Used by the kubelet and exec (a pod's or an exec session's processes), the reaper's helper process
(what is left to kill), the DCGM exporters (a pod's CPU use) and the tests (processes by their
command line). Stdlib only, no simcluster imports: the reaper's helper runs without the package and
loads this file by its path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from typing import NamedTuple

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Proc(NamedTuple):
    pid: int
    pgrp: int
    session: int


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command (state ppid pgrp session ...), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()


def live_processes() -> Iterator[Proc]:
    """Every live (not zombie) process, with its process group and session."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for name in entries:
        if not name.isdigit():
            continue
        fields = _stat_fields(name)
        if fields is None or len(fields) < 4 or fields[0] == b"Z":
            continue
        yield Proc(int(name), int(fields[2]), int(fields[3]))


def session_members(sid: int) -> list[int]:
    """Pids of the live processes of session `sid`."""
    return [p.pid for p in live_processes() if p.session == sid]


def processes_matching(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker`."""
    found = []
    for p in live_processes():
        try:
            with open(f"/proc/{p.pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.append(p.pid)
    return found


def mount_ns(pid: int | str) -> int | None:
    """The inode of the process's mount namespace (a pod's, for a process in a pod with its own),
    None when it is gone or cannot be read."""
    try:
        return os.stat(f"/proc/{pid}/ns/mnt").st_ino
    except OSError:
        return None


def pid_exists(pid: int) -> bool:
    """The pid is in use (by a live process or a zombie)."""
    return os.path.exists(f"/proc/{pid}")


class ProcessTable:
    """Live processes by process group and session (one scan, cached briefly)."""

    def __init__(self, ttl: float = 0.25) -> None:
        self.ttl = ttl
        self._at = -1.0
        self._by_group: dict[int, list[int]] = {}
        self._by_session: dict[int, list[int]] = {}
        self._by_ns: dict[int, list[int]] = {}
        self._ns_at = -1.0

    def invalidate(self) -> None:
        self._at = self._ns_at = -1.0

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._at < self.ttl:
            return
        by_group: dict[int, list[int]] = {}
        by_session: dict[int, list[int]] = {}
        for p in live_processes():
            by_group.setdefault(p.pgrp, []).append(p.pid)
            by_session.setdefault(p.session, []).append(p.pid)
        self._by_group, self._by_session, self._at = by_group, by_session, now

    def in_mount_ns(self, inode: int, *, force: bool = False) -> list[int]:
        """Pids of the live processes in the mount namespace `inode` (a pod's: whatever started
        them, sshd's sessions included); scanned at most once per `ttl` unless `force`."""
        now = time.monotonic()
        if force or now - self._ns_at >= self.ttl:
            by_ns: dict[int, list[int]] = {}
            for p in live_processes():
                ino = mount_ns(p.pid)
                if ino is not None:
                    by_ns.setdefault(ino, []).append(p.pid)
            self._by_ns, self._ns_at = by_ns, now
        return list(self._by_ns.get(inode, ()))

    def members(self, ids: Iterable[int], *, force: bool = False) -> list[int]:
        """Pids whose process group or session is one of `ids`."""
        self.refresh(force)
        out: set[int] = set()
        for i in ids:
            out.update(self._by_group.get(i, ()))
            out.update(self._by_session.get(i, ()))
        return sorted(out)


def handles_signal(pid: int, sig: int) -> bool:
    """The process has a handler for `sig` (its SigCgt mask; False when unreadable)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def cpu_times(pid: int) -> tuple[float, float] | None:
    """(utime+stime seconds, start time in seconds after boot) of a live process."""
    rest = _stat_fields(pid)
    if rest is None:
        return None
    try:
        # fields after the command: state(3) ppid ... utime(14) stime(15) ... starttime(22)
        utime, stime, start = int(rest[11]), int(rest[12]), int(rest[19])
    except (IndexError, ValueError):
        return None
    return (utime + stime) / _CLK_TCK, start / _CLK_TCK


def uptime() -> float:
    """Seconds since boot (0.0 when unreadable)."""
    try:
        with open("/proc/uptime") as fh:
            return float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
