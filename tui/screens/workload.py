"""The workload detail screen: header, first-failure banner, and tabs for ranks, placement, events."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.geometry import Region
from textual.widgets import Static, TabbedContent, TabPane

from monitors.api_paths import object_path
from monitors.humanize import age, gpus
from monitors.logs.first_failure import FailureReport
from monitors.model_views import ModelDiff, RankView, WorkloadView
from monitors.records import EventRec
from monitors.sanitize import clean

from ..cells import Cells, Look, rank_row, status_cell
from ..widgets.event_list import EventList
from ..widgets.key_tabs import KeyTabs
from ..widgets.keyed_table import Column, KeyedTable
from ..widgets.live_static import LiveStatic
from .base import SORT_KEYS, RanksScreen, bindings, unshown

# too wide for the view: GPU memory's total gives way first, then the pod name (the rank says which
# one it is), the node, the loss's history, the step, then the status; the rank, numbers and bars
# keep their width
RANK_COLUMNS: list[Column] = [
    Column("RANK", None, 8), Column("#", 3), Column("POD", None, 10, 6), Column("STATUS", None, 9, 1),
    Column("RST", 3), Column("NODE", None, 10, 5), Column("GPU", 10), Column("TREND", 8), Column("MEM", None, 6, 7),
    Column("STEP", None, 4, 3), Column("LOSS", None, 6, 4)]
NARROW_RANK_COLUMNS: list[Column] = [
    Column("RANK", None, 8), Column("#", 3), Column("STATUS", None, 9, 1), Column("RST", 3),
    Column("NODE", None, 10, 2), Column("GPU", 10), Column("TREND", 6), Column("MEM", None)]


def pending_reasons(w: WorkloadView) -> list[str]:
    """Why a workload waits, each reason once: its pending ranks' messages (the scheduler's), else
    the workload's own reason."""
    reasons = sorted({clean(r.message or r.reason, limit=400) for r in w.ranks
                      if r.phase == "Pending" and (r.message or r.reason)})
    return reasons or ([clean(w.reason, limit=400)] if w.reason and w.reason != w.status else [])


def pending_text(look: Look, w: WorkloadView) -> Text | None:
    """The whole of why a pending workload waits (a list cell or the header line cuts it)."""
    if w.status != "Pending":
        return None
    reasons = pending_reasons(w)
    if not reasons:
        return None
    t = Text(no_wrap=False)
    t.append(f"{look.glyphs.phase_marker('Pending')} why it is pending: ", style="bold")
    t.append("\n".join(reasons[:3]))
    if len(reasons) > 3:
        t.append(f"\n(and {len(reasons) - 3} more reasons: see the Events tab)", style="dim")
    return t


def progress_line(progress: tuple[Any, Any, float | None, int | None], key: Any) -> str:
    """`step 420/1000 (slowest rank) · ETA 12m` from the followed logs; "" when nothing parsed."""
    pkey, ranks, eta, total = progress
    steps = [r["step"] for r in ranks.values() if r.get("step") is not None] if pkey == key else []
    if not steps:
        return ""
    out = f"step {min(steps)}" + (f"/{total}" if total else "") + (" (slowest rank)" if len(set(steps)) > 1 else "")
    if eta is not None:
        out += f" · ETA {age(eta)}"
    return out


def header_text(look: Look, w: WorkloadView, now: float, progress: str = "") -> Text:
    """Four lines at most, each cut to the width: what, status (and training progress), conditions,
    command."""
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(clean(w.kind, limit=30), style="bold")
    if w.framework and w.framework.lower() not in w.kind.lower():
        t.append(f" ({clean(w.framework, limit=20)})")
    if w.interactive:
        t.append("  interactive", style="bold")
        t.append(" (P: ports)", style="dim")
    t.append(f"  ranks {w.ranks_ready}/{w.ranks_total}")
    t.append(f"  GPUs {gpus(w.gpus_allocated)}/{gpus(w.gpus_requested)}")
    t.append(f"  age {age(now - w.created, live=True) if w.created else '-'}")
    if w.user:
        t.append(f"  user {clean(w.user, limit=40)}", style="dim")
    t.append("\n")
    t.append_text(status_cell(look, w.status))
    if progress:
        t.append("  " + progress, style="bold")
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


def why_text(look: Look, w: WorkloadView, diagnosis: Any, health: Any = None) -> Text | None:
    """Why a pending workload waits, or what is wrong with one that runs (`diagnostics.why`, and
    its hang or flagged ranks from `diagnostics.hangs`): a one-line summary, then each finding (the
    panel shows as many as fit)."""
    if w.status in ("Failed", "Succeeded", "Suspended"):
        return None  # (the failure banner and the header say it)
    ours = diagnosis is not None and (diagnosis.namespace, diagnosis.kind, diagnosis.name) == w.key
    findings = [(f.kind, f.text) for f in diagnosis.findings if f.kind != "failed"] if ours else []
    if health is not None and not health.ok:
        if health.hung:
            findings.append(("hang", health.summary))
        findings += [(flag, f"{r.label}: {why}") for r in health.flagged
                     for flag, why in zip(r.flags, r.why, strict=False)]
    if not findings:
        return None
    t = Text(no_wrap=False)
    head = "why it is pending" if w.status == "Pending" else "what is wrong"
    marker = look.glyphs.phase_marker('Pending') if w.status == 'Pending' else look.glyphs.warning
    if health is not None and not health.ok and w.status != "Pending":  # (where each rank is: offered first)
        t.append(f"{marker} {head}", style="bold")
        t.append(" (S: stacks)", style="dim")
        t.append(": ", style="bold")
    else:
        t.append(f"{marker} {head}: ", style="bold")
    raw = pending_reasons(w) if w.status == "Pending" else []
    if raw:  # the scheduler's own words first, whole; then what ranks makes of them
        t.append("\n".join(raw[:2]))
        t.append("\n")
    if ours and not diagnosis.ok:
        t.append(clean(diagnosis.summary, limit=400))
    else:  # (the first finding says it; a hang's words begin with "hung for")
        if findings[0][0] != "hang":
            t.append(f"{clean(findings[0][0], limit=20)} ", style="bold")
        t.append(clean(findings[0][1], limit=400))
        findings = findings[1:]
    for kind, text in findings:
        t.append(f"\n{clean(kind, limit=20)}: ", style="dim")
        t.append(clean(text, limit=400))
    return t


def _exited(t: Text, label: str, rank: int | None, code: int, reason: str) -> None:
    """`worker-1 (rank 2) exited 3 Error`, onto `t`."""
    t.append(clean(label, limit=60), style="bold")
    if rank is not None:
        t.append(f" (rank {rank})")
    t.append(f" exited {code}")
    if reason:
        t.append(f" {clean(reason, limit=40)}")


def recorded_failure_text(look: Look, w: WorkloadView, postmortem: tuple[Any, Any, tuple[str, ...]]) -> Text | None:
    """A finished workload whose pods are gone (or all being deleted): its first failure as the
    flight recorder kept it (saying so, and when), its last line, and what happened."""
    key, failure, story = postmortem
    if key != w.key or any(not r.deleting for r in w.ranks) or w.first_failure is not None or not (failure or story):
        return None
    t = Text(no_wrap=False)
    if failure is not None:
        t.append(f"{look.glyphs.cross} first failure (recorded by ranks at "
                 f"{time.strftime('%H:%M:%S', time.localtime(failure.recorded_at or 0))}; the pods are gone): ",
                 style="bold")
        _exited(t, failure.label, failure.rank, failure.exit_code, failure.reason)
        if failure.lines:
            t.append("\n" + clean(failure.lines[-1], limit=300), style="dim")
    else:
        t.append(f"{look.glyphs.cross} what happened: ", style="bold")
        t.append(clean(story[0], limit=300))
        story = story[1:]
    for line in story:
        t.append("\n" + clean(line, limit=300), style="dim")
    return t


def failure_text(look: Look, w: WorkloadView, command: str = "ranks", now: float | None = None) -> Text | None:
    """Which rank failed first; and, a finished job whose ranks still run on GPUs, how many and
    the line that frees them (`diagnostics.leftovers`)."""
    from monitors.diagnostics.leftovers import still_held

    ff = w.first_failure
    held = still_held(w)
    if (ff is None or w.status not in ("Failed", "Degraded", "Restarting")) and held is None:
        return None
    t = Text(no_wrap=False)
    if ff is not None and w.status in ("Failed", "Degraded", "Restarting"):
        t.append(f"{look.glyphs.cross} first failure: ", style="bold")
        _exited(t, ff.label, ff.rank, ff.exit_code, ff.reason)
        if ff.at:
            t.append(" at " + time.strftime("%H:%M:%S", time.localtime(ff.at)))
        if ff.message:
            t.append(": " + clean(ff.message, limit=200), style="dim")
        t.append("  (l: logs)", style="dim")
        from monitors.diagnostics.gpu_health import failure_gpu_line

        if gpu := failure_gpu_line(w, {}):  # (its GPU raised an XID shortly before, as the readings saw)
            t.append(f"\n{look.glyphs.warning} {clean(gpu, limit=300)}", style="bold")
    if held is not None:
        if t.plain:
            t.append("\n")
        when = time.time() if now is None else now
        t.append(f"{look.glyphs.warning} {clean(held.sentence(when, command), limit=400)}", style="bold")
    return t


def placement_text(look: Look, w: WorkloadView, node_gpus: dict[str, float],
                   node_alloc: dict[str, float] | None = None) -> Text:
    """Nodes x GPU slots, each slot labelled with the rank holding it and coloured by its use; the
    ranks that hold no GPU (an MPI launcher, a parameter server) in a column of their own after
    every node's slots, so that each node's row stays within its GPU columns."""
    by_node: dict[str, list[tuple[int, RankView]]] = {}
    for i, r in enumerate(w.ranks):
        by_node.setdefault(r.node or "", []).append((i, r))
    t = Text(no_wrap=True)
    if not w.ranks:
        t.append("no ranks yet", style="dim")
        return t
    width = max((len(clean(n, limit=40)) for n in by_node), default=4)
    slots_max = int(max([node_gpus.get(n, 0) for n in by_node if n] + [0]))
    slots_max = max([slots_max] + [sum(_slots(r) for _, r in ranks) for n, ranks in by_node.items() if n])
    gpuless = any(not _slots(r) for n, ranks in by_node.items() if n for _, r in ranks)
    t.append(f"{'GPU':<{width}}  " + "".join(f"{i:<4}" for i in range(slots_max))
             + ("no GPU" if gpuless else "") + "\n", style="dim")
    ascii_ = look.glyphs.name == "ascii"
    for node in sorted(by_node, key=lambda n: (n == "", n)):
        ranks = by_node[node]
        t.append(f"{clean(node, limit=40) or '(unscheduled)':<{width}}  ")
        if not node:
            t.append(", ".join(clean(r.label, limit=20) for _, r in ranks), style=look.status_style("Pending"))
            t.append("\n")
            continue
        used = 0
        for i, r in ranks:
            for _ in range(_slots(r)):
                style = look.util_style(r.gpu_util) if r.gpu_util is not None else look.rank_style(i)
                t.append(f"{_short_label(r):<3}", style=style + _slot(look))
                t.append(" ")
                used += 1
        total = int(node_gpus.get(node, 0))
        others = max(0, min(total - used, math.ceil((node_alloc or {}).get(node, 0.0)) - used))
        free = max(0, total - used - others)
        if others > 0:
            t.append(("=== " if ascii_ else "▒▒▒ ") * others, style="dim")
        if free > 0:
            t.append(("... " if ascii_ else "··· ") * free, style="dim")
        without = [(i, r) for i, r in ranks if not _slots(r)]
        if without:
            t.append("    " * (slots_max - used - others - free))
            for k, (i, r) in enumerate(without):
                t.append(("," if k else "") + _short_label(r), style=look.rank_style(i))
        t.append("\n")
    t.append("slots are filled in rank order; colour is GPU utilisation; "
             + ("===" if ascii_ else "▒▒▒") + " other workloads, "
             + ("..." if ascii_ else "···") + " free", style="dim")
    return t


def _slots(r: RankView) -> int:
    """The GPU columns a rank takes: one per GPU (a fraction takes one); none without a GPU."""
    return max(1, math.ceil(r.gpus)) if r.gpus > 0 else 0


def _slot(look: Look) -> Style:
    return Style(bold=True) if look.mono else Style(reverse=True)


def _short_label(r: RankView) -> str:
    if r.role in ("launcher", "master", "chief"):
        return r.role[0].upper() + (str(r.replica_index) if r.replica_index else "")
    idx = r.replica_index if r.replica_index is not None else r.rank
    return f"{r.role[:1]}{'' if idx is None else idx}"[:3]


EVENT_FIELDS = 34  # cells before an event's object and message: age, mark, reason, count and gaps
EVENT_MESSAGE_MIN = 30  # fewer cells left for the message than this: it goes on a line of its own
EVENT_INDENT = 9  # a message on its own line starts under the reason


def _event_objects(events: tuple[EventRec, ...]) -> dict[EventRec, str]:
    return {e: f"{clean(e.kind, limit=20).lower()}/{clean(e.object_name, limit=60)}" for e in events}


def event_rows(events: tuple[EventRec, ...], width: int | None) -> int:
    """Lines per event in `width` cells: 1, or 2 when the message would get fewer than
    EVENT_MESSAGE_MIN cells beside the rest (80 columns: the message on a line of its own)."""
    if not events or not width:
        return 1
    objects = _event_objects(events)
    room = width - EVENT_FIELDS - max(len(o) for o in objects.values())
    return 2 if room < EVENT_MESSAGE_MIN else 1


def event_lines(look: Look, events: tuple[EventRec, ...], now: float, width: int | None = None) -> Text:
    """The Events tab: newest first, one line per event; two in a narrow `width` (the message
    under the rest, so that it can be read at 80 columns)."""
    t = Text(no_wrap=True, overflow="ellipsis")
    if not events:
        t.append("no events", style="dim")
        return t
    objects = _event_objects(events)
    width_o = max(len(o) for o in objects.values())
    split = event_rows(events, width) == 2
    for e in reversed(events):
        t.append(f"{age(now - e.last, live=True) if e.last else '-':>6} ", style="dim")
        warning = e.type == "Warning"
        t.append(f"{look.glyphs.warning if warning else ' '} ", style=look.status_style("Failed") if warning else "")
        t.append(f"{clean(e.reason, limit=30):<17} ", style=look.status_style("Failed") if warning else "")
        t.append(f"{objects[e]:<{width_o}} ", style="dim")
        count = f"{'x' + str(e.count) if e.count > 1 else '':>4}"
        message = clean(e.message, limit=400)
        if split:
            t.append(count, style="dim")
            t.append(f"\n{' ' * EVENT_INDENT}{message}\n")
        else:
            t.append(count + " ", style="dim")
            t.append(f" {message}\n")
    return t


class WorkloadScreen(RanksScreen):
    BINDINGS: ClassVar[list[BindingType]] = bindings(
        "table", ("open", "describe", "logs", "shell", "exec_all", "delete", "suspend", "convert", "debug", "next_tab",
                  "previous_tab", "stacks", "ports")) + unshown(bindings("table", SORT_KEYS))
    DEFAULT_CSS = """
    WorkloadScreen #header { height: auto; max-height: 4; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    WorkloadScreen #failure { height: auto; max-height: 6; padding: 0 1; background: $error 20%; display: none; }
    WorkloadScreen #failure.-shown { display: block; }
    WorkloadScreen #pending { height: auto; max-height: 7; padding: 0 1; background: $warning 15%; display: none; }
    WorkloadScreen #pending.-shown { display: block; }
    WorkloadScreen TabbedContent { height: 1fr; }
    WorkloadScreen TabPane { padding: 0; }
    WorkloadScreen #placement { padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, key: tuple[str, str, str], *, created: bool = False) -> None:
        """`created`: the workload was just created from here (a convert, a submit): until the watch
        brings it, it is on its way, not deleted."""
        super().__init__()
        self.key = key
        self.select_pod: str | None = None  # the rank's pod the cursor goes to once it is shown
        self.focus_key = key
        self.awaiting = created
        self.last: WorkloadView | None = None
        self._diag_shown: tuple[Any, Any] = (None, None)
        self._progress_shown: tuple[Any, Any] = (None, None)
        self.gone = False
        self._cells: dict[str, Cells] = {}
        self.narrow = False
        self._hist_shown: dict[str, tuple[float, ...]] = {}
        self._pending_shown: Text | None = None
        self._header_first = ""  # the header's first line as shown (the age is on it)
        self._header_age = ""
        self._events_drawn: tuple[EventRec, ...] = ()
        self._event_rows = 1  # lines per event as drawn (two when narrow)
        self._event_ages: list[str] = []  # as shown, top to bottom

    @property
    def crumb(self) -> str:
        return self.key[2]

    def body(self) -> ComposeResult:
        yield LiveStatic(id="header")
        yield Static(id="failure")
        yield Static(id="pending")
        with KeyTabs(id="tabs"):
            with TabPane("Ranks", id="tab-ranks"):
                yield KeyedTable(id="ranks")
            with TabPane("Placement", id="tab-placement"):
                yield Static(id="placement")
            with TabPane("Events", id="tab-events"):
                yield EventList(id="event-list", static_id="events")

    @property
    def table(self) -> KeyedTable[str]:  # (its rows: the ranks' pods)
        return self.query_one("#ranks", KeyedTable)

    def on_mount(self) -> None:
        super().on_mount()
        self._set_columns()
        self.table.choose = self.action_open  # (Enter opens at once: keys typed after it reach what opens)
        self.dashboard.data.focus(self.key)
        self.resync()
        self.table.focus()

    def model_changed(self, diff: ModelDiff) -> None:
        wd = diff.workloads
        if self.key in wd.removed:
            self.gone = True
            self.show_status()
            self._draw(None)
            return
        store = self.dashboard.store
        if self.key in wd.added or self.key in wd.changed:
            said = self.gone or self.awaiting
            self.gone = self.awaiting = False
            self.resync()
            if said:
                self.show_status()
        elif (store.diagnosis, store.postmortem) != self._diag_shown:
            self.resync()  # its diagnosis changed (its events did)
        elif (store.progress, store.health.get(self.key)) != self._progress_shown:
            self.resync()  # its training progress moved, or its ranks' health changed
        elif store.histories != self._hist_shown:
            self.resync()  # the ranks' GPU history grew
        elif diff.events_changed or diff.status_changed:
            self._draw_side()

    def resync(self) -> None:
        if not self.is_mounted:
            return
        wl = self.dashboard.store.workloads.get(self.key)
        if wl is not None:
            self.awaiting = False
        elif self.dashboard.store.synced and not self.awaiting:
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
        look = self.dashboard.look
        now = self.dashboard.clock()
        if wl is not None:
            self.last = wl
        shown = wl or self.last
        header = self.query_one("#header", Static)
        if shown is None:
            header.update(Text("waiting for the workload…" if not self.dashboard.store.synced
                               else "this workload does not exist (any more)", style="dim"))
            self.show_status()
            return
        self._draw_header(shown, now)
        failure = self.query_one("#failure", Static)
        store = self.dashboard.store
        ftext = failure_text(look, shown, self.dashboard.paste_command, now) or recorded_failure_text(
            look, shown, store.postmortem)
        failure.set_class(ftext is not None, "-shown")
        if ftext is not None:
            failure.update(ftext)
        pending = self.query_one("#pending", Static)
        ptext = why_text(look, shown, store.diagnosis, store.health.get(self.key)) or pending_text(look, shown)
        pending.set_class(ptext is not None, "-shown")
        if ptext is not None and ptext != self._pending_shown:
            pending.update(ptext)
        self._pending_shown = ptext
        self._diag_shown = (store.diagnosis, store.postmortem)
        hist = self.dashboard.store.histories
        self._hist_shown = dict(hist)
        spark = 6 if self.narrow else 8
        pkey, per_rank, _eta, _total = store.progress
        per_rank = per_rank if pkey == self.key else {}
        health = store.health.get(self.key)
        flags = {h.label: h.flags for h in health.flagged} if health is not None else {}
        self._progress_shown = (store.progress, health)
        cells = {r.pod: rank_row(look, r, i, hist.get(r.pod, ()), with_pod=not self.narrow, spark=spark,
                                 progress=per_rank.get(r.label), flags=flags.get(r.label, ()),
                                 with_progress=not self.narrow)
                 for i, r in enumerate(shown.ranks)}
        changed = [k for k, v in cells.items() if self._cells.get(k) != v]
        self._cells = cells
        self.table.sync([r.pod for r in shown.ranks], cells, changed)
        if self.select_pod is not None and self.table.move_to_key(self.select_pod):
            self.select_pod = None  # (opened on a rank: cluster load's GPUs, Enter on one)
        self._draw_side()
        self.show_status()

    def _draw_side(self) -> None:
        shown = self.last
        if shown is None:
            return
        tabs = self.query_one(TabbedContent)
        look = self.dashboard.look
        if tabs.active == "tab-placement":
            nodes = self.dashboard.store.nodes.values()
            self.query_one("#placement", Static).update(placement_text(
                look, shown, {n.name: n.gpus for n in nodes}, {n.name: n.gpus_allocated for n in nodes}))
        elif tabs.active == "tab-events":
            self._draw_events(self.dashboard.clock())

    def _draw_header(self, w: WorkloadView, now: float, *, tick: bool = False) -> None:
        """The header; when its age ticks, only the cells from the age on are repainted."""
        text = header_text(self.dashboard.look, w, now, progress_line(self.dashboard.store.progress, self.key))
        header = self.query_one("#header", LiveStatic)
        first, old = text.plain.split("\n", 1)[0], self._header_first
        if tick and old:
            k = next((i for i, (a, b) in enumerate(zip(first, old, strict=False)) if a != b), min(len(first), len(old)))
            x = cell_len(first[:k])
            header.patch(text, [Region(x, 0, max(0, header.content_size.width - x), 1)])
        else:
            header.update(text)
        self._header_first = first
        self._header_age = age(now - w.created, live=True) if w.created else ""
        if w.created and not tick:
            self.dashboard.ages_shown([w.created], now)

    def _draw_events(self, now: float, *, tick: bool = False) -> None:
        """The Events tab; when ages tick, only the age cells whose text changed are repainted."""
        events = self._events_drawn if tick else self.dashboard.store.events
        ages = [age(now - e.last, live=True) if e.last else "-" for e in reversed(events)]
        widget = self.query_one("#events", LiveStatic)
        listing = self.query_one(EventList)
        width = widget.size.width or None
        rows = event_rows(events, width)
        if tick:
            changed = [(y * rows, max(6, len(a), len(b))) for y, (a, b) in enumerate(zip(ages, self._event_ages,
                                                                                        strict=False)) if a != b]
            if changed:
                listing.show(event_lines(self.dashboard.look, events, now, width), events[::-1], rows,
                             [Region(0, y, w, 1) for y, w in changed])
        else:
            listing.show(event_lines(self.dashboard.look, events, now, width), events[::-1], rows)
            self.dashboard.ages_shown([e.last for e in events if e.last], now)
            if width is None:  # (a tab just shown has no size yet: looked at again once it has)
                self.call_after_refresh(self._events_relayout)
        self._events_drawn, self._event_ages, self._event_rows = events, ages, rows

    def on_resize(self) -> None:
        """A message that goes on its own line below a width, beside the rest above it: drawn again
        when the terminal's width crosses it (once the tab has its new size)."""
        self.call_after_refresh(self._events_relayout)

    def _events_relayout(self) -> None:
        if not self.is_mounted or self.last is None or not self._events_drawn or self.query_one(TabbedContent).active != "tab-events":
            return
        width = self.query_one("#events", LiveStatic).size.width or None
        if event_rows(self._events_drawn, width) != self._event_rows:
            self._draw_events(self.dashboard.clock())

    def tick_ages(self, now: float) -> list[float]:
        """The app's age ticker: the header's age and, on the Events tab, the events' ages, each
        repainted alone when its text changes. Returns the times they are measured from."""
        w = self.last
        if w is None:
            return []
        since = []
        if w.created:
            since.append(w.created)
            if age(now - w.created, live=True) != self._header_age:
                self._draw_header(w, now, tick=True)
        if self._events_drawn and self.query_one(TabbedContent).active == "tab-events":
            since += [e.last for e in self._events_drawn if e.last]
            self._draw_events(now, tick=True)
        return since

    @on(TabbedContent.TabActivated)
    def _tab(self, event: TabbedContent.TabActivated) -> None:
        # (the pane shown now, not the event's: keys typed ahead may have moved on since it was sent)
        active = self.query_one(TabbedContent).active
        self._draw_side()
        if active == "tab-ranks" and self.focused is not self.table:
            self.table.focus()  # back on the ranks: the cursor keys move in the table again
        elif active == "tab-events":
            self.query_one(EventList).focus()  # the events' cursor

    # -- the Events tab: Enter opens an event's object, v shows its whole message --------------------
    @on(EventList.Chosen)
    def _event_chosen(self, msg: EventList.Chosen) -> None:
        msg.stop()
        if msg.what == "message":
            from .event_message import EventMessageScreen

            self.app.push_screen(EventMessageScreen(msg.event, self.dashboard.clock()))
        else:
            self.open_event_object(msg.event)

    def open_event_object(self, e: EventRec) -> None:
        """A rank's pod: the Ranks tab, on that rank (another pod: its YAML); a workload: its
        screen (this one: its YAML); a node: its pods; a Job, a Service...: its YAML."""
        kind, name, ns = e.kind, e.object_name, e.namespace
        wl = self.last
        if kind == "Pod":
            if wl is not None and any(r.pod == name for r in wl.ranks):
                self.query_one(TabbedContent).active = "tab-ranks"
                self.table.move_to_key(name)
                self.table.focus()
            else:
                self.dashboard.open_describe_pod(ns, name)
        elif kind == "Node":
            from .cluster import NodePodsScreen

            self.app.push_screen(NodePodsScreen(name))
        elif (ns, kind, name) in self.dashboard.store.workloads and (ns, kind, name) != self.key:
            self.dashboard.open_workload((ns, kind, name))
        elif wl is not None and (kind, name) == (wl.kind, wl.name):
            self.dashboard.open_describe(wl)
        elif (path := object_path(kind, ns, name)) is not None:
            self.dashboard.open_describe_path(f"{kind.lower()}/{name}", path)
        else:
            self.notify(f"no view of a {clean(kind, limit=40)} here (d describes the workload)", timeout=3,
                        markup=False)

    def banner_text(self) -> Text | None:
        if self.awaiting:
            return Text(f"{self.key[1].lower()}/{self.key[2]} was just created; waiting for the API server's "
                        "watch to bring it", style="bold")
        if self.gone:
            return Text(f"{self.dashboard.look.glyphs.warning} this workload was deleted; showing what was last "
                        "seen (Esc to go back)", style="bold")
        return None

    # -- actions -----------------------------------------------------------------------------------
    def action_open(self) -> None:
        """Enter on a rank: its pod as YAML."""
        pod = self.table.cursor_key
        if pod is not None and self.last is not None:
            self.dashboard.open_describe_pod(self.last.namespace, str(pod))

    @on(KeyedTable.RowSelected, "#ranks")
    def _row(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_sort(self) -> None:
        """`o`/`O`: the ranks sorted by the next column, or the other way (a header click too)."""
        self.sort_table(self.table)

    def action_sort_reverse(self) -> None:
        self.sort_table(self.table, reverse=True)

    def action_describe(self) -> None:
        """`d`: the workload itself as YAML."""
        if self.last is not None:
            self.dashboard.open_describe(self.last)

    def action_logs(self) -> None:
        """`l`: the merged logs of every rank; while a first failure is shown (its banner says
        "l: logs"), the log of the rank that failed, at the instance that failed."""
        wl = self.last
        if wl is not None and wl.first_failure is not None and wl.status in ("Failed", "Degraded", "Restarting"):
            self._failure_logs(wl)
        else:
            self.dashboard.open_logs(self.key)

    @work(exclusive=True, group="failure-logs")
    async def _failure_logs(self, wl: WorkloadView) -> None:
        """Which instance of the failed container holds the failure (the previous one when it
        restarted since) is asked of the API server on the data loop (monitors/logs/first_failure);
        the logs open filtered to that rank, at its last lines."""
        ff = wl.first_failure
        if ff is None:
            return
        report: FailureReport | None = None
        try:
            report = await asyncio.wrap_future(self.dashboard.data.locate_failure(wl))
            note = report.note if report is not None else ""
        except Exception as exc:
            note = f"cannot tell which instance failed: {getattr(exc, 'message', None) or exc}"
        if self.app.screen is not self:
            return  # gone elsewhere meanwhile
        self.dashboard.open_logs(self.key, previous=bool(report and report.previous), rank=clean(ff.label, limit=60),
                             note=note)

    def action_shell(self) -> None:
        """`s`: a shell in the rank under the cursor (the lead when the table is not focused)."""
        wl = self.dashboard.store.workloads.get(self.key)
        if wl is None:
            self.notify("this workload was deleted", severity="warning", markup=False)
            return
        pod = self.table.cursor_key if self.focused is self.table else None
        rank = next((r for r in wl.ranks if r.pod == pod), None)
        self.dashboard.actions.shell_into(wl, rank)

    def _live(self) -> WorkloadView | None:
        wl = self.dashboard.store.workloads.get(self.key)
        if wl is None:
            self.notify("this workload was deleted", severity="warning", markup=False)
        return wl

    def action_exec_all(self) -> None:
        if (wl := self._live()) is not None:
            self.dashboard.actions.exec_all(wl)

    def action_delete(self) -> None:
        if (wl := self._live()) is not None:
            self.dashboard.actions.delete_workload(wl)

    def action_suspend(self) -> None:
        if (wl := self._live()) is not None:
            self.dashboard.actions.toggle_suspend(wl)

    def action_convert(self) -> None:
        if (wl := self._live()) is not None:
            self.dashboard.actions.convert_workload(wl)

    def action_debug(self) -> None:
        if (wl := self._live()) is not None:
            self.dashboard.actions.debug_workload(wl)

    def action_stacks(self) -> None:
        """`S`: every rank's Python stack, merged (the hang autopsy)."""
        if (wl := self._live()) is not None:
            from .stacks import StacksScreen

            self.app.push_screen(StacksScreen(wl))

    def action_ports(self) -> None:
        """`P`: the ranks' ports; Enter forwards one (the Ports view)."""
        if (wl := self._live()) is not None:
            from .ports import PortsScreen

            self.app.push_screen(PortsScreen(wl))

    def action_back(self) -> None:
        self.dashboard.go_back()
