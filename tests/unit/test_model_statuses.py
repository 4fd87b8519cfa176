"""A model that judges each workload's status alone (`LiveModel.workload_views = "status"`, what
`ranks projects` builds, #31 item 4): no workload or rank view, and the same statuses and projects
as the model that builds every view, for running, degraded, pending, failed, succeeded, suspended
and restarting jobs of every framework."""

from __future__ import annotations

from monitors.model import LiveModel, WorkloadViews
from monitors.model_views import ProjectView
from tests.kubeflow_objects import job, pod
from tests.unit.test_model import load

PENDING = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
KINDS = {"PyTorchJob": {"Master": 1, "Worker": 2}, "TFJob": {"Chief": 1, "PS": 1, "Worker": 2},
         "XGBoostJob": {"Master": 1, "Worker": 1}, "MPIJob": {"Launcher": 1, "Worker": 2}}


def scenario() -> tuple[list[dict], list[dict]]:
    jobs, pods = [], []
    for kind, replicas in KINDS.items():
        ns = "runai-" + kind.lower()
        rtypes = [(rt, i) for rt, n in replicas.items() for i in range(n)]

        def pods_of(name: str, kind: str = kind, ns: str = ns, rtypes: list = rtypes, **kw) -> list[dict]:
            return [pod(kind, name, ns, rt, i, **kw) for rt, i in rtypes]

        jobs.append(job(kind, "run", ns, replicas, conditions=[("Created", ""), ("Running", "")]))
        pods += pods_of("run")
        jobs.append(job(kind, "degraded", ns, replicas, conditions=[("Running", "")]))
        pods += pods_of("degraded")[:-1]
        pods.append(pod(kind, "degraded", ns, *rtypes[-1], ready=False, waiting="CrashLoopBackOff", restarts=3))
        jobs.append(job(kind, "wait", ns, replicas, conditions=[("Created", "")]))
        pods += pods_of("wait", phase="Pending", unschedulable=PENDING)
        jobs.append(job(kind, "pulling", ns, replicas, conditions=[("Created", "")]))
        pods += pods_of("pulling", phase="Pending", ready=False, waiting="ImagePullBackOff")
        jobs.append(job(kind, "failed", ns, replicas, conditions=[("Running", ""), ("Failed", "")]))
        pods += pods_of("failed", phase="Failed", ready=False, terminated=(1, "Error"))
        jobs.append(job(kind, "done", ns, replicas, conditions=[("Running", ""), ("Succeeded", "")]))
        pods += pods_of("done", phase="Succeeded", ready=False, terminated=(0, "Completed"))
        jobs.append(job(kind, "again", ns, replicas, conditions=[("Running", ""), ("Restarting", "")]))
        pods += pods_of("again", ready=False, waiting="ContainerCreating")
        jobs.append(job(kind, "paused", ns, replicas, conditions=[("Created", ""), ("Suspended", "")]))
        jobs.append(job(kind, "new", ns, replicas))  # no pods yet
        # pods whose job is gone: judged from the pods alone
        pods += pods_of("orphan", phase="Failed", ready=False, terminated=(137, "OOMKilled"))
    return jobs, pods


def model(views: WorkloadViews) -> LiveModel:
    m = LiveModel()
    m.one_shot = True
    m.workload_views = views
    load(m, *scenario())
    return m


def projects(m: LiveModel) -> dict[str, ProjectView]:
    return dict(m.projects)


def test_statuses_alone_are_those_of_the_full_views_and_so_are_the_projects() -> None:
    full, brief = model("full"), model("status")
    statuses = {k: w.status for k, w in full.workloads.items()}
    assert set(statuses.values()) >= {"Running", "Degraded", "Pending", "Failed", "Succeeded", "Restarting",
                                      "Suspended"}
    assert len(statuses) == len(KINDS) * 10
    assert brief.workloads == {}
    assert brief.statuses == statuses
    assert projects(brief) == projects(full)
    assert all(p.running and p.pending for p in brief.projects.values())


def test_statuses_follow_changes_and_removals() -> None:
    m = model("status")
    key = ("runai-pytorchjob", "PyTorchJob", "wait")
    before = m.projects["runai-pytorchjob"]
    m.apply_pods([((key[0], f"wait-{rt}-{i}"), None) for rt, i in (("master", 0), ("worker", 0), ("worker", 1))])
    m.flush()
    assert m.statuses[key] == "Pending"  # its job is still there: no pods yet
    m.apply_jobs([(key, None)])
    m.flush()
    assert key not in m.statuses
    assert m.projects["runai-pytorchjob"].pending == before.pending - 1


def test_a_model_of_no_workload_views_builds_nothing_of_them() -> None:
    m = model("none")
    assert m.workloads == {} and m.statuses == {}
    assert m.nodes == model("full").nodes
