"""The command line's smaller points a new user met (#24, item 8): `ranks get`'s tables fit the
terminal (columns left out by priority, the rank's name and status last; `-o wide` shows all; and
so do `list`, `top nodes` and `projects`), and
`ranks logs --rank R` on an MPIJob splits the launcher's output by its rank prefixes. Real `ranks`
processes against simcluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.scenarios.nodes import gpu_nodes
from tests.snapshots.test_views import load, objects
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]


def ranks(*args: str, kubeconfig: Path, columns: int | None = None,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_")) and k != "COLUMNS"}
    env.update(RANKS_CONFIG="", NO_COLOR="1")
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def passive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    """The snapshot tests' fixed objects: a 4-rank PyTorchJob, a failed one with 8 events."""
    with sim_in_thread(components=(), workdir=tmp_path_factory.mktemp("sim")) as t:
        t.call(load, t.sim, objects())
        yield t


def section(out: str, first: str) -> list[str]:
    """The lines of `out` from the one starting with `first` to the next empty line."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith(first))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


# -- 4. ranks get fits the terminal -------------------------------------------------------------------


def test_get_s_rank_table_leaves_out_columns_by_priority_to_fit_80_columns(passive: ThreadedSimCluster) -> None:
    kc = passive.sim.kubeconfig_path
    r = ranks("get", "llama-finetune", "-p", "team-a", kubeconfig=kc, columns=80)
    assert r.returncode == 0, r.stderr
    table = section(r.stdout, "ROLE")
    assert all(cell_len(ln) <= 80 for ln in table), "\n".join(table)
    head = table[0].split()
    assert head[:2] == ["ROLE", "RANK"] and "STATUS" in head and "POD" in head, head
    assert "MEM" not in head and "LOSS" not in head, head  # the first to go
    assert [ln.split()[0] for ln in table[1:]] == ["master-0", "worker-0", "worker-1", "worker-2"]
    assert "-o wide shows every column" in r.stderr and "GPU MEM" in r.stderr, r.stderr

    # the narrowest terminal: the rank's name and its status stay
    r = ranks("get", "llama-finetune", "-p", "team-a", kubeconfig=kc, columns=20)
    assert section(r.stdout, "ROLE")[0].split() == ["ROLE", "STATUS"], r.stdout

    # -o wide: every column, whatever the terminal
    r = ranks("get", "llama-finetune", "-p", "team-a", "-o", "wide", kubeconfig=kc, columns=80)
    wide = section(r.stdout, "ROLE")[0]
    for name in ("POD", "RESTARTS", "GPU MEM", "LAST LOG", "STEP", "LOSS", "AGE", "IP", "LEAD"):
        assert name in wide, (name, wide)
    assert "left out" not in r.stderr

    # piped (no terminal, no COLUMNS): every column, for scripts
    r = ranks("get", "llama-finetune", "-p", "team-a", kubeconfig=kc)
    assert "GPU MEM" in section(r.stdout, "ROLE")[0] and "left out" not in r.stderr


def test_get_s_events_put_each_message_under_its_event_at_80_columns(passive: ThreadedSimCluster) -> None:
    kc = passive.sim.kubeconfig_path
    r = ranks("get", "bert-crash", "-p", "team-b", kubeconfig=kc, columns=80)
    assert r.returncode == 0, r.stderr
    events = section(r.stdout, "Events:")[1:]
    assert all(cell_len(ln) <= 80 for ln in events), "\n".join(events)
    assert events[0].split() == ["AGE", "TYPE", "REASON", "OBJECT"], events[0]
    text = " ".join(ln.strip() for ln in events)
    for message in ("Back-off restarting failed container pytorch in pod bert-crash-worker-1",
                    "PyTorchJob bert-crash is failed because 1 Worker replica(s) failed."):
        assert message in text, text  # whole
    # wide enough: one line an event, as before
    r = ranks("get", "bert-crash", "-p", "team-b", kubeconfig=kc, columns=200)
    events = section(r.stdout, "Events:")[1:]
    assert events[0].split() == ["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"] and len(events) == 9, events


def test_list_top_nodes_and_projects_leave_out_columns_by_priority_to_fit(passive: ThreadedSimCluster) -> None:
    """`ranks list -A` (the README's first command) wrapped every row on an 80-column terminal as
    soon as a status said more than one word; its tables, `top nodes`' and `projects'` now leave
    out columns as `get`'s do: what names a row and its status stay."""
    kc = passive.sim.kubeconfig_path
    names = ["mnist-quick", "xgb-churn", "big-pretrain", "hvd-interactive", "llama-finetune", "bert-crash", "resnet-tf"]
    cases = [(("list", "-A"), ["PROJECT", "NAME", "STATUS", "RANKS"], "KIND, AGE, GPUS, GPU UTIL left out"),
             (("top", "nodes"), ["NODE", "GPUS", "STATUS"], "GPU MODEL, POOL, GPU MEM, ALLOCATED, GPU UTIL left out"),
             (("projects",), ["PROJECT", "GPU QUOTA", "GPUS ALLOCATED", "GPU UTIL"], "NAMESPACE, PENDING, RUNNING left out")]
    for args, kept, note in cases:
        r = ranks(*args, kubeconfig=kc, columns=50)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert all(cell_len(ln) <= 50 for ln in lines), r.stdout
        header = [h for h in lines[0].split("  ") if h.strip()]
        assert [h.strip() for h in header] == kept, lines[0]
        assert f"ranks: note: {note} to fit 50 columns (-o wide shows every column)" in r.stderr, r.stderr
    listed = ranks("list", "-A", kubeconfig=kc, columns=50).stdout.splitlines()[1:]
    assert [ln.split()[1] for ln in listed] == names, listed

    # a table that fits once its gaps narrow to two spaces keeps every column
    r = ranks("list", "-A", kubeconfig=kc, columns=80)
    assert "KIND" in r.stdout.splitlines()[0] and "left out" not in r.stderr, (r.stdout, r.stderr)
    assert all(cell_len(ln) <= 80 for ln in r.stdout.splitlines()), r.stdout
    # -o wide, and piped output: every column
    for args, columns in ((("list", "-A", "-o", "wide"), 50), (("list", "-A"), None)):
        r = ranks(*args, kubeconfig=kc, columns=columns)
        assert "KIND" in r.stdout.splitlines()[0] and "left out" not in r.stderr, (args, r.stdout, r.stderr)
    r = ranks("top", "nodes", kubeconfig=kc)
    assert "GPU MODEL" in r.stdout.splitlines()[0] and "left out" not in r.stderr, r.stdout


# -- 5. ranks logs --rank on an MPIJob: the launcher's output split by its rank prefixes ------------


# (pods without namespaces of their own: the simulated mpirun and horovodrun, whose workers need no
# sshd, with both launchers' tags; Open MPI 5's own are in tests/unit/test_rank_tags.py and
# tests/simcluster/test_real_mpi.py)
SIM = pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "exec"), pod_namespaces=False)
RANK_SAYS = "sh -c 'R=${OMPI_COMM_WORLD_RANK:-$HOROVOD_RANK}; echo out of $R; echo err of $R >&2'"


def mpijob(k8s: Any, name: str, launch: str) -> None:
    """A launcher whose command is `launch` (under sh) and two 1-slot workers that wait: the
    launcher's real simulated mpirun/horovodrun reaches them through pods/exec."""
    client, api = k8s

    def c(role: str, cmd: list[str] | None) -> dict[str, Any]:
        out: dict[str, Any] = {"name": role, "image": "registry.local/train:1"}
        if cmd:
            out["command"] = cmd
        return out

    body = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": "default"},
            "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                    c("launcher", ["sh", "-c", f"echo the launcher starts; {launch}"])]}}},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [
                    c("worker", ["sh", "-c", "echo worker $HOSTNAME own line; sleep infinity"])]}}}}}}
    client.CustomObjectsApi(api).create_namespaced_custom_object("kubeflow.org", "v2beta1", "default", "mpijobs",
                                                                  body)


def launcher_done(k8s: Any, name: str) -> None:
    client, api = k8s
    core = client.CoreV1Api(api)
    sel = f"training.kubeflow.org/job-name={name},training.kubeflow.org/job-role=launcher"

    def done() -> bool:
        pods = core.list_namespaced_pod("default", label_selector=sel).items
        assert not any(p.status.phase == "Failed" for p in pods), [p.status for p in pods]
        return any(p.status.phase == "Succeeded" for p in pods)

    wait_for(done, timeout=60, what=f"{name}'s launcher to finish")


@SIM
@pytest.mark.parametrize(("launcher", "tag"), [
    pytest.param(f"mpirun --tag-output -np 2 {RANK_SAYS}", "[1,{rank}]<{stream}>:", id="mpirun"),
    pytest.param(f"horovodrun -np 2 -H tagged-worker-0:1,tagged-worker-1:1 {RANK_SAYS}", "[{rank}]<{stream}>:",
                 id="horovodrun"),
])
def test_logs_rank_1_of_an_mpijob_is_what_the_launcher_tagged_rank_1_and_the_worker_s_own(
        simcluster: ThreadedSimCluster, k8s: Any, launcher: str, tag: str) -> None:
    for node in gpu_nodes(2, 8):
        simcluster.call(simcluster.sim.apply, node)
    mpijob(k8s, "tagged", launcher)
    launcher_done(k8s, "tagged")
    kc = simcluster.sim.kubeconfig_path
    every = ranks("logs", "tagged", "-p", "default", kubeconfig=kc)
    assert every.returncode == 0, every.stderr
    for rank in (0, 1):
        for stream in ("stdout", "stderr"):
            assert tag.format(rank=rank, stream=stream) in every.stdout, every.stdout

    r = ranks("logs", "tagged", "-p", "default", "--rank", "1", kubeconfig=kc)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    launcher_lines = sorted(ln.split("] ", 1)[1] for ln in lines if ln.startswith("[launcher]"))
    assert launcher_lines == [tag.format(rank=1, stream="stderr") + "err of 1",
                              tag.format(rank=1, stream="stdout") + "out of 1"], r.stdout
    assert [ln.split("] ", 1)[1] for ln in lines if ln.startswith("[worker-1]")] == \
        ["worker tagged-worker-1 own line"], r.stdout
    assert len(lines) == 3, r.stdout  # nothing of rank 0, nor the launcher's own line

    r = ranks("logs", "tagged", "-p", "default", "--rank", "1", "-o", "json", kubeconfig=kc)
    docs = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert sorted((d["label"], d["rank"], d["stream"]) for d in docs) == [
        ("launcher", 1, "stderr"), ("launcher", 1, "stdout"), ("worker-1", 1, None)], docs
