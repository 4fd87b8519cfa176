"""The workload detail screen: header, first-failure banner, and tabs for ranks, placement, events."""

from __future__ import annotations

import math
import time
from collections.abc import Hashable
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Static, TabbedContent, TabPane

from monitors.humanize import age, gpus
from monitors.records import EventRec
from monitors.sanitize import clean
from monitors.views import ModelDiff, RankView, WorkloadView

from ..cells import Cells, Look, rank_row, status_cell
from ..widgets.keyed_table import KeyedTable
from .base import RanksScreen, bindings

RANK_COLUMNS: list[tuple[str, int | None]] = [
    ("RANK", None), ("#", 3), ("POD", None), ("STATUS", None), ("RST", 3), ("NODE", None), ("GPU", 10),
    ("TREND", 12), ("MEM", None)]
NARROW_RANK_COLUMNS: list[tuple[str, int | None]] = [
    ("RANK", None), ("#", 3), ("STATUS", 12), ("RST", 3), ("NODE", None), ("GPU", 10), ("TREND", 6),
    ("MEM", None)]


def header_text(look: Look, w: WorkloadView, now: float) -> Text:
    """Four lines at most, each cut to the width: what, status, conditions, command."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(clean(w.kind, limit=30), style="bold")
    if w.framework and w.framework.lower() not in w.kind.lower():
        t.append(f" ({clean(w.framework, limit=20)})")
    if w.interactive:
        t.append("  interactive", style="bold")
    t.append(f"  ranks {w.ranks_ready}/{w.ranks_total}")
    t.append(f"  GPUs {gpus(w.gpus_allocated)}/{gpus(w.gpus_requested)}")
    t.append(f"  age {age(now - w.created) if w.created else '-'}")
    if w.user:
        t.append(f"  user {clean(w.user, limit=40)}", style="dim")
    t.append("\n")
    t.append_text(status_cell(look, w.status))
    if w.reason and w.reason != w.status:
        t.append("  " + clean(w.reason, limit=300), style="dim")
    t.append("\n")
    conds = [c for c in w.conditions if c.status == "True"][-4:][::-1]  # newest first: cut last
    if conds:
        t.append("conditions ", style="dim")
        for i, c in enumerate(conds):
            if i:
                t.append(", ")
            t.append(clean(c.type, limit=30), style=look.status_style(c.type))
            if c.reason and not c.reason.endswith(c.type):
                t.append(f" ({clean(c.reason, limit=40)})", style="dim")
        t.append("\n")
    t.append("command ", style="dim")
    t.append(clean(w.command, limit=300) or "-")
    return t


def failure_text(look: Look, w: WorkloadView) -> Text | None:
    ff = w.first_failure
    if ff is None or w.status not in ("Failed", "Degraded", "Restarting"):
        return None
    t = Text(no_wrap=False)
    t.append(f"{look.glyphs.cross} first failure: ", style="bold")
    t.append(clean(ff.label, limit=60), style="bold")
    if ff.rank is not None:
        t.append(f" (rank {ff.rank})")
    t.append(f" exited {ff.exit_code}")
    if ff.reason:
        t.append(f" {clean(ff.reason, limit=40)}")
    if ff.at:
        t.append(" at " + time.strftime("%H:%M:%S", time.localtime(ff.at)))
    if ff.message:
        t.append(": " + clean(ff.message, limit=200), style="dim")
    t.append("  (l: logs)", style="dim")
    return t


def placement_text(look: Look, w: WorkloadView, node_gpus: dict[str, float],
                   node_alloc: dict[str, float] | None = None) -> Text:
    """Nodes x GPU slots, each slot labelled with the rank holding it and coloured by its use."""
    by_node: dict[str, list[tuple[int, RankView]]] = {}
    for i, r in enumerate(w.ranks):
        by_node.setdefault(r.node or "", []).append((i, r))
    t = Text(no_wrap=True)
    if not w.ranks:
        t.append("no ranks yet", style="dim")
        return t
    width = max((len(clean(n, limit=40)) for n in by_node), default=4)
    slots_max = int(max([node_gpus.get(n, 0) for n in by_node if n] + [0]))
    t.append(f"{'GPU':<{width}}  " + "".join(f"{i:<4}" for i in range(slots_max)) + "\n", style="dim")
    for node in sorted(by_node, key=lambda n: (n == "", n)):
        ranks = by_node[node]
        t.append(f"{clean(node, limit=40) or '(unscheduled)':<{width}}  ")
        if not node:
            t.append(", ".join(clean(r.label, limit=20) for _, r in ranks), style=look.status_style("Pending"))
            t.append("\n")
            continue
        used = 0
        for i, r in ranks:
            n = max(1, math.ceil(r.gpus)) if r.gpus > 0 else 0
            for _ in range(n):
                label = _short_label(r)
                style = look.util_style(r.gpu_util) if r.gpu_util is not None else look.rank_style(i)
                t.append(f"{label:<3}", style=style + _slot(look))
                t.append(" ")
                used += 1
            if n == 0:
                t.append(f"({_short_label(r)}) ", style=look.rank_style(i))
        total = int(node_gpus.get(node, 0))
        others = max(0, min(total - used, math.ceil((node_alloc or {}).get(node, 0.0)) - used))
        free = total - used - others
        ascii_ = look.glyphs.name == "ascii"
        if others > 0:
            t.append(("=== " if ascii_ else "▒▒▒ ") * others, style="dim")
        if free > 0:
            t.append(("... " if ascii_ else "··· ") * free, style="dim")
        t.append("\n")
    t.append("slots are filled in rank order; colour is GPU utilisation; "
             + ("===" if look.glyphs.name == "ascii" else "▒▒▒") + " other workloads, "
             + ("..." if look.glyphs.name == "ascii" else "···") + " free", style="dim")
    return t


def _slot(look: Look) -> Style:
    return Style(bold=True) if look.mono else Style(reverse=True)


def _short_label(r: RankView) -> str:
    if r.role in ("launcher", "master", "chief"):
        return r.role[0].upper() + (str(r.replica_index) if r.replica_index else "")
    idx = r.replica_index if r.replica_index is not None else r.rank
    return f"{r.role[:1]}{'' if idx is None else idx}"[:3]


def event_lines(look: Look, events: tuple[EventRec, ...], now: float) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    if not events:
        t.append("no events", style="dim")
        return t
    objects = {e: f"{clean(e.kind, limit=20).lower()}/{clean(e.object_name, limit=60)}" for e in events}
    width = max(len(o) for o in objects.values())
    for e in reversed(events):
        t.append(f"{age(now - e.last) if e.last else '-':>6} ", style="dim")
        warning = e.type == "Warning"
        t.append(f"{look.glyphs.warning if warning else ' '} ", style=look.status_style("Failed") if warning else "")
        t.append(f"{clean(e.reason, limit=30):<17} ", style=look.status_style("Failed") if warning else "")
        t.append(f"{objects[e]:<{width}} ", style="dim")
        t.append(f"{'x' + str(e.count) if e.count > 1 else '':>4} ", style="dim")
        t.append(" " + clean(e.message, limit=400) + "\n")
    return t


class WorkloadScreen(RanksScreen):
    BINDINGS: ClassVar[list[BindingType]] = bindings(
        "table", ("open", "describe", "logs", "shell", "exec_all", "delete", "suspend", "convert"))
    DEFAULT_CSS = """
    WorkloadScreen #header { height: auto; max-height: 4; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    WorkloadScreen #failure { height: auto; max-height: 3; padding: 0 1; background: $error 20%; display: none; }
    WorkloadScreen #failure.-shown { display: block; }
    WorkloadScreen TabbedContent { height: 1fr; }
    WorkloadScreen TabPane { padding: 0; }
    WorkloadScreen #placement, WorkloadScreen #events { padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, key: tuple[str, str, str]) -> None:
        super().__init__()
        self.key = key
        self.focus_key = key
        self.last: WorkloadView | None = None
        self.gone = False
        self._cells: dict[Hashable, Cells] = {}
        self.narrow = False
        self._hist_shown: dict[str, tuple[float, ...]] = {}

    @property
    def crumb(self) -> str:  # type: ignore[override]
        return self.key[2]

    def body(self) -> ComposeResult:
        yield Static(id="header")
        yield Static(id="failure")
        with TabbedContent(id="tabs"):
            with TabPane("Ranks", id="tab-ranks"):
                yield KeyedTable(id="ranks")
            with TabPane("Placement", id="tab-placement"):
                yield Static(id="placement")
            with TabPane("Events", id="tab-events"):
                yield Static(id="events")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#ranks", KeyedTable)

    def on_mount(self) -> None:
        super().on_mount()
        self._set_columns()
        self.ranks.data.focus(self.key)
        self.resync()
        self.table.focus()

    def model_changed(self, diff: ModelDiff) -> None:
        wd = diff.workloads
        if self.key in wd.removed:
            self.gone = True
            self.show_status()
            self._draw(None)
            return
        if self.key in wd.added or self.key in wd.changed:
            self.gone = False
            self.resync()
        elif self.ranks.store.histories != self._hist_shown:
            self.resync()  # the ranks' GPU history grew
        elif diff.events_changed or diff.status_changed:
            self._draw_side()

    def resync(self) -> None:
        if not self.is_mounted:
            return
        wl = self.ranks.store.workloads.get(self.key)
        if wl is None and self.ranks.store.synced:
            self.gone = True
        self._draw(wl)

    def restyle(self) -> None:
        self._set_columns()
        self.resync()

    def _set_columns(self) -> None:
        self.narrow = self.is_narrow()
        self.table.set_columns(NARROW_RANK_COLUMNS if self.narrow else RANK_COLUMNS)
        self._cells = {}

    def _draw(self, wl: WorkloadView | None) -> None:
        look = self.ranks.look
        now = self.ranks.clock()
        if wl is not None:
            self.last = wl
        shown = wl or self.last
        header = self.query_one("#header", Static)
        if shown is None:
            header.update(Text("waiting for the workload…" if not self.ranks.store.synced
                               else "this workload does not exist (any more)", style="dim"))
            self.show_status()
            return
        header.update(header_text(look, shown, now))
        failure = self.query_one("#failure", Static)
        ftext = failure_text(look, shown)
        failure.set_class(ftext is not None, "-shown")
        if ftext is not None:
            failure.update(ftext)
        hist = self.ranks.store.histories
        self._hist_shown = dict(hist)
        spark = 6 if self.narrow else 12
        cells = {r.pod: rank_row(look, r, i, hist.get(r.pod, ()), with_pod=not self.narrow, spark=spark)
                 for i, r in enumerate(shown.ranks)}
        changed = [k for k, v in cells.items() if self._cells.get(k) != v]
        self._cells = cells
        self.table.sync([r.pod for r in shown.ranks], cells, changed)
        self._draw_side()
        self.show_status()

    def _draw_side(self) -> None:
        shown = self.last
        if shown is None:
            return
        tabs = self.query_one(TabbedContent)
        look = self.ranks.look
        if tabs.active == "tab-placement":
            nodes = self.ranks.store.nodes.values()
            self.query_one("#placement", Static).update(placement_text(
                look, shown, {n.name: n.gpus for n in nodes}, {n.name: n.gpus_allocated for n in nodes}))
        elif tabs.active == "tab-events":
            self.query_one("#events", Static).update(event_lines(look, self.ranks.store.events, self.ranks.clock()))

    @on(TabbedContent.TabActivated)
    def _tab(self, event: TabbedContent.TabActivated) -> None:
        self._draw_side()

    def banner_text(self) -> Text | None:
        if self.gone:
            return Text(f"{self.ranks.look.glyphs.warning} this workload was deleted; showing what was last "
                        "seen (Esc to go back)", style="bold")
        return None

    # -- actions -----------------------------------------------------------------------------------
    def action_open(self) -> None:
        """Enter on a rank: its pod as YAML."""
        pod = self.table.cursor_key
        if pod is not None and self.last is not None:
            self.ranks.open_describe_pod(self.last.namespace, str(pod))

    @on(KeyedTable.RowSelected, "#ranks")
    def _row(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_describe(self) -> None:
        """`d`: the workload itself as YAML."""
        if self.last is not None:
            self.ranks.open_describe(self.last)

    def action_logs(self) -> None:
        self.ranks.open_logs(self.key)

    def action_shell(self) -> None:
        """`s`: a shell in the rank under the cursor (the lead when the table is not focused)."""
        wl = self.ranks.store.workloads.get(self.key)
        if wl is None:
            self.notify("this workload was deleted", severity="warning", markup=False)
            return
        pod = self.table.cursor_key if self.focused is self.table else None
        rank = next((r for r in wl.ranks if r.pod == pod), None)
        self.ranks.shell_into(wl, rank)

    def _live(self) -> WorkloadView | None:
        wl = self.ranks.store.workloads.get(self.key)
        if wl is None:
            self.notify("this workload was deleted", severity="warning", markup=False)
        return wl

    def action_exec_all(self) -> None:
        if (wl := self._live()) is not None:
            self.ranks.exec_all(wl)

    def action_delete(self) -> None:
        if (wl := self._live()) is not None:
            self.ranks.delete_workload(wl)

    def action_suspend(self) -> None:
        if (wl := self._live()) is not None:
            self.ranks.toggle_suspend(wl)

    def action_convert(self) -> None:
        if (wl := self._live()) is not None:
            self.ranks.convert_workload(wl)

    def action_back(self) -> None:
        self.ranks.go_back()
