"""Tools of the simulated image that are programs of their own, not simulated: `py-spy` (the PyPI
wheel's binary, installed beside simcluster's interpreter), which `ranks stacks` runs in a pod to
read its ranks' Python stacks. Pods with a mount namespace find it in the virtualenv bound at
`/opt/venv/bin` (first on their PATH), or bound at `/usr/local/bin` without a virtualenv; the
others through a wrapper in the launchers' directory (`launchers.install`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

TOOLS = ("py-spy",)


def host_tools() -> dict[str, Path]:
    """name -> the host's program, for each tool this installation has (beside the interpreter,
    else on the PATH)."""
    out: dict[str, Path] = {}
    for name in TOOLS:
        beside = Path(sys.executable).parent / name
        found = str(beside) if beside.is_file() else shutil.which(name)
        if found:
            out[name] = Path(found)
    return out
