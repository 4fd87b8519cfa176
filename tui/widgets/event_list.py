"""`EventList`: the workload detail's Events tab, a list with a cursor.

The screen draws the events (newest first, one or two lines each: `show`); the list keeps a cursor
on one of them (on the same event as new ones arrive), moved with j/k, g/G, the arrows, Home/End
(the catalogue's `row_*` bindings) and the mouse, and scrolled into view. Enter posts
`EventList.Chosen(event, "open")` (the screen opens the event's object), `v` posts it with
"message" (the screen shows the whole message, wrapped)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.message import Message

from ..keymap import Keymap
from .keyed_table import list_bindings
from .live_static import LiveStatic
from .type_ahead import TypeAhead


class EventList(TypeAhead, VerticalScroll, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        *list_bindings(),
        Binding("enter", "choose('open')", "Open", show=False),
        *[b for b in Keymap().bindings("table") if b.id == "event_message"],
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"event-list--cursor"}
    DEFAULT_CSS = """
    EventList { height: 1fr; background: $surface; }
    EventList > LiveStatic { height: auto; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    EventList > .event-list--cursor { background: $primary 20%; }
    EventList:focus > .event-list--cursor { background: $primary 40%; text-style: bold; }
    """

    class Chosen(Message):
        """Enter (`what` "open") or `v` ("message") on an event."""

        def __init__(self, event: Any, what: str) -> None:
            super().__init__()
            self.event = event
            self.what = what

    def __init__(self, *, id: str | None = None, static_id: str | None = None) -> None:
        super().__init__(id=id)
        self._static_id = static_id
        self.events: tuple[Any, ...] = ()  # as shown, top to bottom
        self.rows = 1  # lines per event
        self.cursor = 0
        self._text = Text()

    def compose(self) -> Any:
        yield LiveStatic(id=self._static_id)

    @property
    def static(self) -> LiveStatic:
        return self.query_one(LiveStatic)

    @property
    def current(self) -> Any | None:
        return self.events[self.cursor] if 0 <= self.cursor < len(self.events) else None

    def show(self, text: Text, shown: Sequence[Any], rows: int, regions: Sequence[Region] | None = None) -> None:
        """`text` draws `shown` (top to bottom), `rows` lines each; `regions`: only these cells
        changed (an age ticking)."""
        keep = getattr(self.current, "name", None)
        self.events, self.rows, self._text = tuple(shown), rows, text
        if keep is not None:
            self.cursor = next((i for i, e in enumerate(self.events) if getattr(e, "name", None) == keep),
                               min(self.cursor, max(0, len(self.events) - 1)))
        self.cursor = min(self.cursor, max(0, len(self.events) - 1))
        drawn = self._decorated()
        if regions is not None:
            self.static.patch(drawn, regions)
        else:
            self.static.update(drawn)

    def _decorated(self) -> Text:
        """The text with the cursor's lines highlighted across the list's width."""
        if not self.events:
            return self._text
        lines = self._text.split("\n", allow_blank=True)
        cursor = self.get_component_rich_style("event-list--cursor")
        style = Style(bgcolor=cursor.bgcolor, bold=cursor.bold)  # (a warning keeps its colour)
        width = max(self.static.content_size.width, max((ln.cell_len for ln in lines), default=0))
        for y in range(self.cursor * self.rows, min(len(lines), (self.cursor + 1) * self.rows)):
            line = lines[y].copy()
            line.pad_right(max(0, width - line.cell_len))
            line.stylize(style)
            lines[y] = line
        out = Text("\n", no_wrap=True, overflow="ellipsis").join(lines)
        out.no_wrap, out.overflow = True, "ellipsis"
        return out

    def move(self, row: int) -> None:
        if not self.events:
            return
        self.cursor = min(max(row, 0), len(self.events) - 1)
        self.static.update(self._decorated())
        self.scroll_to_region(Region(0, self.cursor * self.rows, 1, self.rows), animate=False, immediate=True)

    def action_cursor_down(self) -> None:
        self.move(self.cursor + 1)

    def action_cursor_up(self) -> None:
        self.move(self.cursor - 1)

    def action_first(self) -> None:
        self.move(0)

    def action_last(self) -> None:
        self.move(len(self.events) - 1)

    def action_choose(self, what: str) -> None:
        if self.current is not None:
            self.post_message(self.Chosen(self.current, what))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or not self.events:
            return
        row = (offset.y + int(self.scroll_y)) // max(1, self.rows)
        if 0 <= row < len(self.events):
            again = row == self.cursor
            self.move(row)
            if again or event.chain > 1:
                self.action_choose("open")

    def _on_focus(self, event: events.Focus) -> None:
        super()._on_focus(event)
        self._redraw()

    def _on_blur(self, event: events.Blur) -> None:
        super()._on_blur(event)
        self._redraw()

    def _redraw(self) -> None:
        if self.is_mounted and self.events:
            self.static.update(self._decorated())

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted and self.events:
            self.static.update(self._decorated())
