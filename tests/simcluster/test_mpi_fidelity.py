"""simcluster's MPI operator against what kubeflow/mpi-operator v2beta1's controller builds for the
same MPIJob (docs/mpi-operator.md: the facts, read from its source at v0.8.2), field by field, read
back with a real kubectl: the Secret `<job>-ssh`, the volumes and mounts, the env and the worker's
command.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric import ec

from .operator_kit import NS, OPS, container, replica, wait_for

pytestmark = [OPS, pytest.mark.kubectl]

OWNER = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "controller": True, "blockOwnerDeletion": True}
HOSTFILE = "/etc/mpi/hostfile"
RSH_ARGS = "-o ConnectionAttempts=10"


def ssh_volume(job: str, root: bool) -> dict[str, Any]:
    """setupSSHOnPod's volume (defaultMode 0600 only at /root/.ssh)."""
    secret: dict[str, Any] = {"secretName": f"{job}-ssh", "items": [
        {"key": "ssh-privatekey", "path": "id_rsa"},
        {"key": "ssh-publickey", "path": "id_rsa.pub"},
        {"key": "ssh-publickey", "path": "authorized_keys"},
    ]}
    if root:
        secret["defaultMode"] = 0o600
    return {"name": "ssh-auth", "secret": secret}


def config_volume(job: str) -> dict[str, Any]:
    return {"name": "mpi-job-config", "configMap": {"name": f"{job}-config", "items": [
        {"key": "hostfile", "path": "hostfile", "mode": 0o444},
        {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
    ]}}


def launcher_env(impl: str, slots: int) -> list[dict[str, str]]:
    """newLauncherPodTemplate's env, in its order (not runLauncherAsWorker: the NVIDIA ones blanked)."""
    pairs = [("K_MPI_JOB_ROLE", "launcher")]
    if impl == "OpenMPI":
        pairs += [("OMPI_MCA_orte_keep_fqdn_hostnames", "true"), ("OMPI_MCA_orte_default_hostfile", HOSTFILE),
                  ("OMPI_MCA_plm_rsh_args", RSH_ARGS), ("OMPI_MCA_orte_set_default_slots", str(slots))]
    elif impl == "Intel":
        pairs += [("I_MPI_HYDRA_HOST_FILE", HOSTFILE), ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", RSH_ARGS),
                  ("I_MPI_PERHOST", str(slots))]
    else:
        pairs += [("HYDRA_HOST_FILE", HOSTFILE), ("HYDRA_LAUNCH_EXTRA_ARGS", RSH_ARGS)]
    env = [{"name": k, "value": v} for k, v in pairs]
    return [*env, {"name": "NVIDIA_VISIBLE_DEVICES"}, {"name": "NVIDIA_DRIVER_CAPABILITIES"}]


# simcluster's addition (docs/mpi-operator.md): the OpenMPI settings under Open MPI 5's PRRTE names
PRTE = {"PRTE_MCA_prte_keep_fqdn_hostnames": "true", "PRTE_MCA_prte_default_hostfile": HOSTFILE,
        "PRTE_MCA_plm_ssh_args": RSH_ARGS}


def get(kubectl, *what: str) -> dict[str, Any] | None:
    r = kubectl.run("get", *what, "-n", NS, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def apply(kubectl, name: str, *, impl: str | None = None, ssh_path: str | None = None, slots: int = 2,
          worker: dict[str, Any] | None = None) -> None:
    spec: dict[str, Any] = {"slotsPerWorker": slots, "mpiReplicaSpecs": {
        "Launcher": replica(1, container("launcher", ["mpirun", "python", "train.py"], env=[{"name": "A", "value": "1"}])),
        "Worker": replica(2, worker or container("worker", None, env=[{"name": "B", "value": "2"}])),
    }}
    if impl:
        spec["mpiImplementation"] = impl
    if ssh_path:
        spec["sshAuthMountPath"] = ssh_path
    body = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name, "namespace": NS},
            "spec": spec}
    kubectl.run("apply", "-f", "-", input=json.dumps(body))


def owned_by(obj: dict[str, Any], job: str) -> bool:
    (ref,) = obj["metadata"]["ownerReferences"]
    return {k: ref.get(k) for k in OWNER} == OWNER and ref["name"] == job


def test_openmpi_job_as_the_controller_builds_it(simcluster, nodes, kubectl):
    apply(kubectl, "fid")
    # the Secret: an ECDSA P-521 key pair, PEM "EC PRIVATE KEY" and its authorized-keys line
    secret = wait_for(lambda: get(kubectl, "secret", "fid-ssh"), what="the ssh Secret")
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert secret["metadata"]["labels"] == {"app": "fid"} and owned_by(secret, "fid")
    assert sorted(secret["data"]) == ["ssh-privatekey", "ssh-publickey"]
    pem = base64.b64decode(secret["data"]["ssh-privatekey"])
    assert pem.startswith(b"-----BEGIN EC PRIVATE KEY-----\n"), pem[:40]
    key = ser.load_pem_private_key(pem, None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp521r1"
    public = base64.b64decode(secret["data"]["ssh-publickey"])
    assert public.endswith(b"\n") and public.startswith(b"ecdsa-sha2-nistp521 ")
    assert public.split()[:2] == key.public_key().public_bytes(ser.Encoding.OpenSSH, ser.PublicFormat.OpenSSH).split()

    # the ConfigMap and the headless Service
    cm = wait_for(lambda: get(kubectl, "configmap", "fid-config"), what="the ConfigMap")
    assert cm["data"]["hostfile"] == "fid-worker-0.fid.default.svc slots=2\nfid-worker-1.fid.default.svc slots=2\n"
    assert cm["data"]["discover_hosts.sh"].startswith("#!/bin/sh\n")
    assert cm["metadata"]["labels"] == {"app": "fid"} and owned_by(cm, "fid")
    svc = wait_for(lambda: get(kubectl, "service", "fid"), what="the Service")
    assert svc["spec"]["clusterIP"] == "None" and not svc["spec"].get("publishNotReadyAddresses")
    assert svc["spec"]["selector"] == {"training.kubeflow.org/operator-name": "mpi-operator",
                                       "training.kubeflow.org/job-name": "fid"}

    # the workers: sshd -De (no command, no args), their env, the ssh volume and mount
    for i in (0, 1):
        w = wait_for(lambda i=i: get(kubectl, "pod", f"fid-worker-{i}"), what=f"worker {i}")
        spec, c = w["spec"], w["spec"]["containers"][0]
        assert {k: w["metadata"]["labels"][k] for k in (
            "training.kubeflow.org/operator-name", "training.kubeflow.org/job-name",
            "training.kubeflow.org/job-role", "training.kubeflow.org/replica-index")} == {
            "training.kubeflow.org/operator-name": "mpi-operator", "training.kubeflow.org/job-name": "fid",
            "training.kubeflow.org/job-role": "worker", "training.kubeflow.org/replica-index": str(i)}
        assert (spec["hostname"], spec["subdomain"]) == (f"fid-worker-{i}", "fid")
        assert spec["dnsConfig"]["searches"] == ["fid.default.svc.cluster.local"]
        assert spec["restartPolicy"] == "Never"
        assert c["command"] == ["/usr/sbin/sshd", "-De"] and "args" not in c
        assert c["env"] == [{"name": "B", "value": "2"}, {"name": "K_MPI_JOB_ROLE", "value": "worker"}]
        assert spec["volumes"] == [ssh_volume("fid", root=True)]
        assert c["volumeMounts"] == [{"name": "ssh-auth", "mountPath": "/root/.ssh"}]
        assert owned_by(w, "fid")

    # the launcher Job's pod template: the operator's env in its order, then simcluster's PRRTE names
    job = wait_for(lambda: get(kubectl, "job", "fid-launcher"), what="the launcher Job")
    assert job["metadata"]["labels"] == {"app": "fid"} and owned_by(job, "fid")
    tpl = job["spec"]["template"]
    spec, c = tpl["spec"], tpl["spec"]["containers"][0]
    assert (spec["hostname"], spec["subdomain"], spec["restartPolicy"]) == ("fid-launcher", "fid", "OnFailure")
    assert {k: tpl["metadata"]["labels"][k] for k in ("training.kubeflow.org/operator-name",
                                                      "training.kubeflow.org/job-name",
                                                      "training.kubeflow.org/job-role")} == {
        "training.kubeflow.org/operator-name": "mpi-operator", "training.kubeflow.org/job-name": "fid",
        "training.kubeflow.org/job-role": "launcher"}
    upstream = [{"name": "A", "value": "1"}, *launcher_env("OpenMPI", 2)]
    env = c["env"]
    extra = [e for e in env if e not in upstream]
    assert [e for e in env if e in upstream] == upstream, env
    assert {e["name"]: e.get("value") for e in extra} == {**PRTE, "PRTE_MCA_prte_set_default_slots": "2"}, extra
    assert c["command"] == ["mpirun", "python", "train.py"]
    assert spec["volumes"] == [ssh_volume("fid", root=True), config_volume("fid")]
    assert c["volumeMounts"] == [{"name": "ssh-auth", "mountPath": "/root/.ssh"},
                                 {"name": "mpi-job-config", "mountPath": "/etc/mpi"}]


@pytest.mark.parametrize("impl", ["Intel", "MPICH"])
def test_other_implementations_and_a_mount_path_of_ones_own(simcluster, nodes, kubectl, impl):
    """Intel's and MPICH's env and hostfile; a sshAuthMountPath not /root/.ssh gets no defaultMode;
    a worker with args only keeps its image's entrypoint (no sshd)."""
    name = impl.lower()
    apply(kubectl, name, impl=impl, ssh_path="/home/mpiuser/.ssh", slots=3,
          worker=container("worker", None, args=["sleep", "infinity"]))
    cm = wait_for(lambda: get(kubectl, "configmap", f"{name}-config"), what="the ConfigMap")
    assert cm["data"]["hostfile"] == f"{name}-worker-0.{name}.default.svc:3\n{name}-worker-1.{name}.default.svc:3\n"
    w = wait_for(lambda: get(kubectl, "pod", f"{name}-worker-0"), what="worker 0")
    c = w["spec"]["containers"][0]
    assert "command" not in c and c["args"] == ["sleep", "infinity"]
    assert w["spec"]["volumes"] == [ssh_volume(name, root=False)]
    assert c["volumeMounts"] == [{"name": "ssh-auth", "mountPath": "/home/mpiuser/.ssh"}]
    job = wait_for(lambda: get(kubectl, "job", f"{name}-launcher"), what="the launcher Job")
    spec = job["spec"]["template"]["spec"]
    assert spec["containers"][0]["env"] == [{"name": "A", "value": "1"}, *launcher_env(impl, 3)]
    assert spec["volumes"] == [ssh_volume(name, root=False), config_volume(name)]
