"""The `ranks` command line the user can paste on their own machine (hints, banners, `free_with`
lines): light at import, so that a one-shot command's answer does not import the shell."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from typing import TYPE_CHECKING

from monitors.sanitize import clean

from .ssh import SSH_SESSION_ENV

if TYPE_CHECKING:
    from monitors.connection import ClusterConfig


def _own_program() -> str | None:
    """This process's `ranks` executable (absolute), when it was started as one (not `python -m`)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) not in ("ranks", "kubectl-ranks") or not os.access(argv0, os.X_OK):
        return None
    return os.path.abspath(argv0)


def ranks_command(cfg: ClusterConfig | None = None) -> str | None:
    """How the banner's hints run ranks on the user's machine, ready to paste in another terminal:
    `ranks` when that is the command on the PATH, else this program's own path (`make demo` runs
    `.venv/bin/ranks`); with `--kubeconfig`/`--context` when this ranks was pointed at them (the
    demo's kubeconfig). None when there is no such command to offer (over the SSH door the user's
    machine is another one)."""
    if os.environ.get(SSH_SESSION_ENV):
        return None
    on_path, own = shutil.which("ranks"), _own_program()
    if on_path is not None and (own is None or os.path.realpath(on_path) == os.path.realpath(own)):
        parts = ["ranks"]
    elif own is not None:
        parts = [own]
    else:
        return None
    if cfg is not None and cfg.kubeconfig_arg:
        parts += ["--kubeconfig", os.path.abspath(cfg.kubeconfig_arg)]
    if cfg is not None and cfg.context_arg:
        parts += ["--context", cfg.context_arg]
    return " ".join(shlex.quote(clean(p)) for p in parts)
