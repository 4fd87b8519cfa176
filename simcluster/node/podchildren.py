"""The processes other components start in a pod (exec sessions, their children): what a pod's
runtime kills with the pod, besides its containers' process groups.

A process in a group of its own (a session's command: `start_new_session`) is followed by its
group; one that shares the reaper's group is followed by its pid. Both are registered with the
reaper (`reaper`), so they die with simcluster even when it is killed outright.
"""

from __future__ import annotations

import contextlib
import os
import signal

from .procfs import ProcessTable, pid_exists
from .reaper import Reaper, signal_ids


class ExecChildren:
    """A pod's processes started from outside its containers: their groups and pids."""

    def __init__(self, reaper: Reaper, proc_table: ProcessTable) -> None:
        self.reaper = reaper
        self.proc_table = proc_table
        self.groups: set[int] = set()
        self.pids: set[int] = set()

    def live_pids(self) -> set[int]:
        """The followed pids that still live (the others are forgotten)."""
        live = set()
        for pid in list(self.pids):
            if pid_exists(pid):
                live.add(pid)
            else:
                self.pids.discard(pid)
                self.reaper.remove_pid(pid)
        return live

    def register(self, pid: int, *, kill: bool) -> None:
        """Follow `pid` (killed at once when `kill`: the pod is ending)."""
        self.proc_table.invalidate()
        try:
            pgid = os.getpgid(pid)
        except OSError:
            return
        if kill:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not self.reaper.is_own(pgid):
            self.groups.add(pgid)
            self.reaper.add_group(pgid)
        else:
            self.pids.add(pid)
            self.reaper.add_pid(pid)

    def unregister(self, pid: int) -> None:
        """Forget a process that has ended (its group no longer needs killing)."""
        self.pids.discard(pid)
        self.reaper.remove_pid(pid)
        if pid in self.groups:
            self.groups.discard(pid)
            self.reaper.remove_group(pid)
        else:
            with contextlib.suppress(OSError):
                pgid = os.getpgid(pid)
                if pgid in self.groups and not self.proc_table.members([pgid], force=True):
                    self.groups.discard(pgid)
                    self.reaper.remove_group(pgid)

    def signal(self, sig: int) -> None:
        """`sig` to every followed group and pid (SIGKILL: to whole groups, as they are now)."""
        signal_ids(self.groups, sig, self.proc_table if sig == signal.SIGKILL else None)
        for pid in self.pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
