"""Timestamps of the log API, partial records of long lines, the merged buffer."""

from __future__ import annotations

import pytest

from monitors.logs.buffer import FilteredView, LineBuffer, RankRings
from monitors.logs.lines import (
    LogLine,
    Origin,
    format_since,
    format_ts,
    join_partials,
    parse_ts,
    split_record,
)

BASE = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


@pytest.mark.parametrize(("ts", "ns"), [
    (b"2026-01-01T00:00:00Z", BASE),
    (b"2026-01-01T00:00:00.5Z", BASE + 500_000_000),
    (b"2026-01-01T00:00:00.1234568Z", BASE + 123_456_800),  # Go drops trailing zeros
    (b"2026-01-01T00:00:00.123456789Z", BASE + 123_456_789),
    (b"2026-01-01T01:00:00.25+01:00", BASE + 250_000_000),
    (b"2025-12-31T23:00:00-01:00", BASE),
])
def test_parse_ts(ts: bytes, ns: int) -> None:
    assert parse_ts(ts) == ns


@pytest.mark.parametrize("bad", [b"", b"hello", b"2026-01-01T00:00:00", b"2026-13-01T00:00:00Z",
                                 b"2026-01-01T00:00:00.Z", b"2026-01-01T00:00:00.12345678901Z"])
def test_parse_ts_rejects(bad: bytes) -> None:
    assert parse_ts(bad) is None


def test_format_is_fixed_width_and_sortable() -> None:
    a, b = format_ts(BASE + 100_000_000), format_ts(BASE + 50_000_000)
    assert a == "2026-01-01T00:00:00.100000000Z" and b < a
    assert format_since(BASE + 999_999_999) == "2026-01-01T00:00:00Z"


def test_split_record() -> None:
    assert split_record(b"2026-01-01T00:00:00.5Z hello world") == (BASE + 500_000_000, b"hello world")
    assert split_record(b"2026-01-01T00:00:00.5Z ") == (BASE + 500_000_000, b"")
    assert split_record(b"no timestamp here") == (None, b"no timestamp here")


def test_partial_records_joined() -> None:
    a, b, c = b"a" * 16384, b"b" * 16384, b"tail"
    line = b"2026-01-01T00:00:00.1Z " + a + b"2026-01-01T00:00:00.2Z " + b + b"2026-01-01T00:00:00.25Z " + c
    ts, content = split_record(line)
    assert ts == BASE + 100_000_000
    assert content == a + b + c
    # a line that merely contains a timestamp elsewhere is left alone
    other = b"x" * 100 + b"2026-01-01T00:00:00Z " + b"y" * 20000
    assert join_partials(other) == other


def _lines(n: int, start: int = 0, label: str = "worker-0") -> list[LogLine]:
    o = Origin(label=label, pod=f"p-{label}")
    return [LogLine(BASE + i, f"line {i}".encode(), o) for i in range(start, start + n)]


def test_buffer_cap_marker_and_total() -> None:
    buf = LineBuffer(cap=5)
    buf.extend(_lines(3))
    assert (len(buf), buf.total, buf.dropped) == (3, 3, 0)
    assert [ln.text for ln in buf] == ["line 0", "line 1", "line 2"]
    buf.extend(_lines(4, start=3))
    assert (buf.total, buf.dropped, buf.lines()) == (7, 2, 5)
    assert len(buf) == 6  # the marker first
    assert buf[0].kind == "dropped" and "2 older lines dropped" in buf[0].text
    assert [buf[i].text for i in range(1, 6)] == [f"line {i}" for i in range(2, 7)]
    assert buf[-1].text == "line 6" and buf[-1].seq == 6
    assert [ln.text for ln in buf[4:]] == ["line 5", "line 6"]
    assert buf.by_seq(1) is None and buf.by_seq(2).text == "line 2"
    assert [ln.text for ln in buf.since(5)] == ["line 5", "line 6"]
    with pytest.raises(IndexError):
        buf[6]


def test_filtered_view_follows_the_buffer() -> None:
    buf = LineBuffer(cap=10)
    view = FilteredView(buf, lambda ln: int(ln.text.split()[1]) % 2 == 0)
    buf.extend(_lines(6))
    assert view.refresh() == 3
    assert [view[i].text for i in range(len(view))] == ["line 0", "line 2", "line 4"]
    buf.extend(_lines(10, start=6))  # 0..5 dropped
    view.refresh()
    assert view[0].kind == "dropped"
    assert [view[i].text for i in range(1, len(view))] == ["line 6", "line 8", "line 10", "line 12", "line 14"]


def test_rank_rings_keep_the_newest() -> None:
    rings = RankRings(cap=3)
    for line in _lines(5) + _lines(2, label="worker-1"):
        rings.add(line)
    assert [ln.text for ln in rings.last("worker-0", 10)] == ["line 2", "line 3", "line 4"]
    assert [ln.text for ln in rings.last("worker-0", 1)] == ["line 4"]
    assert rings.last("nobody", 5) == []
