"""The rank prefixes of an MPI launcher's output (`monitors.logs.rank_tags`): Open MPI's
`--tag-output` (`[jobid,rank]<stream>:`, the job id a number or, in Open MPI 5, a namespace's
part), horovodrun's `[rank]<stream>:`; anything else is the launcher's own line."""

from __future__ import annotations

import pytest

from monitors.logs.lines import Origin
from monitors.logs.rank_tags import TaggedOrigins, rank_tag


@pytest.mark.parametrize(("line", "tag"), [
    (b"[1,0]<stdout>:step 1", (0, "stdout")),
    (b"[1,12]<stderr>:Traceback (most recent call last):", (12, "stderr")),
    (b"[3]<stdout>:epoch 2", (3, "stdout")),
    (b"[prterun-launcher-123@1,5]<stdout>: hello", (5, "stdout")),
    (b"[1,2]<stddiag>:note", (2, "stdout")),
    (b"step 1 loss 2.3", None),
    (b"[INFO] starting", None),
    (b"[1,0]: no stream named", None),
    (b" [1,0]<stdout>:indented", None),
    (b"[a b,1]<stdout>:a space in the job id", None),
])
def test_rank_tags(line: bytes, tag: tuple[int, str] | None) -> None:
    assert rank_tag(line) == tag


def test_a_tagged_line_keeps_the_launcher_s_label_and_carries_its_rank() -> None:
    launcher = Origin("launcher", None, "launcher", None, "ns", "job-launcher-x", "mpi", None)
    origins = TaggedOrigins(launcher)
    one = origins.of(b"[1,1]<stdout>:step 3")
    assert (one.label, one.rank, one.role, one.pod, one.stream) == ("launcher", 1, "launcher", "job-launcher-x",
                                                                    "stdout")
    assert origins.of(b"[1,1]<stdout>:step 4") is one  # made once
    assert origins.of(b"mpirun: all ranks done") is launcher
