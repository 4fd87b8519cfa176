"""Durations and numbers formatted the way kubectl and Run:ai print them; timestamps as text; prose
wrapped to a terminal."""

from __future__ import annotations

import re
import textwrap
import time


def format_ts(ns: int) -> str:
    """Nanoseconds as RFC3339 with a fixed 9-digit fraction (sortable as text): `...T12:00:00.000000001Z`."""
    sec, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)) + f".{frac:09d}Z"


def age(seconds: float | None, *, live: bool = False) -> str:
    """kubectl's HumanDuration: 45s, 12m, 3h4m, 5d, 2y.

    `live` (the dashboard, whose ages move on screen): from 2 to 10 minutes whole minutes only (5m,
    not 5m30s), so that past 2 minutes no age changes more than once a minute (see `age_changes_in`).
    """
    if seconds is None:
        return "-"
    s = int(max(0, seconds))
    if s < 60 * 2:
        return f"{s}s"
    m = s // 60
    if m < 10 and not live:
        rem = s % 60
        return f"{m}m{rem}s" if rem else f"{m}m"
    if m < 60 * 3:
        return f"{m}m"
    h = m // 60
    if h < 8:
        rem = m % 60
        return f"{h}h{rem}m" if rem else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if d < 8:
        rem = h % 24
        return f"{d}d{rem}h" if rem else f"{d}d"
    if d < 365 * 2:
        return f"{d}d"
    y = d // 365
    if y < 8:
        rem = d % 365
        return f"{y}y{rem}d" if rem else f"{y}y"
    return f"{y}y"


DAY = 86400
YEAR = 365 * DAY


def age_step(seconds: float) -> int:
    """The unit of the last figure of `age(seconds, live=True)`, in seconds: 1 under 2 minutes, a
    minute under 8 hours (12m, 3h4m), an hour under 8 days (20h, 2d5h), a day under 8 years (45d,
    2y10d), then a year. Every band starts at a multiple of its unit."""
    s = int(max(0, seconds))
    if s < 120:
        return 1
    if s < 8 * 3600:
        return 60
    if s < 8 * DAY:
        return 3600
    if s < 8 * YEAR:
        return DAY
    return YEAR


def age_changes_in(seconds: float) -> float:
    """Seconds from an age of `seconds` until `age(..., live=True)` shows another text (> 0): the
    next multiple of the unit shown. An age in the future (clock skew) shows 0s until it is 1 s old."""
    step = age_step(seconds)
    whole = int(max(0, seconds))
    return (whole // step + 1) * step - seconds


def plural(n: int, word: str, words: str | None = None) -> str:
    """`1 line`, `2 lines`, `1,024 lines` (`words`: the plural when it is not `word` + s)."""
    return f"{n:,} {word if n == 1 else words or word + 's'}"


def gpus(v: float | None) -> str:
    if v is None:
        return "-"
    return str(int(v)) if float(v).is_integer() else f"{v:.2f}".rstrip("0")


def percent(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}%"


def mib(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v / 1024:.1f}Gi" if v >= 1024 else f"{v:.0f}Mi"


_QUOTED = re.compile(r"`[^`\n]*`")


def wrap_prose(line: str, width: int, indent: str) -> list[str]:
    """`line` wrapped at spaces to `width` columns (24 at least), its further lines starting with
    `indent`; no word is cut, nor a `command` in backquotes, so that it runs as pasted (alone on
    its line when it is wider than the width)."""
    held = _QUOTED.sub(lambda m: m.group(0).replace(" ", "\x00"), line)  # (cleaned text has no NUL)
    parts = textwrap.wrap(held, width=max(width, 24), subsequent_indent=indent, break_long_words=False,
                          break_on_hyphens=False)
    return [part.replace("\x00", " ") for part in parts] or [line]
