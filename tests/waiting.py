"""Small helpers the tests share: waiting for a condition (from plain code, from a coroutine, from
a Textual pilot), live processes by their command line, and the CLI's one-line error contract.

Every wait in tests/ goes through one of the three pollers below; they differ only in how they
pause between checks:

- `wait_for(cond, timeout, what)`: sync code (a cluster in another thread, a subprocess);
  sleeps the thread.
- `await until(pred, timeout, what)`: a coroutine on the running asyncio loop (a cluster on the
  test's own loop); `pred` may also be a coroutine function (awaited on every check).
- `await pilot_wait(pilot, cond, timeout, what)`: a Textual app under `run_test()`; pauses the
  pilot between checks, so the app processes its messages and refreshes meanwhile; a widget
  not mounted yet is "not yet".

Each returns the first true value of the condition, or fails with
`AssertionError("timed out after Ns waiting for WHAT ...")`, adding the last value seen (when it says
more than true/false) and `detail()` (e.g. the screen) when given.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from typing import Any

__all__ = ["descendants", "one_line_error", "pilot_wait", "processes_matching", "titled", "unique_sleep", "until",
           "wait_for"]

TIMEOUT = 10.0
LAST_LIMIT = 1000  # characters of the last value in a failure message

Ignore = Callable[[Exception], bool]


def _timed_out(timeout: float, what: str, last: Any, detail: Callable[[], object] | None) -> AssertionError:
    msg = f"timed out after {timeout:g}s waiting for {what}"
    if last is not None and not isinstance(last, bool):
        text = repr(last)
        msg += f" (last: {text if len(text) <= LAST_LIMIT else text[:LAST_LIMIT] + '...'})"
    if detail is not None:
        msg += f"; {detail()}"
    return AssertionError(msg)


def wait_for(cond: Callable[[], Any], timeout: float = TIMEOUT, what: str = "condition", *,
             interval: float = 0.05, ignore: Ignore | None = None,
             detail: Callable[[], object] | None = None) -> Any:
    """Poll `cond` (sleeping `interval` between checks) until it returns something true, which is
    returned; fail after `timeout` seconds. An exception for which `ignore(exc)` is true counts as
    "not yet" (e.g. a 404 for an object not created yet); any other propagates."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = last = cond()
        except Exception as exc:
            if ignore is None or not ignore(exc):
                raise
            value, last = None, exc  # "not yet"; reported if the wait times out
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what, last, detail)
        time.sleep(interval)


async def until(pred: Callable[[], Any], timeout: float = TIMEOUT, what: str = "condition", *,
                interval: float = 0.02, ignore: Ignore | None = None,
                detail: Callable[[], object] | None = None) -> Any:
    """`wait_for` for a coroutine: polls on the running event loop (`asyncio.sleep(interval)`
    between checks, so the loop's other tasks run). `pred` may return an awaitable (an async
    predicate), which is awaited."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            value = pred()
            if inspect.isawaitable(value):
                value = await value
            last = value
        except Exception as exc:
            if ignore is None or not ignore(exc):
                raise
            value, last = None, exc
        if value:
            return value
        if loop.time() > deadline:
            raise _timed_out(timeout, what, last, detail)
        await asyncio.sleep(interval)


async def pilot_wait(pilot: Any, cond: Callable[[], Any], timeout: float = TIMEOUT, what: str = "condition", *,
                     interval: float = 0.05, settle: bool = False,
                     detail: Callable[[], object] | None = None) -> Any:
    """`until` for a Textual app under `run_test()`: `pilot.pause(interval)` between checks (the app
    handles its messages and refreshes meanwhile). `settle`: once true, one more `pilot.pause()`
    so what the condition saw is also on screen (for snapshots). A widget the condition queries
    that is not mounted yet (`NoMatches`: a screen pushed and not yet composed) is "not yet"."""
    from textual.css.query import NoMatches

    deadline = time.monotonic() + timeout
    while True:
        try:
            value = cond()
        except NoMatches as exc:
            value = exc
        if value and not isinstance(value, NoMatches):
            break
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what, value, detail)
        await pilot.pause(interval)
    if settle:
        await pilot.pause()
    return value


def processes_matching(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker`, machine-wide: the marker must be
    this test's alone (a uuid, `unique_sleep`, a path under its tmp_path), never a name another test,
    another worker or another checkout's run on the same machine could share (simcluster's procfs
    reader, imported here on first use: the perf probes import this module and must not load simcluster)."""
    from simcluster.node.procfs import processes_matching as matching

    return matching(marker)


def unique_sleep(seconds: int) -> str:
    """`sleep SECONDS.FFFFFF`, a fraction no other run on the machine has (GNU sleep takes one): a
    command line by which `processes_matching` finds this test's sleep and no other's."""
    return f"sleep {seconds}.{secrets.randbelow(10**6):06d}"


def descendants(root: int) -> dict[int, str]:
    """Every process below `root` (zombies too: a child not reaped is left behind as well): pid -> command."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        names[pid] = f"{cmd or '?'} [{fields[0].decode()}]"
    out: dict[int, str] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            out[child] = names[child]
            todo.append(child)
    return out


def titled(root: int, title: str) -> list[int]:
    """Pids below `root` (a server this test started) whose command line holds `title`: this test's
    processes, never another test's of the same title (on another worker)."""
    return sorted(pid for pid, cmd in descendants(root).items() if title in cmd and "<defunct>" not in cmd)


def one_line_error(r: subprocess.CompletedProcess[str], code: int, *fragments: str) -> str:
    """The command failed with `code` and said why in exactly one `ranks: error:` line."""
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ranks: error: "), r.stderr
    assert "Traceback" not in r.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]
