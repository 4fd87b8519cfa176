"""Users' regexes run without backtracking (issue #25, item 3): `--grep`/`--exclude` and the log
view's `/` (LineFilter), the lists' `/` (RowFilter), the log view's next match, `progress_patterns`.
The worst case (`(a*)*b` on a long run of `a`) finishes at once; Python's `re` would backtrack for
longer than the test's timeout on any of these lines. What RE2 lacks is said in one line."""

from __future__ import annotations

import re

import pytest

from monitors.diagnostics.progress import compile_patterns, parse_line
from monitors.logs import FilterError, LineFilter, LogLine
from monitors.user_regex import UserRegexError, compile_user
from tui.filtering import RowFilter

RUN = "a" * 100_000
EVIL = (r"(a*)*b", r"(a|aa)*c", r"(a+)+$x", r"(.*a){25}b", r"(?P<step>(a|a)*)z")

pytestmark = pytest.mark.timeout(120, method="thread")  # (a backtracking match holds the GIL: no signal gets in)


def line(text: str) -> LogLine:
    return LogLine(0, text.encode())


@pytest.mark.parametrize("pattern", EVIL)
def test_every_user_regex_is_linear_in_the_line(pattern: str) -> None:
    flt = LineFilter.build(include=pattern)
    assert not flt.matches(line(RUN)) and flt.highlights(line(RUN)) == ()
    assert LineFilter.build(exclude=pattern).matches(line(RUN))
    assert not RowFilter.parse(pattern).matches([RUN], {})
    assert compile_user(pattern, ignore_case=True).search(RUN) is None


def test_a_progress_pattern_is_linear_in_the_line() -> None:
    patterns = compile_patterns([r"(?P<step>\d+)(a|aa)*c"])
    assert parse_line("7" + RUN, patterns) is None  # (parse_line reads a line's first MAX_LINE characters)
    sample = parse_line("7aaac", patterns)
    assert sample is not None and sample.step == 7


def test_what_re2_lacks_is_refused_in_one_line_saying_so() -> None:
    for pattern in (r"(a)\1", r"foo(?=bar)", r"(?<!x)y", r"a++", r"(?P<x>a)(?P=x)", r"a{1001}"):
        with pytest.raises(FilterError) as info:
            LineFilter.build(include=pattern)
        said = str(info.value)
        assert "\n" not in said and "without backtracking (RE2)" in said, said
        with pytest.raises(ValueError) as rinfo:
            RowFilter.parse(pattern)
        assert "RE2" in str(rinfo.value)
    with pytest.raises(ValueError) as pinfo:
        compile_patterns([r"step (?P<step>\d+)(?=/)"])
    assert "bad progress pattern" in str(pinfo.value) and "RE2" in str(pinfo.value)
    with pytest.raises(UserRegexError) as uinfo:
        compile_user("[")
    assert "RE2" not in str(uinfo.value)  # (a mistake, not a lack: said plainly)
    with pytest.raises(UserRegexError):
        compile_user("x" * 10_001)


@pytest.mark.parametrize(("pattern", "text"), [
    ("error", "an error here, error"), (r"loss=\d+\.\d+", "step 3 loss=0.25 loss=1.5"), (r"^\[w", "[worker-0] x"),
    ("(?i)nccl", "NCCL WARN x"), (r"a*", "baac"), ("é", "café é"), ("worker-[0-3]", "worker-2 worker-7")])
def test_matches_are_where_re_finds_them(pattern: str, text: str) -> None:
    flt = LineFilter.build(include=pattern)
    want = tuple((m.start(), m.end()) for m in re.finditer(pattern, text) if m.end() > m.start())
    assert tuple(s[:2] for s in flt.highlights(line(text))) == want
    assert flt.matches(line(text)) == (re.search(pattern, text) is not None)


def test_the_lists_filter_ignores_case_and_inverts() -> None:
    assert RowFilter.parse("LLAMA").matches(["llama-finetune"], {})
    assert RowFilter.parse("ll.ma").matches(["LLAMA"], {})
    assert not RowFilter.parse("!ll.ma").matches(["LLAMA"], {})
    assert compile_user("x.y").search("a\udcffx-y").start() == 2  # (a lone surrogate is no error)
