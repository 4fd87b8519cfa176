"""What every dashboard screen shares: breadcrumbs, the connection banner, the footer, and the
hook the app calls with each model diff (only the visible screen gets it; a screen that comes
back resyncs from the store)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static

from monitors.sanitize import clean
from monitors.views import ModelDiff

from ..keymap import Keymap

if TYPE_CHECKING:
    from ..app import RanksApp


def bindings(scope: str, only: tuple[str, ...] | None = None) -> list[BindingType]:
    """The default bindings of `scope` (ids kept, so the user's keymap applies), or those of `only`."""
    return [b for b in Keymap().bindings(scope) if only is None or b.id in only]


NARROW = 100


class Crumbs(Static):
    DEFAULT_CSS = """
    Crumbs { height: 1; background: $panel; color: $text; padding: 0 1; }
    """


class Banner(Static):
    """Connection lost / forbidden / workload deleted: one or two lines, hidden when empty."""

    DEFAULT_CSS = """
    Banner { height: auto; max-height: 3; background: $error 30%; color: $text; padding: 0 1; display: none; }
    Banner.-warning { background: $warning 25%; }
    Banner.-shown { display: block; }
    """

    def show(self, text: Text | None, *, warning: bool = False) -> None:
        if text is None or not text.plain:
            self.remove_class("-shown")
            return
        self.set_class(warning, "-warning")
        self.add_class("-shown")
        self.update(text)


class RanksScreen(Screen[None]):
    """Base of the dashboard's screens."""

    BINDINGS: ClassVar[list[BindingType]] = bindings("global", ("back",))
    crumb: str = ""
    focus_key: tuple[str, str, str] | None = None  # the workload this screen is about

    @property
    def ranks(self) -> RanksApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield Crumbs(id="crumbs")
        yield Banner(id="banner")
        yield from self.body()
        yield Footer(show_command_palette=False)

    def body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.set_class(self.ranks.glyphs.name == "ascii", "-ascii")
        self.show_status()

    def on_screen_resume(self) -> None:
        self.ranks.data.focus(self.focus_key)
        self.show_status()
        self.resync()

    # -- hooks -------------------------------------------------------------------------------------
    def model_changed(self, diff: ModelDiff) -> None:
        """A diff arrived while this screen is visible (it may not be composed yet: check)."""

    def resync(self) -> None:
        """Show the store's current state (the screen became visible again, or the look changed)."""

    def restyle(self) -> None:
        """The theme or glyphs changed."""
        self.resync()

    def banner_text(self) -> Text | None:
        """Screen-specific trouble (forbidden, deleted) shown under the connection state."""
        return None

    # -- status ------------------------------------------------------------------------------------
    def show_status(self) -> None:
        if not self.query(Crumbs):  # pushed but not composed yet: on_mount shows it
            return
        app = self.ranks
        st = app.store.status
        crumbs = Text(no_wrap=True, overflow="ellipsis")
        crumbs.append("ranks", style="bold")
        for label in app.breadcrumbs(self):
            crumbs.append(f" {app.look.glyphs.breadcrumb.strip()} ")
            crumbs.append(clean(label, limit=80))
        state = {"connecting": "connecting", "syncing": "syncing", "live": "", "retrying": "reconnecting"}.get(
            st.phase, st.phase)
        right = Text(no_wrap=True)
        if app.read_only:
            right.append(" read-only ", style="reverse")
            right.append(" ")
        if state:
            right.append(state, style="bold")
            right.append(" ")
        right.append(clean(st.context or "", limit=40), style="dim")
        width = max(self.size.width - 2, 20)
        pad = width - crumbs.cell_len - right.cell_len
        if pad > 1:
            crumbs.append(" " * pad)
            crumbs.append_text(right)
        self.query_one(Crumbs).update(crumbs)
        banner = Text()
        if st.phase == "retrying" and st.problem:
            banner.append(f"{app.look.glyphs.warning} connection lost: ", style="bold")
            banner.append(clean(st.problem, limit=300))
            banner.append(" — retrying; the data shown may be stale", style="dim")
        extra = self.banner_text()
        if extra is not None and extra.plain:
            if banner.plain:
                banner.append("\n")
            banner.append_text(extra)
        self.query_one(Banner).show(banner if banner.plain else None, warning=st.phase != "retrying")

    narrow: bool = False  # the column set in use (screens with tables choose one by width)

    def on_resize(self) -> None:
        self.show_status()
        if self.is_mounted and self.is_narrow() != self.narrow:
            self.restyle()  # a narrower (or wider) column set

    def is_narrow(self) -> bool:
        """Under 100 columns (an 80x24 login-node terminal): fewer, tighter columns."""
        return self.app.size.width < NARROW

