"""Table cells and header text as `rich.text.Text`, styled from the theme, never parsed as markup.

Every string that came from the cluster goes through `monitors.sanitize.clean` first.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.style import Style
from rich.text import Text

from monitors.humanize import age, gpus, mib, percent
from monitors.model_views import NodeView, ProjectView, RankView, WorkloadView
from monitors.sanitize import clean
from themes import GlyphSet, Theme, bar, phase_style, rank_colour, rich_colour, sparkline, util_colour
from themes.model import ColourMode

UTIL_BAR = 5
Cells = tuple[Text, ...]
SPARK = 12


@dataclass(frozen=True)
class Look:
    """The theme (resolved for the terminal's colour mode) and the glyph set in use."""

    theme: Theme
    glyphs: GlyphSet

    @property
    def mono(self) -> bool:
        return self.theme.mode is ColourMode.MONO

    def colour(self, colour: str) -> Style:
        if self.mono:
            return Style()
        return Style(color=rich_colour(colour))

    def status_style(self, status: str) -> Style:
        return Style.parse(_rich_style(phase_style(self.theme, status)))

    def util_style(self, pct: float | None) -> Style:
        return self.colour(util_colour(self.theme, pct))

    def rank_style(self, index: int) -> Style:
        return self.colour(rank_colour(self.theme, index))


def _rich_style(style: str) -> str:
    return " ".join(rich_colour(w) if w.startswith("ansi_") else w for w in style.split()) or "none"


def plain(value: object, limit: int | None = 256) -> Text:
    return Text(clean(value, limit=limit), no_wrap=True, overflow="ellipsis")


def status_cell(look: Look, status: str, reason: str = "") -> Text:
    marker = look.glyphs.phase_marker(status)
    t = Text(f"{marker} {clean(status, limit=40)}", style=look.status_style(status), no_wrap=True,
             overflow="ellipsis")
    if reason and reason != status:
        t.append(f" {clean(reason, limit=80)}", style="dim")
    return t


def util_cell(look: Look, pct: float | None, state: str = "ok", width: int = UTIL_BAR) -> Text:
    """`▇▇▂   42%` — a bar and the number; no value is shown as its state (never as 0)."""
    if pct is None:
        label = STATE_LABELS.get(state, state)
        return Text(f"{label:>{width + 5}}", style="dim", no_wrap=True)
    t = bar_text(look, pct / 100.0, width, look.util_style(pct))
    t.append(f" {percent(pct):>4}")
    if state == "stale":
        t.append(" stale", style="dim")
    return t


STATE_LABELS = {"ok": "-", "unknown": "-", "no data": "no data", "unavailable": "n/a", "stale": "stale",
                "no GPU": "-"}


def spark_cell(look: Look, history: Iterable[float], width: int = SPARK) -> Text:
    values = list(history)[-width:]
    if not values:
        return Text("")
    t = Text(no_wrap=True)
    for v, ch in zip(values, sparkline(look.glyphs, values), strict=True):
        t.append(ch, style=look.util_style(v))
    return t


def age_cell(created: float | None, now: float | None = None) -> Text:
    """An age as the dashboard shows it (kept current by the app's age ticker: `RanksApp.ages_shown`)."""
    if created is None:
        return Text("-")
    return Text(age((now or time.time()) - created, live=True), no_wrap=True)


def gpu_pair(requested: float, allocated: float) -> Text:
    if requested == allocated:
        return Text(gpus(requested))
    return Text(f"{gpus(allocated)}/{gpus(requested)}")


def track(look: Look, text: str) -> Text:
    """A bar's unused part as a visible dim track (a blank track hides the bar's length)."""
    dot = "·" if look.glyphs.name != "ascii" else "."
    return Text(text.replace(" ", dot), style="dim")


def bar_text(look: Look, fraction: float | None, width: int, style: Style | str) -> Text:
    s = bar(look.glyphs, fraction, width)
    used = s.rstrip(look.glyphs.bar_empty) if look.glyphs.bar_empty == " " else s
    t = Text(used, style=style, no_wrap=True)
    if len(used) < width:
        t.append_text(track(look, " " * (width - len(used))))
    return t


def quota_cell(look: Look, allocated: float, quota: float | None, width: int = 6, numbers: int = 5) -> Text:
    """`███▌  10/16`: a bar of `width` cells and `allocated/quota` right-aligned in `numbers`."""
    if not quota:
        return Text(f"{'':{width}} {gpus(allocated) + '/-':>{numbers}}", no_wrap=True)
    frac = allocated / quota
    style = look.status_style("Failed") if frac > 1 else look.util_style(min(frac * 100, 100))
    t = bar_text(look, frac, width, style)
    t.append(f" {gpus(allocated) + '/' + gpus(quota):>{numbers}}")
    return t


# -- rows ---------------------------------------------------------------------------------------

def project_row(look: Look, p: ProjectView) -> tuple[Text, ...]:
    return (
        plain(p.name, 63),
        plain(p.namespace, 63),
        Text(gpus(p.gpu_quota) if p.gpu_quota is not None else "-", justify="right"),
        quota_cell(look, p.gpus_allocated, p.gpu_quota),
        util_cell(look, p.gpu_util, "ok" if p.gpu_util is not None else "unknown"),
        Text(str(p.running), justify="right"),
        Text(str(p.pending), justify="right", style=look.status_style("Pending") if p.pending else ""),
    )


KIND_SHORT = {
    "PyTorchJob": "pytorch", "TFJob": "tf", "MPIJob": "mpi", "XGBoostJob": "xgboost", "JAXJob": "jax",
    "PaddleJob": "paddle", "TrainJob": "trainjob", "JobSet": "jobset", "DistributedWorkload": "runai", "Job": "job",
}


def kind_text(w: WorkloadView) -> str:
    """pytorch, mpi, tf, xgboost... (TrainJob/JobSet add their framework: trainjob/torch)."""
    short = KIND_SHORT.get(w.kind, w.kind.lower())
    if w.framework and w.framework.lower() not in (short, w.kind.lower()) and w.kind in ("TrainJob", "JobSet",
                                                                                         "DistributedWorkload"):
        short += f"/{w.framework.lower()}"
    return clean(short, limit=40)


def workload_reason(w: WorkloadView) -> str:
    """The reason worth a list cell: why it is pending or degraded, which rank failed first."""
    if w.status == "Failed" and w.first_failure is not None:
        return f"{w.first_failure.label} exit {w.first_failure.exit_code}"
    if w.status in ("Succeeded", "Running", "Failed", "Completed"):
        return ""
    return w.reason


def health_note(h: Any) -> str:
    """`hung 12m`, `straggler worker-2`, `silent worker-1`: a job's health in a few words."""
    if h is None or h.ok:
        return ""
    if h.hung:
        return "hung" + (f" {age(h.hung_for)}" if h.hung_for else "")
    r = h.flagged[0] if h.flagged else None
    return f"{r.flags[0]} {clean(r.label, limit=20)}" if r is not None and r.flags else h.marker


def workload_row(look: Look, w: WorkloadView, *, show_project: bool, now: float,
                 util_width: int = UTIL_BAR, health: Any = None) -> tuple[Text, ...]:
    ready = Text(f"{w.ranks_ready}/{w.ranks_total}", justify="right",
                 style="" if w.ranks_ready == w.ranks_total else "dim")
    flagged = health is not None and not health.ok
    mark, mark_style = f"{look.glyphs.warning} {health_note(health)}", f"bold {look.status_style('Degraded')}"
    if flagged and w.status == "Running":  # (hung and straggler say it runs: the mark alone, as narrow as it gets)
        status = Text(mark, style=mark_style, no_wrap=True, overflow="ellipsis")
    else:
        held = None
        if not flagged and w.status in ("Failed", "Succeeded"):  # its ranks still run on GPUs: `holds 2 GPUs`
            from monitors.diagnostics.leftovers import still_held

            held = still_held(w)
        # (what to do first, in a narrow column: the held GPUs rather than the reason, which the detail gives)
        status = status_cell(look, w.status, "" if flagged or held is not None else workload_reason(w))
        if flagged:
            status.append(f" {mark}", style=mark_style)
        elif held is not None:
            status.append(f" {look.glyphs.warning} {held.mark}", style=mark_style)
    cells = [
        plain(w.name, 253),
        Text(kind_text(w), no_wrap=True, overflow="ellipsis"),
        status,
        Text(look.glyphs.bullet if w.interactive else "", justify="center"),
        ready,
        gpu_pair(w.gpus_requested, w.gpus_allocated),
        util_cell(look, w.gpu_util, "ok" if w.gpu_util is not None else "unknown", util_width),
        age_cell(w.created, now),
    ]
    if show_project:
        cells.insert(1, plain(w.project, 63))
    return tuple(cells)


RANK_FLAG_WORDS = {"straggler": "slow", "silent": "silent", "idle": "idle"}


def gpu_health_words(r: RankView) -> list[str]:
    """A rank's GPU health, short: ``XID 79``, ``throttled sw_thermal``."""
    words = [f"XID {r.gpu_xid}"] if r.gpu_xid else []
    if r.gpu_throttle:
        words.append("throttled " + ",".join(r.gpu_throttle))
    return words


def rank_row(look: Look, r: RankView, index: int, history: Iterable[float], *, with_pod: bool = True,
             spark: int = SPARK, progress: Mapping[str, Any] | None = None, flags: Sequence[str] = (),
             with_progress: bool = False) -> tuple[Text, ...]:
    """One rank of the detail table; `flags` (silent, idle, straggler) highlight it; `progress`
    (the rank's training progress from its log: step, loss, and the loss history) fills STEP and
    LOSS when `with_progress`."""
    flagged = look.status_style("Degraded") if flags else None
    label = Text(("" if not r.lead else look.glyphs.lead + " ") + clean(r.label, limit=40),
                 style=f"bold {flagged}" if flagged else look.rank_style(index), no_wrap=True)
    mem = "-"
    if r.gpu_mem_used_mib is not None:
        mem = mib(r.gpu_mem_used_mib) + (f"/{mib(r.gpu_mem_total_mib)}" if r.gpu_mem_total_mib else "")
    status = status_cell(look, r.status, "" if r.exit_code is None else str(r.exit_code))
    if flags:  # (short: the panel above says why)
        status.append(f" {look.glyphs.warning} " + " ".join(RANK_FLAG_WORDS.get(f, f) for f in flags),
                      style=f"bold {flagged}")
    if r.gpu_xid or r.gpu_throttle:  # its GPUs' health (`ranks why` says which GPU, and when)
        status.append(f" {look.glyphs.warning} " + " ".join(gpu_health_words(r)), style=look.status_style("Failed")
                      if r.gpu_xid else look.status_style("Degraded"))
    cells = [
        label,
        Text("-" if r.rank is None else str(r.rank), justify="right"),
        plain(r.pod, 253),
        status,
        Text(str(r.restarts), justify="right", style=look.status_style("Failed") if r.restarts else ""),
        plain(r.node or "-", 253),
        util_cell(look, r.gpu_util, r.gpu_state if r.gpus > 0 else "no GPU"),
        spark_cell(look, history, spark),
        Text(mem, no_wrap=True),
    ]
    if with_progress:
        cells += progress_cells(look, progress)
    if not with_pod:
        del cells[2]
    return tuple(cells)


def progress_cells(look: Look, p: Mapping[str, Any] | None) -> list[Text]:
    """STEP (the latest step) and LOSS (the latest value, then its history as a sparkline scaled to
    its own range)."""
    if not p:
        return [Text("-", justify="right"), Text("-")]
    step = Text("-" if p.get("step") is None else str(p["step"]), justify="right", no_wrap=True)
    values = [v for v in p.get("spark") or () if v is not None][-5:]
    loss = Text(no_wrap=True)
    if p.get("loss") is not None:
        loss.append(f"{p['loss']:.4g} ")
    elif p.get("throughput") is not None:
        loss.append(f"{p['throughput']:.4g}{clean(p.get('unit') or '', limit=12)} ")
    if values:
        lo, hi = min(values), max(values)
        loss.append(sparkline(look.glyphs, values, lo, hi if hi > lo else lo + 1), style="dim")
    return [step, loss or Text("-")]


def node_row(look: Look, n: NodeView, *, narrow: bool = False) -> tuple[Text, ...]:
    state = "Ready" if n.ready else "NotReady"
    if n.unschedulable:
        state += ",NoSchedule"
    product = (n.product or "-").removeprefix("NVIDIA-")
    cells = [
        plain(n.name, 253),
        plain(n.pool or "-", 63),
        plain(product, 63),
        Text(state, style=look.status_style("Running" if n.ready and not n.unschedulable else "Failed"),
             no_wrap=True),
        quota_cell(look, n.gpus_allocated, n.gpus or None, width=4 if narrow else 6),
        util_cell(look, n.gpu_util, "ok" if n.gpu_util is not None else "unknown", 3 if narrow else UTIL_BAR),
        Text(mib(n.gpu_mem_used_mib), justify="right"),
        Text(str(n.pods), justify="right"),
    ]
    if narrow:
        del cells[6]
        del cells[2]
    return tuple(cells)
