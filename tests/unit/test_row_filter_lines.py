"""The GPUs tab's `/` over 40,000 rows (#30 item 6: every key within the dashboard's goals): a plain
substring filter finds its rows in one pass over their joined texts (`RowFilter.matching_lines`),
which must pick exactly the rows a search of each row picks, whatever the rows hold and the case
typed; a regex is matched row by row (it could match across the joined lines)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tui.filtering import RowFilter, SearchLines

LINE = st.text(alphabet=st.sampled_from("abcAB-0123 İıßẞ\u00e9/"), max_size=12)


@settings(max_examples=400, deadline=None)
@given(lines=st.lists(LINE, max_size=12), typed=st.text(alphabet=st.sampled_from("abAB-01 İıßé"), min_size=1,
                                                         max_size=4), invert=st.booleans())
def test_one_pass_picks_what_a_search_a_row_picks(lines: list[str], typed: str, invert: bool) -> None:
    flt = RowFilter.parse(("!" if invert else "") + typed)
    if not flt.text or flt.pattern is None:
        return
    got = flt.matching_lines(SearchLines(lines))
    assert got == [flt.matches([line], {}) for line in lines]


def test_a_regex_or_a_selector_is_left_to_the_rows() -> None:
    lines = SearchLines(["node-1 a", "node-2 b"])
    assert RowFilter.parse("node-[12] a").matching_lines(lines) is None
    assert RowFilter.parse("-l app=x").matching_lines(lines) is None
    assert RowFilter.parse("node-2").matching_lines(lines) == [False, True]
    assert RowFilter.parse("NODE").matching_lines(lines) == [True, True]
    assert RowFilter.parse("!node-2").matching_lines(lines) == [True, False]
