"""sessions/manifests.py: the manifests `ranks submit` renders (per framework, interactive and
unattended) and what is wrong with a spec."""

from __future__ import annotations

from typing import Any

import pytest

from monitors.connection import ExitCode
from sessions.errors import SessionError
from sessions.manifests import (
    BACKOFF_LIMIT,
    FRACTION_KEY,
    GPU,
    INTERACTIVE_GRACE_SECONDS,
    INTERACTIVE_KEY,
    NODE_POOL_LABEL,
    TTL_AFTER_FINISHED,
    render,
    spec_problems,
)
from sessions.names import DNS1035_MSG, max_name_length
from tests.unit.session_objects import KINDS, NS, ROLES, SLEEP, main, pod_spec, replicas, spec

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
    ({"gpus": -2}, "--gpus", "-g -2: must be at least 0 (at most 1024 per pod)"),
    ({"gpus": 10**23}, "--gpus", f"-g {10**23}: must be at least 0 (at most 1024 per pod)"),
    ({"gpus": 0, "gpu_portion": 1.0}, "--gpu-portion",
     "--gpu-portion 1: must be at least 0.01 and less than 1 (a fraction of one GPU); use -g N for whole GPUs"),
    ({"gpus": 0, "gpu_portion": 0.001}, "--gpu-portion", "--gpu-portion 0.001: must be at least 0.01"),
    ({"slots_per_worker": 2}, "--slots-per-worker", "--slots-per-worker applies to MPI jobs only"),
    ({"framework": "mpi", "slots_per_worker": 0}, "--slots-per-worker", "--slots-per-worker 0: must be at least 1"),
    ({"framework": "mpi", "slots_per_worker": 2**70}, "--slots-per-worker",
     f"--slots-per-worker {2**70}: must be at least 1 (at most 100000)"),
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


