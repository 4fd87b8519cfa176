"""sessions/ without a cluster: the manifests `ranks submit` renders (per framework, interactive
and unattended) and what is wrong with a spec; job names; converting an interactive session into
an unattended job and its diff; which pod a shell opens; reading launch commands back from the
shell history."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from monitors.connection import ExitCode
from monitors.model import LiveModel
from monitors.model_views import WorkloadView
from sessions import shell
from sessions.cmdline import launcher_in
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
from sessions.exec_bridge import ExecError
from sessions.manifests import (
    BACKOFF_LIMIT,
    FRACTION_KEY,
    GPU,
    INTERACTIVE_GRACE_SECONDS,
    INTERACTIVE_KEY,
    NODE_POOL_LABEL,
    TTL_AFTER_FINISHED,
    SubmitSpec,
    render,
    spec_problems,
)
from sessions.names import (
    DNS1035_MSG,
    check_name,
    label_value_problem,
    longest_suffix,
    max_name_length,
    name_problem,
    subdomain_problem,
)
from sessions.shell import (
    NotYet,
    default_container,
    not_running_reason,
    pick_rank,
    shell_target,
)
from tests.kubeflow_objects import job, pod
from tests.unit.test_model import load

NS = "runai-team-a"
SLEEP = ["sleep", "infinity"]
ROLES = {"mpi": ("Launcher", "Worker"), "pytorch": ("Master", "Worker"), "tensorflow": ("Chief", "Worker"),
         "xgboost": ("Master", "Worker")}
KINDS = {"mpi": ("MPIJob", "kubeflow.org/v2beta1", "mpiReplicaSpecs"),
         "pytorch": ("PyTorchJob", "kubeflow.org/v1", "pytorchReplicaSpecs"),
         "tensorflow": ("TFJob", "kubeflow.org/v1", "tfReplicaSpecs"),
         "xgboost": ("XGBoostJob", "kubeflow.org/v1", "xgbReplicaSpecs")}


def spec(**kw: Any) -> SubmitSpec:
    base: dict[str, Any] = {"name": "sess", "framework": "pytorch", "image": "nvcr.io/nvidia/pytorch:24.01-py3",
                            "workers": 2, "namespace": NS, "project": "team-a", "user": "alice", "gpus": 1,
                            "interactive": True}
    base.update(kw)
    return SubmitSpec(**base)


def replicas(manifest: dict[str, Any]) -> dict[str, Any]:
    field = next(k for k in manifest["spec"] if k.endswith("ReplicaSpecs"))
    return manifest["spec"][field]


def pod_spec(manifest: dict[str, Any], role: str) -> dict[str, Any]:
    return replicas(manifest)[role]["template"]["spec"]


def main(manifest: dict[str, Any], role: str) -> dict[str, Any]:
    return pod_spec(manifest, role)["containers"][0]


# -- manifests: render ---------------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["mpi", "pytorch", "tensorflow", "xgboost"])
def test_render_interactive_session(framework: str) -> None:
    m = render(spec(framework=framework, workers=3))
    kind, api_version, field = KINDS[framework]
    assert (m["apiVersion"], m["kind"]) == (api_version, kind)
    assert m["metadata"]["name"] == "sess" and m["metadata"]["namespace"] == NS
    assert m["metadata"]["annotations"] == {INTERACTIVE_KEY: "true"}
    assert m["metadata"]["labels"] == {"project": "team-a", "ranks/user": "alice"}
    lead, worker = ROLES[framework]
    assert list(m["spec"][field]) == [lead, worker]
    assert (replicas(m)[lead]["replicas"], replicas(m)[worker]["replicas"]) == (1, 3)
    # interactive: no backoff, no TTL (a session is not retried, nor removed by itself)
    assert m["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
    for role in (lead, worker):
        # PID 1 is `sleep infinity`, which ignores SIGTERM: stop 1 s after a delete or suspend
        assert pod_spec(m, role)["terminationGracePeriodSeconds"] == INTERACTIVE_GRACE_SECONDS == 1
        assert replicas(m)[role]["template"]["metadata"]["labels"] == {"project": "team-a", "ranks/user": "alice"}
        assert main(m, role)["image"] == "nvcr.io/nvidia/pytorch:24.01-py3"
    if framework == "mpi":
        # the launcher sleeps (the shell starts mpirun), without GPUs; workers keep the operator's sshd
        assert main(m, "Launcher")["command"] == SLEEP and "resources" not in main(m, "Launcher")
        assert "command" not in main(m, "Worker")
        assert main(m, "Worker")["resources"] == {"limits": {GPU: "1"}, "requests": {GPU: "1"}}
        assert (replicas(m)["Launcher"]["restartPolicy"], replicas(m)["Worker"]["restartPolicy"]) == (
            "OnFailure", "Never")
        assert m["spec"]["slotsPerWorker"] == 1 and m["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
        assert main(m, "Launcher")["name"] == "mpi"
    else:
        # the master / chief is a rank too: same command and GPUs on every replica
        for role in (lead, worker):
            assert main(m, role)["command"] == SLEEP
            assert main(m, role)["resources"] == {"limits": {GPU: "1"}, "requests": {GPU: "1"}}
            assert replicas(m)[role]["restartPolicy"] == "OnFailure"
            assert main(m, role)["name"] == framework
        assert "slotsPerWorker" not in m["spec"]


@pytest.mark.parametrize("framework", ["mpi", "pytorch", "tensorflow", "xgboost"])
def test_render_unattended_run(framework: str) -> None:
    m = render(spec(framework=framework, interactive=False, command="python train.py --epochs 3"))
    assert "annotations" not in m["metadata"]  # no interactive marker
    assert m["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": BACKOFF_LIMIT,
                                      "ttlSecondsAfterFinished": TTL_AFTER_FINISHED}
    assert (BACKOFF_LIMIT, TTL_AFTER_FINISHED) == (3, 7 * 24 * 3600)
    argv = ["/bin/sh", "-c", "python train.py --epochs 3"]
    lead, worker = ROLES[framework]
    for role in (lead, worker):
        assert "terminationGracePeriodSeconds" not in pod_spec(m, role)  # the default: training stops cleanly
    if framework == "mpi":
        assert main(m, "Launcher")["command"] == argv and "command" not in main(m, "Worker")
    else:
        assert main(m, lead)["command"] == main(m, worker)["command"] == argv


def test_unattended_backoff_and_ttl_can_be_set_or_dropped() -> None:
    m = render(spec(interactive=False, command="true", backoff_limit=0, ttl_seconds_after_finished=None))
    assert m["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 0}


def test_pytorch_without_workers_is_a_master_alone() -> None:
    m = render(spec(workers=0))
    assert list(replicas(m)) == ["Master"]


def test_mpi_slots_per_worker() -> None:
    assert render(spec(framework="mpi", gpus=4))["spec"]["slotsPerWorker"] == 4  # the GPUs per worker
    assert render(spec(framework="mpi", gpus=0))["spec"]["slotsPerWorker"] == 1  # at least 1
    assert render(spec(framework="mpi", gpus=4, slots_per_worker=2))["spec"]["slotsPerWorker"] == 2


@pytest.mark.parametrize("framework", ["mpi", "pytorch"])
def test_gpu_portion_is_an_annotation_not_a_gpu_request(framework: str) -> None:
    m = render(spec(framework=framework, gpus=0, gpu_portion=0.5, cpu="4", memory="16Gi"))
    lead, worker = ROLES[framework]
    gpu_roles = (worker,) if framework == "mpi" else (lead, worker)  # the MPI launcher holds no GPU
    for role in (lead, worker):
        meta = replicas(m)[role]["template"]["metadata"]
        if role in gpu_roles:
            assert meta["annotations"] == {FRACTION_KEY: "0.5"}
            assert main(m, role)["resources"] == {"requests": {"cpu": "4", "memory": "16Gi"}}
        else:
            assert "annotations" not in meta
        assert GPU not in str(main(m, role).get("resources"))
    assert FRACTION_KEY not in m["metadata"].get("annotations", {})  # on the pods, not on the job


def test_whole_gpus_cpu_and_memory() -> None:
    m = render(spec(gpus=8, cpu=" 16 ", memory="64Gi"))
    assert main(m, "Worker")["resources"] == {"limits": {GPU: "8"}, "requests": {GPU: "8", "cpu": "16",
                                                                             "memory": "64Gi"}}


def test_node_pool_selector_on_every_pod() -> None:
    for framework in ROLES:
        m = render(spec(framework=framework, node_pool="h100"))
        for role in ROLES[framework]:
            assert pod_spec(m, role)["nodeSelector"] == {NODE_POOL_LABEL: "h100"} == {"run.ai/node-pool": "h100"}
    assert "nodeSelector" not in pod_spec(render(spec()), "Master")


def test_volumes_one_per_claim_mounted_where_asked() -> None:
    m = render(spec(volumes=["data:/data", "ckpt:/ckpt/:ro", "data:/mnt//data2", "logs:/logs:rw"]))
    for role in ("Master", "Worker"):
        assert pod_spec(m, role)["volumes"] == [
            {"name": "pvc-0", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "pvc-1", "persistentVolumeClaim": {"claimName": "ckpt"}},
            {"name": "pvc-2", "persistentVolumeClaim": {"claimName": "logs"}},
        ]
        assert main(m, role)["volumeMounts"] == [
            {"name": "pvc-0", "mountPath": "/data"},
            {"name": "pvc-1", "mountPath": "/ckpt", "readOnly": True},
            {"name": "pvc-0", "mountPath": "/mnt/data2"},
            {"name": "pvc-2", "mountPath": "/logs"},
        ]
    assert "volumes" not in pod_spec(render(spec()), "Master")


def test_env_later_key_wins_and_values_keep_their_equals_signs() -> None:
    m = render(spec(framework="mpi", env=["NCCL_DEBUG=INFO", "OPTS=a=b", "NCCL_DEBUG=WARN", "EMPTY="]))
    expected = [{"name": "OPTS", "value": "a=b"}, {"name": "NCCL_DEBUG", "value": "WARN"},
                {"name": "EMPTY", "value": ""}]
    assert main(m, "Launcher")["env"] == main(m, "Worker")["env"] == expected
    assert "env" not in main(render(spec()), "Master")


def test_user_label_or_annotation_and_extra_annotations() -> None:
    m = render(spec(user="alice@example.com", extra_annotations={"ranks/submit-id": "s1"}))
    # an e-mail address is not a label value: it goes in an annotation
    assert m["metadata"]["labels"] == {"project": "team-a"}
    assert m["metadata"]["annotations"] == {"ranks/user": "alice@example.com", INTERACTIVE_KEY: "true",
                                            "ranks/submit-id": "s1"}
    tmeta = replicas(m)["Master"]["template"]["metadata"]
    assert tmeta == {"labels": {"project": "team-a"}, "annotations": {"ranks/user": "alice@example.com"}}
    bare = render(spec(user="", project=""))
    assert "labels" not in bare["metadata"] and replicas(bare)["Master"]["template"]["metadata"] == {}


def test_render_refuses_an_invalid_spec_with_its_first_problem() -> None:
    with pytest.raises(SessionError) as err:
        render(spec(name="Bad_Name", image=""))
    assert err.value.code == ExitCode.USAGE == 2
    assert err.value.message == f'invalid name "Bad_Name": {DNS1035_MSG}'


# -- manifests: spec_problems --------------------------------------------------------------------


@pytest.mark.parametrize(("changes", "flag", "message"), [
    ({"framework": "jax"}, "--framework", '--framework "jax": must be one of mpi, pytorch, tensorflow, xgboost'),
    ({"framework": "mpi", "workers": 0}, "--workers", "--workers 0: MPI needs at least 1 worker (at most 10000)"),
    ({"workers": -1}, "--workers", "--workers -1: must be at least 0 (at most 10000)"),
    ({"workers": 10_001}, "--workers", "--workers 10001: must be at least 0 (at most 10000)"),
    ({"name": ""}, "NAME", 'invalid name "": a name is required'),
    ({"name": "9lives"}, "NAME", f'invalid name "9lives": {DNS1035_MSG}'),
    ({"image": " "}, "--image", "-i/--image: an image is required"),
    ({"image": "my image"}, "--image", '-i/--image "my image": must not contain whitespace'),
    ({"gpus": 1, "gpu_portion": 0.5}, "--gpu-portion", "-g/--gpus and --gpu-portion cannot be used together"),
    ({"gpus": -2}, "--gpus", "-g -2: must be at least 0"),
    ({"gpus": 0, "gpu_portion": 1.0}, "--gpu-portion",
     "--gpu-portion 1: must be at least 0.01 and less than 1 (a fraction of one GPU); use -g N for whole GPUs"),
    ({"gpus": 0, "gpu_portion": 0.001}, "--gpu-portion", "--gpu-portion 0.001: must be at least 0.01"),
    ({"slots_per_worker": 2}, "--slots-per-worker", "--slots-per-worker applies to MPI jobs only"),
    ({"framework": "mpi", "slots_per_worker": 0}, "--slots-per-worker", "--slots-per-worker 0: must be at least 1"),
    ({"cpu": "four"}, "--cpu", '--cpu "four": quantities must match the regular expression'),
    ({"memory": "-1Gi"}, "--memory", '--memory "-1Gi": must be greater than or equal to 0'),
    ({"env": ["NOEQUALS"]}, "--env", '--env "NOEQUALS": expected KEY=VALUE'),
    ({"env": ["=v"]}, "--env", '--env "=…": Required value: the variable needs a name'),
    ({"env": ["B\u00e4D=1"]}, "--env", '--env "B\u00e4D=…": Invalid value: "B\u00e4D": a valid environment variable name'),
    ({"env": ["2FA_TOKEN=hf_secret"]}, "--env", '--env "2FA_TOKEN=…": Invalid value: "2FA_TOKEN": a valid '
     'environment variable name must consist of alphabetic characters, digits'),
    ({"volumes": ["data"]}, "--volume", '--volume "data": expected PVC:PATH (or PVC:PATH:ro)'),
    ({"volumes": ["data:rel/path"]}, "--volume", '--volume "data:rel/path": the mount path must be absolute'),
    ({"volumes": ["data:/a/../etc"]}, "--volume", "--volume \"data:/a/../etc\": must not contain '..'"),
    ({"volumes": ["Data:/d"]}, "--volume", '--volume "Data:/d": Invalid value: "Data": a lowercase RFC 1123 subdomain'),
    ({"volumes": ["a:/d", "b:/d/"]}, "--volume", '--volume "b:/d/": Invalid value: "/d": must be unique'),
    ({"node_pool": ""}, "--node-pool", '--node-pool "": Invalid value: a node pool name is required'),
    ({"node_pool": "pool a"}, "--node-pool", '--node-pool "pool a": Invalid value: a valid label must be'),
    ({"command": "python t.py"}, "--command", "--interactive and --command cannot be used together"),
    ({"interactive": False}, "--command", "give --interactive (a session to shell into) or --command CMD"),
    ({"interactive": False, "command": "  "}, "--command", "give --interactive"),
    ({"namespace": ""}, "--project", "no project: give -p PROJECT"),
])
def test_spec_problems_name_the_flag_and_say_why(changes: dict[str, Any], flag: str, message: str) -> None:
    problems = spec_problems(spec(**changes))
    assert len(problems) == 1, problems
    assert problems[0].flag == flag
    assert problems[0].message.startswith(message), problems[0].message
    assert str(problems[0]) == problems[0].message


def test_a_valid_spec_has_no_problems_and_several_are_listed_name_first() -> None:
    assert spec_problems(spec()) == []
    assert spec_problems(spec(framework="mpi", workers=4, gpus=8, slots_per_worker=8, cpu="500m", memory="1.5Gi",
                              env=["A=1"], volumes=["data:/data:ro"], node_pool="a100")) == []
    problems = spec_problems(spec(name="X", image="", memory="lots", interactive=False))
    assert [p.flag for p in problems] == ["NAME", "--image", "--memory", "--command"]


def test_a_name_must_leave_room_for_the_replica_suffix() -> None:
    longest = "a" * max_name_length("pytorch", 100)  # 63 - len("-worker-99")
    assert spec_problems(spec(name=longest, workers=100)) == []
    problems = spec_problems(spec(name=longest + "a", workers=100))
    assert [p.flag for p in problems] == ["NAME"]
    assert "must be no more than 53 characters (54 given)" in problems[0].message
    assert "NAME-worker-99" in problems[0].message


# -- names -----------------------------------------------------------------------------------------


def test_longest_suffix_per_framework() -> None:
    assert longest_suffix("pytorch", 16) == "-worker-15"
    assert longest_suffix("pytorch", 0) == "-worker-0"
    assert longest_suffix("tensorflow", 1) == "-worker-0"  # longer than -chief-0
    assert longest_suffix("mpi", 1) == "-worker-0"  # as long as -launcher: the worker's name wins a tie
    assert longest_suffix("mpi", 10) == "-worker-9"
    assert longest_suffix("mpi", 11) == "-worker-10"
    assert longest_suffix("xgboost", 1000) == "-worker-999"
    assert max_name_length("pytorch", 16) == 63 - len("-worker-15") == 53
    assert max_name_length("pytorch", 1) == 54


def test_name_problem() -> None:
    for ok in ("sess", "a", "mnist-ddp-2", "a" * 54):
        assert name_problem(ok, "pytorch", 1) is None, ok
    assert name_problem("") == "a name is required"
    for bad in ("Mnist", "9lives", "-sess", "sess-", "my_job", "my.job", "sess\x1b"):
        assert name_problem(bad) == DNS1035_MSG, bad
    too_long = name_problem("a" * 55, "pytorch", 1)
    assert too_long is not None and too_long.startswith("must be no more than 54 characters (55 given)")
    assert "NAME-worker-0" in too_long and "63" in too_long


def test_check_name_raises_a_usage_error() -> None:
    check_name("fine")
    with pytest.raises(SessionError) as err:
        check_name("Not-Fine", "mpi", 2)
    assert err.value.code == 2 and err.value.message == f'invalid name "Not-Fine": {DNS1035_MSG}'


def test_subdomain_and_label_value() -> None:
    assert subdomain_problem("data.v1-2") is None
    assert subdomain_problem("") == "a name is required"
    assert subdomain_problem("a" * 254) == "must be no more than 253 characters"
    for bad in ("Data", "data_1", ".data", "data."):
        assert (subdomain_problem(bad) or "").startswith("a lowercase RFC 1123 subdomain"), bad
    for ok in ("", "alice", "My_Value-1.2", "a" * 63):
        assert label_value_problem(ok) is None, ok
    assert label_value_problem("a" * 64) == "must be no more than 63 characters"
    for bad in ("alice@example.com", "-a", "a-", "a b"):
        assert (label_value_problem(bad) or "").startswith("a valid label must be"), bad


# -- convert ----------------------------------------------------------------------------------------


def as_served(manifest: dict[str, Any]) -> dict[str, Any]:
    """The job as the API server returns it: server-set metadata, status, a kubectl annotation."""
    j = copy.deepcopy(manifest)
    j["metadata"].update(uid="0b3c", resourceVersion="4711", creationTimestamp="2026-11-01T00:00:00Z", generation=2,
                         managedFields=[{"manager": "ranks"}], finalizers=["x"])
    j["metadata"].setdefault("annotations", {}).update({
        "ranks/submit-id": "s-123", "kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "vision"})
    j["spec"]["runPolicy"]["suspend"] = True
    j["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    return j


def session(framework: str = "pytorch", **kw: Any) -> dict[str, Any]:
    return as_served(render(spec(framework=framework, gpus=2, cpu="8", memory="32Gi", env=["NCCL_DEBUG=INFO"],
                                 volumes=["data:/data", "ckpt:/ckpt:ro"], node_pool="h100", **kw)))


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


# -- shell: the banner --------------------------------------------------------------------------------


def pt_target(rank_label: str = "master-0", workers: int = 2, env: dict[str, str] | None = None) -> shell.ShellTarget:
    pods = [pod("PyTorchJob", "ddp", NS, "Master", 0, gpus=2)] + [
        pod("PyTorchJob", "ddp", NS, "Worker", i, gpus=2) for i in range(workers)]
    wl = workload("PyTorchJob", "ddp", {"Master": 1, "Worker": workers}, pods, labels={"project": "team-a"})
    r = pick_rank(wl, rank=rank_label)
    raw = next(p for p in pods if p["metadata"]["name"] == r.pod)
    base = {"MASTER_ADDR": "ddp-master-0", "MASTER_PORT": "23456", "RANK": str(r.rank), "WORLD_SIZE": str(1 + workers)}
    raw["spec"]["containers"][0]["env"] = [{"name": k, "value": v} for k, v in (env if env is not None else base).items()]
    return shell.ShellTarget(wl, r, "main", raw, [x for x in wl.ranks if x.role == "worker"])


TORCHRUN = ("torchrun --nnodes=3 --nproc_per_node=2 --node_rank=$RANK --master_addr=$MASTER_ADDR "
            "--master_port=$MASTER_PORT train.py")


def test_pytorch_paste_line_is_torchrun_for_this_node_from_the_operators_variables() -> None:
    assert shell.paste_lines(pt_target()) == [TORCHRUN]
    assert shell.paste_lines(pt_target("worker-1")) == [TORCHRUN]  # the same line on every node
    # without the operator's variables: the names it would have used
    assert shell.paste_lines(pt_target(env={"RANK": "0"})) == [
        "torchrun --nnodes=3 --nproc_per_node=2 --node_rank=$RANK --master_addr=ddp-master-0 --master_port=23456 "
        "train.py"]


def test_banner_hint_for_the_other_nodes_is_a_ranks_command_only_with_ranks_on_the_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert shell.ranks_command() is None
    without = shell.banner(pt_target()).split("\r\n")
    assert not any("ranks exec" in ln or "ranks convert" in ln for ln in without), without
    assert "  every node runs torchrun: run line 1 in a shell on each of the other pods too " \
           "(worker-0, worker-1)" in without
    assert without[-3:] == ["  commands and launches are recorded with their exit status in ~/.ranks_history, and "
                            "kept by ranks (convert takes the newest launch that exited 0 on every node)",
                            "  convert (t in the dashboard) turns the last launch into a training job", ""]

    fake = tmp_path / "ranks"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert shell.ranks_command() == "ranks"
    lines = shell.banner(pt_target()).split("\r\n")
    assert lines[lines.index("  ready to paste:") + 1] == f"    {TORCHRUN}"
    at = next(i for i, ln in enumerate(lines) if "run on your machine" in ln)
    assert lines[at] == ("  every node runs torchrun: to start it on the other 2 pods, run on your machine "
                         "(not in this shell):")
    assert lines[at + 1] == f"    ranks exec ddp -p team-a --rank worker-0,worker-1 -- sh -c '{TORCHRUN}'"
    assert lines[-2] == "  on your machine, 'ranks convert ddp -p team-a --from-history' turns the last launch into a " \
                        "training job"
    # nothing the banner offers to paste in the pod is a comment, and no hint would be picked from history
    for ln in lines:
        assert launcher_in(ln.strip()) is None or ln.strip() == TORCHRUN, ln
    # from a worker's shell: the others are the master and the other worker
    assert ("    ranks exec ddp -p team-a --rank master-0,worker-1 -- sh -c '" in
            shell.banner(pt_target("worker-0"), cli=True))
    # a master alone: nothing to start elsewhere
    alone = shell.banner(pt_target(workers=0), cli=True)
    assert "ranks exec" not in alone and "--nnodes=1" in alone


def test_banner_hints_run_as_pasted_in_another_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make demo` runs `.venv/bin/ranks` (not on the PATH) on the demo's own kubeconfig: the hints
    name that program and that kubeconfig; over the SSH door there is no such hint."""
    from monitors.connection import ClusterConfig

    venv = tmp_path / "my venv" / "bin"
    venv.mkdir(parents=True)
    own = venv / "ranks"
    own.write_text("#!/bin/sh\n")
    own.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv(shell.SSH_SESSION_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", [str(own), "demo"])
    cfg = ClusterConfig(server="https://127.0.0.1:1", context="sim", namespace="default", user="admin",
                        kubeconfig_arg=str(tmp_path / "demo" / "kubeconfig"))
    prefix = f"'{own}' --kubeconfig {tmp_path}/demo/kubeconfig"
    assert shell.ranks_command(cfg) == prefix
    lines = shell.banner(pt_target(), cli=shell.ranks_command(cfg)).split("\r\n")
    assert f"    {prefix} exec ddp -p team-a --rank worker-0,worker-1 -- sh -c '{TORCHRUN}'" in lines
    assert f"  on your machine, '{prefix} convert ddp -p team-a --from-history' turns the last launch into a " \
           "training job" in lines
    cfg.context_arg = "other"
    assert shell.ranks_command(cfg) == prefix + " --context other"
    # `ranks` on the PATH is this very program: its name is enough
    monkeypatch.setenv("PATH", str(venv))
    assert shell.ranks_command(None) == "ranks"
    # started some other way (python -m), with no ranks on the PATH: no command to offer
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/tui/cli/__main__.py"])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert shell.ranks_command(cfg) is None
    assert "ranks exec" not in shell.banner(pt_target(), cli=shell.ranks_command(cfg) or False)
    monkeypatch.setattr(sys, "argv", [str(own)])
    monkeypatch.setenv(shell.SSH_SESSION_ENV, "1")
    assert shell.ranks_command(cfg) is None


def test_mpi_banner_lines_run_in_the_launcher() -> None:
    wl = mpi()
    raw = pod("MPIJob", "hvd", NS, "Launcher", None, gpus=0, name="hvd-launcher-x7k2p")
    raw["spec"]["containers"][0]["env"] = [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                                           {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"}]
    target = shell.ShellTarget(wl, pick_rank(wl), "main", raw, [x for x in wl.ranks if x.role == "worker"])
    hosts = f"hvd-worker-0.hvd.{NS}.svc:1,hvd-worker-1.hvd.{NS}.svc:1"
    assert shell.paste_lines(target) == [f"horovodrun -np 2 -H {hosts} python train.py",
                                         "horovodrun -np 2 -hostfile /etc/mpi/hostfile python train.py",
                                         "mpirun -np 2 --hostfile /etc/mpi/hostfile python train.py"]
    text = shell.banner(target, cli=True)
    assert "ranks exec" not in text  # the launcher starts every rank
    assert f"  hostfile /etc/mpi/hostfile: hvd-worker-0.hvd.{NS}.svc, hvd-worker-1.hvd.{NS}.svc" in text


def test_banner_cleans_what_the_cluster_wrote() -> None:
    target = pt_target(env={"MASTER_ADDR": "evil\x1b]0;pwned\x07-0", "MASTER_PORT": "1\x1b[2J", "RANK": "0"})
    text = shell.banner(target, cli=True)
    assert "\x1b" not in text and "\x07" not in text


# -- shell: which pod a shell opens ----------------------------------------------------------------


def workload(kind: str, name: str, replicas_: dict[str, int], pods: list[dict[str, Any]], **kw: Any) -> WorkloadView:
    m = LiveModel()
    load(m, [job(kind, name, NS, replicas_, conditions=[("Running", "")], **kw)], pods)
    return m.workloads[(NS, kind, name)]


def mpi(with_launcher: bool = True, workers_ready: bool = True) -> WorkloadView:
    pods = [pod("MPIJob", "hvd", NS, "Worker", i, ready=workers_ready) for i in (1, 0)]
    if with_launcher:
        pods.insert(1, pod("MPIJob", "hvd", NS, "Launcher", None, gpus=0, name="hvd-launcher-x7k2p", command=SLEEP))
    return workload("MPIJob", "hvd", {"Launcher": 1, "Worker": 2}, pods, command=SLEEP)


def test_mpi_shell_opens_the_launcher_found_by_label_despite_its_random_suffix() -> None:
    wl = mpi()
    r = pick_rank(wl)
    assert (r.pod, r.label, r.role) == ("hvd-launcher-x7k2p", "launcher", "launcher")


def test_mpi_without_a_launcher_pod_is_not_yet() -> None:
    """No worker stands in for a launcher that does not exist yet (the model gives no lead)."""
    with pytest.raises(NotYet) as err:
        pick_rank(mpi(with_launcher=False, workers_ready=False))
    assert "hvd has no launcher pod yet" in err.value.message and "0/2 ready" in err.value.message


def test_pytorch_master_tf_chief_and_xgboost_master_are_the_lead() -> None:
    pt = workload("PyTorchJob", "ddp", {"Master": 1, "Worker": 2},
                  [pod("PyTorchJob", "ddp", NS, "Worker", 1), pod("PyTorchJob", "ddp", NS, "Worker", 0),
                   pod("PyTorchJob", "ddp", NS, "Master", 0)])
    assert pick_rank(pt).pod == "ddp-master-0"
    tf = workload("TFJob", "tf", {"Chief": 1, "PS": 1, "Worker": 2},
                  [pod("TFJob", "tf", NS, "Worker", 0), pod("TFJob", "tf", NS, "PS", 0, gpus=0),
                   pod("TFJob", "tf", NS, "Chief", 0)])
    assert pick_rank(tf).pod == "tf-chief-0"
    xgb = workload("XGBoostJob", "xgb", {"Master": 1, "Worker": 1},
                   [pod("XGBoostJob", "xgb", NS, "Worker", 0), pod("XGBoostJob", "xgb", NS, "Master", 0)])
    assert pick_rank(xgb).pod == "xgb-master-0"


def test_rank_and_pod_choices() -> None:
    wl = workload("PyTorchJob", "ddp", {"Master": 1, "Worker": 2},
                  [pod("PyTorchJob", "ddp", NS, "Master", 0)] + [pod("PyTorchJob", "ddp", NS, "Worker", i)
                                                                 for i in range(2)])
    assert pick_rank(wl, rank="worker-1").pod == "ddp-worker-1"  # by label
    assert pick_rank(wl, rank="1").pod == "ddp-worker-0"  # by global rank: the master is rank 0
    assert pick_rank(wl, rank="0").pod == "ddp-master-0"
    assert pick_rank(wl, pod="ddp-worker-1").label == "worker-1"
    assert pick_rank(mpi(), rank="launcher").pod == "hvd-launcher-x7k2p"
    with pytest.raises(ExecError) as err:
        pick_rank(wl, rank="worker-7")
    assert err.value.code == ExitCode.NOT_FOUND
    assert err.value.message == ('no rank "worker-7" in ddp (ranks: master-0 (rank 0), worker-0 (rank 1), '
                                 'worker-1 (rank 2))')
    with pytest.raises(ExecError) as err:
        pick_rank(wl, pod="ddp-worker-9")
    assert err.value.code == ExitCode.NOT_FOUND
    assert err.value.message == 'pod "ddp-worker-9" is not one of the ranks of ddp (ddp-master-0, ddp-worker-0, ddp-worker-1)'


def test_a_pending_lead_is_chosen_and_says_why_it_cannot_take_a_shell() -> None:
    why = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
    wl = workload("PyTorchJob", "p", {"Master": 1, "Worker": 1},
                  [pod("PyTorchJob", "p", NS, "Master", 0, phase="Pending", unschedulable=why),
                   pod("PyTorchJob", "p", NS, "Worker", 0)])
    lead = pick_rank(wl)
    assert lead.pod == "p-master-0" and lead.phase == "Pending"
    reason = not_running_reason(lead)
    assert reason is not None and reason.startswith("master-0 (p-master-0) is Pending") and why in reason
    assert not_running_reason(pick_rank(wl, rank="worker-0")) is None  # running: a shell can start


def test_no_pods_yet_is_not_yet() -> None:
    m = LiveModel()
    load(m, [job("PyTorchJob", "new", NS, {"Master": 1}, conditions=[("Created", "")])], [])
    with pytest.raises(NotYet) as err:
        pick_rank(m.workloads[(NS, "PyTorchJob", "new")])
    assert err.value.message.startswith("new has no pods yet")


class FakeClient:
    """Answers GET of a pod with the pod given; records the paths asked."""

    def __init__(self, pod_obj: dict[str, Any]) -> None:
        self.pod = pod_obj
        self.paths: list[str] = []

    async def get(self, path: str) -> dict[str, Any]:
        self.paths.append(path)
        return self.pod


async def test_shell_target_reads_the_pod_and_picks_its_container() -> None:
    wl = mpi()
    launcher = pick_rank(wl)
    raw = pod("MPIJob", "hvd", NS, "Launcher", None, gpus=0, name="hvd-launcher-x7k2p")
    raw["spec"]["containers"].insert(0, {"name": "istio-proxy", "image": "istio"})
    raw["metadata"]["annotations"] = {"kubectl.kubernetes.io/default-container": "main"}
    raw["spec"]["containers"][1]["env"] = [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"}]
    client = FakeClient(raw)
    target = await shell_target(client, wl, launcher)  # type: ignore[arg-type]
    assert client.paths == [f"/api/v1/namespaces/{NS}/pods/hvd-launcher-x7k2p"]
    assert target.container == "main"  # the pod's default container, not the first one
    assert [r.label for r in target.workers] == ["worker-0", "worker-1"]
    assert target.env == {"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile"}
    assert (await shell_target(client, wl, launcher, "istio-proxy")).container == "istio-proxy"  # type: ignore[arg-type]
    with pytest.raises(ExecError) as err:
        await shell_target(client, wl, launcher, "nope")  # type: ignore[arg-type]
    assert err.value.code == ExitCode.NOT_FOUND
    assert err.value.message == 'container "nope" is not in pod "hvd-launcher-x7k2p" (containers: istio-proxy, main)'


def test_default_container() -> None:
    p = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    assert default_container(p) == "a"
    p["metadata"]["annotations"] = {"kubectl.kubernetes.io/default-container": "b"}
    assert default_container(p) == "b"
    p["metadata"]["annotations"] = {"kubectl.kubernetes.io/default-container": "gone"}
    assert default_container(p) == "a"  # an annotation naming no container is ignored
    with pytest.raises(ExecError) as err:
        default_container({"metadata": {"name": "p"}, "spec": {"containers": []}})
    assert err.value.code == ExitCode.ERROR and err.value.message == 'pod "p" has no containers'
