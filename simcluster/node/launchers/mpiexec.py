"""Simulated `mpiexec`: Open MPI's `mpirun` under its other name (see `mpirun`)."""

from __future__ import annotations

import sys

if __package__:
    from . import mpirun
else:  # run by path from the wrapper
    import mpirun  # type: ignore[no-redef]

if __name__ == "__main__":
    sys.exit(mpirun.main(prog="mpiexec"))
