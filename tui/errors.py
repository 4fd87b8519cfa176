"""One-line errors and the documented exit codes of the `ranks` command line."""

from __future__ import annotations

import sys
from typing import NoReturn

EXIT_OK = 0
EXIT_ERROR = 1  # the operation failed (the cluster said no, a rank failed, ...)
EXIT_USAGE = 2  # bad flags or arguments
EXIT_INTERRUPTED = 130


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print `ranks: error: MESSAGE` on stderr and exit; never a traceback."""
    print(f"ranks: error: {message}", file=sys.stderr)
    sys.exit(code)
