"""Which ranks to follow and which lines to show: ranks or roles, include/exclude/highlight regex.

Regexes are compiled up front (`FilterError` for a bad one, with a one-line message) and run on
the display-safe text of a line, i.e. what the user sees, in time linear in the line (RE2:
`monitors.user_regex`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..model_views import RankView
from ..user_regex import UserRegex, UserRegexError, compile_user
from .lines import LogLine
from .rank_tags import LAUNCHER_ROLES
from .terminal_text import Span

HIGHLIGHT_STYLE = "bold reverse"


class FilterError(ValueError):
    pass


def compile_regex(pattern: str | None, what: str) -> UserRegex | None:
    """A user's regex, run without backtracking (`monitors.user_regex`); FilterError in one line."""
    if pattern is None or pattern == "":
        return None
    try:
        return compile_user(pattern)
    except UserRegexError as exc:
        raise FilterError(f"invalid {what} regex {pattern!r}: {exc}") from None


def split_list(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """`a,b` and repeated options alike -> ("a", "b")."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for v in values:
        out += [p.strip() for p in v.split(",") if p.strip()]
    return tuple(dict.fromkeys(out))


@dataclass
class LineFilter:
    ranks: tuple[str, ...] = ()  # labels (worker-3, launcher) or global rank numbers ("4")
    roles: tuple[str, ...] = ()
    include: UserRegex | None = None
    exclude: UserRegex | None = None
    highlight: UserRegex | None = None
    _role_set: frozenset[str] = field(default=frozenset(), init=False, repr=False)

    def __post_init__(self) -> None:
        self._role_set = frozenset(r.lower() for r in self.roles)

    @classmethod
    def build(cls, *, ranks: Iterable[str] | str | None = None, roles: Iterable[str] | str | None = None,
              include: str | None = None, exclude: str | None = None, highlight: str | None = None) -> LineFilter:
        return cls(split_list(ranks), split_list(roles), compile_regex(include, "--grep"),
                   compile_regex(exclude, "--exclude"), compile_regex(highlight, "highlight"))

    # -- ranks ---------------------------------------------------------------------------------
    def wants_rank(self, rank: RankView) -> bool:
        if self._role_set and rank.role.lower() not in self._role_set:
            return False
        if self.ranks:
            return rank.label in self.ranks or (rank.rank is not None and str(rank.rank) in self.ranks) \
                or rank.pod in self.ranks
        return True

    def wants_tagged_lines(self, rank: RankView) -> bool:
        """A launcher's log holds the lines it tagged with its ranks' numbers (`[1,0]<stdout>:`,
        `monitors.logs.rank_tags`): it is read too when ranks are asked for by number (and no role
        leaves the launcher out); its lines are then chosen one by one (`wants_line_rank`)."""
        return rank.role in LAUNCHER_ROLES and not self._role_set and any(r.isdigit() for r in self.ranks)

    def unknown_ranks(self, ranks: Iterable[RankView]) -> list[str]:
        """Requested ranks that match no rank of the workload (for a warning)."""
        have: set[str] = set()
        for r in ranks:
            have |= {r.label, r.pod} | ({str(r.rank)} if r.rank is not None else set())
        return [r for r in self.ranks if r not in have]

    # -- lines ---------------------------------------------------------------------------------
    @property
    def filters_text(self) -> bool:
        return self.include is not None or self.exclude is not None

    def wants_line_rank(self, line: LogLine) -> bool:
        """A line's rank passes the rank/role filter (collapsed lines: any of their ranks)."""
        if self._role_set and line.role.lower() not in self._role_set:
            return False
        if not self.ranks:
            return True
        wanted = set(self.ranks)
        if line.label in wanted or line.pod in wanted or (line.rank is not None and str(line.rank) in wanted):
            return True
        return bool(wanted.intersection(line.ranks))

    def matches(self, line: LogLine) -> bool:
        if line.kind != "line":
            return True
        if (self.ranks or self._role_set) and not self.wants_line_rank(line):
            return False
        if self.include is None and self.exclude is None:
            return True
        text = line.text
        if self.include is not None and self.include.search(text) is None:
            return False
        return not (self.exclude is not None and self.exclude.search(text) is not None)

    def highlights(self, line: LogLine) -> tuple[Span, ...]:
        pat = self.highlight or self.include
        if pat is None or line.kind != "line":
            return ()
        return tuple((m.start(), m.end(), HIGHLIGHT_STYLE) for m in pat.finditer(line.text) if m.end() > m.start())
