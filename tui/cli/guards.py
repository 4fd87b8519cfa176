"""What stands before a command that acts: read-only mode (the flag or the config file) refusing
it (`read_only_reason`, `read_only_refusal`) and `confirm`, a yes/no question on the terminal.

Light at import (it is on the path of `ranks --help`).
"""

from __future__ import annotations

from typing import Any

from monitors.connection import ExitCode

from .errors import UserError, error


def read_only_reason(opts: dict[str, Any]) -> str | None:
    """Why read-only mode is on (the flag, or the config file that says so), or None when off."""
    if opts.get("read_only"):
        return "--read-only"
    from tui.config_file import ConfigReadError, read_only_setting

    try:
        read_only, path = read_only_setting()
    except ConfigReadError as exc:
        raise UserError(str(exc), ExitCode.NO_CONFIG) from None
    if read_only:
        return f"read_only = true in {path}"
    return None


def read_only_refusal(opts: dict[str, Any], action: str) -> int | None:
    """The exit code when read-only mode refuses `action` (after printing why), else None."""
    from sessions.errors import SessionError
    from sessions.lifecycle import refuse_if_read_only

    try:
        why = read_only_reason(opts)
        refuse_if_read_only(why is not None, action, why)
    except UserError as exc:
        return error(exc.message, exc.code)
    except SessionError as exc:
        return error(exc.message, exc.code)
    return None


def confirm(question: str, *, default: bool = False) -> bool:
    """The user's yes to `question` on the terminal (`default` on Enter; no when it cannot be asked).
    As the dashboard's dialogs: yes by default for what is harmless, no for what destroys."""
    import click

    try:
        return click.confirm(question, default=default, err=True)
    except (click.exceptions.Abort, EOFError):
        return False

