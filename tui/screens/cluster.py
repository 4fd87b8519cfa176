"""Cluster load, for operators: nodes (GPU allocation against utilisation, a heatmap of slots; a
node's row expands into its GPUs), quota use per project, pending workloads with their reasons,
interactive sessions holding idle GPUs, and every GPU (`gpus`)."""

from __future__ import annotations

import concurrent.futures
import math
from collections.abc import Iterable
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.message import Message
from textual.widgets import Input, Static, TabbedContent, TabPane

from monitors import api_paths
from monitors.diagnostics.idle import IdleSession, format_gpu_hours, idle_sessions_of
from monitors.diagnostics.leftovers import still_held_all
from monitors.gpu_fleet import GpuKey
from monitors.humanize import age, gpus, percent
from monitors.model_views import ModelDiff, NodeView, ProjectView, RankView, WorkloadView
from monitors.sanitize import clean

from ..cells import Cells, Look, gpu_pair, node_row, plain, quota_cell, status_cell, util_cell
from ..filtering import RowFilter
from ..widgets.key_tabs import KeyTabs
from ..widgets.keyed_table import Column, KeyedTable
from . import gpus as gt
from .base import SORT_KEYS, RanksScreen, bindings, unshown
from .lists import FilterBar, FilterInput
from .workload import pending_reasons

NODE_COLUMNS: list[Column] = [
    Column("NODE", None, 10), Column("POOL", None, 4, 1), Column("GPU", None, 4, 2), Column("STATE", None),
    Column("ALLOCATED", 12), Column("UTIL", 10), Column("MEM", 7), Column("PODS", 4), Column("SLOTS", None)]
NARROW_NODE_COLUMNS: list[Column] = [
    Column("NODE", None, 10), Column("POOL", None, 4, 1), Column("STATE", None), Column("ALLOC", 10),
    Column("UTIL", 8), Column("PODS", 4), Column("SLOTS", None)]
PENDING_COLUMNS: list[Column] = [
    Column("WORKLOAD", None, 14), Column("GPUS", 5), Column("WAITING", 7), Column("WHY", None, 10, 1)]
IDLE_COLUMNS: list[Column] = [
    Column("SESSION", None, 14), Column("PROJECT", None, 7, 2), Column("USER", None, 5, 1), Column("GPUS", 5),
    Column("IDLE FOR", 8), Column("GPU-HOURS", 9)]
POD_COLUMNS: list[Column] = [
    Column("WORKLOAD", None, 14), Column("RANK", None, 8), Column("STATUS", None, 9, 1), Column("GPUS", 5),
    Column("UTIL", 10), Column("AGE", 5)]
WorkloadKey = tuple[str, str, str]
PodKey = tuple[WorkloadKey, str]  # a node's pods table: (its workload, the pod)


def node_of_row(key: Any) -> str | None:
    """The node a row of the nodes table stands under: a GPU row's (``("gpu", node, ...)``); None for a node's."""
    return key[1] if isinstance(key, tuple) else None


def heat_cell(look: Look, n: NodeView) -> Text:
    """One cell per GPU: allocated slots coloured by the node's utilisation, free slots dim."""
    total = int(n.gpus)
    used = min(total, math.ceil(n.gpus_allocated)) if n.gpus_allocated else 0
    t = Text(no_wrap=True)
    if total <= 0:
        return t
    t.append(look.glyphs.bar_full * used, style=look.util_style(n.gpu_util) if n.gpu_util is not None else "bold")
    t.append(look.glyphs.bar_empty * (total - used) if look.glyphs.bar_empty.strip() else "." * (total - used),
             style="dim")
    return t


def quota_lines(look: Look, all_projects: Iterable[ProjectView]) -> Text:
    projects = sorted(all_projects, key=lambda p: p.name)
    t = Text(no_wrap=True)
    if not projects:
        t.append("no projects visible", style="dim")
        return t
    width = max(len(clean(p.name, limit=40)) for p in projects)
    for p in projects:
        t.append(f"{clean(p.name, limit=40):<{width}}  ")
        t.append_text(quota_cell(look, p.gpus_allocated, p.gpu_quota, width=16, numbers=7))
        t.append("  util ")
        t.append_text(util_cell(look, p.gpu_util, "ok" if p.gpu_util is not None else "unknown"))
        t.append(f"  running {p.running}  pending {p.pending}\n")
    return t


def workload_label(w: WorkloadView) -> Text:
    return plain(f"{clean(w.project, limit=30)}/{clean(w.name, limit=60)}", 100)


def pending_row(look: Look, w: WorkloadView, now: float) -> Cells:
    reasons = pending_reasons(w)
    return (workload_label(w), Text(gpus(w.gpus_requested), justify="right"),
            Text(age(now - w.created, live=True) if w.created else "-", justify="right"),
            Text(reasons[0] if reasons else "-", style="dim", no_wrap=True, overflow="ellipsis"))


def pending_detail(look: Look, w: WorkloadView | None, count: int, now: float) -> Text:
    """Under the pending table: the whole of why the workload under the cursor waits."""
    t = Text(no_wrap=False)
    if w is None:
        t.append("no pending workloads" if not count else "", style="dim")
        return t
    t.append(f"{clean(w.project, limit=30)}/{clean(w.name, limit=60)}", style="bold")
    waiting = age(now - w.created, live=True) if w.created else "-"
    t.append(f"  {plural_gpus(w.gpus_requested)}  waiting {waiting}  ")
    t.append_text(status_cell(look, w.status))
    for reason in pending_reasons(w)[:3] or ["(no reason given yet)"]:
        t.append(f"\n  {reason}", style="dim")
    t.append("\nEnter opens it, d shows its YAML", style="dim")
    return t


def idle_row(s: IdleSession, now: float) -> Cells:
    """A session idle since `s.idle_since`, as it reads at `now` (idle for, GPU-hours so far)."""
    return (plain(s.name, 100), plain(s.project, 40), plain(s.user or "-", 40), Text(gpus(s.gpus), justify="right"),
            Text(age(now - s.idle_since, live=True), justify="right"),
            Text(format_gpu_hours(s.gpu_hours_at(now)), justify="right"))


def idle_note(sessions: list[IdleSession], threshold: float, now: float) -> Text:
    note = Text(style="dim")
    if not sessions:
        note.append(f"no interactive session holds idle GPUs (util < {threshold:g}%)")
        return note
    n = len(sessions)
    held = gpus(sum(s.gpus for s in sessions))
    hours = sum(s.gpu_hours_at(now) for s in sessions)
    note.append(f"{'1 interactive session holds' if n == 1 else f'{n} interactive sessions hold'} {held} GPUs "
                f"all under {threshold:g}% use, {format_gpu_hours(hours)} GPU-hours idle so far (Enter opens one)")
    return note


def pod_row(look: Look, w: WorkloadView, r: RankView, now: float) -> Cells:
    return (workload_label(w), plain(r.label, 40), status_cell(look, r.status),
            Text(gpus(r.gpus), justify="right"),
            util_cell(look, r.gpu_util, r.gpu_state if r.gpus > 0 else "no GPU"),
            Text(age(now - r.created, live=True) if r.created else "-", justify="right"))


def held_lines(look: Look, workloads: Iterable[WorkloadView], now: float, command: str, most: int = 3) -> Text:
    """Failed or finished jobs whose ranks still run on GPUs (`diagnostics.leftovers`), a line each
    with the command that frees them; nothing when there are none."""
    held = still_held_all(workloads)
    t = Text()
    if not held:
        return t
    total = sum(h.gpus for h in held)
    t.append(f"\n{look.glyphs.warning} {plural_gpus(total)} held by failed or finished jobs", style="bold")
    for h in held[:most]:
        t.append(f"\n  {clean(h.project, limit=30)}/{clean(h.name, limit=60)}: "
                 f"{clean(h.sentence(now, command), limit=300)}")
    if len(held) > most:
        t.append(f"\n  and {len(held) - most} more", style="dim")
    return t


def plural_gpus(n: float) -> str:
    return f"{gpus(n)} GPU" if n == 1 else f"{gpus(n)} GPUs"


class IdleComputed(Message):
    """`idle_sessions` computed on the data thread (where the model and its GPU history live)."""

    def __init__(self, result: concurrent.futures.Future[list[IdleSession]]) -> None:
        super().__init__()
        self.result = result


class ClusterScreen(RanksScreen):
    """Four tabs (←/→ switch them). Nodes: Enter lists a node's pods, d its YAML. Pending and idle
    sessions: Enter opens the workload, d its YAML; under the pending table, the whole of why the
    workload under the cursor waits.

    Idle sessions (`monitors.diagnostics.idle`): interactive sessions whose GPUs all read under
    `idle_threshold_percent` (settings) now, since when and the GPU-hours idle so far, most first.
    The GPU history they need lives with the model on the data thread: each draw of the tab asks
    the data loop to run `idle_sessions` there (no request to the cluster; one at a time, a draw
    meanwhile asks again once it is answered) and the answer comes back as `IdleComputed`. Without
    a data loop, the store's views are used without history (idle since the ranks' start)."""

    crumb = "cluster load"
    BINDINGS: ClassVar[list[BindingType]] = [*bindings("table", ("open", "describe", "next_tab", "previous_tab")),
                                             *bindings("global", ("filter",)),
                                             *unshown(bindings("table", (*SORT_KEYS, "expand")))]
    DEFAULT_CSS = """
    ClusterScreen TabbedContent { height: 1fr; }
    ClusterScreen TabPane { padding: 0; }
    ClusterScreen .panel { padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    ClusterScreen #pending { height: auto; max-height: 6; padding: 0 1; background: $panel; }
    ClusterScreen #idle { height: auto; padding: 0 1; }
    """
    TABLES: ClassVar[dict[str, str]] = {"tab-nodes": "#nodes", "tab-pending": "#pending-table",
                                        "tab-idle": "#idle-table", "tab-gpus": "#gpus-table"}

    def __init__(self) -> None:
        super().__init__()
        self._cells: dict[str, Cells] = {}  # node -> its row
        self.narrow = False
        self._texts: dict[str, Text] = {}  # what each panel shows: redrawn only when it changes
        self._had_rows: bool | None = None
        self._idle: list[IdleSession] | None = None  # the last answer (None: none yet)
        self._idle_asked = False  # a computation is under way on the data thread
        self._idle_again = False  # ... and the screen drew meanwhile: ask again when it answers
        self.gpu_rows = gt.GpuRows()  # every GPU, as the last reading had them (the GPUs tab, expanded nodes)
        self.gpu_filter = RowFilter()
        self.expanded: set[str] = set()  # nodes whose rows show their GPUs
        self._filling = False  # a chunk of the GPUs tab's rows is to be made after the keys typed

    def _update(self, selector: str, text: Text) -> None:
        if self._texts.get(selector) != text:
            self._texts[selector] = text
            self.query_one(selector, Static).update(text)

    def body(self) -> ComposeResult:
        with KeyTabs(id="tabs"):
            with TabPane("Nodes", id="tab-nodes"):
                yield Static(id="nodes-note", classes="panel")
                yield KeyedTable(id="nodes")
            with TabPane("Quota", id="tab-quota"):
                yield Static(id="quota", classes="panel")
            with TabPane("Pending", id="tab-pending"):
                yield KeyedTable(id="pending-table")
                yield Static(id="pending")
            with TabPane("Idle sessions", id="tab-idle"):
                yield Static(id="idle", classes="panel")
                yield KeyedTable(id="idle-table")
            with TabPane("GPUs", id="tab-gpus"):
                yield Static(id="gpus-note", classes="panel")
                yield KeyedTable(id="gpus-table")
        yield FilterBar("regex over node, UUID, model, owner, project, user, marks (Enter keeps it, Esc clears it)",
                        id="filterbar")

    @property
    def table(self) -> KeyedTable[str]:  # (its rows: the nodes)
        return self.query_one("#nodes", KeyedTable)

    def active_table(self) -> KeyedTable[Any] | None:
        """The table of the tab shown (the quota tab has none; its rows' keys are the tab's)."""
        selector = self.TABLES.get(self.query_one(TabbedContent).active)
        return self.query_one(selector, KeyedTable) if selector else None

    def on_mount(self) -> None:
        super().on_mount()
        self._set_columns()
        self.query_one("#pending-table", KeyedTable).set_columns(PENDING_COLUMNS)
        self.query_one("#idle-table", KeyedTable).set_columns(IDLE_COLUMNS)
        for selector in self.TABLES.values():  # (Enter opens at once: keys typed after it reach what opens)
            self.query_one(selector, KeyedTable).choose = self.action_open
        self.resync()
        self.table.focus()
        self.set_interval(1.0, self._gpus_due)

    def _node_columns(self) -> list[Column]:
        """The nodes table's columns: HELD BY too while a node shows its GPUs."""
        return [*(NARROW_NODE_COLUMNS if self.narrow else NODE_COLUMNS), *([gt.HELD_BY] if self.expanded else [])]

    def _set_columns(self) -> None:
        self.narrow = self.is_narrow()
        self.table.set_columns(self._node_columns())
        self.table.parent_of = node_of_row  # (a node's GPU rows stay under it when the table is sorted)
        self.query_one("#gpus-table", KeyedTable).set_columns(gt.NARROW_GPU_COLUMNS if self.narrow
                                                              else gt.GPU_COLUMNS)
        self.gpu_rows.restyle()
        if self.gpu_rows.shown is not None:
            self.gpu_rows.take(self.dashboard.look, self.gpu_rows.shown, self.narrow)
        self._filling = False
        self._cells = {}

    def model_changed(self, diff: ModelDiff) -> None:
        if diff.nodes or diff.workloads or diff.projects or diff.status_changed:
            self._draw(list(diff.nodes.added) + list(diff.nodes.changed) if not diff.nodes.removed else None)

    def resync(self) -> None:
        if self.is_mounted:
            self._draw(None)

    def restyle(self) -> None:
        self._texts = {}
        self._set_columns()
        self.resync()

    def _draw(self, changed: list[str] | None) -> None:
        store = self.dashboard.store
        look = self.dashboard.look
        tabs = self.query_one(TabbedContent)
        active = tabs.active
        if active == "tab-nodes":
            forbidden = store.status.forbidden_for("nodes")
            if forbidden:
                self._update("#nodes-note", Text(f"forbidden: {clean(forbidden)}", style="bold"))
            elif not store.nodes:
                self._update("#nodes-note", Text("no nodes" if store.synced else "reading the cluster…", style="dim"))
            else:
                total = sum(n.gpus for n in store.nodes.values())
                alloc = sum(n.gpus_allocated for n in store.nodes.values())
                utils = [n.gpu_util for n in store.nodes.values() if n.gpu_util is not None]
                summary = Text(f"{len(store.nodes)} nodes  GPUs {gpus(alloc)}/{gpus(total)} allocated  ")
                summary.append(f"mean util {percent(sum(utils) / len(utils)) if utils else '-'}")
                if store.status.metrics_problem:
                    summary.append(f"  GPU metrics: {clean(store.status.metrics_problem, limit=120)}", style="dim")
                summary.append_text(held_lines(look, store.workloads.values(), self.dashboard.clock(),
                                               self.dashboard.paste_command))
                self._update("#nodes-note", summary)
            if changed is None:
                self._cells = {k: self._row(n) for k, n in store.nodes.items()}
            else:
                for k in changed:
                    n = store.nodes.get(str(k))
                    if n is not None:
                        self._cells[k] = self._row(n)
            order = sorted(self._cells, key=lambda k: (store.nodes[k].pool, k) if k in store.nodes else ("", k))
            order = [k for k in order if k in store.nodes]
            children = self._node_gpus(order)
            if children:
                self.table.sync([k for n in order for k in (n, *children.get(n, {}))],
                                {**self._cells, **{k: c for rows in children.values() for k, c in rows.items()}},
                                None)
            else:
                self.table.sync(order, self._cells, changed)
        now = self.dashboard.clock()
        wls = list(store.workloads.values())
        if active == "tab-quota":
            self._update("#quota", quota_lines(look, store.projects.values()))
        elif active == "tab-pending":
            pending = sorted((w for w in wls if w.status == "Pending"), key=lambda w: w.created or 0.0)
            table = self.query_one("#pending-table", KeyedTable)
            table.sync([w.key for w in pending], {w.key: pending_row(look, w, now) for w in pending})
            table.display = bool(pending)  # none: the panel says so, without an empty table's header
            self._show_pending_detail()
            self.dashboard.ages_shown([w.created for w in pending if w.created], now)
        elif active == "tab-idle":
            self._ask_idle()
            if self._idle is not None:
                self._show_idle(self._idle, now)
        elif active == "tab-gpus":
            self._ask_gpus()
            self._show_gpus(None)
        self._rows_shown()

    # -- every GPU (the GPUs tab, and the nodes expanded into theirs) --------------------------------
    def _ask_gpus(self) -> None:
        gt.ask(self.dashboard, self.gpu_rows, self.post_message, self.dashboard.clock(),
               max(1.0, float(self.dashboard.settings.refresh_interval)))

    def _gpus_due(self) -> None:
        """Every second: while the GPUs tab (or an expanded node) is shown, a reading when one is due."""
        if self.is_mounted and self.app.screen is self and (
                self.query_one(TabbedContent).active == "tab-gpus" or self.expanded):
            self._ask_gpus()

    @on(gt.FleetRead)
    def _gpus_read(self, msg: gt.FleetRead) -> None:
        msg.stop()
        shown = gt.taken(self.gpu_rows, msg)
        if shown is None or not self.is_mounted:
            return
        self.gpu_rows.problem = shown.problem
        if shown.problem and not shown.gpus and self.gpu_rows.shown is not None and self.gpu_rows.shown.gpus:
            shown = self.gpu_rows.shown  # (a reading that failed: the last rows stay, the note says why)
        self.gpu_rows.take(self.dashboard.look, shown, self.narrow)
        if self.app.screen is not self:
            return
        active = self.query_one(TabbedContent).active
        if active == "tab-gpus":
            self._show_gpus()
            self._rows_shown()
        elif active == "tab-nodes" and self.expanded:
            self._draw(None)

    def _show_gpus(self, _changed: list[GpuKey] | None = None) -> None:
        """The GPUs tab: the rows made so far, a chunk more made (those on screen first), the next
        chunk after the keys typed meanwhile (`_fill_more`)."""
        table = self.query_one("#gpus-table", KeyedTable)
        order = self.gpu_rows.order(self.gpu_filter)
        if gt.fill(table, self.gpu_rows, order) and not self._filling:
            self._filling = True
            self.set_timer(0.001, self._fill_more)
        self._update("#gpus-note", self.gpu_rows.note(self.dashboard.look, self.gpu_filter, len(order)))

    def _fill_more(self) -> None:
        self._filling = False
        if self.is_mounted and self.app.screen is self and self.query_one(TabbedContent).active == "tab-gpus":
            self._show_gpus()

    def _node_gpus(self, nodes: list[str]) -> dict[str, dict[Any, Cells]]:
        """The rows of the expanded nodes' GPUs, under each node's row (`space` toggles)."""
        return {n: gt.node_gpu_rows(self.dashboard.look, self.gpu_rows, n, narrow=self.narrow)
                for n in nodes if n in self.expanded}

    def action_expand(self) -> None:
        """space on a node: its GPUs under its row (again: folded)."""
        if self.query_one(TabbedContent).active != "tab-nodes":
            return
        key = self.table.cursor_key
        node = key[1] if isinstance(key, tuple) else key
        if not isinstance(node, str):
            return
        had = bool(self.expanded)
        self.expanded ^= {node}
        if had != bool(self.expanded):  # (the HELD BY column comes and goes with the first and last)
            self.table.set_columns(self._node_columns())
        self._ask_gpus()
        self._draw(None)
        self.table.move_to_key(node)

    # -- the GPUs tab's filter ------------------------------------------------------------------------
    def action_filter(self) -> None:
        self.gpu_rows.prepare_search()
        self.query_one(FilterBar).open("/", self.gpu_filter.text)

    def live_filter(self, inp: Input, value: str) -> None:
        try:
            flt = RowFilter.parse(value)
        except ValueError as exc:
            inp.tooltip = str(exc)
            return
        inp.tooltip = None
        if flt.text != self.gpu_filter.text:
            self.gpu_filter = flt
            self._show_gpus([])

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            self.gpu_filter = RowFilter.parse(event.value)
        except ValueError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self._close_filter()

    def _close_filter(self) -> None:
        self.query_one(FilterBar).close()
        self.query_one("#gpus-table", KeyedTable).focus()
        self._show_gpus([])
        self.refresh_bindings()

    # -- idle sessions ------------------------------------------------------------------------------
    @property
    def idle_threshold(self) -> float:
        return self.dashboard.settings.idle_threshold_percent

    def _ask_idle(self) -> None:
        """`idle_sessions` over the live model, on the data thread; answered by `IdleComputed`."""
        if self._idle_asked:
            self._idle_again = True
            return
        self._idle_asked = True
        self.dashboard.data.idle_sessions(self.dashboard.clock, self.idle_threshold).add_done_callback(
            lambda f: self.post_message(IdleComputed(f)))

    @on(IdleComputed)
    def _idle_computed(self, msg: IdleComputed) -> None:
        msg.stop()
        self._idle_asked = False
        now = self.dashboard.clock()
        try:
            self._idle = msg.result.result()
        except Exception:  # no data loop (or not connected): the views, without GPU history
            self._idle = idle_sessions_of(self.dashboard.store.workloads.values(), {}, now, self.idle_threshold)
        if self._idle_again:
            self._idle_again = False
            self._ask_idle()
        # (a hidden screen draws when it comes back: `resync`)
        if self.is_mounted and self.app.screen is self and self.query_one(TabbedContent).active == "tab-idle":
            self._show_idle(self._idle, now)
            self._rows_shown()

    def _show_idle(self, sessions: list[IdleSession], now: float) -> None:
        table = self.query_one("#idle-table", KeyedTable)
        table.sync([s.key for s in sessions], {s.key: idle_row(s, now) for s in sessions})
        table.display = bool(sessions)
        self.dashboard.ages_shown([s.idle_since for s in sessions], now)
        self._update("#idle", idle_note(sessions, self.idle_threshold, now))

    def tick_ages(self, now: float) -> list[float]:
        """The app's age ticker: the rows of the pending or idle table whose age (or GPU-hours held)
        reads otherwise at `now` are redrawn, and the pending panel if its age changed."""
        active = self.query_one(TabbedContent).active
        if active not in ("tab-pending", "tab-idle"):
            return []
        table = self.query_one("#pending-table" if active == "tab-pending" else "#idle-table", KeyedTable)
        workloads = self.dashboard.store.workloads
        look = self.dashboard.look
        idle = {s.key: s for s in self._idle or ()}
        cells, changed, since = {}, [], []
        for key in table.order:
            row: Cells
            if active == "tab-idle":
                s = idle.get(key)
                if s is None:
                    continue
                cells[key] = row = idle_row(s, now)
                since.append(s.idle_since)
            else:
                w = workloads.get(key)
                if w is None:
                    continue
                cells[key] = row = pending_row(look, w, now)
                if w.created:
                    since.append(w.created)
            old = table.shown.get(key)
            if old is None or any(a.plain != b.plain for a, b in zip(old, row, strict=False)):
                changed.append(key)
        if changed:
            table.sync(list(table.order), {**table.shown, **cells}, changed)
        if active == "tab-pending":
            self._show_pending_detail()
        return since

    def _rows_shown(self) -> None:
        """Called after each draw: the footer's row keys follow the active table's emptiness."""
        table = self.active_table()
        has = table is not None and table.row_count > 0
        if has != self._had_rows:
            self._had_rows = has
            self.refresh_bindings()

    def _show_pending_detail(self) -> None:
        table = self.query_one("#pending-table", KeyedTable)
        key = table.cursor_key
        w = self.dashboard.store.workloads.get(key) if key is not None else None
        self._update("#pending", pending_detail(self.dashboard.look, w, table.row_count, self.dashboard.clock()))

    @on(KeyedTable.CursorMoved, "#pending-table")
    def _pending_cursor(self, event: KeyedTable.CursorMoved) -> None:
        event.stop()
        self._show_pending_detail()

    def _row(self, n: NodeView) -> Cells:
        return (*node_row(self.dashboard.look, n, narrow=self.narrow), heat_cell(self.dashboard.look, n))

    @on(TabbedContent.TabActivated)
    def _tab(self, event: TabbedContent.TabActivated) -> None:
        self._draw(None)
        table = self.active_table()
        if table is not None:
            table.focus()
        self._had_rows = None
        self._rows_shown()

    @on(KeyedTable.RowSelected)
    def _row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Open and describe act on the rows of a table: hidden on the quota tab, and while the tab's
        table is empty; `/` filters the GPUs tab; space expands a node."""
        if action == "filter" and self.is_mounted:
            return self.query_one(TabbedContent).active == "tab-gpus"
        if action == "expand" and self.is_mounted:
            return self.query_one(TabbedContent).active == "tab-nodes"
        if action in ("open", "describe") and self.is_mounted:
            table = self.active_table()
            return table is not None and table.row_count > 0
        return True

    def action_sort(self) -> None:
        """`o`/`O`: the tab's table sorted by its next column, or the other way (a header click too)."""
        self.sort_table(self.active_table())

    def action_sort_reverse(self) -> None:
        self.sort_table(self.active_table(), reverse=True)

    def action_open(self) -> None:
        """Enter: a node's pods; a pending or idle workload's screen."""
        table = self.active_table()
        key = table.cursor_key if table is not None else None
        if key is None or table is None:
            return
        gkey = gt.gpu_key_of(table, key)
        if gkey is not None:
            if not gt.open_gpu(self.dashboard, self.app, self.gpu_rows.gpu(gkey)):
                self.notify("no workload holds this GPU", timeout=2, markup=False)
        elif table is self.table:
            self.app.push_screen(NodePodsScreen(str(key)))
        elif key in self.dashboard.store.workloads:
            self.dashboard.open_workload(key)

    def action_describe(self) -> None:
        """d: the node's YAML, or the workload's."""
        table = self.active_table()
        key = table.cursor_key if table is not None else None
        if key is None or table is None:
            return
        gkey = gt.gpu_key_of(table, key)
        if gkey is not None:
            g = self.gpu_rows.gpu(gkey)
            if g is not None and g.owner is not None:
                self.dashboard.open_describe_pod(g.owner.namespace, g.owner.pod)
            elif g is not None:
                self.dashboard.open_describe_path(f"node {g.node}", api_paths.node(g.node))
        elif table is self.table:
            self.dashboard.open_describe_path(f"node {key}", api_paths.node(str(key)))
        elif (w := self.dashboard.store.workloads.get(key)) is not None:
            self.dashboard.open_describe(w)

    def action_back(self) -> None:
        if self.query_one(FilterInput).has_focus:
            if not self.query_one(FilterInput).value.strip():
                self.gpu_filter = RowFilter()
            self._close_filter()
            return
        if self.gpu_filter.active and self.query_one(TabbedContent).active == "tab-gpus":
            self.gpu_filter = RowFilter()
            self.query_one(FilterInput).value = ""
            self._show_gpus([])
            return
        self.dashboard.go_back()


class NodePodsScreen(RanksScreen):
    """Enter on a node in cluster load: the ranks it runs, with their workload and GPUs. Enter opens
    the workload, d shows the pod's YAML, l the workload's logs."""

    BINDINGS: ClassVar[list[BindingType]] = [*bindings("table", ("open", "describe", "logs")),
                                             *unshown(bindings("table", SORT_KEYS))]
    DEFAULT_CSS = """
    NodePodsScreen #node-note { height: auto; padding: 0 1; }
    """

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node
        self._cells: dict[PodKey, Cells] = {}
        self._by_workload: dict[WorkloadKey, list[PodKey]] = {}
        self._note = Text()
        self._had_rows: bool | None = None

    @property
    def crumb(self) -> str:
        return f"pods on {self.node}"

    def body(self) -> ComposeResult:
        yield Static(id="node-note")
        yield KeyedTable(id="pods")

    @property
    def table(self) -> KeyedTable[PodKey]:
        return self.query_one("#pods", KeyedTable)

    def on_mount(self) -> None:
        super().on_mount()
        self.table.set_columns(POD_COLUMNS)
        self.table.choose = self.action_open
        self.dashboard.data.show_node(self.node)  # its pods whole: creation times for the AGE column
        self.resync()
        self.table.focus()

    def _rows_of(self, w: WorkloadView, now: float) -> None:
        keys = []
        for r in w.ranks:
            if r.node == self.node:
                key = (w.key, r.pod)
                self._cells[key] = pod_row(self.dashboard.look, w, r, now)
                keys.append(key)
        self._by_workload[w.key] = keys

    def resync(self) -> None:
        if not self.is_mounted:
            return
        now = self.dashboard.clock()
        self._cells, self._by_workload = {}, {}
        for w in self.dashboard.store.workloads.values():
            self._rows_of(w, now)
        self._show(None)

    def model_changed(self, diff: ModelDiff) -> None:
        """Only the rows of the workloads in the diff are looked at again."""
        wd = diff.workloads
        if not (wd or self.node in diff.nodes.changed or self.node in diff.nodes.removed):
            return
        now = self.dashboard.clock()
        touched: list[PodKey] = []
        for key in (*wd.removed, *wd.added, *wd.changed):
            for old in self._by_workload.pop(key, []):
                self._cells.pop(old, None)
            w = self.dashboard.store.workloads.get(key)
            if w is not None:
                self._rows_of(w, now)
                touched.extend(self._by_workload[key])
        self._show(touched)

    def _show(self, changed: list[PodKey] | None) -> None:
        order = sorted(self._cells, key=lambda k: (k[0][0], k[0][2], k[1]))
        self.table.sync(order, self._cells, changed)
        store = self.dashboard.store
        self.dashboard.ages_shown([r.created for w in store.workloads.values() for r in w.ranks
                               if r.node == self.node and r.created])
        if bool(order) != self._had_rows:
            self._had_rows = bool(order)
            self.refresh_bindings()
        n = self.dashboard.store.nodes.get(self.node)
        note = Text(no_wrap=True, overflow="ellipsis")
        if n is None:
            note.append(f"node {clean(self.node, limit=100)} is not known (any more)", style="bold")
        else:
            note.append(f"{clean(n.name, limit=100)}", style="bold")
            note.append(f"  {clean(n.pool or '-', limit=40)}  GPUs ")
            note.append_text(gpu_pair(n.gpus, n.gpus_allocated))
            note.append(f" allocated  util {percent(n.gpu_util)}")
            others = n.pods - len(self._cells)
            if others > 0:
                note.append(f"  (+{others} pod{'s' if others != 1 else ''} outside distributed workloads)",
                            style="dim")
        if not self._cells:
            note.append("\nno rank of a distributed workload runs on this node", style="dim")
        if note != self._note:
            self._note = note
            self.query_one("#node-note", Static).update(note)

    def tick_ages(self, now: float) -> list[float]:
        """The app's age ticker: only the AGE cells whose text is another at `now` are repainted."""
        since = []
        for key, cells in self._cells.items():
            wkey, pod = key
            w = self.dashboard.store.workloads.get(wkey)
            r = next((r for r in w.ranks if r.pod == pod), None) if w is not None else None
            if r is None or not r.created:
                continue
            since.append(r.created)
            text = age(now - r.created, live=True)
            if text != cells[-1].plain:
                cell = Text(text, justify="right")
                self._cells[key] = (*cells[:-1], cell)
                self.table.update_cell(key, len(cells) - 1, cell)
        return since

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The row keys, where there is a row."""
        if action in ("open", "describe", "logs") and self.is_mounted:
            return self.table.row_count > 0
        return True

    def _selected(self) -> tuple[WorkloadView, str] | None:
        key = self.table.cursor_key
        if key is None:
            return None
        wkey, pod = key
        w = self.dashboard.store.workloads.get(wkey)
        return None if w is None else (w, pod)

    @on(KeyedTable.RowSelected, "#pods")
    def _row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_sort(self) -> None:
        self.sort_table(self.table)

    def action_sort_reverse(self) -> None:
        self.sort_table(self.table, reverse=True)

    def action_open(self) -> None:
        if (sel := self._selected()) is not None:
            self.dashboard.open_workload(sel[0].key)

    def action_describe(self) -> None:
        if (sel := self._selected()) is not None:
            self.dashboard.open_describe_pod(sel[0].namespace, sel[1])

    def action_logs(self) -> None:
        if (sel := self._selected()) is not None:
            self.dashboard.open_logs(sel[0].key)

    def action_back(self) -> None:
        self.dashboard.go_back()
