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
fail on purpose after step `--fail-step` (default 1); SIGTERM and SIGINT end it quietly
(143, 130). Unknown options are ignored (e.g. a marker to find the processes by).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import socket
import sys
import time


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
    args, _unknown = p.parse_known_args(argv)

    def stop(signum: int, frame: object) -> None:
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    rank, size, local = identity()
    host = os.environ.get("HOSTNAME") or socket.gethostname()
    who = f"rank {rank}/{size} (local {local})"
    print(f"{who} starting on {host}: {args.steps} steps", flush=True)
    loss = 2.5 + 0.1 * (rank % 7)
    for step in range(1, args.steps + 1):
        start = time.monotonic()
        busy_until(start + max(0.0, min(1.0, args.busy)) * args.step_seconds)
        left = start + args.step_seconds - time.monotonic()
        if left > 0:
            time.sleep(left)
        loss *= math.exp(-0.25) * (1 + 0.02 * math.sin(step * 1.7 + rank))
        print(f"{who} step {step}/{args.steps} loss {loss:.3f} on {host}", flush=True)
        if args.fail_rank == rank and step >= args.fail_step:
            print(f"{who}: failing on purpose with exit code {args.exit_code}", file=sys.stderr, flush=True)
            return args.exit_code
    print(f"{who} done on {host}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
