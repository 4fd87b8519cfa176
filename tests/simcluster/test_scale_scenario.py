"""The `scale` scenario's synthetic objects (simcluster/scenarios/scale.py)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from simcluster.scenarios.scale import ScaleObjects, build_scale, churn_pod

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
KF = "training.kubeflow.org/"
GPU = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def objs() -> ScaleObjects:
    return build_scale(1000, 20000, now=NOW, seed=0)


def _gpu(container: dict) -> int:
    return int(container["resources"].get("requests", {}).get(GPU, "0"))


def _env(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


def _owner(obj: dict) -> dict:
    refs = obj["metadata"]["ownerReferences"]
    assert len(refs) == 1
    return refs[0]


def _running_ready(objs: ScaleObjects) -> dict:
    return next(
        p
        for p in objs.pods
        if p["status"]["phase"] == "Running" and p["status"]["containerStatuses"][0]["ready"]
    )


# -- counts (how fast they are built: tests/perf/test_bench_sim_parts.py) --------------------------------------------------------------------------


def test_counts(objs: ScaleObjects) -> None:
    assert len(objs.pods) == 20000
    assert len(objs.nodes) == 1000
    assert len(objs.namespaces) == 50
    assert len(objs.quotas) == 50
    kinds = Counter(j["kind"] for j in objs.jobs)
    assert set(kinds) == {"PyTorchJob", "MPIJob", "TFJob", "Job"}
    assert kinds["Job"] == kinds["MPIJob"]  # one launcher Job per MPIJob
    assert kinds["PyTorchJob"] > kinds["MPIJob"] > 0 and kinds["TFJob"] > 0
    workloads = kinds["PyTorchJob"] + kinds["MPIJob"] + kinds["TFJob"]
    assert 800 <= workloads <= 1300
    # pods per workload: 2..64, average about 20
    per_job = Counter((p["metadata"]["namespace"], p["metadata"]["labels"][KF + "job-name"]) for p in objs.pods)
    assert len(per_job) == workloads
    assert min(per_job.values()) >= 2 and max(per_job.values()) <= 64
    assert 15 <= sum(per_job.values()) / len(per_job) <= 25
    # unique names per namespace
    assert len({(p["metadata"]["namespace"], p["metadata"]["name"]) for p in objs.pods}) == 20000


def test_all_order(objs: ScaleObjects) -> None:
    items = list(objs.all())
    assert len(items) == sum(
        len(x) for x in (objs.namespaces, objs.nodes, objs.quotas, objs.jobs, objs.pods)
    )
    order = {"Namespace": 0, "Node": 1, "ResourceQuota": 2, "PyTorchJob": 3, "MPIJob": 3, "TFJob": 3, "Job": 3, "Pod": 4}
    ranks = [order[o["kind"]] for o in items]
    assert ranks == sorted(ranks)


@pytest.mark.parametrize(("nodes", "pods"), [(0, 0), (3, 1), (2, 5), (10, 67), (5, 130)])
def test_exact_pod_count_small(nodes: int, pods: int) -> None:
    objs = build_scale(nodes, pods, namespaces=3, now=NOW, seed=7)
    assert len(objs.pods) == pods
    assert len(objs.nodes) == nodes
    assert len(objs.namespaces) == len(objs.quotas) == 3
    if nodes == 0:
        assert all(p["status"]["phase"] == "Pending" for p in objs.pods)


# -- object completeness ---------------------------------------------------------------------------


def test_every_object_complete(objs: ScaleObjects) -> None:
    ns_names = {n["metadata"]["name"] for n in objs.namespaces}
    uids: set[str] = set()
    for o in objs.all():
        assert o["apiVersion"] and o["kind"]
        meta = o["metadata"]
        assert meta["name"]
        assert "resourceVersion" not in meta
        assert UUID4.match(meta["uid"]), meta["uid"]
        assert meta["uid"] not in uids
        uids.add(meta["uid"])
        assert RFC3339.match(meta["creationTimestamp"])
        assert "labels" in meta
        if o["kind"] in ("Namespace", "Node"):
            assert "namespace" not in meta
        else:
            assert meta["namespace"] in ns_names
        mf = meta["managedFields"]
        assert mf and all(e["fieldsType"] == "FieldsV1" and e["fieldsV1"] for e in mf)
        assert all(RFC3339.match(e["time"]) and e["operation"] == "Update" for e in mf)
        assert "spec" in o and "status" in o


def test_pod_sizes_5_to_10_kb(objs: ScaleObjects) -> None:
    sizes = [len(json.dumps(p, separators=(",", ":"))) for p in objs.pods[:200]]
    sizes += [len(orjson.dumps(p)) for p in objs.pods]
    assert min(sizes) >= 5 * 1024, min(sizes)
    assert max(sizes) <= 10 * 1000, max(sizes)


def test_pod_shape(objs: ScaleObjects) -> None:
    for p in objs.pods:
        meta, spec, status = p["metadata"], p["spec"], p["status"]
        c = spec["containers"][0]
        assert meta["annotations"]["kubectl.kubernetes.io/default-container"] == c["name"]
        assert c["image"] and c["command"] and c["env"]
        assert c["resources"]["requests"] and c["resources"]["limits"]
        kapi = [v for v in spec["volumes"] if v["name"].startswith("kube-api-access-")]
        assert len(kapi) == 1 and "projected" in kapi[0]
        assert any(
            m["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount" and m["name"] == kapi[0]["name"]
            for m in c["volumeMounts"]
        )
        tol = {(t["key"], t["effect"]) for t in spec["tolerations"]}
        assert {
            ("node.kubernetes.io/not-ready", "NoExecute"),
            ("node.kubernetes.io/unreachable", "NoExecute"),
            (GPU, "NoSchedule"),
        } <= tol
        assert spec["schedulerName"] in ("runai-scheduler", "default-scheduler")
        assert spec["dnsPolicy"] == "ClusterFirst" and spec["serviceAccountName"] == "default"
        assert isinstance(spec["priority"], int)
        g = _gpu(c)
        if g:
            assert 1 <= g <= 8
            assert c["resources"]["limits"][GPU] == c["resources"]["requests"][GPU]
        assert status["qosClass"] in ("Guaranteed", "Burstable")
        if status["phase"] == "Pending":
            assert "nodeName" not in spec
            (cond,) = status["conditions"]
            assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False", "Unschedulable")
            continue
        assert spec["nodeName"].startswith("gpu-node-")
        types = [cd["type"] for cd in status["conditions"]]
        assert types == ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
        assert all(RFC3339.match(cd["lastTransitionTime"]) for cd in status["conditions"])
        assert status["podIP"] == status["podIPs"][0]["ip"] and status["hostIP"] == status["hostIPs"][0]["ip"]
        assert RFC3339.match(status["startTime"])
        (cs,) = status["containerStatuses"]
        assert cs["name"] == c["name"] and cs["image"] == c["image"]
        assert cs["containerID"].startswith("containerd://") and "@sha256:" in cs["imageID"]
        assert isinstance(cs["restartCount"], int) and isinstance(cs["started"], bool)
        if status["phase"] == "Running" and cs["ready"]:
            assert RFC3339.match(cs["state"]["running"]["startedAt"])


def test_phase_mix(objs: ScaleObjects) -> None:
    phases = Counter(p["status"]["phase"] for p in objs.pods)
    n = len(objs.pods)
    assert 0.03 * n <= phases["Pending"] <= 0.07 * n
    assert 0.01 * n <= phases["Succeeded"] + phases["Failed"] <= 0.03 * n
    assert phases["Succeeded"] and phases["Failed"]
    assert phases["Running"] >= 0.88 * n
    crash = [
        p
        for p in objs.pods
        if p["status"]["phase"] == "Running"
        and p["status"]["containerStatuses"][0]["state"].get("waiting", {}).get("reason") == "CrashLoopBackOff"
    ]
    assert 1 <= len(crash) <= 0.01 * n
    for p in crash:
        cs = p["status"]["containerStatuses"][0]
        assert cs["restartCount"] > 0 and not cs["ready"] and cs["lastState"]["terminated"]["exitCode"] != 0
        ready = next(c for c in p["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "False"


# -- conventions ---------------------------------------------------------------------------------


def test_namespaces_runai_style(objs: ScaleObjects) -> None:
    runai = [n for n in objs.namespaces if n["metadata"]["name"].startswith("runai-")]
    plain = [n for n in objs.namespaces if not n["metadata"]["name"].startswith("runai-")]
    assert len(runai) >= 40 and 1 <= len(plain) <= 10
    for n in runai:
        team = n["metadata"]["name"].removeprefix("runai-")
        assert n["metadata"]["labels"]["runai/queue"] == team
    for n in plain:
        assert "runai/queue" not in n["metadata"]["labels"]
    teams = {n["metadata"]["name"]: n["metadata"]["labels"].get("runai/queue") for n in objs.namespaces}
    for o in [*objs.pods, *objs.jobs]:
        if o["kind"] == "Job":
            continue
        team = teams[o["metadata"]["namespace"]]
        assert o["metadata"]["labels"].get("project") == team
        if o["kind"] == "Pod":
            expected = "runai-scheduler" if team else "default-scheduler"
            assert o["spec"]["schedulerName"] == expected


def test_pytorch_pods(objs: ScaleObjects) -> None:
    jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in objs.jobs if j["kind"] == "PyTorchJob"}
    seen = 0
    for p in objs.pods:
        owner = _owner(p)
        if owner["kind"] != "PyTorchJob":
            continue
        seen += 1
        labels = p["metadata"]["labels"]
        job = jobs[(p["metadata"]["namespace"], owner["name"])]
        assert owner["apiVersion"] == "kubeflow.org/v1" and owner["uid"] == job["metadata"]["uid"]
        assert owner["controller"] is True
        assert labels[KF + "operator-name"] == "pytorchjob-controller"
        assert labels[KF + "job-name"] == owner["name"]
        rtype, idx = labels[KF + "replica-type"], int(labels[KF + "replica-index"])
        assert rtype in ("master", "worker")
        assert p["metadata"]["name"] == f"{owner['name']}-{rtype}-{idx}"
        assert (labels.get(KF + "job-role") == "master") == (rtype == "master")
        env = _env(p)
        specs = job["spec"]["pytorchReplicaSpecs"]
        total = sum(r["replicas"] for r in specs.values())
        nproc = job["spec"]["nprocPerNode"]
        assert env["PYTHONUNBUFFERED"] == "1"
        assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == f"{owner['name']}-master-0"
        assert env["MASTER_PORT"] == env["PET_MASTER_PORT"] == "23456"
        assert env["WORLD_SIZE"] == str(total * (1 if nproc == "auto" else int(nproc)))
        rank = idx + 1 if rtype == "worker" else idx
        assert env["RANK"] == env["PET_NODE_RANK"] == str(rank)
        assert env["PET_NNODES"] == str(total) and env["PET_NPROC_PER_NODE"] == nproc
        c = p["spec"]["containers"][0]
        assert c["name"] == "pytorch"
        assert c["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
    assert seen > 10000


def test_tf_pods(objs: ScaleObjects) -> None:
    seen = 0
    for p in objs.pods:
        owner = _owner(p)
        if owner["kind"] != "TFJob":
            continue
        seen += 1
        labels = p["metadata"]["labels"]
        assert labels[KF + "operator-name"] == "tfjob-controller"
        rtype, idx = labels[KF + "replica-type"], int(labels[KF + "replica-index"])
        assert rtype in ("chief", "ps", "worker")
        assert (labels.get(KF + "job-role") == "master") == (rtype == "chief")
        assert p["metadata"]["name"] == f"{owner['name']}-{rtype}-{idx}"
        tf = json.loads(_env(p)["TF_CONFIG"])
        assert tf["task"] == {"type": rtype, "index": idx}
        assert tf["environment"] == "cloud"
        assert tf["cluster"]["chief"] == [f"{owner['name']}-chief-0.{p['metadata']['namespace']}.svc:2222"]
        assert f"{p['metadata']['name']}.{p['metadata']['namespace']}.svc:2222" in tf["cluster"][rtype]
    assert seen > 0


def test_mpi_pods(objs: ScaleObjects) -> None:
    launcher_jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in objs.jobs if j["kind"] == "Job"}
    mpijobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in objs.jobs if j["kind"] == "MPIJob"}
    launchers = workers = 0
    for p in objs.pods:
        labels = p["metadata"]["labels"]
        if labels.get(KF + "operator-name") != "mpi-operator":
            continue
        ns = p["metadata"]["namespace"]
        job = labels[KF + "job-name"]
        assert KF + "replica-type" not in labels
        owner = _owner(p)
        env = _env(p)
        if labels[KF + "job-role"] == "launcher":
            launchers += 1
            lj = launcher_jobs[(ns, f"{job}-launcher")]
            assert (owner["apiVersion"], owner["kind"], owner["name"]) == ("batch/v1", "Job", f"{job}-launcher")
            assert owner["uid"] == lj["metadata"]["uid"]
            assert re.fullmatch(rf"{re.escape(job)}-launcher-[a-z0-9]{{5}}", p["metadata"]["name"])
            assert KF + "replica-index" not in labels
            for key in ("batch.kubernetes.io/job-name", "job-name"):
                assert labels[key] == f"{job}-launcher"
            for key in ("batch.kubernetes.io/controller-uid", "controller-uid"):
                assert labels[key] == lj["metadata"]["uid"]
            assert env["K_MPI_JOB_ROLE"] == "launcher"
            assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
            assert env["NVIDIA_VISIBLE_DEVICES"] == ""
            assert _gpu(p["spec"]["containers"][0]) == 0
            assert p["spec"]["hostname"] == f"{job}-launcher" and p["spec"]["subdomain"] == job
            # the launcher Job belongs to the MPIJob
            assert _owner(lj)["uid"] == mpijobs[(ns, job)]["metadata"]["uid"]
        else:
            workers += 1
            assert labels[KF + "job-role"] == "worker"
            idx = int(labels[KF + "replica-index"])
            assert p["metadata"]["name"] == f"{job}-worker-{idx}"
            assert (owner["apiVersion"], owner["kind"], owner["name"]) == ("kubeflow.org/v2beta1", "MPIJob", job)
            assert owner["uid"] == mpijobs[(ns, job)]["metadata"]["uid"]
            assert env["K_MPI_JOB_ROLE"] == "worker"
            assert p["spec"]["hostname"] == p["metadata"]["name"] and p["spec"]["subdomain"] == job
    assert launchers == len(mpijobs) == len(launcher_jobs)
    assert workers > launchers


def test_pod_owners_exist(objs: ScaleObjects) -> None:
    uids = {j["metadata"]["uid"] for j in objs.jobs}
    assert all(_owner(p)["uid"] in uids for p in objs.pods)
    assert all(_owner(p)["controller"] is True for p in objs.pods)


# -- GPUs, nodes, quotas ---------------------------------------------------------------------------


def test_nodes(objs: ScaleObjects) -> None:
    names = [n["metadata"]["name"] for n in objs.nodes]
    assert names[0] == "gpu-node-0001" and names[-1] == "gpu-node-1000"
    products = Counter()
    for n in objs.nodes:
        labels = n["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == n["metadata"]["name"]
        assert labels["run.ai/node-pool"] == labels["node-pool"]
        products[labels["nvidia.com/gpu.product"]] += 1
        assert labels["nvidia.com/gpu.count"] == "8"
        st = n["status"]
        for key in ("cpu", "memory", GPU, "pods"):
            assert key in st["capacity"] and key in st["allocatable"]
        assert st["allocatable"][GPU] == "8"
        ready = next(c for c in st["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"
        (ip,) = [a["address"] for a in st["addresses"] if a["type"] == "InternalIP"]
        assert ip.startswith("10.")
        assert st["nodeInfo"]["kubeletVersion"] == "v1.35.0"
        assert st["nodeInfo"]["osImage"] and st["nodeInfo"]["kernelVersion"]
        assert st["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert set(products) == {"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"}


def test_gpu_requests_fit_nodes(objs: ScaleObjects) -> None:
    alloc = {n["metadata"]["name"]: int(n["status"]["allocatable"][GPU]) for n in objs.nodes}
    pod_cap = {n["metadata"]["name"]: int(n["status"]["allocatable"]["pods"]) for n in objs.nodes}
    used: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    gpu_pods = 0
    for p in objs.pods:
        if p["status"]["phase"] != "Running":
            continue
        node = p["spec"]["nodeName"]
        assert node in alloc
        g = _gpu(p["spec"]["containers"][0])
        gpu_pods += bool(g)
        used[node] += g
        count[node] += 1
    assert all(used[n] <= alloc[n] for n in used), max(used.items(), key=lambda kv: kv[1] - alloc[kv[0]])
    assert all(count[n] <= pod_cap[n] for n in count)
    assert len(count) >= 0.9 * len(alloc)  # spread over the nodes
    assert sum(used.values()) >= 0.5 * sum(alloc.values())  # and the GPUs are well used
    assert gpu_pods > 1000


def test_pod_ips_unique_on_running_pods(objs: ScaleObjects) -> None:
    ips = [p["status"]["podIP"] for p in objs.pods if p["status"]["phase"] == "Running"]
    assert len(ips) == len(set(ips))


def test_quotas(objs: ScaleObjects) -> None:
    used: dict[str, int] = defaultdict(int)
    for p in objs.pods:
        if p["status"]["phase"] in ("Running", "Pending"):
            used[p["metadata"]["namespace"]] += _gpu(p["spec"]["containers"][0])
    assert {q["metadata"]["namespace"] for q in objs.quotas} == {n["metadata"]["name"] for n in objs.namespaces}
    for q in objs.quotas:
        ns = q["metadata"]["namespace"]
        hard = int(q["spec"]["hard"]["requests.nvidia.com/gpu"])
        assert q["status"]["hard"]["requests.nvidia.com/gpu"] == str(hard)
        assert int(q["status"]["used"]["requests.nvidia.com/gpu"]) == used[ns] <= hard


def test_gpu_fraction_is_rare(objs: ScaleObjects) -> None:
    frac = [p for p in objs.pods if "gpu-fraction" in p["metadata"]["annotations"]]
    assert 0 < len(frac) < 0.05 * len(objs.pods)
    for p in frac:
        assert p["metadata"]["namespace"].startswith("runai-")
        assert _gpu(p["spec"]["containers"][0]) == 0
        assert 0 < float(p["metadata"]["annotations"]["gpu-fraction"]) < 1


# -- job status ----------------------------------------------------------------------------------


def test_job_status(objs: ScaleObjects) -> None:
    active: dict[tuple[str, str, str], int] = defaultdict(int)
    for p in objs.pods:
        labels = p["metadata"]["labels"]
        if p["status"]["phase"] == "Running" and _owner(p)["kind"] != "Job":
            rtype = labels.get(KF + "replica-type") or "worker"
            active[(p["metadata"]["namespace"], labels[KF + "job-name"], rtype)] += 1
    running = 0
    for j in objs.jobs:
        st = j["status"]
        if j["kind"] == "Job":
            assert RFC3339.match(st["startTime"]) and st["active"] in (0, 1)
            continue
        kind = j["kind"]
        conds = st["conditions"]
        assert conds[0]["type"] == "Created" and conds[0]["reason"] == f"{kind}Created"
        assert RFC3339.match(st["startTime"])
        last_true = [c for c in conds if c["status"] == "True"][-1]
        for c in conds:
            assert RFC3339.match(c["lastTransitionTime"]) and RFC3339.match(c["lastUpdateTime"])
        if last_true["type"] == "Running":
            running += 1
            assert last_true["reason"] == f"{kind}Running"
        elif last_true["type"] in ("Succeeded", "Failed"):
            assert RFC3339.match(st["completionTime"])
        rmap = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}[kind]
        assert set(st["replicaStatuses"]) == set(j["spec"][rmap])
        if kind != "MPIJob":
            for rt, rs in st["replicaStatuses"].items():
                assert rs.get("active", 0) == active[(j["metadata"]["namespace"], j["metadata"]["name"], rt.lower())]
    assert running > 0.8 * sum(1 for j in objs.jobs if j["kind"] != "Job")


# -- determinism, churn -------------------------------------------------------------------------


def test_deterministic_for_seed_and_now() -> None:
    a = build_scale(100, 2000, seed=42, now=NOW)
    b = build_scale(100, 2000, seed=42, now=NOW)
    c = build_scale(100, 2000, seed=43, now=NOW)
    assert orjson.dumps(list(a.all())) == orjson.dumps(list(b.all()))
    assert orjson.dumps(a.pods) != orjson.dumps(c.pods)
    later = build_scale(100, 2000, seed=42, now=NOW + timedelta(hours=1))
    assert orjson.dumps(a.pods) != orjson.dumps(later.pods)


def test_naive_now_is_utc() -> None:
    a = build_scale(5, 40, namespaces=2, seed=1, now=NOW)
    b = build_scale(5, 40, namespaces=2, seed=1, now=NOW.replace(tzinfo=None))
    assert orjson.dumps(list(a.all())) == orjson.dumps(list(b.all()))


def test_churn_pod_flips_and_does_not_mutate(objs: ScaleObjects) -> None:
    pod = _running_ready(objs)
    before = orjson.dumps(pod)
    rng = random.Random(5)
    t1 = NOW + timedelta(minutes=3)
    crashed = churn_pod(pod, rng, t1)
    assert orjson.dumps(pod) == before
    assert crashed != pod
    cs0, cs1 = pod["status"]["containerStatuses"][0], crashed["status"]["containerStatuses"][0]
    assert cs1["restartCount"] == cs0["restartCount"] + 1
    assert cs1["ready"] is False and cs1["started"] is False
    term = cs1["lastState"]["terminated"]
    assert term["finishedAt"] == "2026-03-01T12:03:00Z" and term["startedAt"] == cs0["state"]["running"]["startedAt"]
    assert term["exitCode"] != 0 and term["containerID"] == cs0["containerID"]
    assert cs1["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    conds = {c["type"]: c for c in crashed["status"]["conditions"]}
    for t in ("Ready", "ContainersReady"):
        assert conds[t]["status"] == "False" and conds[t]["lastTransitionTime"] == "2026-03-01T12:03:00Z"
    assert crashed["status"]["phase"] == "Running"
    kubelet = [e for e in crashed["metadata"]["managedFields"] if e["manager"] == "kubelet"]
    assert kubelet and kubelet[0]["time"] == "2026-03-01T12:03:00Z"

    # deep copy: changing the result leaves the input alone
    crashed["metadata"]["labels"]["x"] = "y"
    crashed["spec"]["containers"][0]["env"].clear()
    crashed["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"].clear()
    assert orjson.dumps(pod) == before

    t2 = NOW + timedelta(minutes=5)
    recovered = churn_pod(crashed, rng, t2)
    cs2 = recovered["status"]["containerStatuses"][0]
    assert cs2["ready"] is True and cs2["started"] is True
    assert cs2["state"] == {"running": {"startedAt": "2026-03-01T12:05:00Z"}}
    assert cs2["restartCount"] == cs1["restartCount"]
    assert cs2["containerID"] != cs1["containerID"]
    conds = {c["type"]: c for c in recovered["status"]["conditions"]}
    assert conds["Ready"]["status"] == "True" and "reason" not in conds["Ready"]
    assert crashed["status"]["containerStatuses"][0]["ready"] is False


def test_churn_other_phases(objs: ScaleObjects) -> None:
    rng = random.Random(1)
    for phase in ("Pending", "Succeeded", "Failed"):
        pod = next(p for p in objs.pods if p["status"]["phase"] == phase)
        before = orjson.dumps(pod)
        new = churn_pod(pod, rng, NOW + timedelta(minutes=1))
        assert orjson.dumps(pod) == before
        assert new != pod
        assert new["status"]["phase"] == phase
    crash = next(
        p
        for p in objs.pods
        if p["status"]["phase"] == "Running" and not p["status"]["containerStatuses"][0]["ready"]
    )
    back = churn_pod(crash, rng, NOW + timedelta(minutes=1))
    assert back["status"]["containerStatuses"][0]["ready"] is True


def test_churn_is_deterministic(objs: ScaleObjects) -> None:
    pod = _running_ready(objs)
    a = churn_pod(pod, random.Random(9), NOW)
    b = churn_pod(pod, random.Random(9), NOW)
    assert orjson.dumps(a) == orjson.dumps(b)
