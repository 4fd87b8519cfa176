"""`ranks ARGS` run in the test's own process (`tui.cli.group.main`, as the installed command runs
it): its exit code, stdout and stderr, for property-based tests that run it hundreds of times (a
subprocess costs half a second of imports each). The environment is the test's (`isolated` gives
it a HOME, state and config directories of its own).

`one_line_or_ok(result, codes)` is what every bad input must give: exit 0, or exactly one
`ranks: error:` line on stderr with one of the documented exit codes (never "internal error", never
a traceback, no escape byte).
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitors.connection import ExitCode

DOCUMENTED = frozenset(int(c) for c in ExitCode)


@dataclass
class Result:
    args: tuple[str, ...]
    code: int
    out: str
    err: str


def run_cli(*args: str) -> Result:
    """`ranks ARGS` here, stdin empty; stdout and stderr captured."""
    from tui.cli.group import main

    out, err = io.StringIO(), io.StringIO()
    old_in = sys.stdin
    sys.stdin = io.StringIO("")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin = old_in
    return Result(tuple(args), code, out.getvalue(), err.getvalue())


def one_line_or_ok(r: Result, codes: Iterable[int] = DOCUMENTED) -> None:
    """Exit 0, or one `ranks: error:` line with a documented code in `codes`; never an internal error."""
    allowed = set(codes)
    where = (r.args, r.code, r.out[-500:], r.err[-2000:])
    assert "internal error" not in r.err and "Traceback" not in r.err, where
    assert "\x1b" not in r.err, where
    assert r.code in DOCUMENTED, where
    if r.code == 0:
        return
    assert r.code in allowed, where
    errors = [ln for ln in r.err.splitlines() if ln.startswith("ranks: error: ")]
    assert len(errors) == 1 and errors[0] == r.err.splitlines()[-1], where


@contextlib.contextmanager
def isolated(monkeypatch: pytest.MonkeyPatch, home: Path) -> Iterator[Path]:
    """The CLI's environment: HOME, XDG state, data and config under `home`; no KUBECONFIG, no
    RANKS_CONFIG, no colour."""
    for key in ("KUBECONFIG", "RANKS_CONFIG", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    yield home
