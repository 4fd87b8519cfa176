"""The one error type of session management (submit, delete, suspend, resume): one line for the
user and the documented exit code (monitors.connection.ExitCode)."""

from __future__ import annotations

from monitors.connection import ExitCode


class SessionError(Exception):
    """A session action was refused or failed; `message` is one line, `code` the exit code."""

    def __init__(self, message: str, code: int = ExitCode.ERROR) -> None:
        message = " ".join(line.strip() for line in message.splitlines() if line.strip())  # one line
        super().__init__(message)
        self.message = message
        self.code = int(code)
