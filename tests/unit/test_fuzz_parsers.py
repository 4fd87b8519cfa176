"""Bad objects never crash (issue 17, item 6): the record parsers fuzzed with hypothesis.

Realistic pods, workloads, events, nodes, namespaces, quotas and pods Tables (as the API server sends
them) have their fields deleted or replaced by values of the wrong type, out of range or huge. Each
parser must either return a well-typed record (every field of the type `monitors.records` declares,
numbers finite and counts non-negative) or raise `monitors.parse.BadObject`, only for an object it
cannot name (what the informer's `except Exception` drops: one bad object, never the stream);
`pods_from_table`, which the rows informer calls unguarded, must never raise. The records then go through a `LiveModel` and its
`flush()`, which must not raise and whose views' text fields must be strings.

Derandomised (a fixed seed, no example database) so CI is reproducible; the whole file runs in about
12 s on 2 cores.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitors import model_views, records
from monitors.model import LiveModel
from monitors.parse import (
    BadObject,
    parse_event,
    parse_job,
    parse_namespace,
    parse_node,
    parse_pod,
    parse_quota,
)
from monitors.pod_rows import pods_from_table
from monitors.records import EventRec, JobRec, NamespaceRec, NodeRec, PodRec, QuotaRec
from tests.kubeflow_objects import TK, job, pod

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FUZZ_MODEL = settings(FUZZ, max_examples=100)

# -- values of the wrong type, out of range, huge --------------------------------------------------

BIG = "x" * 20_000
NASTY: list[Any] = [
    None, True, False, 0, -1, 1, 7, 2**63 - 1, -(2**63), 1e30, -1e30, 1.5, 1e308, float("inf"), float("-inf"),
    float("nan"), "", "abc", "-1", "1e30", "1e400", "nan", "inf", "²", "٣", "9" * 5000, "0/1", "1/x",
    "<none>", "2026-13-45T99:99:99Z", "0001-01-01T00:00:00-23:59", "9999-12-31T23:59:59+14:00",
    "\x1b]0;title\x07", "a\nb", "\u202e", BIG, [], [1, "a"], [[]], [None], {}, {"a": 1}, {"value": [1]},
    {"nvidia.com/gpu": "abc"}, {"waiting": None}, {"terminated": "x"},
    "mnist-worker-²", "mnist-worker-" + "9" * 5000, "mnist-launcher-x-y", "mnist-0-abc",
]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
wrong = st.one_of(st.sampled_from(NASTY).map(copy.deepcopy), json_values)  # a copy: mutations nest in it

# -- realistic documents to start from ---------------------------------------------------------

T0 = "2026-11-01T00:00:00Z"


def rich_pod() -> dict[str, Any]:
    """A pod with every field the parser reads."""
    p = pod("PyTorchJob", "mnist", "team", "Worker", 0, restarts=2, terminated=(1, "Error"),
            owner={"kind": "PyTorchJob", "name": "mnist", "uid": "u-mnist", "controller": True})
    p["metadata"].update({
        "uid": "p-1", "creationTimestamp": T0, "deletionTimestamp": T0,
        "annotations": {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2", "ranks/user": "ann",
                        "other": "dropped"},
    })
    p["spec"].update({"nodeSelector": {"pool": "a100"},
                      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]})
    c = p["spec"]["containers"][0]
    c["args"] = ["--epochs", 3]
    c["resources"]["requests"] = {"nvidia.com/gpu": "1"}
    p["spec"]["containers"].append({"name": "sidecar", "resources": {"limits": {"nvidia.com/gpu": 1}}})
    st0 = p["status"]
    st0.update({"startTime": T0, "reason": "", "message": "", "podIP": "10.0.0.1"})
    st0["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                              "message": "0/3 nodes"})
    st0["initContainerStatuses"] = [{"name": "init", "state": {"waiting": {"reason": "ErrImagePull",
                                                                           "message": "no"}}}]
    st0["containerStatuses"][0]["lastState"] = {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                                               "finishedAt": T0, "message": "oom"}}
    st0["containerStatuses"].append({"name": "sidecar", "ready": True, "restartCount": 0,
                                     "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                                     "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}})
    return p


def pending_pod() -> dict[str, Any]:
    p = pod("MPIJob", "hvd", "team", "Launcher", None, name="hvd-launcher-x7k2p", phase="Pending",
            unschedulable="0/2 nodes are available")
    p["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "hvd-launcher", "uid": "u-launcher"}]
    return p


POD_BASES: list[Callable[[], dict[str, Any]]] = [
    rich_pod, pending_pod,
    lambda: pod("TFJob", "tf", "team", "Chief", 0, waiting="ContainerCreating"),
    lambda: pod("XGBoostJob", "xg", "runai-b", "Master", 0, phase="Succeeded", terminated=(0, "Completed")),
]


def kubeflow_job(kind: str) -> dict[str, Any]:
    replicas = {"Launcher": 1, "Worker": 2} if kind == "MPIJob" else {"Master": 1, "Worker": 3}
    j = job(kind, "mnist" if kind != "MPIJob" else "hvd", "team", replicas, uid=f"u-{kind}",
            conditions=[("Created", ""), ("Running", "")], labels={"ranks/user": "me"})
    j["metadata"].update({"creationTimestamp": T0, "annotations": {"a": "b"},
                          "ownerReferences": [{"kind": "Owner", "name": "o", "uid": "u-o"}]})
    j["spec"]["runPolicy"] = {"suspend": False, "schedulingPolicy": {"minAvailable": 3}}
    j["spec"]["slotsPerWorker"] = 2
    j["status"].update({"startTime": T0, "completionTime": T0})
    return j


def trainjob() -> dict[str, Any]:
    return {"kind": "TrainJob", "metadata": {"name": "tj", "namespace": "team", "uid": "u-tj"},
            "spec": {"suspend": False, "runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": 2, "command": ["torchrun"], "args": ["x.py"],
                                 "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}},
            "status": {"conditions": [{"type": "Complete", "status": "True", "lastUpdateTime": T0}]}}


def jobset() -> dict[str, Any]:
    tmpl = {"spec": {"containers": [{"name": "m", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}
    return {"kind": "JobSet", "metadata": {"name": "js", "namespace": "team", "uid": "u-js"},
            "spec": {"suspend": True, "replicatedJobs": [
                {"name": "node", "replicas": 2, "template": {"spec": {"parallelism": 2, "template": tmpl}}}]}}


def batch_job() -> dict[str, Any]:
    return {"kind": "Job", "metadata": {"name": "hvd-launcher", "namespace": "team", "uid": "u-launcher",
                                        "ownerReferences": [{"kind": "MPIJob", "name": "hvd", "uid": "u-MPIJob",
                                                             "controller": True}]},
            "spec": {"parallelism": 1, "completionMode": "Indexed", "template": {
                "metadata": {"annotations": {"gpu-fraction": "0.5"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "m", "command": ["sleep", "infinity"]}]}}}}


def runai_job() -> dict[str, Any]:
    return {"kind": "TrainingWorkload", "metadata": {"name": "rw", "namespace": "runai-a", "uid": "u-rw"},
            "spec": {"workers": {"value": 2}, "gpu": {"value": "1"}, "command": {"value": "python t.py"},
                     "jobType": "PyTorchJob"}}


# (kind, group, version, document): the parser is `parse_job(kind, group, version)`
JOB_BASES: list[tuple[str, str, str, Callable[[], dict[str, Any]]]] = [
    ("PyTorchJob", "kubeflow.org", "v1", lambda: kubeflow_job("PyTorchJob")),
    ("TFJob", "kubeflow.org", "v1", lambda: kubeflow_job("TFJob")),
    ("MPIJob", "kubeflow.org", "v2beta1", lambda: kubeflow_job("MPIJob")),
    ("TrainJob", "trainer.kubeflow.org", "v1alpha1", trainjob),
    ("JobSet", "jobset.x-k8s.io", "v1alpha2", jobset),
    ("Job", "batch", "v1", batch_job),
    ("TrainingWorkload", "run.ai", "v2alpha1", runai_job),
    # an unknown kind with Kubeflow labels
    ("FooJob", "kubeflow.org", "v1", lambda: {**kubeflow_job("PyTorchJob"), "kind": "FooJob"}),
]


def event() -> dict[str, Any]:
    return {"metadata": {"name": "e1", "namespace": "team", "creationTimestamp": T0},
            "involvedObject": {"kind": "Pod", "name": "mnist-worker-0", "uid": "p-1"},
            "type": "Warning", "reason": "BackOff", "message": "back-off", "count": 3, "lastTimestamp": T0,
            "series": {"lastObservedTime": T0}, "note": "n"}


def node() -> dict[str, Any]:
    return {"metadata": {"name": "node-1", "labels": {"run.ai/node-pool": "a", "nvidia.com/gpu.product": "A100"}},
            "spec": {"unschedulable": False, "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}, "capacity": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def namespace() -> dict[str, Any]:
    return {"metadata": {"name": "team", "labels": {"runai/queue": "q"}}, "status": {"phase": "Active"}}


def quota() -> dict[str, Any]:
    return {"metadata": {"name": "q", "namespace": "team"}, "spec": {"hard": {"requests.nvidia.com/gpu": "8"}},
            "status": {"used": {"requests.nvidia.com/gpu": "2"}}}


COLUMNS = ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]


def table() -> dict[str, Any]:
    def row(name: str, status: str = "Running", completed: str = "") -> dict[str, Any]:
        r: dict[str, Any] = {"cells": [name, "1/1", status, "2 (5m ago)", "5m", "10.0.0.1", "node-1", "<none>",
                                       "<none>"]}
        if completed:
            r["conditions"] = [{"type": "Completed", "status": "True", "reason": completed}]
        return r

    return {"kind": "Table", "columnDefinitions": [{"name": n, "type": "string"} for n in COLUMNS],
            "rows": [row("mnist-master-0"), row("mnist-worker-1", "CrashLoopBackOff"), row("hvd-launcher-x7k2p"),
                     row("hvd-worker-1", "Completed", "Succeeded"), row("js-node-1-0-abcde", "Init:0/1"),
                     row("hvd-launcher-0-xyz"), row("tj-node-0-1-x")]}


# -- mutation ----------------------------------------------------------------------------------

Path = tuple[Any, ...]


def paths(doc: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every place in a document: the root, then each dict key and list index, depth first."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, (*prefix, i))


def _parent(doc: Any, path: Path) -> Any:
    for k in path[:-1]:
        doc = doc[k]
    return doc


@st.composite
def mutated(draw: st.DrawFn, base: Callable[[], Any]) -> Any:
    """`base()` with one to six of its fields deleted, replaced by a wrong value, or given an extra key."""
    doc = base()
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        where = draw(st.sampled_from(list(paths(doc))))
        op = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if not where:  # the whole document
            if op == "replace":
                doc = draw(wrong)
            continue
        parent = _parent(doc, where)
        if op == "delete":
            del parent[where[-1]]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=12) | st.sampled_from(["nvidia.com/gpu", "reason", "deletionTimestamp",
                                                                  "ownerReferences", "terminated", "waiting"]))] \
                = draw(wrong)
        else:
            parent[where[-1]] = draw(wrong)
    return doc


# -- what a well-typed record is ---------------------------------------------------------------

def conforms(value: Any, tp: Any, where: str, exact: bool = True) -> None:
    """Fail unless `value` is of the annotated type `tp` (floats finite, no bool for an int; not
    `exact`: an int will do for a float, as the model's sums of nothing are 0)."""
    wrong = mismatch(value, tp, exact)
    if wrong is not None:
        raise AssertionError(f"{where}{wrong}")


def mismatch(value: Any, tp: Any, exact: bool) -> str | None:
    """Where in `value` (a path, then what) it is not of the type `tp`; None where it is."""
    if tp is Any:
        return None
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        wrongs = [mismatch(value, alt, exact) for alt in typing.get_args(tp)]
        return None if None in wrongs else f": {value!r:.80} is none of {tp} ({wrongs})"
    if tp is type(None) or tp in (str, bool, int):
        ok = value is None if tp is type(None) else type(value) is tp
        return None if ok else f": {str(value)[:80]!r} is not a {tp.__name__}"
    if tp is float:
        ok = type(value) in ((float,) if exact else (float, int)) and math.isfinite(value)
        return None if ok else f": {str(value)[:80]!r} is not a finite float"
    if origin is tuple:
        if type(value) is not tuple:
            return f": {str(value)[:80]!r} is not a tuple"
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            args = (args[0],) * len(value)
        elif len(value) != len(args):
            return f": {str(value)[:80]!r} has not {len(args)} items"
        for i, (v, a) in enumerate(zip(value, args, strict=True)):
            wrong = mismatch(v, a, exact)
            if wrong is not None:
                return f"[{i}]{wrong}"
        return None
    if dataclasses.is_dataclass(tp):
        if type(value) is not tp:
            return f": {str(value)[:80]!r} is not a {tp.__name__}"
        for name, hint in _fields(tp):
            wrong = mismatch(getattr(value, name), hint, exact)
            if wrong is not None:
                return f".{name}{wrong}"
        return None
    return f": no check for {tp}"


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    hints = typing.get_type_hints(cls, vars(records) | vars(model_views))
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


COUNTS = {PodRec: ("restarts", "ready", "total"), EventRec: ("count",)}
NON_NEGATIVE = {PodRec: ("gpus",), NodeRec: ("gpus",)}


def well_typed(rec: Any, cls: type) -> None:
    conforms(rec, cls, cls.__name__)
    assert rec.name, f"{cls.__name__} without a name"
    for name in COUNTS.get(cls, ()) + NON_NEGATIVE.get(cls, ()):
        assert getattr(rec, name) >= 0, f"{cls.__name__}.{name} = {getattr(rec, name)}"
    if isinstance(rec, PodRec | NodeRec | JobRec | NamespaceRec):
        assert len(rec.labels) % 2 == 0
    if isinstance(rec, JobRec):
        for r in rec.replicas:
            assert r.replicas >= 0 and r.gpus_per_replica >= 0, r
        assert rec.min_available is None or rec.min_available >= 0


def parsed(parse: Callable[[Any], Any], doc: Any, cls: type) -> Any:
    """`parse(doc)`: a well-typed `cls`, or None where it raised BadObject (nothing else may escape),
    which it may only for an object it cannot name."""
    try:
        rec = parse(doc)
    except BadObject:
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        assert not (isinstance(meta, dict) and isinstance(meta.get("name"), str) and meta["name"]), \
            f"a named object refused: {str(doc)[:200]}"
        return None
    well_typed(rec, cls)
    return rec


def views_are_well_typed(m: LiveModel) -> None:
    for w in m.workloads.values():
        conforms(w, model_views.WorkloadView, "WorkloadView", exact=False)
    for p in m.projects.values():
        conforms(p, model_views.ProjectView, "ProjectView", exact=False)
    for n in m.nodes.values():
        conforms(n, model_views.NodeView, "NodeView", exact=False)


# -- each parser alone -------------------------------------------------------------------------

@FUZZ
@given(st.one_of(*(mutated(b) for b in POD_BASES)))
def test_parse_pod_returns_a_well_typed_record_or_bad_object(doc: Any) -> None:
    parsed(parse_pod, doc, PodRec)


@FUZZ
@given(st.sampled_from(JOB_BASES).flatmap(lambda b: st.tuples(st.just(b[:3]), mutated(b[3]))))
def test_parse_job_returns_a_well_typed_record_or_bad_object(case: tuple[tuple[str, str, str], Any]) -> None:
    (kind, group, version), doc = case
    parsed(parse_job(kind, group, version), doc, JobRec)


@FUZZ
@given(st.sampled_from([
    (parse_event, event, EventRec), (parse_node, node, NodeRec), (parse_namespace, namespace, NamespaceRec),
    (parse_quota, quota, QuotaRec),
]).flatmap(lambda b: st.tuples(st.just((b[0], b[2])), mutated(b[1]))))
def test_other_parsers_return_a_well_typed_record_or_bad_object(case: tuple[tuple[Any, type], Any]) -> None:
    (parse, cls), doc = case
    parsed(parse, doc, cls)


@FUZZ
@given(mutated(table), st.text(max_size=10))
def test_pods_from_table_never_raises(doc: Any, ns: str) -> None:
    for rec in pods_from_table(doc, ns):
        well_typed(rec, PodRec)
        assert rec.partial and rec.namespace == ns


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(NASTY), json_values, st.lists(scalars, max_size=12)), max_size=6),
       st.lists(st.one_of(st.text(max_size=8).map(lambda n: {"name": n}), json_values), max_size=10))
def test_table_rows_with_missing_extra_or_wrong_cells(rows: list[Any], columns: list[Any]) -> None:
    doc = {"kind": "Table", "columnDefinitions": [*({"name": n} for n in COLUMNS), *columns],
           "rows": [{"cells": r} if isinstance(r, list) else r for r in rows]}
    for rec in pods_from_table(doc, "team"):
        well_typed(rec, PodRec)
    for rec in pods_from_table({"kind": "Table", "columnDefinitions": columns, "rows": rows}, "team"):
        well_typed(rec, PodRec)


# -- parsers into the model --------------------------------------------------------------------

def feed(m: LiveModel, *, namespaces: Sequence[Any] = (), quotas: Sequence[Any] = (), nodes: Sequence[Any] = (),
         jobs: Sequence[tuple[tuple[str, str, str], Any]] = (), pods: Sequence[Any] = (),
         rows: Sequence[Any] = (), events: Sequence[Any] = ()) -> list[Any]:
    """Parse and apply as the monitor does (keyed as its informers key them); the records applied."""
    applied: list[Any] = []

    def each(parse: Callable[[Any], Any], docs: Sequence[Any], cls: type) -> list[Any]:
        out = [r for d in docs if (r := parsed(parse, d, cls)) is not None]
        applied.extend(out)
        return out

    m.apply_namespaces([(r.name, r) for r in each(parse_namespace, namespaces, NamespaceRec)])
    m.apply_quotas([((r.namespace, r.name), r) for r in each(parse_quota, quotas, QuotaRec)])
    m.apply_nodes([(r.name, r) for r in each(parse_node, nodes, NodeRec)])
    for (kind, group, version), doc in jobs:
        m.apply_jobs([(r.key, r) for r in each(parse_job(kind, group, version), [doc], JobRec)])
    m.apply_pods([(r.key, r) for r in each(parse_pod, pods, PodRec)])
    for doc in rows:
        recs = pods_from_table(doc, "team")
        applied.extend(recs)
        m.apply_pods([(r.key, r) for r in recs])
    m.apply_events([((r.namespace, r.name), r) for r in each(parse_event, events, EventRec)])
    return applied


def clean_jobs() -> list[tuple[tuple[str, str, str], Any]]:
    return [(b[:3], b[3]()) for b in JOB_BASES]


def one_job() -> st.SearchStrategy[tuple[tuple[str, str, str], Any]]:
    return st.sampled_from(JOB_BASES).flatmap(lambda b: st.tuples(st.just(b[:3]), mutated(b[3])))


@FUZZ_MODEL
@given(
    jobs=st.lists(one_job(), max_size=4),
    pods=st.lists(st.one_of(*(mutated(b) for b in POD_BASES)), max_size=4),
    rows=st.lists(mutated(table), max_size=2),
    nodes=st.lists(mutated(node), max_size=2),
    others=st.tuples(st.lists(mutated(namespace), max_size=2), st.lists(mutated(quota), max_size=2),
                     st.lists(mutated(event), max_size=2)),
)
def test_bad_objects_through_the_model_never_raise(jobs: list[Any], pods: list[Any], rows: list[Any],
                                                   nodes: list[Any], others: tuple[list[Any], ...]) -> None:
    namespaces, quotas, events = others
    m = LiveModel(now=lambda: 1e9)
    # the good objects first, then the bad ones replacing or joining them, then the good ones back
    good = {"jobs": clean_jobs(), "pods": [b() for b in POD_BASES], "rows": [table()], "nodes": [node()],
            "namespaces": [namespace()], "quotas": [quota()], "events": [event()]}
    feed(m, **good)
    m.flush()
    applied = feed(m, jobs=jobs, pods=pods, rows=rows, nodes=nodes, namespaces=namespaces, quotas=quotas,
                   events=events)
    m.flush()
    views_are_well_typed(m)
    for w in m.workloads.values():
        for e in m.events_for(w):
            well_typed(e, EventRec)
    feed(m, **good)
    m.flush()
    views_are_well_typed(m)
    # and every bad record deleted again
    m.apply_pods([(r.key, None) for r in applied if isinstance(r, PodRec)])
    m.apply_jobs([(r.key, None) for r in applied if isinstance(r, JobRec)])
    m.apply_nodes([(r.name, None) for r in applied if isinstance(r, NodeRec)])
    m.flush()
    views_are_well_typed(m)


# -- the explicit cases ------------------------------------------------------------------------

def flushed(m: LiveModel) -> None:
    m.flush()
    views_are_well_typed(m)


def test_ten_thousand_labels() -> None:
    labels = {f"example.com/label-{i}": f"value-{i}" for i in range(10_000)}
    p = pod("PyTorchJob", "mnist", "team", "Worker", 0)
    p["metadata"]["labels"].update(labels)
    j = kubeflow_job("PyTorchJob")
    j["metadata"]["labels"] = labels
    n = node()
    n["metadata"]["labels"].update(labels)
    prec, jrec, nrec = parse_pod(p), parse_job("PyTorchJob", "kubeflow.org", "v1")(j), parse_node(n)
    for rec, cls in ((prec, PodRec), (jrec, JobRec), (nrec, NodeRec)):
        well_typed(rec, cls)
    assert len(prec.labels) == 2 * (10_000 + 4) and prec.label(TK + "job-name") == "mnist"
    assert jrec.label("example.com/label-9999") == "value-9999"
    m = LiveModel()
    m.apply_jobs([(jrec.key, jrec)])
    m.apply_pods([(prec.key, prec)])
    m.apply_nodes([(nrec.name, nrec)])
    flushed(m)
    assert m.workloads[("team", "PyTorchJob", "mnist")].ranks[0].pod == "mnist-worker-0"


def test_a_one_megabyte_annotation() -> None:
    huge = "\x1b]52;c;" + "A" * (1 << 20)
    p = pod("PyTorchJob", "mnist", "team", "Worker", 0)
    p["metadata"]["annotations"] = {"ranks/user": huge, "big": huge}
    j = kubeflow_job("PyTorchJob")
    j["metadata"]["annotations"] = {"big": huge, "kubectl.kubernetes.io/last-applied-configuration": huge}
    prec, jrec = parse_pod(p), parse_job("PyTorchJob", "kubeflow.org", "v1")(j)
    well_typed(prec, PodRec)
    well_typed(jrec, JobRec)
    assert prec.annotation("big") == "" and prec.annotation("ranks/user") == huge  # only the kept ones
    assert jrec.annotation("kubectl.kubernetes.io/last-applied-configuration") == ""
    m = LiveModel()
    m.apply_jobs([(jrec.key, jrec)])
    m.apply_pods([(prec.key, prec)])
    flushed(m)


def test_an_unknown_kind_with_kubeflow_labels() -> None:
    """A pod labelled by an operator we do not know, owned by a kind we do not know, and a workload of
    that kind: parsed, grouped somewhere or nowhere, never a crash."""
    p = pod("PyTorchJob", "mystery", "team", "Worker", 0)
    p["metadata"]["labels"][TK + "operator-name"] = "foojob-controller"
    p["metadata"]["ownerReferences"] = [{"kind": "FooJob", "name": "mystery", "uid": "u-foo", "controller": True}]
    j = kubeflow_job("PyTorchJob")
    j["kind"] = "FooJob"
    j["metadata"].update({"name": "mystery", "uid": "u-foo", "labels": {TK + "job-name": "mystery"}})
    jrec = parse_job("FooJob", "kubeflow.org", "v1")(j)
    well_typed(jrec, JobRec)
    assert jrec.replicas == ()  # no replica specs known for the kind
    prec = parse_pod(p)
    well_typed(prec, PodRec)
    m = LiveModel()
    m.apply_jobs([(jrec.key, jrec)])
    m.apply_pods([(prec.key, prec)])
    flushed(m)
    rows = pods_from_table({"kind": "Table", "columnDefinitions": [{"name": n} for n in COLUMNS],
                            "rows": [{"cells": ["mystery-worker-0", "1/1", "Running", "0", "1m", "", "", "", ""]}]},
                           "team")
    m.apply_pods([(r.key, r) for r in rows])
    flushed(m)


@pytest.mark.parametrize("doc", [None, [], "pod", 7, [{"metadata": {"name": "a"}}], {}, {"metadata": ["a"]},
                                 {"metadata": {"name": ""}}, {"metadata": {"name": 7}}, {"metadata": None}])
def test_an_object_without_a_name_is_a_bad_object(doc: Any) -> None:
    """No record can stand for it (keyed as no object is, it would replace another's): the informer
    drops it, and a row it was read for stays."""
    for parse in (parse_pod, parse_event, parse_node, parse_namespace, parse_quota,
                  parse_job("PyTorchJob", "kubeflow.org", "v1")):
        with pytest.raises(BadObject):
            parse(doc)
    assert pods_from_table(doc, "team") == []  # type: ignore[arg-type]


@pytest.mark.parametrize(("field", "value"), [
    (("metadata", "labels"), None), (("metadata", "labels"), 5), (("metadata", "labels"), ["a"]),
    (("metadata", "annotations"), "x"), (("metadata", "ownerReferences"), {"kind": "Job"}),
    (("metadata", "labels", TK + "replica-index"), "²"), (("metadata", "labels", TK + "replica-index"), "9" * 5000),
    (("status", "containerStatuses"), {"name": "main"}),
    (("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), "abc"),
    (("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), -1),
    (("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), 1e30),
    (("status", "containerStatuses", 0, "restartCount"), "seven"),
    (("metadata", "creationTimestamp"), "yesterday"), (("metadata", "creationTimestamp"), 12),
])
def test_the_cases_of_the_issue_degrade_the_pod(field: Path, value: Any) -> None:
    p = rich_pod()
    _parent(p, field)[field[-1]] = value
    rec = parse_pod(p)
    well_typed(rec, PodRec)
    m = LiveModel()
    m.apply_pods([(rec.key, rec)])
    flushed(m)


@pytest.mark.parametrize("replicas", [-5, 2**63 - 1, 1e308, "3", "many", None, [2]])
def test_replica_counts_negative_or_huge(replicas: Any) -> None:
    j = kubeflow_job("PyTorchJob")
    j["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = replicas
    rec = parse_job("PyTorchJob", "kubeflow.org", "v1")(j)
    well_typed(rec, JobRec)
    m = LiveModel()
    m.apply_jobs([(rec.key, rec)])
    m.apply_pods([(r.key, r) for r in (parse_pod(pod("PyTorchJob", "mnist", "team", "Worker", 0)),)])
    flushed(m)
    assert m.workloads[("team", "PyTorchJob", "mnist")].ranks_total >= 1


@pytest.mark.parametrize("name", [
    "mnist-worker-²", "mnist-worker-" + "9" * 5000, "hvd-worker-٣", "js-node-²-0-abc", "js-node-0-" + "9" * 5000 + "-abc",
    "hvd-launcher-²-x", "-".join("a" * 300),
], ids=["superscript", "5000-digits", "arabic-indic", "jobset-superscript", "jobset-5000-digits", "launcher",
        "300-dashes"])
def test_table_rows_named_with_digits_that_are_no_number(name: str) -> None:
    """A row's name read against the workloads: "²" passes `str.isdigit` but `int` refuses it."""
    m = LiveModel()
    feed(m, jobs=clean_jobs())
    rows = pods_from_table({"kind": "Table", "columnDefinitions": [{"name": n} for n in COLUMNS],
                            "rows": [{"cells": [name, "1/1", "Running", "²", "1m", "", "n", "", ""]}]}, "team")
    assert [r.name for r in rows] == [name] and rows[0].restarts == 0
    m.apply_pods([(r.key, r) for r in rows])
    flushed(m)
