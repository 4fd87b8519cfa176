"""`ranks get W -p P` reads the one workload it names, not its namespace (#31, item 4): the
workload kinds by name (field selector), its pods by their operators' labels, its events and its
pods' events by their object's name; no LIST of every pod (or every event) of the project. What it
builds is what the whole namespace's read builds, for every kind of workload and every answer that
is not one (not found, a child Job, a name two kinds share, a project that does not exist), against
simcluster: the real `ranks` for the requests it sends, the loading functions for the comparison."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from monitors.connection import load_cluster_config
from monitors.names import LookupProblem
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.snapshots.test_views import event, kf_job, kf_pod, load, objects, ts, uid
from tui.cli.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
A, B, R = "runai-team-a", "runai-team-b", "research"
TRAIN = ["python", "train.py"]


def ranks(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_")) and k != "COLUMNS"}
    env.update(RANKS_CONFIG="", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)


def batch_job(name: str, ns: str, owner: dict[str, Any] | None = None, labels: dict[str, str] | None = None
              ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid(f"{ns}/{name}"), "creationTimestamp": ts(3600),
                            "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                    "controller": True}]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"completions": 1, "parallelism": 1, "template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": TRAIN}]}}},
            "status": {"active": 1, "startTime": ts(3600)}}


def job_pod(job: dict[str, Any], name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A running pod of a batch Job, labelled as the Job controller labels it."""
    jname, ns = job["metadata"]["name"], job["metadata"]["namespace"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": uid(f"{ns}/pod/{name}"), "creationTimestamp": ts(3600),
                         "labels": {"job-name": jname, "batch.kubernetes.io/job-name": jname,
                                    "controller-uid": job["metadata"]["uid"], **(labels or {})},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": jname,
                                              "uid": job["metadata"]["uid"], "controller": True}]},
            "spec": {"nodeName": "h100-node-04", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox", "command": TRAIN}]},
            "status": {"phase": "Running", "startTime": ts(3600), "containerStatuses": [
                {"name": "main", "image": "busybox", "ready": True, "restartCount": 0, "started": True,
                 "state": {"running": {"startedAt": ts(3590)}}}]}}


def more_objects() -> list[dict[str, Any]]:
    """Beside the snapshots' workloads: many others in team-a, a batch Job, a Job a CronJob made,
    a JobSet with its child Job, the MPIJob's launcher Job, two kinds sharing a name, and the
    events of a pod its operator deleted."""
    out: list[dict[str, Any]] = []
    for i in range(12):
        job = kf_job("PyTorchJob", f"filler-{i:02d}", A, {"Master": (1, 0, TRAIN), "Worker": (2, 0, TRAIN)},
                     user="dave", created=7200, conditions=[("Created", 7200, "created"), ("Running", 7100, "running")])
        out.append(job)
        out += [kf_pod(job, "Master", 0, node="h100-node-02", gpus=0, command=TRAIN)]
        out += [kf_pod(job, "Worker", w, node="h100-node-02", gpus=0, command=TRAIN) for w in range(2)]
        out.append(event(A, "Pod", f"filler-{i:02d}-worker-0", "Started", "Started container pytorch", 7000))
    prep = batch_job("prep-data", R)
    out += [prep, job_pod(prep, "prep-data-x2x9q")]
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "etl-nightly", "uid": uid(f"{R}/cron")}}
    nightly = batch_job("etl-nightly-29000", R, owner=cron)
    out += [nightly, job_pod(nightly, "etl-nightly-29000-abcde")]
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "js-train", "namespace": R, "uid": uid(f"{R}/js-train"), "creationTimestamp": ts(3600)},
              "spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
                  "parallelism": 2, "completions": 2, "completionMode": "Indexed", "template": {"spec": {
                      "restartPolicy": "Never", "containers": [{"name": "node", "image": "busybox",
                                                                 "command": TRAIN}]}}}}}]},
              "status": {}}
    child = batch_job("js-train-node-0", R, owner=jobset, labels={"jobset.sigs.k8s.io/jobset-name": "js-train"})
    out += [jobset, child]
    for i in range(2):
        out.append(job_pod(child, f"js-train-node-0-{i}-zz{i}", labels={
            "jobset.sigs.k8s.io/jobset-name": "js-train", "jobset.sigs.k8s.io/replicatedjob-name": "node",
            "jobset.sigs.k8s.io/job-index": "0", "batch.kubernetes.io/job-completion-index": str(i)}))
    hvd = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
           "metadata": {"name": "hvd-interactive", "uid": uid(f"{A}/hvd-interactive")}}
    out.append(batch_job("hvd-interactive-launcher", A, owner=hvd))
    for kind in ("PyTorchJob", "TFJob"):
        out.append(kf_job(kind, "twin", B, {"Worker": (1, 0, TRAIN)}, user="bob", created=600, conditions=[]))
        out[-1]["metadata"]["uid"] = uid(f"{B}/twin/{kind}")
    for ns in (A, R):  # one name in two projects
        out.append(kf_job("PyTorchJob", "shared-name", ns, {"Worker": (1, 0, TRAIN)}, user="erin", created=600,
                          conditions=[]))
    out.append(event(B, "PyTorchJob", "bert-crash", "SuccessfulDeletePod", "Deleted pod: bert-crash-worker-7", 11 * 60,
                     api_version="kubeflow.org/v1"))
    out.append(event(B, "Pod", "bert-crash-worker-7", "Killing", "Stopping container pytorch", 11 * 60))
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(components=(), workdir=tmp_path_factory.mktemp("sim")) as t:
        t.call(load, t.sim, [*objects(), *more_objects()])
        yield t


def test_get_reads_the_workload_alone_not_its_project(cluster: ThreadedSimCluster) -> None:
    sim = cluster.sim
    kc = sim.kubeconfig_path
    t0 = time.time()
    r = ranks("get", "llama-finetune", "-p", "team-a", "-o", "json", kubeconfig=kc)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [x["pod"] for x in doc["ranks"]] == ["llama-finetune-master-0", *(f"llama-finetune-worker-{i}"
                                                                             for i in range(3))]
    pods = [q for q in sim.requests.since(t0) if q.resource == "pods" and q.verb == "list"]
    assert pods, "the workload's pods were not listed"
    assert all(q.label_selector for q in pods), [(q.path, q.query) for q in pods]  # none of every pod
    assert {q.label_selector for q in pods} >= {"training.kubeflow.org/job-name=llama-finetune"}
    events = [q for q in sim.requests.since(t0) if q.resource == "events" and q.verb == "list"]
    assert events and all(q.field_selector.startswith("involvedObject.name=") for q in events), \
        [(q.path, q.query) for q in events]
    kinds = [q for q in sim.requests.since(t0) if q.verb == "list" and q.path.startswith("/apis/")
             and q.resource not in ("subjectaccessreviews", "selfsubjectaccessreviews")]
    assert kinds and all(q.field_selector == "metadata.name=llama-finetune" for q in kinds), \
        [(q.path, q.query) for q in kinds]
    assert not [q for q in sim.requests.since(t0) if q.watch]

    # the failed job's events, its pods' and those of the pod its operator deleted, as before
    t1 = time.time()
    r = ranks("get", "bert-crash", "-p", "team-b", kubeconfig=kc)
    assert r.returncode == 0, r.stderr
    assert "PyTorchJobFailed" in r.stdout and "BackOff" in r.stdout and "Stopping container pytorch" in r.stdout
    assert "Started container pytorch" in r.stdout  # (a rank's event, not the filler's: team-b has none)
    assert all(q.label_selector for q in sim.requests.since(t1) if q.resource == "pods" and q.verb == "list")


def test_answers_that_are_no_workload_keep_their_words_and_codes(cluster: ThreadedSimCluster) -> None:
    kc = cluster.sim.kubeconfig_path
    r = ranks("get", "nope", "-p", "team-a", kubeconfig=kc)
    assert (r.returncode, r.stderr.strip()) == (8, 'ranks: error: workload "nope" not found'), r.stderr
    r = ranks("get", "twin", "-p", "team-b", kubeconfig=kc)
    # (the kinds in the order their LISTs were answered, as before)
    assert r.returncode == 2 and any(f"names several workloads ({kinds}); use KIND/NAME" in r.stderr
                                     for kinds in ("pytorchjob/twin, tfjob/twin", "tfjob/twin, pytorchjob/twin")), r.stderr
    r = ranks("get", "tfjob/twin", "-p", "team-b", "-o", "json", kubeconfig=kc)
    assert r.returncode == 0 and json.loads(r.stdout)["workload"]["kind"] == "TFJob", r.stderr
    r = ranks("get", "shared-name", kubeconfig=kc)  # (not in the context's namespace: looked for everywhere)
    assert (r.returncode, r.stderr.strip()) == (2, 'ranks: error: workload "shared-name" exists in several projects '
                                                   f'({R}, {A}); choose one with -p PROJECT'), r.stderr
    r = ranks("get", "shared-name", "-p", "research", "-o", "json", kubeconfig=kc)
    assert r.returncode == 0 and json.loads(r.stdout)["workload"]["namespace"] == R, r.stderr
    r = ranks("get", "llama-finetune", "-p", "no-such-team", kubeconfig=kc)
    assert r.returncode == 8 and 'project "no-such-team" not found' in r.stderr, r.stderr


# every workload of the cluster and a few names that are none: the narrow read and the namespace's
# read build the same workload (or say the same thing), and the narrow one is used where it can be
CASES = [("team-a", "llama-finetune", True), ("team-a", "hvd-interactive", True), ("team-b", "bert-crash", True),
         ("team-a", "big-pretrain", True), ("research", "mnist-quick", True), ("team-b", "resnet-tf", True),
         ("research", "xgb-churn", True), ("team-a", "filler-07", True), ("research", "prep-data", True),
         ("research", "js-train", True), ("team-b", "tfjob/twin", True), ("team-b", "pytorchjob/twin", True),
         ("research", "etl-nightly-29000", False), ("team-a", "hvd-interactive-launcher", False),
         ("team-b", "twin", False), ("team-a", "nope", False), ("research", "job/js-train", False),
         ("research", "shared-name", True), (None, "shared-name", False), (None, "llama-finetune", False)]


@pytest.mark.parametrize(("project", "ref", "narrow"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_the_narrow_read_builds_what_the_namespace_s_read_builds(cluster: ThreadedSimCluster, project: str | None,
                                                                 ref: str, narrow: bool) -> None:
    from tui.cli.loading import locate

    cfg = load_cluster_config(str(cluster.sim.kubeconfig_path))

    async def read(alone: bool) -> Any:
        try:
            monitor, wl = await locate(copy.copy(cfg), {}, ref, project, events=True, alone=alone)
        except (UserError, LookupProblem) as exc:
            # (the kinds a name several have are said in the order their LISTs were answered)
            return ("error", sorted(exc.message.replace(",", " ").split()), exc.code)
        try:
            events = sorted((e.name, e.reason, e.message) for e in monitor.model.events_for(wl, 10_000))
            return wl, events, not monitor.informers
        finally:
            await monitor.stop()

    whole, alone = asyncio.run(read(False)), asyncio.run(read(True))
    if whole[0] == "error":
        assert alone == whole
        assert not narrow
        return
    assert alone[0] == whole[0]
    assert alone[1] == whole[1]
    assert alone[2] is narrow and whole[2] is False


def test_get_imports_neither_the_shell_nor_the_log_engine_nor_the_gpu_fleet(cluster: ThreadedSimCluster,
                                                                            tmp_path: Path) -> None:
    """What `get` does not use is not imported on its path: the shell (for the line a hint offers
    to paste), the engine that follows logs (the tails are read once), every GPU's fleet reading."""
    from tests.unit.test_lazy_imports import PROBE, loaded

    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), NO_COLOR="1")
    proc = subprocess.run([sys.executable, "-c", PROBE, "get", "llama-finetune", "-p", "team-a", "--kubeconfig",
                           str(cluster.sim.kubeconfig_path)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert "--modules--" in proc.stdout, proc.stderr
    found = json.loads(proc.stdout.rsplit("--modules--", 1)[1])
    assert found["code"] == 0 and "llama-finetune-worker-2" in proc.stdout, proc.stderr
    modules = set(found["modules"])
    assert "monitors.one_workload" in modules and "monitors.logs.tails" in modules
    assert loaded(modules, ("sessions.shell", "sessions.exec_bridge", "monitors.logs.engine", "monitors.logs.stream",
                            "monitors.logs.buffer", "monitors.gpu_fleet_source", "monitors.diagnostics.gpu_doctor",
                            "textual", "kubernetes")) == []


def test_a_refused_narrow_read_falls_back_to_the_project_s_read(cluster: ThreadedSimCluster) -> None:
    """One of the narrow reads refused (403 on a label-selected pods LIST): the project is listed as
    before, and the answer is the one the narrow read gives when nothing is refused."""
    sim = cluster.sim
    kc = sim.kubeconfig_path

    def shown(r: subprocess.CompletedProcess[str]) -> tuple[Any, ...]:
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        return (doc["workload"]["status"], [(x["pod"], x["phase"], x["reason"]) for x in doc["ranks"]],
                [(e["reason"], e["message"]) for e in doc["events"]], doc["first_failure"], doc["what_happened"])

    narrow = shown(ranks("get", "bert-crash", "-p", "team-b", "-o", "json", kubeconfig=kc))
    t0 = time.time()
    cluster.call(sim.faults.fail_next, rf"^/api/v1/namespaces/{B}/pods$", 403, 1)
    assert shown(ranks("get", "bert-crash", "-p", "team-b", "-o", "json", kubeconfig=kc)) == narrow
    refused = [q for q in sim.requests.since(t0) if q.status == 403]  # (an injected answer has no verb)
    assert len(refused) == 1 and refused[0].label_selector, [(q.path, q.query) for q in refused]
    pods = [q for q in sim.requests.since(t0) if q.resource == "pods" and q.verb == "list"]
    assert [q for q in pods if not q.label_selector and q.status == 200], "the project's pods were not listed"


GC_PROBE = """
import gc, json, sys
passes = []
gc.callbacks.append(lambda phase, info: phase == "stop" and passes.append(info["generation"]))
from tui.cli.group import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("\\n--gc--", json.dumps({"code": code, "passes": passes, "enabled": gc.isenabled()}))
"""


def test_get_runs_without_the_cyclic_gc(cluster: ThreadedSimCluster, tmp_path: Path) -> None:
    """What `get` builds lives until it exits: no pass of the cyclic GC over its imports once the
    command runs (there were ~150, a full one among them); the collector is on again afterwards
    (a command run in another's process, as the tests' in-process CLI does, leaves it as it was)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), NO_COLOR="1")
    proc = subprocess.run([sys.executable, "-c", GC_PROBE, "get", "llama-finetune", "-p", "team-a", "--kubeconfig",
                           str(cluster.sim.kubeconfig_path)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert "--gc--" in proc.stdout, proc.stderr
    found = json.loads(proc.stdout.rsplit("--gc--", 1)[1])
    assert found["code"] == 0 and found["enabled"], found
    assert 2 not in found["passes"] and len(found["passes"]) < 60, found  # (those before the command ran)


def test_logs_reads_its_workload_alone_too(cluster: ThreadedSimCluster) -> None:
    """`ranks logs W -p P` finds its workload by the same narrow read (its first failure from it)."""
    sim = cluster.sim
    t0 = time.time()
    r = ranks("logs", "bert-crash", "-p", "team-b", "--first-failure", kubeconfig=sim.kubeconfig_path)
    assert r.returncode == 0, r.stderr
    assert "First failure: worker-1" in r.stdout and "illegal memory access" in r.stdout, r.stdout
    pods = [q for q in sim.requests.since(t0) if q.resource == "pods" and q.verb == "list"]
    assert pods and all(q.label_selector for q in pods), [(q.path, q.query) for q in pods]
