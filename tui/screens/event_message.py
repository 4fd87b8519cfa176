"""`v` on the Events tab: one event whole, its message wrapped (a list line cuts it at the width)."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from monitors.humanize import age
from monitors.sanitize import clean


def event_text(e: Any, now: float) -> Text:
    """Reason, object, type and count, when; then the message, whole (cluster text: no markup)."""
    t = Text(no_wrap=False)
    t.append(clean(e.reason, limit=100) or "(no reason)", style="bold")
    t.append(f"  {clean(e.kind, limit=40).lower()}/{clean(e.object_name, limit=200)}")
    t.append(f"\n{clean(e.type, limit=20) or 'Normal'}", style="bold" if e.type == "Warning" else "dim")
    if e.count > 1:
        t.append(f", x{e.count}", style="dim")
    if e.last:
        t.append(f", {age(now - e.last)} ago", style="dim")
    t.append("\n\n")
    t.append(clean(e.message, single_line=False, limit=20_000) or "(no message)")
    return t


class EventMessageScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape,enter,q,v", "dismiss", "Close")]
    DEFAULT_CSS = """
    EventMessageScreen { align: center middle; }
    EventMessageScreen > VerticalScroll { width: 76; max-width: 100%; height: auto; max-height: 90%;
                                          border: round $accent; background: $surface; padding: 0 1; }
    EventMessageScreen.-ascii > VerticalScroll { border: ascii $accent; }
    """

    def __init__(self, event: Any, now: float) -> None:
        super().__init__()
        self.event = event
        self.now = now

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(event_text(self.event, self.now), id="event-message")

    def on_mount(self) -> None:
        self.set_class(getattr(getattr(self.app, "glyphs", None), "name", "") == "ascii", "-ascii")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
