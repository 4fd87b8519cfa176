"""Stacks merged into a prefix tree, STAT-style: each frame with the set of ranks whose stack passes
through it, branches where they diverge, smallest branch first (the odd ones out lead); each leaf
a group of ranks stopped in the same place. Pure: no I/O.

A rank with several threads read (`--all-threads`) contributes one path per thread, each starting
with the thread's name as a frame of its own, so that threads of the same name merge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .dumps import Frame, ThreadStack


def rank_ranges(ranks: Iterable[int]) -> str:
    """`[0-16,18-63]`: sorted, runs of consecutive ranks as a range."""
    nums = sorted(set(ranks))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return "[" + ",".join(parts) + "]"


def count_ranks(n: int) -> str:
    return f"{n} rank" if n == 1 else f"{n} ranks"


@dataclass
class Node:
    frame: Frame
    ranks: set[int] = field(default_factory=set)
    children: list[Node] = field(default_factory=list)
    ends: set[int] = field(default_factory=set)  # the ranks whose path ends here (their innermost frame)

    def child(self, frame: Frame) -> Node:
        for c in self.children:
            if c.frame == frame:
                return c
        c = Node(frame)
        self.children.append(c)
        return c

    def ordered(self) -> list[Node]:
        """Children smallest first (the odd ones out), then by where they are, for a stable order."""
        return sorted(self.children, key=lambda c: (len(c.ranks), min(c.ranks, default=0), c.frame.name))


@dataclass(frozen=True)
class Group:
    """Ranks whose (chosen threads') stacks are the same, down to the innermost frame."""

    ranks: tuple[int, ...]
    frames: tuple[Frame, ...]  # outermost first
    thread: str = ""  # with --all-threads: the thread

    @property
    def where(self) -> Frame | None:
        return self.frames[-1] if self.frames else None


ROOT = Frame("", "", None)


def thread_frame(name: str) -> Frame:
    return Frame(f'thread "{name}"', "", None)


def merge(stacks: Mapping[int, Sequence[ThreadStack]], *, all_threads: bool = False) -> Node:
    """The prefix tree of every rank's stacks (rank -> its chosen threads)."""
    root = Node(ROOT)
    for rank, threads in stacks.items():
        root.ranks.add(rank)
        for t in threads:
            path: list[Frame] = [thread_frame(t.thread)] if all_threads else []
            path.extend(t.frames)
            node = root
            for f in path:
                node = node.child(f)
                node.ranks.add(rank)
            node.ends.add(rank)
    return root


def groups(root: Node) -> list[Group]:
    """Each distinct stack and its ranks, smallest group first."""
    out: list[Group] = []

    def walk(node: Node, path: tuple[Frame, ...]) -> None:
        here = path + ((node.frame,) if node is not root else ())
        if node.ends:
            thread = ""
            frames = here
            if frames and frames[0].name.startswith('thread "') and not frames[0].file:
                thread, frames = frames[0].name[8:-1], frames[1:]
            out.append(Group(tuple(sorted(node.ends)), frames, thread))
        for c in node.ordered():
            walk(c, here)

    walk(root, ())
    return sorted(out, key=lambda g: (len(g.ranks), g.ranks))


def lines(root: Node) -> list[tuple[int, Node, bool]]:
    """(depth, node, odd) of every frame, depth first, the smaller branches first; `odd`: the node
    or one above it has a sibling through which more ranks pass (an odd one out's branch)."""
    out: list[tuple[int, Node, bool]] = []

    def walk(node: Node, depth: int, odd: bool) -> None:
        kids = node.ordered()
        most = max((len(c.ranks) for c in kids), default=0)
        for c in kids:
            mine = odd or len(c.ranks) < most
            out.append((depth, c, mine))
            walk(c, depth + 1, mine)

    walk(root, 0, False)
    return out
