"""#24 item 4a and 4b: verdicts that match the job while the operators clean up, in their real order.

4a: a job that succeeded is never said to have failed because its operator's clean-up killed the
pods that were still running. simcluster's operators clean up as the real ones do (mpi-operator's
`syncHandler`: the MPIJob is Succeeded once its launcher Job completed, and the next sync deletes
the workers under cleanPodPolicy Running; the training-operator's `ReconcileJobs`: Succeeded once
the master succeeded, then the running pods are deleted). The workers ignore SIGTERM (an MPI
worker's `sleep infinity` stand-in for sshd, a `sh -c` PID 1) and are SIGKILLed when their grace
ends: exit 137. A dashboard watches the whole time (its flight recorder hears every exit).

4b: a PyTorchJob with backoffLimit 0 whose worker-1 fails: the training-operator deletes every pod,
then sets Failed. The failed pod goes at once; the others stay Terminating through their grace
period. In that window `ranks logs --first-failure`, `ranks get` and the dashboard say the job
failed and what is known, never "No rank of pytorchjob/W has failed.".
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.dashboard_kit import make_app
from tests.waiting import pilot_wait, wait_for
from tui.screens.lists import WorkloadsScreen
from tui.screens.workload import WorkloadScreen
from tui.settings import Settings
from tui.widgets.keyed_table import KeyedTable

ROOT = Path(__file__).resolve().parents[2]
NS = "runai-team-a"
IGNORES_TERM = ["sh", "-c", "sleep 600"]  # (sh as PID 1 drops SIGTERM: SIGKILL at the grace's end, 137)


def ranks(kubeconfig: Path, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(XDG_STATE_HOME=str(state), RANKS_CONFIG="", NO_COLOR="1")
    r = subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                       capture_output=True, text=True, timeout=90, env=env, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert 'File "/' not in r.stderr, r.stderr  # (no traceback of ours)
    return r


def container(command: list[str], gpus: int = 1) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "main", "image": "img", "command": command}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return c


def mpijob(name: str) -> dict[str, Any]:
    worker = {"name": "mpi", "image": "img", "resources": {"limits": {"nvidia.com/gpu": "1"}}}  # sshd's stand-in
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"slotsPerWorker": 1, "runPolicy": {"cleanPodPolicy": "Running"}, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "mpi", "image": "img", "command": ["sh", "-c", "sleep 4; echo trained"]}]}}},
                "Worker": {"replicas": 2, "template": {"spec": {"terminationGracePeriodSeconds": 2,
                                                                "containers": [worker]}}}}}}


def pytorchjob(name: str, *, clean: str, backoff: int | None, master: list[str], worker: list[str],
               workers: int = 1, grace: int = 2) -> dict[str, Any]:
    def replica(n: int, command: list[str]) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": "Never", "template": {"spec": {
            "terminationGracePeriodSeconds": grace, "containers": [
                {**container(command), "name": "pytorch"}]}}}

    run: dict[str, Any] = {"cleanPodPolicy": clean}
    if backoff is not None:
        run["backoffLimit"] = backoff
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"runPolicy": run, "pytorchReplicaSpecs": {"Master": replica(1, master),
                                                                "Worker": replica(workers, worker)}}}


def setup(sim: Any) -> None:
    for node in gpu_nodes(2, 4, pool="main"):
        sim.apply(node)
    sim.apply(namespace(NS, {"runai/queue": "team-a"}))


def condition(sim: Any, plural: str, name: str, ctype: str) -> bool:
    st = sim.store.find(("kubeflow.org", plural), NS, name)
    conds = ((st.obj.get("status") or {}).get("conditions") or []) if st else []
    return any(c["type"] == ctype and c["status"] == "True" for c in conds)


def pods_of(sim: Any, name: str) -> list[dict[str, Any]]:
    return [p for p in sim.store.objects(("", "pods"), NS) if p["metadata"]["name"].startswith(name + "-")]


def exits(sim: Any, name: str) -> list[int]:
    out = []
    for p in pods_of(sim, name):
        for cs in (p.get("status") or {}).get("containerStatuses") or ():
            t = (cs.get("state") or {}).get("terminated")
            if t:
                out.append(int(t.get("exitCode") or 0))
    return out


def text_of(widget: Static) -> str:
    content = widget.content
    return getattr(content, "plain", str(content))


def status_of(t: KeyedTable, key: Any) -> str:
    return t.shown[key][t.labels.index("STATUS")].plain if key in t.shown else ""


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
async def test_the_clean_up_after_success_is_no_failure(simcluster, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    sim, kc, state = simcluster.sim, simcluster.sim.kubeconfig_path, tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    simcluster.call(setup, sim)
    mpi, pt = (NS, "MPIJob", "mpi-clean"), (NS, "PyTorchJob", "pt-clean")
    app = make_app(kc, Settings(refresh_interval=1))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and app.store.synced,
                         timeout=20, what="the workloads list")
        simcluster.call(sim.apply, mpijob("mpi-clean"))
        simcluster.call(sim.apply, pytorchjob("pt-clean", clean="Running", backoff=None,
                                              master=["sh", "-c", "sleep 4; echo trained"], worker=IGNORES_TERM))
        # the workers were killed by the clean-up (137), seen by the dashboard, then removed
        seen: set[int] = set()

        def over() -> bool:
            for name in ("mpi-clean", "pt-clean"):
                seen.update(simcluster.call(exits, sim, name))
            return (simcluster.call(condition, sim, "mpijobs", "mpi-clean", "Succeeded")
                    and simcluster.call(condition, sim, "pytorchjobs", "pt-clean", "Succeeded")
                    and not [p for p in simcluster.call(pods_of, sim, "mpi-clean-worker")]
                    and not [p for p in simcluster.call(pods_of, sim, "pt-clean-worker")])

        await pilot_wait(pilot, over, timeout=90, what="both jobs succeeded and their workers cleaned up")
        assert seen <= {0, 137}, seen  # (what the clean-up's SIGKILL leaves, when it was caught)
        killed = {e["involvedObject"]["name"] for e in simcluster.call(sim.store.objects, ("", "events"), NS)
                  if e.get("reason") == "Killing"}
        assert {"mpi-clean-worker-0", "mpi-clean-worker-1", "pt-clean-worker-0"} <= killed, killed
        lst = app.screen
        await pilot_wait(pilot, lambda: all("Succeeded" in status_of(lst.table, k) for k in (mpi, pt)),
                         timeout=20, what="both listed Succeeded",
                         detail=lambda: {k: status_of(lst.table, k) for k in lst.table.order})
        assert not any("exit" in status_of(lst.table, k) for k in (mpi, pt))
        await pilot.pause(2.0)  # (a capture under way is written)
        app.open_workload(mpi)
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and bool(app.screen.query("#ranks")),
                         what="the MPIJob's detail")
        await pilot.pause(1.0)
        shown = " ".join(text_of(w) for w in app.screen.query(Static))
        assert "exited 137" not in shown and "first failure" not in shown, shown

    recordings = list((state / "ranks" / "flight").glob("*/*.json")) if (state / "ranks").exists() else []
    assert not recordings, [p.read_text() for p in recordings]
    for name in ("mpi-clean", "pt-clean"):
        r = ranks(kc, state, "get", name, "-p", "team-a")
        assert r.returncode == 0, r.stderr
        assert "Status:" in r.stdout and "Succeeded" in r.stdout.split("Interactive:")[0], r.stdout
        assert "First failure" not in r.stdout and "exited 137" not in r.stdout, r.stdout
        r = ranks(kc, state, "why", name, "-p", "team-a")
        assert r.returncode == 0 and "nothing wrong; it finished" in r.stdout, r.stdout
        r = ranks(kc, state, "logs", name, "-p", "team-a", "--first-failure")
        assert r.returncode == 0 and "has failed." in r.stdout and "137" not in r.stdout, r.stdout
    r = ranks(kc, state, "list", "-p", "team-a")
    assert r.returncode == 0 and "137" not in r.stdout, r.stdout


def terminating(sim: Any, name: str) -> bool:
    """Failed, its failing pod (worker-1) gone already, its others still Terminating."""
    pods = pods_of(sim, name)
    names = {p["metadata"]["name"] for p in pods}
    return (condition(sim, "pytorchjobs", name, "Failed") and f"{name}-worker-1" not in names and len(pods) == 2
            and all(p["metadata"].get("deletionTimestamp") for p in pods))


FAILS = ["sh", "-c", 'if [ "$RANK" = 2 ]; then sleep 3; echo "RuntimeError: NCCL error on rank 2"; exit 3; fi; '
                     "sleep 600"]


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
def test_while_the_others_terminate_the_cli_says_the_job_failed(simcluster, tmp_path: Path) -> None:
    sim, kc, state = simcluster.sim, simcluster.sim.kubeconfig_path, tmp_path / "state"
    simcluster.call(setup, sim)
    simcluster.call(sim.apply, pytorchjob("pt-fail", clean="None", backoff=0, master=FAILS, worker=FAILS,
                                          workers=2, grace=120))
    wait_for(lambda: simcluster.call(terminating, sim, "pt-fail"), timeout=60,
             what="pt-fail failed, worker-1 gone, the others Terminating")

    r = ranks(kc, state, "logs", "pt-fail", "-p", "team-a", "--first-failure")
    assert r.returncode == 0, r.stderr
    assert "No rank of pytorchjob/pt-fail has failed." not in r.stdout, r.stdout
    assert "pytorchjob/pt-fail failed" in r.stdout, r.stdout
    assert "reached the specified backoff limit" in r.stdout
    assert "pt-fail-worker-1" in r.stdout  # the pod that is gone already: where it failed
    assert "2 still terminating" in r.stdout, r.stdout

    r = ranks(kc, state, "get", "pt-fail", "-p", "team-a")
    assert r.returncode == 0, r.stderr
    assert "What happened:" in r.stdout and "pytorchjob/pt-fail failed" in r.stdout, r.stdout
    assert "already stopped before the clean-up (no Killing event): pt-fail-worker-1" in r.stdout, r.stdout
    assert "Terminating" in r.stdout  # its pods, still listed
    assert simcluster.call(terminating, sim, "pt-fail"), "the window closed before the checks ended"


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
async def test_while_the_others_terminate_the_dashboard_says_the_job_failed(simcluster, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    sim, kc = simcluster.sim, simcluster.sim.kubeconfig_path
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    simcluster.call(setup, sim)
    simcluster.call(sim.apply, pytorchjob("pt-fail", clean="None", backoff=0, master=FAILS, worker=FAILS,
                                          workers=2, grace=120))
    wait_for(lambda: simcluster.call(terminating, sim, "pt-fail"), timeout=60,
             what="pt-fail failed, worker-1 gone, the others Terminating")
    key = (NS, "PyTorchJob", "pt-fail")
    app = make_app(kc, Settings(refresh_interval=1))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and app.store.synced,
                         timeout=20, what="the workloads list")
        app.open_workload(key)
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and bool(app.screen.query("#ranks")),
                         what="pt-fail's detail")

        def said() -> str:
            return " ".join(text_of(w) for w in app.screen.query(Static))

        await pilot_wait(pilot, lambda: "what happened" in said(), timeout=20, what="what happened, in the detail")
        text = said()
        assert "pytorchjob/pt-fail failed" in text and "pt-fail-worker-1" in text, text
    assert simcluster.call(terminating, sim, "pt-fail"), "the window closed before the checks ended"
