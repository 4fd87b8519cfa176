"""Sorting a table by one column's text (a header clicked, `o` on a table of its own): what the
cells say, compared as a reader would. Ages (`45s`, `3h4m`, `2d1h`) by their length, percentages
and counts (`42%`, `3/4`, `1.5`) by their number, names naturally (`worker-2` before `worker-10`);
a missing value (`-`, empty, `n/a`) goes last whichever the direction. Bars and markers in front of
a value (`▇▇▂ 42%`, `● Running`) are not part of it."""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)

_AGE = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)%")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_CHUNKS = re.compile(r"(\d+)")
_LEAD = re.compile(r"^[^0-9A-Za-z(]+")
MISSING = frozenset({"", "-", "n/a", "no data", "none", "<none>"})


def cell_key(text: str) -> tuple[Any, ...] | None:
    """The key of one cell's text; None for a missing value."""
    t = _LEAD.sub("", text.strip()).strip()
    if t.casefold() in MISSING:
        return None
    m = _AGE.fullmatch(t)
    if m is not None and any(m.groups()):
        d, h, mi, s = (int(g or 0) for g in m.groups())
        return (0, float(((d * 24 + h) * 60 + mi) * 60 + s), ())
    m = _PERCENT.search(t)
    if m is not None:
        return (0, float(m.group(1)), ())
    m = _NUMBER.match(t)
    if m is not None:
        return (0, float(m.group(0)), _natural(t[m.end():]))
    return (1, 0.0, _natural(t))


def _natural(t: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p.casefold() for p in _CHUNKS.split(t) if p)


def sort_rows(order: Sequence[K], key: Callable[[K], Any], descending: bool,
              parent_of: Callable[[K], K | None] | None = None) -> list[K]:
    """`order` sorted by `key` (None: missing, always last); rows with equal keys keep their order.
    With `parent_of`, only the top rows (no parent) are sorted, each followed by its children in
    the order they had (children whose parent is not in `order` go last)."""
    if parent_of is not None:
        children: dict[K, list[K]] = {}
        tops: list[K] = []
        for k in order:
            parent = parent_of(k)
            if parent is None:
                tops.append(k)
            else:
                children.setdefault(parent, []).append(k)
        out = [row for top in sort_rows(tops, key, descending) for row in (top, *children.pop(top, ()))]
        return out + [k for rows in children.values() for k in rows]
    present = [k for k in order if key(k) is not None]
    missing = [k for k in order if key(k) is None]
    present.sort(key=lambda k: _comparable(key(k)), reverse=descending)
    return [*present, *missing]


def _comparable(value: Any) -> Any:
    """Keys of mixed kinds (numbers and text in one column) compare: numbers first."""
    return value if isinstance(value, tuple) else (0, 0.0, (value,)) if isinstance(value, (int, float)) \
        else (1, 0.0, (str(value).casefold(),))
