"""What every dashboard screen shares: breadcrumbs, the connection banner, the footer, and the
hook the app calls with each model diff (only the visible screen gets it; a screen that comes
back resyncs from the store)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from monitors.dataloop import DataStatus
from monitors.model_views import ModelDiff
from monitors.sanitize import clean

from ..dashboard import Dashboard
from ..keymap import Keymap
from ..widgets.keyed_table import KeyedTable


def bindings(scope: str, only: tuple[str, ...] | None = None) -> list[BindingType]:
    """The default bindings of `scope` (ids kept, so the user's keymap applies), or those of `only`."""
    return [b for b in Keymap().bindings(scope) if only is None or b.id in only]


def unshown(found: list[BindingType]) -> list[BindingType]:
    """The same bindings kept out of the footer (`?` lists them): where a footer has no room."""
    return [dataclasses.replace(b, show=False) if isinstance(b, Binding) else b for b in found]


SORT_KEYS = ("sort", "sort_reverse")  # o/O on a table that sorts itself (not in its footer)
NARROW = 100


class Crumbs(Static):
    DEFAULT_CSS = """
    Crumbs { height: 1; background: $panel; color: $text; padding: 0 1; }
    """


class RanksFooter(Footer):
    """The footer, with `?` (help, which lists every key) pinned to its right edge: on a narrow
    terminal the keys that do not fit are cut, never the way to find them all."""

    DEFAULT_CSS = """
    RanksFooter FooterKey.-pinned, RanksFooter.-compact FooterKey.-pinned { dock: right; margin: 0;
                                                                           padding-left: 1; }
    """

    def compose(self) -> ComposeResult:
        for widget in super().compose():  # FooterKeys (Textual does not export the class)
            if getattr(widget, "action", None) == "help":
                widget.add_class("-pinned")
            yield widget

    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self._hide_cut_keys)

    def on_resize(self) -> None:
        self._refit()

    def watch_compact(self) -> None:
        self._refit()

    def _refit(self) -> None:
        for widget in self.children:
            widget.display = True
        self.call_after_refresh(self._hide_cut_keys)

    def _hide_cut_keys(self, tries: int = 10) -> None:
        """The keys that do not fit whole before the pinned one are hidden (not cut in half)."""
        if tries and any(w.display and not w.region.width for w in self.children):
            self.call_after_refresh(self._hide_cut_keys, tries - 1)  # not laid out yet
            return
        pinned = next((w for w in self.children if w.has_class("-pinned")), None)
        limit = pinned.region.x if pinned is not None else self.region.right
        cut = False
        for widget in self.children:
            if widget is pinned:
                continue
            cut = cut or widget.region.right > limit
            if cut:
                widget.display = False


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

    @property
    def crumb(self) -> str:
        """This screen's part of the breadcrumbs (a class attribute where it never changes)."""
        return ""

    focus_key: tuple[str, str, str] | None = None  # the workload this screen is about

    @property
    def dashboard(self) -> Dashboard:
        """The app, as far as a screen may use it (`tui.dashboard.Dashboard`; `RanksApp` provides it)."""
        return cast(Dashboard, self.app)

    def compose(self) -> ComposeResult:
        yield Crumbs(id="crumbs")
        yield Banner(id="banner")
        yield from self.body()
        yield RanksFooter(show_command_palette=False)

    def body(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.set_class(self.dashboard.look.glyphs.name == "ascii", "-ascii")
        self.query_one(RanksFooter).compact = self.is_narrow()
        self.show_status()

    def on_screen_resume(self) -> None:
        self.dashboard.data.focus(self.focus_key)
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

    def crumb_note(self) -> Text | None:
        """Said after this screen's breadcrumb (not after it on deeper screens): an active filter."""
        return None

    # -- sorting a table that sorts itself (`o` next column, `O` the other way; a header click) ----
    def sort_table(self, table: KeyedTable[Any] | None, *, reverse: bool = False) -> None:
        if table is None or not table.row_count:
            return
        if reverse:
            table.reverse_sort()
        else:
            table.cycle_sort()
        self.notify(table.sort_label() or "in its own order", timeout=1.5, markup=False)

    # -- tabs (the screens that have them bind next_tab / previous_tab) ---------------------------
    def action_next_tab(self) -> None:
        self._step_tab(+1)

    def action_previous_tab(self) -> None:
        self._step_tab(-1)

    def _step_tab(self, step: int) -> None:
        """The tab `step` away from the pane the screen's TabbedContent shows, set on it directly.
        (Tabs' own next/previous moves its bar and posts a message the TabbedContent applies later:
        keys typed ahead on a busy machine or a slow link were each counted from the bar, and the
        late messages then moved it back, so a burst of four moved the tabs once or twice.)"""
        for tabbed in self.query(TabbedContent).results():
            ids = [p.id for p in tabbed.query(TabPane) if p.id and not p.disabled and tabbed.get_tab(p.id).display]
            if ids:
                at = ids.index(tabbed.active) if tabbed.active in ids else (-1 if step > 0 else 0)
                tabbed.active = ids[(at + step) % len(ids)]
            return

    # -- status ------------------------------------------------------------------------------------
    def show_status(self) -> None:
        if not self.query(Crumbs):  # pushed but not composed yet: on_mount shows it
            return
        app = self.dashboard
        st = app.store.status
        labels = [clean(label, limit=80) for label in app.breadcrumbs(self)]
        note = self.crumb_note()

        def path(shown: list[str]) -> Text:
            t = Text(no_wrap=True, overflow="ellipsis")
            t.append("ranks", style="bold")
            for label in shown:
                t.append(f" {app.look.glyphs.breadcrumb.strip()} ")
                t.append(label)
            if note is not None and note.plain:
                t.append("  ")
                t.append_text(note)
            return t

        state = {"connecting": "connecting", "syncing": "syncing", "live": "", "retrying": "reconnecting",
                 "waiting": "waiting for the server"}.get(st.phase, st.phase)
        right = Text(no_wrap=True)
        if app.read_only:
            right.append(" read-only ", style="reverse")
            right.append(" ")
        if state:
            right.append(state, style="bold")
            right.append(" ")
        right.append(clean(st.context or "", limit=40), style="dim")
        width = max(self.size.width - 2, 20)
        crumbs = path(labels)
        # too long (80 columns, deep): the middle of the path gives way to an ellipsis, then the context
        cut = 1
        while crumbs.cell_len + right.cell_len + 2 > width and cut < len(labels):
            crumbs = path([app.look.glyphs.ellipsis, *labels[cut:]])
            cut += 1
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
        for line in status_lines(st, getattr(self, "namespace", None)):  # waiting, -p, GPU metrics
            if banner.plain:
                banner.append("\n")
            banner.append(f"{app.look.glyphs.warning} ", style="bold")
            banner.append(clean(line, limit=300))
        extra = self.banner_text()
        if extra is not None and extra.plain:
            if banner.plain:
                banner.append("\n")
            banner.append_text(extra)
        self.query_one(Banner).show(banner if banner.plain else None, warning=st.phase != "retrying")

    narrow: bool = False  # the column set in use (screens with tables choose one by width)

    def on_resize(self) -> None:
        self.show_status()
        for footer in self.query(RanksFooter):
            footer.compact = self.is_narrow()
        if self.is_mounted and self.is_narrow() != self.narrow:
            self.restyle()  # a narrower (or wider) column set

    def is_narrow(self) -> bool:
        """Under 100 columns (an 80x24 login-node terminal): fewer, tighter columns."""
        return self.app.size.width < NARROW


def status_lines(st: DataStatus, namespace: str | None) -> list[str]:
    """What the data loop says about this screen beyond the connection: still waiting for the
    first answer, the project asked for (-p) not found or forbidden, GPU metrics forbidden."""
    out = []
    if st.phase == "waiting" and st.problem:
        out.append(f"waiting for the server: {st.problem}")
    if st.project_problem and namespace is not None and namespace == st.project:
        out.append(st.project_problem)
    if st.metrics_forbidden:
        out.append(f"GPU metrics are forbidden to {st.user or 'this identity'}: {st.metrics_forbidden}")
    return out
