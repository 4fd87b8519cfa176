"""`KeyedTable`: a DataTable updated by keyed diffs.

`sync(order, cells, changed)` brings the table to `order` (row keys, top to bottom) with `cells`
(key -> tuple of `Text`). When the order is unchanged only the cells of `changed` rows that differ
are updated in place (`update_cell`), so a status change repaints one row. When rows come, go or
move, the table is rebuilt in one pass (DataTable cannot insert at a position, and `remove_row`
relayouts every row) and the cursor stays on the same row key.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence

from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

Cells = tuple[Text, ...]


def same_text(a: object, b: object) -> bool:
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return a == b


def _pad(cell: Text, overflow: str = "ellipsis") -> Text:
    out = Text(" ", style=cell.style, justify=cell.justify, no_wrap=True, overflow=overflow)  # type: ignore[arg-type]
    out.append_text(cell)
    return out


class KeyedTable(DataTable[Text]):
    DEFAULT_CSS = """
    KeyedTable { height: 1fr; }
    KeyedTable > .datatable--cursor { background: $primary 20%; color: $foreground; }
    KeyedTable:focus > .datatable--cursor { background: $primary 40%; color: $foreground; text-style: bold; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        # Columns are one space apart (a leading space in every cell) instead of DataTable's two
        # (padding on both sides): at 80 columns that space is what fits the utilisation column.
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=False, cell_padding=0)
        self.cursor_foreground_priority = "renderable"  # keep status and bar colours on the cursor row
        self.order: list[Hashable] = []
        self.shown: dict[Hashable, Cells] = {}
        self.column_keys: list[ColumnKey] = []
        self._keys: dict[Hashable, RowKey] = {}
        self.overflow = "ellipsis"  # "crop" where the terminal may not show "…" (--ascii)
        self.rebuilds = 0
        self.cell_updates = 0

    def on_mount(self) -> None:
        glyphs = getattr(self.app, "glyphs", None)
        if getattr(glyphs, "name", "") == "ascii":
            self.overflow = "crop"

    def set_columns(self, columns: Sequence[tuple[str, int | None]]) -> None:
        """(label, width or None for auto) per column; clears the rows."""
        self.clear(columns=True)
        self.order, self.shown, self._keys = [], {}, {}
        self.column_keys = [self.add_column(" " + label, width=None if width is None else width + 1, key=f"c{i}")
                            for i, (label, width) in enumerate(columns)]

    @property
    def cursor_key(self) -> Hashable | None:
        if not self.order or self.cursor_row < 0 or self.cursor_row >= len(self.order):
            return None
        return self.order[self.cursor_row]

    def sync(self, order: Sequence[Hashable], cells: Mapping[Hashable, Cells],
             changed: Iterable[Hashable] | None = None) -> bool:
        """Show `order`; returns True when anything was redrawn."""
        order = list(order)
        if order == self.order:
            keys = self.order if changed is None else [k for k in changed if k in self.shown]
            touched = False
            for key in keys:
                new = cells[key]
                old = self.shown[key]
                if len(new) != len(old):
                    self._rebuild(order, cells)
                    return True
                for col, (a, b) in enumerate(zip(old, new, strict=True)):
                    if not same_text(a, b):
                        self.update_cell(self._keys[key], self.column_keys[col], _pad(b, self.overflow),
                                         update_width=True)
                        self.cell_updates += 1
                        touched = True
                self.shown[key] = new
            return touched
        self._rebuild(order, cells)
        return True

    def _rebuild(self, order: list[Hashable], cells: Mapping[Hashable, Cells]) -> None:
        keep = self.cursor_key
        cursor = self.cursor_row
        self.clear()
        self._keys = {}
        rows = [cells[k] for k in order]
        keys = [str(i) for i in range(len(order))]
        for k, row, rk in zip(order, rows, keys, strict=True):
            self._keys[k] = self.add_row(*(_pad(c, self.overflow) for c in row), key=rk)
        self.order = order
        self.shown = {k: cells[k] for k in order}
        self.rebuilds += 1
        if order:
            index = order.index(keep) if keep in self.shown else min(max(cursor, 0), len(order) - 1)
            self.move_cursor(row=index, animate=False)

    def key_at(self, row: int) -> Hashable | None:
        return self.order[row] if 0 <= row < len(self.order) else None

    def move_to_key(self, key: Hashable) -> bool:
        if key in self.shown:
            self.move_cursor(row=self.order.index(key), animate=False)
            return True
        return False
