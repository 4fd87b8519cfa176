"""#24 item 5: who holds the GPUs a pending job needs (`monitors.diagnostics.holders.gpu_fit`), the
user's own first (an interactive session, idle or not, with its age), and `why` naming them."""

from __future__ import annotations

import calendar
import time

from monitors.diagnostics.holders import GpuDemand, gpu_fit, node_span
from monitors.diagnostics.why import explain
from monitors.model import GpuReading, LiveModel
from monitors.parse import parse_namespace, parse_node, parse_quota
from tests.kubeflow_objects import job, pod
from tests.unit.test_why import A, add, gang, key, node

T0 = calendar.timegm((2026, 11, 1, 8, 0, 0))
STAMP = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0))


def small(clock: list[float]) -> LiveModel:
    """Two a100 nodes of 4 GPUs; my session `hvd` holds 3 on a100-node-1 (idle since it started), bob's
    `llama` 4 on a100-node-2 (busy)."""
    m = LiveModel(now=lambda: clock[0])
    m.apply_nodes([(n["metadata"]["name"], parse_node(n)) for n in
                   (node("a100-node-1", 4, "a100"), node("a100-node-2", 4, "a100"))])
    m.apply_namespaces([(A, parse_namespace({"metadata": {"name": A, "labels": {"runai/queue": "team-a"}}}))])
    session = job("MPIJob", "hvd", A, {"Launcher": 1, "Worker": 3}, command=["sleep", "infinity"],
                  conditions=[("Running", "")], labels={"ranks/user": "alice"})
    session["metadata"]["creationTimestamp"] = STAMP
    spods = [pod("MPIJob", "hvd", A, "Launcher", None, gpus=0, name="hvd-launcher-x7k2p", node="a100-node-1",
                 command=["sleep", "infinity"])]
    spods += [pod("MPIJob", "hvd", A, "Worker", i, node="a100-node-1") for i in range(3)]
    llama = job("PyTorchJob", "llama", A, {"Master": 1, "Worker": 3}, conditions=[("Running", "")],
                labels={"ranks/user": "bob"})
    lpods = [pod("PyTorchJob", "llama", A, "Master", 0, node="a100-node-2")]
    lpods += [pod("PyTorchJob", "llama", A, "Worker", i, node="a100-node-2") for i in range(3)]
    for p in spods + lpods:
        p["metadata"]["creationTimestamp"] = STAMP
    add(m, ([session, llama], spods + lpods))
    readings = {(A, p["metadata"]["name"]): GpuReading("ok", 0.0 if p in spods else 90.0, 100.0, 81559.0)
                for p in spods + lpods if p["metadata"]["name"] != "hvd-launcher-x7k2p"}
    for t in range(0, 720, 30):  # 12 minutes of readings: the session idle, llama busy
        clock[0] = T0 + t
        m.set_gpu(readings, {})
    m.flush()
    return m


def test_the_user_s_own_idle_session_first_with_its_age_and_the_line_that_frees_it() -> None:
    clock = [T0]
    m = small(clock)
    now = T0 + 720
    fit = gpu_fit(m, A, GpuDemand(pods=2, gpus_per_pod=1, selector=(("node-pool", "a100"),)), me="alice", now=now)
    assert (fit.fits, fit.reason, fit.pods, fit.placed, fit.enough) == (False, "gpus", 2, 1, True)
    assert [h.name for h in fit.holders] == ["hvd"]
    (h,) = fit.holders
    assert h.mine and h.interactive and h.gpus == 3 and h.nodes == ("a100-node-1",)
    assert h.sentence(now, "ranks") == (
        "your interactive session hvd (idle 12m, started 12m ago, 3 GPUs on a100-node-1) holds what this job "
        "needs: `ranks delete hvd -p team-a` frees them")
    # as bob: his own job first, though busy; alice's session is hers (no line to free it)
    fit = gpu_fit(m, A, GpuDemand(pods=6, gpus_per_pod=1), me="bob", now=now)
    assert [(h.name, h.mine) for h in fit.holders] == [("llama", True), ("hvd", False)] and fit.enough
    assert fit.holders[1].sentence(now).startswith("alice's interactive session team-a/hvd (idle 12m")
    assert "delete" not in fit.holders[1].sentence(now)
    # what fits now: no holders; what nothing freed would fit: not enough
    assert gpu_fit(m, A, GpuDemand(pods=1, gpus_per_pod=1), me="alice", now=now).fits
    assert not gpu_fit(m, A, GpuDemand(pods=1, gpus_per_pod=16), me="alice", now=now).enough
    # the session itself left out (the job convert makes from it would take its place)
    assert gpu_fit(m, A, GpuDemand(pods=2, gpus_per_pod=1), me="alice", now=now,
                   exclude={(A, "MPIJob", "hvd")}).holders[0].name == "llama"


def test_the_project_s_quota_used_by_the_user_s_session() -> None:
    clock = [T0]
    m = small(clock)
    quota = {"metadata": {"name": "gpu-quota", "namespace": A}, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}},
             "status": {"used": {"requests.nvidia.com/gpu": "7"}}}
    m.apply_quotas([((A, "gpu-quota"), parse_quota(quota))])
    m.flush()
    fit = gpu_fit(m, A, GpuDemand(pods=1, gpus_per_pod=1), me="alice", now=T0 + 720)
    assert (fit.fits, fit.reason) == (True, "")  # 1 free on a100-node-1, and 1 left of the quota
    fit = gpu_fit(m, A, GpuDemand(pods=2, gpus_per_pod=1, selector=(("node-pool", "a100"),)), me="alice",
                  now=T0 + 720, exclude={(A, "PyTorchJob", "llama")})
    assert fit.reason == "gpus" and [h.name for h in fit.holders] == ["hvd"]


def test_nodes_not_listed_say_nothing_of_free_gpus_only_the_quota() -> None:
    """Over the SSH door a user may not list nodes: their room is not known, so a convert says
    nothing of free GPUs (it said "the new job would wait: only 0 of its 2 pods fit"), and the
    project's quota is still judged."""
    clock = [T0]
    m = small(clock)
    m.apply_nodes([(name, None) for name in ("a100-node-1", "a100-node-2")])
    m.flush()
    assert not m.node_recs
    fit = gpu_fit(m, A, GpuDemand(pods=2, gpus_per_pod=1), me="alice", now=T0 + 720)
    assert (fit.fits, fit.reason, fit.placed) == (True, "", 2)
    quota = {"metadata": {"name": "gpu-quota", "namespace": A}, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}},
             "status": {"used": {"requests.nvidia.com/gpu": "7"}}}
    m.apply_quotas([((A, "gpu-quota"), parse_quota(quota))])
    m.flush()
    fit = gpu_fit(m, A, GpuDemand(pods=2, gpus_per_pod=1), me="alice", now=T0 + 720)
    assert (fit.fits, fit.reason, fit.enough) == (False, "quota", True) and fit.holders[0].name == "hvd"


def test_why_a_pending_job_waits_names_the_user_s_session() -> None:
    clock = [T0]
    m = small(clock)
    j, pods = gang("train", 1, 1, selector={"node-pool": "a100"})
    add(m, (j, pods))
    d = explain(m, key("train"), now=T0 + 720, me="alice", command="ranks --context demo")
    held = [f.text for f in d.findings if f.kind == "held"]
    assert held == ["your interactive session hvd (idle 12m, started 12m ago, 3 GPUs on a100-node-1) holds what "
                    "this job needs: `ranks --context demo delete hvd -p team-a` frees them."], d.findings
    assert "held by your interactive session hvd" in d.summary
    assert node_span(["gpu-2", "gpu-0", "gpu-1"]) == "gpu-0..gpu-2" and node_span(["b", "a"]) == "a, b"



def two_sessions() -> LiveModel:
    """Every a100 GPU held by two idle sessions of alice's: `big` (3 GPUs on a100-node-1) and `pt` (2
    on a100-node-2)."""
    m = LiveModel(now=lambda: T0)
    m.apply_nodes([(n["metadata"]["name"], parse_node(n)) for n in
                   (node("a100-node-1", 3, "a100"), node("a100-node-2", 2, "a100"))])
    m.apply_namespaces([(A, parse_namespace({"metadata": {"name": A, "labels": {"runai/queue": "team-a"}}}))])
    for name, workers, where in (("big", 2, "a100-node-1"), ("pt", 1, "a100-node-2")):
        session = job("PyTorchJob", name, A, {"Master": 1, "Worker": workers}, command=["sleep", "infinity"],
                      conditions=[("Running", "")], labels={"ranks/user": "alice"})
        pods = [pod("PyTorchJob", name, A, "Master", 0, node=where, command=["sleep", "infinity"])]
        pods += [pod("PyTorchJob", name, A, "Worker", i, node=where, command=["sleep", "infinity"])
                 for i in range(workers)]
        for obj in (session, *pods):
            obj["metadata"]["creationTimestamp"] = STAMP
        add(m, ([session], pods))
    return m


def test_the_session_a_convert_makes_the_job_from_is_counted_first() -> None:
    """Freeing `pt`, which alice converts, is enough: it is named first, and alone, though `big`
    holds more GPUs."""
    m = two_sessions()
    demand = GpuDemand(pods=2, gpus_per_pod=1, selector=(("node-pool", "a100"),))
    assert [h.name for h in gpu_fit(m, A, demand, me="alice", now=T0).holders] == ["big"]  # the most GPUs first
    fit = gpu_fit(m, A, demand, me="alice", now=T0, first=(A, "PyTorchJob", "pt"))
    assert [h.name for h in fit.holders] == ["pt"] and fit.enough


def test_why_a_converted_job_waits_names_the_session_it_was_converted_from() -> None:
    """The converted job sat Pending on the GPUs of its own session, and the pending explanation named
    another session of the user's (the bigger one)."""
    m = two_sessions()
    j, pods = gang("pt-train", 1, 1, selector={"node-pool": "a100"})
    j[0]["metadata"].setdefault("annotations", {})["ranks/converted-from"] = "pt"
    add(m, (j, pods))
    d = explain(m, key("pt-train"), now=T0 + 60, me="alice")
    held = [f.text for f in d.findings if f.kind == "held"]
    assert held == ["this job was converted from your interactive session pt (started 60s ago, 2 GPUs on "
                    "a100-node-2), which holds what this job needs: `ranks delete pt -p team-a` frees them."], held
    assert "held by your interactive session pt" in d.summary, d.summary
