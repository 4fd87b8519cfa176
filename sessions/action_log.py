"""Mutating actions told to whoever runs this process's audit log: the SSH door (`sessions.ssh`)
starts each dashboard with `RANKS_AUDIT_FD` naming the write end of a pipe, and logs each line it
reads there with the session's user and address. Elsewhere (a local dashboard) nothing is written:
the cluster's own audit log has the user's requests.

One line per action, at most PIPE_BUF bytes (a pipe write that size is atomic), never blocking:
a server that stopped reading loses the line, not the dashboard's responsiveness."""

from __future__ import annotations

import contextlib
import os
import select

from monitors.sanitize import clean

ENV = "RANKS_AUDIT_FD"


def _fd() -> int | None:
    raw = os.environ.get(ENV, "")
    return int(raw) if raw.isdigit() else None


def report(action: str) -> None:
    """Tell the audit log (if any) that this action was asked for: `delete pytorchjob/ns/name`."""
    fd = _fd()
    if fd is None:
        return
    line = clean(action, limit=300).replace("\n", " ").encode("utf-8", "replace")[: select.PIPE_BUF - 1] + b"\n"
    with contextlib.suppress(OSError):
        os.set_blocking(fd, False)
        os.write(fd, line)
