"""Rank diagnostics for the one-shot commands (`ranks get`, `ranks why`): each running rank's last
lines read once (when it last wrote, and its training progress), then hangs and stragglers judged
on them and on the GPU history the metrics read brought (`monitors.diagnostics`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from monitors.connection import ExitCode

from .errors import UserError

if TYPE_CHECKING:
    from monitors.diagnostics.hangs import JobHealth, Thresholds
    from monitors.diagnostics.progress import ProgressBoard
    from monitors.logs.tails import Tail
    from monitors.model_views import WorkloadView
    from monitors.monitor import Monitor


@dataclass
class RankDiagnostics:
    board: ProgressBoard
    tails: dict[str, Tail] = field(default_factory=dict)
    health: JobHealth | None = None  # None: not a running training job (or nothing to judge)
    failure_lines: tuple[str, ...] | None = None  # the first failure's last lines, when its log was read
    failure_note: str = ""  # why they could not be read

    def last_at(self, label: str) -> float | None:
        t = self.tails.get(label)
        return t.last_at if t is not None else None

    def progress(self, label: str) -> dict[str, Any] | None:
        return self.board.summary().get(label)


def configured(cfg: Any = None) -> tuple[Thresholds, list[str]]:
    """(the hang threshold and where it came from; the user's progress patterns): the configuration
    file's, else the kubeconfig context's (`cfg`), else the defaults, as the dashboard judges."""
    from themes import ConfigFileError
    from tui.settings import hang_thresholds, load_settings

    try:
        s = load_settings()
        return hang_thresholds(s, cfg), list(s.progress_patterns)
    except ConfigFileError as exc:
        raise UserError(str(exc).splitlines()[0] if str(exc) else "invalid configuration",
                        ExitCode.NO_CONFIG) from None


async def read_tails(monitor: Monitor, wl: WorkloadView) -> RankDiagnostics:
    """Each running rank's last lines, read at once (alongside the GPU metrics read: no round
    trip of its own), through the progress patterns; the last-log times go into the model."""
    from monitors.diagnostics.progress import ProgressBoard, compile_patterns
    from monitors.logs.tails import rank_tails

    _, patterns = configured(monitor.cfg)
    out = RankDiagnostics(ProgressBoard(tuple(compile_patterns(patterns))))
    if wl.status not in ("Running", "Degraded", "Restarting", "Failed", "Succeeded"):
        return out
    import asyncio

    out.tails, (out.failure_lines, out.failure_note) = await asyncio.gather(
        rank_tails(monitor.client, wl, lines=50), failure_log(monitor, wl))
    for label, tail in out.tails.items():
        for t, text in tail.lines:
            out.board.feed(label, t, text)
        if tail.last_at is not None:
            monitor.model.last_log[(wl.namespace, tail.pod)] = tail.last_at
    return out


async def failure_log(monitor: Monitor, wl: WorkloadView, lines: int = 10) -> tuple[tuple[str, ...] | None, str]:
    """The last lines of the first failure's container instance when it is not the current one
    (restarted once since: the previous instance; the current one is among the rank tails), read
    alongside them; more restarts since: that instance's log is no longer kept."""
    from monitors import api_paths
    from monitors.kube import ApiProblem
    from monitors.logs.lines import split_record
    from monitors.logs.terminal_text import sanitize_line

    f = wl.first_failure
    rank = next((r for r in wl.ranks if f is not None and r.pod == f.pod), None)
    if f is None or rank is None or rank.restarts == 0:
        return None, ""
    if rank.restarts > 1:
        return None, "the container restarted since it failed; the failed instance's log is no longer kept"
    params = [("container", f.container), ("timestamps", "true"), ("tailLines", str(lines)), ("previous", "true")]
    try:
        raw = await monitor.client.request("GET", api_paths.pod(wl.namespace, f.pod, "log"), params=params)
    except ApiProblem as exc:
        return None, exc.one_line()
    except Exception as exc:  # (a lost connection)
        return None, str(exc) or type(exc).__name__
    out = tuple(sanitize_line(split_record(part)[1]).text for part in raw.split(b"\n") if part)
    return out[-lines:], "" if out else "the failed instance wrote no log lines"


def judge(monitor: Monitor, wl: WorkloadView, diag: RankDiagnostics) -> RankDiagnostics:
    """Hangs and stragglers, once the GPU readings (and Prometheus' history) are in the model."""
    from monitors.diagnostics.hangs import assess

    if wl.status in ("Running", "Degraded") and not wl.interactive:
        thresholds, _ = configured(monitor.cfg)
        rates = {label: r for label, rp in diag.board.ranks.items() if (r := rp.rate()) is not None}
        diag.health = assess(wl, monitor.model.gpu_history, time.time(), thresholds,
                             rates or None, last_log=monitor.model.last_log)
    return diag


async def located_with_tails(cfg: Any, opts: dict[str, Any], ref: str, project: str | None, *,
                             events: bool = False, nodes: bool = False, alone: bool = False
                             ) -> tuple[Monitor, WorkloadView, RankDiagnostics]:
    """`loading.locate` (with GPU metrics; `alone`: the workload read alone where that is
    conclusive), the workload's rank tails read alongside the metrics, then judged: one round trip
    more than listing alone, none more than `ranks get` always took."""
    from sessions.locate import pick_workload

    from .loading import locate

    found: dict[str, RankDiagnostics] = {}

    async def alongside(monitor: Monitor) -> None:
        try:
            wl = pick_workload(monitor.model.workloads.values(), ref)
        except Exception:  # (not here: locate says so, or looks elsewhere)
            return
        found[wl.name] = await read_tails(monitor, wl)

    monitor, wl = await locate(cfg, opts, ref, project, events=events, nodes=nodes, metrics=True,
                               alongside=alongside, failures=True, alone=alone)
    diag = found.get(wl.name) or await read_tails(monitor, wl)
    return monitor, wl, judge(monitor, wl, diag)


def with_health(d: Any, health: JobHealth | None) -> Any:
    """The diagnosis with the job's hang and its flagged ranks added as findings (`hang`, then
    `straggler`/`silent`/`idle` per rank; `quiet`: every GPU idle and every log silent, not a hang
    yet), the summary led by them when nothing else was wrong."""
    import dataclasses

    from monitors.diagnostics.why import Finding

    if health is None or (health.ok and health.quiet_for is None):
        return d
    found = []
    if health.ok:  # not hung yet, but nothing moves: said, with when it will be called a hang
        found.append(Finding("quiet", health.summary))
    if health.hung:
        found.append(Finding("hang", health.summary))
    for r in health.flagged:
        for flag, why in zip(r.flags, r.why, strict=False):
            found.append(Finding(flag, f"{r.label}: {why}"))
    # (the sentences are the findings': the summary line says it in a few words, never again whole)
    summary = health.headline if d.ok else d.summary
    return dataclasses.replace(d, findings=(*d.findings, *found), summary=summary)
