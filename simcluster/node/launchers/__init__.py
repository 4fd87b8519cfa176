"""Simulated launchers on every simcluster pod's PATH: `mpirun`, `horovodrun`, `torchrun`, the
GPUs' `nvidia-smi` and a `python` (the host's interpreter). Simulation only, never product behaviour: they let the
interactive loop (shell into a launcher pod, run a launch line by hand, convert) run end to end on
the embedded cluster.

`install(directory)` writes one small wrapper per command into `directory` (the kubelet puts it
first on every container's and exec session's PATH); each wrapper runs the matching module file of
this package with the interpreter simcluster itself runs on, by path, so a launch does not import
the simulator. The launchers use the standard library only and start with `-S` (no site-packages:
about 30 ms less per launch); `python` is the interpreter with its packages. `train.py` here is
the demo's training program (copied into each pod's /workspace).
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# command -> module file in this package (None: the interpreter itself)
COMMANDS: dict[str, str | None] = {
    "mpirun": "mpirun.py",
    "mpiexec": "mpiexec.py",
    "horovodrun": "horovodrun.py",
    "torchrun": "torchrun.py",
    "nvidia-smi": "nvidia_smi.py",
    "python": None,
}


def install(directory: Path) -> Path:
    """Write the wrappers into `directory` (created 0700 if missing); returns it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    python = shlex.quote(sys.executable)
    for name, module in COMMANDS.items():
        if module is None:
            body = f'exec {python} "$@"\n'
        else:
            body = f'exec {python} -S {shlex.quote(str(HERE / module))} "$@"\n'
        path = directory / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text("#!/bin/sh\n" + body)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    return directory
