"""Small helpers the integration tests share: polling for a condition, live processes by their
command line, and the CLI's one-line error contract."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from typing import Any


def wait_for(cond: Callable[[], Any], timeout: float = 20.0, what: str = "condition", *,
             interval: float = 0.05) -> Any:
    """Poll `cond` until it returns something true (returned), or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def processes_matching(marker: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != b"Z":
            found.append(int(entry))
    return found


def one_line_error(r: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    """The command failed with `code` and said why in exactly one `ranks: error:` line."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ranks: error: "), r.stderr
    assert "Traceback" not in r.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]
