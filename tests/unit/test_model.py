"""The live model: grouping, roles and ranks per framework, status derivation, keyed diffs."""

from __future__ import annotations

from monitors.model import LiveModel, is_sleep_infinity
from monitors.parse import parse_job, parse_namespace, parse_pod, parse_quota
from tests.kubeflow_objects import job, pod


def load(model: LiveModel, jobs=(), pods=(), namespaces=(), quotas=()):
    if namespaces:
        model.apply_namespaces([(n["metadata"]["name"], parse_namespace(n)) for n in namespaces])
    for j in jobs:
        version = j["apiVersion"].split("/")[1]
        rec = parse_job(j["kind"], "kubeflow.org", version)(j)
        model.apply_jobs([(rec.key, rec)])
    recs = [parse_pod(p) for p in pods]
    model.apply_pods([(r.key, r) for r in recs])
    if quotas:
        model.apply_quotas([((q["metadata"]["namespace"], q["metadata"]["name"]), parse_quota(q)) for q in quotas])
    return model.flush()


def ranks(model, key):
    return [(r.label, r.rank, r.lead) for r in model.workloads[key].ranks]


def test_pytorch_ranks_master_first_worker_index_plus_one():
    m = LiveModel()
    load(m, [job("PyTorchJob", "mnist", "a", {"Master": 1, "Worker": 3}, conditions=[("Created", ""), ("Running", "")])],
         [pod("PyTorchJob", "mnist", "a", "Master", 0)] + [pod("PyTorchJob", "mnist", "a", "Worker", i) for i in range(3)])
    assert ranks(m, ("a", "PyTorchJob", "mnist")) == [
        ("master-0", 0, True), ("worker-0", 1, False), ("worker-1", 2, False), ("worker-2", 3, False)]
    w = m.workloads[("a", "PyTorchJob", "mnist")]
    assert (w.status, w.ranks_ready, w.ranks_total, w.gpus_requested, w.gpus_allocated) == ("Running", 4, 4, 4, 4)
    assert w.framework == "pytorch" and not w.interactive


def test_mpi_launcher_found_by_label_despite_random_name():
    m = LiveModel()
    launcher = pod("MPIJob", "hvd", "a", "Launcher", None, gpus=0, name="hvd-launcher-x7k2p",
                   command=["sleep", "infinity"])
    load(m, [job("MPIJob", "hvd", "a", {"Launcher": 1, "Worker": 2}, command=["sleep", "infinity"],
                 conditions=[("Running", "")])],
         [pod("MPIJob", "hvd", "a", "Worker", 1), launcher, pod("MPIJob", "hvd", "a", "Worker", 0)])
    assert ranks(m, ("a", "MPIJob", "hvd")) == [("launcher", None, True), ("worker-0", 0, False), ("worker-1", 1, False)]
    w = m.workloads[("a", "MPIJob", "hvd")]
    assert w.interactive and w.lead.pod == "hvd-launcher-x7k2p"
    assert w.gpus_requested == 2  # launchers request none


def test_tf_chief_ps_worker():
    m = LiveModel()
    load(m, [job("TFJob", "tf", "a", {"Chief": 1, "PS": 1, "Worker": 2}, conditions=[("Running", "")])],
         [pod("TFJob", "tf", "a", "Worker", 1), pod("TFJob", "tf", "a", "PS", 0, gpus=0),
          pod("TFJob", "tf", "a", "Chief", 0), pod("TFJob", "tf", "a", "Worker", 0)])
    assert ranks(m, ("a", "TFJob", "tf")) == [
        ("chief-0", 0, True), ("worker-0", 1, False), ("worker-1", 2, False), ("ps-0", None, False)]


def test_xgboost_rank_adds_masters():
    m = LiveModel()
    load(m, [job("XGBoostJob", "xgb", "a", {"Master": 1, "Worker": 2})],
         [pod("XGBoostJob", "xgb", "a", "Master", 0), pod("XGBoostJob", "xgb", "a", "Worker", 1)])
    assert ranks(m, ("a", "XGBoostJob", "xgb")) == [("master-0", 0, True), ("worker-1", 2, False)]


def test_degraded_pending_failed_and_first_failure():
    m = LiveModel()
    load(m, [job("PyTorchJob", "d", "a", {"Master": 1, "Worker": 2}, conditions=[("Running", "")]),
             job("PyTorchJob", "p", "a", {"Master": 1, "Worker": 1}, conditions=[("Created", "")]),
             job("PyTorchJob", "f", "a", {"Master": 1, "Worker": 1}, conditions=[("Running", ""), ("Failed", "")])],
         [pod("PyTorchJob", "d", "a", "Master", 0), pod("PyTorchJob", "d", "a", "Worker", 0),
          pod("PyTorchJob", "d", "a", "Worker", 1, ready=False, waiting="CrashLoopBackOff", restarts=4),
          pod("PyTorchJob", "p", "a", "Master", 0, phase="Pending",
              unschedulable="0/8 nodes are available: 8 Insufficient nvidia.com/gpu."),
          pod("PyTorchJob", "p", "a", "Worker", 0, phase="Pending",
              unschedulable="0/8 nodes are available: 8 Insufficient nvidia.com/gpu."),
          pod("PyTorchJob", "f", "a", "Master", 0, phase="Failed", terminated=(1, "Error"), ready=False),
          pod("PyTorchJob", "f", "a", "Worker", 0, phase="Failed", terminated=(137, "OOMKilled"), ready=False)])
    d = m.workloads[("a", "PyTorchJob", "d")]
    assert (d.status, d.reason) == ("Degraded", "worker-1: CrashLoopBackOff")
    assert d.ranks[2].restarts == 4
    p = m.workloads[("a", "PyTorchJob", "p")]
    assert (p.status, p.reason) == ("Pending", "0/8 nodes are available: 8 Insufficient nvidia.com/gpu.")
    assert p.gpus_allocated == 0
    f = m.workloads[("a", "PyTorchJob", "f")]
    assert f.status == "Failed" and f.first_failure is not None
    assert f.first_failure.exit_code in (1, 137)


def test_keyed_diffs_and_removal():
    m = LiveModel()
    d1 = load(m, [job("PyTorchJob", "j", "a", {"Master": 1})], [pod("PyTorchJob", "j", "a", "Master", 0)])
    assert list(d1.workloads.added) == [("a", "PyTorchJob", "j")]
    again = m.flush()
    assert not again  # nothing changed: nothing to redraw
    changed = pod("PyTorchJob", "j", "a", "Master", 0, ready=False, waiting="CrashLoopBackOff")
    rec = parse_pod(changed)
    m.apply_pods([(rec.key, rec)])
    d2 = m.flush()
    assert list(d2.workloads.changed) == [("a", "PyTorchJob", "j")] and not d2.workloads.added
    m.apply_pods([(rec.key, None)])
    jrec = m.jobs[("a", "PyTorchJob", "j")]
    m.apply_jobs([(jrec.key, None)])
    d3 = m.flush()
    assert list(d3.workloads.removed) == [("a", "PyTorchJob", "j")]
    assert m.workloads == {}


def test_projects_quota_and_allocation():
    m = LiveModel()
    ns = [{"metadata": {"name": "runai-team-a", "labels": {"runai/queue": "team-a"}}},
          {"metadata": {"name": "research"}}, {"metadata": {"name": "kube-system"}}]
    quota = {"metadata": {"name": "q", "namespace": "runai-team-a"},
             "spec": {"hard": {"requests.nvidia.com/gpu": "16"}}}
    load(m, [job("PyTorchJob", "j", "runai-team-a", {"Master": 1, "Worker": 1}, gpus=2, conditions=[("Running", "")])],
         [pod("PyTorchJob", "j", "runai-team-a", "Master", 0, gpus=2),
          pod("PyTorchJob", "j", "runai-team-a", "Worker", 0, gpus=2)], namespaces=ns, quotas=[quota])
    proj = m.projects["runai-team-a"]
    assert (proj.name, proj.gpu_quota, proj.gpus_allocated, proj.running, proj.pending) == ("team-a", 16, 4, 1, 0)
    assert proj.gpu_util is None  # no metrics: null, never 0
    assert "kube-system" not in m.projects


def test_sleep_infinity_detection():
    assert is_sleep_infinity(["sleep", "infinity"])
    assert is_sleep_infinity(["sh", "-c", "sleep infinity"])
    assert is_sleep_infinity(["/bin/sleep", "infinity"])
    assert not is_sleep_infinity(["python", "train.py", "--sleep", "3"])
    assert not is_sleep_infinity([])


def test_what_a_dashboard_keeps_per_rank_is_shared_where_alike():
    """Per rank a dashboard keeps its workload's key, placement and label (20,000 ranks in each SSH
    session at the door's scale, #31): one object for every rank alike, not one each."""
    m = LiveModel()
    jobs = [job("PyTorchJob", n, "a", {"Master": 1, "Worker": 3}, conditions=[("Created", ""), ("Running", "")])
            for n in ("one", "two")]
    pods = [pod("PyTorchJob", n, "a", t, i) for n in ("one", "two") for t, c in (("Master", 1), ("Worker", 3))
            for i in range(c)]
    load(m, jobs, pods)
    keys = [m.pod_workload[("a", f"one-worker-{i}")] for i in range(3)]
    assert keys[0] == ("a", "PyTorchJob", "one") and all(k is keys[0] for k in keys)
    one, two = (m.workloads[("a", "PyTorchJob", n)].ranks for n in ("one", "two"))
    assert [r.label for r in one] == [r.label for r in two] == ["master-0", "worker-0", "worker-1", "worker-2"]
    assert all(a.label is b.label for a, b in zip(one, two, strict=True))
    placed = {(a.pod, b.pod): (m._rank_cache[(a.namespace, a.pod)][4], m._rank_cache[(b.namespace, b.pod)][4])
              for a, b in zip(one, two, strict=True)}
    assert all(p is q for p, q in placed.values())
    # a workload gone: its key is let go with its last pod
    m.apply_pods([((r.namespace, r.pod), None) for r in one])
    m.flush()
    assert ("a", "PyTorchJob", "one") not in m._wl_keys
