"""The audit log: one line per login, logout and refused or mutating action (who, from where, what),
to stderr or to a file created 0600. Never a key, a token or what the user types."""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from monitors.sanitize import clean


class Audit:
    def __init__(self, path: str | None = None) -> None:
        self._own = path is not None
        self._out: TextIO
        if path is not None:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.fchmod(fd, 0o600)
            self._out = os.fdopen(fd, "a", encoding="utf-8", buffering=1)
        else:
            self._out = sys.stderr

    def log(self, event: str, *, user: str, peer: str, what: str = "") -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"audit: {stamp} {event} user={clean(user, limit=100)} from={clean(peer, limit=100)}"
        if what:
            line += f" what={clean(what, limit=300)!r}"
        try:
            print(line, file=self._out, flush=True)
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        if self._own:
            self._out.close()
