"""Cluster load, for operators: nodes (GPU allocation against utilisation, a heatmap of slots),
quota use per project, pending workloads with their reasons, interactive sessions holding idle GPUs."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.widgets import Static, TabbedContent, TabPane

from monitors.humanize import age, gpus, percent
from monitors.sanitize import clean
from monitors.views import ModelDiff, NodeView, ProjectView, WorkloadView

from ..cells import Cells, Look, node_row, quota_cell, status_cell, util_cell
from ..widgets.keyed_table import KeyedTable
from .base import RanksScreen, bindings

NODE_COLUMNS: list[tuple[str, int | None]] = [
    ("NODE", None), ("POOL", None), ("GPU", None), ("STATE", None), ("ALLOCATED", 12), ("UTIL", 10),
    ("MEM", 7), ("PODS", 4), ("SLOTS", None)]
NARROW_NODE_COLUMNS: list[tuple[str, int | None]] = [
    ("NODE", None), ("POOL", None), ("STATE", None), ("ALLOC", 10), ("UTIL", 8), ("PODS", 4), ("SLOTS", None)]
IDLE_UTIL = 5.0  # % below which an interactive session's GPUs count as idle


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


def pending_lines(look: Look, workloads: list[WorkloadView], now: float) -> Text:
    t = Text(no_wrap=False)
    if not workloads:
        t.append("no pending workloads", style="dim")
        return t
    for w in sorted(workloads, key=lambda w: w.created or 0.0):
        t.append(f"{clean(w.project, limit=30)}/{clean(w.name, limit=60)}", style="bold")
        t.append(f"  {gpus(w.gpus_requested)} GPUs  waiting {age(now - w.created) if w.created else '-'}  ")
        t.append_text(status_cell(look, w.status))
        reasons = sorted({clean(r.message or r.reason, limit=200) for r in w.ranks
                          if r.phase == "Pending" and (r.message or r.reason)}) or ([clean(w.reason)] if w.reason else [])
        for reason in reasons[:2]:
            t.append(f"\n    {reason}", style="dim")
        t.append("\n")
    return t


def idle_sessions(workloads: list[WorkloadView]) -> list[WorkloadView]:
    return sorted(
        (w for w in workloads if w.interactive and w.gpus_allocated > 0
         and w.gpu_util is not None and w.gpu_util < IDLE_UTIL),
        key=lambda w: -w.gpus_allocated)


def idle_lines(look: Look, workloads: list[WorkloadView], now: float) -> Text:
    t = Text(no_wrap=True)
    idle = idle_sessions(workloads)
    if not idle:
        t.append(f"no interactive session holds idle GPUs (util < {IDLE_UTIL:g}%)", style="dim")
        return t
    for w in idle:
        held = (now - w.created) / 3600 if w.created else 0.0
        t.append(f"{clean(w.project, limit=30)}/{clean(w.name, limit=60)}", style="bold")
        t.append(f"  {gpus(w.gpus_allocated)} GPUs  util {percent(w.gpu_util)}  ")
        t.append(f"held {age(now - w.created) if w.created else '-'} (~{held * w.gpus_allocated:.1f} GPU-hours)")
        if w.user:
            t.append(f"  {clean(w.user, limit=40)}", style="dim")
        t.append("\n")
    return t


class ClusterScreen(RanksScreen):
    crumb = "cluster load"
    BINDINGS: ClassVar[list[BindingType]] = bindings("table", ("open", "describe"))
    DEFAULT_CSS = """
    ClusterScreen TabbedContent { height: 1fr; }
    ClusterScreen TabPane { padding: 0; }
    ClusterScreen .panel { padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._cells: dict[Hashable, Cells] = {}
        self.narrow = False

    def body(self) -> ComposeResult:
        with TabbedContent(id="tabs"):
            with TabPane("Nodes", id="tab-nodes"):
                yield Static(id="nodes-note", classes="panel")
                yield KeyedTable(id="nodes")
            with TabPane("Quota", id="tab-quota"):
                yield Static(id="quota", classes="panel")
            with TabPane("Pending", id="tab-pending"):
                yield Static(id="pending", classes="panel")
            with TabPane("Idle sessions", id="tab-idle"):
                yield Static(id="idle", classes="panel")

    @property
    def table(self) -> KeyedTable:
        return self.query_one("#nodes", KeyedTable)

    def on_mount(self) -> None:
        super().on_mount()
        self._set_columns()
        self.resync()
        self.table.focus()

    def _set_columns(self) -> None:
        self.narrow = self.is_narrow()
        self.table.set_columns(NARROW_NODE_COLUMNS if self.narrow else NODE_COLUMNS)
        self._cells = {}

    def model_changed(self, diff: ModelDiff) -> None:
        if diff.nodes or diff.workloads or diff.projects or diff.status_changed:
            self._draw(list(diff.nodes.added) + list(diff.nodes.changed) if not diff.nodes.removed else None)

    def resync(self) -> None:
        if self.is_mounted:
            self._draw(None)

    def restyle(self) -> None:
        self._set_columns()
        self.resync()

    def _draw(self, changed: list[Hashable] | None) -> None:
        store = self.ranks.store
        look = self.ranks.look
        tabs = self.query_one(TabbedContent)
        active = tabs.active
        if active == "tab-nodes":
            note = self.query_one("#nodes-note", Static)
            forbidden = store.status.forbidden_for("nodes")
            if forbidden:
                note.update(Text(f"forbidden: {clean(forbidden)}", style="bold"))
            elif not store.nodes:
                note.update(Text("no nodes" if store.synced else "reading the cluster…", style="dim"))
            else:
                total = sum(n.gpus for n in store.nodes.values())
                alloc = sum(n.gpus_allocated for n in store.nodes.values())
                utils = [n.gpu_util for n in store.nodes.values() if n.gpu_util is not None]
                summary = Text(f"{len(store.nodes)} nodes  GPUs {gpus(alloc)}/{gpus(total)} allocated  ")
                summary.append(f"mean util {percent(sum(utils) / len(utils)) if utils else '-'}")
                if store.status.metrics_problem:
                    summary.append(f"  GPU metrics: {clean(store.status.metrics_problem, limit=120)}", style="dim")
                note.update(summary)
            if changed is None:
                self._cells = {k: self._row(n) for k, n in store.nodes.items()}
            else:
                for k in changed:
                    n = store.nodes.get(str(k))
                    if n is not None:
                        self._cells[k] = self._row(n)
            order = sorted(self._cells, key=lambda k: (store.nodes[k].pool, k) if k in store.nodes else ("", k))
            order = [k for k in order if k in store.nodes]
            self.table.sync(order, self._cells, changed)
        now = self.ranks.clock()
        wls = list(store.workloads.values())
        if active == "tab-quota":
            self.query_one("#quota", Static).update(quota_lines(look, store.projects.values()))
        elif active == "tab-pending":
            self.query_one("#pending", Static).update(pending_lines(look, [w for w in wls if w.status == "Pending"], now))
        elif active == "tab-idle":
            self.query_one("#idle", Static).update(idle_lines(look, wls, now))

    def _row(self, n: NodeView) -> Cells:
        return (*node_row(self.ranks.look, n, narrow=self.narrow), heat_cell(self.ranks.look, n))

    @on(TabbedContent.TabActivated)
    def _tab(self, event: TabbedContent.TabActivated) -> None:
        self._draw(None)
        self.refresh_bindings()

    @on(KeyedTable.RowSelected, "#nodes")
    def _row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_describe()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Open and describe act on the nodes table: hidden on the other tabs."""
        if action in ("open", "describe") and self.is_mounted:
            return self.query_one(TabbedContent).active == "tab-nodes"
        return True

    def action_open(self) -> None:
        self.action_describe()

    def action_describe(self) -> None:
        key = self.table.cursor_key
        if key is not None:
            self.ranks.open_describe_path(f"node {key}", f"/api/v1/nodes/{key}")

    def action_back(self) -> None:
        self.ranks.go_back()
