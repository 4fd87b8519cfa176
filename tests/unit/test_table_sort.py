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


def test_child_rows_stay_under_their_parent_in_their_order() -> None:
    cells = {"n2": "30%", ("g", "n2", 0): "99%", ("g", "n2", 1): "1%", "n1": "70%", "n3": "-",
             ("g", "n3", 0): "50%", ("g", "gone", 0): "5%"}
    order = ["n1", "n2", ("g", "n2", 0), ("g", "n2", 1), "n3", ("g", "n3", 0), ("g", "gone", 0)]

    def parent(k: object) -> object:
        return k[1] if isinstance(k, tuple) else None

    for descending, tops in ((False, ["n2", "n1", "n3"]), (True, ["n1", "n2", "n3"])):
        got = sort_rows(order, lambda k: cell_key(cells[k]), descending, parent)  # type: ignore[arg-type,index]
        under = {"n2": [("g", "n2", 0), ("g", "n2", 1)], "n3": [("g", "n3", 0)]}
        assert got == [r for t in tops for r in (t, *under.get(t, []))] + [("g", "gone", 0)]
