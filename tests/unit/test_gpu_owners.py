"""`ranks gpus` names each GPU's owner without the dashboard's model (`gpu_owners`): the same owner,
field for field, as the model's views give (`gpu_fleet.owners_of`), and the same GPUs held per node,
on the scale scenario's workloads (PyTorchJob, TFJob, MPIJob and its launcher Jobs) listed as the
Table rows `ranks list` reads, with a Deployment's pod and a bare pod read whole."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from monitors.gpu_fleet import owners_of
from monitors.gpu_owners import GpuOwners
from monitors.model import LiveModel
from monitors.parse import parse_job, parse_namespace, parse_node, parse_pod
from monitors.records import PodRec
from simcluster.scenarios.scale import build_scale


def _job(obj: dict[str, Any]) -> Any:
    group, _, version = obj["apiVersion"].rpartition("/")
    return parse_job(obj["kind"], group, version)(obj)


def _row(rec: PodRec) -> PodRec:
    """A pod as a Table row's record is: its name, node and status; no labels, owner or GPUs."""
    return replace(rec, uid="", labels=(), owner=None, gpus=0.0, created=None, annotations=(), command=(),
                   containers=(), exits=(), partial=True)


def _extra(ns: str, node: str) -> list[PodRec]:
    """A Deployment's GPU pod (a ReplicaSet owns it) and a bare GPU pod, as read whole."""
    def pod(name: str, owner: dict[str, Any] | None, labels: dict[str, str]) -> PodRec:
        meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels,
                                "creationTimestamp": "2026-11-28T08:00:00Z"}
        if owner:
            meta["ownerReferences"] = [owner]
        return parse_pod({"metadata": meta, "spec": {"nodeName": node, "containers": [
            {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
            "status": {"phase": "Running"}})

    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "infer-7d9f", "uid": "rs-uid", "controller": True}
    return [pod("infer-7d9f-abcde", rs, {"user": "carol"}), pod("notebook", None, {})]


def _cluster() -> tuple[Any, list[Any], list[PodRec], list[PodRec], list[Any]]:
    objs = build_scale(nodes=60, pods=600, gpus_per_node=8)
    namespaces = [parse_namespace(n) for n in objs.namespaces]
    jobs = [_job(j) for j in objs.jobs]
    rows = [_row(parse_pod(p)) for p in objs.pods]
    node = next(r.node for r in rows if r.node)
    extra = _extra(rows[0].namespace, node)
    rows += [_row(p) for p in extra]
    return namespaces, jobs, rows, extra, [parse_node(n) for n in objs.nodes]


def test_the_owners_are_the_models() -> None:
    namespaces, jobs, rows, extra, nodes = _cluster()
    assert {j.kind for j in jobs} >= {"PyTorchJob", "TFJob", "MPIJob", "Job"}
    user = next(j for j in jobs if j.kind == "PyTorchJob")
    jobs = [replace(j, labels=(*j.labels, "ranks/user", "dana")) if j is user else j for j in jobs]

    model = LiveModel()
    model.one_shot = True
    model.apply_namespaces([(n.name, n) for n in namespaces])
    model.apply_nodes([(n.name, n) for n in nodes])
    model.apply_jobs([(j.key, j) for j in jobs])
    model.apply_pods([(r.key, r) for r in rows])
    model.apply_pods([(p.key, p) for p in extra])  # (the rows no workload claims, read whole)
    model.flush()
    expected = owners_of(model.workloads.values())

    listed = LiveModel()  # (the workload objects and namespaces alone, as `ranks gpus` lists them)
    listed.one_shot = True
    listed.apply_namespaces([(n.name, n) for n in namespaces])
    listed.apply_jobs([(j.key, j) for j in jobs])
    owners = GpuOwners()
    add = owners.sink(listed)
    add([(r.key, r) for r in rows])
    add([(p.key, p) for p in extra])
    got = owners.owners()

    assert got == expected
    assert len(got) > 500 and any(o.kind == "MPIJob" and o.label == "launcher" for o in got.values())
    assert {o.user for o in got.values() if o.name == user.name} == {"dana"}
    deployment = got[(extra[0].namespace, "infer-7d9f-abcde")]
    assert (deployment.workload, deployment.user, deployment.created) == ("ReplicaSet/infer-7d9f", "carol",
                                                                           extra[0].created)
    assert (extra[1].namespace, "notebook") not in got  # (no workload: its GPUs' owner is the pod alone)
    held = {n: round(v, 6) for n, v in owners.held().items() if v}
    assert held == {n.name: n.gpus_allocated for n in model.nodes.values() if n.gpus_allocated}
    assert sum(held.values()) > 0


def test_a_monitor_made_again_starts_it_afresh() -> None:
    _, jobs, rows, _, _ = _cluster()
    listed = LiveModel()
    listed.apply_jobs([(j.key, j) for j in jobs])
    owners = GpuOwners()
    owners.sink(LiveModel())([(r.key, r) for r in rows])  # (a first monitor's: no workload there)
    assert not owners.owners()
    owners.sink(listed)([(r.key, r) for r in rows[:10]])
    assert len(owners.pods) == 10 and owners.owners()
