"""`KeyedTable`: a table on Textual's Line API, updated by keyed diffs.

`sync(order, cells, changed)` brings the table to `order` (row keys, top to bottom) with `cells`
(key -> tuple of `Text`). Only what is visible is rendered: one cached strip per row (rebuilt when
its cells or the column widths change), the cursor drawn as a background on that one strip, so
moving the cursor or changing one cell repaints one line. A new order (rows added, removed,
filtered, sorted) swaps the key list; nothing is measured again except the cells that changed.

Columns are one space apart. A column given a width is cut to it (ellipsis, or crop with
``--ascii``); an automatic column grows to its widest cell (it never shrinks while shown, so the
layout does not jump). When the columns are wider than the view (80 columns, a long name), the
columns given a minimum width (`Column.min`) give up width, highest `Column.shrink` first, each
down to its minimum; the others (ages, numbers) never do. Keys: up/down or k/j, page up/down,
home/end or g/G (binding ids `row_up`, `row_down`, `row_first`, `row_last`: remappable); Enter
or a click on the cursor row posts `KeyedTable.RowSelected`; the cursor moving to another
row posts `KeyedTable.CursorMoved`.

Sorting: a click on a column's header sorts by that column (again: the other way), shown by an
arrow after its label; `cycle_sort` (a screen's `o`) goes from column to column. The table sorts
the rows itself, by the cells' text (`table_sort`; rows with a parent, `parent_of`, stay under it,
their cells `Fitted` to the columns their parents size), unless `sorts_rows` is off: then it posts
`KeyedTable.HeaderClicked` and the screen orders the rows (the workload and project lists sort by
their values: an age by its time, not its text).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from rich.console import OverflowMethod
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..keymap import LIST_BINDING_IDS, Keymap
from .table_sort import cell_key, sort_rows
from .type_ahead import TypeAhead

K = TypeVar("K", bound=Hashable)  # a table's row keys

Cells = tuple[Text, ...]


def list_bindings() -> list[BindingType]:
    """j/k and g/G (with the arrows, Home and End) as the catalogue's `row_*` bindings, with their
    ids: a list widget binds them to its `cursor_down`, `cursor_up`, `first` and `last` actions."""
    return [b for b in Keymap().bindings("table") if b.id in LIST_BINDING_IDS]


@dataclass(frozen=True)
class Column:
    """A column: its label; its width (None: as wide as its widest cell); the width it may shrink
    to when the table is wider than the view (None: never shrinks); and the order in which columns
    shrink (the highest first)."""

    label: str
    width: int | None = None
    min: int | None = None
    shrink: int = 0


ColumnSpec = Column | tuple[str, int | None]


class Fitted(Text):
    """A cell cut to its column's width that never widens the column: a child row's (a node's GPU
    under its node) in columns sized by the rows it sits among."""


def _cell_key(row: Cells | None, column: int) -> Any:
    return cell_key(row[column].plain) if row is not None and column < len(row) else None


def same_text(a: object, b: object) -> bool:
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return a == b


class KeyedTable(TypeAhead, ScrollView, Generic[K], can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        *list_bindings(),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("enter", "select", "Select", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"keyed-table--header", "keyed-table--cursor"}
    DEFAULT_CSS = """
    KeyedTable { height: 1fr; background: $surface; }
    KeyedTable > .keyed-table--header { text-style: bold; color: $foreground; background: $panel; }
    KeyedTable > .keyed-table--cursor { background: $primary 20%; }
    KeyedTable:focus > .keyed-table--cursor { background: $primary 40%; text-style: bold; }
    """

    class RowSelected(Message):
        def __init__(self, table: KeyedTable[Any], key: Hashable, row: int) -> None:
            super().__init__()
            self.table = table
            self.key = key
            self.row = row

        @property
        def control(self) -> KeyedTable[Any]:
            return self.table

    class HeaderClicked(Message):
        """A column's header was clicked (the table's screen sorts its rows: `sorts_rows` off)."""

        def __init__(self, table: KeyedTable[Any], column: int) -> None:
            super().__init__()
            self.table = table
            self.column = column

        @property
        def control(self) -> KeyedTable[Any]:
            return self.table

    class CursorMoved(Message):
        """The cursor is on another row (or the row under it is another key)."""

        def __init__(self, table: KeyedTable[Any], key: Hashable | None) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> KeyedTable[Any]:
            return self.table

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.order: list[K] = []
        self.cursor_row = 0
        # moved to a row (a key, a click, the screen's move_to_key): the cursor follows that row as
        # the rows change; until then it stays on the first row, whichever of the kinds' lists comes
        # in first (the list fills as they come: it started wherever the first one put it)
        self.cursor_placed = False
        self.header_height = 1
        self.shown: dict[K, Cells] = {}
        self._index: dict[K, int] = {}
        self.labels: list[str] = []  # as shown (the sorted column's with its arrow)
        self.base_labels: list[str] = []
        self.sort_column: int | None = None
        self.sort_descending = False
        self.sorts_rows = True  # off: the screen orders the rows (and hears HeaderClicked)
        # what Enter on a row does, run in the key's own turn (the screen's open): a screen it opens
        # is up before the next key is read, so keys typed after Enter reach it (None: RowSelected)
        self.choose: Callable[[], None] | None = None
        # a row's parent (None: a top row): sorting orders the top rows, each child stays under its
        # parent, in the order given
        self.parent_of: Callable[[K], K | None] | None = None
        self.arrows = ("▲", "▼")
        self.fixed: list[int | None] = []
        self.natural: list[int] = []  # what each column needs (its width, or its widest cell)
        self.widths: list[int] = []  # what each column gets (`natural`, shrunk to fit the view)
        self.mins: list[int | None] = []
        self.shrink_order: list[int] = []  # indexes of the columns that may shrink, first to shrink first
        self._strips: dict[K, Strip] = {}
        self._header: Strip | None = None
        self.overflow: OverflowMethod = "ellipsis"  # "crop" where the terminal may not show "…" (--ascii)
        self._cursor_key_posted: K | None = None
        self.rebuilds = 0
        self.cell_updates = 0
        self.render_count = 0

    def on_mount(self) -> None:
        glyphs = getattr(self.app, "glyphs", None)
        if getattr(glyphs, "name", "") == "ascii":
            self.overflow = "crop"
        if glyphs is not None:
            self.arrows = (glyphs.sort_ascending, glyphs.sort_descending)
            if self.sort_column is not None:
                self._label_sort()

    # -- columns and rows ------------------------------------------------------------------------------
    def set_columns(self, columns: Sequence[ColumnSpec]) -> None:
        """A `Column` (or (label, width or None for automatic)) per column; clears the rows."""
        cols = [c if isinstance(c, Column) else Column(*c) for c in columns]
        if self.sort_column is not None:  # the same column in the new set (narrower: another index), if any
            sorted_by = self.base_labels[self.sort_column]
            self.sort_column = next((i for i, c in enumerate(cols) if c.label == sorted_by), None)
        self.labels = [c.label for c in cols]
        self.base_labels = list(self.labels)
        self.fixed = [c.width for c in cols]
        self.natural = [c.width if c.width is not None else len(c.label) for c in cols]
        self.mins = [c.min for c in cols]
        self.shrink_order = sorted((i for i, c in enumerate(cols) if c.min is not None),
                                   key=lambda i: (-cols[i].shrink, -i))
        self.widths = list(self.natural)
        self.order, self.shown, self._index = [], {}, {}
        if self.sort_column is not None and self.sorts_rows:
            self._label_sort()
        self._invalidate()
        self._fit()
        self._update_size()

    @property
    def row_count(self) -> int:
        return len(self.order)

    @property
    def cursor_key(self) -> K | None:
        if not self.order or not 0 <= self.cursor_row < len(self.order):
            return None
        return self.order[self.cursor_row]

    def key_at(self, row: int) -> K | None:
        return self.order[row] if 0 <= row < len(self.order) else None

    def move_to_key(self, key: K) -> bool:
        row = self._index.get(key)
        if row is None:
            return False
        self.move_cursor(row)
        return True

    def sync(self, order: Sequence[K], cells: Mapping[K, Cells], changed: Iterable[K] | None = None) -> bool:
        """Show `order` with `cells`; `changed` (None: all) names the rows whose cells may differ.
        Returns True when anything will be redrawn."""
        order = list(order)
        if self.sort_column is not None and self.sorts_rows:
            column = self.sort_column
            order = sort_rows(order, lambda k: _cell_key(cells.get(k) or self.shown.get(k), column),
                              self.sort_descending, self.parent_of)
        same_order = order == self.order
        if changed is None:
            candidates = list(dict.fromkeys([*order, *cells]))
        else:
            # changed rows, shown or not (a filtered-out row keeps its cells and its strip for when
            # it comes back), and rows never seen before
            candidates = [k for k in dict.fromkeys(changed) if k in cells]
            candidates += [k for k in order if k not in self.shown]
        touched: list[K] = []
        grew = False
        for key in candidates:
            new = cells[key]
            old = self.shown.get(key)
            if old is not None and len(old) == len(new) and all(
                    same_text(a, b) for a, b in zip(old, new, strict=True)):
                continue
            self.shown[key] = new
            self._strips.pop(key, None)
            if old is not None:
                self.cell_updates += 1  # a shown row's cells changed (rows coming back are not updates)
            grew = self._grow(new) or grew
            touched.append(key)
        if grew:
            grew = self._fit()  # a wider cell matters only if its column gets wider
        if same_order and not grew:
            for key in touched:
                if key in self._index:
                    self._refresh_row(self._index[key])
            return bool(touched)
        if grew:
            self._invalidate()
        if not same_order:
            keep = self.cursor_key if self.cursor_placed else None
            index = {k: i for i, k in enumerate(order)}
            for key in [k for k in self.shown if k not in cells]:  # gone for good
                del self.shown[key]
                self._strips.pop(key, None)
            self.order, self._index = order, index
            self.rebuilds += 1
            row = index.get(keep) if keep is not None else None
            if row is None:
                row = min(self.cursor_row, max(0, len(order) - 1)) if self.cursor_placed else 0
            self.move_cursor(row, placed=self.cursor_placed)
            if self._fit():  # as many rows as lines now: the vertical scrollbar takes its columns
                self._invalidate()
        self._update_size()
        self.refresh()
        return True

    def update_cell(self, key: K, column: int, cell: Text) -> bool:
        """Replace one cell of a row (an age ticking): only that cell's region is repainted (every
        line when its column has to grow). Returns True when the cell differed."""
        row = self.shown.get(key)
        if row is None or not 0 <= column < len(row) or same_text(row[column], cell):
            return False
        new = (*row[:column], cell, *row[column + 1:])
        self.shown[key] = new
        self._strips.pop(key, None)
        self.cell_updates += 1
        if self._grow(new) and self._fit():
            self._invalidate()
            self._update_size()
            self.refresh()
            return True
        index = self._index.get(key)
        if index is not None and column < len(self.widths):
            y = index - int(self.scroll_y) + 1
            x = 1 + sum(self.widths[:column]) + column - int(self.scroll_x)
            rows = Region(0, 1, self.size.width, max(0, self.size.height - 1))  # below the header
            region = Region(x, y, self.widths[column], 1).intersection(rows)
            if region.area:
                self.refresh(region)
        return True

    # -- sorting ------------------------------------------------------------------------------------
    def set_sort(self, column: int | None, descending: bool = False) -> None:
        """Sort by `column` (None: the order the screen gives), shown by an arrow in its header."""
        if column is not None and not 0 <= column < len(self.base_labels):
            column = None
        self.sort_column, self.sort_descending = column, descending
        self._label_sort()
        if self.sorts_rows:
            self.sync(self.order, self.shown, [])

    def cycle_sort(self) -> None:
        """The next column to sort by (after the last: the screen's own order again)."""
        nxt = 0 if self.sort_column is None else self.sort_column + 1
        self.set_sort(nxt if nxt < len(self.base_labels) else None, self.sort_descending)

    def reverse_sort(self) -> None:
        self.set_sort(0 if self.sort_column is None else self.sort_column, not self.sort_descending)

    def sort_label(self) -> str:
        """`sorted by NODE ▼` (or "" while the screen's order is shown)."""
        if self.sort_column is None:
            return ""
        return f"sorted by {self.base_labels[self.sort_column]} {self.arrows[self.sort_descending]}"

    def _label_sort(self) -> None:
        """The arrow after the sorted column's label (the table's own sort only: a screen that
        sorts its rows labels its columns itself)."""
        if not self.sorts_rows:
            return
        self.labels = [label + (self.arrows[self.sort_descending] if i == self.sort_column else "")
                       for i, label in enumerate(self.base_labels)]
        grew = False
        for i, label in enumerate(self.labels):
            if self.fixed[i] is None and len(label) > self.natural[i]:
                self.natural[i] = len(label)
                grew = True
        if grew:
            self._fit()
            self._update_size()
        self._invalidate()
        self.refresh()

    def _grow(self, row: Cells) -> bool:
        grew = False
        for i, cell in enumerate(row[: len(self.natural)]):
            if self.fixed[i] is None and cell.cell_len > self.natural[i] and not isinstance(cell, Fitted):
                self.natural[i] = cell.cell_len
                grew = True
        return grew

    def _fit(self) -> bool:
        """Shrink the columns that may, in their order, until the table fits the view (while it
        has a size); returns True when a column's width changed."""
        widths = list(self.natural)
        if self.size.width > 0:
            avail = self.size.width
            if len(self.order) + 1 > self.size.height:  # the vertical scrollbar takes its columns
                avail -= self.styles.scrollbar_size_vertical
            excess = sum(widths) + len(widths) + 1 - avail
            for i in self.shrink_order:
                if excess <= 0:
                    break
                cut = min(excess, widths[i] - (self.mins[i] or 0))
                if cut > 0:
                    widths[i] -= cut
                    excess -= cut
        if widths == self.widths:
            return False
        self.widths = widths
        return True

    def on_resize(self) -> None:
        if self._fit():
            self._invalidate()
            self._update_size()
            self.refresh()

    def _invalidate(self) -> None:
        self._strips.clear()
        self._header = None

    def _update_size(self) -> None:
        width = sum(self.widths) + len(self.widths) + 1
        self.virtual_size = Size(width, len(self.order) + 1)

    def restyle(self) -> None:
        """Theme changed: render every line again."""
        self._invalidate()
        self.refresh()

    # -- cursor ----------------------------------------------------------------------------------------
    @property
    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def move_cursor(self, row: int, *, placed: bool = True) -> None:
        self.cursor_placed = placed
        if not self.order:
            self.cursor_row = 0
            self._cursor_moved()
            return
        row = min(max(row, 0), len(self.order) - 1)
        old = self.cursor_row
        self.cursor_row = row
        self._cursor_moved()
        top = int(self.scroll_y)
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + self._page:
            self.scroll_to(y=row - self._page + 1, animate=False)
        self._refresh_row(old)
        self._refresh_row(row)

    def _cursor_moved(self) -> None:
        key = self.cursor_key
        if key != self._cursor_key_posted:
            self._cursor_key_posted = key
            self.post_message(self.CursorMoved(self, key))

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self.move_cursor(self.cursor_row + step * self._page)

    def action_edge(self, end: int) -> None:
        self.move_cursor(len(self.order) - 1 if end else 0)

    def action_cursor_down(self) -> None:
        self.action_cursor(1)

    def action_cursor_up(self) -> None:
        self.action_cursor(-1)

    def action_first(self) -> None:
        self.action_edge(0)

    def action_last(self) -> None:
        self.action_edge(1)

    def action_select(self) -> None:
        key = self.cursor_key
        if key is None:
            return
        if self.choose is not None:
            self.choose()
        else:
            self.post_message(self.RowSelected(self, key, self.cursor_row))

    def column_at(self, x: int) -> int | None:
        """The column under cell `x` of the view (the gap after a column counts as it)."""
        x += int(self.scroll_x) - 1
        if x < 0:
            return None
        for i, width in enumerate(self.widths):
            if x < width + 1:
                return i
            x -= width + 1
        return None

    def on_click(self, event: events.Click) -> None:
        if event.y < 1:
            column = self.column_at(event.x)
            if column is None:
                return
            if not self.sorts_rows:
                self.post_message(self.HeaderClicked(self, column))
                return
            again = column == self.sort_column
            self.set_sort(column, not self.sort_descending if again else False)
            return
        row = int(self.scroll_y) + event.y - 1
        if 0 <= row < len(self.order):
            again = row == self.cursor_row
            self.move_cursor(row)
            if again or event.chain > 1:
                self.action_select()

    def _refresh_row(self, row: int) -> None:
        y = row - int(self.scroll_y) + 1
        if 1 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    # -- rendering -----------------------------------------------------------------------------------------
    def _line(self, cells: Sequence[Text], style: Style) -> Strip:
        console = self.app.console
        line = Text(" ", no_wrap=True, end="")
        for i, width in enumerate(self.widths):
            cell = cells[i] if i < len(cells) else Text("")
            part = cell.copy()
            part.overflow = self.overflow
            part.no_wrap = True
            part.truncate(width, overflow=self.overflow)
            part.align(cell.justify if cell.justify in ("left", "center", "right") else "left", width)
            line.append_text(part)
            line.append(" ")
        segs = list(line.render(console))
        return Strip(Segment.apply_style(segs, style), line.cell_len)

    def _header_strip(self) -> Strip:
        if self._header is None:
            style = self.rich_style + self.get_component_rich_style("keyed-table--header")
            self._header = self._line([Text(label) for label in self.labels], style)
        return self._header

    def _row_strip(self, key: K) -> Strip:
        strip = self._strips.get(key)
        if strip is None:
            strip = self._line(self.shown[key], self.rich_style)
            self._strips[key] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        self.render_count += 1
        width = self.scrollable_content_region.width
        scroll_x, scroll_y = self.scroll_offset
        base = self.rich_style
        if y == 0:
            return self._header_strip().crop_extend(scroll_x, scroll_x + width,
                                                    base + self.get_component_rich_style("keyed-table--header"))
        row = scroll_y + y - 1
        if row >= len(self.order):
            return Strip.blank(width, base)
        strip = self._row_strip(self.order[row]).crop_extend(scroll_x, scroll_x + width, base)
        if row == self.cursor_row:
            cursor = self.get_component_rich_style("keyed-table--cursor")
            overlay = Style(bgcolor=cursor.bgcolor, bold=cursor.bold)
            strip = Strip(Segment.apply_style(list(strip), post_style=overlay), strip.cell_length)
        return strip

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._invalidate()

    def visible_text(self) -> list[str]:
        """The plain text of the header and the rows in view (for tests)."""
        height = self.scrollable_content_region.height
        return [self.render_line(y).text for y in range(height)]

    def row_text(self, key: K) -> str:
        return self._row_strip(key).text if key in self.shown else ""

    def get_row(self, key: K) -> tuple[Any, ...]:
        return self.shown[key]
