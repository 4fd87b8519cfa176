"""Issue #13: a launch typed in an MPIJob's launcher pod, to every rank's first line.

simcluster runs as `ranks sim` in its own process (every component: operators, the kubelet's
pods as local processes, pods/exec); this process holds a shell in the launcher pod (pods/exec,
`sh` reading its stdin) and types `horovodrun -np 8 python train.py` into it: horovodrun reads
the operator's hostfile (2 workers x 4 slots) and starts each rank through pods/exec in its worker.

Figures:
1. launch: the line written to the shell -> the start line of all 8 ranks on the shell's output,
   RUNS launches (the first one cold: each pod compiles the launcher's modules once)   p50 <= 1.5 s
   (also: to the first line of any rank)
2. launcher start-up: the `horovodrun` wrapper to its exit (`--version`: interpreter, imports)
"""

from __future__ import annotations

import re
import statistics
import subprocess
import time

import pytest
from kubernetes import client, config
from kubernetes.stream import stream

from simcluster.node.launchers import install
from tests.perf.results import record

pytestmark = pytest.mark.timeout(300)

NP = 8
RUNS = 7
GOAL = 1.5
START = re.compile(rb"^\[(\d+)\]<stdout>:rank \d+/8 \(local \d+\) starting on ", re.M)


def mpijob(name: str) -> dict:
    def spec(n: int, c: dict) -> dict:
        return {"replicas": n, "template": {"spec": {"containers": [c]}}}

    return {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": "default"},
        "spec": {"slotsPerWorker": 4, "mpiReplicaSpecs": {
            "Launcher": spec(1, {"name": "launcher", "image": "x", "command": ["sleep", "infinity"]}),
            "Worker": spec(2, {"name": "worker", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}),
        }},
    }


def test_horovodrun_np8_to_every_rank(sim_process, tmp_path):
    sim = sim_process("--scenario", "empty", "--nodes", "2", "--gpus-per-node", "8")
    api = config.new_client_from_config(config_file=str(sim.kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs", mpijob("lat"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod("default", label_selector="training.kubeflow.org/job-name=lat").items
        if len(pods) == 3 and all(p.status.phase == "Running" for p in pods):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the MPIJob's pods did not run")
    launcher = next(p.metadata.name for p in pods if "-launcher" in p.metadata.name)
    shell = stream(core.connect_get_namespaced_pod_exec, launcher, "default", command=["sh"], stdin=True,
                   stdout=True, stderr=True, tty=False, _preload_content=False)
    times: list[float] = []
    firsts: list[float] = []  # to the first line of any rank
    try:
        for run in range(RUNS):
            out = b""
            shell.write_stdin(f"horovodrun -np {NP} python train.py --steps 2 --step-seconds 0.3; echo END-{run}\n")
            t0 = time.perf_counter()
            first: float | None = None
            while first is None:
                shell.update(timeout=0.01)
                chunk = shell.read_stdout(timeout=0)
                if chunk:
                    out += chunk.encode() if isinstance(chunk, str) else chunk
                    started = len(set(START.findall(out)))
                    if started and len(firsts) == run:
                        firsts.append(time.perf_counter() - t0)
                    if started == NP:
                        first = time.perf_counter() - t0
                assert time.perf_counter() - t0 < 30, (out, shell.read_stderr())
            times.append(first)
            end = f"END-{run}".encode()
            while end not in out:
                shell.update(timeout=0.05)
                chunk = shell.read_stdout(timeout=0)
                if chunk:
                    out += chunk.encode() if isinstance(chunk, str) else chunk
                assert time.perf_counter() - t0 < 60, out
            assert out.count(b"<stdout>:rank ") >= NP * 4, out  # start, 2 steps and done of every rank
    finally:
        shell.close()
        api.close()
    warm = times[1:]
    # the launcher alone: interpreter start-up and imports
    bin_dir = install(tmp_path / "bin")
    starts = []
    for _ in range(10):
        t = time.perf_counter()
        subprocess.run([str(bin_dir / "horovodrun"), "--version"], capture_output=True, check=True, timeout=10)
        starts.append(time.perf_counter() - t)
    print(f"\n[bench launch] horovodrun -np {NP} python train.py, line typed -> first line of all {NP} ranks: "
          f"cold {times[0]:.2f} s, warm p50 {statistics.median(warm):.2f} s, max {max(warm):.2f} s "
          f"(goal p50 <= {GOAL} s); runs {', '.join(f'{t:.2f}' for t in times)}; the first rank's line after "
          f"p50 {statistics.median(firsts[1:]):.2f} s")
    print(f"[bench launch] launcher start-up (horovodrun --version through its wrapper): "
          f"p50 {statistics.median(starts) * 1000:.0f} ms, min {min(starts) * 1000:.0f} ms")
    p50 = statistics.median(warm)
    record(f"horovodrun -np {NP}: line typed -> every rank's first line, warm p50", f"<= {GOAL} s", round(p50, 3), "s",
           met=p50 <= GOAL, note=f"{RUNS - 1} warm runs, max {max(warm):.2f} s; the first rank's line after "
                                  f"p50 {statistics.median(firsts[1:]):.2f} s")
    record(f"horovodrun -np {NP}: line typed -> every rank's first line, cold", f"<= {2 * GOAL} s",
           round(times[0], 3), "s", met=times[0] <= 2 * GOAL,
           note="the first launch: each pod compiles the launcher's modules once")
    assert p50 <= GOAL
    assert times[0] <= 2 * GOAL
