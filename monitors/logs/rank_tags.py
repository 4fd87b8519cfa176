"""The ranks an MPI launcher's output speaks for. A launcher pod (MPIJob, a Trainer MPI runtime)
prints what every rank prints, each line tagged by the launcher: Open MPI's `mpirun --tag-output`
`[1,0]<stdout>:` (`[jobid,rank]<stream>:`; Open MPI 5 may put a namespace where the job id is),
horovodrun's `[0]<stdout>:`, and `<stderr>` for what the rank wrote there. A tagged line keeps the
launcher's label and text but carries the rank it was tagged with (and the stream), so that `ranks
logs W --rank 1` and the dashboard's `r` find rank 1's lines in the launcher's log too."""

from __future__ import annotations

import re

from .lines import Origin

_TAG = re.compile(rb"\[(?:[^\],\s]{1,64},)?(\d{1,7})\]<(stdout|stderr|stddiag)>:")
LAUNCHER_ROLES = frozenset({"launcher"})


def speaks_for_ranks(origin: Origin) -> bool:
    """The stream is a launcher's: its lines may be tagged with the ranks'."""
    return origin.role in LAUNCHER_ROLES


def rank_tag(content: bytes) -> tuple[int, str] | None:
    """(rank, stream) of a launcher's tagged line, or None."""
    if not content.startswith(b"["):
        return None
    m = _TAG.match(content)
    if m is None:
        return None
    return int(m.group(1)), "stderr" if m.group(2) == b"stderr" else "stdout"


class TaggedOrigins:
    """The origins of one launcher stream's tagged lines, one per (rank, stream), made once."""

    def __init__(self, launcher: Origin) -> None:
        self.launcher = launcher
        self._made: dict[tuple[int, str], Origin] = {}

    def of(self, content: bytes) -> Origin:
        tag = rank_tag(content)
        if tag is None:
            return self.launcher
        origin = self._made.get(tag)
        if origin is None:
            o = self.launcher
            origin = self._made[tag] = Origin(o.label, tag[0], o.role, o.replica_index, o.namespace, o.pod,
                                              o.container, tag[1])
        return origin
