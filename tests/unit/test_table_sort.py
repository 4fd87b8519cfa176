"""Sorting a table by a column's text (`tui.widgets.table_sort`): as a reader compares the cells."""

from __future__ import annotations

from tui.widgets.table_sort import cell_key, sort_rows


def by(texts: list[str], descending: bool = False) -> list[str]:
    return [texts[i] for i in sort_rows(range(len(texts)), lambda i: cell_key(texts[i]), descending)]  # type: ignore[arg-type,index]


def test_ages_by_their_length() -> None:
    assert by(["2d1h", "45s", "9h", "3h4m", "25m"]) == ["45s", "25m", "3h4m", "9h", "2d1h"]


def test_percentages_counts_and_bars_by_their_number() -> None:
    assert by(["▇▇▇▇▇ 100%", "▂     9%", "▅▅   45%"]) == ["▂     9%", "▅▅   45%", "▇▇▇▇▇ 100%"]
    assert by(["8/8", "10/16", "2/2"]) == ["2/2", "8/8", "10/16"]
    assert by(["1.5", "12", "3"]) == ["1.5", "3", "12"]


def test_names_naturally_and_markers_aside() -> None:
    assert by(["worker-10", "worker-2", "Master-0"]) == ["Master-0", "worker-2", "worker-10"]
    assert by(["● Running", "✗ Failed", "◌ Pending"]) == ["✗ Failed", "◌ Pending", "● Running"]


def test_a_missing_value_goes_last_either_way() -> None:
    assert by(["-", "3", "n/a", "1"]) == ["1", "3", "-", "n/a"]
    assert by(["-", "3", "n/a", "1"], descending=True) == ["3", "1", "-", "n/a"]
