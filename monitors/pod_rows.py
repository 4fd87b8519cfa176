"""Pods as the server prints them: rows of a cells-only ``meta.k8s.io/v1`` Table, and whose rank each is.

The workloads list, the projects view and `top nodes` need of a pod only what `kubectl get pods`
shows (ready, status, restarts, IP, node) and which workload and rank it is. A full pod costs
~8 KB on the wire (managedFields, spec, status); even a Table row with the object's metadata
(`includeObject=Metadata`) costs ~5 KB, most of it managedFields, which the server always sends.
A row without the object is ~120 bytes. Its namespace is the request's; its workload and rank are
read from its name, as the operators build pod names, checked against the workload objects (see
`infer`). Records made here are `partial`: what a row does not carry (uid, creation time, labels
the operator set beyond those, exits, commands, the scheduler's message) is missing until a full
object of that pod arrives (a watch event; the LIST of the workload shown in detail or of the node
whose pods are shown; the failed and restarted pods; one pod of each pending workload).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .records import JobRec, Labels, Owner, PodRec, decimal, flat_labels

_intern = sys.intern

# rows only (no object): what the lists need. The plain type after it: a server without Tables.
TABLE_ROWS = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

TK = "training.kubeflow.org/"
JS = "jobset.sigs.k8s.io/"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
KUBEFLOW_KINDS = frozenset({"PyTorchJob", "TFJob", "XGBoostJob", "JAXJob", "PaddleJob", "DistributedWorkload"})
OPERATORS = {"PyTorchJob": "pytorchjob-controller", "TFJob": "tfjob-controller",
             "XGBoostJob": "xgboostjob-controller", "JAXJob": "jaxjob-controller",
             "PaddleJob": "paddlejob-controller", "MPIJob": "mpi-operator"}
# kubectl's STATUS words of a pod whose containers have not started (phase Pending)
_PENDING_WORDS = frozenset({"Pending", "ContainerCreating", "PodInitializing", "ErrImagePull", "ImagePullBackOff",
                            "InvalidImageName", "CreateContainerConfigError", "CreateContainerError",
                            "SchedulingGated", "ErrImageNeverPull", "RegistryUnavailable"})


def _cell_index(columns: Any) -> dict[str, int]:
    if not isinstance(columns, list):
        return {}
    return {str(c.get("name", "")).lower() if isinstance(c, Mapping) else "": i for i, c in enumerate(columns)}


def _none(v: Any) -> str:
    """A text cell ("<none>" and anything not a string or number: "")."""
    if isinstance(v, str):
        return "" if v == "<none>" else v
    return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else ""


def _int_prefix(v: Any) -> int:
    return decimal(_none(v).split(" ", 1)[0]) or 0


def pods_from_table(doc: Mapping[str, Any], namespace: str) -> list[PodRec]:
    """The partial records of a pods Table's rows (all in `namespace`). A row it cannot read (no
    name, too few cells) is left out; a cell of the wrong type reads as empty. Never raises."""
    if not isinstance(doc, Mapping):
        return []
    ix = _cell_index(doc.get("columnDefinitions"))
    name_i, ready_i, status_i = ix.get("name", 0), ix.get("ready"), ix.get("status")
    restarts_i, ip_i, node_i = ix.get("restarts"), ix.get("ip"), ix.get("node")
    ns = _intern(namespace)
    width = 1 + max(i for i in (name_i, ready_i, status_i, restarts_i, ip_i, node_i) if i is not None)
    rows = doc.get("rows")
    out: list[PodRec] = []
    # what a READY or RESTARTS text reads as, once per text (a cluster has a few dozen of them)
    counts: dict[str, tuple[int, int]] = {}
    restarts: dict[str, int] = {}
    for row in rows if isinstance(rows, list) else ():
        cells = row.get("cells") if type(row) is dict or isinstance(row, Mapping) else None
        if not isinstance(cells, list) or len(cells) < width:
            continue
        name = cells[name_i]
        if not isinstance(name, str) or not name:
            continue
        status = _none(cells[status_i]) if status_i is not None else ""
        phase = ""
        conditions = row.get("conditions")
        for cond in conditions if isinstance(conditions, list) else ():
            if isinstance(cond, Mapping) and cond.get("type") == "Completed" and cond.get("status") == "True":
                phase = _none(cond.get("reason"))
        if not phase:
            phase = ("Pending" if status in _PENDING_WORDS or status.startswith("Init:")
                     else "Unknown" if status == "Unknown" else "Running")
        text = _none(cells[ready_i]) if ready_i is not None else ""
        ready_total = counts.get(text)
        if ready_total is None:
            ready, _, total = text.partition("/")
            ready_total = counts[text] = (decimal(ready) or 0, decimal(total) or 0)
        restarted = 0
        if restarts_i is not None:
            text = _none(cells[restarts_i])
            restarted = restarts.get(text, -1)
            if restarted < 0:
                restarted = restarts[text] = _int_prefix(text)
        out.append(PodRec(
            ns, name, "", (), None, _intern(_none(cells[node_i])) if node_i is not None else "",
            _intern(phase), _intern("" if status in ("Running", "Pending") else status), "",
            restarted, ready_total[0], ready_total[1], _none(cells[ip_i]) if ip_i is not None else "", 0.0, None,
            None, status == "Terminating", "", (), (), (), (), (), (), True,
        ))
    return out


def name_prefixes(name: str) -> tuple[str, ...]:
    """Every prefix of `name` that ends before a dash, longest first (candidate workload names)."""
    return tuple(_prefixes(name))


def _prefixes(name: str) -> Iterator[str]:
    """`name_prefixes`, each made only when asked for (`infer` stops at the first that names a
    workload: the second of five, as a rule)."""
    if len(name) > 253:  # longer than any object name Kubernetes accepts: names no workload
        return
    i = name.rfind("-")
    while i >= 0:
        yield name[:i]
        i = name.rfind("-", 0, i)


def infer(pod: PodRec, jobs_named: Callable[[str], Iterable[JobRec]]) -> PodRec:
    """`pod` (partial) with the labels, owner and GPUs its workload's operator gave it, read from
    its name against the workloads of its namespace (`jobs_named(name)`): the longest prefix that
    names a workload whose spec has that replica type and index wins. Unknown: no labels. A pod
    claimed alike already (the SSH door claims the rows it serves) is returned as it is."""
    for prefix in _prefixes(pod.name):
        rest = pod.name[len(prefix) + 1:].split("-")
        for job in jobs_named(prefix):
            found = _match(job, rest)
            if found is not None:
                labels, gpus = found
                flat = labels if isinstance(labels, tuple) else flat_labels(labels)
                owner = _owner(job)
                if pod.labels == flat and pod.owner == owner and pod.gpus == gpus:
                    return pod
                return pod.claimed(flat, owner, gpus)
    if pod.labels or pod.owner is not None or pod.gpus:
        return pod.claimed((), None, 0.0)
    return pod


_OWNERS: dict[tuple[str, str, str], Owner] = {}


def _owner(job: JobRec) -> Owner:
    """The job as its pods' owner, one object per job (thousands of pods share it)."""
    key = (job.kind, job.name, job.uid)
    found = _OWNERS.get(key)
    if found is None:
        if len(_OWNERS) > 100_000:
            _OWNERS.clear()
        found = _OWNERS[key] = Owner(*key)
    return found


def _replica(job: JobRec, rtype: str) -> tuple[int, float] | None:
    for r in job.replicas:
        if r.rtype.lower() == rtype:
            return r.replicas, r.gpus_per_replica
    return None


_JOB_NAME, _OPERATOR, _INDEX, _TYPE = (_intern(TK + k) for k in ("job-name", "operator-name", "replica-index",
                                                                  "replica-type"))


def _match(job: JobRec, rest: list[str]) -> tuple[dict[str, str] | Labels, float] | None:
    kind = job.kind
    if kind in KUBEFLOW_KINDS:  # <job>-<replica type>-<index>
        index = decimal(rest[-1])
        if len(rest) < 2 or index is None:
            return None
        rtype, idx = "-".join(rest[:-1]), rest[-1]
        spec = _replica(job, rtype)
        if spec is None or index >= max(spec[0], 1):
            return None
        # the flat labels built in key order (the common case: no dict, no sort)
        op = OPERATORS.get(kind)
        flat = (_JOB_NAME, job.name, *((_OPERATOR, op) if op else ()), _INDEX, _intern(idx), _TYPE, _intern(rtype))
        return flat, spec[1]
    if kind == "MPIJob":  # <job>-launcher (v1) or <job>-launcher-<suffix> (v2's launcher Job), <job>-worker-<i>
        if rest[0] == "launcher" and len(rest) <= 2:
            spec = _replica(job, "launcher")
            return {TK + "job-name": job.name, TK + "job-role": "launcher"}, spec[1] if spec else 0.0
        index = decimal(rest[1]) if len(rest) == 2 and rest[0] == "worker" else None
        if index is not None:
            spec = _replica(job, "worker")
            if spec is None or index >= max(spec[0], 1):
                return None
            return ({TK + "job-name": job.name, TK + "job-role": "worker", TK + "replica-index": rest[1]}, spec[1])
        return None
    if kind in ("JobSet", "TrainJob"):  # <jobset>-<replicated job>-<job index>-<pod index>-<suffix>
        if len(rest) < 4 or decimal(rest[-3]) is None or decimal(rest[-2]) is None:
            return None
        rjob = "-".join(rest[:-3])
        for r in job.replicas:
            if r.rtype == rjob:
                return ({JS + "jobset-name": job.name, JS + "replicatedjob-name": rjob, JS + "job-index": rest[-3],
                         COMPLETION_INDEX: rest[-2]}, r.gpus_per_replica)
        return None
    # a Job's pods: <job>-<suffix> or, indexed, <job>-<index>-<suffix>
    if kind == "Job" and (len(rest) == 1 or (len(rest) == 2 and decimal(rest[0]) is not None)):
        labels = {"job-name": job.name, "batch.kubernetes.io/job-name": job.name}
        if len(rest) == 2:
            labels[COMPLETION_INDEX] = rest[0]
        return labels, job.replicas[0].gpus_per_replica if job.replicas else 0.0
    return None
