"""The emulated MPI operator (MPIJob v2beta1) and the batch/v1 Job controller against the official
client and a real kubectl; the end-to-end tests at the bottom run the real kubelet component.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from .operator_kit import (
    NS,
    OPS,
    cond,
    container,
    create,
    env_of,
    has_cond,
    mpijob,
    pods_of,
    pytorchjob,
    set_phase,
    wait_for,
)

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
