"""One-line errors and the documented exit codes of the `ranks` command line."""

from __future__ import annotations

import sys
from typing import NoReturn

from monitors.connection import ExitCode

EXIT_OK = ExitCode.OK
EXIT_ERROR = ExitCode.ERROR
EXIT_USAGE = ExitCode.USAGE
EXIT_INTERRUPTED = ExitCode.INTERRUPTED


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print `ranks: error: MESSAGE` on stderr and exit; never a traceback."""
    print(f"ranks: error: {message}", file=sys.stderr)
    sys.exit(int(code))
