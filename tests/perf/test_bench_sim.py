"""#3 benchmarks: demo start-up, a 64-rank PyTorchJob to Running, and 64 ranks x 1,000 lines/s of logs."""

from __future__ import annotations

import asyncio
import time

import pytest

from simcluster import SimCluster
from simcluster.scenarios.nodes import gpu_nodes

WRITER = (
    "import sys,time\n"
    "r=int(sys.argv[1]); n=int(sys.argv[2]); rate=int(sys.argv[3]); t0=time.monotonic(); i=0\n"
    "out=sys.stdout\n"
    "while i<n:\n"
    "    due=int((time.monotonic()-t0)*rate)+1\n"
    "    while i<min(due,n):\n"
    "        out.write(f'rank={r} seq={i} payload=abcdefghijklmnopqrstuvwxyz0123456789\\n'); i+=1\n"
    "    out.flush(); time.sleep(0.01)\n"
)


def pytorchjob(name: str, workers: int, command: list[str], *, gpus: int = 0) -> dict:
    def rs(n: int) -> dict:
        c = {"name": "pytorch", "image": "x", "command": command}
        if gpus:
            c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [c]}}}

    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"pytorchReplicaSpecs": {"Master": rs(1), "Worker": rs(workers)}}}


async def test_demo_ready_time(tmp_path):
    """Ready = serving, and every demo workload's pods created and Running (or already finished;
    the gang that cannot fit stays Pending by design)."""
    t = time.perf_counter()
    sim = SimCluster(scenario="demo", workdir=tmp_path / "sim")
    await sim.start()
    serving = time.perf_counter() - t
    try:
        expected = 29  # the pods demo_workloads() asks for (9 jobs)
        while time.perf_counter() - t < 30:
            pods = [p for p in sim.store.objects(("", "pods"))
                    if "training.kubeflow.org/job-name" in p["metadata"].get("labels", {})]
            phases = [(p["metadata"]["labels"]["training.kubeflow.org/job-name"], p["status"].get("phase"))
                      for p in pods]
            if len(pods) >= expected and all(ph != "Pending" or job == "big-pretrain" for job, ph in phases):
                break
            await asyncio.sleep(0.02)
        ready = time.perf_counter() - t
        print(f"\n[bench sim] demo scenario: serving after {serving:.2f} s, all {len(pods)} workload pods "
              f"placed and Running after {ready:.2f} s")
        assert len(pods) >= expected
        assert ready <= 3.0
    finally:
        await sim.stop()


async def _running(sim: SimCluster, job: str, n: int, timeout: float) -> float:
    t = time.perf_counter()
    while time.perf_counter() - t < timeout:
        pods = [p for p in sim.store.objects(("", "pods"), "default")
                if p["metadata"].get("labels", {}).get("training.kubeflow.org/job-name") == job]
        if len(pods) == n and all(p.get("status", {}).get("phase") == "Running" for p in pods):
            return time.perf_counter() - t
        await asyncio.sleep(0.05)
    raise AssertionError(f"{job}: not all {n} pods Running after {timeout} s")


async def test_64_ranks_running(tmp_path):
    sim = SimCluster(workdir=tmp_path / "sim", components=("operators", "scheduler", "kubelet"))
    await sim.start()
    try:
        for node in gpu_nodes(8, 8):
            sim.apply(node)
        t = time.perf_counter()
        sim.apply(pytorchjob("big", 63, ["sleep", "60"], gpus=1))
        took = await _running(sim, "big", 64, 60)
        total = time.perf_counter() - t
        print(f"\n[bench sim] 64-rank PyTorchJob: all 64 pods Running {total:.2f} s after apply")
        assert took <= 5.0
    finally:
        await sim.stop()


@pytest.mark.timeout(600)
async def test_64_ranks_1000_lines_per_second_no_loss(tmp_path):
    import aiohttp

    ranks, rate, seconds = 64, 1000, 30
    n = rate * seconds
    sim = SimCluster(workdir=tmp_path / "sim", components=("operators", "scheduler", "kubelet"))
    await sim.start()
    try:
        for node in gpu_nodes(8, 8):
            sim.apply(node)
        script = tmp_path / "writer.py"
        script.write_text(WRITER)
        import sys

        cmd = ["sh", "-c", f'exec {sys.executable} {script} "$RANK" {n} {rate}']
        sim.apply(pytorchjob("logs", ranks - 1, cmd))
        await _running(sim, "logs", ranks, 60)
        t0 = time.perf_counter()
        deadline = t0 + seconds + 120
        while time.perf_counter() < deadline:
            pods = [p for p in sim.store.objects(("", "pods"), "default")
                    if p["metadata"].get("labels", {}).get("training.kubeflow.org/job-name") == "logs"]
            if pods and all(p["status"].get("phase") in ("Succeeded", "Failed") for p in pods):
                break
            await asyncio.sleep(0.5)
        elapsed = time.perf_counter() - t0
        lost = 0
        total_bytes = 0
        headers = {"Authorization": f"Bearer {sim.admin_token}"}
        async with aiohttp.ClientSession() as session:
            for p in pods:
                name = p["metadata"]["name"]
                url = f"{sim.url}/api/v1/namespaces/default/pods/{name}/log"
                async with session.get(url, headers=headers, ssl=False) as resp:
                    body = await resp.read()
                total_bytes += len(body)
                seqs = [int(line.split(b"seq=")[1].split(b" ")[0]) for line in body.splitlines() if b"seq=" in line]
                lost += n - len(set(seqs))
        print(f"\n[bench sim] {ranks} ranks x {rate} lines/s x {seconds} s: {ranks * n} lines "
              f"({total_bytes / 1e6:.0f} MB) written in {elapsed:.1f} s; lost {lost}")
        assert lost == 0
    finally:
        await sim.stop()


