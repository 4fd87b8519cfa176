"""The list screens: projects and workloads (keyed table, `/` filter, sort keys, "mine")."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.widgets import Input, Label, Static

from monitors import api_paths
from monitors.humanize import age, age_changes_in
from monitors.model_views import KeyedDiff, ModelDiff, ProjectView, WorkloadView
from monitors.sanitize import clean

from ..cells import Cells, age_cell, project_row, workload_row
from ..dashboard import WorkloadKey
from ..filtering import RowFilter
from ..widgets.keyed_table import Column, KeyedTable
from ..widgets.table_sort import cell_key, sort_rows
from .base import RanksScreen, bindings

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class FilterInput(Input):
    """The one-line input of `/` (and of the logs' prompts), in a `FilterBar`: compact, so the text
    typed shows on its one row (a focused Input's border would take the row)."""

    DEFAULT_CSS = """
    FilterInput, FilterInput:focus { display: none; border: none; height: 1; width: 1fr; padding: 0 1;
                                     background: $boost; }
    FilterInput.-shown { display: block; }
    """

    def __init__(self, value: str = "", placeholder: str = "", *, id: str | None = None) -> None:
        super().__init__(value, placeholder=placeholder, id=id, compact=True)

    def on_mount(self) -> None:
        self.cursor_blink = False  # no redraws twice a second over a slow SSH link

    def watch_value(self, value: str) -> None:
        """Filter as the value changes, in the same frame as the input's own redraw (waiting for
        the Changed message costs a frame: ~20 ms more per keystroke with 1,000 rows)."""
        live = getattr(self.screen, "live_filter", None)
        if callable(live) and self.has_class("-shown"):
            live(self, value)


class FilterBar(Horizontal):
    """The bottom row while a prompt is open: what is asked (`/`, `ranks`) and the input."""

    DEFAULT_CSS = """
    FilterBar { height: 1; display: none; background: $boost; }
    FilterBar.-shown { display: block; }
    FilterBar > Label { width: auto; height: 1; padding: 0 0 0 1; text-style: bold; background: $boost; }
    """

    def __init__(self, placeholder: str = "", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._placeholder = placeholder

    def compose(self) -> ComposeResult:
        yield Label("/", id="prompt")
        yield FilterInput(placeholder=self._placeholder, id="filter")

    @property
    def input(self) -> FilterInput:
        return self.query_one(FilterInput)

    def open(self, prompt: str, value: str, placeholder: str | None = None) -> FilterInput:
        self.query_one(Label).update(Text(prompt))
        inp = self.input
        if placeholder is not None:
            inp.placeholder = placeholder
        inp.add_class("-shown")  # before the value: watch_value filters only while shown
        inp.value = value
        self.add_class("-shown")
        # focused in this key's turn (`focus()` waits for the app's queue): the keys typed with the
        # one that opened it, queued behind it (a slow link hands them over together), go into it
        self.screen.set_focus(inp)
        return inp

    def close(self) -> None:
        self.input.remove_class("-shown")
        self.remove_class("-shown")


class EmptyNote(Static):
    DEFAULT_CSS = """
    EmptyNote { height: auto; padding: 1 2; color: $text-muted; display: none; }
    EmptyNote.-shown { display: block; }
    """


class ListScreen(RanksScreen, Generic[K, V]):
    BINDINGS: ClassVar[list[BindingType]] = [*bindings("global", ("filter",)), *bindings(
        "table", ("open", "describe", "logs", "sort", "sort_reverse", "toggle_mine", "all_projects",
                  "new_session"))]
    columns: ClassVar[list[Column]] = []
    sort_names: ClassVar[list[str]] = ["name"]  # what `o` cycles through, each sorted by its value
    sort_columns: ClassVar[dict[str, str]] = {}  # sort name -> the column that shows it (its arrow)
    noun = "row"  # "no row matches /xyz"

    def __init__(self) -> None:
        super().__init__()
        self.row_filter = RowFilter()
        self.sort_index = 0
        self.sort_reverse = False
        self.sort_column: int | None = None  # a header clicked that no sort name shows: by its cells' text
        self.mine = False
        self._cells: dict[K, Cells] = {}
        # row -> (the cells reckoned, when their age shows another text, the time it counts from)
        self._age_ahead: dict[K, tuple[Cells, float, float]] = {}
        # the ticker's agenda: (when a row's age shows another text, a tie-break, the row), and the
        # rows whose cells were made anew since it last looked (all: every row), so that a tick
        # looks only at the rows due, not at every row every second
        self._age_agenda: list[tuple[float, int, K]] = []
        self._age_new: set[K] = set()
        self._age_all = True
        self._age_seq = itertools.count()
        self.narrow = False
        self._note = ""  # the filter note shown after the breadcrumb

    # -- what a list shows (subclasses say; the defaults are an empty list) ------------------------
    def items(self) -> Mapping[K, V]:
        return {}

    def part(self, diff: ModelDiff) -> KeyedDiff[Any, Any]:
        return KeyedDiff()

    def in_scope(self, item: V) -> bool:
        return True

    def row(self, item: V, now: float) -> Cells:
        return (Text(clean(item, limit=200)),)

    def search_texts(self, item: V) -> Iterable[str]:
        return ()

    def labels(self, item: V) -> Mapping[str, str]:
        return {}

    def sort_value(self, item: V, name: str) -> Any:
        return getattr(item, name)

    def empty_text(self) -> str:
        return "nothing here"

    def open_item(self, key: K, item: V) -> None:
        """Enter on a row."""

    # -- layout ------------------------------------------------------------------------------------
    def body(self) -> ComposeResult:
        yield KeyedTable(id="table")
        yield EmptyNote(id="empty")
        yield FilterBar("regex, !regex to invert, -l key=value for labels (Enter keeps it, Esc clears it)",
                        id="filterbar")

    @property
    def table(self) -> KeyedTable[K]:
        return self.query_one(KeyedTable)

    def on_mount(self) -> None:
        super().on_mount()
        self.table.sorts_rows = False  # (sorted here, by the items' values)
        self.table.choose = self.action_open  # (Enter opens at once: keys typed after it reach what opens)
        self._set_columns()
        self.resync()
        self.table.focus()

    def _set_columns(self) -> None:
        self.narrow = self.is_narrow()
        cols = list(self.active_columns())
        if self.sort_column is not None and self.sort_column >= len(cols):
            self.sort_column = None
        shown = self.sort_column if self.sort_column is not None else self._column_of(self.sort_names[self.sort_index])
        glyphs = self.dashboard.look.glyphs
        labelled = []
        for i, col in enumerate(cols):
            label = col.label
            if i == shown:
                label = f"{label}{glyphs.sort_descending if self.sort_reverse else glyphs.sort_ascending}"
            labelled.append(Column(label, col.width, col.min, col.shrink))
        self.table.set_columns(labelled)
        self._cells = {}
        self._age_all = True

    def _column_of(self, name: str) -> int | None:
        """The column that shows sort `name` (its arrow goes there)."""
        label = self.sort_columns.get(name)
        for i, col in enumerate(self.active_columns()):
            if col.label == label or (label is None and col.label.lower().split("/")[0] == self._sort_label(name)):
                return i
        return None

    def _sort_label(self, name: str) -> str:
        return {"gpus_allocated": "gpus", "gpu_util": "util", "created": "age", "ranks_total": "ranks",
                "namespace": "namespace", "gpu_quota": "quota", "project": "project"}.get(name, name)

    def active_columns(self) -> Iterable[Column]:
        return self.columns

    # -- updates -----------------------------------------------------------------------------------
    def model_changed(self, diff: ModelDiff) -> None:
        part = self.part(diff)
        if not part:
            if diff.status_changed:
                self._update_empty()
            return
        now = self.dashboard.clock()
        for key in part.removed:
            self._cells.pop(key, None)
        items = self.items()
        changed = []
        for key in (*part.added, *part.changed):
            item = items.get(key)
            if item is not None and self.in_scope(item):
                self._cells[key] = self.row(item, now)
                changed.append(key)
            else:
                self._cells.pop(key, None)
        self._age_new.update(changed)
        self._show(changed)
        self.dashboard.ages_shown(self._ages_since(changed), now)

    def resync(self) -> None:
        if not self.is_mounted:
            return
        now = self.dashboard.clock()
        self._cells = {k: self.row(v, now) for k, v in self.items().items() if self.in_scope(v)}
        self._age_all = True
        self._show(None)
        self.dashboard.ages_shown(self._ages_since(self._cells), now)

    def restyle(self) -> None:
        self._set_columns()
        self.resync()

    def _order(self) -> list[K]:
        items = self.items()
        flt = self.row_filter
        if not flt.active:
            keys = [k for k in self._cells if k in items]
        elif flt.selector:
            keys = [k for k in self._cells if k in items and flt.matches((), self.labels(items[k]))]
        else:
            keys = [k for k in self._cells if k in items and flt.matches(self.search_texts(items[k]), {})]
        if self.sort_column is not None:  # a column no sort name shows: by what its cells say
            column = self.sort_column
            cells = self._cells
            return sort_rows(keys, lambda k: cell_key(cells[k][column].plain) if column < len(cells[k]) else None,
                             self.sort_reverse)
        name = self.sort_names[self.sort_index]

        def key(k: K) -> tuple[Any, ...]:
            v = self.sort_value(items[k], name)
            return (v is None, v if v is not None else 0, str(k))
        keys.sort(key=key, reverse=self.sort_reverse)
        if self.sort_reverse:  # None values stay last
            keys.sort(key=lambda k: self.sort_value(items[k], name) is None)
        return keys

    def _show(self, changed: list[K] | None) -> None:
        self.table.sync(self._order(), self._cells, changed)
        self._update_empty()
        note = self._filter_note()
        if note != self._note:  # the breadcrumb is redrawn only when what it says changes
            self._note = note
            self.show_status()

    def _filter_shown(self) -> str:
        """The filter as typed after `/` (`/bert`, `/!team`), or the label selector (`-l a=b`)."""
        flt = self.row_filter
        return flt.text if flt.selector else f"/{flt.text}"

    def _filter_note(self) -> str:
        if not self.row_filter.active or not self.is_mounted:
            return ""
        return f"{self._filter_shown()}  {self.table.row_count} of {len(self._cells)}"

    def crumb_note(self) -> Text | None:
        if not self._note:
            return None
        shown, _, count = self._note.rpartition("  ")
        t = Text(clean(shown, limit=60), style="bold")
        t.append(f"  {count}")
        return t

    def _update_empty(self) -> None:
        note = self.query_one(EmptyNote)
        if self.table.row_count:
            note.remove_class("-shown")
            return
        st = self.dashboard.store.status
        if not self.dashboard.store.synced:
            text = {"connecting": "connecting to the API server…", "retrying": "cannot reach the API server; retrying…",
                    "waiting": "waiting for the API server to answer…"}.get(st.phase, "reading the cluster…")
        elif self.row_filter.active and self._cells:
            text = f"no {self.noun} matches {self._filter_shown()} (Esc clears the filter)"
        else:
            text = self.empty_text()
        note.update(Text(clean(text, limit=300)))
        note.add_class("-shown")

    def age_since(self, item: V) -> float | None:
        """When the age in an item's row (its last cell) is measured from; None: no age."""
        return None

    def _ages_since(self, keys: Iterable[K]) -> list[float]:
        items = self.items()
        return [t for k in keys if k in self._cells and (item := items.get(k)) is not None
                and (t := self.age_since(item)) is not None]

    def tick_ages(self, now: float) -> list[float]:
        """The app's age ticker: every age cell whose text is another at `now` is replaced and
        repainted alone (rows filtered out too: they keep their cells for when they come back).
        Returns the time the soonest-changing age counts from (none: no age held)."""
        # Each row's next change is remembered with the cells it was reckoned for, and kept in an
        # agenda by time, so a tick looks only at the rows due and those made anew since (a young
        # cluster ticks every second, or a large one whose rows' minutes turn at different
        # seconds: reckoning a thousand ages each time was most of an idle dashboard's UI thread).
        items, cells_of = self.items(), self._cells
        ahead, agenda = self._age_ahead, self._age_agenda
        if self._age_all:
            looked: Iterable[K] = list(cells_of)
            self._age_all = False
            self._age_new = set()
        else:
            looked, self._age_new = self._age_new, set()
        due: list[K] = []
        while agenda and agenda[0][0] <= now:
            due.append(heapq.heappop(agenda)[2])
        for k in itertools.chain(looked, due):
            cells = cells_of.get(k)
            if cells is None:
                continue
            got = ahead.get(k)
            if got is not None and got[0] is cells and got[1] > now:
                continue  # (reckoned already, not due)
            item = items.get(k)
            t = None if item is None else self.age_since(item)
            if t is None:
                ahead.pop(k, None)
                continue
            if age(now - t, live=True) != cells[-1].plain:
                cell = age_cell(t, now)
                cells_of[k] = cells = (*cells[:-1], cell)
                self.table.update_cell(k, len(cells) - 1, cell)
            ahead[k] = got = (cells, now + age_changes_in(now - t), t)
            heapq.heappush(agenda, (got[1], next(self._age_seq), k))
        while agenda:  # (the soonest that is still as reckoned: a row remade or gone is looked at anew)
            when, _, k = agenda[0]
            got = ahead.get(k)
            if got is not None and got[1] == when and got[0] is cells_of.get(k):
                break
            heapq.heappop(agenda)
        if len(ahead) > 2 * len(cells_of) + 64:
            self._age_ahead = {k: v for k, v in ahead.items() if k in cells_of}
        if len(agenda) > 2 * len(cells_of) + 64:
            self._age_agenda = agenda = [(v[1], next(self._age_seq), k) for k, v in self._age_ahead.items()]
            heapq.heapify(agenda)
        return [] if not agenda else [ahead[agenda[0][2]][2]]

    # -- actions -----------------------------------------------------------------------------------
    def selected(self) -> tuple[K, V] | None:
        key = self.table.cursor_key
        if key is None:
            return None
        item = self.items().get(key)
        return None if item is None else (key, item)

    def action_open(self) -> None:
        sel = self.selected()
        if sel is not None:
            self.open_item(*sel)

    @on(KeyedTable.RowSelected, "#table")
    def _row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_sort(self) -> None:
        if self.sort_column is None:
            self.sort_index = (self.sort_index + 1) % len(self.sort_names)
        self.sort_column = None
        self._set_columns()
        self.resync()
        self.notify(f"sorted by {self._sort_label(self.sort_names[self.sort_index])}", timeout=1.5, markup=False)

    @on(KeyedTable.HeaderClicked, "#table")
    def _header_clicked(self, event: KeyedTable.HeaderClicked) -> None:
        """A click on a column's header: sorted by it (by its value where a sort name shows it);
        on the column already sorted by, the other way."""
        event.stop()
        column = event.column
        named = next((i for i, n in enumerate(self.sort_names) if self._column_of(n) == column), None)
        if named is not None:
            again = self.sort_column is None and self.sort_index == named
            self.sort_index, self.sort_column = named, None
        else:
            again = self.sort_column == column
            self.sort_column = column
        self.sort_reverse = not self.sort_reverse if again else False
        self._set_columns()
        self.resync()
        label = list(self.active_columns())[column].label
        self.notify(f"sorted by {label.lower()}{' (reversed)' if self.sort_reverse else ''}", timeout=1.5,
                    markup=False)

    def action_sort_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self._set_columns()
        self.resync()

    def action_filter(self) -> None:
        self.query_one(FilterBar).open("/", self.row_filter.text)  # the focus moving refreshes the footer

    def live_filter(self, inp: Input, value: str) -> None:
        try:
            flt = RowFilter.parse(value)
        except ValueError as exc:
            inp.border_subtitle = str(exc)
            inp.tooltip = str(exc)
            return
        inp.border_subtitle = ""
        inp.tooltip = None
        if flt.text == self.row_filter.text:
            return
        self.row_filter = flt
        self._show([])  # only the order changes: no cell is compared again

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        try:
            self.row_filter = RowFilter.parse(event.value)
        except ValueError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self._close_filter()

    def _close_filter(self) -> None:
        """The input closes; an active filter stays, said after the breadcrumb with its count."""
        self.query_one(FilterBar).close()
        self.table.focus()
        self._show([])
        self.refresh_bindings()

    def action_back(self) -> None:
        inp = self.query_one(FilterInput)
        if inp.has_focus:
            if not inp.value.strip():
                self.row_filter = RowFilter()
            self._close_filter()
            return
        if self.row_filter.active:
            self.row_filter = RowFilter()
            inp.value = ""
            self._close_filter()
            return
        self.dashboard.go_back()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc is shown where it does something: it clears a filter, or there is a screen to go back to."""
        if action == "back" and self.is_mounted:
            return self.row_filter.active or self.query_one(FilterInput).has_focus or self.dashboard.can_go_back()
        return True

    def action_toggle_mine(self) -> None:
        self.mine = not self.mine
        self.resync()
        self.show_status()
        self.notify("only my workloads" if self.mine else "everyone's workloads", timeout=1.5, markup=False)


class ProjectsScreen(ListScreen[str, ProjectView]):
    crumb = "projects"
    noun = "project"
    columns: ClassVar[list[Column]] = [
        Column("PROJECT", None, 10), Column("NAMESPACE", None, 9, 1), Column("QUOTA", 5), Column("ALLOCATED", 14),
        Column("UTIL", 10), Column("RUNNING", 7), Column("PENDING", 7)]
    sort_names: ClassVar[list[str]] = ["name", "gpus_allocated", "gpu_util", "pending"]
    sort_columns: ClassVar[dict[str, str]] = {"name": "PROJECT", "gpus_allocated": "ALLOCATED", "gpu_util": "UTIL",
                                              "pending": "PENDING"}

    def items(self) -> Mapping[str, ProjectView]:
        return self.dashboard.store.projects

    def part(self, diff: ModelDiff) -> KeyedDiff[Any, Any]:
        return diff.projects

    def row(self, item: ProjectView, now: float) -> Cells:
        return project_row(self.dashboard.look, item)

    def search_texts(self, item: ProjectView) -> Iterable[str]:
        return (item.name, item.namespace)

    def empty_text(self) -> str:
        forbidden = self.dashboard.store.status.forbidden_for("namespaces")
        if forbidden:
            return f"forbidden: {clean(forbidden)}"
        return "no projects: no namespace with workloads or GPU quota is visible to you"

    def open_item(self, key: str, item: ProjectView) -> None:
        self.dashboard.open_workloads(item.namespace)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A project has no logs, and "only mine" is about workloads: neither is offered here."""
        if action in ("logs", "toggle_mine"):
            return False
        return super().check_action(action, parameters)

    def action_describe(self) -> None:
        """`d`: the project's namespace as YAML (its labels say which Run:ai project it is)."""
        sel = self.selected()
        if sel is not None:
            ns = sel[1].namespace
            self.dashboard.open_describe_path(f"namespace/{ns}", api_paths.namespace(ns))

    def action_all_projects(self) -> None:
        self.dashboard.open_workloads(None)

    def action_new_session(self) -> None:
        sel = self.selected()
        self.dashboard.actions.new_session(sel[1].namespace if sel else None)


class WorkloadsScreen(ListScreen[WorkloadKey, WorkloadView]):
    noun = "workload"
    BINDINGS: ClassVar[list[BindingType]] = bindings(
        "table", ("shell", "exec_all", "delete", "suspend", "convert", "debug", "ports"))
    sort_names: ClassVar[list[str]] = ["name", "status", "gpus_allocated", "gpu_util", "created", "ranks_total"]

    def __init__(self, namespace: str | None) -> None:
        super().__init__()
        self.namespace = namespace
        self._health_shown: dict[Any, Any] = {}

    @property
    def crumb(self) -> str:
        if self.namespace is None:
            return "all projects" + (" (mine)" if self.mine else "")
        p = self.dashboard.store.projects.get(self.namespace)
        return (p.name if p else self.namespace) + (" (mine)" if self.mine else "")

    def active_columns(self) -> Iterable[Column]:
        """Too wide for the view (a long name): the reason in STATUS gives way first, then PROJECT,
        then NAME (down to 12); kind, numbers and AGE keep their width."""
        narrow = self.narrow
        cols = [
            Column("NAME", None, 12, 0), Column("KIND", 7), Column("STATUS", 15 if narrow else 28, 11, 3),
            Column("I", 1), Column("RANKS", 5), Column("GPUS", 5), Column("UTIL", 8 if narrow else 10),
            Column("AGE", 5)]
        if self.namespace is None:
            cols.insert(1, Column("PROJECT", None, 7, 2))
        return cols

    def items(self) -> Mapping[WorkloadKey, WorkloadView]:
        return self.dashboard.store.workloads

    def part(self, diff: ModelDiff) -> KeyedDiff[Any, Any]:
        return diff.workloads

    def in_scope(self, item: WorkloadView) -> bool:
        if self.namespace is not None and item.namespace != self.namespace:
            return False
        return not self.mine or item.user == self.dashboard.me

    def row(self, item: WorkloadView, now: float) -> Cells:
        return workload_row(self.dashboard.look, item, show_project=self.namespace is None, now=now,
                            util_width=3 if self.narrow else 5, health=self.dashboard.store.health.get(item.key))

    def model_changed(self, diff: ModelDiff) -> None:
        super().model_changed(diff)
        health = self.dashboard.store.health
        if health is not self._health_shown:  # hangs and stragglers are judged after each metrics refresh
            old, self._health_shown = self._health_shown, health
            keys = [k for k in set(old) | set(health) if old.get(k) != health.get(k)]
            items = self.items()
            now = self.dashboard.clock()
            changed = []
            for k in keys:
                item = items.get(k)
                if item is not None and self.in_scope(item):
                    self._cells[k] = self.row(item, now)
                    changed.append(k)
            if changed:
                self._age_new.update(changed)
                self._show(changed)

    def search_texts(self, item: WorkloadView) -> Iterable[str]:
        return (item.name, item.kind, item.status, item.reason, item.project, item.user)

    def age_since(self, item: WorkloadView) -> float | None:
        return item.created

    def labels(self, item: WorkloadView) -> Mapping[str, str]:
        return dict(item.labels)

    def sort_value(self, item: WorkloadView, name: str) -> Any:
        if name == "created":
            return -(item.created or 0.0)  # newest first, as "age" ascending
        return getattr(item, name)

    def empty_text(self) -> str:
        st = self.dashboard.store.status
        if self.namespace is not None:
            forbidden = next((m for n, m in st.forbidden if self.namespace in n), "")
            if forbidden:
                return f"forbidden: {clean(forbidden)}"
        elif st.forbidden and not self.dashboard.store.workloads:
            return f"forbidden: {clean(st.forbidden[0][1])}"
        where = "this project" if self.namespace else "any project you can see"
        return f"no {'workloads of yours' if self.mine else 'distributed workloads'} in {where}"

    def banner_text(self) -> Text | None:
        st = self.dashboard.store.status
        if not st.cluster_wide and self.namespace is None and st.namespaces:
            return Text(f"you may not list all namespaces; watching {', '.join(st.namespaces)}", style="dim")
        return None

    def open_item(self, key: WorkloadKey, item: WorkloadView) -> None:
        self.dashboard.open_workload(item.key)

    def action_describe(self) -> None:
        sel = self.selected()
        if sel is not None:
            self.dashboard.open_describe(sel[1])

    def action_logs(self) -> None:
        sel = self.selected()
        if sel is not None:
            self.dashboard.open_logs(sel[1].key)

    def action_all_projects(self) -> None:
        if self.namespace is not None:
            self.dashboard.open_workloads(None)

    def _on_selected(self, act: str) -> None:
        sel = self.selected()
        if sel is None:
            return
        wl = sel[1]
        {"shell": self.dashboard.actions.shell_into, "exec_all": self.dashboard.actions.exec_all, "delete": self.dashboard.actions.delete_workload,
         "suspend": self.dashboard.actions.toggle_suspend, "convert": self.dashboard.actions.convert_workload,
         "debug": self.dashboard.actions.debug_workload}[act](wl)

    def action_shell(self) -> None:
        self._on_selected("shell")

    def action_ports(self) -> None:
        """`P`: the selected workload's ports (the Ports view, as from its detail)."""
        if (sel := self.selected()) is not None:
            from .ports import PortsScreen

            self.app.push_screen(PortsScreen(sel[1]))

    def action_exec_all(self) -> None:
        self._on_selected("exec_all")

    def action_delete(self) -> None:
        self._on_selected("delete")

    def action_suspend(self) -> None:
        self._on_selected("suspend")

    def action_convert(self) -> None:
        self._on_selected("convert")

    def action_debug(self) -> None:
        self._on_selected("debug")

    def action_new_session(self) -> None:
        self.dashboard.actions.new_session(self.namespace)

