"""Cluster load's GPUs tab, and the GPUs a node's row expands into: every GPU with its figures,
its owner and its marks (`monitors.gpu_fleet`), read on the data thread while shown
(`DataLoop.gpu_fleet`: one query per field group, at most once per refresh interval).

The rows are made from each reading as it comes back (`FleetRead`), only for the GPUs whose
figures moved; a key only moves the cursor. `/` filters them (node, UUID, model, owner, project,
user, marks), `o`/`O` sort by a column, Enter opens the owner's workload at that rank.
"""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich.console import JustifyMethod
from rich.text import Text
from textual.message import Message

from monitors.dataloop.fleet import FleetShown
from monitors.gpu_fleet import Gpu, GpuKey
from monitors.gpu_fleet_export import gpu_cell, mem_cell, owner_cell, power_cell, short_model, throttle_cell
from monitors.humanize import mib
from monitors.sanitize import clean

from ..cells import Cells, Look, plain, spark_cell, util_cell
from ..filtering import RowFilter, SearchLines
from ..widgets.keyed_table import Column, Fitted, KeyedTable

if TYPE_CHECKING:
    from ..dashboard import Dashboard

GPU_COLUMNS: list[Column] = [
    Column("NODE", None, 8), Column("GPU", 4), Column("MODEL", None, 6, 4), Column("UTIL", 10), Column("TREND", 8),
    Column("MEM", None, 7, 2), Column("TEMP", 5), Column("POWER", None, 5, 3), Column("SM", None, 4, 5),
    Column("THROTTLE", None, 5, 6), Column("XID", 4), Column("OWNER", None, 10, 1), Column("PROJECT", None, 5, 7),
    Column("USER", None, 4, 8), Column("FLAGS", None)]
NARROW_GPU_COLUMNS: list[Column] = [
    Column("NODE", None, 8), Column("GPU", 4), Column("UTIL", 10), Column("TREND", 6), Column("TEMP", 5),
    Column("XID", 4), Column("OWNER", None, 8, 1), Column("FLAGS", None)]
FLAG_STYLES = {"erroring": "Failed", "hot": "Failed", "throttled": "Degraded", "idle": "Degraded",
               "unclaimed": "Pending"}


class FleetRead(Message):
    """A reading of every GPU came back from the data thread."""

    def __init__(self, result: concurrent.futures.Future[FleetShown]) -> None:
        super().__init__()
        self.result = result


class Memo:
    """Cells made once per distinct value and shared between rows (the table copies a cell before
    it draws it: none is changed in place): 40,000 GPUs have a few hundred distinct cells."""

    def __init__(self, look: Look) -> None:
        self.look = look
        self.texts: dict[tuple[str, str, JustifyMethod], Text] = {}
        self.utils: dict[int, Text] = {}
        self.sparks: dict[tuple[int, ...], Text] = {}
        self.flags: dict[tuple[tuple[str, ...], bool], Text] = {}

    def text(self, value: str, style: str = "", justify: JustifyMethod = "left") -> Text:
        key = (value, style, justify)
        t = self.texts.get(key)
        if t is None:
            if len(self.texts) > 200_000:
                self.texts.clear()
            t = self.texts[key] = Text(clean(value, limit=120), style=style, no_wrap=True, overflow="ellipsis",
                                       justify=justify)
        return t

    def util(self, pct: float | None) -> Text:
        key = -1 if pct is None else round(pct)
        t = self.utils.get(key)
        if t is None:
            t = self.utils[key] = util_cell(self.look, None if pct is None else float(key))
        return t

    def spark(self, history: Iterable[float], width: int) -> Text:
        key = (width, *(round(v) for v in list(history)[-width:]))
        t = self.sparks.get(key)
        if t is None:
            if len(self.sparks) > 50_000:
                self.sparks.clear()
            t = self.sparks[key] = spark_cell(self.look, key[1:], width)
        return t

    def flag(self, g: Gpu) -> Text:
        key = (g.flags, g.owner_unknown)
        t = self.flags.get(key)
        if t is None:
            t = self.flags[key] = flags_cell(self.look, g)
        return t


def flags_cell(look: Look, g: Gpu) -> Text:
    t = Text(no_wrap=True)
    for i, f in enumerate(g.flags):
        t.append(("," if i else "") + f, style=look.status_style(FLAG_STYLES.get(f, "Running")))
    if not t.plain and g.owner_unknown:
        t.append("owner?", style="dim")
    return t or Text("-", style="dim")


def gpu_row(memo: Memo, g: Gpu, history: Iterable[float], *, narrow: bool) -> Cells:
    look, text = memo.look, memo.text
    failed = str(look.status_style("Failed"))
    temp = text("-" if g.temp is None else f"{g.temp:.0f}C", failed if "hot" in g.flags else "", "right")
    xid = text("-" if g.xid is None else str(g.xid), failed if g.xid else "", "right")
    owner = text(owner_cell(g) + (" (uuid)" if g.owned_by == "uuid" else ""))
    if narrow:
        return (text(g.node), text(gpu_cell(g)), memo.util(g.util), memo.spark(history, 6), temp, xid, owner,
                memo.flag(g))
    o = g.owner
    return (text(g.node), text(gpu_cell(g)), text(short_model(g.model) + (f" {g.mig_profile}" if g.mig_profile else "")),
            memo.util(g.util), memo.spark(history, 8), text(mem_cell(g)), temp, text(power_cell(g)),
            text("-" if g.sm_clock is None else f"{g.sm_clock:.0f}"),
            text(throttle_cell(g), str(look.status_style("Degraded")) if g.throttle else ""), xid, owner,
            text((o.project or "-") if o else "-"), text((o.user or "-") if o else "-"), memo.flag(g))


def search_texts(g: Gpu) -> list[str]:
    """What `/` matches a GPU by, as one line (one regex search a GPU; matched, never shown)."""
    o = g.owner
    texts = [g.node, g.name, g.uuid, g.model, g.mig_profile, *g.flags]
    if o is not None:
        texts += [o.namespace, o.pod, o.workload, o.label, o.project, o.user]
    return [" ".join(t.replace("\n", " ") for t in texts if t)]  # (one line: `RowFilter.matching_lines`)


class GpuRows:
    """The tab's rows: each reading taken as it comes (`take`), the cells of a GPU made again only
    when its figures moved, and made a chunk at a time (`make`: the rows on screen first), so that
    40,000 GPUs show their first rows at once and keys are answered between chunks."""

    def __init__(self) -> None:
        self.shown: FleetShown | None = None
        self.by_key: dict[GpuKey, Gpu] = {}
        self.cells: dict[GpuKey, Cells] = {}
        self.dirty: dict[GpuKey, None] = {}  # (ordered) GPUs whose cells are to be made again
        self._made: dict[GpuKey, tuple[Gpu, tuple[float, ...]]] = {}
        self._texts: dict[GpuKey, tuple[tuple[str, ...], Any, list[str]]] = {}  # (flags, owner, what `/` reads)
        self._counts: tuple[int, dict[str, int]] | None = None  # (held, GPUs per mark) of the reading shown
        self._lines: tuple[str | None, list[GpuKey], SearchLines] | None = None  # (node, keys, their texts)
        # (the screen's order, the table's sort, the table's order) last shown: not shown again unchanged
        self.synced: tuple[list[GpuKey], tuple[int | None, bool], object] | None = None
        self.memo: Memo | None = None
        self.narrow = False
        self.asked = False  # a reading is under way on the data thread
        self.asked_at = 0.0
        self.problem = ""  # why the last reading failed ("" when it answered)

    def take(self, look: Look, shown: FleetShown, narrow: bool) -> None:
        """A new reading: the GPUs whose figures moved are marked to be made again."""
        if narrow != self.narrow or self.memo is None or self.memo.look is not look:
            self.narrow, self._made, self.cells, self.memo = narrow, {}, {}, Memo(look)
        self.shown = shown
        self._counts = self._lines = None
        self.by_key = {g.key: g for g in shown.gpus}
        for g in shown.gpus:
            key = g.key
            made = self._made.get(key)
            if made is None or made[0] != g or made[1][-8:] != shown.history.get(key, ())[-8:]:
                self.dirty[key] = None
        for key in [k for k in self.cells if k not in self.by_key]:
            del self.cells[key]
            self._made.pop(key, None)
            self._texts.pop(key, None)
        for key in [k for k in self.dirty if k not in self.by_key]:
            del self.dirty[key]

    def make(self, first: Iterable[GpuKey], most: int) -> list[GpuKey]:
        """The cells of up to `most` dirty GPUs, those of `first` (the rows on screen) first."""
        if self.shown is None or self.memo is None:
            return []
        made: list[GpuKey] = []
        todo = [k for k in first if k in self.dirty][:most]
        todo += itertools.islice((k for k in self.dirty if k not in todo), max(0, most - len(todo)))
        for key in todo:
            self.dirty.pop(key, None)
            g = self.by_key.get(key)
            if g is None:
                continue
            hist = self.shown.history.get(key, ())
            self._made[key] = (g, hist)
            self.cells[key] = gpu_row(self.memo, g, hist, narrow=self.narrow)
            self.texts(g)  # (made with its cells, between frames: a `/` keystroke then only matches)
            made.append(key)
        return made

    def restyle(self) -> None:
        self._made, self.cells, self.memo = {}, {}, None
        if self.shown is not None:
            self.dirty = dict.fromkeys(self.by_key)

    def order(self, row_filter: RowFilter, node: str | None = None) -> list[GpuKey]:
        if self.shown is None:
            return []
        if not row_filter.active:
            return [g.key for g in self.shown.gpus if node is None or g.node == node]
        keys, lines = self._search_lines(node)
        hits = row_filter.matching_lines(lines)
        if hits is None:
            return [k for k, line in zip(keys, lines.lines, strict=True) if row_filter.matches([line], {})]
        return [k for k, hit in zip(keys, hits, strict=True) if hit]

    def prepare_search(self) -> None:
        """What `/` reads of every GPU joined now (the filter bar opening), not at its first key."""
        if self.shown is not None:
            self._search_lines(None)

    def _search_lines(self, node: str | None) -> tuple[list[GpuKey], SearchLines]:
        """The GPUs (of `node`) and what `/` reads of each, joined once until a text changes."""
        if self._lines is not None and self._lines[0] == node:
            return self._lines[1], self._lines[2]
        assert self.shown is not None
        kept = self._texts
        gpus = [g for g in self.shown.gpus if node is None or g.node == node]
        keys = [g.key for g in gpus]
        texts = [kept[k][2][0] if k in kept else self.texts(g)[0] for k, g in zip(keys, gpus, strict=True)]
        self._lines = (node, keys, SearchLines(texts))
        return keys, self._lines[2]

    def texts(self, g: Gpu) -> list[str]:
        """What `/` matches `g` by, kept while its marks and owner stay (a reading moves figures)."""
        flags = g.flags
        kept = self._texts.get(g.key)
        if kept is not None and kept[0] == flags and kept[1] == g.owner:
            return kept[2]
        texts = search_texts(g)
        self._texts[g.key] = (flags, g.owner, texts)
        self._lines = None
        return texts

    def counts(self) -> tuple[int, dict[str, int]]:
        """(GPUs held, GPUs per mark) of the reading shown, counted once per reading."""
        if self._counts is None:
            held, marks = 0, dict.fromkeys(FLAG_STYLES, 0)
            for g in self.shown.gpus if self.shown is not None else ():
                held += g.allocated
                for mark in g.flags:
                    marks[mark] = marks.get(mark, 0) + 1
            self._counts = (held, marks)
        return self._counts

    def gpu(self, key: GpuKey) -> Gpu | None:
        return self.by_key.get(key)

    def of_node(self, node: str) -> list[Gpu]:
        return [g for g in self.shown.gpus if g.node == node] if self.shown is not None else []

    def note(self, look: Look, row_filter: RowFilter, shown_rows: int) -> Text:
        s = self.shown
        if s is None:
            return Text("reading every GPU…", style="dim")
        if self.problem and not s.gpus:
            return Text(f"GPU metrics unavailable: {clean(self.problem, limit=200)}", style="bold")
        total = len(s.gpus)
        allocated, marks = self.counts()
        t = Text(f"{total} GPUs  {allocated} held  ")
        for mark in ("idle", "unclaimed", "hot", "throttled", "erroring"):
            n = marks.get(mark, 0)
            if n:
                t.append(f"{n} {mark}  ", style=look.status_style(FLAG_STYLES[mark]))
        if row_filter.active:
            t.append(f"/{clean(row_filter.text, limit=60)}: {shown_rows} of {total}  ", style="dim")
        if self.problem:
            t.append(f"the last reading failed ({clean(self.problem, limit=120)}): these are older  ", style="bold")
        for line in s.notes[:2]:  # (what is missing and why: `ranks gpus --doctor` says all)
            t.append(f"\n{look.glyphs.warning} {clean(line, limit=400)}", style="dim")
        if len(s.notes) > 2:
            t.append(f"\n{len(s.notes) - 2} more: ranks gpus --doctor", style="dim")
        return t


def ask(dashboard: Dashboard, rows: GpuRows, post: Any, now: float, every: float) -> None:
    """A reading of every GPU, unless one is under way or the last is younger than `every` s."""
    if rows.asked or (rows.shown is not None and now - rows.asked_at < every):
        return
    rows.asked, rows.asked_at = True, now
    dashboard.data.gpu_fleet().add_done_callback(lambda f: post(FleetRead(f)))


def taken(rows: GpuRows, msg: FleetRead) -> FleetShown | None:
    rows.asked = False
    try:
        return msg.result.result()
    except Exception as exc:  # not connected (between connections), or a bug: said in the note
        return FleetShown((), {}, {}, (), f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__, 0, 0.0)


def open_gpu(dashboard: Dashboard, app: Any, g: Gpu | None) -> bool:
    """Enter on a GPU: its owner's workload at that rank (False: no workload holds it)."""
    o = g.owner if g is not None else None
    if o is None or not o.kind:
        return False
    key = (o.namespace, o.kind, o.name)
    if key not in dashboard.store.workloads:
        return False
    dashboard.open_workload(key)
    screen = app.screen
    if hasattr(screen, "select_pod"):
        screen.select_pod = o.pod
    return True


CHUNK = 1000  # rows made per turn of the event loop (the keys typed meanwhile are answered between)


def fill(table: KeyedTable[Any], rows: GpuRows, order: list[GpuKey]) -> bool:
    """Make the next chunk of rows (those on screen first) and show every row made so far, in
    `order`; True while rows are left to make."""
    top = int(table.scroll_y)
    view = order[max(0, top - 5): top + table.size.height + 5]
    made = rows.make(view, CHUNK)
    state = (table.sort_column, table.sort_descending)
    last = rows.synced
    if made or last is None or last[1] != state or last[2] is not table.order or last[0] != order:
        table.sync([k for k in order if k in rows.cells], rows.cells, made)  # (else: as shown, 40,000 rows)
        rows.synced = (order, state, table.order)
    return bool(rows.dirty)


def gpu_key_of(table: KeyedTable[Any], key: Any) -> GpuKey | None:
    """The GPU a row stands for: a row of the GPUs tab, or a node's GPU row (``("gpu", *key)``)."""
    if table.id == "gpus-table":
        return key if isinstance(key, tuple) else None
    if isinstance(key, tuple) and len(key) == 4 and key[0] == "gpu" and key[2] >= 0:
        return (key[1], key[2], key[3])
    return None


HELD_BY = Column("HELD BY", None, 8, 9)  # the nodes table's column while a node shows its GPUs


def short_uuid(uuid: str) -> str:
    """A GPU's UUID as told apart on a node: its first 6 hex digits (``GPU-604ac76c-...`` -> 604ac7)."""
    return uuid.removeprefix("GPU-").removeprefix("MIG-")[:6]


def holder_cell(look: Look, g: Gpu) -> Text:
    """Who holds a GPU, for the nodes table's HELD BY column."""
    if g.owner is not None:
        return plain(owner_cell(g) + (" (uuid)" if g.owned_by == "uuid" else ""), 120)
    return Text("owner?" if g.owner_unknown else "-", style="dim", no_wrap=True)


def node_gpu_rows(look: Look, rows: GpuRows, node: str, *, narrow: bool) -> dict[Any, Cells]:
    """A node's GPUs as rows of the nodes table, under the node's row, each figure in its column:
    NODE the index and the UUID's head, GPU the model (MIG profile), STATE the marks, UTIL, MEM
    (used), SLOTS its sparkline, HELD BY the owner. Cells under the node's own columns are
    `Fitted` (cut to the column, never widening it); the rows are the node's children (sorted
    with it: `KeyedTable.parent_of`)."""
    gpus_of = rows.of_node(node)
    out: dict[Any, Cells] = {}
    ascii_ = look.glyphs.name == "ascii"
    empty = Text("")
    for i, g in enumerate(gpus_of):
        last = i == len(gpus_of) - 1
        branch = ("`" if last else "|") if ascii_ else ("└" if last else "├")
        hist = rows.shown.history.get(g.key, ()) if rows.shown else ()
        label = Fitted(f" {branch} {gpu_cell(g)} {short_uuid(g.uuid)}".rstrip(), style="dim", no_wrap=True)
        flags = fitted(flags_cell(look, g))
        spark = fitted(spark_cell(look, hist, 8))
        if narrow:
            out[("gpu", *g.key)] = (label, empty, flags, empty, util_cell(look, g.util, "ok", 3), empty, spark,
                                    holder_cell(look, g))
        else:
            model = short_model(g.model) + (f" {g.mig_profile}" if g.mig_profile else "")
            mem = Text("-" if g.mem_used is None else mib(g.mem_used), justify="right")
            out[("gpu", *g.key)] = (label, empty, Fitted(clean(model, limit=60), no_wrap=True), flags, empty,
                                    util_cell(look, g.util), mem, empty, spark, holder_cell(look, g))
    if not gpus_of:
        what = "reading its GPUs…" if rows.shown is None else "no DCGM series for this node"
        branch = "`" if ascii_ else "└"
        cells = [Fitted(f" {branch} GPUs", style="dim", no_wrap=True), *(empty for _ in range(6 if narrow else 8))]
        out[("gpu", node, -1, "")] = (*cells, Text(what, style="dim", no_wrap=True))
    return out


def fitted(t: Text) -> Fitted:
    """`t` as a `Fitted` cell (its spans and style kept)."""
    f = Fitted(t.plain, style=t.style, no_wrap=True, justify=t.justify)
    f.spans = list(t.spans)
    return f
