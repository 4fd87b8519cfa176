"""Rank/role selection, include/exclude/highlight regexes, durations for --since."""

from __future__ import annotations

import pytest

from monitors.logs.filters import FilterError, LineFilter, split_list
from monitors.logs.lines import LogLine, Origin
from monitors.model_views import RankView
from tui.cli.logs import parse_duration


def rank(label: str, role: str, r: int | None, pod: str = "") -> RankView:
    return RankView(namespace="ns", pod=pod or f"job-{label}", role=role, rank=r, replica_index=0, label=label,
                    phase="Running", reason="", message="", restarts=0, ready=True, node="n", pod_ip="",
                    gpus=1, lead=False, created=None)


def line(text: str, label: str = "worker-0", role: str = "worker", r: int | None = 1) -> LogLine:
    return LogLine(1, text.encode(), Origin(label=label, role=role, rank=r, pod=f"job-{label}"))


def test_rank_and_role_selection() -> None:
    f = LineFilter.build(ranks=["0,worker-3", "job-worker-5"], roles=None)
    assert f.wants_rank(rank("master-0", "master", 0))
    assert f.wants_rank(rank("worker-3", "worker", 4))
    assert f.wants_rank(rank("worker-5", "worker", 6))
    assert not f.wants_rank(rank("worker-1", "worker", 2))
    assert f.unknown_ranks([rank("master-0", "master", 0), rank("worker-3", "worker", 4)]) == ["job-worker-5"]
    roles = LineFilter.build(roles="Worker,launcher")
    assert roles.wants_rank(rank("worker-1", "worker", 2)) and roles.wants_rank(rank("launcher", "launcher", None))
    assert not roles.wants_rank(rank("master-0", "master", 0))
    assert not roles.matches(line("x", "master-0", "master", 0)) and roles.matches(line("x"))
    collapsed = line("same", "master-0", "master", 0)
    collapsed.ranks = ("master-0", "worker-3")
    assert LineFilter.build(ranks="worker-3").matches(collapsed)


def test_regexes() -> None:
    f = LineFilter.build(include=r"loss=\d", exclude="debug")
    assert f.matches(line("step 1 loss=3.2"))
    assert not f.matches(line("step 1 acc=0.3"))
    assert not f.matches(line("debug loss=3"))
    assert f.highlights(line("loss=1 loss=2")) == ((0, 6, "bold reverse"), (7, 13, "bold reverse"))
    # regexes see the display text, not escape codes
    assert LineFilter.build(include="^red$").matches(line("\x1b[31mred\x1b[0m"))
    with pytest.raises(FilterError, match="invalid --grep regex"):
        LineFilter.build(include="(")
    with pytest.raises(FilterError, match="invalid --exclude regex"):
        LineFilter.build(exclude="[")


def test_split_list() -> None:
    assert split_list(["a,b", " c ", "a"]) == ("a", "b", "c")
    assert split_list(None) == ()


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600), ("1h30m", 5400), ("45s", 45), ("1.5h", 5400),
                                                ("500ms", 0.5)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "10", "ten minutes", "10 m", "m10", "10x"])
def test_parse_duration_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)
