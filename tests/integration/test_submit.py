"""`ranks submit | delete | suspend | resume` against simcluster with the operators, scheduler and
kubelet running (pods are real processes): the manifests each framework gets, the env the operators
give the pods, commands that run, and every refusal as one line with its exit code and nothing
changed on the cluster.

One cluster serves the module (GPU nodes, Run:ai projects team-a and team-b, user alice limited to
runai-team-a); the commands run as the user runs them, in a subprocess, where the exit code and the
one-line error matter, and as direct calls where that is faster.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import pty
import select
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitors.connection import load_cluster_config
from monitors.kube import ApiProblem, KubeClient
from sessions.errors import SessionError
from sessions.manifests import FRAMEWORKS, SubmitSpec, render
from sessions.names import max_name_length
from sessions.submit import SUBMIT_ID, submit
from simcluster.apiserver.errors import ApiError
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.scenarios.demo import namespace
from simcluster.scenarios.nodes import gpu_nodes
from tests.faults import assert_consumed, assert_fired
from tests.waiting import one_line_error, wait_for

A, B = "runai-team-a", "runai-team-b"
COMPONENTS = ("operators", "scheduler", "kubelet")
KINDS = {name: (fw.kind, ("kubeflow.org", fw.plural)) for name, fw in FRAMEWORKS.items()}
REPLICAS = {"mpi": ("Launcher", "Worker"), "pytorch": ("Master", "Worker"),
            "tensorflow": ("Chief", "Worker"), "xgboost": ("Master", "Worker")}
CONTAINERS = {"mpi": "mpi", "pytorch": "pytorch", "tensorflow": "tensorflow", "xgboost": "xgboost"}
PODS = ("", "pods")
MUTATING = ("POST", "PUT", "PATCH", "DELETE")


# -- cluster and helpers --------------------------------------------------------------------------


def setup(sim: Any) -> None:
    for node in gpu_nodes(4, 8, pool="h100", product="NVIDIA-H100-80GB-HBM3", prefix="h100-node"):
        sim.apply(node)
    for node in gpu_nodes(2, 4, pool="a100", prefix="a100-node"):
        sim.apply(node)
    for project in ("team-a", "team-b"):
        sim.apply(namespace(f"runai-{project}", {"runai/queue": project}))
    sim.add_namespace_reader("alice", [A], write=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="empty", components=COMPONENTS, workdir=tmp_path_factory.mktemp("submit")) as t:
        t.call(setup, t.sim)
        yield t


@pytest.fixture(scope="module")
def alice_kubeconfig(cluster: ThreadedSimCluster) -> Path:
    path = cluster.sim.workdir / "alice.kubeconfig"
    cluster.call(cluster.sim.write_kubeconfig, path, "alice")
    return path


def ranks(*args: str, kubeconfig: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it (not on a terminal: stdin is /dev/null)."""
    e = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "RANKS_CONFIG")}
    e["RANKS_CONFIG"] = ""
    e["XDG_CONFIG_HOME"] = str(kubeconfig.parent / "no-config")
    e.update(env or {})
    cmd = [sys.executable, "-c", "from tui.cli import main; main()", *args, "--kubeconfig", str(kubeconfig)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=e, stdin=subprocess.DEVNULL)




def find(t: ThreadedSimCluster, key: tuple[str, str], ns: str, name: str) -> dict[str, Any] | None:
    def get() -> dict[str, Any] | None:
        st = t.sim.store.find(key, ns, name)
        return copy.deepcopy(st.obj) if st is not None else None

    return t.call(get)


def job_of(t: ThreadedSimCluster, framework: str, name: str, ns: str = A) -> dict[str, Any] | None:
    return find(t, KINDS[framework][1], ns, name)


def pods_of(t: ThreadedSimCluster, name: str, ns: str = A) -> dict[str, dict[str, Any]]:
    """The job's pods by name (selected by the operators' job-name label)."""
    def get() -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: copy.deepcopy(p) for p in t.sim.store.objects(PODS, ns)
                if (p["metadata"].get("labels") or {}).get("training.kubeflow.org/job-name") == name}

    return t.call(get)


def running(t: ThreadedSimCluster, name: str, count: int, ns: str = A) -> dict[str, dict[str, Any]] | None:
    pods = pods_of(t, name, ns)
    live = {n: p for n, p in pods.items() if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")}
    return live if len(live) == count else None


def condition(obj: dict[str, Any] | None, ctype: str) -> bool:
    return obj is not None and any(c.get("type") == ctype and c.get("status") == "True"
                                   for c in (obj.get("status") or {}).get("conditions") or [])


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    c = pod["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in c.get("env") or []}


def mutations_since(t: ThreadedSimCluster, since: float) -> list[tuple[str, str]]:
    """(method, path) of every request since `since` that could change something, allowed or not."""
    return [(r.method, r.path) for r in t.sim.requests.since(since) if r.method in MUTATING]


def call(t: ThreadedSimCluster, fn: Callable[[KubeClient], Any], kubeconfig: Path | None = None) -> Any:
    """Run `fn(client)` (a coroutine function) with a client of the cluster's admin (or kubeconfig)."""
    cfg = load_cluster_config(str(kubeconfig or t.sim.kubeconfig_path), None)

    async def body() -> Any:
        async with KubeClient(cfg) as client:
            return await fn(client)

    return asyncio.run(body())


def spec(name: str, framework: str = "pytorch", **kw: Any) -> SubmitSpec:
    base: dict[str, Any] = dict(image="nvcr.io/nvidia/pytorch:24.10-py3", workers=2, namespace=A, project="team-a",
                                user="admin", interactive=True)
    base.update(kw)
    if base.get("command") is not None:
        base["interactive"] = False
    return SubmitSpec(name=name, framework=framework, **base)


def without_submit_id(obj: dict[str, Any]) -> dict[str, Any]:
    ann = dict(obj["metadata"].get("annotations") or {})
    ann.pop(SUBMIT_ID, None)
    return ann


# -- manifests (no cluster) -----------------------------------------------------------------------


@pytest.mark.parametrize("interactive", [True, False], ids=["interactive", "unattended"])
@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_manifest_shape(framework: str, interactive: bool) -> None:
    s = spec("shape", framework, gpus=2, cpu="8", memory="32Gi", env=("NCCL_DEBUG=INFO", "A=1=2"),
             volumes=("datasets:/data:ro", "ckpt:/ckpt"), node_pool="h100", user="alice",
             command=None if interactive else "python train.py --epochs 3")
    m = render(s)
    fw = FRAMEWORKS[framework]
    assert (m["apiVersion"], m["kind"]) == (fw.api_version, fw.kind)
    assert m["apiVersion"] == ("kubeflow.org/v2beta1" if framework == "mpi" else "kubeflow.org/v1")
    assert m["metadata"]["labels"] == {"project": "team-a", "ranks/user": "alice"}
    assert m["metadata"].get("annotations", {}).get("ranks/interactive") == ("true" if interactive else None)
    policy = m["spec"]["runPolicy"]
    assert policy["cleanPodPolicy"] == "Running"
    if interactive:
        assert "ttlSecondsAfterFinished" not in policy and "backoffLimit" not in policy
    else:
        assert policy["backoffLimit"] >= 1 and policy["ttlSecondsAfterFinished"] > 0
    reps = m["spec"][fw.replica_field]
    lead, worker = REPLICAS[framework]
    assert list(reps) == [lead, worker]
    assert reps[lead]["replicas"] == 1 and reps[worker]["replicas"] == 2
    want_cmd = ["sleep", "infinity"] if interactive else ["/bin/sh", "-c", "python train.py --epochs 3"]
    for role, r in reps.items():
        tmpl = r["template"]
        assert tmpl["metadata"]["labels"] == {"project": "team-a", "ranks/user": "alice"}
        pod = tmpl["spec"]
        assert pod["nodeSelector"] == {"run.ai/node-pool": "h100"}
        assert pod["volumes"] == [{"name": "pvc-0", "persistentVolumeClaim": {"claimName": "datasets"}},
                                  {"name": "pvc-1", "persistentVolumeClaim": {"claimName": "ckpt"}}]
        (c,) = pod["containers"]
        assert c["name"] == CONTAINERS[framework] and c["image"] == s.image
        assert c["env"] == [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "A", "value": "1=2"}]
        assert c["volumeMounts"] == [{"name": "pvc-0", "mountPath": "/data", "readOnly": True},
                                     {"name": "pvc-1", "mountPath": "/ckpt"}]
        gpu_rank = not (framework == "mpi" and role == "Launcher")
        assert c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") == ("2" if gpu_rank else None)
        if gpu_rank:
            assert c["resources"]["requests"] == {"nvidia.com/gpu": "2", "cpu": "8", "memory": "32Gi"}
        if framework == "mpi" and role == "Worker":
            assert "command" not in c and "args" not in c  # mpi-operator's default: sshd
        else:
            assert c["command"] == want_cmd
    if framework == "mpi":
        assert m["spec"]["slotsPerWorker"] == 2  # one process per GPU unless told
        assert render(spec("shape", "mpi", gpus=2, slots_per_worker=4))["spec"]["slotsPerWorker"] == 4


def test_manifest_gpu_portion_and_odd_user() -> None:
    for framework in FRAMEWORKS:
        m = render(spec("frac", framework, gpu_portion=0.5, user="alice@example.com"))
        assert "ranks/user" not in m["metadata"]["labels"]  # not a valid label value: an annotation
        assert m["metadata"]["annotations"]["ranks/user"] == "alice@example.com"
        for role, r in m["spec"][FRAMEWORKS[framework].replica_field].items():
            c = r["template"]["spec"]["containers"][0]
            assert "nvidia.com/gpu" not in json.dumps(c)
            ann = r["template"]["metadata"]["annotations"]
            assert ann["ranks/user"] == "alice@example.com"
            assert ann.get("gpu-fraction") == (None if role == "Launcher" else "0.5")


LONG = max_name_length("pytorch", 2)


@pytest.mark.parametrize(("kw", "fragment"), [
    ({"name": "Bad_Name"}, "a DNS-1035 label must consist of lower case alphanumeric characters or '-'"),
    ({"name": "1st-run"}, "start with an alphabetic character"),
    ({"name": "run-"}, "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?'"),
    ({"name": "x" * (LONG + 1)}, f"must be no more than {LONG} characters"),
    ({"framework": "mpi", "workers": 0}, "--workers 0: MPI needs at least 1 worker"),
    ({"env": ("NOVALUE",)}, '--env "NOVALUE": expected KEY=VALUE'),
    ({"env": ("=x",)}, "Required value"),
    ({"env": ("BAD\tNAME=1",)}, "regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*'"),
    ({"env": ("1ST=1",)}, "must not start with a digit"),
    ({"env": ("MY VAR=1",)}, 'Invalid value: "MY VAR": a valid environment variable name'),
    ({"env": ("A$B=1",)}, "consist of alphabetic characters, digits, '_', '-', or '.'"),
    ({"memory": "lots"}, '--memory "lots": quantities must match the regular expression'),
    ({"cpu": "-1"}, "must be greater than or equal to 0"),
    ({"volumes": ("Data:/data",)}, "a lowercase RFC 1123 subdomain"),
    ({"volumes": ("data:relative",)}, "the mount path must be absolute"),
    ({"volumes": ("a:/d", "b:/d")}, 'Invalid value: "/d": must be unique'),
    ({"gpu_portion": 1.5}, "--gpu-portion 1.5: must be at least 0.01 and less than 1"),
    ({"gpu_portion": 0.5, "gpus": 1}, "-g/--gpus and --gpu-portion cannot be used together"),
    ({"slots_per_worker": 2}, "--slots-per-worker applies to MPI jobs only"),
    ({"node_pool": "h100 pool"}, "a valid label must be an empty string or consist of alphanumeric"),
    ({"interactive": False}, "give --interactive"),
    ({"interactive": True, "command": "x", "_keep": True}, "--interactive and --command cannot be used together"),
    ({"image": ""}, "an image is required"),
])
def test_invalid_spec_refused(kw: dict[str, Any], fragment: str) -> None:
    kw = dict(kw)
    keep = kw.pop("_keep", False)
    s = spec(kw.pop("name", "ok-name"), kw.pop("framework", "pytorch"), **kw)
    if keep:
        s.interactive = True
    with pytest.raises(SessionError) as err:
        render(s)
    assert err.value.code == 2
    assert fragment in err.value.message and "\n" not in err.value.message


def test_longest_valid_name_renders() -> None:
    assert render(spec("x" * LONG, workers=2))["metadata"]["name"] == "x" * LONG
    # more workers, longer pod names (NAME-worker-1234): less room for the job's name
    assert max_name_length("pytorch", 2000) == LONG - 3
    assert max_name_length("mpi", 1) == 63 - len("-launcher")


# -- submitting every framework -------------------------------------------------------------------

# (each rank says hello, then waits until the test has read every rank's hello: a job that ends
# deletes its still-running pods, and on a loaded machine a worker can start after its chief ended)
RELEASE = Path(tempfile.gettempdir()) / f"ranks-test-release-{uuid.uuid4().hex[:12]}"  # (pods share /tmp)
WAIT = f"until [ -e {RELEASE} ]; do sleep 0.1; done"
UNATTENDED = {
    "pytorch": f"echo hello-from-$RANK; {WAIT}",
    "xgboost": f"echo hello-from-$RANK; {WAIT}",
    "tensorflow": f'echo "hello-from-$HOSTNAME"; {WAIT}',
    "mpi": 'echo hello-from-launcher; cat "$OMPI_MCA_orte_default_hostfile"',
}


def fleet_specs() -> dict[str, SubmitSpec]:
    out = {}
    for framework in FRAMEWORKS:
        out[f"{framework[:5]}-i"] = spec(f"{framework[:5]}-i", framework, gpus=1)
        out[f"{framework[:5]}-u"] = spec(f"{framework[:5]}-u", framework, gpus=1, command=UNATTENDED[framework])
    out["xgboo-i"].gpus, out["xgboo-i"].gpu_portion = 0, 0.5  # a GPU-portion session
    return out


@pytest.fixture(scope="module")
def fleet(cluster: ThreadedSimCluster) -> dict[str, tuple[SubmitSpec, dict[str, Any]]]:
    """One interactive and one unattended job of each framework, submitted at once."""
    specs = fleet_specs()

    async def go(client: KubeClient) -> list[dict[str, Any]]:
        return await asyncio.gather(*(submit(client, s) for s in specs.values()))

    created = call(cluster, go)
    return {name: (s, obj) for (name, s), obj in zip(specs.items(), created, strict=True)}


@pytest.fixture(scope="module")
def unattended_logs(cluster: ThreadedSimCluster, fleet: dict[str, Any]) -> Iterator[dict[str, dict[str, str]]]:
    """Each unattended job's pod logs (pod -> text), read through the API as soon as they appear and
    until the job ends: a job that ends deletes its still-running pods (cleanPodPolicy: Running)."""
    names = [n for n, (s, _) in fleet.items() if not s.interactive]
    seen: dict[str, dict[str, str]] = {n: {} for n in names}

    def heard(name: str) -> bool:
        said = [t for t in seen[name].values() if "hello-from-" in t]
        return len(said) == 3 or fleet[name][0].framework == "mpi"

    async def collect(client: KubeClient) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 180
        while loop.time() < deadline:
            if not RELEASE.exists() and all(heard(n) for n in names):
                RELEASE.touch()  # every rank said hello: they may end
            ended = 0
            for name in names:
                s = fleet[name][0]
                job = await client.get(FRAMEWORKS[s.framework].path(A, name))
                ended += condition(job, "Succeeded") or condition(job, "Failed")
                pods = await client.get(f"/api/v1/namespaces/{A}/pods",
                                        {"labelSelector": f"training.kubeflow.org/job-name={name}"})
                for p in pods["items"]:
                    pod = p["metadata"]["name"]
                    if "hello-from-" in seen[name].get(pod, ""):
                        continue
                    with contextlib.suppress(ApiProblem):
                        raw = await client.request("GET", f"/api/v1/namespaces/{A}/pods/{pod}/log")
                        seen[name][pod] = raw.decode()
            if ended == len(names):
                return
            await asyncio.sleep(0.05)

    try:
        call(cluster, collect)
    finally:
        RELEASE.touch()  # (whatever happened, the ranks end)
    yield seen
    RELEASE.unlink(missing_ok=True)


@pytest.mark.parametrize("name", list(fleet_specs()))
def test_created_object(cluster: ThreadedSimCluster, fleet: dict[str, Any], name: str) -> None:
    s, returned = fleet[name]
    stored = job_of(cluster, s.framework, name)
    assert stored is not None and stored["metadata"]["uid"] == returned["metadata"]["uid"]
    want = render(s)
    assert stored["kind"] == want["kind"] and stored["apiVersion"] == want["apiVersion"]
    assert stored["metadata"]["labels"] == {"project": "team-a", "ranks/user": "admin"}
    assert without_submit_id(stored) == want["metadata"].get("annotations", {})
    assert stored["metadata"]["annotations"][SUBMIT_ID]
    field = FRAMEWORKS[s.framework].replica_field
    assert stored["spec"][field] == want["spec"][field]
    assert stored["spec"]["runPolicy"] == want["spec"]["runPolicy"]


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_interactive_session_pods_and_env(cluster: ThreadedSimCluster, fleet: dict[str, Any], framework: str) -> None:
    name = f"{framework[:5]}-i"
    pods = wait_for(lambda: running(cluster, name, 3), timeout=30, what=f"{name}: 3 pods Running")
    for p in pods.values():
        labels = p["metadata"]["labels"]
        assert labels["project"] == "team-a" and labels["ranks/user"] == "admin"
    if framework == "mpi":
        (launcher,) = [p for n, p in pods.items() if "-launcher-" in n]
        assert launcher["spec"]["containers"][0]["command"] == ["sleep", "infinity"]
        env = env_of(launcher)
        assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
        assert env["K_MPI_JOB_ROLE"] == "launcher" and env["OMPI_MCA_orte_set_default_slots"] == "1"
        for i in range(2):
            worker = pods[f"{name}-worker-{i}"]
            # no command of ours: the operator's sshd
            assert worker["spec"]["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]
            assert env_of(worker)["K_MPI_JOB_ROLE"] == "worker"
            assert worker["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        return
    for p in pods.values():
        assert p["spec"]["containers"][0]["command"] == ["sleep", "infinity"]
    lead = {"pytorch": "master", "tensorflow": "chief", "xgboost": "master"}[framework]
    first = env_of(pods[f"{name}-{lead}-0"])
    last = env_of(pods[f"{name}-worker-1"])
    if framework == "tensorflow":
        tf = json.loads(first["TF_CONFIG"])
        assert tf["cluster"] == {"chief": [f"{name}-chief-0.{A}.svc:2222"],
                                 "worker": [f"{name}-worker-{i}.{A}.svc:2222" for i in range(2)]}
        assert tf["task"] == {"type": "chief", "index": 0}
        assert json.loads(last["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
        return
    assert first["MASTER_ADDR"] == last["MASTER_ADDR"] == f"{name}-master-0"
    assert first["WORLD_SIZE"] == last["WORLD_SIZE"] == "3"  # --workers 2 plus the master
    assert (first["RANK"], last["RANK"]) == ("0", "2")
    if framework == "xgboost":  # the GPU-portion session: Run:ai's annotation, no whole GPU
        for p in pods.values():
            assert p["metadata"]["annotations"]["gpu-fraction"] == "0.5"
            assert "nvidia.com/gpu" not in json.dumps(p["spec"]["containers"][0].get("resources", {}))


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_unattended_job_runs_its_command(cluster: ThreadedSimCluster, unattended_logs: dict[str, dict[str, str]],
                                         framework: str) -> None:
    name = f"{framework[:5]}-u"
    assert condition(job_of(cluster, framework, name), "Succeeded")
    seen = unattended_logs[name]
    if framework == "mpi":
        (launcher,) = [text for pod, text in seen.items() if "-launcher-" in pod]
        assert "hello-from-launcher" in launcher
        assert f"{name}-worker-0.{name}.{A}.svc slots=1" in launcher  # the hostfile, as mpirun reads it
        assert f"{name}-worker-1.{name}.{A}.svc slots=1" in launcher
    elif framework == "tensorflow":
        assert sorted(seen) == [f"{name}-chief-0", f"{name}-worker-0", f"{name}-worker-1"]
        for pod, text in seen.items():
            assert f"hello-from-{pod}" in text
    else:
        said = {line for text in seen.values() for line in text.split() if line.startswith("hello-from-")}
        assert said == {"hello-from-0", "hello-from-1", "hello-from-2"}


def test_list_shows_sessions_as_interactive_and_mine(cluster: ThreadedSimCluster, fleet: dict[str, Any]) -> None:
    r = ranks("list", "-p", "team-a", "-o", "json", kubeconfig=cluster.sim.kubeconfig_path)
    assert r.returncode == 0, r.stderr
    wls = {w["name"]: w for w in json.loads(r.stdout)["workloads"]}
    for name, (s, _) in fleet.items():
        assert wls[name]["interactive"] is s.interactive, name
        assert wls[name]["user"] == "admin" and wls[name]["project"] == "team-a"


def test_gpu_portion_session_counts_its_gpus(cluster: ThreadedSimCluster, fleet: dict[str, Any]) -> None:
    """A session of 3 ranks with half a GPU each requests 1.5 GPUs (Run:ai's gpu-fraction)."""
    wait_for(lambda: running(cluster, "xgboo-i", 3), timeout=30, what="xgboo-i running")
    r = ranks("get", "xgboo-i", "-p", "team-a", "-o", "json", kubeconfig=cluster.sim.kubeconfig_path)
    assert r.returncode == 0, r.stderr
    wl = json.loads(r.stdout)["workload"] if "workload" in json.loads(r.stdout) else json.loads(r.stdout)
    assert wl["gpus_allocated"] == 1.5
    assert wl["gpus_requested"] == 1.5


# -- the command line: dry run, names, duplicates, rejections ---------------------------------------


SUBMIT = ("--framework", "pytorch", "-i", "nvcr.io/nvidia/pytorch:24.10-py3", "--workers", "1", "-p", "team-a")


@pytest.mark.parametrize("output", ["yaml", "json"])
def test_dry_run_prints_and_creates_nothing(cluster: ThreadedSimCluster, output: str) -> None:
    t0 = time.time()
    r = ranks("submit", "dry", *SUBMIT, "-g", "1", "--interactive", "--env", "X=1", "--dry-run", "-o", output,
              kubeconfig=cluster.sim.kubeconfig_path)
    assert r.returncode == 0, r.stderr
    printed = yaml.safe_load(r.stdout) if output == "yaml" else json.loads(r.stdout)
    assert printed == render(spec("dry", workers=1, gpus=1, env=("X=1",)))
    assert job_of(cluster, "pytorch", "dry") is None
    assert mutations_since(cluster, t0) == []


def test_invalid_names_refused_before_the_cluster(cluster: ThreadedSimCluster) -> None:
    t0 = time.time()
    kc = cluster.sim.kubeconfig_path
    one_line_error(ranks("submit", "My_Session", *SUBMIT, "--interactive", kubeconfig=kc), 2,
                   'invalid name "My_Session": a DNS-1035 label must consist of lower case alphanumeric')
    too_long = "s" * (max_name_length("pytorch", 1) + 1)
    one_line_error(ranks("submit", too_long, *SUBMIT, "--interactive", kubeconfig=kc), 2,
                   f"must be no more than {max_name_length('pytorch', 1)} characters", "NAME-worker-0")
    one_line_error(ranks("submit", "fine", *SUBMIT, "--memory", "10GB", "--interactive", kubeconfig=kc), 2,
                   '--memory "10GB": quantities must match')
    assert mutations_since(cluster, t0) == []


def test_duplicate_name_refused_and_nothing_changed(cluster: ThreadedSimCluster) -> None:
    kc = cluster.sim.kubeconfig_path
    r = ranks("submit", "dup", *SUBMIT, "--interactive", kubeconfig=kc)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith("pytorchjob.kubeflow.org/dup created in runai-team-a")
    before = job_of(cluster, "pytorch", "dup")
    assert before is not None
    t0 = time.time()
    one_line_error(ranks("submit", "dup", *SUBMIT, "--command", "true", kubeconfig=kc), 1,
                   'pytorchjob "dup" already exists in runai-team-a', "never replaces")
    # the same name in another kind would clash with its pods and Services (dup-worker-0)
    one_line_error(ranks("submit", "dup", "--framework", "mpi", "-i", "img", "--workers", "1", "-p", "team-a",
                         "--interactive", kubeconfig=kc), 1, 'pytorchjob "dup" already exists', "MPIJob")
    assert mutations_since(cluster, t0) == []

    # created by someone else between our check and our create: the server's 409, the same answer
    t1 = time.time()
    cluster.call(cluster.sim.faults.fail_next, r"/pytorchjobs/dup$", 404, method="GET")
    with pytest.raises(SessionError) as err:
        call(cluster, lambda c: submit(c, spec("dup", workers=1)))
    assert_consumed(cluster, r"/pytorchjobs/dup$")  # the check did see the injected 404
    assert_fired(cluster, r"/pytorchjobs/dup$", 404, since=t1, method="GET", times=1)
    assert err.value.code == 1 and 'pytorchjob "dup" already exists in runai-team-a' in err.value.message
    assert [m for m, _ in mutations_since(cluster, t0)] == ["POST"]  # refused with 409
    after = job_of(cluster, "pytorch", "dup")
    assert after is not None  # the same object (the operator may have updated its status meanwhile)
    assert (after["metadata"]["uid"], after["spec"], after["metadata"].get("labels")) == (
        before["metadata"]["uid"], before["spec"], before["metadata"].get("labels"))


def test_server_rejection_is_one_line_and_leaves_nothing(cluster: ThreadedSimCluster) -> None:
    """An admission webhook (an image-registry policy, as Gatekeeper enforces) rejects the job."""

    def policy(rt: Any, obj: dict[str, Any]) -> None:
        if rt.group == "kubeflow.org" and obj["metadata"].get("name") == "rejected":
            raise ApiError(400, 'admission webhook "validation.gatekeeper.sh" denied the request: '
                                "[allowed-repos] container <pytorch> has an invalid image repo <docker.io/me/x>, "
                                'allowed repos are ["nvcr.io/"]')

    cluster.call(cluster.sim.server.admission.append, policy)
    try:
        t0 = time.time()
        r = ranks("submit", "rejected", "--framework", "pytorch", "-i", "docker.io/me/x", "--workers", "1",
                  "-p", "team-a", "--interactive", kubeconfig=cluster.sim.kubeconfig_path)
        one_line_error(r, 1, 'the server rejected pytorchjob "rejected"',
                       'admission webhook "validation.gatekeeper.sh" denied the request', "allowed-repos")
        assert job_of(cluster, "pytorch", "rejected") is None
        assert pods_of(cluster, "rejected") == {}
        assert [m for m, _ in mutations_since(cluster, t0)] == ["POST"]
    finally:
        cluster.call(cluster.sim.server.admission.remove, policy)


def test_lost_create_answer_removes_what_was_created(cluster: ThreadedSimCluster) -> None:
    """The server creates the job but its answer comes too late (the client gives up): the job is
    found by its submit-id and deleted, so nothing is left behind."""
    stalled: list[bool] = []

    def stall_once(ev: Any) -> None:  # the API server is stuck for a second right after storing it
        if ev.type == "ADDED" and ev.obj["metadata"].get("name") == "lost" and not stalled:
            stalled.append(True)
            time.sleep(1.0)

    cluster.call(cluster.sim.store.listen, stall_once)
    t0 = time.time()
    with pytest.raises(SessionError) as err:
        call(cluster, lambda c: submit(c, spec("lost", workers=1), create_timeout=0.4, cleanup_window=6))
    assert stalled
    assert err.value.code == 4
    assert "timed out" in err.value.message and "the job it created was removed" in err.value.message
    creates = [r for r in cluster.sim.requests.since(t0) if r.method == "POST"]
    assert [r.status for r in creates] == [201]  # it was created...
    assert job_of(cluster, "pytorch", "lost") is None  # ...and removed
    wait_for(lambda: not pods_of(cluster, "lost"), what="no pod of the removed job", timeout=20)


def test_rbac_forbidden_project(cluster: ThreadedSimCluster, alice_kubeconfig: Path) -> None:
    t0 = time.time()
    r = ranks("submit", "alice-b", *SUBMIT[:-2], "-p", "team-b", "--interactive", kubeconfig=alice_kubeconfig)
    # a project she may not read is refused before anything is sent (issue #11)
    one_line_error(r, 7, 'forbidden: alice may not read project "team-b"')
    assert job_of(cluster, "pytorch", "alice-b", B) is None
    assert mutations_since(cluster, t0) == []
    # her own project works, and the job says who she is
    r = ranks("submit", "alice-a", *SUBMIT[:-2], "--interactive", kubeconfig=alice_kubeconfig)
    assert r.returncode == 0, r.stderr
    assert job_of(cluster, "pytorch", "alice-a")["metadata"]["labels"]["ranks/user"] == "alice"  # type: ignore[index]
    # nor may she delete in team-b
    call(cluster, lambda c: submit(c, spec("bobs", workers=0, namespace=B, project="team-b")))
    one_line_error(ranks("delete", "bobs", "-p", "team-b", "--yes", kubeconfig=alice_kubeconfig), 7,
                   'forbidden: alice may not read project "team-b"')
    assert job_of(cluster, "pytorch", "bobs", B) is not None


# -- lifecycle --------------------------------------------------------------------------------------


def in_pty(args: list[str], kubeconfig: Path, answer: bytes) -> tuple[int, str]:
    """Run the CLI on a pseudo-terminal and answer its question."""
    master, slave = pty.openpty()
    e = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    e.update(RANKS_CONFIG="", XDG_CONFIG_HOME=str(kubeconfig.parent / "no-config"))
    p = subprocess.Popen([sys.executable, "-c", "from tui.cli import main; main()", *args, "--kubeconfig",
                          str(kubeconfig)], stdin=slave, stdout=slave, stderr=slave, env=e, close_fds=True)
    os.close(slave)
    out = b""
    answered = False
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            if not answered and b"[y/N]" in out:
                os.write(master, answer)
                answered = True
            if p.poll() is not None and not ready:
                break
        return p.wait(timeout=10), out.decode(errors="replace")
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()


def test_suspend_resume_delete(cluster: ThreadedSimCluster) -> None:
    kc = cluster.sim.kubeconfig_path
    call(cluster, lambda c: submit(c, spec("life", workers=1)))
    wait_for(lambda: running(cluster, "life", 2), timeout=30, what="life running")

    r = ranks("suspend", "life", "-p", "team-a", kubeconfig=kc)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("pytorchjob.kubeflow.org/life suspended")
    assert job_of(cluster, "pytorch", "life")["spec"]["runPolicy"]["suspend"] is True  # type: ignore[index]
    wait_for(lambda: not pods_of(cluster, "life") and condition(job_of(cluster, "pytorch", "life"), "Suspended"),
             what="the operator deleting the pods of the suspended job", timeout=20)
    r = ranks("suspend", "pytorchjob/life", "-p", "team-a", kubeconfig=kc)
    assert r.returncode == 0 and "already suspended" in r.stdout, r.stderr

    r = ranks("resume", "life", "-p", "team-a", kubeconfig=kc)
    assert r.returncode == 0 and "resumed" in r.stdout, r.stderr
    wait_for(lambda: running(cluster, "life", 2), timeout=30, what="life running again")
    assert not condition(job_of(cluster, "pytorch", "life"), "Suspended")

    # not on a terminal and no --yes: refused, nothing deleted
    one_line_error(ranks("delete", "life", "-p", "team-a", kubeconfig=kc), 2, "without confirmation", "--yes")
    # on a terminal: asked; "n" keeps it
    code, out = in_pty(["delete", "life", "-p", "team-a"], kc, b"n\n")
    assert code == 1 and "Delete interactive session pytorchjob.kubeflow.org/life in runai-team-a" in out, out
    assert job_of(cluster, "pytorch", "life") is not None
    code, out = in_pty(["delete", "life", "-p", "team-a"], kc, b"y\n")
    assert code == 0 and "pytorchjob.kubeflow.org/life deleted" in out, out
    assert job_of(cluster, "pytorch", "life") is None
    wait_for(lambda: not pods_of(cluster, "life"), what="the pods going with the job", timeout=20)

    one_line_error(ranks("delete", "life", "-p", "team-a", "--yes", kubeconfig=kc), 8, 'workload "life" not found')
    one_line_error(ranks("resume", "life", "-p", "team-a", kubeconfig=kc), 8, "not found")


def test_read_only_refuses_every_change(cluster: ThreadedSimCluster, tmp_path: Path) -> None:
    kc = cluster.sim.kubeconfig_path
    call(cluster, lambda c: submit(c, spec("kept", workers=0)))
    t0 = time.time()
    commands = {
        "submit ro-new": ["submit", "ro-new", *SUBMIT, "--interactive"],
        "delete kept": ["delete", "kept", "-p", "team-a", "--yes"],
        "suspend kept": ["suspend", "kept", "-p", "team-a"],
        "resume kept": ["resume", "kept", "-p", "team-a"],
    }
    for action, args in commands.items():
        one_line_error(ranks(*args, "--read-only", kubeconfig=kc), 2,
                       f"read-only mode (--read-only): refusing to {action}")
    config = tmp_path / "config.toml"
    config.write_text("read_only = true\n")
    for action, args in commands.items():
        one_line_error(ranks(*args, kubeconfig=kc, env={"RANKS_CONFIG": str(config)}), 2,
                       f"read-only mode (read_only = true in {config}): refusing to {action}")
    assert mutations_since(cluster, t0) == []
    assert job_of(cluster, "pytorch", "kept") is not None and job_of(cluster, "pytorch", "ro-new") is None
    # a dry run changes nothing: allowed
    r = ranks("submit", "ro-new", *SUBMIT, "--interactive", "--dry-run", "--read-only", kubeconfig=kc)
    assert r.returncode == 0 and yaml.safe_load(r.stdout)["kind"] == "PyTorchJob", r.stderr
