"""Glyph sets: Unicode (default) and ASCII (``--ascii``, or a terminal that cannot encode Unicode).

Every glyph of both sets is one cell wide, except the multi-character strings (breadcrumb
separator, ellipsis), whose widths the sets share where it matters for layout. ASCII glyphs are
7-bit only. `bar` and `sparkline` draw with a set; `glyphs_for` picks one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .model import PHASES, phase_of


@dataclass(frozen=True)
class GlyphSet:
    name: str
    bar_full: str
    bar_partials: tuple[str, ...]
    """Partial cells by eighths (Unicode) or halves (ASCII): index i = i/len of a cell; [0] is ''."""
    bar_empty: str
    spark: tuple[str, ...]
    """Sparkline levels, lowest first (the lowest is still visible, for 0)."""
    spark_gap: str
    """A sample with no value."""
    up: str
    down: str
    left: str
    right: str
    sort_ascending: str
    sort_descending: str
    phase_markers: Mapping[str, str]
    """One marker per phase (`themes.model.PHASES`), so a phase is told apart without colour."""
    lead: str
    """Marks the lead rank (rank 0 / launcher)."""
    selected: str
    bullet: str
    check: str
    cross: str
    warning: str
    breadcrumb: str
    ellipsis: str
    spinner: tuple[str, ...]
    border: str
    """A Textual border type for boxes drawn in this set (``round`` or ``ascii``)."""

    def phase_marker(self, status: str | None) -> str:
        return self.phase_markers[phase_of(status)]

    def spinner_frame(self, tick: int) -> str:
        return self.spinner[tick % len(self.spinner)]

    def all_glyphs(self) -> list[str]:
        """Every glyph string of the set (for tests and width checks)."""
        out = [self.bar_full, *self.bar_partials[1:], self.bar_empty, *self.spark, self.spark_gap,
               self.up, self.down, self.left, self.right, self.sort_ascending, self.sort_descending,
               *self.phase_markers.values(), self.lead, self.selected, self.bullet, self.check, self.cross,
               self.warning, self.breadcrumb, self.ellipsis, *self.spinner]
        return out


UNICODE = GlyphSet(
    name="unicode",
    bar_full="█",
    bar_partials=("", "▏", "▎", "▍", "▌", "▋", "▊", "▉"),
    bar_empty=" ",
    spark=("▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"),
    spark_gap=" ",
    up="↑",
    down="↓",
    left="←",
    right="→",
    sort_ascending="▲",
    sort_descending="▼",
    phase_markers=MappingProxyType({
        "running": "●",
        "pending": "○",
        "succeeded": "✓",
        "failed": "✗",
        "degraded": "◐",
        "suspended": "‖",
        "unknown": "?",
    }),
    lead="★",
    selected="▶",
    bullet="•",
    check="✓",
    cross="✗",
    warning="▲",
    breadcrumb=" › ",
    ellipsis="…",
    spinner=("⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"),
    border="round",
)

ASCII = GlyphSet(
    name="ascii",
    bar_full="#",
    bar_partials=("", "-"),
    bar_empty=" ",
    spark=("_", ".", "-", "~", "=", "+", "*", "#"),
    spark_gap=" ",
    up="^",
    down="v",
    left="<",
    right=">",
    sort_ascending="^",
    sort_descending="v",
    phase_markers=MappingProxyType({
        "running": "*",
        "pending": "o",
        "succeeded": "+",
        "failed": "x",
        "degraded": "~",
        "suspended": "=",
        "unknown": "?",
    }),
    lead="@",
    selected=">",
    bullet="-",
    check="+",
    cross="x",
    warning="!",
    breadcrumb=" > ",
    ellipsis="...",
    spinner=("|", "/", "-", "\\"),
    border="ascii",
)

assert set(UNICODE.phase_markers) == set(ASCII.phase_markers) == set(PHASES)


def glyphs_for(ascii: bool) -> GlyphSet:
    return ASCII if ascii else UNICODE


def wants_ascii(encoding: str | None) -> bool:
    """True when a stream `encoding` cannot carry our Unicode glyphs (e.g. ``ascii``, ``latin-1``)."""
    if not encoding:
        return False
    try:
        "".join(UNICODE.all_glyphs()).encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return True
    return False


def bar(glyphs: GlyphSet, fraction: float | None, width: int) -> str:
    """A horizontal bar exactly `width` cells wide for `fraction` (0-1, clamped; None/NaN -> empty)."""
    if width <= 0:
        return ""
    if fraction is None or math.isnan(fraction):
        fraction = 0.0
    fraction = min(max(fraction, 0.0), 1.0)
    steps = len(glyphs.bar_partials)
    units = round(fraction * width * steps)
    full, rest = divmod(units, steps)
    text = glyphs.bar_full * full + (glyphs.bar_partials[rest] if full < width else "")
    return text + glyphs.bar_empty * (width - full - (1 if rest and full < width else 0))


def sparkline(glyphs: GlyphSet, values: Iterable[float | None], lo: float = 0.0, hi: float = 100.0) -> str:
    """One cell per value, scaled from `lo` to `hi` (clamped); None/NaN -> `spark_gap`."""
    levels = glyphs.spark
    span = hi - lo
    out = []
    for value in values:
        if value is None or value != value:
            out.append(glyphs.spark_gap)
            continue
        frac = 0.0 if span <= 0 else min(max((value - lo) / span, 0.0), 1.0)
        out.append(levels[min(int(frac * len(levels)), len(levels) - 1)])
    return "".join(out)
