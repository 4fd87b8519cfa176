"""Why a workload is pending, or what is wrong with it (#15): one plain-language answer.

    d = explain(model, ("runai-team-a", "PyTorchJob", "big-pretrain"))
    d.summary   # "needs 5 pods x 8 GPUs together; pool h100 has 4 nodes x 8 GPUs (32 in all); ..."
    d.findings  # (Finding("gang", "..."), Finding("fit", "..."), Finding("quota", "..."), ...)

For a pending workload it combines the gang (how many of the pods that must start together could
be placed now, and where), node fit (pool, GPU model, GPUs per node against what each pod asks),
taints the pods do not tolerate, cordoned and not-ready nodes, the project's GPU quota against its
allocation, and the scheduler's own words (FailedScheduling events, PodScheduled=False). For a
workload that runs or ran: ranks that are not ready and why, restarts, the rank that failed first.

Pure: it reads only what `LiveModel` already holds (records, views, events), never the network.
Free GPUs per node count the pods the model holds; when it holds only some namespaces' pods
(`cluster_pods=False`, the CLI's one-project listing) what it says of free GPUs is an upper bound.
Texts are raw cluster text: printers sanitise them (`monitors.sanitize.clean`).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..humanize import gpus as fmt_gpus
from ..records import EventRec, NodeRec, PodRec, Taint, Toleration, pairs
from .leftovers import still_held

if TYPE_CHECKING:
    from ..model import LiveModel
    from ..model_views import WorkloadView
    from ..workloads import WorkloadKey

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
NOT_READY_TAINT: Taint = ("node.kubernetes.io/not-ready", "", "NoSchedule")
CORDON_TAINT: Taint = ("node.kubernetes.io/unschedulable", "", "NoSchedule")
WAITING_TROUBLE = ("ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", "CreateContainerError",
                   "InvalidImageName", "RunContainerError", "ContainerCannotRun", "CrashLoopBackOff")
# kube-scheduler's per-node reasons, in plain words
SCHEDULER_WORDS = (
    (re.compile(r"Insufficient nvidia\.com/gpu"), "too few free GPUs"),
    (re.compile(r"Insufficient (\S+)"), r"too little free \1"),
    (re.compile(r"node\(s\) didn't match Pod's node affinity/selector"), "not matching the pods' node selector"),
    (re.compile(r"node\(s\) had untolerated taint \{(.*?)\}"), r"tainted \1 (not tolerated)"),
    (re.compile(r"node\(s\) were unschedulable"), "cordoned"),
    (re.compile(r"Too many pods"), "at their pod limit"),
)
_AVAILABLE = re.compile(r"^0/(\d+) nodes are available: (.*?)\.?(?: preemption:.*)?$", re.S)


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str  # gang, fit, taint, quota, scheduler, startup, events, degraded, restarts, failed, node, suspended, held
    text: str  # one plain sentence

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text}


@dataclass(frozen=True, slots=True)
class Diagnosis:
    namespace: str
    kind: str
    name: str
    status: str
    summary: str  # one line: "nothing wrong", or the main reasons joined by "; "
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        return not self.findings

    def kinds(self) -> list[str]:
        return [f.kind for f in self.findings]

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "kind": self.kind, "name": self.name, "status": self.status,
                "summary": self.summary, "findings": [f.to_json() for f in self.findings]}


# -- the parts ----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PodShape:
    """Pods still to place that ask the same: GPUs each, node selector, tolerations."""

    role: str
    count: int
    gpus: float
    selector: tuple[tuple[str, str], ...]
    tolerations: tuple[Toleration, ...]


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """Kubernetes' rule: the effect matches (or the toleration names none); Exists matches the key
    (every key when empty), Equal the key and value."""
    key, value, effect = taint
    for tkey, op, tvalue, teffect in tolerations:
        if teffect and teffect != effect:
            continue
        if op == "Exists":
            if not tkey or tkey == key:
                return True
        elif tkey == key and tvalue == value:
            return True
    return False


def _blocking_taints(node: NodeRec) -> list[Taint]:
    out = [t for t in node.taints if t[2] in BLOCKING_EFFECTS]
    if not node.ready and NOT_READY_TAINT[0] not in {t[0] for t in out}:
        out.append(NOT_READY_TAINT)
    if node.unschedulable and CORDON_TAINT[0] not in {t[0] for t in out}:
        out.append(CORDON_TAINT)
    return out


def node_refuses(node: NodeRec, d: PodShape) -> str:
    """Why a node can never take pods of `d` ("" when it can, capacity aside), in filter order."""
    for taint in _blocking_taints(node):
        if not tolerates(d.tolerations, taint):
            if taint == CORDON_TAINT:
                return "cordoned"
            if taint == NOT_READY_TAINT:
                return "not ready"
            return "taint " + _taint_text(taint)
    labels = dict(pairs(node.labels))
    if any(labels.get(k) != v for k, v in d.selector):
        return "selector"
    if d.gpus > node.gpus:
        return "too small"
    return ""


def _taint_text(t: Taint) -> str:
    key, value, effect = t
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def _g(v: float) -> str:
    return f"{fmt_gpus(v)} GPU{'' if v == 1 else 's'}"


def _plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else (many or word + 's')}"


def _selector_text(sel: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{k}={v}" for k, v in sel)


def scheduler_words(message: str) -> str:
    """kube-scheduler's "0/8 nodes are available: 4 Insufficient nvidia.com/gpu, 4 node(s) didn't
    match ..." in plain words ("none of 8 nodes can take a pod: 4 too few free GPUs, ...");
    any other message as it is."""
    m = _AVAILABLE.match(message.strip())
    if not m:
        return message.strip()
    parts = []
    for part in m.group(2).split(", "):
        count, _, reason = part.partition(" ")
        for pattern, words in SCHEDULER_WORDS:
            if pattern.fullmatch(reason):
                reason = pattern.sub(words, reason)
                break
        parts.append(f"{count} {reason}" if count.isdigit() else part)
    return f"none of {m.group(1)} nodes can take a pod: {', '.join(parts)}"


# -- pending -------------------------------------------------------------------------------------------

def _demands(model: LiveModel, wl: WorkloadView, pods: list[PodRec]) -> list[PodShape]:
    """The pods not placed yet, by shape; replicas the operator has not created yet count with
    what the job asks (selector and tolerations as their created siblings', else none)."""
    role_of = {r.pod: r.role for r in wl.ranks}
    shapes: Counter[tuple[str, float, tuple[tuple[str, str], ...], tuple[Toleration, ...]]] = Counter()
    seen_roles: Counter[str] = Counter()
    sample: dict[str, PodRec] = {}
    for p in pods:
        role = role_of.get(p.name, "")
        seen_roles[role] += 1
        sample.setdefault(role, p)
        if not p.node and not p.terminated and not p.deleting:
            shapes[(role, p.gpus, pairs(p.node_selector), p.tolerations)] += 1
    job = model.jobs.get(wl.key)
    # never more than the job asks in all, whatever its replica types' names (JobSet, batch Job...)
    budget = sum(rs.replicas for rs in job.replicas) - len(pods) if job is not None else 0
    for rs in job.replicas if job is not None else ():
        role = rs.rtype.lower()
        missing = min(budget, rs.replicas - seen_roles.get(role, 0))
        if missing > 0:
            budget -= missing
            like = sample.get(role) or next(iter(sample.values()), None)
            sel = pairs(like.node_selector) if like is not None else ()
            tol = like.tolerations if like is not None else ()
            shapes[(role, rs.gpus_per_replica, sel, tol)] += missing
    return [PodShape(role, n, g, sel, tol) for (role, g, sel, tol), n in shapes.items()]


def _free_gpus(model: LiveModel, nodes: list[NodeRec]) -> dict[str, float]:
    return {n.name: max(0.0, n.gpus - (model.nodes[n.name].gpus_allocated if n.name in model.nodes else 0.0))
            for n in nodes}


def _pending(model: LiveModel, wl: WorkloadView, pods: list[PodRec], events: list[EventRec],
             cluster_pods: bool, ask: _Ask) -> tuple[list[Finding], list[str]]:
    findings: list[Finding] = []
    clauses: list[str] = []
    job = model.jobs.get(wl.key)
    demands = _demands(model, wl, pods)
    nodes = sorted(model.node_recs.values(), key=lambda n: n.name)
    if demands:
        gang, clause = _gang(model, wl, pods, demands, nodes, cluster_pods,
                             job.min_available if job is not None else None)
        findings += gang
        clauses.append(clause)
    fit, fit_clauses = _fit(demands, pods, nodes)
    findings += fit
    clauses += fit_clauses
    quota = _quota(model, wl)
    if quota is not None:
        findings.append(quota[0])
        if quota[1]:
            clauses.append(quota[1])
    held, held_clause = _held_by(model, wl, demands, ask)
    findings += held
    if held_clause:
        clauses.append(held_clause)

    # the scheduler's own words, pods placed but not starting, other warnings
    sched = [e for e in events if e.reason == "FailedScheduling"]
    message = sched[-1].message if sched else next((p.unschedulable for p in pods if p.unschedulable), "")
    if message:
        times = sum(e.count for e in sched)
        findings.append(Finding("scheduler", f"the scheduler says {scheduler_words(message)}"
                                             + (f" ({_plural(times, 'time')})" if times > 1 else "") + "."))
        if not clauses:
            clauses.append(scheduler_words(message))
    labels = {r.pod: r.label for r in wl.ranks}
    for p in pods:
        if p.node and not p.terminated and (p.reason in WAITING_TROUBLE or p.reason.startswith("Init:")):
            label = labels.get(p.name, p.name)
            findings.append(Finding("startup", f"{label} is on {p.node} but does not start: {p.reason}"
                                               + (f" ({p.message.strip()})" if p.message.strip() else "") + "."))
            clauses.append(f"{label}: {p.reason}")
    starting = [p for p in pods if p.node and p.phase == "Pending" and p.reason not in WAITING_TROUBLE
                and not p.reason.startswith("Init:")]
    if starting and not demands:
        on = _counted([p.node for p in starting])
        findings.append(Finding("startup", f"{_plural(len(starting), 'pod')} placed ({', '.join(on)}) but not "
                                           f"started yet" + (f": {starting[0].reason}" if starting[0].reason else "")
                                           + "."))
        clauses.append(f"all pods placed; {_plural(len(starting), 'pod')} still starting")
    findings += _warnings(events, skip=("FailedScheduling",))
    if not findings and not clauses:
        clauses.append(wl.reason or "waiting; no reason known yet")
    return findings, clauses


@dataclass(frozen=True, slots=True)
class _Ask:
    """Who asks and how: `now`, the user (`me`: their own workloads come first and get a line that
    frees them), how ranks runs on their machine (`command`), the idle threshold (%)."""

    now: float
    me: str = ""
    command: str = "ranks"
    idle_threshold: float = 5.0


def _held_by(model: LiveModel, wl: WorkloadView, demands: list[PodShape], ask: _Ask) -> tuple[list[Finding], str]:
    """The workloads holding the GPUs the pods still to place need (`holders.gpu_fit`), the user's
    own first (the session the job was converted from before any): a finding each, and a clause
    naming the first."""
    from .holders import CONVERTED_FROM, GpuDemand, gpu_fit

    wanted = [GpuDemand(d.count, d.gpus, d.selector, d.tolerations) for d in demands if d.gpus > 0]
    if not wanted:
        return [], ""
    job = model.jobs.get(wl.key)
    origin = job.annotation(CONVERTED_FROM) if job is not None else ""
    source = (wl.namespace, wl.kind, origin) if origin else None  # (convert keeps the session's kind)
    fit = gpu_fit(model, wl.namespace, wanted, me=ask.me, now=ask.now, exclude={wl.key}, first=source,
                  idle_threshold=ask.idle_threshold)
    if fit.fits or not fit.holders or not fit.enough:  # (nothing freed would do: fit and quota say why)
        return [], ""
    findings = [Finding("held", h.sentence(ask.now, ask.command, source=h.key == source) + ".") for h in fit.holders]
    first = fit.holders[0]
    more = f" and {_plural(len(fit.holders) - 1, 'other')}" if len(fit.holders) > 1 else ""
    return findings, f"held by {first.what()}{more}"


def _gang(model: LiveModel, wl: WorkloadView, pods: list[PodRec], demands: list[PodShape], nodes: list[NodeRec],
          cluster_pods: bool, min_available: int | None) -> tuple[list[Finding], str]:
    """How many of the pods could be placed now and where (bin-packed as the scheduler does)."""
    placed_now = sum(1 for p in pods if p.node and not p.terminated)
    waiting = sum(d.count for d in demands)
    total = placed_now + waiting
    gang = min_available or 0
    by_gpus: Counter[float] = Counter()
    for d in demands:
        by_gpus[d.gpus] += d.count
    shape = " + ".join(f"{_plural(n, 'pod')} x {_g(g)}" if g else _plural(n, "pod")
                       for g, n in sorted(by_gpus.items(), key=lambda x: -x[0]))
    together = " together" if gang > 1 else ""
    clause = (f"needs {shape}{together}" if placed_now == 0 else
              f"{placed_now} of {total} pods placed, {waiting} more need {shape}")
    if not nodes:
        return [], clause
    free = _free_gpus(model, nodes)
    placed: list[str] = []
    for d in sorted(demands, key=lambda d: -d.gpus):
        fits = [n for n in nodes if not node_refuses(n, d)]
        for _ in range(d.count):
            room = [n for n in fits if free[n.name] >= d.gpus]
            if not room:
                break
            best = min(room, key=lambda n: (free[n.name], n.name))  # bin-packed, as the scheduler does
            free[best.name] -= d.gpus
            placed.append(best.name)
    could = placed_now + len(placed)
    if could >= total:
        verdict = ("all would fit now: the scheduler may not have retried yet" if cluster_pods else
                   "all might fit, but GPUs other projects use are not counted")
    elif gang and could >= gang:
        verdict = f"enough for the {gang} that must start together"
    else:
        verdict = f"the other {total - could} fit nowhere now"
    need = (f"needs all {total} pods placed together" if gang >= total else
            f"needs {gang} of its {total} pods placed together") if gang > 1 else f"has {total} pods"
    already = f"{placed_now} placed, " if placed_now else ""
    where = f" ({', '.join(_counted(placed))})" if placed else ""
    bound = "" if cluster_pods else "at most "
    return [Finding("gang", f"{wl.name} {need}; {already}{bound}{len(placed)} more could be placed now{where}; "
                            f"{verdict}.")], clause


def _fit(demands: list[PodShape], pods: list[PodRec], nodes: list[NodeRec]) -> tuple[list[Finding], list[str]]:
    """Node fit per distinct ask (GPUs, selector, tolerations): pool, GPU model, size, taints, cordons."""
    findings: list[Finding] = []
    clauses: list[str] = []
    asks: dict[tuple[float, tuple[tuple[str, str], ...], tuple[Toleration, ...]], list[PodShape]] = {}
    for d in demands:
        asks.setdefault((d.gpus, d.selector, d.tolerations), []).append(d)
    if demands and not nodes:
        return [Finding("fit", "no nodes were listed (there are none, or listing them is forbidden), "
                               "so node fit is unknown.")], []
    shapes = sorted(asks.items(), key=lambda kv: -kv[0][0])
    for (gpus, selector, _), group in [s for s in shapes if s[0][0] > 0] or shapes[:1]:
        d = group[0]
        roles = sorted({x.role for x in group if x.role})
        who = (f"each {roles[0]}" if len(roles) == 1 else "each pod") + f" asks {_g(gpus)}" + (
            f" on nodes with {_selector_text(selector)}" if selector else "")
        why = {n.name: node_refuses(n, d) for n in nodes}
        fit = [n for n in nodes if not why[n.name]]
        counts = Counter(why.values())
        if fit:
            cap = sum(n.gpus for n in fit)
            findings.append(Finding("fit", f"{who}; {_plural(len(fit), 'node')} can take one: "
                                           f"{_pool_text(fit)}; {_g(cap)} in all."))
            need = sum(x.gpus * x.count for x in demands if x.selector == selector) + sum(
                p.gpus for p in pods if p.node and not p.terminated and pairs(p.node_selector) == selector)
            if need > cap:
                biggest = max(n.gpus for n in fit)
                clauses.append(f"{_pool_name(fit, d)} has {_plural(len(fit), 'node')} x {_g(biggest)} "
                               f"({fmt_gpus(cap)} in all), fewer than the {fmt_gpus(need)} needed")
        else:
            findings.append(Finding("fit", f"{who}; no node can take one: " + ", ".join(
                _why_phrase(reason, n) for reason, n in sorted(counts.items())) + "."))
            if counts.get("too small"):
                biggest = max(n.gpus for n in nodes if why[n.name] == "too small")
                clauses.append(f"each pod asks {_g(gpus)}; the largest node"
                               f"{' matching ' + _selector_text(selector) if selector else ''} has {fmt_gpus(biggest)}")
            elif counts.get("selector") == len(nodes):
                clauses.append(f"no node has {_selector_text(selector)}")
        for reason, n in sorted(counts.items()):
            if reason.startswith("taint "):
                findings.append(Finding("taint", f"{_plural(n, 'node')} {'has' if n == 1 else 'have'} the "
                                                 f"{reason} that the pods do not tolerate."))
                if not fit:
                    clauses.append(f"{_plural(n, 'node')} tainted {reason[len('taint '):]} (not tolerated)")
            elif reason in ("cordoned", "not ready"):
                findings.append(Finding("fit", f"{_plural(n, 'node')} {'is' if n == 1 else 'are'} {reason}."))
                if not fit:
                    clauses.append(f"{_plural(n, 'node')} {reason}")
    return findings, clauses


def _counted(names: list[str]) -> list[str]:
    c = Counter(names)
    return [f"{n} x{k}" if k > 1 else n for n, k in sorted(c.items())]


def _pool_text(nodes: list[NodeRec]) -> str:
    groups = Counter((n.pool or "no pool", n.product or "no GPU model", n.gpus) for n in nodes)
    return "; ".join(f"{_plural(k, 'node')} in pool {pool} ({product}, {_g(g)} each)"
                     for (pool, product, g), k in sorted(groups.items()))


def _pool_name(nodes: list[NodeRec], d: PodShape) -> str:
    pools = sorted({n.pool for n in nodes if n.pool})
    if len(pools) == 1:
        return f"pool {pools[0]}"
    return f"the nodes with {_selector_text(d.selector)}" if d.selector else "the cluster"


def _why_phrase(reason: str, n: int) -> str:
    return {
        "selector": f"{n} not matching the node selector",
        "too small": f"{n} with fewer GPUs than that",
        "cordoned": f"{n} cordoned",
        "not ready": f"{n} not ready",
    }.get(reason, f"{n} with the {reason} not tolerated")


def _quota(model: LiveModel, wl: WorkloadView) -> tuple[Finding, str] | None:
    ns = wl.namespace
    quotas = [q for (qns, _), q in model.quotas.items() if qns == ns and q.gpu_hard is not None]
    if not quotas:
        return None
    hard = sum(q.gpu_hard or 0.0 for q in quotas)
    project = model.projects.get(ns)
    allocated = project.gpus_allocated if project is not None else wl.gpus_allocated
    used = sum(q.gpu_used or 0.0 for q in quotas)
    others = max(0.0, allocated - wl.gpus_allocated)
    text = (f"project {wl.project} has a GPU quota of {fmt_gpus(hard)}, {fmt_gpus(allocated)} allocated"
            + (f" ({fmt_gpus(used)} counted by the quota)" if used > allocated else "")
            + f"; {wl.name} asks {fmt_gpus(wl.gpus_requested)}")
    if wl.gpus_requested > hard:
        return Finding("quota", text + ", more than the whole quota."), \
            f"project {wl.project} quota {fmt_gpus(hard)}, allocated {fmt_gpus(allocated)}"
    if others + wl.gpus_requested > hard:
        return Finding("quota", text + f", more than the {fmt_gpus(max(0.0, hard - allocated))} left."), \
            f"project {wl.project} quota {fmt_gpus(hard)}, allocated {fmt_gpus(allocated)}"
    return Finding("quota", text + ": within the quota."), ""


def _warnings(events: list[EventRec], skip: tuple[str, ...] = ()) -> list[Finding]:
    """The latest Warning event of each other reason (FailedCreate, FailedMount, BackOff...)."""
    latest: dict[str, EventRec] = {}
    for e in events:
        if e.type == "Warning" and e.reason not in skip:
            latest[e.reason] = e
    out = []
    for e in sorted(latest.values(), key=lambda e: e.last or 0.0)[-3:]:
        kind = "quota" if "exceeded quota" in e.message else "events"
        out.append(Finding(kind, f"{e.object_name}: {e.reason}: {e.message.strip()}"
                                 + (f" ({_plural(e.count, 'time')})" if e.count > 1 else "")))
    return out


# -- running, finished ---------------------------------------------------------------------------------

def _ranks(model: LiveModel, wl: WorkloadView, pods: dict[str, PodRec], events: list[EventRec],
           now: float = 0.0, command: str = "ranks") -> tuple[list[Finding], list[str]]:
    findings: list[Finding] = []
    clauses: list[str] = []
    bad = [r for r in wl.ranks if not r.ready and r.phase not in ("Succeeded", "Failed")]
    live = wl.status not in ("Succeeded", "Failed")
    for r in bad if live else ():
        why = r.reason or r.phase
        text = f"{r.label} is not ready: {why}" + (f" ({r.message})" if r.message else "")
        if r.node:
            text += f", on {r.node}"
        findings.append(Finding("degraded", text + "."))
    if bad and live:
        clauses.append(f"{len(wl.ranks) - len(bad)}/{len(wl.ranks)} ranks ready; "
                       + ", ".join(f"{r.label}: {r.reason or r.phase}" for r in bad[:3])
                       + (" ..." if len(bad) > 3 else ""))
    for r in sorted((r for r in wl.ranks if r.restarts), key=lambda r: -r.restarts):
        last = _last_exit(pods.get(r.pod))
        findings.append(Finding("restarts", f"{r.label} restarted {_plural(r.restarts, 'time')}"
                                            + (f"; last exit: {last}" if last else "") + "."))
    restarts = sum(r.restarts for r in wl.ranks)
    if restarts:
        clauses.append(f"{_plural(restarts, 'restart')}")
    # (a rank its pod's deletion stopped, as the operator's clean-up does, did not fail)
    failed = [r for r in wl.ranks if not r.stopped and (r.phase == "Failed" or r.exit_code not in (None, 0))]
    ff = wl.first_failure if failed or wl.status == "Failed" else None  # else a restart's cause, said above
    if ff is not None:
        findings.append(Finding("failed", f"{ff.label} failed first: exit code {ff.exit_code} ({ff.reason})"
                                          + (f": {ff.message.strip()}" if ff.message.strip() else "")
                                          + (f", {_plural(len(failed), 'rank')} failed in all" if len(failed) > 1
                                             else "") + "."))
        clauses.append(f"{ff.label} failed first (exit {ff.exit_code}, {ff.reason})")
    elif failed:
        r = failed[0]
        findings.append(Finding("failed", f"{r.label} failed" + (f": {r.reason}" if r.reason else "") + "."))
        clauses.append(f"{r.label} failed")
    if wl.status == "Failed" and not failed:
        cond = next((c for c in reversed(wl.conditions) if c.type == "Failed" and c.status == "True"), None)
        why = (cond.message or cond.reason) if cond else wl.reason
        findings.append(Finding("failed", f"the job failed: {why or 'no reason given'}."))
        clauses.append(f"failed: {why}" if why else "failed")
    held = still_held(wl)
    if held is not None:  # (a failed job's surviving ranks, a finished one's left running: their GPUs)
        findings.append(Finding("held", held.sentence(now, command) + "."))
        clauses.append(f"{_plural(len(held.ranks), 'rank')} still {'holds' if len(held.ranks) == 1 else 'hold'} "
                       f"{_g(held.gpus)}")
    if wl.status == "Restarting" and wl.reason:
        findings.append(Finding("restarts", f"the operator is restarting the job: {wl.reason}."))
    down = sorted({r.node for r in wl.ranks if r.node and r.phase == "Running"
                   and r.node in model.node_recs and not model.node_recs[r.node].ready})
    for node in down:
        findings.append(Finding("node", f"node {node}, where ranks run, is not ready."))
        clauses.append(f"node {node} not ready")
    if live:
        findings += [f for f in _warnings(events, skip=("FailedScheduling", "BackOff"))
                     if f.kind != "events" or bad]
    return findings, clauses


def _last_exit(p: PodRec | None) -> str:
    if p is None or not p.exits:
        return ""
    ex = max(p.exits, key=lambda e: e.finished_at or 0.0)
    return f"{ex.reason} (exit code {ex.exit_code})"


# -- the answer ----------------------------------------------------------------------------------------

def nodes_to_count(model: LiveModel, key: WorkloadKey) -> list[str]:
    """For a pending workload: the nodes that could take one of its GPU pods and show room for it
    with the pods the model holds: those whose other pods (other projects') decide whether it fits
    there. [] when it is not pending or asks no GPU."""
    wl = model.workloads.get(key)
    if wl is None or wl.status != "Pending":
        return []
    pods = [model.pods[pk] for pk in sorted(model.workload_pods.get(key, ())) if pk in model.pods]
    return nodes_with_room(model, [d for d in _demands(model, wl, pods) if d.gpus > 0])


def nodes_with_room(model: LiveModel, demands: Iterable[PodShape]) -> list[str]:
    """The nodes that could take a pod of `demands` and show room for it with the pods the model
    holds (a job about to be submitted: `convert`'s check; a pending one: `nodes_to_count`)."""
    shapes = list(demands)
    nodes = sorted(model.node_recs.values(), key=lambda n: n.name)
    free = _free_gpus(model, nodes)
    return [n.name for n in nodes if any(free[n.name] >= d.gpus and not node_refuses(n, d) for d in shapes)]


def explain(model: LiveModel, key: WorkloadKey, *, cluster_pods: bool = True, now: float | None = None,
            command: str = "ranks", me: str = "", idle_threshold: float = 5.0) -> Diagnosis:
    """Why the workload `key` (namespace, kind, name) is pending, or what is wrong with it.

    `cluster_pods`: whether `model.pods` holds every namespace's pods (else free GPUs per node
    are an upper bound, and said to be). `command`: how ranks runs on the user's machine, for the
    lines it offers to paste (`sessions.shell.ranks_command`); `me`: the user, whose own workloads
    holding the GPUs a pending one needs are named first (`holders`); `idle_threshold`: under this
    % a session's GPUs are idle. KeyError when the model has no such workload."""
    now = time.time() if now is None else now
    wl = model.workloads[key]
    pods = [model.pods[pk] for pk in sorted(model.workload_pods.get(key, ())) if pk in model.pods]
    events = model.events_for(wl, 10_000)
    if wl.status == "Pending":
        findings, clauses = _pending(model, wl, pods, events, cluster_pods, _Ask(now, me, command, idle_threshold))
    elif wl.status == "Suspended":
        findings = [Finding("suspended", f"{wl.name} is suspended: resume it to schedule its pods"
                                         + (f" ({wl.reason})" if wl.reason else "") + ".")]
        clauses = ["suspended"]
    else:
        findings, clauses = _ranks(model, wl, {p.name: p for p in pods}, events, now, command)
    if not findings and not clauses:
        summary = "nothing wrong" + ("; it finished" if wl.status == "Succeeded" else "")
    else:
        summary = "; ".join(dict.fromkeys(clauses)) or findings[0].text.rstrip(".")
    return Diagnosis(wl.namespace, wl.kind, wl.name, wl.status, summary, tuple(findings))

