"""Simulated `mpiexec`: Open MPI's `mpirun` under its other name (see `mpirun`)."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # (not typing's: importing it costs a launch ~3 ms)
if TYPE_CHECKING or __package__:  # (the type checker reads the package's modules)
    from . import mpirun
else:  # run by path from the wrapper
    import mpirun

if __name__ == "__main__":
    sys.exit(mpirun.main(prog="mpiexec"))
