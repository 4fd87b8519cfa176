"""sessions/convert.py: an interactive session turned into an unattended job, its diff, and the
session's names in its command rewritten for the new job."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from sessions.convert import (
    CONVERTED_FROM,
    UNATTENDED_POLICY,
    command_of,
    comparable,
    default_name,
    diff,
    leftovers,
    rewrite_command,
    session_names,
    unattended,
)
from sessions.errors import SessionError
from sessions.manifests import INTERACTIVE_KEY, NODE_POOL_LABEL
from tests.unit.session_objects import ROLES, SLEEP, main, pod_spec, replicas, session

# -- convert ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["mpi", "pytorch", "tensorflow", "xgboost"])
def test_unattended_runs_the_command_instead_of_sleep_on_the_right_replicas(framework: str) -> None:
    src = session(framework)
    before = copy.deepcopy(src)
    new = unattended(src, "torchrun --nproc_per_node=2 train.py")
    assert src == before  # the interactive job is not touched
    argv = ["/bin/sh", "-c", "torchrun --nproc_per_node=2 train.py"]
    lead, worker = ROLES[framework]
    if framework == "mpi":
        assert main(new, "Launcher")["command"] == argv
        assert "command" not in main(new, "Worker")  # workers keep the operator's sshd
    else:
        assert main(new, lead)["command"] == main(new, worker)["command"] == argv
    for role in (lead, worker):
        # what the session ran on is kept: image, resources, env, volumes, node pool, replicas
        for key in ("image", "resources", "env", "volumeMounts", "name"):
            assert main(new, role).get(key) == main(src, role).get(key), (role, key)
        assert pod_spec(new, role)["volumes"] == pod_spec(src, role)["volumes"]
        assert pod_spec(new, role)["nodeSelector"] == {NODE_POOL_LABEL: "h100"}
        assert replicas(new)[role]["replicas"] == replicas(src)[role]["replicas"]
        assert replicas(new)[role]["restartPolicy"] == replicas(src)[role]["restartPolicy"]
        # the interactive grace period goes: the training command gets the default time to stop
        assert pod_spec(src, role)["terminationGracePeriodSeconds"] == 1
        assert "terminationGracePeriodSeconds" not in pod_spec(new, role)
    if framework == "mpi":
        assert new["spec"]["slotsPerWorker"] == src["spec"]["slotsPerWorker"] == 2


def test_unattended_metadata_and_run_policy() -> None:
    new = unattended(session(), "python train.py")
    meta = new["metadata"]
    assert meta["name"] == "sess-train" == default_name("sess")
    # the interactive marker, the submit id and what the server set are dropped; the rest is kept
    assert meta["annotations"] == {"team": "vision", CONVERTED_FROM: "sess"}
    assert meta["labels"] == {"project": "team-a", "ranks/user": "alice"}
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "finalizers"):
        assert key not in meta, key
    assert "status" not in new
    assert (new["apiVersion"], new["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    # no longer suspended; backoff, cleanup and TTL of an unattended run
    assert new["spec"]["runPolicy"] == UNATTENDED_POLICY
    assert set(UNATTENDED_POLICY) == {"backoffLimit", "cleanPodPolicy", "ttlSecondsAfterFinished"}
    assert UNATTENDED_POLICY["cleanPodPolicy"] == "Running"
    assert unattended(session(), "true", name="other")["metadata"]["name"] == "other"


def test_unattended_drops_interactive_markers_from_pod_templates_and_args() -> None:
    src = session()
    for role in ("Master", "Worker"):
        tmpl = replicas(src)[role]["template"]
        tmpl["metadata"]["labels"]["priorityClassName"] = "interactive-preemptible"
        tmpl["metadata"].setdefault("annotations", {})[INTERACTIVE_KEY] = "true"
        tmpl["spec"]["containers"][0]["args"] = ["--keep-alive"]
        tmpl["spec"]["containers"].append({"name": "sidecar", "image": "busybox", "command": ["sleep", "infinity"]})
    new = unattended(src, "python train.py")
    for role in ("Master", "Worker"):
        tmpl = replicas(new)[role]["template"]
        assert tmpl["metadata"] == {"labels": {"project": "team-a", "ranks/user": "alice"}}
        assert "args" not in tmpl["spec"]["containers"][0]
        assert tmpl["spec"]["containers"][1]["command"] == SLEEP  # only the main container runs the command


def test_a_grace_period_the_user_chose_is_kept() -> None:
    src = session()
    pod_spec(src, "Master")["terminationGracePeriodSeconds"] = 120
    new = unattended(src, "python train.py")
    assert pod_spec(new, "Master")["terminationGracePeriodSeconds"] == 120
    assert "terminationGracePeriodSeconds" not in pod_spec(new, "Worker")


def test_default_name_fits_a_dns_label() -> None:
    assert default_name("a" * 63) == "a" * 57 + "-train"
    assert default_name("a" * 56 + "-b") == "a" * 56 + "-train"  # no "--" where it was cut
    assert len(default_name("x" * 80)) == 63


@pytest.mark.parametrize(("job_obj", "command", "name", "code", "message"), [
    ({"kind": "Deployment", "metadata": {"name": "web"}}, "true", None, 2,
     "cannot convert a Deployment: only Kubeflow PyTorchJob, TFJob, XGBoostJob and MPIJob sessions"),
    (None, "  ", None, 2, "the command is empty"),
    (None, "true", "sess", 2, "the new job needs a name other than sess (--name)"),
    (None, "true", "Bad_Name", 2, 'invalid name "Bad_Name"'),
    ({"kind": "PyTorchJob", "metadata": {"name": "empty"},
      "spec": {"pytorchReplicaSpecs": {"Master": {"template": {"spec": {"containers": []}}}}}}, "true", None, 1,
     "PyTorchJob empty has no replica container to run the command in"),
    ({"kind": "MPIJob", "metadata": {"name": "hvd"},
      "spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [{}]}}}}}},
     "true", None, 1, "MPIJob hvd has no launcher container to run the command in"),
])
def test_unattended_refusals(job_obj: dict[str, Any] | None, command: str, name: str | None, code: int,
                             message: str) -> None:
    with pytest.raises(SessionError) as err:
        unattended(job_obj or session(), command, name)
    assert err.value.code == code
    assert err.value.message.startswith(message), err.value.message


def test_diff_shows_what_changes_and_nothing_the_server_set() -> None:
    src = session()
    out = diff(src, unattended(src, "torchrun train.py"))
    lines = out.splitlines()
    assert lines[:2] == ["--- PyTorchJob/sess", "+++ PyTorchJob/sess-train"]
    removed = [ln[1:].strip() for ln in lines[2:] if ln.startswith("-")]
    added = [ln[1:].strip() for ln in lines[2:] if ln.startswith("+")]
    assert removed.count("- sleep") == 2 and removed.count("- infinity") == 2  # master and worker
    assert added.count("- /bin/sh") == 2 and added.count("- torchrun train.py") == 2
    assert removed.count("terminationGracePeriodSeconds: 1") == 2
    assert "ranks/interactive: 'true'" in removed and "ranks/submit-id: s-123" in removed
    assert "name: sess" in removed and "name: sess-train" in added
    assert f"{CONVERTED_FROM}: sess" in added
    assert "suspend: true" in removed
    ttl = UNATTENDED_POLICY["ttlSecondsAfterFinished"]
    assert "backoffLimit: 3" in added and f"ttlSecondsAfterFinished: {ttl}" in added
    assert "cleanPodPolicy: Running" not in removed + added  # the same before and after
    # what the server set is neither side of the diff, and what is kept is not shown as changed
    for server_set in ("uid", "resourceVersion", "managedFields", "status", "conditions", "last-applied"):
        assert server_set not in out, server_set
    for kept in ("image: nvcr.io", "claimName: data", "NCCL_DEBUG", "run.ai/node-pool", "memory: 32Gi"):
        assert not any(kept in ln for ln in removed + added), kept


def test_diff_against_the_job_as_written_is_empty() -> None:
    src = session()
    assert diff(src, comparable(src)) == ""  # the server's fields are not a difference


# -- convert: the session's names in the command ------------------------------------------------------


def session_names_left(command: str, name: str = "sess") -> list[str]:
    """The session's pod and host names still in a command (none of the new job's, which start
    with the same name)."""
    return re.findall(rf"(?<![\w.-]){name}-(?:master|worker|launcher)[\w-]*|\.{name}\.", command)


@pytest.mark.parametrize(("command", "expected"), [
    # the operator's variables where it sets them on every pod
    ("torchrun --nnodes=3 --nproc_per_node=2 --node_rank=0 --master_addr=sess-master-0 --master_port=23456 train.py",
     "torchrun --nnodes=3 --nproc_per_node=2 --node_rank=$RANK --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT "
     "train.py"),
    ("NCCL_DEBUG=INFO torchrun --master-addr sess-master-0.sess.runai-team-a.svc.cluster.local --master-port 23456 "
     "--node-rank 1 train.py",
     "NCCL_DEBUG=INFO torchrun --master-addr $MASTER_ADDR --master-port $MASTER_PORT --node-rank $RANK train.py"),
    ("python -m torch.distributed.run --rdzv_endpoint=sess-master-0:23456 --rdzv_backend=c10d t.py",
     "python -m torch.distributed.run --rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT --rdzv_backend=c10d t.py"),
    ('torchrun "--master_addr=sess-master-0" --master_port=29500 t.py',  # not the session's port: kept
     "torchrun --master_addr=$MASTER_ADDR --master_port=29500 t.py"),
    # what stays as typed: $RANK already, the env's own, other hosts, a command that is not a launcher
    ("torchrun --node_rank=$RANK --master_addr=$MASTER_ADDR train.py",
     "torchrun --node_rank=$RANK --master_addr=$MASTER_ADDR train.py"),
    ("torchrun --master_addr=10.0.0.7 train.py", "torchrun --master_addr=10.0.0.7 train.py"),
    # no expansion in single quotes: the new job's names instead; other commands: renamed
    ("sh -c 'torchrun --master_addr=sess-master-0 t.py'", "sh -c 'torchrun --master_addr=sess-train-master-0 t.py'"),
    ("torchrun --master_addr='sess-master-0' t.py", "torchrun --master_addr='sess-train-master-0' t.py"),
    ("ping -c1 sess-worker-1 && torchrun t.py", "ping -c1 sess-train-worker-1 && torchrun t.py"),
    # not the session's: a longer name, another namespace, another job
    ("ping sess-worker-10x sess-worker-1.sess.other-ns.svc sessx-worker-1 my-sess-worker-1",
     "ping sess-worker-10x sess-worker-1.sess.other-ns.svc sessx-worker-1 my-sess-worker-1"),
])
def test_rewrite_pytorch_command(command: str, expected: str) -> None:
    assert rewrite_command(command, session("pytorch"), "sess-train") == expected


@pytest.mark.parametrize(("command", "expected"), [
    # -H with every worker at its slots: the hostfile the operator mounts in the new launcher
    ("horovodrun -np 4 -H sess-worker-0.sess.runai-team-a.svc:2,sess-worker-1.sess.runai-team-a.svc:2 python train.py",
     "horovodrun -np 4 --hostfile /etc/mpi/hostfile python train.py"),
    ("mpirun -np 4 --host=sess-worker-1:2,sess-worker-0:2 -x NCCL_DEBUG python t.py",
     "mpirun -np 4 --hostfile /etc/mpi/hostfile -x NCCL_DEBUG python t.py"),
    ("horovodrun -np 4 --hosts sess-worker-0.sess.runai-team-a.svc.cluster.local:2,sess-worker-1.sess:2 python t.py",
     "horovodrun -np 4 --hostfile /etc/mpi/hostfile python t.py"),
    # not all of them, or other slots: each host renamed
    ("horovodrun -np 2 -H sess-worker-1.sess.runai-team-a.svc:2 python train.py",
     "horovodrun -np 2 -H sess-train-worker-1.sess-train.runai-team-a.svc:2 python train.py"),
    ("mpirun -np 2 -H sess-worker-0:1,sess-worker-1:1 python t.py",
     "mpirun -np 2 -H sess-train-worker-0:1,sess-train-worker-1:1 python t.py"),
    ("horovodrun -np 4 -H sess-worker-0:2,sess-worker-0:2 python t.py",
     "horovodrun -np 4 -H sess-train-worker-0:2,sess-train-worker-0:2 python t.py"),
    # the launcher (its pod name has a random suffix; its hostname does not), the headless service
    ("ssh sess-launcher-x7k2p hostname; getent hosts sess.runai-team-a.svc.cluster.local; mpirun python t.py",
     "ssh sess-train-launcher hostname; getent hosts sess-train.runai-team-a.svc.cluster.local; mpirun python t.py"),
    ("horovodrun -np 4 -hostfile /etc/mpi/hostfile python train.py",
     "horovodrun -np 4 -hostfile /etc/mpi/hostfile python train.py"),
])
def test_rewrite_mpi_command(command: str, expected: str) -> None:
    src = session("mpi")  # 2 workers, 2 slots each
    assert rewrite_command(command, src, "sess-train") == expected
    assert session_names_left(rewrite_command(command, src, "sess-train")) == []


def test_rewrite_uses_the_jobs_own_port_and_hostfile() -> None:
    pt = session("pytorch")
    replicas(pt)["Master"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "pytorchjob-port", "containerPort": 29500}]
    assert rewrite_command("torchrun --master_port=29500 --master_port=23456 t.py", pt, "n") == (
        "torchrun --master_port=$MASTER_PORT --master_port=23456 t.py")
    mpi_job = session("mpi")
    main(mpi_job, "Launcher").setdefault("env", []).append(
        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/hosts.mpi"})
    assert rewrite_command("mpirun -H sess-worker-0:2,sess-worker-1:2 t", mpi_job, "n") == (
        "mpirun --hostfile /etc/hosts.mpi t")


@pytest.mark.parametrize("framework", ["mpi", "pytorch"])
def test_the_converted_job_runs_the_rewritten_command_and_its_diff_names_only_the_new_job(framework: str) -> None:
    src = session(framework)
    command = {"mpi": "horovodrun -np 4 -H sess-worker-0.sess.runai-team-a.svc:2,sess-worker-1.sess.runai-team-a.svc:2 "
                      "python train.py; scp sess-launcher:/tmp/x sess-worker-1:/tmp",
               "pytorch": "torchrun --nnodes=3 --nproc_per_node=2 --node_rank=0 --master_addr=sess-master-0 "
                          "--master_port=23456 train.py --peer sess-worker-1.sess.runai-team-a.svc"}[framework]
    new = unattended(src, command, "job2")
    runs = command_of(new)
    assert session_names_left(runs) == [] and "job2-" in runs
    if framework == "mpi":
        assert runs.startswith("horovodrun -np 4 --hostfile /etc/mpi/hostfile python train.py; scp job2-launcher:")
    else:
        assert "--node_rank=$RANK --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT" in runs
        assert runs.endswith("--peer job2-worker-1.job2.runai-team-a.svc")
    added = [ln for ln in diff(src, new).splitlines() if ln.startswith("+")]
    assert [ln for ln in added if session_names_left(ln)] == [], added
    assert any("job2-" in ln for ln in added)  # the new names are what the diff shows
    assert not leftovers(runs, session_names(src))
    assert leftovers("torchrun t.py --out /ckpt/sess", session_names(src))  # not a pod or host: said, kept


