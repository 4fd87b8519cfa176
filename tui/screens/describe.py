"""`d`: an object as YAML (read from the API server on the data loop), and the help screen."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import yaml
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static, TextArea

from monitors.sanitize import clean

from ..keymap import SCOPES, Keymap
from .base import RanksScreen, bindings

SCOPE_TITLES = {"global": "Everywhere", "table": "Lists and details", "logs": "Logs"}


def _strip(obj: Any) -> Any:
    """Drop managedFields (noise) and make every string safe to show."""
    if isinstance(obj, dict):
        return {clean(k, single_line=True, limit=None): _strip(v) for k, v in obj.items() if k != "managedFields"}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    if isinstance(obj, str):
        return clean(obj, single_line=False, limit=None)
    return obj


def to_yaml(obj: Any) -> str:
    return yaml.safe_dump(_strip(obj), sort_keys=False, default_flow_style=False, allow_unicode=True, width=200)


class YamlArea(TextArea):
    """The read-only YAML: Home/g and End/G go to its first and last line (a TextArea's own End
    goes to the end of the line, and g/G would type)."""

    BINDINGS: ClassVar[list[BindingType]] = bindings("logs", ("top", "bottom"))

    def action_scroll_top(self) -> None:
        self.move_cursor((0, 0))
        self.scroll_home(animate=False)

    def action_scroll_bottom(self) -> None:
        self.move_cursor((self.document.line_count - 1, 0))
        self.scroll_end(animate=False)


class DescribeScreen(RanksScreen):
    """The YAML of an object; ctrl+r reads it again."""

    BINDINGS: ClassVar[list[BindingType]] = bindings("global", ("refresh",))
    DEFAULT_CSS = """
    DescribeScreen TextArea, DescribeScreen TextArea:focus { height: 1fr; border: none; }
    """

    def __init__(self, title: str, path: str) -> None:
        super().__init__()
        self.title_text = title
        self.path = path
        self.loaded: Any = None

    @property
    def crumb(self) -> str:
        return f"describe {self.title_text}"

    def body(self) -> ComposeResult:
        yield YamlArea("loading…", read_only=True, show_line_numbers=False, soft_wrap=False, id="yaml")

    def on_mount(self) -> None:
        super().on_mount()
        area = self.query_one(TextArea)
        area.cursor_blink = False
        area.focus()
        self._load()

    @work(exclusive=True, group="describe")
    async def _load(self, again: bool = False) -> None:
        area = self.query_one(TextArea)
        try:
            obj = await asyncio.wrap_future(self.dashboard.data.get_raw(self.path))
        except Exception as exc:
            message = getattr(exc, "one_line", None)
            text = message() if callable(message) else (getattr(exc, "message", "") or str(exc))
            area.load_text(f"# cannot read {self.title_text}: {clean(text, limit=400)}\n")
            return
        self.loaded = obj
        area.load_text(to_yaml(obj))
        if again:
            self.notify(f"{self.title_text}: read again", timeout=1.5, markup=False)

    def action_refresh(self) -> None:
        """ctrl+r: read the object again (the app's refresh redraws from the store; this is a query)."""
        self._load(again=True)

    def action_back(self) -> None:
        self.dashboard.go_back()


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape,q,question_mark", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 76; max-width: 100%; height: 90%; border: round $accent;
                                  background: $surface; padding: 0 1; }
    HelpScreen.-ascii > VerticalScroll { border: ascii $accent; }
    """

    def __init__(self, keymap: Keymap, ids: set[str] | None = None) -> None:
        super().__init__()
        self.keymap = keymap
        self.ids = ids

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.help_text(), id="help-text")

    def on_mount(self) -> None:
        self.set_class(self.ascii, "-ascii")

    @property
    def ascii(self) -> bool:
        return getattr(getattr(self.app, "glyphs", None), "name", "") == "ascii"

    def help_text(self) -> Text:
        t = Text()
        t.append("ranks - keys\n" if self.ascii else "ranks — keys\n", style="bold")
        t.append("Enter opens, Esc goes back; the mouse works too. Remap any key by its id in the "
                 "[keymap] table of the config file (id = \"key\").\n", style="dim")
        left_right = "left/right" if self.ascii else "←/→"
        t.append(f"Tab moves the focus (the table, the tabs); {left_right} switch the tabs of a workload and of "
                 "cluster load.\n", style="dim")
        for scope in SCOPES:
            specs = [s for s in self.keymap.catalogue if s.scope == scope and (self.ids is None or s.id in self.ids)]
            if not specs:
                continue
            t.append(f"\n{SCOPE_TITLES.get(scope, scope)}\n", style="bold underline")
            for s in specs:
                t.append(f"  {self.keymap.display(s.id, ascii=self.ascii):<16}", style="bold")
                t.append(f"{s.description:<24}")
                t.append(f"{s.id}\n", style="dim")
        t.append("\n: or ctrl+p opens the command palette: jump to a project, a workload or a view,\n"
                 "or change the theme.\n", style="dim")
        return t

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
