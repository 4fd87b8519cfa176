"""Who holds the GPUs a job needs (#24, item 5): whether a GPU demand fits now, and which workloads
hold what it would need, the user's own first (an interactive session, idle or not, with its age).

    fit = gpu_fit(model, "runai-team-a", GpuDemand(pods=2, gpus_per_pod=1, selector=(("node-pool", "a100"),)),
                  me="alice", exclude={new_job_key})
    fit.fits                     # True: free GPUs (and the project's quota) take every pod now
    fit.reason                   # "" / "gpus" (no node has room) / "quota" (the project's quota is used)
    for h in fit.holders:        # the fewest holders whose GPUs it would need, the user's own first
        h.sentence(now, "ranks") # "your interactive session hvd (idle 12m, 3 GPUs on gpu-0..gpu-2) holds what
                                 #  this job needs: `ranks delete hvd -p team-a` frees them"
    fit.enough                   # freeing them would make it fit (False: it still would not)

`why` calls it for a pending workload (its pods not placed yet, `exclude` = itself; `first` = the
session it was converted from, which is named as such); `convert` calls it for the job it is about
to submit (`first` = the session converted, whose GPUs it offers to free). Pure: it reads only
what `LiveModel` holds (nodes, pods, workload views, quotas, the GPU history for idleness), never
the network. Which nodes could take a pod is decided as `why` decides node fit (taints and
tolerations, cordons, not ready, the node selector, GPUs per node); pods are placed bin-packed, as
the scheduler does. Free GPUs count the pods the model holds: with one project's pods listed, GPUs
other projects use are not seen (the caller says so). Texts are raw cluster text: printers
sanitise them.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..humanize import age
from ..humanize import gpus as fmt_gpus
from ..records import NodeRec, Toleration
from .idle import DEFAULT_THRESHOLD, session_idle_since, session_reads_busy
from .why import PodShape, node_refuses

if TYPE_CHECKING:
    from ..model import LiveModel
    from ..model_views import WorkloadView

WorkloadKey = tuple[str, str, str]
CONVERTED_FROM = "ranks/converted-from"  # a job's annotation: the session `ranks convert` made it from


@dataclass(frozen=True, slots=True)
class GpuDemand:
    """`pods` pods of `gpus_per_pod` GPUs each, on nodes with `selector` (a node pool), tolerating
    `tolerations`."""

    pods: int
    gpus_per_pod: float
    selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    @property
    def gpus(self) -> float:
        return self.pods * self.gpus_per_pod


@dataclass(frozen=True, slots=True)
class Holder:
    """A workload holding GPUs the demand could use."""

    namespace: str
    kind: str
    name: str
    project: str
    user: str
    interactive: bool
    mine: bool
    gpus: float  # GPUs it holds that count (on the nodes the demand could use, or in the project's quota)
    nodes: tuple[str, ...]
    created: float | None
    idle_since: float | None  # an interactive session whose GPUs all read idle: since when
    busy: bool = False  # an interactive session whose GPUs read (some of them busy); neither: not read yet

    @property
    def key(self) -> WorkloadKey:
        return (self.namespace, self.kind, self.name)

    def what(self) -> str:
        """`your interactive session hvd`, `bob's PyTorchJob team-b/llama`."""
        thing = "interactive session" if self.interactive else self.kind
        if self.mine:
            return f"your {thing} {self.name}"
        whose = f"{self.user}'s " if self.user else ""
        return f"{whose}{thing} {self.project}/{self.name}"

    def sentence(self, now: float, command: str = "ranks", *, source: bool = False) -> str:
        """What it holds and, when it is the user's, the line that frees it; `source`: the session
        the job was converted from, said so."""
        state = []
        if self.idle_since is not None:
            state.append(f"idle {age(now - self.idle_since)}")
        elif self.interactive and self.busy:
            state.append("in use")
        if self.created is not None:
            state.append(f"started {age(now - self.created)} ago")
        state.append(f"{fmt_gpus(self.gpus)} GPU{'' if self.gpus == 1 else 's'} on {node_span(self.nodes)}")
        text = (f"{'this job was converted from ' if source else ''}{self.what()} ({', '.join(state)})"
                f"{', which' if source else ''} holds what this job needs")
        if self.mine:
            text += (f": `{command} delete {shlex.quote(self.name)} -p {shlex.quote(self.project or self.namespace)}`"
                     " frees them")
        return text


@dataclass(frozen=True, slots=True)
class GpuFit:
    fits: bool  # every pod could be placed now, within the project's quota
    reason: str  # "" when it fits; "gpus": no room on the nodes it may use; "quota": the project's quota
    pods: int  # pods asked for
    placed: int  # pods the free GPUs would take now
    holders: tuple[Holder, ...] = ()  # whose GPUs it would need, the user's own first
    enough: bool = False  # freeing the holders' GPUs would make it fit


def node_span(nodes: Sequence[str]) -> str:
    """`gpu-0`, `gpu-0, gpu-3`, `gpu-0..gpu-2` (three or more, first to last)."""
    nodes = sorted(nodes)
    if len(nodes) <= 2:
        return ", ".join(nodes) or "no node"
    return f"{nodes[0]}..{nodes[-1]}"


def _place(demands: Sequence[GpuDemand], free: dict[str, float], fits_on: dict[int, list[NodeRec]]) -> int:
    """Pods bin-packed onto `free` (changed), biggest asks first: how many were placed."""
    placed = 0
    for i, d in sorted(enumerate(demands), key=lambda x: -x[1].gpus_per_pod):
        for _ in range(d.pods):
            room = [n for n in fits_on[i] if free.get(n.name, 0.0) >= d.gpus_per_pod]
            if not room:
                break
            best = min(room, key=lambda n: (free[n.name], n.name))
            free[best.name] -= d.gpus_per_pod
            placed += 1
    return placed


def _quota_left(model: LiveModel, namespace: str) -> float | None:
    quotas = [q.gpu_hard for (ns, _), q in model.quotas.items() if ns == namespace and q.gpu_hard is not None]
    if not quotas:
        return None
    project = model.projects.get(namespace)
    return sum(quotas) - (project.gpus_allocated if project is not None else 0.0)


def gpu_fit(model: LiveModel, namespace: str, demand: GpuDemand | Sequence[GpuDemand], *, me: str = "",
            now: float | None = None, exclude: Collection[WorkloadKey] = (), first: WorkloadKey | None = None,
            idle_threshold: float = DEFAULT_THRESHOLD) -> GpuFit:
    """Whether `demand` (in `namespace`) fits the cluster's free GPUs and the project's quota now,
    and, when it does not, the fewest workloads whose GPUs it would need, the user's (`me`) own
    first: interactive sessions (idle ones first), then their other workloads, then others' (most
    GPUs first). `exclude`: workloads not to count as holders (the pending job itself); `first`: the
    one to count before any other (the session a convert makes the job from, which it offers to
    delete)."""
    now = time.time() if now is None else now
    demands = [demand] if isinstance(demand, GpuDemand) else list(demand)
    demands = [d for d in demands if d.pods > 0]
    pods = sum(d.pods for d in demands)
    nodes = sorted(model.node_recs.values(), key=lambda n: n.name)
    fits_on = {i: [n for n in nodes if not node_refuses(n, PodShape("", d.pods, d.gpus_per_pod, d.selector,
                                                                     d.tolerations))]
               for i, d in enumerate(demands)}
    usable = {n.name for ns in fits_on.values() for n in ns}
    free = {n.name: max(0.0, n.gpus - (model.nodes[n.name].gpus_allocated if n.name in model.nodes else 0.0))
            for n in nodes}
    def placeable(free: dict[str, float]) -> int:
        # (no node listed, none there or forbidden to the user: their room is not known, so only the
        # quota is judged, and nothing is said of free GPUs; the SSH door's users may not list nodes)
        return _place(demands, free, fits_on) if nodes else pods

    placed = placeable(dict(free))
    asked = sum(d.gpus for d in demands)
    left = _quota_left(model, namespace)
    over_quota = left is not None and asked > left + 1e-9
    if placed >= pods and not over_quota:
        return GpuFit(True, "", pods, placed)
    reason = "gpus" if placed < pods else "quota"
    # who holds GPUs on the nodes it could use (for the quota: in its project), by workload
    held: dict[WorkloadKey, dict[str, float]] = {}
    for pk, p in model.pods.items():
        key = model.pod_workload.get(pk)
        if (key is None or key in exclude or not p.node or p.terminated or p.deleting or p.gpus <= 0
                or p.phase == "Pending"):
            continue
        if (reason == "gpus" and p.node in usable) or (reason == "quota" and p.namespace == namespace):
            per_node = held.setdefault(key, {})
            per_node[p.node] = per_node.get(p.node, 0.0) + p.gpus
    holders = [h for key, per_node in held.items()
               if (h := _holder(model, key, per_node, me, now, idle_threshold)) is not None]
    holders.sort(key=lambda h: (h.key != first, not h.mine, not h.interactive, h.idle_since is None, -h.gpus, h.namespace, h.name))
    chosen: list[Holder] = []
    enough = False
    freed = dict(free)
    quota = left
    for h in holders:
        chosen.append(h)
        for node, g in held[h.key].items():
            freed[node] = freed.get(node, 0.0) + g
        if quota is not None and h.namespace == namespace:
            quota += h.gpus
        if placeable(dict(freed)) >= pods and (quota is None or asked <= quota + 1e-9):
            enough = True
            break
    return GpuFit(False, reason, pods, placed, tuple(chosen), enough)


def _holder(model: LiveModel, key: WorkloadKey, per_node: dict[str, float], me: str, now: float,
            idle_threshold: float) -> Holder | None:
    wl: WorkloadView | None = model.workloads.get(key)
    if wl is None:
        return None
    idle = session_idle_since(wl, model.gpu_history, now, idle_threshold) if wl.interactive else None
    busy = idle is None and wl.interactive and session_reads_busy(wl, idle_threshold)
    return Holder(wl.namespace, wl.kind, wl.name, wl.project, wl.user, wl.interactive, bool(me) and wl.user == me,
                  sum(per_node.values()), tuple(sorted(per_node)), wl.created, idle, busy)
