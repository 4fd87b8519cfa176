"""The `scheduler` component: binds pending pods to nodes like kube-scheduler, with gangs.

Pods whose `spec.schedulerName` is `default-scheduler`, `runai-scheduler` or `kai-scheduler`
(or unset) and that have no `spec.nodeName` are placed on a node that passes, in kube-scheduler's
filter order: NodeUnschedulable (`spec.unschedulable`), TaintToleration (NoSchedule/NoExecute
taints; a node whose Ready condition is not True counts as tainted
`node.kubernetes.io/not-ready`), NodeAffinity (`nodeSelector` and required node affinity
`nodeSelectorTerms`: matchExpressions In/NotIn/Exists/DoesNotExist/Gt/Lt, matchFields on
`metadata.name`) and NodeResourcesFit (cpu, memory, pods and extended resources such as
`nvidia.com/gpu`, against allocatable minus the requests of the node's non-terminated pods).
Binding writes `spec.nodeName` and the condition PodScheduled=True, and records a `Scheduled`
event ("Successfully assigned ns/pod to node"). GPU pods are bin-packed (the feasible node with
the fewest free GPUs), other pods are spread round-robin.

A pod that fits nowhere stays Pending with PodScheduled=False, reason Unschedulable, and a
FailedScheduling Warning event, both carrying kube-scheduler's message:
`0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available:
4 No preemption victims found for incoming pod.` (reasons counted per node and sorted as
strings, as `FitError.Error()` does). The scheduler never preempts.

Gangs: pods annotated `scheduling.k8s.io/group-name: <group>` and
`simcluster.io/pod-group-min-member: <n>` (set by `simcluster.operators`) are bound all together
or not at all: the group waits until n members exist, then its pending members are placed
tentatively and bound only if the bound plus placed members reach n; otherwise every pending
member gets the message of the first member that did not fit, of the cluster as it stands: a
node that could take that member is counted as such (`3 node(s) fit only 3 of the 5 pods of pod
group big-pretrain that must start together`), the others under their kube-scheduler reasons, as
Volcano and the coscheduling plugin tell a gang that does not fit from pods that do (`... 3
Schedulable, 2 Unschedulable`); the message keeps kube-scheduler's shape (`0/N nodes are
available: ...` with per-reason node counts), which `ranks why` reads.

Efficiency: per-node requested resources are kept incrementally from pod events (no rescans);
GPU nodes are indexed by free GPU count; unschedulable pods wait until capacity frees (a pod
finishes or goes away, a node is added or changes) and are then retried in one batch, where a
failure is remembered per pod shape for the rest of the pass.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import orjson

from ..apiserver.errors import ApiError
from ..apiserver.store import Event
from .base import Controller, EventRecorder, Key
from .base import now as _now

if TYPE_CHECKING:
    from ..cluster import SimCluster

# Gang scheduling. The PodGroup name goes where Volcano's integration in the training and MPI
# operators puts it; simcluster has no PodGroup kind, so the group's minMember travels on each
# pod in a simcluster annotation (the operators set both). A group's pods are bound all or none.
POD_GROUP = "scheduling.k8s.io/group-name"
POD_GROUP_MIN_MEMBER = "simcluster.io/pod-group-min-member"

GPU = "nvidia.com/gpu"
SCHEDULERS = frozenset({"default-scheduler", "runai-scheduler", "kai-scheduler"})
POD_KEY = ("", "pods")
NODE_KEY = ("", "nodes")
TICK: Key = ("tick",)
RETRY_DELAY = 0.05  # seconds: capacity changes within this window are retried together

MSG_UNSCHEDULABLE = "node(s) were unschedulable"
MSG_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"
MSG_NO_NODES = "no nodes available to schedule pods"

_QTY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")
_SUFFIX: dict[str, Fraction] = {
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000), "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9),
    "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def parse_quantity(value: Any) -> Fraction:
    """A Kubernetes resource.Quantity ("500m", "64Gi", "1e3", 8) as an exact number."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Fraction(value)
    m = _QTY.match(str(value).strip())
    if m is None:
        raise ValueError(f"not a quantity: {value!r}")
    num = Fraction(m.group(1))
    if m.group(2):
        num *= Fraction(10) ** int(m.group(2)[1:])
    elif m.group(3):
        num *= _SUFFIX[m.group(3)]
    return num


_AMOUNTS: dict[tuple[bool, Any], int] = {}


def _amount(resource: str, value: Any) -> int:
    """cpu in millicores, anything else in whole units (rounded up); 0 if unparsable."""
    key = (resource == "cpu", value if isinstance(value, str | int) and not isinstance(value, bool) else repr(value))
    got = _AMOUNTS.get(key)
    if got is not None:
        return got
    try:
        q = parse_quantity(value)
        got = math.ceil(q * 1000) if resource == "cpu" else math.ceil(q)
    except (ValueError, ZeroDivisionError, OverflowError):
        got = 0
    if len(_AMOUNTS) < 10_000:
        _AMOUNTS[key] = got
    return got




def _container_requests(c: Any) -> dict[str, int]:
    if not isinstance(c, dict):
        return {}
    res = _dict(c.get("resources"))
    req = _dict(res.get("requests"))
    lim = _dict(res.get("limits"))
    out: dict[str, int] = {}
    for name in {*req, *lim}:
        out[name] = _amount(name, req[name] if name in req else lim[name])
    return out


def pod_requests(spec: dict[str, Any]) -> dict[str, int]:
    """Effective requests (cpu in millicores, the rest in units): containers summed, init
    containers maxed, limits standing in for missing requests, plus pod overhead."""
    total: dict[str, int] = {}
    for c in spec.get("containers") or ():
        for k, v in _container_requests(c).items():
            total[k] = total.get(k, 0) + v
    for c in spec.get("initContainers") or ():
        for k, v in _container_requests(c).items():
            if v > total.get(k, 0):
                total[k] = v
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        for k, v in overhead.items():
            total[k] = total.get(k, 0) + _amount(k, v)
    return {k: v for k, v in total.items() if v > 0}


def _tolerates(tolerations: list[Any], key: str, value: str, effect: str) -> bool:
    for t in tolerations:
        if not isinstance(t, dict):
            continue
        te = t.get("effect") or ""
        if te and te != effect:
            continue
        tk = t.get("key") or ""
        if (t.get("operator") or "Equal") == "Exists":
            if not tk or tk == key:
                return True
        elif tk == key and (t.get("value") or "") == value:
            return True
    return False


def _match_expression(labels: dict[str, str], expr: Any) -> bool:
    if not isinstance(expr, dict):
        return False
    key = expr.get("key", "")
    op = expr.get("operator")
    values = expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and key in labels and len(values) == 1:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _match_term(labels: dict[str, str], node_name: str, term: Any) -> bool:
    if not isinstance(term, dict):
        return False
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    if not all(_match_expression(labels, e) for e in exprs):
        return False
    return all(_match_expression({"metadata.name": node_name}, f) for f in fields)


def _with_condition(conditions: Any, cond: dict[str, Any]) -> list[dict[str, Any]]:
    """Replace the condition of cond's type, keeping lastTransitionTime if its status holds."""
    out = []
    for c in conditions if isinstance(conditions, list) else ():
        if not isinstance(c, dict):
            continue
        if c.get("type") == cond["type"]:
            if c.get("status") == cond["status"] and c.get("lastTransitionTime"):
                cond["lastTransitionTime"] = c["lastTransitionTime"]
            continue
        out.append(c)
    out.append(cond)
    return out


@dataclass(slots=True)
class NodeInfo:
    name: str
    exists: bool = False
    alloc: dict[str, int] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)
    npods: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[tuple[str, str, str]] = field(default_factory=list)
    unschedulable: bool = False
    signature: bytes = b""

    def free(self, resource: str) -> int:
        return self.alloc.get(resource, 0) - self.used.get(resource, 0)


@dataclass(slots=True)
class PodInfo:
    key: tuple[str, str]
    uid: str
    scheduler: str
    req: dict[str, int]
    gpu: int
    node_selector: dict[str, str] | None
    terms: list[Any] | None
    tolerations: list[Any]
    priority: int
    seq: int
    group: tuple[str, str] | None
    min_member: int
    shape: bytes
    preempt_never: bool
    gated: bool
    last_msg: str | None = None


class Scheduler(Controller):
    name = "scheduler"
    watches = (POD_KEY, NODE_KEY)

    def __init__(self, sim: SimCluster) -> None:
        super().__init__(sim)
        self.nodes: dict[str, NodeInfo] = {}
        self.node_names: list[str] = []
        self.by_free_gpu: dict[int, dict[str, None]] = {}
        self.pending: dict[tuple[str, str], PodInfo] = {}
        self.active: dict[tuple[str, str], None] = {}
        self.unschedulable: dict[tuple[str, str], None] = {}
        self.bound: dict[tuple[str, str], tuple[str, dict[str, int], tuple[str, str] | None]] = {}
        self.groups: dict[tuple[str, str], set[tuple[str, str]]] = {}
        self._seq = 0
        self._rr = 0
        self._retry_all = False
        self._capacity_gen = 0
        self._recorders: dict[str, EventRecorder] = {}
        self.binds = 0
        self.attempts = 0
        self.busy = False

    # -- state from events -----------------------------------------------------------------------
    def initial_keys(self) -> Iterable[Key]:
        for st in self.store.items(NODE_KEY):
            self._on_node("ADDED", st.obj)
        for st in self.store.items(POD_KEY):
            self._on_pod("ADDED", st.obj)
        yield TICK

    def keys_for(self, ev: Event) -> Iterable[Key]:
        try:
            work = self._on_node(ev.type, ev.obj) if ev.tkey == NODE_KEY else self._on_pod(ev.type, ev.obj)
        except Exception:  # a malformed object must not break the event fan-out
            return ()
        return (TICK,) if work else ()

    def _node(self, name: str) -> NodeInfo:
        info = self.nodes.get(name)
        if info is None:
            info = self.nodes[name] = NodeInfo(name)
        return info

    def _index_gpu(self, info: NodeInfo, old_free: int | None) -> None:
        if old_free is not None:
            bucket = self.by_free_gpu.get(old_free)
            if bucket is not None:
                bucket.pop(info.name, None)
                if not bucket:
                    del self.by_free_gpu[old_free]
        if info.exists:
            self.by_free_gpu.setdefault(max(0, info.free(GPU)), {})[info.name] = None

    def _on_node(self, etype: str, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        info = self._node(name)
        old_free = info.free(GPU) if info.exists else None
        if etype == "DELETED":
            self._index_gpu(info, old_free)
            info.exists = False
            info.signature = b""
            self.node_names = sorted(n for n, i in self.nodes.items() if i.exists)
            return False
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        alloc_raw = status.get("allocatable") or status.get("capacity") or {}
        alloc = {k: _amount(k, v) for k, v in alloc_raw.items()} if isinstance(alloc_raw, dict) else {}
        taints = [
            (str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
            for t in spec.get("taints") or ()
            if isinstance(t, dict) and t.get("effect") in ("NoSchedule", "NoExecute")
        ]
        ready = True
        for c in status.get("conditions") or ():
            if isinstance(c, dict) and c.get("type") == "Ready":
                ready = c.get("status") == "True"
        if not ready and not any(t[0] == "node.kubernetes.io/not-ready" for t in taints):
            taints.append(("node.kubernetes.io/not-ready", "", "NoSchedule"))
        labels = _dict(meta.get("labels"))
        unsched = spec.get("unschedulable") is True
        signature = orjson.dumps([alloc, labels, taints, unsched], option=orjson.OPT_SORT_KEYS)
        if info.exists and signature == info.signature:
            return False
        was = info.exists
        info.alloc, info.labels, info.taints, info.unschedulable = alloc, labels, taints, unsched
        info.signature = signature
        info.exists = True
        self._index_gpu(info, old_free)
        if not was:
            self.node_names = sorted(n for n, i in self.nodes.items() if i.exists)
        self._capacity_changed()
        return True

    def _capacity_changed(self) -> None:
        """Capacity may have freed: retry the unschedulable pods, in one batch shortly after
        (a burst of pod completions costs one retry pass, not one per pod)."""
        self._capacity_gen += 1
        if self.unschedulable and not self._retry_all:
            self._retry_all = True
            try:
                self.enqueue_after(RETRY_DELAY, TICK)
            except RuntimeError:  # no running loop (building state before start)
                self.enqueue(TICK)

    def _on_pod(self, etype: str, obj: dict[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if etype == "DELETED":
            return self._forget(key)
        spec = _dict(obj.get("spec"))
        phase = (obj.get("status") or {}).get("phase") or "Pending"
        node = spec.get("nodeName")
        terminal = phase in ("Succeeded", "Failed")
        if node:
            self._drop_pending(key)
            if terminal:
                return self._unbind(key)
            cur = self.bound.get(key)
            if cur is not None and cur[0] == node:
                return False
            if cur is not None:
                self._unbind(key)
            group = self._group_of(meta)
            self._account(key, node, pod_requests(spec), group)
            return False
        if key in self.bound:
            self._unbind(key)
        sched = spec.get("schedulerName") or "default-scheduler"
        if terminal or meta.get("deletionTimestamp") or sched not in SCHEDULERS:
            self._drop_pending(key)
            return False
        gated = bool(spec.get("schedulingGates"))
        info = self.pending.get(key)
        if info is not None:
            if info.uid == meta.get("uid"):
                if info.gated and not gated:
                    info.gated = False
                    self.active[key] = None
                    return True
                return False
            self._drop_pending(key)
        info = self._pod_info(key, meta, spec, sched, gated)
        self.pending[key] = info
        if info.group is not None:
            members = self.groups.setdefault(info.group, set())
            members.add(key)
            for k in members:  # a new member may complete the gang: retry the others too
                if k in self.pending and not self.pending[k].gated:
                    self.unschedulable.pop(k, None)
                    self.active[k] = None
        if gated:
            self._mark_gated(info)
            return False
        self.active[key] = None
        return True

    def _group_of(self, meta: dict[str, Any]) -> tuple[str, str] | None:
        ann = _dict(meta.get("annotations"))
        group = ann.get(POD_GROUP)
        return (meta.get("namespace", ""), group) if group else None

    def _pod_info(self, key: tuple[str, str], meta: dict[str, Any], spec: dict[str, Any], sched: str, gated: bool) -> PodInfo:
        req = pod_requests(spec)
        ann = _dict(meta.get("annotations"))
        group = self._group_of(meta)
        try:
            min_member = int(ann.get(POD_GROUP_MIN_MEMBER, "1"))
        except (TypeError, ValueError):
            min_member = 1
        selector = spec.get("nodeSelector") if isinstance(spec.get("nodeSelector"), dict) else None
        affinity = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms = affinity.get("nodeSelectorTerms") if isinstance(affinity, dict) else None
        tolerations = _list(spec.get("tolerations"))
        priority = spec.get("priority")
        priority = priority if isinstance(priority, int) else 0
        self._seq += 1
        shape = orjson.dumps(
            [sorted(req.items()), selector, terms, tolerations, spec.get("preemptionPolicy")],
            option=orjson.OPT_SORT_KEYS,
        )
        return PodInfo(
            key=key, uid=str(meta.get("uid")), scheduler=sched, req=req, gpu=req.get(GPU, 0),
            node_selector=selector or None, terms=terms or None, tolerations=tolerations,
            priority=priority, seq=self._seq, group=group if min_member > 1 else None,
            min_member=min_member, shape=shape, preempt_never=spec.get("preemptionPolicy") == "Never",
            gated=gated,
        )

    def _drop_pending(self, key: tuple[str, str]) -> None:
        info = self.pending.pop(key, None)
        self.active.pop(key, None)
        self.unschedulable.pop(key, None)
        if info is not None and info.group is not None and key not in self.bound:
            members = self.groups.get(info.group)
            if members is not None:
                members.discard(key)
                if not members:
                    del self.groups[info.group]

    def _forget(self, key: tuple[str, str]) -> bool:
        self._drop_pending(key)
        return self._unbind(key)

    def _account(self, key: tuple[str, str], node: str, req: dict[str, int], group: tuple[str, str] | None) -> None:
        info = self._node(node)
        old = info.free(GPU) if info.exists else None
        for k, v in req.items():
            info.used[k] = info.used.get(k, 0) + v
        info.npods += 1
        self.bound[key] = (node, req, group)
        if group is not None:
            self.groups.setdefault(group, set()).add(key)
        self._index_gpu(info, old)

    def _unbind(self, key: tuple[str, str]) -> bool:
        cur = self.bound.pop(key, None)
        if cur is None:
            return False
        node, req, group = cur
        info = self._node(node)
        old = info.free(GPU) if info.exists else None
        for k, v in req.items():
            info.used[k] = info.used.get(k, 0) - v
        info.npods -= 1
        self._index_gpu(info, old)
        if group is not None:
            members = self.groups.get(group)
            if members is not None:
                members.discard(key)
                if not members:
                    del self.groups[group]
        self._capacity_changed()  # schedules its own (batched) retry pass
        return False

    # -- filters -----------------------------------------------------------------------------------
    def _affinity_ok(self, node: NodeInfo, pod: PodInfo) -> bool:
        if pod.node_selector is not None:
            labels = node.labels
            for k, v in pod.node_selector.items():
                if labels.get(k) != v:
                    return False
        if pod.terms is not None:
            return any(_match_term(node.labels, node.name, t) for t in pod.terms)
        return True

    def _fits(self, node: NodeInfo, pod: PodInfo) -> bool:
        if not node.exists:
            return False
        for k, v in pod.req.items():
            if v > node.alloc.get(k, 0) - node.used.get(k, 0):
                return False
        if "pods" in node.alloc and node.npods + 1 > node.alloc["pods"]:
            return False
        if node.unschedulable and not _tolerates(pod.tolerations, "node.kubernetes.io/unschedulable", "", "NoSchedule"):
            return False
        for key, value, effect in node.taints:
            if not _tolerates(pod.tolerations, key, value, effect):
                return False
        return self._affinity_ok(node, pod)

    def _node_reasons(self, node: NodeInfo, pod: PodInfo) -> tuple[list[str], bool]:
        """The first failing filter's reasons, and whether preemption could help."""
        if node.unschedulable and not _tolerates(pod.tolerations, "node.kubernetes.io/unschedulable", "", "NoSchedule"):
            return [MSG_UNSCHEDULABLE], False
        for key, value, effect in node.taints:
            if not _tolerates(pod.tolerations, key, value, effect):
                return [f"node(s) had untolerated taint {{{key}: {value}}}"], False
        if not self._affinity_ok(node, pod):
            return [MSG_AFFINITY], False
        reasons = []
        if "pods" in node.alloc and node.npods + 1 > node.alloc["pods"]:
            reasons.append("Too many pods")
        for k in ("cpu", "memory", "ephemeral-storage"):
            v = pod.req.get(k, 0)
            if v and v > node.free(k):
                reasons.append(f"Insufficient {k}")
        for k in sorted(pod.req):
            if k not in ("cpu", "memory", "ephemeral-storage") and pod.req[k] > node.free(k):
                reasons.append(f"Insufficient {k}")
        return reasons, True

    def failure_message(self, pod: PodInfo, gang: tuple[str, int, int] | None = None) -> str:
        """kube-scheduler's message for `pod`, each node counted under its reasons. `gang` (pod
        group, members that must start together, members that fit): a node that could take the
        pod as the cluster stands is counted as such, so the message says what the nodes can hold
        when only the gang as a whole does not fit."""
        names = self.node_names
        n = len(names)
        if n == 0:
            return MSG_NO_NODES
        hist: Counter[str] = Counter()
        unresolvable = 0
        for name in names:
            if gang is not None and self._fits(self.nodes[name], pod):
                group, need, fit = gang
                hist[f"node(s) fit only {fit} of the {need} pods of pod group {group} that must start together"] += 1
                continue
            reasons, resolvable = self._node_reasons(self.nodes[name], pod)
            hist.update(reasons)
            if not resolvable:
                unresolvable += 1
        parts = sorted(f"{v} {k}" for k, v in hist.items())
        msg = f"0/{n} nodes are available: {', '.join(parts)}."
        if pod.preempt_never:
            return msg + " preemption: not eligible due to preemptionPolicy=Never."
        pre = {MSG_NO_VICTIMS: n - unresolvable, MSG_NOT_HELPFUL: unresolvable}
        pparts = sorted(f"{v} {k}" for k, v in pre.items() if v)
        return msg + f" preemption: 0/{n} nodes are available: {', '.join(pparts)}."

    def _find_node(self, pod: PodInfo) -> str | None:
        self.attempts += 1
        if pod.gpu > 0:
            for free in sorted(k for k in self.by_free_gpu if k >= pod.gpu):
                for name in self.by_free_gpu[free]:
                    if self._fits(self.nodes[name], pod):
                        return name
            return None
        names = self.node_names
        n = len(names)
        start = self._rr % n if n else 0
        for i in range(n):
            name = names[(start + i) % n]
            if self._fits(self.nodes[name], pod):
                self._rr = (start + i + 1) % n
                return name
        return None

    # -- the scheduling pass ---------------------------------------------------------------------------
    @property
    def idle(self) -> bool:
        """No scheduling pass running or queued (for tests and benchmarks)."""
        return not self.busy and not self._pending and not self.active and not self._retry_all

    async def reconcile(self, key: Key) -> None:
        self.busy = True
        try:
            await self._pass()
        finally:
            self.busy = False

    async def _pass(self) -> None:
        if self._retry_all:
            self._retry_all = False
            for k in self.unschedulable:
                self.active[k] = None
            self.unschedulable.clear()
        if not self.active:
            return
        batch = sorted(
            (k for k in self.active if k in self.pending),
            key=lambda k: (-self.pending[k].priority, self.pending[k].seq),
        )
        self.active.clear()
        failed_shapes: dict[bytes, str] = {}
        gen = self._capacity_gen
        seen_groups: set[tuple[str, str]] = set()
        for i, k in enumerate(batch):
            if i and i % 500 == 0:
                await asyncio.sleep(0)
                if gen != self._capacity_gen:
                    failed_shapes.clear()
                    gen = self._capacity_gen
            pod = self.pending.get(k)
            if pod is None or pod.gated or k in self.bound:
                continue
            if pod.group is not None:
                if pod.group not in seen_groups:
                    seen_groups.add(pod.group)
                    self._schedule_gang(pod.group)
                continue
            msg = failed_shapes.get(pod.shape)
            if msg is None:
                node = self._find_node(pod)
                if node is not None:
                    self._bind(pod, node)
                    continue
                msg = self.failure_message(pod)
                failed_shapes[pod.shape] = msg
            self._mark_unschedulable(pod, msg)

    def _schedule_gang(self, group: tuple[str, str]) -> None:
        keys = sorted(self.groups.get(group, ()))
        members = [self.pending[k] for k in keys if k in self.pending and not self.pending[k].gated]
        if not members:
            return
        bound = sum(1 for k in keys if k in self.bound)
        need = max(m.min_member for m in members)
        if bound + len(members) < need:
            for m in members:  # waiting for the rest of the gang: retried when a member appears
                self.active.pop(m.key, None)
                self.unschedulable.pop(m.key, None)
            return
        placed: list[tuple[PodInfo, str]] = []
        misses: list[tuple[PodInfo, str]] = []
        for m in members:
            node = self._find_node(m)
            if node is None:
                misses.append((m, self.failure_message(m)))
                continue
            self._assume(m, node, +1)
            placed.append((m, node))
        if bound + len(placed) >= need:
            for m, node in placed:
                self._assume(m, node, -1)
                self._bind(m, node)
            for m, msg in misses:
                self._mark_unschedulable(m, msg)
            return
        for m, node in placed:
            self._assume(m, node, -1)
        # the gang's message, of the cluster as it stands (not of the members placed on trial)
        msg = self.failure_message(misses[0][0] if misses else members[0], (group[1], need, bound + len(placed)))
        for m in members:
            self._mark_unschedulable(m, msg)

    def _assume(self, pod: PodInfo, node: str, sign: int) -> None:
        info = self.nodes[node]
        old = info.free(GPU)
        for k, v in pod.req.items():
            info.used[k] = info.used.get(k, 0) + sign * v
        info.npods += sign
        self._index_gpu(info, old)

    def _recorder(self, component: str) -> EventRecorder:
        rec = self._recorders.get(component)
        if rec is None:
            rec = self._recorders[component] = EventRecorder(self.sim, component)
        return rec

    def _bind(self, pod: PodInfo, node: str) -> None:
        rt = self.sim.registry.get("", "v1", "pods")
        ns, name = pod.key
        cur = self.store.find(POD_KEY, ns, name)
        if rt is None or cur is None:
            self._drop_pending(pod.key)
            return
        self._drop_pending(pod.key)
        self._account(pod.key, node, pod.req, pod.group)
        stamp = _now()

        def build(o: dict[str, Any]) -> dict[str, Any]:
            st = dict(o.get("status") or {})
            st["conditions"] = _with_condition(st.get("conditions"), {
                "type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp,
            })
            return {**o, "metadata": dict(o["metadata"]), "spec": {**(o.get("spec") or {}), "nodeName": node}, "status": st}

        if not self._write(rt, ns, name, build):
            return
        self.binds += 1
        self._recorder(pod.scheduler).event(
            cur.obj, "Normal", "Scheduled", f"Successfully assigned {ns}/{name} to {node}"
        )

    def _write(self, rt: Any, ns: str, name: str, build: Callable[[dict[str, Any]], dict[str, Any]]) -> bool:
        """Commit a new version of a pod built copy-on-write from the stored one.

        Stored objects are never modified in place, so sharing their unchanged parts is safe and
        saves the deep copy `store.mutate` makes (binding 20,000 pods is the hot path).
        """
        if self.store.find(POD_KEY, ns, name) is None:
            return False
        try:
            self.store.replace_built(rt, ns, name, build)
        except ApiError:
            return False
        return True

    def _mark_unschedulable(self, pod: PodInfo, msg: str) -> None:
        self.unschedulable[pod.key] = None
        self._set_condition(pod, "Unschedulable", msg, "Warning", "FailedScheduling")

    def _mark_gated(self, pod: PodInfo) -> None:
        self._set_condition(pod, "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates", None, None)

    def _set_condition(self, pod: PodInfo, reason: str, msg: str, ev_type: str | None, ev_reason: str | None) -> None:
        if pod.last_msg == msg:
            return
        pod.last_msg = msg
        rt = self.sim.registry.get("", "v1", "pods")
        ns, name = pod.key
        cur = self.store.find(POD_KEY, ns, name)
        if rt is None or cur is None:
            return
        stamp = _now()

        def build(o: dict[str, Any]) -> dict[str, Any]:
            st = dict(o.get("status") or {})
            st["conditions"] = _with_condition(st.get("conditions"), {
                "type": "PodScheduled", "status": "False", "lastProbeTime": None,
                "lastTransitionTime": stamp, "reason": reason, "message": msg,
            })
            st.setdefault("phase", "Pending")
            return {**o, "metadata": dict(o["metadata"]), "status": st}

        if not self._write(rt, ns, name, build):
            return
        if ev_type and ev_reason:
            self._recorder(pod.scheduler).event(cur.obj, ev_type, ev_reason, msg)


def install(sim: SimCluster) -> None:
    sim.add_controller(Scheduler(sim))
