"""Finished workloads whose ranks still hold GPUs (#24): the ranks of a failed job that go on running
(cleanPodPolicy None: the operator leaves them; a dead peer that does not stop the others, or a
collective that waits out its timeout), the pods a succeeded job leaves running.

    held = still_held(wl)             # None, or StillHeld(ranks, gpus, nodes, since...)
    held.sentence(now, "ranks")       # "2 ranks still running on 2 GPUs since it failed 18m ago:
                                      #  `ranks delete bert-crash -p team-b` frees them"

Pure: it reads only the workload's view. A rank counts while its pod is placed on a node, Running
and not being deleted (a Terminating pod is on its way out), with GPUs. `command` is how ranks runs
on the user's machine (`sessions.shell.ranks_command`, which the caller knows): the line runs as
pasted. Texts are raw cluster text: printers sanitise them.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..humanize import age
from ..humanize import gpus as fmt_gpus

if TYPE_CHECKING:
    from ..model_views import WorkloadView

FINISHED = ("Failed", "Succeeded")
_DONE_CONDITIONS = {"Failed": ("Failed",), "Succeeded": ("Succeeded", "Complete", "Completed")}


@dataclass(frozen=True, slots=True)
class StillHeld:
    namespace: str
    kind: str
    name: str
    project: str
    status: str  # Failed or Succeeded
    ranks: tuple[str, ...]  # the labels of the ranks still running
    gpus: float
    nodes: tuple[str, ...]
    since: float | None  # when it failed or finished (its condition's time)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.kind, self.name)

    def delete_line(self, command: str = "ranks") -> str:
        """The command that frees them, ready to paste."""
        return f"{command} delete {shlex.quote(self.name)} -p {shlex.quote(self.project or self.namespace)}"

    def sentence(self, now: float, command: str = "ranks") -> str:
        n = len(self.ranks)
        verb = "failed" if self.status == "Failed" else "finished"
        when = f"since it {verb} {age(now - self.since)} ago" if self.since else f"after it {verb}"
        return (f"{n} rank{'' if n == 1 else 's'} still running on {fmt_gpus(self.gpus)} "
                f"GPU{'' if self.gpus == 1 else 's'} {when}: `{self.delete_line(command)}` frees them")

    @property
    def mark(self) -> str:
        """A few words for a STATUS cell: `holds 2 GPUs`."""
        return f"holds {fmt_gpus(self.gpus)} GPU{'' if self.gpus == 1 else 's'}"


def still_held(wl: WorkloadView) -> StillHeld | None:
    """The ranks of a failed or succeeded workload that still run on GPUs; None when none do."""
    if wl.status not in FINISHED:
        return None
    left = [r for r in wl.ranks if r.phase == "Running" and r.node and r.gpus > 0 and not r.deleting]
    if not left:
        return None
    done = [c.at for c in wl.conditions if c.status == "True" and c.type in _DONE_CONDITIONS[wl.status]]
    return StillHeld(wl.namespace, wl.kind, wl.name, wl.project, wl.status, tuple(r.label for r in left),
                     sum(r.gpus for r in left), tuple(sorted({r.node for r in left})),
                     max((t for t in done if t), default=None))


def still_held_all(workloads: Iterable[WorkloadView]) -> list[StillHeld]:
    """Every finished workload still holding GPUs, most GPUs first."""
    found = [h for w in workloads if w.status in FINISHED and (h := still_held(w)) is not None]
    return sorted(found, key=lambda h: (-h.gpus, h.since or 0.0, h.namespace, h.name))
