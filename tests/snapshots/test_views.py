"""Snapshot tests of every dashboard view, in the dark and the light theme (pytest-textual-snapshot).

The cluster is a passive simcluster (no operators, scheduler or kubelet) holding a fixed set of
objects with explicit status, creation times and uids, so nothing changes while a test runs; the
app's clock is fixed, GPU metrics are off and times are shown in UTC, so every frame is the same
on every run. The logs view needs real container logs: its test runs a second cluster with the
kubelet, whose two pods print fixed lines in a fixed order: each rank prints its next line only once
the kubelet has written the other's previous one to its log file.

Update the SVGs after an intended UI change with
    .venv/bin/python -m pytest -q tests/snapshots -p no:cacheprovider --snapshot-update
and look at them (the failure report, snapshot_report.html, shows old and new side by side).
"""

from __future__ import annotations

import calendar
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widgets import Static, TabbedContent, TextArea

from monitors.connection import load_cluster_config
from simcluster.cluster import SimCluster, ThreadedSimCluster, sim_in_thread
from simcluster.scenarios.demo import gpu_quota, namespace
from simcluster.scenarios.nodes import gpu_node
from tests import dashboard_kit as kit
from tests.waiting import pilot_wait, wait_for
from tui.app import RanksApp
from tui.screens.cluster import ClusterScreen
from tui.screens.describe import DescribeScreen, HelpScreen
from tui.screens.lists import ProjectsScreen, WorkloadsScreen
from tui.screens.logs import LogsScreen
from tui.screens.workload import WorkloadScreen

SnapCompare = Callable[..., bool]
THEMES = ["dark", "light"]
SIZE = (100, 30)
SMALL = (80, 24)
TIMEOUT = 20.0

NOW = calendar.timegm((2026, 1, 15, 12, 0, 0))  # the app's clock: every age is measured from here
TK = "training.kubeflow.org/"
OPERATORS = {"PyTorchJob": "pytorchjob-controller", "TFJob": "tfjob-controller",
             "XGBoostJob": "xgboostjob-controller", "MPIJob": "mpi-operator"}
FIELDS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
          "MPIJob": "mpiReplicaSpecs"}
CONTAINERS = {"PyTorchJob": "pytorch", "TFJob": "tensorflow", "XGBoostJob": "xgboost", "MPIJob": "mpi"}
NODE_SUBNET = {"h100-node-01": 1, "h100-node-02": 2, "h100-node-03": 3, "h100-node-04": 4, "a100-node-01": 5}
IMAGE = "nvcr.io/nvidia/pytorch:24.10-py3"
TRAIN = ["torchrun", "--nnodes=4", "--nproc-per-node=2", "train.py", "--config", "configs/llama-7b-lora.yaml"]


# -- fixed objects -----------------------------------------------------------------------------------


def ts(ago: float) -> str:
    """RFC 3339 time `ago` seconds before NOW."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - ago))


def uid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"ranks-snapshots/{name}"))


def kf_job(kind: str, name: str, ns: str, replicas: dict[str, tuple[int, int, list[str]]], *, user: str,
           created: float, conditions: list[tuple[str, float, str]]) -> dict[str, Any]:
    """A Kubeflow job: replicas is rtype -> (count, GPUs each, command); conditions (type, ago, message)."""
    specs = {}
    for rtype, (count, gpus, command) in replicas.items():
        c: dict[str, Any] = {"name": CONTAINERS[kind], "image": IMAGE, "command": command}
        if gpus:
            c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}
        specs[rtype] = {"replicas": count, "restartPolicy": "Never", "template": {"spec": {"containers": [c]}}}
    return {
        "apiVersion": f"kubeflow.org/{'v2beta1' if kind == 'MPIJob' else 'v1'}", "kind": kind,
        "metadata": {"name": name, "namespace": ns, "uid": uid(f"{ns}/{name}"), "creationTimestamp": ts(created),
                     "labels": {"ranks/user": user}},
        "spec": {FIELDS[kind]: specs, "runPolicy": {"cleanPodPolicy": "None"}},
        "status": {
            "conditions": [
                {"type": t, "status": "True", "reason": f"{kind}{t}", "message": message,
                 "lastUpdateTime": ts(ago), "lastTransitionTime": ts(ago)} for t, ago, message in conditions
            ],
            "startTime": ts(created - 2),
        },
    }


def kf_pod(job: dict[str, Any], rtype: str, index: int, *, node: str | None, gpus: int, command: list[str],
           state: str = "running", since: float = 0, exit_code: int = 0, reason: str = "", message: str = "",
           restarts: int = 0, name: str | None = None, unschedulable: str = "") -> dict[str, Any]:
    """A pod of `job` with an explicit status: state running / terminated / pending (unschedulable)."""
    kind, meta = job["kind"], job["metadata"]
    jname, ns = meta["name"], meta["namespace"]
    labels = {TK + "job-name": jname, TK + "operator-name": OPERATORS[kind], TK + "replica-index": str(index)}
    labels[TK + ("job-role" if kind == "MPIJob" else "replica-type")] = rtype.lower()
    pod_name = name or f"{jname}-{rtype.lower()}-{index}"
    c: dict[str, Any] = {"name": CONTAINERS[kind], "image": IMAGE, "command": command}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}
    created = calendar.timegm(time.strptime(meta["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))
    started = ts(NOW - created - 5)
    spec: dict[str, Any] = {"containers": [c], "restartPolicy": "Never"}
    if node:
        spec["nodeName"] = node
    status: dict[str, Any]
    if unschedulable:
        status = {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable,
             "lastTransitionTime": started}]}
    else:
        running = state == "running"
        cstate: dict[str, Any] = {"running": {"startedAt": started}}
        if state == "terminated":
            cstate = {"terminated": {"exitCode": exit_code, "reason": reason or ("Completed" if not exit_code else
                                                                                  "Error"),
                                     "message": message, "startedAt": started, "finishedAt": ts(since)}}
        phase = "Running" if running else ("Succeeded" if exit_code == 0 else "Failed")
        status = {
            "phase": phase, "hostIP": "10.0.0.2", "podIP": f"10.244.{NODE_SUBNET.get(node or '', 0)}.{index + 10}",
            "startTime": started,
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": started},
                           {"type": "Ready", "status": "True" if running else "False",
                            "lastTransitionTime": started}],
            "containerStatuses": [{"name": c["name"], "image": IMAGE, "ready": running, "restartCount": restarts,
                                   "started": running, "state": cstate}],
        }
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name, "namespace": ns, "uid": uid(f"{ns}/pod/{pod_name}"), "labels": labels,
                     "creationTimestamp": meta["creationTimestamp"],
                     "ownerReferences": [{"apiVersion": job["apiVersion"], "kind": kind, "name": jname,
                                          "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": spec,
        "status": status,
    }


def event(ns: str, kind: str, name: str, reason: str, message: str, ago: float, *, warning: bool = False,
          count: int = 1, api_version: str = "v1") -> dict[str, Any]:
    ev_name = f"{name}.{reason.lower()}"
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": ev_name, "namespace": ns, "uid": uid(f"{ns}/event/{ev_name}"),
                     "creationTimestamp": ts(ago)},
        "involvedObject": {"apiVersion": api_version, "kind": kind, "name": name, "namespace": ns,
                           "uid": uid(f"{ns}/{name}") if kind != "Pod" else uid(f"{ns}/pod/{name}")},
        "reason": reason, "message": message, "type": "Warning" if warning else "Normal", "count": count,
        "firstTimestamp": ts(ago), "lastTimestamp": ts(ago), "source": {"component": "kubelet"},
    }


def objects() -> list[dict[str, Any]]:
    """Nodes, projects with quota, and one workload in each state the views show."""
    out: list[dict[str, Any]] = []
    for i in range(4):
        out.append(gpu_node(f"h100-node-{i + 1:02d}", 8, index=i, pool="h100", product="NVIDIA-H100-80GB-HBM3"))
    for i in range(2):
        out.append(gpu_node(f"a100-node-{i + 1:02d}", 4, index=4 + i, pool="a100", product="NVIDIA-A100-SXM4-80GB"))
    out[-1]["spec"]["unschedulable"] = True  # cordoned
    for ns, project, quota in (("runai-team-a", "team-a", 16), ("runai-team-b", "team-b", 8)):
        out.append(namespace(ns, {"runai/queue": project}))
        out.append(gpu_quota(ns, quota))
    out.append(namespace("research"))
    out.append(gpu_quota("research", 8))
    for o in out:
        o["metadata"].setdefault("creationTimestamp", ts(90 * 86400))
        o["metadata"]["uid"] = uid(f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}")

    a, b, r = "runai-team-a", "runai-team-b", "research"
    # a healthy 8-GPU training run on two H100 nodes
    llama = kf_job("PyTorchJob", "llama-finetune", a, {"Master": (1, 2, TRAIN), "Worker": (3, 2, TRAIN)},
                   user="alice", created=3 * 3600 + 240,
                   conditions=[("Created", 3 * 3600 + 240, "PyTorchJob llama-finetune is created."),
                               ("Running", 3 * 3600 + 200, "PyTorchJob llama-finetune is running.")])
    out.append(llama)
    out.append(kf_pod(llama, "Master", 0, node="h100-node-01", gpus=2, command=TRAIN))
    for i, node in enumerate(["h100-node-01", "h100-node-01", "h100-node-02"]):
        out.append(kf_pod(llama, "Worker", i, node=node, gpus=2, command=TRAIN))
    # an interactive Horovod session holding two A100s
    sleep = ["sleep", "infinity"]
    hvd = kf_job("MPIJob", "hvd-interactive", a, {"Launcher": (1, 0, sleep), "Worker": (2, 1, ["sshd", "-D"])},
                 user="alice", created=2 * 86400 + 3600,
                 conditions=[("Created", 2 * 86400 + 3600, "MPIJob hvd-interactive is created."),
                             ("Running", 2 * 86400 + 3500, "MPIJob hvd-interactive is running.")])
    out.append(hvd)
    out.append(kf_pod(hvd, "Launcher", 0, node="a100-node-01", gpus=0, command=sleep,
                      name="hvd-interactive-launcher-x7k2p"))
    for i in range(2):
        out.append(kf_pod(hvd, "Worker", i, node="a100-node-01", gpus=1, command=["sshd", "-D"]))
    # a failed run: rank 2 crashed first, the others were torn down after it
    bert_cmd = ["python", "-u", "run_mlm.py", "--model", "bert-large", "--batch-size", "64"]
    bert = kf_job("PyTorchJob", "bert-crash", b, {"Master": (1, 1, bert_cmd), "Worker": (2, 1, bert_cmd)},
                  user="bob", created=25 * 60,
                  conditions=[("Created", 25 * 60, "PyTorchJob bert-crash is created."),
                              ("Running", 24 * 60, "PyTorchJob bert-crash is running."),
                              ("Failed", 12 * 60, "PyTorchJob bert-crash is failed because 1 Worker replica(s) "
                                                  "failed.")])
    out.append(bert)
    out.append(kf_pod(bert, "Master", 0, node="h100-node-03", gpus=1, command=bert_cmd, state="terminated",
                      since=12 * 60 + 10, exit_code=143, reason="Error"))
    out.append(kf_pod(bert, "Worker", 0, node="h100-node-03", gpus=1, command=bert_cmd, state="terminated",
                      since=12 * 60 + 10, exit_code=143, reason="Error"))
    out.append(kf_pod(bert, "Worker", 1, node="h100-node-03", gpus=1, command=bert_cmd, state="terminated",
                      since=12 * 60 + 40, exit_code=1, reason="Error",
                      message="RuntimeError: CUDA error: an illegal memory access was encountered"))
    # a gang that cannot fit: waiting for 40 GPUs
    big_cmd = ["torchrun", "--nnodes=5", "--nproc-per-node=8", "pretrain.py"]
    big = kf_job("PyTorchJob", "big-pretrain", a, {"Master": (1, 8, big_cmd), "Worker": (4, 8, big_cmd)},
                 user="alice", created=40 * 60, conditions=[("Created", 40 * 60, "PyTorchJob big-pretrain is created.")])
    out.append(big)
    why = ("0/6 nodes are available: 2 Insufficient nvidia.com/gpu, 4 node(s) didn't match Pod's node "
           "affinity/selector. preemption: 0/6 nodes are available: 6 No preemption victims found.")
    out.append(kf_pod(big, "Master", 0, node=None, gpus=8, command=big_cmd, unschedulable=why))
    for i in range(4):
        out.append(kf_pod(big, "Worker", i, node=None, gpus=8, command=big_cmd, unschedulable=why))
    # a finished run
    mnist_cmd = ["python", "mnist.py", "--epochs", "3"]
    mnist = kf_job("PyTorchJob", "mnist-quick", r, {"Master": (1, 1, mnist_cmd)}, user="carol", created=6 * 3600,
                   conditions=[("Created", 6 * 3600, "PyTorchJob mnist-quick is created."),
                               ("Running", 6 * 3600 - 30, "PyTorchJob mnist-quick is running."),
                               ("Succeeded", 5 * 3600, "PyTorchJob mnist-quick is successfully completed.")])
    out.append(mnist)
    out.append(kf_pod(mnist, "Master", 0, node="h100-node-04", gpus=1, command=mnist_cmd, state="terminated",
                      since=5 * 3600))
    # TensorFlow with a parameter server (no GPU) and a worker that restarted
    tf_cmd = ["python", "resnet_main.py", "--data_dir=/data/imagenet"]
    tf = kf_job("TFJob", "resnet-tf", b, {"Chief": (1, 1, tf_cmd), "Worker": (2, 1, tf_cmd), "PS": (1, 0, tf_cmd)},
                user="bob", created=9 * 3600,
                conditions=[("Created", 9 * 3600, "TFJob resnet-tf is created."),
                            ("Running", 9 * 3600 - 60, "TFJob resnet-tf is running.")])
    out.append(tf)
    out.append(kf_pod(tf, "Chief", 0, node="h100-node-04", gpus=1, command=tf_cmd))
    out.append(kf_pod(tf, "Worker", 0, node="h100-node-04", gpus=1, command=tf_cmd, restarts=2))
    out.append(kf_pod(tf, "Worker", 1, node="h100-node-04", gpus=1, command=tf_cmd))
    out.append(kf_pod(tf, "PS", 0, node="h100-node-04", gpus=0, command=tf_cmd))
    # XGBoost in a namespace without Run:ai labels
    xgb_cmd = ["python", "train_xgb.py", "--rounds", "500"]
    xgb = kf_job("XGBoostJob", "xgb-churn", r, {"Master": (1, 1, xgb_cmd), "Worker": (2, 1, xgb_cmd)},
                 user="carol", created=50 * 60,
                 conditions=[("Created", 50 * 60, "XGBoostJob xgb-churn is created."),
                             ("Running", 49 * 60, "XGBoostJob xgb-churn is running.")])
    out.append(xgb)
    out.append(kf_pod(xgb, "Master", 0, node="h100-node-02", gpus=1, command=xgb_cmd))
    for i in range(2):
        out.append(kf_pod(xgb, "Worker", i, node="h100-node-02", gpus=1, command=xgb_cmd))

    # the failed workload's events, oldest first
    for pod in ("bert-crash-master-0", "bert-crash-worker-0", "bert-crash-worker-1"):
        out.append(event(b, "Pod", pod, "Scheduled", f"Successfully assigned {b}/{pod} to h100-node-03", 25 * 60))
        out.append(event(b, "Pod", pod, "Started", "Started container pytorch", 24 * 60 + 30))
    out.append(event(b, "Pod", "bert-crash-worker-1", "BackOff", "Back-off restarting failed container pytorch in "
                     "pod bert-crash-worker-1", 12 * 60 + 35, warning=True, count=3))
    out.append(event(b, "PyTorchJob", "bert-crash", "PyTorchJobFailed",
                     "PyTorchJob bert-crash is failed because 1 Worker replica(s) failed.", 12 * 60, warning=True,
                     api_version="kubeflow.org/v1"))
    return out


def load(sim: SimCluster, objs: list[dict[str, Any]]) -> None:
    for obj in objs:
        sim.apply(obj)


# -- fixtures ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def utc() -> Iterator[None]:
    """The first-failure banner shows local time: make it the same everywhere."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TZ", "UTC")
        time.tzset()
        yield
    time.tzset()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    """One passive cluster for every view but logs: nothing in it moves."""
    with sim_in_thread(components=(), workdir=tmp_path_factory.mktemp("sim")) as t:
        t.call(load, t.sim, objects())
        yield t


def make_app(t: ThreadedSimCluster, theme: str) -> RanksApp:
    return kit.make_app(t, metrics=False, clock=lambda: NOW, still=True, theme=theme)


# every wait here gives the screen one more pause once the condition holds, so the snapshot
# shows what the condition saw
settled = partial(pilot_wait, timeout=TIMEOUT, settle=True)


async def synced(pilot: Pilot[Any], workloads: int = 7, nodes: int = 6, projects: int = 3) -> RanksApp:
    """Wait for the first full sync and the start screen (all projects) showing every workload."""
    app = pilot.app
    assert isinstance(app, RanksApp)
    await settled(pilot, lambda: app.store.synced and app.store.status.phase == "live", what="the first sync")
    await settled(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and len(app.store.workloads) == workloads
                  and app.screen.table.row_count == workloads and app.screen.table.has_focus
                  and len(app.store.nodes) == nodes
                  and len(app.store.projects) == projects, what="the workloads table")
    return app


async def cursor_to(pilot: Pilot[Any], name: str) -> RanksApp:
    """The workloads list, every row there, with the cursor on `name`'s row."""
    app = await synced(pilot)
    screen = app.screen
    assert isinstance(screen, WorkloadsScreen)

    def at() -> int:
        """How many rows the cursor is above `name`'s (negative: below)."""
        row = next(i for i, k in enumerate(screen.table.order) if isinstance(k, tuple) and k[2] == name)
        return row - screen.table.cursor_row

    for _ in range(40):  # (key by key, looking again after each: a row that moves is followed)
        if (off := at()) == 0:
            break
        await pilot.press("down" if off > 0 else "up")
        await pilot.pause()
    assert at() == 0, f"the cursor never reached {name}"
    return app


async def open_workload(pilot: Pilot[Any], name: str) -> WorkloadScreen:
    app = await cursor_to(pilot, name)
    await pilot.press("enter")
    await settled(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.last is not None
                  and app.screen.table.row_count == len(app.screen.last.ranks), what=f"the {name} screen")
    assert isinstance(app.screen, WorkloadScreen)
    return app.screen


async def show_tab(pilot: Pilot[Any], tab: str) -> None:
    """Activate a tab (not by a click: the mouse would leave a hover highlight in the picture)."""
    tabs = pilot.app.screen.query_one(TabbedContent)
    tabs.active = tab
    await settled(pilot, lambda: tabs.active == tab, what=f"tab {tab}")


def snap(snap_compare: SnapCompare, app: RanksApp, run_before: Callable[[Pilot[Any]], Awaitable[None]],
         size: tuple[int, int] = SIZE) -> None:
    assert snap_compare(app, terminal_size=size, run_before=run_before)


# -- the views ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("theme", THEMES)
def test_workloads_all_projects(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await synced(pilot)

    snap(snap_compare, make_app(cluster, theme), run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_workloads_all_projects_80x24(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await synced(pilot)

    snap(snap_compare, make_app(cluster, theme), run_before, SMALL)


@pytest.mark.parametrize("theme", THEMES)
def test_projects(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = await synced(pilot)
        await pilot.press("p")
        await settled(pilot, lambda: isinstance(app.screen, ProjectsScreen) and app.screen.table.row_count == 3,
                      what="the projects table")

    snap(snap_compare, make_app(cluster, theme), run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_workload_ranks(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await open_workload(pilot, "llama-finetune")

    snap(snap_compare, make_app(cluster, theme), run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_workload_failed_ranks(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        screen = await open_workload(pilot, "bert-crash")
        # (its rank 2 fails 8 s after it starts: on a busy machine the demo's pods start late)
        await settled(pilot, lambda: screen.query_one("#failure").has_class("-shown"), what="the first-failure banner",
                      timeout=90)

    snap(snap_compare, make_app(cluster, theme), run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_workload_placement(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        screen = await open_workload(pilot, "llama-finetune")
        await show_tab(pilot, "tab-placement")
        placement = screen.query_one("#placement", Static)
        await settled(pilot, lambda: "slots are filled" in str(placement.render()), what="the placement grid")

    snap(snap_compare, make_app(cluster, theme), run_before)


@pytest.mark.parametrize("size", [SIZE, SMALL], ids=["100x30", "80x24"])
def test_workload_placement_with_a_launcher(snap_compare: SnapCompare, cluster: ThreadedSimCluster,
                                            size: tuple[int, int]) -> None:
    """The launcher holds no GPU: it is drawn under "no GPU", after the node's four GPU columns."""
    async def run_before(pilot: Pilot[Any]) -> None:
        screen = await open_workload(pilot, "hvd-interactive")
        await show_tab(pilot, "tab-placement")
        placement = screen.query_one("#placement", Static)
        await settled(pilot, lambda: "no GPU" in str(placement.render()), what="the placement grid")

    snap(snap_compare, make_app(cluster, "dark"), run_before, size)


@pytest.mark.parametrize("theme", THEMES)
def test_workload_events(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        screen = await open_workload(pilot, "bert-crash")
        app = screen.dashboard
        await settled(pilot, lambda: len(app.store.events) == 8, what="the workload's events",
                      detail=lambda: (app.store.events, app.store.status, app.screen_stack))
        await show_tab(pilot, "tab-events")
        events = screen.query_one("#events", Static)
        await settled(pilot, lambda: "PyTorchJobFailed" in str(events.render()), what="the events list")

    snap(snap_compare, make_app(cluster, theme), run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_cluster_nodes(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = await synced(pilot)
        await pilot.press("c")
        await settled(pilot, lambda: isinstance(app.screen, ClusterScreen) and app.screen.table.row_count == 6,
                      what="the nodes table")

    snap(snap_compare, make_app(cluster, theme), run_before)


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize(("tab", "expect"), [
    pytest.param("tab-quota", "team-a", id="quota"),
    pytest.param("tab-pending", "big-pretrain", id="pending"),
    pytest.param("tab-idle", "", id="idle"),  # GPU metrics are off: no session is known to be idle
])
def test_cluster_tabs(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str, tab: str,
                      expect: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = await synced(pilot)
        await pilot.press("c")
        await settled(pilot, lambda: isinstance(app.screen, ClusterScreen), what="the cluster screen")
        await show_tab(pilot, tab)
        panel = app.screen.query_one(f"#{tab.removeprefix('tab-')}", Static)
        await settled(pilot, lambda: str(panel.render()) != "" and expect in str(panel.render()), what=f"the {tab} panel")

    snap(snap_compare, make_app(cluster, theme), run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_describe(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        screen = await open_workload(pilot, "bert-crash")
        app = screen.dashboard
        await pilot.press("escape")
        await settled(pilot, lambda: isinstance(app.screen, WorkloadsScreen), what="the workloads list")
        await pilot.press("d")
        await settled(pilot, lambda: isinstance(app.screen, DescribeScreen)
                      and app.screen.query_one(TextArea).text.startswith("apiVersion:"), what="the YAML")

    snap(snap_compare, make_app(cluster, theme), run_before)


@pytest.mark.parametrize("theme", THEMES)
def test_help(snap_compare: SnapCompare, cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        # (the list behind it with its cursor on one row: where it is after the first sync depends
        # on the order the rows arrived in)
        app = await cursor_to(pilot, "resnet-tf")
        await pilot.press("question_mark")
        await settled(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help screen")
        # the keys overflow the panel: its scrollbar is drawn once the layout has measured the text
        await settled(pilot, lambda: app.screen.query(VerticalScroll)
                      and app.screen.query_one(VerticalScroll).max_scroll_y > 0, what="the help's layout")
        await pilot.pause()

    snap(snap_compare, make_app(cluster, theme), run_before)


# -- logs: real processes, a fixed order of lines -------------------------------------------------------

LOG_NS = "runai-team-a"
LOG_JOB = "llama-finetune"
LOG_CONTAINER = CONTAINERS["PyTorchJob"]
LOG_LINES = {
    "master": ["loading checkpoint from s3://ckpt/llama-7b/step-1200", "world size 2, backend nccl",
               "step 1200 loss=1.8421 lr=2.0e-05 tok/s=15230", "step 1210 loss=1.8377 lr=2.0e-05 tok/s=15188",
               "step 1220 loss=1.8302 lr=2.0e-05 tok/s=15241", "saving checkpoint step-1220"],
    "worker": ["NCCL INFO Bootstrap : Using eth0:10.244.1.11<0>",
               "NCCL INFO comm 0x55d0 rank 1 nranks 2 - Init COMPLETE",
               "step 1200 loss=1.8433 grad_norm=0.912", "step 1210 loss=1.8369 grad_norm=0.887",
               "WARNING: dataloader worker 3 is slow (2.4 s/batch)", "step 1220 loss=1.8311 grad_norm=0.874"],
}


def cri_log(workdir: Path, role: str) -> Path:
    """The kubelet's log file of a log pod's container (simcluster.podlogs: one record per line)."""
    pod = f"{LOG_JOB}-{role}-0"
    return workdir / "logs" / f"{LOG_NS}_{pod}_{uid(f'{LOG_NS}/pod/{pod}')}" / LOG_CONTAINER / "0.log"


def records(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def log_program(role: str, workdir: Path) -> list[str]:
    """Print LOG_LINES[role], the master's and the worker's lines alternating: before each line a rank
    waits until the kubelet has stamped and written the other's previous line, so the merged view's
    order (by the kubelet's timestamps) is the same on every run."""
    other = "worker" if role == "master" else "master"
    prog = f"""
import time
def records(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\\n")
    except FileNotFoundError:
        return 0
for i, line in enumerate({LOG_LINES[role]!r}):
    while records({str(cri_log(workdir, other))!r}) < i + {0 if role == "master" else 1}:
        time.sleep(0.01)
    print(line, flush=True)
time.sleep(3600)
"""
    return [sys.executable, "-u", "-c", prog]


def logs_objects(workdir: Path) -> list[dict[str, Any]]:
    """One node, one project, a two-rank PyTorchJob whose pods the kubelet runs."""
    out: list[dict[str, Any]] = [gpu_node("h100-node-01", 8, pool="h100", product="NVIDIA-H100-80GB-HBM3"),
                                 namespace(LOG_NS, {"runai/queue": "team-a"}), gpu_quota(LOG_NS, 16)]
    for o in out:
        o["metadata"]["creationTimestamp"] = ts(90 * 86400)
    cmds = {role: log_program(role, workdir) for role in LOG_LINES}
    job = kf_job("PyTorchJob", LOG_JOB, LOG_NS, {"Master": (1, 2, cmds["master"]), "Worker": (1, 2, cmds["worker"])},
                 user="alice", created=3600, conditions=[("Created", 3600, "PyTorchJob llama-finetune is created."),
                                                         ("Running", 3590, "PyTorchJob llama-finetune is running.")])
    out.append(job)
    for rtype, cmd in (("Master", cmds["master"]), ("Worker", cmds["worker"])):
        pod = kf_pod(job, rtype, 0, node="h100-node-01", gpus=2, command=cmd)
        del pod["status"]  # the kubelet runs it
        pod["spec"]["terminationGracePeriodSeconds"] = 1
        out.append(pod)
    return out


@pytest.fixture(scope="module")
def logs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    workdir = tmp_path_factory.mktemp("logsim")
    with sim_in_thread(components=("kubelet",), workdir=workdir) as t:
        t.call(load, t.sim, logs_objects(workdir))
        # every line is in the kubelet's files before a test reads them
        wait_for(lambda: all(records(cri_log(workdir, role)) >= len(lines) for role, lines in LOG_LINES.items()),
                 TIMEOUT, "the log pods to print their lines")
        yield t


@pytest.mark.parametrize("theme", THEMES)
def test_logs(snap_compare: SnapCompare, logs_cluster: ThreadedSimCluster, theme: str) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = await synced(pilot, workloads=1, nodes=1, projects=1)
        await settled(pilot, lambda: all(r.phase == "Running" for w in app.store.workloads.values()
                                         for r in w.ranks), what="the log pods running")
        await pilot.press("l")
        await settled(pilot, lambda: isinstance(app.screen, LogsScreen)
                      and len(app.screen.buffer) == sum(map(len, LOG_LINES.values()))
                      and app.screen.handle is not None,
                      what="every log line")

    snap(snap_compare, make_app(logs_cluster, theme), run_before)


# -- 80 columns: what gets cut first (dark theme only; the light one lays out the same) ----------------


def test_workload_failed_80x24(snap_compare: SnapCompare, cluster: ThreadedSimCluster) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        screen = await open_workload(pilot, "bert-crash")
        # (its rank 2 fails 8 s after it starts: on a busy machine the demo's pods start late)
        await settled(pilot, lambda: screen.query_one("#failure").has_class("-shown"), what="the first-failure banner",
                      timeout=90)

    snap(snap_compare, make_app(cluster, "dark"), run_before, SMALL)


def test_cluster_nodes_80x24(snap_compare: SnapCompare, cluster: ThreadedSimCluster) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = await synced(pilot)
        await pilot.press("c")
        await settled(pilot, lambda: isinstance(app.screen, ClusterScreen) and app.screen.table.row_count == 6,
                      what="the nodes table")

    snap(snap_compare, make_app(cluster, "dark"), run_before, SMALL)


# -- diagnostics (#15) ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [SIZE, SMALL], ids=["100x30", "80x24"])
def test_workload_why_pending(snap_compare: SnapCompare, cluster: ThreadedSimCluster, size: tuple[int, int]) -> None:
    """The gang that cannot fit: the scheduler's words whole, then why in plain words (gang, fit)."""
    async def run_before(pilot: Pilot[Any]) -> None:
        await open_workload(pilot, "big-pretrain")
        d = lambda: pilot.app.store.diagnosis  # noqa: E731
        await settled(pilot, lambda: d() is not None and d().name == "big-pretrain" and "gang" in d().kinds(),
                      what="why it is pending")

    snap(snap_compare, make_app(cluster, "dark"), run_before, size)


def recorded_objects() -> list[dict[str, Any]]:
    """A PyTorchJob the operator gave up on: its pods deleted (their events are left), Failed."""
    ns, cmd = "runai-team-a", ["python", "-u", "train.py"]
    out: list[dict[str, Any]] = [
        gpu_node("h100-node-01", 8, pool="h100", product="NVIDIA-H100-80GB-HBM3"),
        namespace(ns, {"runai/queue": "team-a"}),
    ]
    gone = kf_job("PyTorchJob", "gone-crash", ns, {"Master": (1, 1, cmd), "Worker": (2, 1, cmd)}, user="alice",
                  created=30 * 60, conditions=[("Created", 30 * 60, "PyTorchJob gone-crash is created."),
                                               ("Failed", 10 * 60, "Job gone-crash has failed because it has "
                                                                   "reached the specified backoff limit")])
    out.append(gone)
    for pod in ("gone-crash-master-0", "gone-crash-worker-0", "gone-crash-worker-1"):
        out.append(event(ns, "PyTorchJob", "gone-crash", "SuccessfulDeletePod", f"Deleted pod: {pod}", 10 * 60,
                         api_version="kubeflow.org/v1"))
        out[-1]["metadata"]["name"] = f"gone-crash.delete.{pod}"
    for pod in ("gone-crash-master-0", "gone-crash-worker-0"):
        out.append(event(ns, "Pod", pod, "Killing", "Stopping container pytorch", 10 * 60))
    return out


@pytest.fixture(scope="module")
def recorded_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(components=(), workdir=tmp_path_factory.mktemp("recsim")) as t:
        t.call(load, t.sim, recorded_objects())
        yield t


def test_workload_recorded_failure(snap_compare: SnapCompare, recorded_cluster: ThreadedSimCluster,
                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pods are gone: the first failure as the flight recorder kept it (saying so and when), and
    what happened, from the events that are left."""
    from monitors.flight_recorder import RecordedFailure, store_for

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    cfg = load_cluster_config(str(recorded_cluster.sim.kubeconfig_path))
    store_for(cfg).add(
        "runai-team-a", "PyTorchJob", "gone-crash", uid("runai-team-a/gone-crash"),
        RecordedFailure("worker-1", "worker", 2, "gone-crash-worker-1", "h100-node-01", "pytorch", 3, "Error",
                        NOW - 10 * 60 - 5, lines=("step 41 loss=2.1", "Traceback (most recent call last):",
                                                  "RuntimeError: CUDA error: an illegal memory access"),
                        recorded_at=NOW - 10 * 60 - 4, source="log"))

    async def run_before(pilot: Pilot[Any]) -> None:
        app = await synced(pilot, workloads=1, nodes=1, projects=1)
        await pilot.press("enter")
        await settled(pilot, lambda: isinstance(app.screen, WorkloadScreen)
                      and app.screen.query_one("#failure").has_class("-shown"), what="the recorded failure")

    snap(snap_compare, make_app(recorded_cluster, "dark"), run_before)


async def test_workload_events_at_80_columns_give_each_message_a_line_of_its_own(cluster: ThreadedSimCluster) -> None:
    """At 80 columns an event's message would get about 20 cells beside its reason and object: it
    goes on the next line, whole; widened, the events are drawn again one line each."""
    from textual.geometry import Region

    app = make_app(cluster, "dark")
    async with app.run_test(size=SMALL) as pilot:
        screen = await open_workload(pilot, "bert-crash")
        await settled(pilot, lambda: len(app.store.events) == 8, what="the workload's events")
        await show_tab(pilot, "tab-events")
        widget = screen.query_one("#events", Static)

        def painted() -> list[str]:
            w, h = widget.size
            return [strip.text.rstrip() for strip in widget.render_lines(Region(0, 0, w, h))]

        messages = [e.message for e in app.store.events]
        def split() -> bool:
            lines = painted()
            return len(lines) >= 16 and all(ln.startswith(" " * 9) for ln in lines[1:16:2])

        await settled(pilot, split, what="each message under its event", detail=painted)
        lines = painted()
        assert len(lines) >= 16, lines
        for m in messages:  # on a line of its own: 67 cells of it (about 20 beside the rest)
            assert any(ln.startswith(" " * 9) and ln.lstrip().startswith(m[:60]) for ln in lines), (m, "\n".join(lines))
        await pilot.resize_terminal(130, 30)
        await settled(pilot, lambda: len([ln for ln in painted() if ln.strip()]) == 8, what="one line per event")
        assert all(any(m[:30] in ln and not ln.startswith(" " * 9) for ln in painted()) for m in messages), painted()
