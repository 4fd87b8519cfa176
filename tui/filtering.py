"""The `/` filter of the lists: a regex (case-insensitive), `!regex` to invert, or `-l SELECTOR`
for a label selector (`team=a,env!=dev`, `tier in (a,b)`, `tier notin (c)`, `gpu`, `!gpu`).

`RowFilter.parse(text)` raises `ValueError` with a one-line message on a bad pattern.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from monitors.user_regex import UserRegex, UserRegexError, compile_user

_REQ = re.compile(
    r"""\s*(?:
        (?P<notexists>!)\s*(?P<nkey>[A-Za-z0-9_./-]+)
      | (?P<key>[A-Za-z0-9_./-]+)\s*(?:
            (?P<op>==|!=|=)\s*(?P<value>[A-Za-z0-9_.-]*)
          | \s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)
        )?
    )\s*(?:,|$)""",
    re.VERBOSE,
)

Requirement = Callable[[Mapping[str, str]], bool]


def _absent(k: str) -> Requirement:
    return lambda labels: k not in labels


def _present(k: str) -> Requirement:
    return lambda labels: k in labels


def _equals(k: str, v: str, equal: bool) -> Requirement:
    return lambda labels: (labels.get(k) == v) == equal


def _one_of(k: str, values: frozenset[str], inside: bool) -> Requirement:
    return lambda labels: (labels.get(k) in values) == inside


def parse_selector(text: str) -> list[Requirement]:
    reqs: list[Requirement] = []
    pos = 0
    text = text.strip()
    if not text:
        raise ValueError("empty label selector")
    while pos < len(text):
        m = _REQ.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"bad label selector at {text[pos:]!r}")
        pos = m.end()
        if m.group("notexists"):
            reqs.append(_absent(m.group("nkey")))
        elif m.group("op"):
            k, v, op = m.group("key"), m.group("value"), m.group("op")
            reqs.append(_equals(k, v, op != "!="))
        elif m.group("setop"):
            values = frozenset(x.strip() for x in m.group("values").split(",") if x.strip())
            reqs.append(_one_of(m.group("key"), values, m.group("setop") == "in"))
        else:
            reqs.append(_present(m.group("key")))
    return reqs


@dataclass(frozen=True)
class RowFilter:
    text: str = ""
    pattern: UserRegex | None = None
    invert: bool = False
    selector: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, text: str) -> RowFilter:
        raw = text.strip()
        if not raw:
            return cls()
        if raw.startswith("-l"):
            return cls(raw, selector=tuple(parse_selector(raw[2:])))
        invert = raw.startswith("!")
        body = raw[1:] if invert else raw
        try:  # (without backtracking: a row's text is matched in linear time, whatever is typed)
            pattern = compile_user(body, ignore_case=True) if body else None
        except UserRegexError as exc:
            raise ValueError(f"bad regular expression: {exc}") from None
        return cls(raw, pattern, invert)

    @property
    def active(self) -> bool:
        return bool(self.text)

    def matches(self, texts: Iterable[str], labels: Mapping[str, str]) -> bool:
        if self.selector:
            return all(req(labels) for req in self.selector)
        if self.pattern is None:
            return not self.invert if self.text else True
        hit = any(self.pattern.search(t) for t in texts)
        return hit != self.invert
