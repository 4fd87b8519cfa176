"""How a `ranks` command fails: `UserError`, `error` (print one line, return the code), `fail`
(print one line, exit), `user_error` (a `sessions` error as a `UserError`), `redact`.

Exit codes: 0 ok, 1 failed, 2 usage, 3 no/invalid kubeconfig, context or config file (or a failing
exec credential plugin), 4 server unreachable or silent (--request-timeout), 5 TLS failure, 6 unauthorized, 7 forbidden, 8 not found, 130 interrupted.

Light at import (it is on the path of `ranks --help`).
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, NoReturn

from monitors.connection import ExitCode
from monitors.sanitize import clean

if TYPE_CHECKING:
    from sessions.errors import SessionError


class UserError(Exception):
    """What a command reports as `ranks: error: MESSAGE` with its exit code."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


_SCHEME_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{6,}")
_NAMED_CREDENTIAL = re.compile(r"(?i)\b(token|password|client-key-data|authorization|x-api-key)"
                               r"([\"']?\s*[:=]\s*[\"']?)(?!\s)(?!bearer\b|basic\b)[^\s\"',}]{4,}")


def redact(message: str) -> str:
    """`message` with what looks like a credential replaced by <redacted>: `Bearer X`, `Basic X`,
    `token: X`, `password=X`, `client-key-data: X`, `Authorization: X` (an error can quote a request,
    a kubeconfig or a credential plugin's output)."""
    message = _SCHEME_CREDENTIAL.sub(r"\1\2<redacted>", message)
    return _NAMED_CREDENTIAL.sub(r"\1\2<redacted>", message)


def error(message: str, code: int) -> int:
    """Print `ranks: error: MESSAGE` on stderr (credentials redacted); the exit code, to return.
    MESSAGE is sanitised (`clean`): what it echoes of the command line or the cluster (an ESC, a
    newline, a bidi control in a name) cannot change the terminal or make a second line."""
    from .door import scrub  # (over the SSH door: none of the server's paths)

    print(f"ranks: error: {clean(redact(scrub(message)), limit=2000)}", file=sys.stderr)
    return int(code)


def fail(message: str, code: int = ExitCode.ERROR) -> NoReturn:
    """Print `ranks: error: MESSAGE` on stderr (credentials redacted, sanitised) and exit; never a
    traceback."""
    error(message, code)
    sys.exit(int(code))


def user_error(exc: SessionError) -> UserError:
    """A `sessions` error as the command line reports it (its code, if it is a documented one)."""
    try:
        code = ExitCode(exc.code)
    except ValueError:
        code = ExitCode.ERROR
    return UserError(exc.message, code)

