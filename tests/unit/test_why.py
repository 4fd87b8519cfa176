"""`monitors.diagnostics.why`: why a workload is pending (gang, fit, taints, quota, the scheduler's
words) or what is wrong with a running one; and the scheduling fields the parsers now keep."""

from __future__ import annotations

from typing import Any

import orjson

from monitors.diagnostics.why import Diagnosis, explain, scheduler_words, tolerates
from monitors.model import LiveModel
from monitors.parse import parse_event, parse_job, parse_node, parse_pod
from tests.kubeflow_objects import job, pod
from tests.unit.test_model import load

A = "runai-team-a"
NS = [{"metadata": {"name": A, "labels": {"runai/queue": "team-a"}}}]
UNSCHED = ("0/8 nodes are available: 4 Insufficient nvidia.com/gpu, 4 node(s) didn't match Pod's node "
           "affinity/selector. preemption: 0/8 nodes are available: 4 No preemption victims found for "
           "incoming pod, 4 Preemption is not helpful for scheduling.")


def node(name: str, gpus: int, pool: str, *, product: str = "NVIDIA-H100-80GB-HBM3", ready: bool = True,
         cordoned: bool = False, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"unschedulable": cordoned} if cordoned else {}
    if taints:
        spec["taints"] = taints
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"node-pool": pool, "run.ai/node-pool": pool,
                                                  "nvidia.com/gpu.product": product}},
            "spec": spec,
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def cluster(nodes: list[dict[str, Any]] | None = None) -> LiveModel:
    """The demo's shape: 4 h100 nodes x 8 GPUs, 4 a100 nodes x 4, and a project with a quota of 16."""
    m = LiveModel()
    nodes = nodes if nodes is not None else (
        [node(f"h100-node-{i}", 8, "h100") for i in range(1, 5)]
        + [node(f"a100-node-{i}", 4, "a100", product="NVIDIA-A100-SXM4-80GB") for i in range(1, 5)])
    m.apply_nodes([(n["metadata"]["name"], parse_node(n)) for n in nodes])
    quota = {"metadata": {"name": "gpu-quota", "namespace": A}, "spec": {"hard": {"requests.nvidia.com/gpu": "16"}},
             "status": {"used": {"requests.nvidia.com/gpu": "0"}}}
    load(m, namespaces=NS, quotas=[quota])
    return m


def with_spec(obj: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A job (every replica template) or a pod with these pod-spec fields."""
    if obj["kind"] == "Pod":
        obj["spec"].update(spec)
        return obj
    for rs in obj["spec"]["pytorchReplicaSpecs"].values():
        rs["template"]["spec"].update(spec)
    return obj


def gang(name: str, workers: int, gpus: int, *, min_available: int | None = None, selector: dict | None = None,
         tolerations: list | None = None, unschedulable: str = UNSCHED) -> tuple[list[dict], list[dict]]:
    """A pending PyTorchJob: a master and `workers` workers of `gpus` GPUs each, none placed."""
    spec: dict[str, Any] = {}
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    j = with_spec(job("PyTorchJob", name, A, {"Master": 1, "Worker": workers}, gpus=gpus,
                      conditions=[("Created", "")]), **spec)
    if min_available:
        j["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": min_available}
    pods = [with_spec(pod("PyTorchJob", name, A, "Master", 0, phase="Pending", gpus=gpus,
                          unschedulable=unschedulable), **spec)]
    pods += [with_spec(pod("PyTorchJob", name, A, "Worker", i, phase="Pending", gpus=gpus,
                           unschedulable=unschedulable), **spec) for i in range(workers)]
    return [j], pods


def running(name: str, workers: int, gpus: int, node_name: str = "h100-node-1", **kw: Any
            ) -> tuple[list[dict], list[dict]]:
    j = job("PyTorchJob", name, A, {"Master": 1, "Worker": workers}, gpus=gpus, conditions=[("Running", "")])
    pods = [pod("PyTorchJob", name, A, "Master", 0, gpus=gpus, node=node_name)]
    pods += [pod("PyTorchJob", name, A, "Worker", i, gpus=gpus, node=node_name, **(kw if i == 0 else {}))
             for i in range(workers)]
    return [j], pods


def scheduling_event(name: str, message: str, count: int = 3) -> dict[str, Any]:
    return {"metadata": {"name": f"{name}.1", "namespace": A}, "involvedObject": {"kind": "Pod", "name": name},
            "type": "Warning", "reason": "FailedScheduling", "message": message, "count": count,
            "lastTimestamp": "2026-11-01T00:00:05Z"}


def add(m: LiveModel, jobs_pods: tuple[list[dict], list[dict]], events: list[dict] = ()) -> None:
    jobs, pods = jobs_pods
    load(m, jobs, pods)
    recs = [parse_event(e) for e in events]
    m.apply_events([((r.namespace, r.name), r) for r in recs])
    m.flush()


def key(name: str) -> tuple[str, str, str]:
    return (A, "PyTorchJob", name)


def texts(d: Diagnosis, kind: str) -> list[str]:
    return [f.text for f in d.findings if f.kind == kind]


# -- pending ----------------------------------------------------------------------------------------------

def test_gang_larger_than_its_pool_with_quota_and_scheduler_words():
    m = cluster()
    add(m, running("llama", 3, 2))  # 8 GPUs on h100-node-1
    add(m, gang("big-pretrain", 4, 8, min_available=5, selector={"node-pool": "h100"}),
        [scheduling_event("big-pretrain-master-0", UNSCHED)])
    d = explain(m, key("big-pretrain"))
    assert d.status == "Pending"
    assert d.summary == ("needs 5 pods x 8 GPUs together; pool h100 has 4 nodes x 8 GPUs (32 in all), fewer than "
                         "the 40 needed; project team-a quota 16, allocated 8")
    assert {"gang", "fit", "quota", "scheduler"} <= set(d.kinds())
    (g,) = texts(d, "gang")
    assert "needs all 5 pods placed together" in g
    assert "3 more could be placed now (h100-node-2, h100-node-3, h100-node-4)" in g
    assert "the other 2 fit nowhere now" in g
    (fit,) = texts(d, "fit")
    assert "asks 8 GPUs on nodes with node-pool=h100" in fit
    assert "4 nodes in pool h100 (NVIDIA-H100-80GB-HBM3, 8 GPUs each)" in fit
    (q,) = texts(d, "quota")
    assert "quota of 16, 8 allocated; big-pretrain asks 40, more than the whole quota" in q
    (s,) = texts(d, "scheduler")
    assert s == ("the scheduler says none of 8 nodes can take a pod: 4 too few free GPUs, 4 not matching the "
                 "pods' node selector (3 times).")


def test_pods_larger_than_any_node():
    m = cluster()
    add(m, gang("huge", 3, 64, min_available=4))
    d = explain(m, key("huge"))
    assert "needs 4 pods x 64 GPUs together" in d.summary
    assert "each pod asks 64 GPUs; the largest node has 8" in d.summary
    assert "no node can take one: 8 with fewer GPUs than that" in texts(d, "fit")[0]
    assert "0 more could be placed now" in texts(d, "gang")[0]


def test_selector_no_node_has():
    m = cluster()
    add(m, gang("lost", 1, 1, selector={"node-pool": "h200"}))
    d = explain(m, key("lost"))
    assert "no node has node-pool=h200" in d.summary
    assert "8 not matching the node selector" in texts(d, "fit")[0]


def test_untolerated_taint_and_tolerated_taint():
    taint = [{"key": "dedicated", "value": "inference", "effect": "NoSchedule"}]
    nodes = [node(f"n{i}", 8, "h100", taints=taint) for i in range(2)]
    m = cluster(nodes)
    add(m, gang("t", 1, 8))
    d = explain(m, key("t"))
    assert texts(d, "taint") == ["2 nodes have the taint dedicated=inference:NoSchedule that the pods do not tolerate."]
    assert "2 nodes tainted dedicated=inference:NoSchedule (not tolerated)" in d.summary

    m = cluster(nodes)
    add(m, gang("ok", 1, 8, tolerations=[{"key": "dedicated", "operator": "Equal", "value": "inference",
                                          "effect": "NoSchedule"}]))
    d = explain(m, key("ok"))
    assert not texts(d, "taint")
    assert "all would fit now" in texts(d, "gang")[0]


def test_cordoned_and_not_ready_nodes():
    m = cluster([node("c", 8, "p", cordoned=True), node("down", 8, "p", ready=False)])
    add(m, gang("w", 0, 1))
    d = explain(m, key("w"))
    assert "no node can take one: 1 cordoned, 1 not ready" in texts(d, "fit")[0]
    assert "1 node cordoned" in d.summary and "1 node not ready" in d.summary


def test_quota_full_though_nodes_have_room():
    m = cluster()
    add(m, running("llama", 3, 4, node_name="h100-node-1"))  # 16 of 16 in the quota
    add(m, running("other", 0, 0, node_name="a100-node-1"))
    add(m, gang("small", 1, 2))
    d = explain(m, key("small"))
    assert texts(d, "quota") == ["project team-a has a GPU quota of 16, 16 allocated; small asks 4, more than the "
                                 "0 left."]
    assert "project team-a quota 16, allocated 16" in d.summary


def test_quota_exceeded_event_is_a_quota_finding():
    m = cluster()
    j = job("PyTorchJob", "refused", A, {"Master": 1}, gpus=1, conditions=[("Created", "")])
    ev = {"metadata": {"name": "refused.1", "namespace": A}, "involvedObject": {"kind": "PyTorchJob", "name": "refused"},
          "type": "Warning", "reason": "FailedCreate", "count": 1, "lastTimestamp": "2026-11-01T00:00:05Z",
          "message": 'pods "refused-master-0" is forbidden: exceeded quota: gpu-quota, requested: '
                     "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16"}
    add(m, ([j], []), [ev])
    d = explain(m, key("refused"))
    assert any("exceeded quota" in t for t in texts(d, "quota"))
    assert "needs 1 pod x 1 GPU" in d.summary


def test_image_pull_backoff_after_placement():
    m = cluster()
    j = job("PyTorchJob", "img", A, {"Master": 1}, gpus=1, conditions=[("Created", "")])
    p = pod("PyTorchJob", "img", A, "Master", 0, phase="Pending", ready=False, waiting="ImagePullBackOff",
            node="h100-node-2")
    add(m, ([j], [p]))
    d = explain(m, key("img"))
    assert texts(d, "startup") == ["master-0 is on h100-node-2 but does not start: ImagePullBackOff."]
    assert "master-0: ImagePullBackOff" in d.summary


def test_placed_but_not_started_yet():
    m = cluster()
    j = job("PyTorchJob", "slow", A, {"Master": 1, "Worker": 1}, gpus=1, conditions=[("Created", "")])
    pods = [pod("PyTorchJob", "slow", A, r, 0, phase="Pending", ready=False, waiting="ContainerCreating",
                node="h100-node-2") for r in ("Master", "Worker")]
    add(m, ([j], pods))
    d = explain(m, key("slow"))
    assert texts(d, "startup") == ["2 pods placed (h100-node-2 x2) but not started yet: ContainerCreating."]
    assert d.summary == "all pods placed; 2 pods still starting"


def test_scheduler_words():
    assert scheduler_words("0/3 nodes are available: 1 node(s) had untolerated taint {gpu: reserved}, "
                           "2 node(s) were unschedulable. preemption: 0/3 nodes are available: 3 Preemption "
                           "is not helpful for scheduling.") == \
        "none of 3 nodes can take a pod: 1 tainted gpu: reserved (not tolerated), 2 cordoned"
    assert scheduler_words("0/2 nodes are available: 2 Insufficient memory.") == \
        "none of 2 nodes can take a pod: 2 too little free memory"
    assert scheduler_words("pod group is not ready, 1/5 members") == "pod group is not ready, 1/5 members"


def test_tolerates():
    t = ("gpu", "reserved", "NoSchedule")
    assert tolerates([("", "Exists", "", "")], t)
    assert tolerates([("gpu", "Exists", "", "NoSchedule")], t)
    assert tolerates([("gpu", "Equal", "reserved", "")], t)
    assert not tolerates([("gpu", "Equal", "other", "NoSchedule")], t)
    assert not tolerates([("gpu", "Exists", "", "NoExecute")], t)


# -- running and finished ---------------------------------------------------------------------------------

def test_healthy_running_job_nothing_wrong():
    m = cluster()
    add(m, running("fine", 2, 1))
    d = explain(m, key("fine"))
    assert (d.status, d.summary, d.findings, d.ok) == ("Running", "nothing wrong", (), True)


def test_degraded_rank_with_restarts():
    m = cluster()
    add(m, running("crashy", 2, 1, ready=False, waiting="CrashLoopBackOff", restarts=4))
    d = explain(m, key("crashy"))
    assert d.status == "Degraded"
    assert texts(d, "degraded") == ["worker-0 is not ready: CrashLoopBackOff, on h100-node-1."]
    assert texts(d, "restarts") == ["worker-0 restarted 4 times."]
    assert d.summary == "2/3 ranks ready; worker-0: CrashLoopBackOff; 4 restarts"


def test_failed_rank_first_failure():
    m = cluster()
    add(m, running("bert", 2, 1, phase="Failed", ready=False, terminated=(1, "Error")))
    d = explain(m, key("bert"))
    assert texts(d, "failed") == ["worker-0 failed first: exit code 1 (Error)."]
    assert "worker-0 failed first (exit 1, Error)" in d.summary


def test_restarts_with_last_exit_on_a_ready_rank():
    m = cluster()
    j, pods = running("oom", 1, 1, restarts=2)
    pods[1]["status"]["containerStatuses"][0]["lastState"] = {
        "terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-01T00:04:00Z"}}
    add(m, (j, pods))
    d = explain(m, key("oom"))
    assert texts(d, "restarts") == ["worker-0 restarted 2 times; last exit: OOMKilled (exit code 137)."]
    assert d.summary == "2 restarts"


def test_rank_on_a_node_that_went_not_ready():
    m = cluster([node("h100-node-1", 8, "h100", ready=False)])
    add(m, running("stuck", 1, 1))
    d = explain(m, key("stuck"))
    assert texts(d, "node") == ["node h100-node-1, where ranks run, is not ready."]


def test_suspended_and_to_json():
    m = cluster()
    j = job("PyTorchJob", "paused", A, {"Master": 1}, gpus=1, conditions=[("Suspended", "")])
    add(m, ([j], []))
    d = explain(m, key("paused"))
    assert d.kinds() == ["suspended"] and d.summary == "suspended"
    data = orjson.loads(orjson.dumps(d.to_json()))
    assert data == {"namespace": A, "kind": "PyTorchJob", "name": "paused", "status": "Suspended",
                    "summary": "suspended", "findings": [{"kind": "suspended", "text": d.findings[0].text}]}


def test_partial_listing_says_at_most():
    m = cluster()
    add(m, gang("g", 1, 8))
    d = explain(m, key("g"), cluster_pods=False)
    assert "at most 2 more could be placed now" in texts(d, "gang")[0]
    assert "GPUs other projects use are not counted" in texts(d, "gang")[0]


# -- the parsers keep what the diagnosis needs -------------------------------------------------------------

def test_parse_pod_node_selector_and_tolerations():
    p = with_spec(pod("PyTorchJob", "j", A, "Worker", 0), nodeSelector={"node-pool": "h100", "a": "b"},
                  tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                               {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 300}, "junk"])
    rec = parse_pod(p)
    assert rec.node_selector == ("a", "b", "node-pool", "h100")
    assert rec.tolerations == (("gpu", "Exists", "", "NoSchedule"),
                               ("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"))
    assert parse_pod(p).tolerations is rec.tolerations  # one shared tuple per distinct set
    plain = parse_pod(pod("PyTorchJob", "j", A, "Worker", 1))
    assert (plain.node_selector, plain.tolerations) == ((), ())


def test_parse_node_taints():
    n = node("n", 8, "p", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"},
                                   {"key": "nvidia.com/gpu", "effect": "NoExecute", "timeAdded": "2026-01-01T00:00:00Z"}])
    assert parse_node(n).taints == (("dedicated", "x", "NoSchedule"), ("nvidia.com/gpu", "", "NoExecute"))
    assert parse_node(node("m", 8, "p")).taints == ()
    assert parse_node({"metadata": {"name": "x"}, "spec": {"taints": "nonsense"}}).taints == ()


def test_parse_job_unchanged_by_the_new_fields():
    rec = parse_job("PyTorchJob", "kubeflow.org", "v1")(job("PyTorchJob", "j", A, {"Master": 1}))
    assert rec.replicas[0].gpus_per_replica == 1


def test_pods_not_created_yet_count_as_the_job_asks():
    m = cluster()
    j, pods = gang("partial", 3, 8, min_available=4, selector={"node-pool": "h100"})
    add(m, (j, pods[:1]))  # the operator created only the master so far
    d = explain(m, key("partial"))
    assert d.summary.startswith("needs 4 pods x 8 GPUs together")
    assert "4 more could be placed now" in texts(d, "gang")[0]
