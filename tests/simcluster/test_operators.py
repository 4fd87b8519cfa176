"""The emulated training operators against the official client and a real kubectl.

Pods are driven through their phases by patching pod status (as a kubelet would), except in the
end-to-end tests at the bottom, which run the real kubelet component.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from simcluster.scenarios.nodes import gpu_nodes
from tests import waiting

OPS = pytest.mark.simcluster(components=("operators", "scheduler"))
NS = "default"
GPU = "nvidia.com/gpu"


# -- helpers ---------------------------------------------------------------------------------------
def not_found(exc: Exception) -> bool:
    """A 404: the object is not created yet (the operator has not got to it)."""
    return isinstance(exc, ApiException) and exc.status == 404


# the shared poller; a 404 (an object the operator has yet to create) counts as "not yet"
wait_for = partial(waiting.wait_for, ignore=not_found)


def add_nodes(simcluster, count: int = 4, gpus: int = 8, **kw: Any) -> None:
    for node in gpu_nodes(count, gpus, **kw):
        simcluster.call(simcluster.sim.apply, node)


def container(name: str, cmd: list[str] | None = None, gpus: int = 0, **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "registry.local/train:1", **extra}
    if cmd is not None:
        c["command"] = cmd
    if gpus:
        c["resources"] = {"limits": {GPU: str(gpus)}}
    return c


def replica(n: int | None, c: dict[str, Any], policy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [c]}}}
    if n is not None:
        spec["replicas"] = n
    if policy:
        spec["restartPolicy"] = policy
    return spec


def pytorchjob(name: str, workers: int = 2, gpus: int = 1, policy: str | None = None,
               run: dict[str, Any] | None = None, cmd: list[str] | None = None) -> dict[str, Any]:
    cmd = cmd or ["python", "train.py"]
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "runPolicy": run or {},
            "pytorchReplicaSpecs": {
                "Master": replica(1, container("pytorch", cmd, gpus), policy),
                "Worker": replica(workers, container("pytorch", cmd, gpus), policy),
            },
        },
    }


def mpijob(name: str, workers: int = 2, launcher_cmd: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "slotsPerWorker": 4,
            "mpiReplicaSpecs": {
                "Launcher": replica(1, container("launcher", launcher_cmd or ["mpirun", "-np", "8", "python", "t.py"])),
                "Worker": replica(workers, container("worker", None, gpus=4)),
            },
            **spec,
        },
    }


@pytest.fixture
def nodes(simcluster):
    add_nodes(simcluster)


PLURALS = {"PyTorchJob": ("v1", "pytorchjobs"), "TFJob": ("v1", "tfjobs"), "XGBoostJob": ("v1", "xgboostjobs"),
           "MPIJob": ("v2beta1", "mpijobs")}


def create(custom, obj: dict[str, Any]) -> dict[str, Any]:
    version, plural = PLURALS[obj["kind"]]
    return custom.create_namespaced_custom_object("kubeflow.org", version, NS, plural, obj)


def get_job(custom, kind: str, name: str) -> dict[str, Any]:
    version, plural = PLURALS[kind]
    return custom.get_namespaced_custom_object("kubeflow.org", version, NS, plural, name)


def cond(job: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c["type"] == ctype:
            return c
    return None


def has_cond(custom, kind: str, name: str, ctype: str, status: str = "True") -> Callable[[], Any]:
    def check() -> Any:
        job = get_job(custom, kind, name)
        c = cond(job, ctype)
        return job if c is not None and c["status"] == status else None

    return check


def pods_of(core, job: str) -> dict[str, Any]:
    pods = core.list_namespaced_pod(NS, label_selector=f"training.kubeflow.org/job-name={job}").items
    return {p.metadata.name: p for p in pods}


def set_phase(core, name: str, phase: str, *, container_name: str = "pytorch", exit_code: int | None = None,
              ready: bool | None = None, restarts: int = 0) -> None:
    """Act as the kubelet: write the pod's phase and container state through pods/status."""
    state: dict[str, Any]
    if phase == "Running":
        state = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    elif phase in ("Succeeded", "Failed"):
        code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
        state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z"}}
    else:
        state = {"waiting": {"reason": "ContainerCreating"}}
    is_ready = phase == "Running" if ready is None else ready
    status = {
        "phase": phase,
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True" if is_ready else "False"},
        ],
        "containerStatuses": [{
            "name": container_name, "ready": is_ready, "restartCount": restarts, "image": "img", "imageID": "",
            "state": state,
        }],
    }
    core.patch_namespaced_pod_status(name, NS, {"status": status})


def env_of(pod) -> dict[str, str | None]:
    return {e.name: e.value for e in pod.spec.containers[0].env or []}


# -- PyTorchJob ------------------------------------------------------------------------------------
@OPS
def test_pytorchjob_pods_services_env_and_scheduling(simcluster, nodes, core, custom):
    job = create(custom, pytorchjob("mnist", workers=2, gpus=2))
    uid = job["metadata"]["uid"]
    pods = wait_for(lambda: len(pods_of(core, "mnist")) == 3 and pods_of(core, "mnist"), what="3 pods")
    assert sorted(pods) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    master, w1 = pods["mnist-master-0"], pods["mnist-worker-1"]
    assert master.metadata.labels == {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    assert w1.metadata.labels == {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1",
    }
    ref = master.metadata.owner_references[0]
    assert (ref.kind, ref.name, ref.uid, ref.controller, ref.api_version) == (
        "PyTorchJob", "mnist", uid, True, "kubeflow.org/v1")
    assert master.metadata.annotations["scheduling.k8s.io/group-name"] == "mnist"
    assert master.metadata.annotations["simcluster.io/pod-group-min-member"] == "3"
    assert master.spec.restart_policy == "OnFailure"
    assert [(e.name, e.value) for e in w1.spec.containers[0].env] == [
        ("PYTHONUNBUFFERED", "1"), ("MASTER_PORT", "23456"), ("PET_MASTER_PORT", "23456"),
        ("MASTER_ADDR", "mnist-master-0"), ("PET_MASTER_ADDR", "mnist-master-0"),
        ("PET_NPROC_PER_NODE", "auto"), ("WORLD_SIZE", "3"), ("RANK", "2"), ("PET_NNODES", "3"),
        ("PET_NODE_RANK", "2"),
    ]
    assert env_of(master)["RANK"] == "0"
    # the defaulter adds the port to the pytorch container
    assert [(p.name, p.container_port) for p in master.spec.containers[0].ports] == [("pytorchjob-port", 23456)]

    svcs = {s.metadata.name: s for s in core.list_namespaced_service(NS).items}
    assert set(svcs) == {"mnist-master-0", "mnist-worker-0", "mnist-worker-1"}
    svc = svcs["mnist-worker-0"]
    assert svc.spec.cluster_ip == "None"
    assert svc.spec.selector == {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "0",
    }
    assert [(p.name, p.port) for p in svc.spec.ports] == [("pytorchjob-port", 23456)]
    assert svc.metadata.owner_references[0].uid == uid

    # the scheduler bound every pod and said so
    def bound() -> Any:
        ps = pods_of(core, "mnist")
        return all(p.spec.node_name for p in ps.values()) and ps

    ps = wait_for(bound, what="pods bound")
    for p in ps.values():
        sched = next(c for c in p.status.conditions if c.type == "PodScheduled")
        assert sched.status == "True"
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=mnist-master-0").items
    assert [e.message for e in events if e.reason == "Scheduled"] == [
        f"Successfully assigned default/mnist-master-0 to {ps['mnist-master-0'].spec.node_name}"]
    job_events = {e.message for e in core.list_namespaced_event(NS, field_selector="involvedObject.name=mnist").items}
    assert {"Created pod: mnist-master-0", "Created service: mnist-worker-1"} <= job_events

    created = wait_for(has_cond(custom, "PyTorchJob", "mnist", "Created"))
    c = cond(created, "Created")
    assert (c["reason"], c["message"]) == ("PyTorchJobCreated", "PyTorchJob mnist is created.")
    assert created["status"]["replicaStatuses"]["Worker"]["selector"] == (
        "training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=worker")


@OPS
def test_pytorchjob_running_then_succeeded(simcluster, nodes, core, custom):
    create(custom, pytorchjob("pt", workers=2))
    wait_for(lambda: len(pods_of(core, "pt")) == 3, what="pods")
    for name in ("pt-master-0", "pt-worker-0", "pt-worker-1"):
        set_phase(core, name, "Running")
    job = wait_for(has_cond(custom, "PyTorchJob", "pt", "Running"), what="Running")
    assert cond(job, "Running")["reason"] == "PyTorchJobRunning"
    assert cond(job, "Running")["message"] == "PyTorchJob pt is running."
    assert job["status"]["replicaStatuses"]["Worker"]["active"] == 2
    assert job["status"]["startTime"]

    set_phase(core, "pt-master-0", "Succeeded")
    job = wait_for(has_cond(custom, "PyTorchJob", "pt", "Succeeded"), what="Succeeded")
    c = cond(job, "Succeeded")
    assert (c["reason"], c["message"]) == ("PyTorchJobSucceeded", "PyTorchJob pt is successfully completed.")
    assert cond(job, "Running")["status"] == "False"
    assert job["status"]["completionTime"]
    # cleanPodPolicy defaults to None for PyTorch: the workers are left alone
    job = wait_for(lambda: get_job(custom, "PyTorchJob", "pt")["status"]["replicaStatuses"]["Worker"].get("succeeded") == 2
                   and get_job(custom, "PyTorchJob", "pt"), what="active counted as succeeded")
    assert "active" not in job["status"]["replicaStatuses"]["Worker"]
    assert set(pods_of(core, "pt")) == {"pt-master-0", "pt-worker-0", "pt-worker-1"}


@OPS
def test_pytorchjob_failure_with_restart_policy_never(simcluster, nodes, core, custom):
    create(custom, pytorchjob("fails", workers=1, policy="Never"))
    wait_for(lambda: len(pods_of(core, "fails")) == 2, what="pods")
    set_phase(core, "fails-master-0", "Running")
    set_phase(core, "fails-worker-0", "Failed", exit_code=3)
    job = wait_for(has_cond(custom, "PyTorchJob", "fails", "Failed"), what="Failed")
    c = cond(job, "Failed")
    assert c["reason"] == "PyTorchJobFailed"
    assert c["message"] == "PyTorchJob fails is failed because 1 Worker replica(s) failed."
    assert job["status"]["replicaStatuses"]["Worker"]["failed"] == 1
    assert job["status"]["completionTime"]


@OPS
def test_onfailure_pod_failure_restarts_the_replica(simcluster, nodes, core, custom):
    create(custom, pytorchjob("rs", workers=1))  # PyTorch default restartPolicy: OnFailure
    pods = wait_for(lambda: len(pods_of(core, "rs")) == 2 and pods_of(core, "rs"), what="pods")
    old_uid = pods["rs-worker-0"].metadata.uid
    set_phase(core, "rs-worker-0", "Running")
    set_phase(core, "rs-worker-0", "Failed", exit_code=1)
    job = wait_for(has_cond(custom, "PyTorchJob", "rs", "Restarting"), what="Restarting")
    c = cond(job, "Restarting")
    assert (c["reason"], c["message"]) == ("PyTorchJobRestarting", "job rs is restarting because Worker replica(s) failed.")
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=rs,reason=PyTorchJobRestarting").items
    assert [e.type for e in events] == ["Warning"]
    new = wait_for(lambda: (p := pods_of(core, "rs").get("rs-worker-0")) is not None
                   and p.metadata.uid != old_uid and p, what="recreated worker")
    assert new.status.phase == "Pending"
    set_phase(core, "rs-worker-0", "Running")
    set_phase(core, "rs-master-0", "Running")
    job = wait_for(has_cond(custom, "PyTorchJob", "rs", "Running"), what="Running again")
    assert cond(job, "Restarting") is None  # Running replaces Restarting, as upstream


@OPS
def test_exit_code_policy(simcluster, nodes, core, custom):
    create(custom, pytorchjob("ec", workers=1, policy="ExitCode"))
    pods = wait_for(lambda: len(pods_of(core, "ec")) == 2 and pods_of(core, "ec"), what="pods")
    assert pods["ec-worker-0"].spec.restart_policy == "Never"
    old = pods["ec-worker-0"].metadata.uid
    set_phase(core, "ec-worker-0", "Failed", exit_code=137)  # >= 128: retryable
    wait_for(lambda: (p := pods_of(core, "ec").get("ec-worker-0")) is not None and p.metadata.uid != old,
             what="retry")
    set_phase(core, "ec-worker-0", "Failed", exit_code=2)  # 1..127: permanent
    job = wait_for(has_cond(custom, "PyTorchJob", "ec", "Failed"), what="Failed")
    assert cond(job, "Failed")["message"] == 'job "ec" is failing because "Worker" replica(s) failed.'


@OPS
def test_backoff_limit_counts_container_restarts(simcluster, nodes, core, custom):
    create(custom, pytorchjob("bo", workers=1, run={"backoffLimit": 2}))
    wait_for(lambda: len(pods_of(core, "bo")) == 2, what="pods")
    set_phase(core, "bo-master-0", "Running")
    set_phase(core, "bo-worker-0", "Running", restarts=2)
    job = wait_for(has_cond(custom, "PyTorchJob", "bo", "Failed"), what="Failed")
    assert cond(job, "Failed")["message"] == "Job bo has failed because it has reached the specified backoff limit"
    wait_for(lambda: all(p.metadata.deletion_timestamp for p in pods_of(core, "bo").values())
             or not pods_of(core, "bo"), what="pods deleted")


@OPS
def test_recreates_a_deleted_pod_without_duplicates(simcluster, nodes, core, custom):
    create(custom, pytorchjob("rc", workers=2))
    pods = wait_for(lambda: len(pods_of(core, "rc")) == 3 and pods_of(core, "rc"), what="pods")
    for name in pods:
        set_phase(core, name, "Running")
    old = pods["rc-worker-1"].metadata.uid
    core.delete_namespaced_pod("rc-worker-1", NS)
    new = wait_for(lambda: (p := pods_of(core, "rc").get("rc-worker-1")) is not None
                   and p.metadata.uid != old and p, what="recreated pod")
    assert new.metadata.labels["training.kubeflow.org/replica-index"] == "1"
    time.sleep(0.3)
    names = sorted(pods_of(core, "rc"))
    assert names == ["rc-master-0", "rc-worker-0", "rc-worker-1"]


@OPS
def test_suspend_and_resume(simcluster, nodes, core, custom):
    create(custom, pytorchjob("sus", workers=1))
    wait_for(lambda: len(pods_of(core, "sus")) == 2, what="pods")
    for name in ("sus-master-0", "sus-worker-0"):
        set_phase(core, name, "Running")
    wait_for(has_cond(custom, "PyTorchJob", "sus", "Running"))
    custom.patch_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", "sus",
                                          {"spec": {"runPolicy": {"suspend": True}}})
    job = wait_for(has_cond(custom, "PyTorchJob", "sus", "Suspended"), what="Suspended")
    c = cond(job, "Suspended")
    assert (c["reason"], c["message"]) == ("PyTorchJobSuspended", "PyTorchJob sus is suspended.")
    assert cond(job, "Running")["status"] == "False"
    wait_for(lambda: not pods_of(core, "sus"), what="pods deleted")
    assert not [s for s in core.list_namespaced_service(NS).items if s.metadata.name.startswith("sus-")]
    custom.patch_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", "sus",
                                          {"spec": {"runPolicy": {"suspend": False}}})
    job = wait_for(has_cond(custom, "PyTorchJob", "sus", "Suspended", "False"), what="resumed")
    assert cond(job, "Suspended")["reason"] == "PyTorchJobResumed"
    wait_for(lambda: len(pods_of(core, "sus")) == 2, what="pods recreated")


@OPS
@pytest.mark.parametrize("policy,left", [
    ("All", set()),
    ("Running", {"cp-master-0"}),
    ("None", {"cp-master-0", "cp-worker-0", "cp-worker-1"}),
])
def test_clean_pod_policy(simcluster, nodes, core, custom, policy, left):
    create(custom, pytorchjob("cp", workers=2, run={"cleanPodPolicy": policy}))
    wait_for(lambda: len(pods_of(core, "cp")) == 3, what="pods")
    for name in ("cp-worker-0", "cp-worker-1"):
        set_phase(core, name, "Running")
    set_phase(core, "cp-master-0", "Succeeded")
    wait_for(has_cond(custom, "PyTorchJob", "cp", "Succeeded"))
    wait_for(lambda: set(pods_of(core, "cp")) == left, what=f"pods left {left}")
    time.sleep(0.2)
    assert set(pods_of(core, "cp")) == left
    svcs = {s.metadata.name for s in core.list_namespaced_service(NS).items if s.metadata.name.startswith("cp-")}
    assert svcs == left


@OPS
def test_ttl_seconds_after_finished_deletes_the_job(simcluster, nodes, core, custom):
    create(custom, pytorchjob("ttl", workers=1, run={"ttlSecondsAfterFinished": 1}))
    wait_for(lambda: len(pods_of(core, "ttl")) == 2, what="pods")
    set_phase(core, "ttl-master-0", "Succeeded")
    wait_for(has_cond(custom, "PyTorchJob", "ttl", "Succeeded"))

    def gone() -> bool:
        try:
            get_job(custom, "PyTorchJob", "ttl")
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, timeout=6, what="job deleted by TTL")
    wait_for(lambda: not pods_of(core, "ttl"), what="pods cascade-deleted")


@OPS
def test_active_deadline_fails_the_job(simcluster, nodes, core, custom):
    create(custom, pytorchjob("dl", workers=1, run={"activeDeadlineSeconds": 1}))
    wait_for(lambda: len(pods_of(core, "dl")) == 2, what="pods")
    for name in ("dl-master-0", "dl-worker-0"):
        set_phase(core, name, "Running")
    job = wait_for(has_cond(custom, "PyTorchJob", "dl", "Failed"), timeout=6, what="deadline")
    c = cond(job, "Failed")
    assert c["reason"] == "PyTorchJobFailed"
    assert c["message"] == "Job dl has failed because it was active longer than specified deadline"
    wait_for(lambda: not pods_of(core, "dl"), what="pods deleted")


# -- bad manifests ------------------------------------------------------------------------------------
def _bad(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    version, _ = PLURALS[kind]
    return {"apiVersion": f"kubeflow.org/{version}", "kind": kind, "metadata": {"name": "bad", "namespace": NS},
            "spec": spec}


BAD = [
    ("PyTorchJob", {}, "PyTorchJobFailedValidation",
     "PyTorchJob failed validation because spec.pytorchReplicaSpecs: Required value: must be required"),
    ("PyTorchJob", {"pytorchReplicaSpecs": {"Worker": replica(-1, container("pytorch", ["python"]))}},
     "PyTorchJobFailedValidation",
     "PyTorchJob failed validation because [spec.pytorchReplicaSpecs[Worker].replicas: Invalid value: -1: "
     "must be greater than or equal to 0, spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1]"),
    ("PyTorchJob", {"pytorchReplicaSpecs": {"Launcher": replica(1, container("pytorch", ["python"]))}},
     "PyTorchJobFailedValidation",
     'PyTorchJob failed validation because spec.pytorchReplicaSpecs[Launcher]: Unsupported value: "Launcher": '
     'supported values: "Master", "Worker"'),
    ("PyTorchJob", {"pytorchReplicaSpecs": {"Master": replica(1, container("pytorch"))}},
     "PyTorchJobFailedValidation",
     "PyTorchJob failed validation because spec.pytorchReplicaSpecs[Master].template.spec.containers[0].command: "
     "Required value: a container needs a command or args (simcluster runs no container images)"),
    ("TFJob", {"tfReplicaSpecs": {"Worker": replica(2, container("main", ["python"]))}}, "TFJobFailedValidation",
     "TFJob failed validation because spec.tfReplicaSpecs[Worker].template.spec.containers: Required value: "
     "must have at least one container with name tensorflow"),
    ("XGBoostJob", {"xgbReplicaSpecs": {"Worker": replica(2, container("xgboost", ["python"]))}},
     "XGBoostJobFailedValidation",
     "XGBoostJob failed validation because spec.xgbReplicaSpecs[Master]: Required value: must be present"),
    ("MPIJob", {"mpiReplicaSpecs": {"Worker": replica(2, container("w"))}}, "ValidationError",
     "Found validation errors: spec.mpiReplicaSpecs[Launcher]: Required value: must have Launcher replica spec"),
    ("MPIJob", {"mpiReplicaSpecs": {"Launcher": replica(1, container("l")), "Worker": replica(1, container("w"))}},
     "ValidationError",
     "Found validation errors: spec.mpiReplicaSpecs[Launcher].template.spec.containers[0].command: Required value: "
     "a container needs a command or args (simcluster runs no container images)"),
    ("PyTorchJob", "not a spec", "PyTorchJobFailedValidation",
     "PyTorchJob failed validation because spec: Required value: must be specified"),
]


@OPS
@pytest.mark.parametrize("kind,spec,reason,message", BAD, ids=[f"{k}-{i}" for i, (k, *_r) in enumerate(BAD)])
def test_bad_manifest_gets_failed_condition(simcluster, nodes, core, custom, kind, spec, reason, message):
    create(custom, _bad(kind, spec))
    job = wait_for(has_cond(custom, kind, "bad", "Failed"), what="Failed condition")
    c = cond(job, "Failed")
    assert (c["reason"], c["message"]) == (reason, message)
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=bad").items
    assert [e.type for e in events if e.reason == reason] == ["Warning"]
    assert not core.list_namespaced_pod(NS).items
    # the operators keep working
    create(custom, pytorchjob("good", workers=1))
    wait_for(lambda: len(pods_of(core, "good")) == 2, what="a good job still gets pods")


@OPS
def test_replica_keys_are_camel_cased(simcluster, nodes, core, custom):
    job = pytorchjob("cc", workers=1)
    specs = job["spec"]["pytorchReplicaSpecs"]
    job["spec"]["pytorchReplicaSpecs"] = {"master": specs["Master"], "WORKER": specs["Worker"]}
    create(custom, job)
    pods = wait_for(lambda: len(pods_of(core, "cc")) == 2 and pods_of(core, "cc"), what="pods")
    assert pods["cc-worker-0"].metadata.labels["training.kubeflow.org/replica-type"] == "worker"
    job = wait_for(lambda: set((get_job(custom, "PyTorchJob", "cc").get("status") or {}).get("replicaStatuses", {}))
                   == {"Master", "Worker"} and get_job(custom, "PyTorchJob", "cc"), what="status keys")
    assert set(job["status"]["replicaStatuses"]) == {"Master", "Worker"}


# -- TFJob and XGBoostJob (applied with kubectl) -----------------------------------------------------
TFJOB = """\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: dist, namespace: default}
spec:
  tfReplicaSpecs:
    Chief:
      replicas: 1
      template: {spec: {containers: [{name: tensorflow, image: tf, command: [python, t.py]}]}}
    PS:
      replicas: 1
      template: {spec: {containers: [{name: tensorflow, image: tf, command: [python, t.py]}]}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: tensorflow, image: tf, command: [python, t.py]}]}}
"""


@OPS
def test_tfjob_tf_config_and_chief_success(simcluster, nodes, core, custom, kubectl):
    out = kubectl.run("apply", "-f", "-", input=TFJOB)
    assert "tfjob.kubeflow.org/dist created" in out.stdout
    pods = wait_for(lambda: len(pods_of(core, "dist")) == 4 and pods_of(core, "dist"), what="4 pods")
    assert sorted(pods) == ["dist-chief-0", "dist-ps-0", "dist-worker-0", "dist-worker-1"]
    assert pods["dist-chief-0"].metadata.labels["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in pods["dist-worker-0"].metadata.labels
    assert pods["dist-ps-0"].metadata.labels["training.kubeflow.org/replica-type"] == "ps"
    tf = json.loads(env_of(pods["dist-worker-1"])["TF_CONFIG"])
    assert tf == {
        "cluster": {
            "chief": ["dist-chief-0.default.svc:2222"],
            "ps": ["dist-ps-0.default.svc:2222"],
            "worker": ["dist-worker-0.default.svc:2222", "dist-worker-1.default.svc:2222"],
        },
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    assert pods["dist-chief-0"].spec.restart_policy == "Never"
    got = kubectl.run("get", "services", "-o", "name").stdout.split()
    assert {"service/dist-chief-0", "service/dist-ps-0", "service/dist-worker-1"} <= set(got)

    for name in pods:
        set_phase(core, name, "Running", container_name="tensorflow")
    job = wait_for(has_cond(custom, "TFJob", "dist", "Running"))
    assert cond(job, "Running")["message"] == "TFJob default/dist is running."
    set_phase(core, "dist-chief-0", "Succeeded", container_name="tensorflow")
    job = wait_for(has_cond(custom, "TFJob", "dist", "Succeeded"))
    assert cond(job, "Succeeded")["message"] == "TFJob default/dist successfully completed."
    # TFJob's cleanPodPolicy defaults to Running: the running PS and workers are removed
    wait_for(lambda: set(pods_of(core, "dist")) == {"dist-chief-0"}, what="running pods cleaned")
    state = kubectl.run("get", "tfjob", "dist", "-o", "jsonpath={.status.conditions[-1:].type}").stdout
    assert state == "Succeeded"


@OPS
def test_tfjob_without_chief_succeeds_on_worker0(simcluster, nodes, core, custom):
    job = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "w0", "namespace": NS},
           "spec": {"tfReplicaSpecs": {"Worker": replica(2, container("tensorflow", ["python"]))}}}
    create(custom, job)
    pods = wait_for(lambda: len(pods_of(core, "w0")) == 2 and pods_of(core, "w0"), what="pods")
    assert pods["w0-worker-0"].metadata.labels["training.kubeflow.org/job-role"] == "master"
    set_phase(core, "w0-worker-1", "Running", container_name="tensorflow")
    set_phase(core, "w0-worker-0", "Succeeded", container_name="tensorflow")
    wait_for(has_cond(custom, "TFJob", "w0", "Succeeded"))


@OPS
def test_xgboostjob_env(simcluster, nodes, core, custom):
    job = {"apiVersion": "kubeflow.org/v1", "kind": "XGBoostJob", "metadata": {"name": "xgb", "namespace": NS},
           "spec": {"xgbReplicaSpecs": {"Master": replica(1, container("xgboost", ["python", "x.py"])),
                                        "Worker": replica(2, container("xgboost", ["python", "x.py"]))}}}
    create(custom, job)
    pods = wait_for(lambda: len(pods_of(core, "xgb")) == 3 and pods_of(core, "xgb"), what="pods")
    assert [(e.name, e.value) for e in pods["xgb-worker-1"].spec.containers[0].env] == [
        ("MASTER_PORT", "9999"), ("MASTER_ADDR", "xgb-master-0"), ("WORLD_SIZE", "3"), ("RANK", "2"),
        ("PYTHONUNBUFFERED", "1"), ("WORKER_PORT", "9999"), ("WORKER_ADDRS", "xgb-worker-0,xgb-worker-1"),
    ]
    assert pods["xgb-master-0"].metadata.labels["training.kubeflow.org/operator-name"] == "xgboostjob-controller"
    set_phase(core, "xgb-master-0", "Running", container_name="xgboost")
    job = wait_for(has_cond(custom, "XGBoostJob", "xgb", "Running"))
    assert cond(job, "Running")["message"] == "XGBoostJob xgb is running."
    set_phase(core, "xgb-master-0", "Succeeded", container_name="xgboost")
    job = wait_for(has_cond(custom, "XGBoostJob", "xgb", "Succeeded"))
    assert cond(job, "Succeeded")["reason"] == "XGBoostJobSucceeded"


# -- MPIJob -------------------------------------------------------------------------------------------
MPIJOB = """\
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: hvd, namespace: default}
spec:
  slotsPerWorker: 4
  runPolicy: {cleanPodPolicy: Running}
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - {name: launcher, image: mpi, command: [mpirun, -np, "8", python, train.py]}
    Worker:
      replicas: 2
      template:
        metadata: {labels: {team: vision}}
        spec:
          containers:
          - name: worker
            image: mpi
            resources: {limits: {nvidia.com/gpu: 4}}
"""


def launcher_pods(core, job: str) -> list[Any]:
    sel = f"training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=launcher"
    return core.list_namespaced_pod(NS, label_selector=sel).items


@OPS
def test_mpijob_objects_and_lifecycle(simcluster, nodes, core, custom, batch, kubectl):
    kubectl.run("apply", "-f", "-", input=MPIJOB)
    job = wait_for(has_cond(custom, "MPIJob", "hvd", "Created"))
    uid = job["metadata"]["uid"]
    assert cond(job, "Created")["message"] == "MPIJob default/hvd is created."

    svc = wait_for(lambda: core.read_namespaced_service("hvd", NS))
    assert svc.spec.cluster_ip == "None"
    assert svc.spec.selector == {"training.kubeflow.org/operator-name": "mpi-operator",
                                 "training.kubeflow.org/job-name": "hvd"}
    assert svc.metadata.labels == {"app": "hvd"}
    cm = core.read_namespaced_config_map("hvd-config", NS)
    assert cm.data["hostfile"] == ("hvd-worker-0.hvd.default.svc slots=4\n"
                                   "hvd-worker-1.hvd.default.svc slots=4\n")
    assert cm.data["discover_hosts.sh"] == "#!/bin/sh\n"
    assert cm.metadata.owner_references[0].uid == uid
    secret = core.read_namespaced_secret("hvd-ssh", NS)
    assert secret.type == "kubernetes.io/ssh-auth"
    assert sorted(secret.data) == ["ssh-privatekey", "ssh-publickey"]

    pods = wait_for(lambda: len(pods_of(core, "hvd")) == 3 and pods_of(core, "hvd"), what="3 pods")
    w = pods["hvd-worker-1"]
    assert w.metadata.labels == {
        "team": "vision",
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": "hvd",
        "training.kubeflow.org/job-role": "worker",
        "training.kubeflow.org/replica-index": "1",
    }
    assert (w.spec.hostname, w.spec.subdomain) == ("hvd-worker-1", "hvd")
    assert w.spec.dns_config.searches == ["hvd.default.svc.cluster.local"]
    assert w.spec.containers[0].command == ["/usr/sbin/sshd", "-De"]  # the operator's, as upstream
    assert "simcluster.io/default-command" not in (w.metadata.annotations or {})
    assert env_of(w) == {"K_MPI_JOB_ROLE": "worker"}
    assert w.spec.restart_policy == "Never"
    assert [(m.name, m.mount_path) for m in w.spec.containers[0].volume_mounts] == [("ssh-auth", "/root/.ssh")]
    assert w.metadata.owner_references[0].kind == "MPIJob"

    ljob = batch.read_namespaced_job("hvd-launcher", NS)
    assert ljob.metadata.labels == {"app": "hvd"}
    assert ljob.metadata.owner_references[0].uid == uid
    launcher = next(p for n, p in pods.items() if n.startswith("hvd-launcher-"))
    assert re.fullmatch(r"hvd-launcher-[bcdfghjklmnpqrstvwxz2456789]{5}", launcher.metadata.name)
    labels = launcher.metadata.labels
    assert labels["training.kubeflow.org/job-role"] == "launcher"
    assert "training.kubeflow.org/replica-type" not in labels
    assert labels["batch.kubernetes.io/job-name"] == labels["job-name"] == "hvd-launcher"
    assert labels["batch.kubernetes.io/controller-uid"] == labels["controller-uid"] == ljob.metadata.uid
    ref = launcher.metadata.owner_references[0]
    assert (ref.kind, ref.name, ref.controller) == ("Job", "hvd-launcher", True)
    assert (launcher.spec.hostname, launcher.spec.subdomain) == ("hvd-launcher", "hvd")
    assert launcher.spec.restart_policy == "OnFailure"
    env = env_of(launcher)
    assert env["K_MPI_JOB_ROLE"] == "launcher"
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_keep_fqdn_hostnames"] == "true"
    assert env["OMPI_MCA_plm_rsh_args"] == "-o ConnectionAttempts=10"
    assert env["OMPI_MCA_orte_set_default_slots"] == "4"
    assert env["NVIDIA_VISIBLE_DEVICES"] in (None, "") and "NVIDIA_DRIVER_CAPABILITIES" in env
    vol = next(v for v in launcher.spec.volumes if v.name == "mpi-job-config")
    assert vol.config_map.name == "hvd-config"
    assert [(i.key, i.path, i.mode) for i in vol.config_map.items] == [
        ("hostfile", "hostfile", 0o444), ("discover_hosts.sh", "discover_hosts.sh", 0o555)]
    mounts = {m.name: m.mount_path for m in launcher.spec.containers[0].volume_mounts}
    assert mounts == {"ssh-auth": "/root/.ssh", "mpi-job-config": "/etc/mpi"}
    # all three pods form one gang: workers + launcher
    assert launcher.metadata.annotations["simcluster.io/pod-group-min-member"] == "3"

    # Running needs the launcher and every worker running
    for name in ("hvd-worker-0", "hvd-worker-1"):
        set_phase(core, name, "Running", container_name="worker")
    set_phase(core, launcher.metadata.name, "Running", container_name="launcher")
    job = wait_for(has_cond(custom, "MPIJob", "hvd", "Running"), what="Running")
    assert cond(job, "Running")["message"] == "MPIJob default/hvd is running."
    assert job["status"]["replicaStatuses"] == {"Launcher": {"active": 1}, "Worker": {"active": 2}}
    wait_for(lambda: core.read_namespaced_config_map("hvd-config", NS).data["discover_hosts.sh"]
             == "#!/bin/sh\necho hvd-worker-0.hvd.default.svc\necho hvd-worker-1.hvd.default.svc\n",
             what="discover_hosts.sh lists running workers")

    set_phase(core, launcher.metadata.name, "Succeeded", container_name="launcher")
    ljob = wait_for(lambda: (j := batch.read_namespaced_job("hvd-launcher", NS)).status.succeeded == 1 and j)
    assert [(c.type, c.reason) for c in ljob.status.conditions] == [
        ("SuccessCriteriaMet", "CompletionsReached"), ("Complete", "CompletionsReached")]
    job = wait_for(has_cond(custom, "MPIJob", "hvd", "Succeeded"), what="Succeeded")
    assert cond(job, "Succeeded")["reason"] == "MPIJobSucceeded"
    assert job["status"]["completionTime"]
    # cleanPodPolicy Running: running workers go; the launcher pod belongs to the Job and stays
    wait_for(lambda: [p.metadata.name for p in pods_of(core, "hvd").values()] == [launcher.metadata.name],
             what="workers cleaned")


@OPS
def test_mpijob_wait_for_workers_ready(simcluster, nodes, core, custom, batch):
    create(custom, mpijob("wfr", workers=2, launcherCreationPolicy="WaitForWorkersReady"))
    wait_for(lambda: len(pods_of(core, "wfr")) == 2, what="workers")
    time.sleep(0.3)
    assert not batch.list_namespaced_job(NS).items
    set_phase(core, "wfr-worker-0", "Running", container_name="worker")
    time.sleep(0.3)
    assert not batch.list_namespaced_job(NS).items
    set_phase(core, "wfr-worker-1", "Running", container_name="worker")
    wait_for(lambda: batch.read_namespaced_job("wfr-launcher", NS), what="launcher Job")
    wait_for(lambda: launcher_pods(core, "wfr"), what="launcher pod")


@OPS
def test_mpijob_launcher_failure_and_deadline(simcluster, nodes, core, custom, batch):
    create(custom, mpijob("mf", workers=1, runPolicy={"backoffLimit": 0}))
    lp = wait_for(lambda: launcher_pods(core, "mf"), what="launcher pod")[0]
    core.patch_namespaced_pod_status(lp.metadata.name, NS, {"status": {
        "phase": "Failed", "reason": "OOMKilled", "message": "out of memory"}})
    job = wait_for(has_cond(custom, "MPIJob", "mf", "Failed"), what="Failed")
    c = cond(job, "Failed")
    assert c["reason"] == "BackoffLimitExceeded/OOMKilled"
    assert c["message"] == "Job has reached the specified backoff limit: out of memory"

    create(custom, mpijob("md", workers=1, runPolicy={"activeDeadlineSeconds": 1}))
    assert wait_for(lambda: batch.read_namespaced_job("md-launcher", NS)).spec.active_deadline_seconds == 1
    job = wait_for(has_cond(custom, "MPIJob", "md", "Failed"), timeout=6, what="deadline")
    c = cond(job, "Failed")
    assert (c["reason"], c["message"]) == ("DeadlineExceeded", "Job was active longer than specified deadline")


@OPS
def test_mpijob_suspend_resume_and_recreate(simcluster, nodes, core, custom, batch):
    create(custom, mpijob("ms", workers=2))
    wait_for(lambda: len(pods_of(core, "ms")) == 3, what="pods")
    old = pods_of(core, "ms")["ms-worker-0"].metadata.uid
    core.delete_namespaced_pod("ms-worker-0", NS)
    wait_for(lambda: (p := pods_of(core, "ms").get("ms-worker-0")) is not None and p.metadata.uid != old,
             what="worker recreated")
    custom.patch_namespaced_custom_object("kubeflow.org", "v2beta1", NS, "mpijobs", "ms",
                                          {"spec": {"runPolicy": {"suspend": True}}})
    job = wait_for(has_cond(custom, "MPIJob", "ms", "Suspended"), what="Suspended")
    assert cond(job, "Suspended")["reason"] == "MPIJobSuspended"
    wait_for(lambda: not pods_of(core, "ms"), what="all pods gone")
    assert batch.read_namespaced_job("ms-launcher", NS).spec.suspend is True
    custom.patch_namespaced_custom_object("kubeflow.org", "v2beta1", NS, "mpijobs", "ms",
                                          {"spec": {"runPolicy": {"suspend": False}}})
    job = wait_for(has_cond(custom, "MPIJob", "ms", "Suspended", "False"), what="resumed")
    assert cond(job, "Suspended")["reason"] == "MPIJobResumed"
    wait_for(lambda: len(pods_of(core, "ms")) == 3, what="pods back")


@OPS
def test_cascade_delete_removes_everything(simcluster, nodes, core, custom, batch, kubectl):
    create(custom, mpijob("gone", workers=2))
    create(custom, pytorchjob("gone2", workers=1))
    wait_for(lambda: len(pods_of(core, "gone")) == 3 and len(pods_of(core, "gone2")) == 2, what="pods")
    kubectl.run("delete", "mpijob", "gone")
    kubectl.run("delete", "pytorchjob", "gone2")

    def empty() -> bool:
        return (not core.list_namespaced_pod(NS).items and not core.list_namespaced_service(NS).items
                and not batch.list_namespaced_job(NS).items and not core.list_namespaced_secret(NS).items
                and not [c for c in core.list_namespaced_config_map(NS).items if c.metadata.name == "gone-config"])

    wait_for(empty, what="everything deleted")


# -- the batch/v1 Job controller -------------------------------------------------------------------
@OPS
def test_indexed_job(simcluster, nodes, core, batch):
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "idx"},
            "spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 2,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [container("main", ["sh", "-c", "echo $JOB_COMPLETION_INDEX"])]}}}}
    job = batch.create_namespaced_job(NS, body)
    pods = wait_for(lambda: len(p := core.list_namespaced_pod(NS, label_selector="job-name=idx").items) == 2 and p,
                    what="2 pods (parallelism)")
    by_index = {p.metadata.annotations["batch.kubernetes.io/job-completion-index"]: p for p in pods}
    assert set(by_index) == {"0", "1"}
    p0 = by_index["0"]
    assert re.fullmatch(r"idx-0-[a-z0-9]{5}", p0.metadata.name)
    assert p0.spec.hostname == "idx-0"
    assert p0.metadata.labels["batch.kubernetes.io/job-completion-index"] == "0"
    assert p0.metadata.labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
    env = p0.spec.containers[0].env[0]
    assert env.name == "JOB_COMPLETION_INDEX"
    assert env.value_from.field_ref.field_path == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    got = batch.read_namespaced_job("idx", NS)
    assert got.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": job.metadata.uid}
    for p in pods:
        set_phase(core, p.metadata.name, "Succeeded", container_name="main")
    third = wait_for(lambda: [p for p in core.list_namespaced_pod(NS, label_selector="job-name=idx").items
                              if p.status.phase == "Pending"], what="third index")
    assert third[0].metadata.annotations["batch.kubernetes.io/job-completion-index"] == "2"
    set_phase(core, third[0].metadata.name, "Succeeded", container_name="main")
    done = wait_for(lambda: (j := batch.read_namespaced_job("idx", NS)).status.completion_time and j)
    assert done.status.succeeded == 3
    assert done.status.completed_indexes == "0-2"
    assert [c.type for c in done.status.conditions] == ["SuccessCriteriaMet", "Complete"]


@OPS
def test_nonindexed_job_backoff_limit(simcluster, nodes, core, batch):
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bl"},
            "spec": {"backoffLimit": 1, "template": {"spec": {"containers": [container("main", ["false"])]}}}}
    batch.create_namespaced_job(NS, body)
    for n in (1, 2):
        pod = wait_for(lambda: [p for p in core.list_namespaced_pod(NS, label_selector="job-name=bl").items
                                if p.status.phase == "Pending"], what=f"attempt {n}")[0]
        assert re.fullmatch(r"bl-[a-z0-9]{5}", pod.metadata.name)
        set_phase(core, pod.metadata.name, "Failed", container_name="main")
    job = wait_for(lambda: (j := batch.read_namespaced_job("bl", NS)).status.conditions and j)
    failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert (failed.reason, failed.message) == ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert job.status.failed == 2


# -- end to end with the kubelet: real processes ---------------------------------------------------
E2E = pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))


@E2E
def test_e2e_pytorchjob_runs_processes(simcluster, nodes, core, custom):
    create(custom, pytorchjob("e2e", workers=1, gpus=1, cmd=["sh", "-c", "echo hi from rank $RANK of $WORLD_SIZE"]))
    job = wait_for(has_cond(custom, "PyTorchJob", "e2e", "Succeeded"), timeout=20, what="Succeeded")
    assert job["status"]["replicaStatuses"]["Master"]["succeeded"] == 1
    log = wait_for(lambda: core.read_namespaced_pod_log("e2e-master-0", NS), what="master log")
    assert log == "hi from rank 0 of 2\n"
    log = wait_for(lambda: core.read_namespaced_pod_log("e2e-worker-0", NS), what="worker log")
    assert log == "hi from rank 1 of 2\n"


@E2E
def test_e2e_mpijob_launcher_reads_hostfile(simcluster, nodes, core, custom):
    create(custom, mpijob("e2empi", workers=2, launcher_cmd=["sh", "-c", 'cat "$OMPI_MCA_orte_default_hostfile"']))
    job = wait_for(has_cond(custom, "MPIJob", "e2empi", "Succeeded"), timeout=20, what="Succeeded")
    assert cond(job, "Succeeded")["message"] == "MPIJob default/e2empi successfully completed."
    lp = launcher_pods(core, "e2empi")[0]
    log = wait_for(lambda: core.read_namespaced_pod_log(lp.metadata.name, NS), what="launcher log")
    assert log == "e2empi-worker-0.e2empi.default.svc slots=4\ne2empi-worker-1.e2empi.default.svc slots=4\n"
    workers = {n: p for n, p in pods_of(core, "e2empi").items() if "worker" in n}
    assert {p.status.phase for p in workers.values()} == {"Running"}  # their sshd (or its stand-in where it cannot run)

