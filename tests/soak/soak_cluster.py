"""The soak's cluster, in its own process (run by tests/soak/test_soak.py):

    python -m tests.soak.soak_cluster WORKDIR PODS RANKS RATE BURST CHURN

simcluster without TLS: the `scale` scenario's PODS pods (API objects only) and a PyTorchJob
`soak/soak-train` of RANKS real pods run by the kubelet. Each rank waits for the file
`WORKDIR/go`, then writes BURST numbered lines as fast as the kubelet takes them (enough to fill
the dashboard's bounded log buffers early) and RATE lines/s after that. CHURN pod events/s are
written to the scale pods from the cluster's loop (half status changes as a kubelet makes them,
`churn_pod`, half a label changed as a controller would), each a watch event.

Prints `ready KUBECONFIG` once every rank runs; on SIGTERM, one JSON line with the figures
(`churn_events`, `churn_late`: ticks that fell behind by more than a second), then exits.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
from pathlib import Path
from typing import Any

from simcluster import SimCluster
from simcluster.scenarios.scale import churn_pod
from tests.kubeflow_objects import TK, job

NAMESPACE = "soak"
JOB = "soak-train"
TICK = 0.02  # the churn writes the events due every 20 ms

WRITER = r'''
import os, sys, time
rank, rate, burst, go = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pad = "." * 60
while not os.path.exists(go):
    time.sleep(0.2)
w = sys.stdout.write
seq = 0
while seq < burst:
    n = min(25, burst - seq)  # (250 lines/s a rank: the burst takes ~13 s)
    w("".join(f"rank {rank} seq {seq + k} step {seq + k} loss {1 / (seq + k + 1):.6f} {pad}\n" for k in range(n)))
    sys.stdout.flush()
    seq += n
    time.sleep(0.1)
nxt = time.time()
while True:
    w(f"rank {rank} seq {seq} step {seq} loss {1 / (seq + 1):.6f} {pad}\n")
    sys.stdout.flush()
    seq += 1
    nxt += 1 / rate
    time.sleep(max(0.0, nxt - time.time()))
'''


def rank_pods(node: str, ranks: int, rate: float, burst: int, go: Path) -> list[dict[str, Any]]:
    pods = []
    for i in range(ranks):
        rt, idx = ("master", 0) if i == 0 else ("worker", i - 1)
        pods.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{JOB}-{rt}-{idx}", "namespace": NAMESPACE, "labels": {
                TK + "job-name": JOB, TK + "replica-type": rt, TK + "replica-index": str(idx),
                TK + "operator-name": "pytorchjob-controller"}},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [{
                "name": "pytorch", "image": "soak",
                "command": [sys.executable, "-c", WRITER, str(i), str(rate), str(burst), str(go)]}]},
        })
    return pods


async def churn(sim: SimCluster, rate: float, stats: dict[str, int]) -> None:
    """`rate` pod events/s on the scale pods (never the soak job's), kept to the rate when the loop
    is late (the events due are written together)."""
    rt = sim.registry.get("", "v1", "pods")
    assert rt is not None
    keys = [k for k in sim.store.sorted_keys(rt.key) if k[0] != NAMESPACE]
    rng = random.Random(17)
    loop = asyncio.get_running_loop()
    start = loop.time()
    while True:
        await asyncio.sleep(TICK)
        due = int((loop.time() - start) * rate) - stats["churn_events"]
        if due > rate:
            stats["churn_late"] += 1
        for _ in range(due):
            ns, name = keys[rng.randrange(len(keys))]
            cur = sim.store.find(rt.key, ns, name)
            if cur is None:
                continue
            n = stats["churn_events"]
            if n % 2:
                obj = churn_pod(cur.obj, rng)
            else:  # (stored objects are shared: copy down to the labels)
                obj = dict(cur.obj)
                meta = obj["metadata"] = dict(obj["metadata"])
                meta["labels"] = {**(meta.get("labels") or {}), "soak.ranks/tick": str(n)}
            sim.store.update(rt, obj, whole=True)
            stats["churn_events"] += 1


async def main(workdir: Path, pods: int, ranks: int, rate: float, burst: int, churn_rate: float) -> None:
    nodes = max(8, pods // 40)
    sim = SimCluster(scenario="scale", nodes=nodes, pods=pods, tls=False, components=("kubelet",),
                     workdir=workdir / "sim")
    await sim.start()
    stats = {"churn_events": 0, "churn_late": 0}
    try:
        sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        sim.apply(job("PyTorchJob", JOB, NAMESPACE, {"Master": 1, "Worker": ranks - 1}, gpus=0,
                      conditions=[("Created", ""), ("Running", "")]))
        node = sim.store.sorted_keys(("", "nodes"))[0][1]
        for pod in rank_pods(node, ranks, rate, burst, workdir / "go"):
            sim.apply(pod)
        rt = sim.registry.get("", "v1", "pods")
        assert rt is not None
        for _ in range(600):
            running = sum(1 for st in sim.store.items(rt.key, NAMESPACE)
                          if (st.obj.get("status") or {}).get("phase") == "Running")
            if running == ranks:
                break
            await asyncio.sleep(0.1)
        else:
            raise RuntimeError(f"only {running} of {ranks} ranks running after 60 s")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        task = loop.create_task(churn(sim, churn_rate, stats)) if churn_rate > 0 else None
        print("ready", sim.kubeconfig_path, flush=True)
        await stop.wait()
        if task is not None:
            task.cancel()
    finally:
        await sim.stop()
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    asyncio.run(main(Path(a[0]), int(a[1]), int(a[2]), float(a[3]), int(a[4]), float(a[5])))
