"""An autopsy as text (the tree, then its groups, smallest first, then what is not a rank and what
could not be read) and as JSON (`groups` with `ranks` and `frames`, the `tree`, `not_ranks`,
`unread`). Every string in it was cleaned when it was parsed; the caller prints the text as plain
text (never markup) and the JSON through `monitors.sanitize.json_safe`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitors.sanitize import clean

from .collect import Autopsy
from .dumps import Frame
from .tree import Group, Node, count_ranks, groups, lines, merge, rank_ranges

RANGES_WIDTH = 24


@dataclass(frozen=True)
class PodInfo:
    """What the rest of ranks knows of a pod: its last log line and when, its GPUs' utilisation."""

    last_line: str | None = None
    last_at: float | None = None
    gpu_util: float | None = None


@dataclass(frozen=True)
class GroupView:
    group: Group
    odd: bool  # smaller than the largest group: an odd one out
    pods: tuple[str, ...]  # the labels of its ranks' pods
    last_line: str | None
    last_at: float | None
    gpu_util: float | None


def annotate(a: Autopsy, info: dict[str, PodInfo]) -> tuple[Node, list[GroupView]]:
    root = merge(a.by_rank, all_threads=a.all_threads)
    label_of = {s.rank: s.label for s in a.stacks}
    found = groups(root)
    biggest = max((len(g.ranks) for g in found), default=0)
    out: list[GroupView] = []
    for g in found:
        pods = tuple(sorted({label_of[r] for r in g.ranks if r in label_of}))
        known = [info[p] for p in pods if p in info]
        newest = max((i for i in known if i.last_at is not None), key=lambda i: i.last_at or 0.0, default=None)
        utils = [i.gpu_util for i in known if i.gpu_util is not None]
        out.append(GroupView(g, len(g.ranks) < biggest, pods, newest.last_line if newest else None,
                             newest.last_at if newest else None, sum(utils) / len(utils) if utils else None))
    return root, out


def _ranges(ranks: set[int] | tuple[int, ...]) -> str:
    text = rank_ranges(ranks)
    return text if len(text) <= RANGES_WIDTH else text[: RANGES_WIDTH - 2] + "…]"


def frame_text(f: Frame) -> str:
    return f"{f.name}  {f.where}" if f.file else f.name


def since(at: float | None, now: float) -> str:
    if at is None:
        return "no log line"
    return f"last log {max(0, round(now - at))}s ago"


def group_line(v: GroupView, now: float) -> str:
    """One line: the group's ranks, where they are, their last log line and GPU use."""
    where = v.group.where
    at = f"in {where.name} ({where.where})" if where is not None and where.file else (
        f"in {where.name}" if where is not None else "no frame")
    thread = f' thread "{v.group.thread}"' if v.group.thread else ""
    gpu = f"GPU {v.gpu_util:.0f}%" if v.gpu_util is not None else "GPU -"
    said = f': "{clean(v.last_line, limit=80)}"' if v.last_line else ""
    mark = "!" if v.odd else " "
    return (f"{mark} {count_ranks(len(v.group.ranks))} {rank_ranges(v.group.ranks)}{thread} {at}; "
            f"{since(v.last_at, now)}{said}; {gpu}")


def text(a: Autopsy, info: dict[str, PodInfo], now: float) -> str:
    root, views = annotate(a, info)
    read = len(a.stacks)
    out = [f"{a.workload} ({a.namespace}): {count_ranks(read)} read in {a.seconds:.1f}s, "
           f"{len(views)} group{'s' if len(views) != 1 else ''}"]
    rows = lines(root)
    width = max((len(_ranges(n.ranks)) for _, n, _ in rows), default=0)
    for depth, node, odd in rows:
        out.append(f"{'!' if odd else ' '}{len(node.ranks):>4} {_ranges(node.ranks):<{width}}  "
                   f"{'  ' * depth}{frame_text(node.frame)}")
    if views:
        out.append("Groups, smallest first (! an odd one out):")
        out.extend(group_line(v, now) for v in views)
    if a.others:
        out.append("Not ranks: " + "; ".join(f"{pod}: {o.name} (pid {o.pid}, {o.role})" for pod, o in a.others))
    for u in a.unread:
        who = f"rank {u.rank} ({u.label})" if u.rank is not None else u.label
        out.append(f"Not read: {who}: {u.why}")
    out.extend(f"Missing: {p}" for p in a.problems)
    return "\n".join(out)


def _frame_json(f: Frame) -> dict[str, Any]:
    return {"name": f.name, "file": f.file, "line": f.line}


def to_json(a: Autopsy, info: dict[str, PodInfo], now: float) -> dict[str, Any]:
    root, views = annotate(a, info)

    def node_json(n: Node) -> dict[str, Any]:
        return {**_frame_json(n.frame), "ranks": sorted(n.ranks), "count": len(n.ranks),
                "children": [node_json(c) for c in n.ordered()]}

    return {
        "workload": a.workload, "namespace": a.namespace, "taken_at": a.taken_at, "seconds": round(a.seconds, 3),
        "ranks_read": sorted(s.rank for s in a.stacks),
        "groups": [{
            "ranks": list(v.group.ranks), "ranges": rank_ranges(v.group.ranks), "odd": v.odd,
            "thread": v.group.thread or None, "frames": [_frame_json(f) for f in v.group.frames],
            "pods": list(v.pods), "last_log": v.last_line, "last_log_at": v.last_at,
            "seconds_since_log": round(now - v.last_at, 1) if v.last_at is not None else None,
            "gpu_util": v.gpu_util,
        } for v in views],
        "tree": [node_json(c) for c in root.ordered()],
        "processes": [{"rank": s.rank, "local_rank": s.local_rank, "pod": s.label, "pid": s.pid, "name": s.name}
                      for s in a.stacks],
        "not_ranks": [{"pod": pod, "pid": o.pid, "name": o.name, "role": o.role} for pod, o in a.others],
        "unread": [{"pod": u.label, "rank": u.rank, "why": u.why} for u in a.unread],
        "problems": list(a.problems),
    }
