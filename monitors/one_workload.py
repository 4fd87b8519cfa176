"""One workload read alone, not its namespace (`ranks get W -p P`): the objects of every workload
kind named W (one LIST per kind, `metadata.name` field selector), its pods by the labels their
operators give them (`POD_LABELS`: training.kubeflow.org/job-name, the legacy job-name that batch
Jobs' pods carry too, jobset.sigs.k8s.io/jobset-name), the namespace object and the events of W,
all at once; then the events of its pods (`read_pod_events`, alongside the GPU metrics and the
ranks' tails). The model groups what was read by its own rules, so the workload it builds is the
one a LIST of the whole namespace would have built, wherever the narrow read is conclusive.

It is not (`read_one_workload` returns False, and the caller lists the namespace as before) when
anything was refused or failed (the whole read says it as it always did), when no object of a
workload kind has that name (a workload made of pods alone, or none: the whole read decides), when
a batch Job of that name has an owner (an MPI launcher's or a JobSet's child Job is part of its
owner's workload), or when the name can be no label value (no selector finds its pods).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import orjson

from . import api_paths
from .connection import ConnectionProblem
from .kube import ApiProblem, BadAnswer, Kind
from .monitor import POD_LABELS, WORKLOAD_KINDS
from .parse import BadObject, parse_event, parse_job, parse_namespace, parse_pod
from .records import EventRec, JobRec, PodRec

if TYPE_CHECKING:
    from .model_views import WorkloadView
    from .monitor import Monitor

EVENTS_BY_NAME = 16  # objects whose events are asked for one by one (field selector); more: the namespace's LIST
DELETED_POD = "Deleted pod: "  # the message of a SuccessfulDeletePod event (the operators'), naming the pod


class NotConclusive(Exception):
    """The narrow read cannot stand for the namespace's (refused, failed, or the wrong shape)."""


def pod_selectors(name: str) -> list[str]:
    """The label selectors that find the pods of a workload called `name`, whatever its kind."""
    keys = dict.fromkeys(key for _, key in POD_LABELS)
    return [api_paths.label_selector({key: name}) for key in keys]


async def read_one_workload(monitor: Monitor, namespace: str, ref: str, *, events: bool) -> bool:
    """The workload `ref` (NAME or KIND/NAME) of `namespace` and its pods into `monitor`'s model
    (with `events`, the events of the objects named `ref`); True when that picture is conclusive
    (the module's rules), False when the caller must list the namespace."""
    name = ref.rpartition("/")[2]
    try:
        selectors = pod_selectors(name)
    except api_paths.BadSegment:
        return False
    try:
        kinds: dict[tuple[str, str], Kind] = monitor.kinds or await monitor.client.served_kinds()
    except (ApiProblem, BadAnswer, ConnectionProblem):
        return False
    pods_kind, events_kind = kinds.get(("", "pods")), kinds.get(("", "events"))
    served = [(k, kind_name, group) for group, plural, kind_name in WORKLOAD_KINDS
              if (k := kinds.get((group, plural))) is not None]
    if pods_kind is None or (events and events_kind is None):
        return False
    by_name = {"fieldSelector": api_paths.field_selector({"metadata.name": name})}
    try:
        found, pods, ns_doc, evs = await asyncio.gather(
            asyncio.gather(*(_items(monitor, k.path(namespace), by_name) for k, _, _ in served)),
            asyncio.gather(*(_items(monitor, pods_kind.path(namespace), {"labelSelector": s}) for s in selectors)),
            _namespace(monitor, namespace),
            _events_of(monitor, events_kind, namespace, [name]) if events and events_kind else _nothing())
    except NotConclusive:
        return False
    jobs = _jobs(served, found)
    if not jobs or any(j.kind == "Job" and j.owner is not None for j in jobs):
        return False
    monitor.kinds = kinds
    monitor.status.served = tuple(sorted(f"{p}.{g}" if g else p for g, p in kinds))
    monitor.status.cluster_wide = False
    monitor.status.namespaces = (namespace,)
    monitor.scope = (namespace,)
    model = monitor.model
    if ns_doc is not None:
        model.apply_namespaces([(ns_doc.name, ns_doc)])
    model.apply_jobs([(j.key, j) for j in jobs])
    recs: dict[tuple[str, str], PodRec] = {}
    for items in pods:
        for item in items:
            try:
                rec = parse_pod(item)
            except Exception:  # a malformed object: left out, as the namespace's LIST leaves it out
                continue
            recs[rec.key] = rec
    model.apply_pods(list(recs.items()))
    _apply_events(monitor, evs)
    monitor.flush()
    return True


async def read_pod_events(monitor: Monitor, wl: WorkloadView) -> None:
    """The events of `wl`'s pods (and of the pods its operator deleted, as its own events name
    them) into the model: one field-selected LIST per pod, or the namespace's events when there
    are over `EVENTS_BY_NAME` of them. A failure leaves the events the model has."""
    kind = monitor.kinds.get(("", "events"))
    if kind is None:
        return
    names = {r.pod for r in wl.ranks}
    names |= {e.message[len(DELETED_POD):].strip() for e in monitor.model.events.values()
              if e.namespace == wl.namespace and e.reason == "SuccessfulDeletePod" and e.object_name == wl.name
              and e.message.startswith(DELETED_POD)}
    names.discard(wl.name)
    if not names:
        return
    try:
        got = await _events_of(monitor, kind, wl.namespace, sorted(names))
    except NotConclusive:
        return
    _apply_events(monitor, got)


async def _events_of(monitor: Monitor, kind: Kind, namespace: str, names: list[str]) -> list[dict[str, Any]]:
    """The Event objects about the objects called `names` (each a field-selected LIST), or every
    event of the namespace when there are over `EVENTS_BY_NAME` names."""
    path = kind.path(namespace)
    if len(names) > EVENTS_BY_NAME:
        return await _items(monitor, path, {})
    lists = await asyncio.gather(*(_items(monitor, path, {"fieldSelector": api_paths.field_selector(
        {"involvedObject.name": n})}) for n in names))
    return [item for items in lists for item in items]


def _apply_events(monitor: Monitor, items: list[dict[str, Any]]) -> None:
    recs: list[tuple[tuple[str, str], EventRec | None]] = []
    for item in items:
        try:
            rec = parse_event(item)
        except Exception:  # a malformed event is left out
            continue
        recs.append(((rec.namespace, rec.name), rec))
    if recs:
        monitor.model.apply_events(recs)


async def _items(monitor: Monitor, path: str, params: dict[str, str]) -> list[dict[str, Any]]:
    """The items of one LIST; `NotConclusive` for any refusal or failure."""
    try:
        raw = await monitor.client.request("GET", path, params=params)
        items = orjson.loads(raw).get("items")
    except (ApiProblem, ConnectionProblem, orjson.JSONDecodeError, AttributeError) as exc:
        raise NotConclusive(str(exc)) from None
    if not isinstance(items, list):
        raise NotConclusive(f"GET {path}: no items")
    return [i for i in items if isinstance(i, dict)]


async def _namespace(monitor: Monitor, namespace: str) -> Any:
    """The namespace's object (its project's name), None when it may not be read (as a scoped
    monitor reads it)."""
    try:
        return parse_namespace(await monitor.client.get(api_paths.namespace(namespace)))
    except ApiProblem as exc:
        if exc.status in (403, 404):
            return None
        raise NotConclusive(str(exc)) from None
    except (BadObject, BadAnswer):
        return None
    except ConnectionProblem as exc:
        raise NotConclusive(str(exc)) from None


async def _nothing() -> list[dict[str, Any]]:
    return []


def _jobs(served: list[tuple[Kind, str, str]], found: list[list[dict[str, Any]]]) -> list[JobRec]:
    """The workload objects listed, each kind by its parser (a malformed one is left out, as the
    kind's informer leaves it out)."""
    out: list[JobRec] = []
    for (k, kind_name, group), items in zip(served, found, strict=True):
        parse = parse_job(kind_name, group, k.version)
        for item in items:
            try:
                out.append(parse(item))
            except Exception:
                continue
    return out


__all__ = ["pod_selectors", "read_one_workload", "read_pod_events"]
