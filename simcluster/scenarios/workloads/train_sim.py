"""A pretend distributed training process for simcluster's demo: realistic rank logs, tiny CPU.

Reads the operator's env (RANK, WORLD_SIZE, MASTER_ADDR, TF_CONFIG, ...) and prints step / loss /
throughput lines at a per-rank rate. Options make a rank a straggler, fail with a traceback (the
other ranks then wait in their next allreduce, silent, holding their GPUs, as NCCL does), hang
(go silent), or finish.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time


def rank_and_world() -> tuple[int, int]:
    if "TF_CONFIG" in os.environ:
        cfg = json.loads(os.environ["TF_CONFIG"])
        task = cfg.get("task", {})
        order = ["chief", "master", "worker", "ps", "evaluator"]
        cluster = cfg.get("cluster", {})
        idx = 0
        for role in order:
            if role == task.get("type"):
                idx += int(task.get("index", 0))
                break
            idx += len(cluster.get(role, []))
        return idx, sum(len(v) for v in cluster.values())
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=0, help="0: run forever")
    ap.add_argument("--total", type=int, default=0, help="the run's planned steps, printed with each (step 42/5000)")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between steps")
    ap.add_argument("--straggler-rank", type=int, default=-1)
    ap.add_argument("--fail-rank", type=int, default=-1)
    ap.add_argument("--fail-at", type=int, default=10)
    ap.add_argument("--hang-at", type=int, default=-1, help="go silent after this step")
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    rank, world = rank_and_world()
    rng = random.Random(rank)
    interval = args.interval * (2.2 if rank == args.straggler_rank else 1.0) * (1 + 0.05 * rank)
    role = os.environ.get("K_MPI_JOB_ROLE") or ("master" if rank == 0 else "worker")
    print(f"[rank {rank}/{world}] {role} starting on {os.environ.get('HOSTNAME', '?')}; "
          f"master={os.environ.get('MASTER_ADDR', '-')}:{os.environ.get('MASTER_PORT', '-')}", flush=True)
    print(f"[rank {rank}] NCCL INFO Bootstrap : Using eth0:{os.environ.get('POD_IP', '10.244.0.1')}<0>", flush=True)
    step = 0
    while args.steps == 0 or step < args.steps:
        step += 1
        time.sleep(interval)
        loss = 2.5 * math.exp(-step / 400) + rng.uniform(-0.03, 0.03)
        tput = args.batch / interval * rng.uniform(0.93, 1.04)
        of = f"/{args.total}" if args.total else ""
        print(f"[rank {rank}] step {step}{of} loss={loss:.4f} lr=3.0e-04 throughput={tput:.1f} samples/s", flush=True)
        if step % 25 == 0:
            print(f"[rank {rank}] checkpoint saved: /ckpt/step-{step}.pt", flush=True)
        if rank == args.fail_rank and step >= args.fail_at:
            print("Traceback (most recent call last):", file=sys.stderr, flush=True)
            print('  File "train.py", line 212, in <module>', file=sys.stderr, flush=True)
            print("    loss.backward()", file=sys.stderr, flush=True)
            print("RuntimeError: CUDA error: an illegal memory access was encountered", file=sys.stderr, flush=True)
            return 1
        if 0 <= args.fail_rank != rank and step >= args.fail_at:  # (its peer died: the next allreduce never ends)
            print(f"[rank {rank}] NCCL WARN rank {args.fail_rank} is gone; waiting in allreduce (step {step + 1})",
                  flush=True)
            while True:  # (as NCCL does until its watchdog; the GPUs stay held meanwhile)
                time.sleep(3600)
        if args.hang_at >= 0 and step >= args.hang_at:
            print(f"[rank {rank}] waiting for allreduce...", flush=True)
            while True:
                time.sleep(3600)
    print(f"[rank {rank}] training finished after {step} steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
