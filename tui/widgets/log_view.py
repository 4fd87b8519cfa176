"""`LogView`: the merged logs of a workload on Textual's Line API.

    view = LogView(engine.buffer, palette=palette_from_theme(theme), filter_factory=engine.view)
    unsubscribe = view.attach(engine)         # engine batches -> view.notify_appended()
    view.set_filter(LineFilter.build(include="loss"))
    view.wrap = True; view.show_timestamps = True
    view.save("run.log")

Rendering (`render_line(y) -> Strip`) touches only the lines in the viewport: the widget's
virtual height is the number of lines of the source (a `LineBuffer`, a `FilteredView`, or
anything with `len()` and `[i]`), and each visible row looks its line up by index. Rendered lines
are kept in a small LRU cache of strips keyed by index, cleared whenever indexes move (lines
dropped at the front of a capped buffer, another filter) or the look changes (width, wrap,
timestamps, label width).

Every line is drawn as `[label] ` (padded to the widest label, coloured from the rank palette),
an optional timestamp column, then the line's `SafeText` as a `rich.text.Text` with its style
spans: log text is never parsed as markup, and it holds no escape sequences.

Wrap mode, lazily: the vertical scroll position counts *logical* lines in both modes
(`scroll_y` is the index of the top line; the virtual height is the number of lines), so no
wrapped-row index over the whole buffer is ever needed. The rows of the viewport are laid out on
demand from the top line down, wrapping only the lines that are visible (a few dozen `Text.wrap`
calls, each cached), and the layout is cached for the current (scroll position, size, length).
At the end of the scroll range (and always while tailing) the layout is built from the last line
upwards instead, so the newest line is fully visible at the bottom. The cost: the scrollbar is
proportional to lines, not rows, and the last step before the end may move by more than a row.
Continuation rows are indented by the prefix width.

Tail: while `tail` is on the view stays at the bottom as lines arrive. Scrolling up turns it
off; from then `new_lines` counts the lines that arrived and the last row of the view shows
`▼ N new lines (End to follow)`. End (or scrolling back to the bottom, or `f`) turns tail on.

Updates are coalesced: `notify_appended()` only marks the view dirty and arms one timer
(`update_interval`, a frame by default); the timer's `flush()` reads the source once, updates
the virtual size and scroll position, and refreshes — nothing at all when nothing changed.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from rich.cells import cell_len
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from monitors.logs.filters import LineFilter
from monitors.logs.terminal_text import SafeText, Span
from monitors.sanitize import clean
from tui.keymap import Keymap
from tui.widgets.type_ahead import TypeAhead

TS_WIDTH = 12  # HH:MM:SS.mmm
_VIEW_BINDING_IDS = ("tail", "wrap", "timestamps", "top", "bottom")


class LogLineLike(Protocol):
    """What the view reads of a line (`monitors.logs.lines.LogLine` has all of it)."""

    @property
    def label(self) -> str: ...
    @property
    def rank(self) -> int | None: ...
    @property
    def ts(self) -> int: ...  # nanoseconds since the epoch
    @property
    def pod(self) -> str: ...
    # and the display-safe text: `.safe` (a SafeText), or `.text` as a SafeText or a str


@runtime_checkable
class LogSource(Protocol):
    """Indexable lines in display order: `LineBuffer`, `FilteredView` or an in-memory list.

    Optional: `total` (lines ever appended, never decreases; counts new lines past a cap) and
    `refresh() -> int` (a filtered view taking in new lines; returns how many matched).
    """

    def __len__(self) -> int: ...
    def __getitem__(self, i: int, /) -> Any: ...


def palette_from_theme(theme: Any) -> list[str]:
    """The rank colours of a `themes.model.Theme`, spelled for Rich."""
    from themes.model import rich_colour

    return [rich_colour(c) for c in theme.ranks]


def safe_text(line: Any) -> SafeText:
    """The display-safe text of a line-like object."""
    s = getattr(line, "safe", None)
    if isinstance(s, SafeText):
        return s
    t = getattr(line, "text", "")
    return t if isinstance(t, SafeText) else SafeText(str(t))


def format_clock(ns: int) -> str:
    """`HH:MM:SS.mmm` (UTC) of a timestamp in nanoseconds."""
    sec, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%H:%M:%S", time.gmtime(sec)) + f".{frac // 1_000_000:03d}"


def _label_of(line: Any) -> str:
    label = _shown_label(getattr(line, "label", "") or "")
    ranks = getattr(line, "ranks", ())
    if label and ranks and len(ranks) > 1:
        return f"{label} ×{len(ranks)}"
    return label


@lru_cache(maxsize=4096)
def _shown_label(label: str) -> str:
    """A rank's label as shown: it comes from the pod's labels (a role is a `replica-type` value),
    cluster text like any other: no control or escape sequence reaches the screen."""
    return clean(label, limit=80)


def _source_total(src: Any) -> int | None:
    total = getattr(src, "total", None)
    return total if isinstance(total, int) else None


class LogView(TypeAhead, ScrollView, can_focus=True):
    """A scrolling, tailing view of merged log lines (see the module docstring)."""

    BINDINGS: ClassVar[list[BindingType]] = [b for b in Keymap().bindings("logs") if b.id in _VIEW_BINDING_IDS]

    COMPONENT_CLASSES: ClassVar[set[str]] = {"log-view--footer", "log-view--timestamp", "log-view--notice"}

    DEFAULT_CSS = """
    LogView {
        height: 1fr;
        background: $surface;
    }
    LogView > .log-view--footer {
        background: $accent;
        color: $text;
        text-style: bold;
    }
    LogView > .log-view--timestamp {
        color: $text-muted;
    }
    LogView > .log-view--notice {
        color: $text-muted;
        text-style: italic;
    }
    """

    tail: reactive[bool] = reactive(True)
    new_lines: reactive[int] = reactive(0)
    wrap: reactive[bool] = reactive(False)
    show_timestamps: reactive[bool] = reactive(False)
    empty_text: reactive[str] = reactive("")
    """Said on the first row when there is no line to show (a filter that matches none: say so)."""

    def __init__(
        self,
        source: LogSource,
        *,
        palette: Sequence[str] = (),
        labels: Iterable[str] = (),
        filter_factory: Callable[[LineFilter], LogSource] | None = None,
        wrap: bool = False,
        timestamps: bool = False,
        update_interval: float = 1 / 60,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._base: LogSource = source
        self._source: LogSource = source
        self._filter: LineFilter | None = None
        self.filter_factory = filter_factory
        self._rank_styles = [Style(color=Color.parse(c)) for c in palette]
        self._label_width = max((cell_len(label) for label in labels), default=0)
        self.update_interval = update_interval
        self._strips: LRUCache[tuple[int, int], list[Strip]] = LRUCache(1024)
        self._layout_key: tuple[Any, ...] | None = None
        self._layout: list[tuple[int, int]] = []
        self._max_width = 0
        self._len = len(source)
        self._total = self._count_total(source)
        self._pending = False
        self._moving = False  # our own scroll changes: not the user's
        self._unsubscribe: Callable[[], None] | None = None
        self.render_count = 0  # render_line calls (for tests and diagnostics)
        self.set_reactive(LogView.wrap, wrap)
        self.set_reactive(LogView.show_timestamps, timestamps)

    # -- source ----------------------------------------------------------------------------------
    @property
    def source(self) -> LogSource:
        """The lines shown (the base source, or its filtered view)."""
        return self._source

    @property
    def line_filter(self) -> LineFilter | None:
        return self._filter

    def attach(self, engine: Any) -> Callable[[], None]:
        """Show `engine.buffer`, filter through `engine.view` and follow `engine.subscribe`."""
        self.filter_factory = engine.view
        self._set_source(engine.buffer, base=True)
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._unsubscribe = engine.subscribe(lambda _lines: self.notify_appended())
        return self._unsubscribe

    def set_filter(self, flt: LineFilter | None) -> None:
        """Show the lines matching `flt` (None: all lines of the base source)."""
        self._filter = flt
        if flt is None:
            self._set_source(self._base)
            return
        if self.filter_factory is not None:
            src = self.filter_factory(flt)
        else:
            from monitors.logs.buffer import FilteredView, LineBuffer

            if not isinstance(self._base, LineBuffer):
                raise TypeError("set_filter needs a filter_factory (or a LineBuffer source)")
            src = FilteredView(self._base, flt.matches)
        self._set_source(src)

    def set_source(self, source: LogSource) -> None:
        """Show another source (the filter is forgotten)."""
        self._filter = None
        self._set_source(source, base=True)

    def _set_source(self, source: LogSource, *, base: bool = False) -> None:
        if base:
            self._base = source
        self._source = source
        self._len = len(source)
        self._total = self._count_total(source)
        self._max_width = 0
        self.new_lines = 0
        self._invalidate()
        if self.is_mounted:
            self._update_virtual_size()
            if self.tail:
                self._move_to(self.max_scroll_y)
            else:
                self._move_to(min(self.scroll_y, self.max_scroll_y))
            self.refresh()

    @staticmethod
    def _count_total(src: LogSource) -> int:
        total = _source_total(src)
        return total if total is not None else len(src)

    # -- updates ---------------------------------------------------------------------------------
    def notify_appended(self, *_: Any) -> None:
        """Lines were added to the source; the view catches up once, on its next frame."""
        if self._pending:
            return
        self._pending = True
        if self.is_mounted:
            self.set_timer(self.update_interval, self.flush)

    def flush(self) -> bool:
        """Take in what changed in the source now; returns True if anything did. `on_flush`, if
        set, is called after every flush (the screen's line count follows the view, one frame late
        at most, without a flush per batch)."""
        changed = self._flush()
        if self.on_flush is not None:
            self.on_flush()
        return changed

    on_flush: Callable[[], None] | None = None

    def _flush(self) -> bool:
        self._pending = False
        src = self._source
        refresh = getattr(src, "refresh", None)
        matched = refresh() if callable(refresh) else None
        n = len(src)
        total = _source_total(src)
        if total is not None:
            added = total - self._total
        elif matched is not None:
            added = matched
        else:
            added = max(0, n - self._len)
        if added == 0 and n == self._len:
            return False
        shift = max(0, added - (n - self._len))  # lines gone from the front: indexes moved
        self._total += added
        self._len = n
        self._invalidate(strips=bool(shift))
        if not self.is_mounted:
            return True
        self._update_virtual_size()
        if self.tail:
            self._move_to(self.max_scroll_y)
        else:
            if shift:
                self._move_to(max(0, self.scroll_y - shift))
            self.new_lines += added
        self.refresh()
        return True

    def on_mount(self) -> None:
        self._update_virtual_size()
        if self.tail:
            self.call_after_refresh(self._move_to_end)
        if self._pending:
            self.set_timer(self.update_interval, self.flush)

    def on_resize(self) -> None:
        self._invalidate()
        self._update_virtual_size()
        if self.tail:
            self.call_after_refresh(self._move_to_end)

    def _move_to_end(self) -> None:
        if self.tail:
            self._move_to(self.max_scroll_y)

    def _move_to(self, y: float) -> None:
        self._moving = True
        try:
            self.scroll_target_y = y
            self.scroll_y = y
        finally:
            self._moving = False

    def _update_virtual_size(self) -> None:
        width = 0 if self.wrap else self._prefix_width() + self._max_width
        self.virtual_size = Size(width, self._len)

    def _invalidate(self, *, strips: bool = True) -> None:
        if strips:
            self._strips.clear()
        self._layout_key = None

    # -- tail ------------------------------------------------------------------------------------
    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._moving or not self.is_mounted:
            return
        at_end = round(new_value) >= self.max_scroll_y
        if new_value < old_value and not at_end and self.tail:
            self.tail = False
        elif at_end and new_value > old_value and not self.tail:
            self.tail = True

    def watch_tail(self, tail: bool) -> None:
        if tail:
            self.new_lines = 0
            if self.is_mounted:
                self._move_to(self.max_scroll_y)
        if self.is_mounted:
            self.refresh()

    def watch_new_lines(self, old: int, new: int) -> None:
        if self.is_mounted and old != new:
            region = self.scrollable_content_region
            self.refresh(Region(0, region.height - 1, region.width, 1))

    def watch_wrap(self) -> None:
        self._relayout()

    def watch_show_timestamps(self) -> None:
        self._relayout()

    def _relayout(self) -> None:
        self._invalidate()
        if self.is_mounted:
            self._update_virtual_size()
            if self.tail:
                self._move_to(self.max_scroll_y)
            self.refresh()

    def action_scroll_bottom(self) -> None:
        self.tail = True
        self._move_to(self.max_scroll_y)

    def action_scroll_end(self) -> None:
        self.action_scroll_bottom()

    def action_scroll_top(self) -> None:
        self.tail = False
        self.scroll_to(y=0, animate=False)

    def action_scroll_home(self) -> None:
        self.action_scroll_top()

    def action_tail(self) -> None:
        if self.tail:
            self.tail = False
        else:
            self.action_scroll_bottom()

    def action_wrap(self) -> None:
        self.wrap = not self.wrap

    def action_timestamps(self) -> None:
        self.show_timestamps = not self.show_timestamps

    # -- line rendering --------------------------------------------------------------------------
    def _prefix_width(self) -> int:
        w = self._label_width + 3 if self._label_width else 0  # "[" label "] "
        return w + (TS_WIDTH + 1 if self.show_timestamps else 0)

    def _rank_style(self, line: Any) -> Style:
        if not self._rank_styles:
            return Style.null()
        rank = getattr(line, "rank", None)
        index = rank if isinstance(rank, int) else zlib.crc32(_label_of(line).encode())
        return self._rank_styles[index % len(self._rank_styles)]

    def _note_label(self, label: str) -> None:
        w = cell_len(label)
        if w > self._label_width:  # a wider label: every prefix changes
            self._label_width = w
            self._invalidate()
            if self.is_mounted:
                self.call_later(self._relayout)

    def _prefix(self, line: Any, *, styled: bool = True) -> Text:
        label = _label_of(line)
        self._note_label(label)
        t = Text(end="")
        if self._label_width:
            if label:
                t.append("[" + label + "]", self._rank_style(line) if styled else "")
                t.append(" " * (self._label_width - cell_len(label) + 1))
            else:
                t.append(" " * (self._label_width + 3))
        if self.show_timestamps:
            ts = getattr(line, "ts", 0) or 0
            t.append(format_clock(ts) + " ", self._component_style("log-view--timestamp") if styled else "")
        return t

    def _component_style(self, name: str) -> Style:
        try:
            return self.get_component_rich_style(name, partial=True)
        except Exception:  # not mounted (e.g. save before mount)
            return Style.null()

    def _highlights(self, line: Any) -> tuple[Span, ...]:
        flt = self._filter
        return flt.highlights(line) if flt is not None and hasattr(line, "kind") else ()

    def _line_strips(self, index: int, width: int) -> list[Strip]:
        """The rows of line `index`: one unwrapped strip, or the wrapped rows at `width`."""
        key = (index, width if self.wrap else -1)
        cached = self._strips.get(key)
        if cached is not None:
            return cached
        line = self._source[index]
        prefix = self._prefix(line)
        safe = safe_text(line)
        body = safe.to_rich()
        for start, end, style in self._highlights(line):
            body.stylize(style, start, end)
        if getattr(line, "kind", "line") != "line":
            body.stylize(self._component_style("log-view--notice"))
        console = self.app.console
        base = self.rich_style
        if not self.wrap:
            full = Text.assemble(prefix, body, end="")
            full.no_wrap = True
            segs = list(full.render(console))
            strips = [Strip(Segment.apply_style(segs, base), full.cell_len)]
            if full.cell_len - prefix.cell_len > self._max_width:
                self._max_width = full.cell_len - prefix.cell_len
                self.call_later(self._update_virtual_size)
        else:
            pw = prefix.cell_len
            avail = max(1, width - pw)
            rows = body.wrap(console, avail, overflow="fold", no_wrap=False) if body.plain else [Text("")]
            strips = []
            for i, row in enumerate(rows):
                head = prefix if i == 0 else Text(" " * pw)
                row.rstrip_end(avail)
                full = Text.assemble(head, row, end="")
                segs = list(full.render(console))
                strips.append(Strip(Segment.apply_style(segs, base), full.cell_len))
        self._strips[key] = strips
        return strips

    def _wrapped_layout(self, height: int, width: int) -> list[tuple[int, int]]:
        """(line index, row of that line) for each viewport row; only visible lines are wrapped."""
        n = self._len
        top = int(self.scroll_y)
        at_end = self.tail or top >= self.max_scroll_y
        key = (top, height, width, n, at_end)
        if key == self._layout_key:
            return self._layout
        rows: list[tuple[int, int]] = []
        if at_end:
            i = n - 1
            while i >= 0 and len(rows) < height:
                k = len(self._line_strips(i, width))
                rows[:0] = [(i, r) for r in range(k)]
                i -= 1
            rows = rows[-height:]
        else:
            i = top
            while i < n and len(rows) < height:
                k = len(self._line_strips(i, width))
                rows.extend((i, r) for r in range(min(k, height - len(rows))))
                i += 1
        self._layout_key, self._layout = key, rows
        return rows

    def render_line(self, y: int) -> Strip:
        self.render_count += 1
        region = self.scrollable_content_region
        width, height = region.width, region.height
        base = self.rich_style
        if y == height - 1 and not self.tail and self.new_lines:
            return self._footer(width)
        if not self._len and self.empty_text:
            return self._notice(self.empty_text, width) if y == 0 else Strip.blank(width, base)
        scroll_x, scroll_y = self.scroll_offset
        if self.wrap:
            layout = self._wrapped_layout(height, width)
            if y >= len(layout):
                return Strip.blank(width, base)
            index, row = layout[y]
            strip = self._line_strips(index, width)[row]
            return strip.crop_extend(0, width, base)
        index = scroll_y + y
        if index >= self._len:
            return Strip.blank(width, base)
        strip = self._line_strips(index, width)[0]
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _notice(self, text: str, width: int) -> Strip:
        t = Text(" " + text, end="", no_wrap=True)
        t.truncate(width)
        segs = list(t.render(self.app.console))
        style = self.rich_style + self._component_style("log-view--notice")
        return Strip(Segment.apply_style(segs, style), t.cell_len).crop_extend(0, width, self.rich_style)

    def _footer(self, width: int) -> Strip:
        n = self.new_lines
        text = Text(f" ▼ {n:,} new line{'s' if n != 1 else ''} (End to follow)", end="")
        text.truncate(width, pad=True)
        style = self._component_style("log-view--footer")
        segs = list(text.render(self.app.console))
        return Strip(Segment.apply_style(segs, self.rich_style + style), width).crop_extend(0, width, style)

    # -- text ------------------------------------------------------------------------------------
    def plain_line(self, line: Any) -> str:
        """A line as `save` writes it: prefix, optional timestamp and text, no styles."""
        return self._prefix(line, styled=False).plain + safe_text(line).text

    def visible_text(self) -> list[str]:
        """The plain text of the rows on screen (without the footer)."""
        region = self.scrollable_content_region
        out = []
        for y in range(region.height):
            if y == region.height - 1 and not self.tail and self.new_lines:
                break
            strip = self.render_line(y)
            out.append(strip.text.rstrip())
        return out

    def plain_lines(self) -> list[str]:
        """The lines shown (the filtered source, every line) as plain text, as `save` writes them."""
        src = self._source
        n = len(src)
        for i in range(n):  # the widest label first, so every prefix lines up
            self._note_label(_label_of(src[i]))
        return [self.plain_line(src[i]) for i in range(n)]

    def save(self, path: str | Path) -> int:
        """Write the lines shown (the filtered source, every line) as plain text; returns the count."""
        lines = self.plain_lines()
        # the user's alone from the start (logs can hold secrets); an existing file keeps its mode
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(fd, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line + "\n")
        return len(lines)

    def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
