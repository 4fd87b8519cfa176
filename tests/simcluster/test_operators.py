"""The emulated Kubeflow training operators (PyTorchJob, TFJob, XGBoostJob) against the official
client and a real kubectl. Pods are driven through their phases by patching pod status (as a
kubelet would); MPIJob and batch/v1 Jobs are in test_operators_mpi.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from .operator_kit import (
    NS,
    OPS,
    PLURALS,
    cond,
    container,
    create,
    env_of,
    get_job,
    has_cond,
    pods_of,
    pytorchjob,
    replica,
    set_phase,
    wait_for,
)


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
