"""`ranks stacks` (#28) on simcluster, as a user runs it: a 16-rank PyTorchJob whose rank 5 hangs in
a function of its own (train.py `--hang-rank 5 --hang-in checkpoint`) while the other 15 wait in the
step's all-reduce; py-spy (the simulated image's) read through pods/exec, the ranks told from each
process's own RANK. Text shows 15 ranks in the collective's frame and 1 apart, JSON `groups` with
`ranks` and `frames`; an image without py-spy is one line saying so; a py-spy that never answers
is abandoned after --request-timeout, the rank not read named; bad input is one line and a code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.waiting import one_line_error, wait_for

ROOT = Path(__file__).resolve().parents[2]
NS = "stacks-team"
PSA_NS = "stacks-guarded"
TRAIN = ["python", "-u", "train.py", "--steps", "100000", "--step-seconds", "0.3", "--busy", "0.05"]
HANG = ["--hang-rank", "5", "--hang-in", "checkpoint", "--hang-step", "2"]


def pytorchjob(name: str, workers: int, command: list[str], env: dict[str, str] | None = None,
               worker_env: dict[str, str] | None = None) -> dict[str, Any]:
    def replica(n: int, extra: dict[str, str] | None) -> dict[str, Any]:
        c: dict[str, Any] = {"name": "pytorch", "image": "nvcr.io/nvidia/pytorch:24.10-py3", "command": command,
                             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        merged = {**(env or {}), **(extra or {})}
        if merged:
            c["env"] = [{"name": k, "value": v} for k, v in merged.items()]
        return {"replicas": n, "restartPolicy": "Never",
                "template": {"spec": {"containers": [c], "terminationGracePeriodSeconds": 1}}}

    specs = {"Master": replica(1, None), **({"Worker": replica(workers, worker_env)} if workers else {})}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"pytorchReplicaSpecs": specs, "runPolicy": {"cleanPodPolicy": "None"}}}


def mpijob() -> dict[str, Any]:
    """4 ranks on 2 workers under the simulated mpirun (reaching them through pods/exec, each rank
    told by its OMPI_COMM_WORLD_RANK); rank 2 deadlocks on a lock of its own."""
    def replica(n: int, command: list[str] | None) -> dict[str, Any]:
        c: dict[str, Any] = {"name": "mpi", "image": "mpioperator/mpi-pi:openmpi"}
        if command:
            c["command"] = command
        return {"replicas": n, "template": {"spec": {"containers": [c], "terminationGracePeriodSeconds": 1}}}

    launch = ["mpirun", "--allow-run-as-root", "-np", "4", *TRAIN, "--hang-rank", "2", "--hang-in", "lock"]
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "mpi-hangs", "namespace": NS},
            "spec": {"slotsPerWorker": 2, "runPolicy": {"cleanPodPolicy": "None"},
                     "mpiReplicaSpecs": {"Launcher": replica(1, launch), "Worker": replica(2, None)}}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    fake = tmp_path_factory.mktemp("fake-pyspy")
    (fake / "py-spy").write_text("#!/bin/sh\nexec sleep 300\n")  # a py-spy that never answers
    (fake / "py-spy").chmod(0o755)
    host_python = str(Path(sys.executable).parent)
    with sim_in_thread(scenario="empty", components=("operators", "scheduler", "kubelet", "exec"),
                       workdir=tmp_path_factory.mktemp("stacks")) as t:
        def setup(sim: Any) -> None:
            for node in gpu_nodes(4, 5):
                sim.apply(node)
            sim.apply(namespace(NS))
            sim.apply(pytorchjob("hangs", 15, [*TRAIN, *HANG]))
            # no py-spy on its PATH: only the system's directories (and the interpreter, by its path)
            sim.apply(pytorchjob("bare", 0, [sys.executable, "-u", "train.py", "--steps", "100000"],
                                 env={"PATH": "/usr/bin:/bin"}))
            # no py-spy, in a namespace whose Pod Security level (baseline) forbids SYS_PTRACE
            sim.apply(namespace(PSA_NS, {"pod-security.kubernetes.io/enforce": "baseline"}))
            guarded = pytorchjob("bare", 0, [sys.executable, "-u", "train.py", "--steps", "100000"],
                                 env={"PATH": "/usr/bin:/bin"})
            guarded["metadata"]["namespace"] = PSA_NS
            sim.apply(guarded)
            sim.apply(mpijob())
            # its worker's py-spy never answers
            sim.apply(pytorchjob("stuck", 1, TRAIN, worker_env={
                "PATH": f"{fake}:/opt/venv/bin:/usr/local/bin:/usr/bin:/bin:{host_python}"}))
        t.call(setup, t.sim)
        yield t


def ranks(t: ThreadedSimCluster, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(RANKS_CONFIG="", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(t.sim.kubeconfig_path)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL)


SETTLED: dict[int, dict[str, Any]] = {}  # the module's cluster -> its first settled autopsy


def settled(t: ThreadedSimCluster) -> dict[str, Any]:
    """The JSON autopsy once all 16 ranks are read and rank 5 has stopped apart (read until it is,
    once per cluster: a hang stays as it is, so each later test starts from that one)."""
    if id(t) in SETTLED:
        return SETTLED[id(t)]

    def ready() -> dict[str, Any] | None:
        r = ranks(t, "stacks", "hangs", "-p", NS, "-o", "json")
        if r.returncode != 0:
            return None
        data = json.loads(r.stdout)
        if len(data["ranks_read"]) == 16 and [g["ranks"] for g in data["groups"]][:1] == [[5]] and len(
                data["groups"]) == 2:
            return data
        return None

    SETTLED[id(t)] = wait_for(ready, 240, "16 ranks read, rank 5 apart", interval=2)
    return SETTLED[id(t)]


def test_json_groups_fifteen_in_the_collective_one_apart(cluster: ThreadedSimCluster) -> None:
    data = settled(cluster)
    apart, rest = data["groups"]
    assert apart["odd"] and not rest["odd"]
    assert rest["ranks"] == [r for r in range(16) if r != 5]
    names = [f["name"] for f in apart["frames"]]
    assert names[-2:] == ["save_checkpoint", "write_shard"] and names[0] == "<module>", names
    assert [f["name"] for f in rest["frames"]][-2:] == ["all_reduce", "wait_for_peers"]
    assert all(f["file"].endswith("train.py") and isinstance(f["line"], int) for f in rest["frames"])
    assert apart["pods"] == ["worker-4"] and apart["last_log"] and "rank 5/16" in apart["last_log"]
    assert apart["seconds_since_log"] is not None and apart["seconds_since_log"] >= 0
    assert data["tree"][0]["count"] == 16 and data["unread"] == []
    assert {p["rank"]: p["pod"] for p in data["processes"]}[0] == "master-0"


def test_text_shows_the_tree_and_the_odd_rank_first(cluster: ThreadedSimCluster) -> None:
    settled(cluster)
    r = ranks(cluster, "stacks", "hangs", "-p", NS)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith(f"hangs ({NS}): 16 ranks read in ") and out[0].endswith(", 2 groups")
    frames = [line for line in out[1:] if line[:1] in (" ", "!") and "train.py:" in line]
    assert any(line.startswith("!   1 [5]") and "write_shard  train.py:" in line for line in frames), out
    assert any(line.startswith("   15 [0-4,6-15]") and "wait_for_peers  train.py:" in line for line in frames), out
    # the odd branch comes before the collective's
    assert next(i for i, s in enumerate(frames) if "save_checkpoint" in s) < next(
        i for i, s in enumerate(frames) if "all_reduce" in s)
    groups = out[out.index("Groups, smallest first (! an odd one out):") + 1:]
    assert groups[0].startswith("! 1 rank [5] in write_shard (train.py:"), groups
    assert groups[1].startswith("  15 ranks [0-4,6-15] in wait_for_peers (train.py:"), groups
    assert "last log " in groups[0] and "GPU " in groups[0]


def test_chosen_ranks_only(cluster: ThreadedSimCluster) -> None:
    settled(cluster)
    r = ranks(cluster, "stacks", "hangs", "-p", NS, "--rank", "5,6", "--rank", "0", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["ranks_read"] == [0, 5, 6]


def test_an_image_without_py_spy_is_one_line(cluster: ThreadedSimCluster) -> None:
    def refused() -> subprocess.CompletedProcess[str] | None:
        r = ranks(cluster, "stacks", "bare", "-p", NS)
        return r if "py-spy is not in the image" in r.stderr else None

    r = wait_for(refused, 120, "bare's refusal", interval=2)
    one_line_error(r, 1, "py-spy is not in the image", "master-0")


def test_a_py_spy_that_never_answers_is_abandoned_and_named(cluster: ThreadedSimCluster) -> None:
    def read() -> subprocess.CompletedProcess[str] | None:
        r = ranks(cluster, "stacks", "stuck", "-p", NS, "--request-timeout", "3s")
        return r if r.returncode == 0 and "Not read" in r.stdout else None

    r = wait_for(read, 120, "stuck's autopsy", interval=2)
    assert "1 rank read in" in r.stdout.splitlines()[0]
    assert "Not read: rank 1 (worker-0): py-spy did not answer within 3s" in r.stdout


def test_bad_input_is_one_line(cluster: ThreadedSimCluster) -> None:
    one_line_error(ranks(cluster, "stacks", "hangs", "-p", NS, "--rank", "x"), 2, "--rank takes rank numbers")
    one_line_error(ranks(cluster, "stacks", "nothing-here", "-p", NS), 8)
    one_line_error(ranks(cluster, "stacks", "hangs", "-p", NS, "-o", "yaml"), 2)
    settled(cluster)
    one_line_error(ranks(cluster, "stacks", "hangs", "-p", NS, "--rank", "99"), 8, "no process in its pods says")


def test_all_threads_and_native_frames(cluster: ThreadedSimCluster) -> None:
    settled(cluster)
    r = ranks(cluster, "stacks", "hangs", "-p", NS, "--rank", "5,6", "--all-threads", "--native", "-o", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["ranks_read"] == [5, 6]
    assert {g["thread"] for g in data["groups"]} >= {"MainThread"}
    apart = next(g for g in data["groups"] if g["ranks"] == [5])
    names = [f["name"] for f in apart["frames"]]
    assert "write_shard" in names and apart["frames"][-1]["line"] is None, names  # (a native frame innermost)


def test_without_rbac_for_pods_exec_one_line_and_7(cluster: ThreadedSimCluster, tmp_path: Path) -> None:
    """A user who may read the project but not create pods/exec: one line naming who, what and where."""
    settled(cluster)
    cluster.call(cluster.sim.add_namespace_reader, "viewer", [NS])
    kubeconfig = cluster.call(cluster.sim.write_kubeconfig, tmp_path / "viewer.yaml", "viewer")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(RANKS_CONFIG="", NO_COLOR="1")
    r = subprocess.run([sys.executable, "-m", "tui.cli", "stacks", "hangs", "-p", NS, "--kubeconfig", str(kubeconfig)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    line = one_line_error(r, 7, "forbidden")
    assert "viewer" in line and "pods/exec" in line and NS in line, line


def debug_user(t: ThreadedSimCluster, tmp_path: Path, name: str, *, ephemeral: bool) -> dict[str, str]:
    """The environment of a user who may read NS and exec in its pods, and add debug containers or not."""
    from simcluster.apiserver.auth import READ_VERBS, Rule

    rules = [Rule.of(READ_VERBS, namespaces=[NS]), Rule.of(("create", "get"), ["pods/exec"], [""], namespaces=[NS])]
    if ephemeral:
        rules.append(Rule.of(("get", "patch"), ["pods/ephemeralcontainers"], [""], namespaces=[NS]))
    t.call(t.sim.add_user, name, rules=tuple(rules))
    kc = t.call(t.sim.write_kubeconfig, tmp_path / f"{name}.yaml", name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(RANKS_CONFIG="", NO_COLOR="1", KUBECONFIG=str(kc))
    return env


def as_user(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env=env, stdin=subprocess.DEVNULL)


def test_an_image_without_py_spy_is_read_from_a_debug_container(cluster: ThreadedSimCluster, tmp_path: Path) -> None:
    """--image: an ephemeral container beside the training container (SYS_PTRACE, its target the
    training container), as kubectl debug --target; refused in read-only mode and without the verb."""
    wait_for(lambda: "py-spy is not in the image" in ranks(cluster, "stacks", "bare", "-p", NS).stderr, 120,
             "bare running without py-spy", interval=2)
    refused = ranks(cluster, "stacks", "bare", "-p", NS, "--image", "registry.local/py-spy:0.4", "--read-only")
    one_line_error(refused, 1, "read-only mode refuses", "master-0")
    nope = debug_user(cluster, tmp_path, "no-debug", ephemeral=False)
    line = one_line_error(as_user(nope, "stacks", "bare", "-p", NS, "--image", "registry.local/py-spy:0.4"), 7,
                          "cannot patch pods/ephemeralcontainers")
    assert "no-debug" in line and NS in line, line

    config = tmp_path / "config.toml"
    config.write_text('stacks_image = "registry.local/py-spy:0.4"\n')
    config.chmod(0o600)
    ok = {**debug_user(cluster, tmp_path, "debugger", ephemeral=True), "RANKS_CONFIG": str(config)}
    r = as_user(ok, "stacks", "bare", "-p", NS, "-o", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["ranks_read"] == [0] and data["groups"][0]["frames"][-1]["name"] in ("main", "busy_until",
                                                                                      "all_reduce")
    assert "read master-0 from the debug container ranks-stacks-" in r.stderr
    pod = cluster.call(cluster.sim.store.find, ("", "pods"), NS, "bare-master-0").obj
    (debug,) = pod["spec"]["ephemeralContainers"]
    assert debug["image"] == "registry.local/py-spy:0.4" and debug["targetContainerName"] == "pytorch"
    assert debug["securityContext"]["capabilities"]["add"] == ["SYS_PTRACE"]


def test_a_pod_security_level_that_forbids_sys_ptrace_is_one_line(cluster: ThreadedSimCluster) -> None:
    def refused() -> subprocess.CompletedProcess[str] | None:
        r = ranks(cluster, "stacks", "bare", "-p", PSA_NS, "--image", "registry.local/py-spy:0.4")
        return r if "Pod Security" in r.stderr else None

    r = wait_for(refused, 120, "the Pod Security refusal", interval=2)
    line = one_line_error(r, 7, "Pod Security level forbids the debug container's SYS_PTRACE", "baseline",
                          "add py-spy to the training image")
    assert "master-0" in line, line
    pod = cluster.call(cluster.sim.store.find, ("", "pods"), PSA_NS, "bare-master-0").obj
    assert not pod["spec"].get("ephemeralContainers")  # (nothing half-done)


def test_an_mpijob_under_mpirun(cluster: ThreadedSimCluster) -> None:
    """The ranks Open MPI's mpirun started in the workers (over ssh, by their sshd) told by
    OMPI_COMM_WORLD_RANK; the launcher's mpirun named apart; rank 2 in its lock, the others in the
    step's MPI all-reduce."""
    def apart() -> dict[str, Any] | None:
        r = ranks(cluster, "stacks", "mpi-hangs", "-p", NS, "-o", "json")
        data = json.loads(r.stdout) if r.returncode == 0 else None
        ok = data is not None and [g["ranks"] for g in data["groups"]] == [[2], [0, 1, 3]]
        return data if ok else None

    data = wait_for(apart, 180, "mpi-hangs' rank 2 apart", interval=2)
    assert data["groups"][0]["frames"][-1]["name"] == "acquire_lock"
    assert data["groups"][1]["frames"][-1]["name"] == "mpi_all_reduce"
    assert {p["rank"]: p["pod"] for p in data["processes"]} == {0: "worker-0", 1: "worker-0", 2: "worker-1",
                                                                 3: "worker-1"}
    assert any(p["pod"] == "launcher" and p["name"] in ("mpirun", "prterun") for p in data["not_ranks"]), data["not_ranks"]  # (Open MPI 5: prterun)
    assert data["unread"] == []
