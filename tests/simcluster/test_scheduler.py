"""The scheduler component: placement, filters, kube-scheduler's messages, gangs, scale."""

from __future__ import annotations

import time
from typing import Any

import pytest

from simcluster.scenarios.nodes import gpu_node, gpu_nodes
from tests.waiting import wait_for

SCHED = pytest.mark.simcluster(components=("scheduler",))
OPS = pytest.mark.simcluster(components=("operators", "scheduler"))
NS = "default"
GPU = "nvidia.com/gpu"
NO_VICTIMS = "No preemption victims found for incoming pod"


def apply(simcluster, *objs: dict[str, Any]) -> None:
    for obj in objs:
        simcluster.call(simcluster.sim.apply, obj)


def pod(name: str, *, gpus: int = 0, cpu: str | None = None, memory: str | None = None,
        scheduler: str | None = None, **spec: Any) -> dict[str, Any]:
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    if gpus:
        limits[GPU] = str(gpus)
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [{"name": "main", "image": "x", "command": ["sleep", "1"],
                                 "resources": {"limits": limits, "requests": requests}}], **spec},
    }
    if scheduler:
        body["spec"]["schedulerName"] = scheduler
    return body


def scheduled_condition(core, name: str) -> Any:
    p = core.read_namespaced_pod(name, NS)
    for c in p.status.conditions or []:
        if c.type == "PodScheduled":
            return c
    return None


def node_of(core, name: str) -> str | None:
    return core.read_namespaced_pod(name, NS).spec.node_name


def unschedulable_message(core, name: str) -> str | None:
    c = scheduled_condition(core, name)
    if c is not None and c.status == "False" and c.reason == "Unschedulable":
        return c.message
    return None


@SCHED
def test_binds_and_records_the_scheduled_event(simcluster, core):
    apply(simcluster, *gpu_nodes(2, 8))
    core.create_namespaced_pod(NS, pod("a", gpus=4, cpu="2", memory="8Gi"))
    node = wait_for(lambda: node_of(core, "a"), what="bound")
    assert node in ("gpu-node-01", "gpu-node-02")
    c = scheduled_condition(core, "a")
    assert c.status == "True"
    ev = [e for e in core.list_namespaced_event(NS, field_selector="involvedObject.name=a").items
          if e.reason == "Scheduled"]
    assert [(e.type, e.message, e.source.component) for e in ev] == [
        ("Normal", f"Successfully assigned default/a to {node}", "default-scheduler")]
    # GPU pods are bin-packed: the second 4-GPU pod goes to the same node
    core.create_namespaced_pod(NS, pod("b", gpus=4))
    assert wait_for(lambda: node_of(core, "b"), what="b bound") == node


@SCHED
def test_insufficient_gpu_message_and_release_when_a_pod_finishes(simcluster, core):
    apply(simcluster, *gpu_nodes(4, 8))
    for i in range(4):
        core.create_namespaced_pod(NS, pod(f"full-{i}", gpus=8))
    wait_for(lambda: all(node_of(core, f"full-{i}") for i in range(4)), what="filled")
    core.create_namespaced_pod(NS, pod("waiting", gpus=2))
    msg = wait_for(lambda: unschedulable_message(core, "waiting"), what="Unschedulable")
    assert msg == (f"0/4 nodes are available: 4 Insufficient nvidia.com/gpu. "
                   f"preemption: 0/4 nodes are available: 4 {NO_VICTIMS}.")
    ev = [e for e in core.list_namespaced_event(NS, field_selector="involvedObject.name=waiting").items
          if e.reason == "FailedScheduling"]
    assert [(e.type, e.message) for e in ev] == [("Warning", msg)]
    assert core.read_namespaced_pod("waiting", NS).status.phase == "Pending"
    freed = node_of(core, "full-2")
    core.patch_namespaced_pod_status("full-2", NS, {"status": {"phase": "Succeeded"}})
    assert wait_for(lambda: node_of(core, "waiting"), what="placed after release") == freed
    assert scheduled_condition(core, "waiting").status == "True"


@SCHED
def test_mixed_reasons_sorted_like_kube_scheduler(simcluster, core):
    apply(simcluster, *gpu_nodes(6, 8, pool="train"), *gpu_nodes(2, 8, start=6, pool="infer"))
    for i in range(6):
        core.create_namespaced_pod(NS, pod(f"fill-{i}", gpus=8, nodeSelector={"node-pool": "train"}))
    wait_for(lambda: all(node_of(core, f"fill-{i}") for i in range(6)), what="train pool full")
    core.create_namespaced_pod(NS, pod("picky", gpus=1, nodeSelector={"node-pool": "train"}))
    msg = wait_for(lambda: unschedulable_message(core, "picky"), what="Unschedulable")
    assert msg.startswith(
        "0/8 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, 6 Insufficient nvidia.com/gpu.")
    # histogram entries are sorted as whole strings ("2 ..." before "6 ..."), as sort.Strings does
    assert msg.endswith("preemption: 0/8 nodes are available: 2 Preemption is not helpful for scheduling, "
                        f"6 {NO_VICTIMS}.")
    # a new node in the right pool lets it through
    apply(simcluster, gpu_node("gpu-node-99", 8, index=99, pool="train"))
    assert wait_for(lambda: node_of(core, "picky"), what="placed on new node") == "gpu-node-99"


@SCHED
def test_taints_tolerations_and_unschedulable_nodes(simcluster, core):
    tainted = gpu_node("tainted", 8, index=1)
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    cordoned = gpu_node("cordoned", 8, index=2)
    cordoned["spec"]["unschedulable"] = True
    soft = gpu_node("soft", 0, index=3)
    soft["spec"]["taints"] = [{"key": "x", "value": "y", "effect": "PreferNoSchedule"}]
    apply(simcluster, tainted, cordoned, soft)
    core.create_namespaced_pod(NS, pod("no-tol", gpus=1))
    msg = wait_for(lambda: unschedulable_message(core, "no-tol"), what="Unschedulable")
    assert msg.startswith("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, "
                          "1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable.")
    tol = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    core.create_namespaced_pod(NS, pod("tol", gpus=1, tolerations=tol))
    assert wait_for(lambda: node_of(core, "tol"), what="tolerating pod placed") == "tainted"
    core.create_namespaced_pod(NS, pod("exists", gpus=1, tolerations=[{"operator": "Exists"}]))
    assert wait_for(lambda: node_of(core, "exists"), what="tolerate-all pod placed") in ("tainted", "cordoned")
    # a PreferNoSchedule taint does not filter
    core.create_namespaced_pod(NS, pod("cpu-only", cpu="1"))
    assert wait_for(lambda: node_of(core, "cpu-only"), what="cpu pod placed") in ("soft", "tainted")


@SCHED
@pytest.mark.parametrize("expr,expected", [
    ({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}, "h100"),
    ({"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["NVIDIA-H100-80GB-HBM3"]}, "a100"),
    ({"key": "special", "operator": "Exists"}, "a100"),
    ({"key": "special", "operator": "DoesNotExist"}, "h100"),
])
def test_required_node_affinity(simcluster, core, expr, expected):
    a100 = gpu_node("a100", 8, index=1)
    a100["metadata"]["labels"]["special"] = "yes"
    h100 = gpu_node("h100", 8, index=2, product="NVIDIA-H100-80GB-HBM3")
    apply(simcluster, a100, h100)
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}
    for i in range(3):
        core.create_namespaced_pod(NS, pod(f"aff-{i}", gpus=1, affinity=affinity))
    assert {wait_for(lambda i=i: node_of(core, f"aff-{i}"), what="bound") for i in range(3)} == {expected}


@SCHED
def test_cpu_memory_and_pod_count(simcluster, core):
    small = gpu_node("small", 0, index=1, cpu=4, memory_gi=10)
    small["status"]["allocatable"]["pods"] = "2"
    apply(simcluster, small)
    core.create_namespaced_pod(NS, pod("c1", cpu="3", memory="1Gi"))
    wait_for(lambda: node_of(core, "c1"), what="c1")
    core.create_namespaced_pod(NS, pod("c2", cpu="1500m"))
    msg = wait_for(lambda: unschedulable_message(core, "c2"), what="c2 unschedulable")
    assert msg.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    core.create_namespaced_pod(NS, pod("m1", cpu="500m", memory="9Gi"))
    msg = wait_for(lambda: unschedulable_message(core, "m1"), what="m1 unschedulable")
    assert msg.startswith("0/1 nodes are available: 1 Insufficient memory.")
    core.create_namespaced_pod(NS, pod("tiny", cpu="100m"))
    wait_for(lambda: node_of(core, "tiny"), what="tiny")
    core.create_namespaced_pod(NS, pod("one-too-many"))
    msg = wait_for(lambda: unschedulable_message(core, "one-too-many"), what="pods limit")
    assert msg.startswith("0/1 nodes are available: 1 Too many pods.")
    core.delete_namespaced_pod("c1", NS)
    wait_for(lambda: node_of(core, "c2") and node_of(core, "one-too-many") is None, what="c2 placed")


@SCHED
def test_other_schedulers_and_bound_pods_are_left_alone(simcluster, core):
    apply(simcluster, *gpu_nodes(1, 8))
    core.create_namespaced_pod(NS, pod("volcano", gpus=1, scheduler="volcano"))
    core.create_namespaced_pod(NS, pod("runai", gpus=1, scheduler="runai-scheduler"))
    core.create_namespaced_pod(NS, pod("kai", gpus=1, scheduler="kai-scheduler"))
    core.create_namespaced_pod(NS, pod("manual", gpus=6, nodeName="gpu-node-01"))
    wait_for(lambda: node_of(core, "runai") and node_of(core, "kai"), what="runai/kai pods bound")
    ev = [e.source.component for e in core.list_namespaced_event(NS, field_selector="involvedObject.name=runai").items]
    assert ev == ["runai-scheduler"]
    time.sleep(0.2)
    assert node_of(core, "volcano") is None and scheduled_condition(core, "volcano") is None
    # the manually bound pod counts against the node: 6 + 1 + 1 of 8 GPUs used
    core.create_namespaced_pod(NS, pod("over", gpus=1))
    assert wait_for(lambda: unschedulable_message(core, "over"), what="full").startswith(
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")


@SCHED
def test_no_nodes(simcluster, core):
    core.create_namespaced_pod(NS, pod("lonely"))
    assert wait_for(lambda: unschedulable_message(core, "lonely")) == "no nodes available to schedule pods"
    apply(simcluster, *gpu_nodes(1, 8))
    wait_for(lambda: node_of(core, "lonely"), what="placed once a node exists")


# -- gangs -------------------------------------------------------------------------------------------
def pytorchjob(name: str, workers: int, gpus: int, min_available: int | None = None) -> dict[str, Any]:
    c = {"name": "pytorch", "image": "x", "command": ["python", "t.py"], "resources": {"limits": {GPU: str(gpus)}}}
    run: dict[str, Any] = {}
    if min_available is not None:
        run["schedulingPolicy"] = {"minAvailable": min_available}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"runPolicy": run, "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [c]}}},
                "Worker": {"replicas": workers, "template": {"spec": {"containers": [c]}}}}}}


def job_pods(core, job: str) -> list[Any]:
    return core.list_namespaced_pod(NS, label_selector=f"training.kubeflow.org/job-name={job}").items


@OPS
def test_gang_waits_all_or_nothing_and_is_released_when_gpus_free(simcluster, core, custom):
    apply(simcluster, *gpu_nodes(4, 8))
    custom.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", pytorchjob("first", 2, 8))
    wait_for(lambda: len(job_pods(core, "first")) == 3 and all(p.spec.node_name for p in job_pods(core, "first")),
             what="first job placed")
    # second job needs 2 full nodes; only one is free: nothing of it may be bound, and the message
    # says what the nodes can hold (one of its pods), not the gang's trial placement (#24)
    custom.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", pytorchjob("second", 1, 8))
    expected = ("0/4 nodes are available: 1 node(s) fit only 1 of the 2 pods of pod group second that must start "
                f"together, 3 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 {NO_VICTIMS}.")
    for name in ("second-master-0", "second-worker-0"):
        assert wait_for(lambda name=name: unschedulable_message(core, name), what="gang pending") == expected
    assert [p.spec.node_name for p in job_pods(core, "second")] == [None, None]
    events = [e for e in core.list_namespaced_event(NS, field_selector="reason=FailedScheduling").items]
    assert sorted(e.involved_object.name for e in events) == ["second-master-0", "second-worker-0"]
    assert {(e.type, e.message) for e in events} == {("Warning", expected)}
    # the first job finishes: its GPUs free up and the gang is placed together
    for p in job_pods(core, "first"):
        core.patch_namespaced_pod_status(p.metadata.name, NS, {"status": {"phase": "Succeeded"}})
    placed = wait_for(lambda: all(p.spec.node_name for p in job_pods(core, "second")) and job_pods(core, "second"),
                      what="gang placed")
    assert len({p.spec.node_name for p in placed}) == 2


@OPS
def test_gang_too_big_for_its_pool_says_what_each_node_can_hold(simcluster, core, custom):
    """The demo's big-pretrain: 5 x 8 GPUs in a pool of 4 nodes x 8, one of them full. Three nodes
    could each take one of its pods; the gang as a whole does not fit (was: `4 Insufficient`)."""
    pool = {"node-pool": "h100"}
    apply(simcluster, *gpu_nodes(4, 8, pool="h100"), *gpu_nodes(2, 4, pool="a100", prefix="small"))
    core.create_namespaced_pod(NS, pod("filler", gpus=8, nodeSelector=pool))
    wait_for(lambda: node_of(core, "filler"), what="one node filled")
    big = pytorchjob("big", 4, 8)
    for rs in big["spec"]["pytorchReplicaSpecs"].values():
        rs["template"]["spec"]["nodeSelector"] = pool
    custom.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", big)
    expected = ("0/6 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node "
                "affinity/selector, 3 node(s) fit only 3 of the 5 pods of pod group big that must start together. "
                "preemption: 0/6 nodes are available: 2 Preemption is not helpful for scheduling, "
                f"4 {NO_VICTIMS}.")
    for p in job_pods(core, "big"):
        assert wait_for(lambda n=p.metadata.name: unschedulable_message(core, n), what="gang pending") == expected
    assert [p.spec.node_name for p in job_pods(core, "big")] == [None] * 5
    # `ranks why` still reads it in kube-scheduler's shape
    from monitors.diagnostics.why import scheduler_words

    assert scheduler_words(expected) == (
        "none of 6 nodes can take a pod: 1 too few free GPUs, 2 not matching the pods' node selector, 3 node(s) fit "
        "only 3 of the 5 pods of pod group big that must start together")


@OPS
def test_gang_min_available_allows_partial_placement(simcluster, core, custom):
    apply(simcluster, *gpu_nodes(2, 8))
    custom.create_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", pytorchjob("part", 2, 8, 2))
    wait_for(lambda: len([p for p in job_pods(core, "part") if p.spec.node_name]) == 2, what="two of three bound")
    pods = job_pods(core, "part")
    assert pods[0].metadata.annotations["simcluster.io/pod-group-min-member"] == "2"
    left = [p.metadata.name for p in pods if not p.spec.node_name]
    assert len(left) == 1
    assert wait_for(lambda: unschedulable_message(core, left[0])).startswith(
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")


@SCHED
def test_gang_waits_for_its_members(simcluster, core):
    apply(simcluster, *gpu_nodes(2, 8))
    ann = {"scheduling.k8s.io/group-name": "g", "simcluster.io/pod-group-min-member": "2"}
    first = pod("g-0", gpus=1)
    first["metadata"]["annotations"] = ann
    core.create_namespaced_pod(NS, first)
    time.sleep(0.3)
    assert node_of(core, "g-0") is None  # one member of two: the gang waits
    second = pod("g-1", gpus=1)
    second["metadata"]["annotations"] = ann
    core.create_namespaced_pod(NS, second)
    wait_for(lambda: node_of(core, "g-0") and node_of(core, "g-1"), what="gang bound together")


# -- scale ----------------------------------------------------------------------------------------------
@SCHED
def test_thousand_nodes_twenty_thousand_pods(simcluster):
    """1,000 nodes x 8 GPUs and 20,000 pods: everything is decided, and a release of capacity
    places the waiting pods it makes room for (how fast the scale scenario gets ready: tests/perf/test_bench_sim.py)."""
    sim = simcluster.sim

    def load() -> None:
        for node in gpu_nodes(1000, 8):
            sim.apply(node)
        rt = sim.registry.get("", "v1", "pods")
        for i in range(20_000):
            body = pod(f"p{i}", gpus=1 if i % 2 else 0, cpu="1", memory="2Gi")
            body["spec"]["schedulerName"] = "default-scheduler"
            body["status"] = {"phase": "Pending"}
            sim.store.create(rt, body, NS)

    sched = next(c for c in sim.controllers if c.name == "scheduler")
    t0 = time.monotonic()
    simcluster.call(load)
    wait_for(lambda: simcluster.call(lambda: sched.idle), timeout=180, what="scheduling done")
    print(f"scheduling 20,000 pods on 1,000 nodes: {time.monotonic() - t0:.1f} s")
    bound = simcluster.call(lambda: len(sched.bound))
    waiting = simcluster.call(lambda: len(sched.unschedulable))
    assert bound == 18_000  # all 10,000 CPU pods + 8,000 one-GPU pods
    assert waiting == 2_000

    def finish_some() -> list[str]:
        rt = sim.registry.get("", "v1", "pods")
        done = [k for k, (_n, req, _g) in sched.bound.items() if req.get(GPU)][:100]
        for ns, name in done:
            sim.store.mutate(rt, ns, name, lambda o: o["status"].update(phase="Succeeded"))
        return [name for _, name in done]

    simcluster.call(finish_some)
    wait_for(lambda: simcluster.call(lambda: sched.idle and len(sched.unschedulable) == 1_900), timeout=60,
             what="100 waiting pods placed")
