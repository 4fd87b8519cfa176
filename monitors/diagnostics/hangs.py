"""Hangs and stragglers (#15): per rank, seconds since its last log line and its GPU utilisation;
ranks silent or idle while their peers are busy, slow ranks, and whole-job hangs.

    health = assess_all(model, now, Thresholds(hang_after=600))     # {workload key: JobHealth}
    h = health[key]
    h.hung, h.hung_for, h.marker ("hung" / "straggler" / ""), h.summary, h.to_json()
    for r in h.flagged: r.label, r.flags ("silent", "idle", "straggler"), r.why (a sentence each)

A pure function of what `monitors.model.LiveModel` already holds: the workload views (status, ranks
with their current GPU reading and last log time), the per-pod GPU history (`LiveModel.gpu_history`,
(time, %) pairs, one per metrics refresh, only ``ok`` readings, time-ordered) and the last log time
per pod (`LiveModel.last_log`, fresher than the views' copy). No request of its own. O(ranks) per
workload: a history is scanned from its newest end, and only for a GPU that reads idle now.

What is assessed: Running and Degraded workloads that are not interactive sessions (an idle
session is `monitors.diagnostics.idle`'s business). Ranks taken into account are Running; rank
flags are only given to ready ones (a crashing rank is `why`'s business). An unknown figure never
flags: a GPU without a current ``ok`` reading or without history, a rank whose log is not followed
(`last_log` None: the model knows it only for workloads whose logs a view follows).

Peers: the other ranks of the workload that do the same work, i.e. not a launcher, parameter server
or evaluator (an MPI launcher carries every rank's output; a PS logs little and works little).
GPU comparisons take only peers holding GPUs. A rank needs at least one peer with a known figure
to be compared, so only workloads of two ranks or more can have flagged ranks.

Rules (thresholds in `Thresholds`):

* idle: its GPU reads under `idle_util` while the median of its peers' is over `busy_util`;
* silent: no log line for over `silent_after` while its peers' median silence is under a quarter of it;
* straggler: with `progress` (rank label -> steps per second, from the log progress, another
  module's), under 0.7x the median of its peers' rates; without a rate for it, its GPU under 0.6x
  its peers' median while they are busy (and it is not idle);
* hung (the workload; Running only): every GPU-holding rank's GPU idle for over `hang_after` (from
  the history: since its last reading at or above `idle_util`; when the history holds none, since
  its oldest reading, so a history not reaching back that far says "not yet": with 240 samples at
  the dashboard's 5 s refresh, 20 minutes), and every rank with a known last log line silent for
  over `hang_after`. Ranks whose log is unknown do not veto; the summary says whether logs
  confirmed it. A workload without any GPU-holding rank is never called hung.

Texts are raw cluster text (rank labels): printers sanitise them; `to_json` does.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from monitors.humanize import age
from monitors.sanitize import clean

if TYPE_CHECKING:
    from monitors.model import LiveModel
    from monitors.model_views import RankView, WorkloadView

__all__ = ["DEFAULT", "FLAGS", "JobHealth", "RankHealth", "Thresholds", "assess", "assess_all"]

PodKey = tuple[str, str]
WorkloadKey = tuple[str, str, str]
History = Mapping[PodKey, Sequence[tuple[float, float]]]
FLAGS = ("silent", "idle", "straggler")
ASSESSED = ("Running", "Degraded")
NOT_PEERS = frozenset({"launcher", "ps", "evaluator"})  # roles not compared with the workers
STRAGGLER_RATE = 0.7  # x the peers' median steps per second
STRAGGLER_UTIL = 0.6  # x the peers' median GPU utilisation
QUIET_AFTER = 30.0  # s: every GPU idle and every log silent this long is said (not yet a hang)


@dataclass(frozen=True)
class Thresholds:
    hang_after: float = 600.0  # s: every GPU idle and every known log silent this long = hung
    idle_util: float = 5.0  # %: a GPU under this is idle
    busy_util: float = 30.0  # %: peers' median over this = busy
    silent_after: float = 120.0  # s: silent this long while peers log within a quarter of it
    # where hang_after came from, said once in every verdict that uses it: "hang_after_minutes of
    # context ranks-sim", "hang_after_minutes in ~/.config/ranks/config.toml" (see tui.settings)
    source: str = ""

    def said(self) -> str:
        """`hung after 1m: hang_after_minutes of context ranks-sim`: the threshold and its source."""
        minutes = self.hang_after / 60  # (set in minutes: said in minutes, "1m" where `age` says "60s")
        said = f"{minutes:g}m" if minutes >= 1 and minutes.is_integer() else age(self.hang_after)
        return f"hung after {said}: {self.source or 'hang_after_minutes'}"


DEFAULT = Thresholds()


@dataclass(frozen=True, slots=True)  # (slots: 104 bytes a rank, not 336; a dashboard keeps one per rank)
class RankHealth:
    label: str
    pod: str
    silent_for: float | None  # s since its last log line; None: its log is not followed
    gpu_util: float | None  # % now; None: no current ok reading
    idle_for: float | None  # s its GPU has read under idle_util (from the history); None: not idle now
    flags: tuple[str, ...] = ()  # of FLAGS
    why: tuple[str, ...] = ()  # one sentence per flag, in the same order
    rate: float | None = None  # steps per second, when progress was given for it

    def to_json(self) -> dict[str, Any]:
        return {"label": clean(self.label), "pod": clean(self.pod), "silent_for": _secs(self.silent_for),
                "gpu_util": None if self.gpu_util is None else round(self.gpu_util, 1),
                "idle_for": _secs(self.idle_for),
                "steps_per_second": None if self.rate is None else round(self.rate, 4),
                "flags": [{"flag": f, "why": clean(w)} for f, w in zip(self.flags, self.why, strict=True)]}


@dataclass(frozen=True, slots=True)
class JobHealth:
    key: WorkloadKey
    hung: bool
    hung_for: float | None  # s, when hung: how long every GPU has been idle and every known log silent
    ranks: tuple[RankHealth, ...]
    summary: str  # one sentence
    logs_confirmed: bool = False  # hung, and at least one rank's log (all known ones) silent too
    # not hung (yet): every GPU under the idle mark now and every rank's log silent this long (s),
    # at least QUIET_AFTER; what a one-shot `ranks why` says rather than "nothing wrong"
    quiet_for: float | None = None

    @property
    def flagged(self) -> tuple[RankHealth, ...]:
        return tuple(r for r in self.ranks if r.flags)

    @property
    def ok(self) -> bool:
        return not self.hung and not any(r.flags for r in self.ranks)

    @property
    def headline(self) -> str:
        """A few words for a summary line whose sentences are said by the findings beside it
        (`hung for 3m`, `no progress for 2m`, `worker-2 straggler`): never the same sentence twice."""
        if self.hung:
            return f"hung for {age(self.hung_for)}"
        flagged = "; ".join(f"{r.label} {' and '.join(r.flags)}" for r in self.ranks if r.flags)
        if flagged:
            return flagged
        if self.quiet_for is not None:
            return f"no progress for {age(self.quiet_for)}"
        return self.summary

    @property
    def marker(self) -> str:
        """A short word for the workloads list: "hung", "straggler" (any flagged rank), or ""."""
        if self.hung:
            return "hung"
        return "straggler" if any(r.flags for r in self.ranks) else ""

    def to_json(self) -> dict[str, Any]:
        ns, kind, name = self.key
        return {"namespace": clean(ns), "kind": clean(kind), "name": clean(name), "hung": self.hung,
                "hung_for": _secs(self.hung_for), "logs_confirmed": self.logs_confirmed,
                "marker": self.marker, "summary": clean(self.summary),
                "ranks": [r.to_json() for r in self.ranks]}


def _secs(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def _pct(v: float) -> str:
    return f"{v:.0f}%"


def _rate(v: float) -> str:
    return f"{v:.3g} steps/s"


_new = object.__new__
_SET = tuple(RankHealth.__dict__[f].__set__ for f in ("label", "pod", "silent_for", "gpu_util", "idle_for", "flags",
                                                       "why", "rate"))
_set_label, _set_pod, _set_silent, _set_util, _set_idle, _set_flags, _set_why, _set_rate = _SET


def _rank_health(label: str, pod: str, silent_for: float | None, gpu_util: float | None, idle_for: float | None,
                 flags: tuple[str, ...], why: tuple[str, ...], rate: float | None) -> RankHealth:
    """`RankHealth(...)` without the frozen dataclass's per-field `object.__setattr__` (half the cost;
    a refresh builds one per rank of every workload): its slots set straight. Same object: the
    class has no __post_init__."""
    h = _new(RankHealth)
    _set_label(h, label)
    _set_pod(h, pod)
    _set_silent(h, silent_for)
    _set_util(h, gpu_util)
    _set_idle(h, idle_for)
    _set_flags(h, flags)
    _set_why(h, why)
    _set_rate(h, rate)
    return h


def _median_without(values: list[float], v: float) -> float | None:
    """The median of sorted `values` without one occurrence of `v` (which it holds). O(log n)."""
    n = len(values) - 1
    if n <= 0:
        return None
    i = bisect_left(values, v)
    h = n // 2
    a = values[h] if h < i else values[h + 1]
    if n % 2:
        return a
    k = h - 1
    return ((values[k] if k < i else values[k + 1]) + a) / 2


def _idle_since(hist: Sequence[tuple[float, float]], idle_util: float) -> float:
    """When the newest run of readings under `idle_util` began: the time of the last reading at or
    above it, or the oldest reading when none is. From the newest end (a plain loop is the fastest)."""
    for t, u in reversed(hist):
        if u >= idle_util:
            return t
    return hist[0][0]


def assess(wl: WorkloadView, history: History, now: float, th: Thresholds = DEFAULT,
           progress: Mapping[str, float] | None = None, *, last_log: Mapping[PodKey, float] | None = None,
           busy_at: Mapping[PodKey, float] | None = None) -> JobHealth:
    """One workload's health at `now`. `history`: pod -> time-ordered (time, %) GPU readings;
    `progress`: rank label -> steps per second; `last_log`: pod -> time of its last log line,
    fresher than the views' (the model's `last_log`), else the ranks' own `last_log`; `busy_at`:
    pod -> its latest reading at or above `th.idle_util` (the model keeps it as readings come:
    no history scan), else found in the history."""
    idle_util = th.idle_util
    ranks = wl.ranks
    n = len(ranks)
    silent: list[float | None] = [None] * n  # s since the last log line
    util: list[float | None] = [None] * n  # % now, known (ok, with history, GPUs held)
    idle: list[float | None] = [None] * n  # s under idle_util
    running: list[bool] = [False] * n
    seen = False
    for j, r in enumerate(ranks):
        pk = (r.namespace, r.pod)
        last = r.last_log
        if last_log is not None:
            fresh = last_log.get(pk)
            if fresh is not None and (last is None or fresh > last):
                last = fresh
        if last is not None:
            silent[j] = now - last if now > last else 0.0
            seen = True
        u = r.gpu_util
        if u is not None and r.gpu_state == "ok" and r.gpus > 0:
            hist = history.get(pk)
            if hist:
                util[j] = u
                seen = True
                if u < idle_util:
                    if hist[-1][1] >= idle_util:
                        since = now
                    elif busy_at is not None:
                        since = busy_at.get(pk, hist[0][0])
                    else:
                        since = _idle_since(hist, idle_util)
                    idle[j] = now - since if now > since else 0.0
        running[j] = r.phase == "Running"
    if wl.status not in ASSESSED or wl.interactive:
        health = tuple(_rank_health(r.label, r.pod, silent[j], util[j], idle[j], (), (), None)
                       for j, r in enumerate(ranks))
        why = "an interactive session (see idle sessions)" if wl.interactive else f"not assessed: {wl.status}"
        return JobHealth(wl.key, False, None, health, why)

    flags: dict[int, list[tuple[str, str]]] = {}
    rates: list[float | None] = [progress.get(r.label) for r in ranks] if progress else [None] * n
    if n >= 2:
        _flag_ranks(ranks, running, silent, util, idle, progress, rates, flags, th)

    # a whole-job hang
    hung, hung_for, confirmed, summary = False, None, False, ""
    quiet_for: float | None = None
    if wl.status == "Running":
        spans: list[float] = []
        for j, r in enumerate(ranks):
            if running[j] and r.gpus > 0 and r.node:
                x = idle[j]
                if x is None or x <= th.hang_after:
                    spans = []
                    break
                spans.append(x)
        live = [j for j in range(n) if running[j]]
        known = [x for j in live if (x := silent[j]) is not None]
        if spans:
            worst = min(spans + known)
            if worst > th.hang_after:
                hung, hung_for, confirmed = True, worst, bool(known)
                summary = _hang_summary(worst, len(known), len(live), th)
        elif live and len(known) == len(live) and min(known) > th.hang_after:
            # every log silent long enough and every GPU idle now, but no GPU history says since when
            # (a one-shot command without Prometheus): hung, on the logs' word
            gpu = [j for j, r in enumerate(ranks) if running[j] and r.gpus > 0 and r.node]
            if gpu and all((u := util[j]) is not None and u < th.idle_util for j in gpu):
                hung, hung_for, confirmed = True, min(known), True
                summary = (f"hung for {age(min(known))}: every rank's log silent that long and every GPU under "
                           f"{th.idle_util:g}% now (no GPU history says since when; {th.said()})")
        if not hung and live and len(known) == len(live):
            gpu = [j for j, r in enumerate(ranks) if running[j] and r.gpus > 0 and r.node]
            if gpu and all((u := util[j]) is not None and u < th.idle_util for j in gpu):
                quiet = min(known)
                quiet_for = quiet if quiet >= QUIET_AFTER else None

    health = tuple(_rank_health(r.label, r.pod, silent[j], util[j], idle[j], (), (), rates[j])
                   if (fl := flags.get(j)) is None else
                   _rank_health(r.label, r.pod, silent[j], util[j], idle[j], tuple(f for f, _ in fl),
                                tuple(w for _, w in fl), rates[j])
                   for j, r in enumerate(ranks))
    if not summary:
        if flags:
            summary = "; ".join(f"{h.label} {' and '.join(h.flags)}: {'; '.join(h.why)}" for h in health if h.flags)
        elif quiet_for is not None:
            summary = (f"no progress for {age(quiet_for)}: every GPU under {th.idle_util:g}% and every rank's "
                       f"log silent ({th.said()})")
        elif not seen:
            summary = "nothing to judge by yet: no GPU reading and no log followed"
        else:
            summary = "no hang or straggler seen"
    return JobHealth(wl.key, hung, hung_for, health, summary, confirmed, quiet_for)


def _hang_summary(for_s: float, known: int, live: int, th: Thresholds) -> str:
    head = f"hung for {age(for_s)}: every GPU under {th.idle_util:g}%"
    said = f" ({th.said()})"
    if known == live:
        return f"{head} and every rank's log silent that long{said}"
    if known:
        return (f"{head} that long; the logs of {known} of {live} ranks are silent as long (the others' are not "
                f"followed){said}")
    return (f"{head} that long; whether the ranks' logs are silent too is not known (no rank's log is "
            f"followed){said}")


def _flag_ranks(ranks: Sequence[RankView], running: list[bool], silent: list[float | None],
                util: list[float | None], idle: list[float | None], progress: Mapping[str, float] | None,
                rates: list[float | None], flags: dict[int, list[tuple[str, str]]], th: Thresholds) -> None:
    """Rank flags, in FLAGS order, into `flags` (rank index -> [(flag, why)]); `rates`: steps per
    second by rank index. Medians are taken only for ranks a cheap bound cannot clear."""
    peers = [j for j, r in enumerate(ranks) if running[j] and r.ready and r.role not in NOT_PEERS]
    if len(peers) < 2:
        return
    # silent
    s_vals = sorted(s for j in peers if (s := silent[j]) is not None)
    if len(s_vals) >= 2 and s_vals[-1] > th.silent_after:
        quiet = th.silent_after / 4
        for j in peers:
            s = silent[j]
            if s is not None and s > th.silent_after:
                med = _median_without(s_vals, s)
                if med is not None and med < quiet:
                    flags.setdefault(j, []).append(
                        ("silent", f"no log line for {age(s)} while its peers logged within {age(med)}"))
    # steps per second
    r_vals = sorted(x for j in peers if (x := rates[j]) is not None) if progress else []
    by_rate = len(r_vals) >= 2
    # idle, and stragglers by utilisation (ranks without a rate to compare)
    u_vals = sorted(u for j in peers if (u := util[j]) is not None)
    idle_ranks: set[int] = set()
    if len(u_vals) >= 2 and u_vals[-1] > th.busy_util:
        bound = max(th.idle_util, STRAGGLER_UTIL * u_vals[-1])  # no rank at or above it can be flagged
        for j in peers:
            u = util[j]
            if u is None or u >= bound:
                continue
            med = _median_without(u_vals, u)
            if med is None or med <= th.busy_util:
                continue
            if u < th.idle_util:
                x = idle[j]
                spell = f" for {age(x)}" if x else ""
                flags.setdefault(j, []).append(("idle", f"GPU at {_pct(u)}{spell} while its peers' run at {_pct(med)}"))
                idle_ranks.add(j)
            elif u < STRAGGLER_UTIL * med and not (by_rate and rates[j] is not None):
                flags.setdefault(j, []).append(("straggler", f"GPU at {_pct(u)} against its peers' {_pct(med)}"))
    # stragglers by progress
    if by_rate:
        bound = STRAGGLER_RATE * r_vals[-1]
        for j in peers:
            rate = rates[j]
            if rate is None or rate >= bound or j in idle_ranks:
                continue
            med = _median_without(r_vals, rate)
            if med is not None and med > 0 and rate < STRAGGLER_RATE * med:
                slower = f"{med / rate:.1f}x slower" if rate > 0 else "no progress"
                flags.setdefault(j, []).append(("straggler", f"{_rate(rate)} against its peers' {_rate(med)} ({slower})"))


def assess_all(model: LiveModel, now: float, th: Thresholds = DEFAULT,
               progress_of: Callable[[WorkloadKey], Mapping[str, float] | None] | None = None,
               timeless: dict[WorkloadKey, tuple[WorkloadView, JobHealth]] | None = None,
               ) -> dict[WorkloadKey, JobHealth]:
    """Every Running or Degraded workload of `model` that is not an interactive session, by key.
    `progress_of(key)`: rank label -> steps per second for the workloads whose progress is known.
    `timeless`: the caller's memo of verdicts that time cannot change (no log followed, no GPU
    reading, no progress: "nothing to judge by yet"), reused while the workload's view is the same
    and none of its ranks has logged since; on a large cluster without metrics that is nearly
    every job. Reads the model only; call it on the thread that owns the model."""
    history, last_log = model.gpu_history, model.last_log
    busy_at = model.busy_at if getattr(model, "busy_threshold", None) == th.idle_util else None
    out: dict[WorkloadKey, JobHealth] = {}
    for key, wl in model.workloads.items():
        if wl.status not in ASSESSED or wl.interactive:
            continue
        progress = progress_of(key) if progress_of else None
        if timeless is not None and not progress:
            memo = timeless.get(key)
            if (memo is not None and memo[0] is wl
                    and not (last_log and any((r.namespace, r.pod) in last_log for r in wl.ranks))):
                out[key] = memo[1]
                continue
        out[key] = h = assess(wl, history, now, th, progress, last_log=last_log, busy_at=busy_at)
        if timeless is not None:
            if not progress and all(r.silent_for is None and r.gpu_util is None for r in h.ranks):
                timeless[key] = (wl, h)
            else:
                timeless.pop(key, None)
    if timeless is not None:
        for key in timeless.keys() - out.keys():
            del timeless[key]
    return out
