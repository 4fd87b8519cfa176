"""Regexes that users give (`ranks logs --grep/--exclude`, the dashboard's `/` filters, the log
view's next/previous match, `progress_patterns`), run without backtracking: by RE2 (google-re2),
whose time is linear in the line whatever the pattern (`(a*)*b` on a million `a`: milliseconds;
Python's `re` backtracks for ever), and whose memory per pattern is bounded (`max_mem`). A pattern
with no special character is a plain substring, which Python's `re` finds as fast and as safely.

RE2 lacks what needs backtracking: backreferences (`\\1`, `(?P=name)`), lookarounds (`(?=`, `(?!`,
`(?<=`, `(?<!`), possessive and atomic forms (`a++`, `(?>...)`), comments (`(?#...)`), and
repetitions over 1000; `\\d`, `\\w`, `\\s` and `\\b` are ASCII. A pattern that uses them is refused
with one line saying so (`UserRegexError`, a ValueError).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Protocol

import re2

MAX_PATTERN = 10_000  # characters: longer is refused (a pattern is typed or written in a config file)
MAX_MEM = 8 << 20  # bytes RE2 may use per pattern (its default): a pattern that needs more is refused
LACKS = ("ranks runs regexes without backtracking (RE2): no backreferences, lookarounds, possessive or atomic "
         "forms, (?#...) comments, repetitions over 1000")
# RE2's errors about syntax it lacks (rather than a mistake): those say LACKS too
_LACKING = ("invalid perl operator", "invalid escape sequence", "bad repetition operator", "invalid repetition size",
            "invalid named capture group")
_SPECIAL = frozenset(".^$*+?{}[]\\|()")
_GROUP_NAME = re.compile(r"(?<!\\)\(\?P?<([A-Za-z_]\w*)>")


class UserRegexError(ValueError):
    """A pattern that cannot be used, said in one line (what is wrong, and RE2's limits)."""


class Match(Protocol):
    def start(self, group: int | str = 0) -> int: ...
    def end(self, group: int | str = 0) -> int: ...
    def group(self, *groups: int | str) -> Any: ...
    def groupdict(self) -> dict[str, str | None]: ...


class UserRegex:
    """A compiled user pattern with the `re.Pattern` methods ranks uses: `search`, `finditer`,
    `pattern`, `groupindex`."""

    __slots__ = ("_rx", "groupindex", "pattern")

    def __init__(self, rx: Any, pattern: str, groupindex: dict[str, int]) -> None:
        self._rx = rx
        self.pattern = pattern
        self.groupindex = groupindex

    def search(self, text: str) -> Match | None:
        try:
            m: Match | None = self._rx.search(text)
        except UnicodeEncodeError:  # (a lone surrogate: RE2 reads UTF-8; the same length mended)
            m = self._rx.search(_mend(text))
        return m

    @property
    def plain(self) -> bool:
        """A plain substring (no regex syntax): it never matches across a line break."""
        return isinstance(self._rx, re.Pattern)

    def finditer(self, text: str) -> Iterator[Match]:
        try:
            found = list(self._rx.finditer(text))
        except UnicodeEncodeError:
            found = list(self._rx.finditer(_mend(text)))
        return iter(found)

    def __repr__(self) -> str:
        return f"UserRegex({self.pattern!r})"


def _mend(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def compile_user(pattern: str, *, ignore_case: bool = False) -> UserRegex:
    """`pattern` compiled to run in time linear in the text; UserRegexError (one line) for one that
    is malformed, too long or uses what RE2 lacks."""
    if not isinstance(pattern, str):
        raise UserRegexError(f"{pattern!r} is not a regex (a string)")
    if len(pattern) > MAX_PATTERN:
        raise UserRegexError(f"the regex is {len(pattern):,} characters long (at most {MAX_PATTERN:,})")
    if not _SPECIAL.intersection(pattern):  # a plain substring: `re` finds it in linear time too
        rx: Any = re.compile(re.escape(pattern), re.IGNORECASE if ignore_case else 0)
        return UserRegex(rx, pattern, {})
    options = re2.Options()
    options.log_errors = False  # (RE2 would print its errors on stderr: the dashboard's terminal)
    options.max_mem = MAX_MEM
    options.case_sensitive = not ignore_case
    try:
        compiled = re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        if isinstance(why, bytes):
            why = why.decode("utf-8", "replace")
        why = " ".join(str(why).split())
        raise UserRegexError(f"{why} ({LACKS})" if why.startswith(_LACKING) else why) from None
    except (TypeError, ValueError, OverflowError) as exc:  # (e.g. a NUL the binding refuses)
        raise UserRegexError(f"{' '.join(str(exc).split())}") from None
    names = _GROUP_NAME.findall(pattern)
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:  # (RE2 takes it, reading the last such group; `re` refuses it, and so do we)
        raise UserRegexError(f"redefinition of group name {twice!r}")
    return UserRegex(compiled, pattern, dict(compiled.groupindex))
