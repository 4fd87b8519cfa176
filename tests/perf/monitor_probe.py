"""Run the live Monitor (LIST+WATCH) against a cluster for a while and report its costs as JSON.

    python -m tests.perf.monitor_probe KUBECONFIG SECONDS
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import sys
import time

from monitors.connection import load_cluster_config
from monitors.monitor import Monitor


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main(kubeconfig: str, seconds: float) -> dict:
    cfg = load_cluster_config(kubeconfig)
    m = Monitor(cfg, events=False)
    gc.collect()
    rss_before = rss_mb()  # the interpreter and its libraries, before any object is listed
    changes = 0

    def count(diff) -> None:
        nonlocal changes
        changes += len(diff.workloads.changed) + len(diff.workloads.added)

    t0 = time.monotonic()
    await m.start()
    await m.wait_synced(300)
    sync_s = time.monotonic() - t0
    m.subscribe(count)
    gc.collect()
    rss_synced = rss_mb()
    pods = len(m.model.pods)
    lists_after_sync = m.list_requests
    await asyncio.sleep(2)
    c0, w0 = cpu_s(), time.monotonic()
    await asyncio.sleep(seconds)
    cpu = (cpu_s() - c0) / (time.monotonic() - w0)
    gc.collect()
    out = {
        "sync_s": round(sync_s, 2), "pods": pods, "workloads": len(m.model.workloads),
        "rss_synced_mb": round(rss_synced, 1), "rss_end_mb": round(rss_mb(), 1),
        "rss_baseline_mb": round(rss_before, 1), "model_mb": round(rss_mb() - rss_before, 1),
        "cpu_fraction": round(cpu, 3), "lists_during_steady_state": m.list_requests - lists_after_sync,
        "workload_updates": changes,
    }
    await m.stop()
    return out


if __name__ == "__main__":
    os.environ.pop("KUBECONFIG", None)
    print(json.dumps(asyncio.run(main(sys.argv[1], float(sys.argv[2])))))
