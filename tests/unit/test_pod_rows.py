"""Pods from a cells-only Table: kubectl's words back to phases, and each pod's workload read from its name."""

from __future__ import annotations

from monitors.model import LiveModel
from monitors.pod_rows import infer, name_prefixes, pods_from_table
from monitors.records import JobRec, PodRec, ReplicaSpec
from monitors.row_informer import oldest

COLUMNS = [{"name": n} for n in ("Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node",
                                 "Readiness Gates")]


def row(name: str, ready: str, status: str, restarts: str = "0", ip: str = "10.0.0.1", node: str = "n1",
        completed: str = "") -> dict:
    r: dict = {"cells": [name, ready, status, restarts, "5m", ip, node, "<none>", "<none>"]}
    if completed:
        r["conditions"] = [{"type": "Completed", "status": "True", "reason": completed}]
    return r


def job(kind: str, name: str, *replicas: tuple[str, int, float], uid: str = "u1", ns: str = "team") -> JobRec:
    return JobRec(kind, "kubeflow.org", "v1", ns, name, uid, (), (), None, None, (),
                  tuple(ReplicaSpec(t, n, g, (), "") for t, n, g in replicas), False, None, None, None)


def test_rows_become_partial_pods_with_phases_as_kubectl_words_imply():
    doc = {"kind": "Table", "columnDefinitions": COLUMNS, "rows": [
        row("a-worker-0", "1/1", "Running", "2 (5m ago)"),
        row("a-worker-1", "0/1", "Pending", ip="<none>", node="<none>"),
        row("a-worker-2", "0/1", "ContainerCreating"),
        row("a-worker-3", "0/1", "Completed", completed="Succeeded"),
        row("a-worker-4", "0/1", "OOMKilled", completed="Failed"),
        row("a-worker-5", "0/1", "CrashLoopBackOff", "7"),
        row("a-worker-6", "1/1", "Terminating"),
        row("a-worker-7", "0/2", "Init:0/1"),
        {"cells": ["short"]},  # malformed: skipped
    ]}
    pods = {p.name: p for p in pods_from_table(doc, "team")}
    assert len(pods) == 8 and all(p.partial and p.namespace == "team" for p in pods.values())
    w0 = pods["a-worker-0"]
    assert (w0.phase, w0.reason, w0.restarts, w0.ready, w0.total, w0.node, w0.pod_ip) == \
        ("Running", "", 2, 1, 1, "n1", "10.0.0.1")
    assert (pods["a-worker-1"].phase, pods["a-worker-1"].node, pods["a-worker-1"].pod_ip) == ("Pending", "", "")
    assert (pods["a-worker-2"].phase, pods["a-worker-2"].reason) == ("Pending", "ContainerCreating")
    assert (pods["a-worker-3"].phase, pods["a-worker-3"].reason) == ("Succeeded", "Completed")
    assert (pods["a-worker-4"].phase, pods["a-worker-4"].reason) == ("Failed", "OOMKilled")
    assert (pods["a-worker-5"].phase, pods["a-worker-5"].reason, pods["a-worker-5"].restarts) == \
        ("Running", "CrashLoopBackOff", 7)
    assert pods["a-worker-6"].deleting
    assert pods["a-worker-7"].phase == "Pending"


def _pod(name: str) -> PodRec:
    return pods_from_table({"columnDefinitions": COLUMNS, "rows": [row(name, "1/1", "Running")]}, "team")[0]


def _finder(*jobs: JobRec):
    return lambda name: [j for j in jobs if j.name == name]


def test_kubeflow_pods_are_claimed_by_replica_type_and_index_within_the_spec():
    pt = job("PyTorchJob", "llama", ("Master", 1, 8), ("Worker", 3, 8))
    p = infer(_pod("llama-worker-2"), _finder(pt))
    assert p.label("training.kubeflow.org/job-name") == "llama"
    assert (p.label("training.kubeflow.org/replica-type"), p.label("training.kubeflow.org/replica-index")) == \
        ("worker", "2")
    assert p.owner is not None and (p.owner.kind, p.owner.uid) == ("PyTorchJob", "u1") and p.gpus == 8
    assert not infer(_pod("llama-worker-3"), _finder(pt)).labels  # index beyond the spec: not its pod
    assert not infer(_pod("llama-evaluator-0"), _finder(pt)).labels  # no such replica type


def test_the_longest_workload_name_that_fits_wins():
    a = job("PyTorchJob", "a", ("Worker", 4, 1))
    aw = job("PyTorchJob", "a-worker", ("Worker", 2, 2), uid="u2")
    p = infer(_pod("a-worker-worker-1"), _finder(a, aw))
    assert p.label("training.kubeflow.org/job-name") == "a-worker" and p.gpus == 2
    q = infer(_pod("a-worker-3"), _finder(a, aw))
    assert q.label("training.kubeflow.org/job-name") == "a" and q.gpus == 1


def test_mpi_launchers_workers_jobsets_and_jobs():
    mpi = job("MPIJob", "hvd", ("Launcher", 1, 0), ("Worker", 2, 4))
    assert infer(_pod("hvd-launcher"), _finder(mpi)).label("training.kubeflow.org/job-role") == "launcher"
    assert infer(_pod("hvd-launcher-x7k2p"), _finder(mpi)).label("training.kubeflow.org/job-role") == "launcher"
    w = infer(_pod("hvd-worker-1"), _finder(mpi))
    assert (w.label("training.kubeflow.org/job-role"), w.label("training.kubeflow.org/replica-index"), w.gpus) == \
        ("worker", "1", 4)
    js = job("JobSet", "js", ("node", 4, 2))
    n = infer(_pod("js-node-0-3-abcde"), _finder(js))
    assert (n.label("jobset.sigs.k8s.io/replicatedjob-name"), n.label("batch.kubernetes.io/job-completion-index")) \
        == ("node", "3")
    batch = job("Job", "etl", ("job", 1, 0))
    assert infer(_pod("etl-9fz2q"), _finder(batch)).label("job-name") == "etl"
    assert infer(_pod("etl-2-9fz2q"), _finder(batch)).label("batch.kubernetes.io/job-completion-index") == "2"
    assert not infer(_pod("etl-a-b-c"), _finder(batch)).labels


def test_a_claimed_pod_loses_its_claim_when_no_workload_fits_any_more():
    pt = job("PyTorchJob", "llama", ("Worker", 2, 1))
    claimed = infer(_pod("llama-worker-0"), _finder(pt))
    gone = infer(claimed, _finder())
    assert (gone.labels, gone.owner, gone.gpus) == ((), None, 0.0)


def test_the_model_groups_rows_once_their_workload_arrives_and_counts_their_gpus():
    m = LiveModel()
    pods = [_pod(f"llama-worker-{i}") for i in range(2)]
    m.apply_pods([(p.key, p) for p in pods])
    m.flush()
    assert not m.workloads
    pt = job("PyTorchJob", "llama", ("Worker", 2, 8))
    m.apply_jobs([(pt.key, pt)])
    m.flush()
    wl = m.workloads[("team", "PyTorchJob", "llama")]
    assert (wl.ranks_total, wl.ranks_ready, wl.gpus_allocated, wl.status) == (2, 2, 16, "Running")
    assert [r.rank for r in wl.ranks] == [0, 1]
    m.apply_jobs([(pt.key, None)])
    m.flush()
    assert ("team", "PyTorchJob", "llama") not in m.workloads


def test_name_prefixes_and_oldest_resource_version():
    assert name_prefixes("a-b-c") == ("a-b", "a")
    assert oldest(["120", "97", "130"]) == "97"
    assert oldest(["abc", "97"]) == "abc"



def test_a_malformed_pod_read_whole_is_left_out():
    from monitors.monitor import parse_pods

    good = {"metadata": {"name": "a-worker-0", "namespace": "team"}, "spec": {}, "status": {"phase": "Running"}}
    body = b'{"items": [{"metadata": "not an object"}, ' + __import__("orjson").dumps(good) + b"]}"
    assert [p.name for p in parse_pods(body)] == ["a-worker-0"]
    assert parse_pods(b"not json") == [] and parse_pods(b"[]") == []
