"""Hangs and stragglers (#15): `monitors.diagnostics.hangs` over views and histories built by hand,
shapes mirroring simcluster's demo jobs, and once through a LiveModel."""

from __future__ import annotations

import calendar
import json
import time
from collections import deque
from dataclasses import replace
from typing import Any

import pytest

from monitors.diagnostics.hangs import (
    DEFAULT,
    JobHealth,
    RankHealth,
    Thresholds,
    _median_without,
    _rank_health,
    assess,
    assess_all,
)
from monitors.model import GpuReading, LiveModel
from monitors.model_views import RankView, WorkloadView
from monitors.parse import parse_job, parse_namespace, parse_pod
from tests.kubeflow_objects import job, pod

NS = "runai-team-b"
NOW = 1_800_000_000.0
STEP = 5.0  # s between GPU samples (the dashboard's refresh)
PodKey = tuple[str, str]


def rank(label: str, *, util: float | None = 80.0, state: str = "ok", last_log: float | None = NOW - 1,
         gpus: float = 1.0, role: str | None = None, phase: str = "Running", ready: bool = True,
         name: str = "train") -> RankView:
    role = role or label.rsplit("-", 1)[0]
    return RankView(
        namespace=NS, pod=f"{name}-{label}", role=role, rank=None, replica_index=0, label=label, phase=phase,
        reason="", message="", restarts=0, ready=ready, node="node-1" if phase != "Pending" else "", pod_ip="",
        gpus=gpus, lead=role in ("master", "launcher", "chief"), created=NOW - 7200, gpu_util=util,
        gpu_state=state, last_log=last_log,
    )


def workload(name: str, ranks: list[RankView], *, status: str = "Running", interactive: bool = False,
             kind: str = "PyTorchJob") -> WorkloadView:
    return WorkloadView(
        namespace=NS, name=name, project="team-b", kind=kind, framework="pytorch", status=status, reason="",
        interactive=interactive, ranks_ready=len(ranks), ranks_total=len(ranks), gpus_requested=len(ranks),
        gpus_allocated=len(ranks), gpu_util=None, created=NOW - 7200, user="bob", command="python train.py",
        conditions=(), labels=(), ranks=tuple(ranks), first_failure=None,
    )


def series(*spans: tuple[float, float], end: float = NOW) -> deque[tuple[float, float]]:
    """GPU samples every STEP s ending at `end`: spans of (util %, seconds), oldest first."""
    utils: list[float] = []
    for util, secs in spans:
        utils += [util] * int(secs / STEP)
    return deque(((end - (len(utils) - 1 - i) * STEP, u) for i, u in enumerate(utils)), maxlen=240)


def hist_for(wl: WorkloadView, *spans: tuple[float, float]) -> dict[PodKey, deque[tuple[float, float]]]:
    """The same history for every GPU rank of `wl`."""
    return {(r.namespace, r.pod): series(*spans) for r in wl.ranks if r.gpus > 0}


def steady(wl: WorkloadView, secs: float = 1200) -> dict[PodKey, deque[tuple[float, float]]]:
    """Each GPU rank's history at its current reading for `secs`."""
    return {(r.namespace, r.pod): series((r.gpu_util or 0.0, secs)) for r in wl.ranks if r.gpus > 0}


def flags(h: JobHealth) -> dict[str, tuple[str, ...]]:
    return {r.label: r.flags for r in h.flagged}


# -- whole-job hangs ---------------------------------------------------------------------------

def hung_job(last_log: float | None = NOW - 900, name: str = "train") -> WorkloadView:
    return workload(name, [rank("master-0", util=0.0, last_log=last_log, name=name),
                           rank("worker-0", util=0.0, last_log=last_log, name=name)])


def test_a_job_idle_and_silent_longer_than_n_is_hung_and_n_decides() -> None:
    wl = hung_job()
    hist = hist_for(wl, (90.0, 1200), (0.0, 900))  # busy for 20 min, then idle for 15
    h = assess(wl, hist, NOW, Thresholds(hang_after=600))
    assert h.hung and h.marker == "hung" and h.logs_confirmed
    assert h.hung_for == pytest.approx(900, abs=STEP)
    assert h.summary == ("hung for 15m: every GPU under 5% and every rank's log silent that long "
                         "(hung after 10m: hang_after_minutes)")
    assert h.headline == "hung for 15m"
    said = assess(wl, hist, NOW, Thresholds(hang_after=600, source="hang_after_minutes of context ranks-demo"))
    assert said.summary.endswith("(hung after 10m: hang_after_minutes of context ranks-demo)")
    assert all(r.idle_for == pytest.approx(900, abs=STEP) and r.silent_for == 900 for r in h.ranks)
    assert not h.ok
    # N longer than the spell: not hung
    later = assess(wl, hist, NOW, Thresholds(hang_after=1200))
    assert not later.hung and later.hung_for is None and later.marker == ""
    # the silence is the shorter: it decides
    assert not assess(hung_job(last_log=NOW - 300), hist, NOW, Thresholds(hang_after=600)).hung


def test_a_job_idle_but_still_logging_is_not_hung() -> None:
    wl = hung_job(last_log=NOW - 2)
    h = assess(wl, hist_for(wl, (90.0, 600), (0.0, 900)), NOW, Thresholds(hang_after=600))
    assert not h.hung and h.marker == "" and h.ok
    assert h.summary == "no hang or straggler seen"


def test_idle_and_silent_but_not_for_n_yet_is_said_as_no_progress_not_nothing() -> None:
    # `ranks why` on a job that stalled 5 minutes ago, with hangs called after 10: "no progress
    # for 5m", with the threshold it waits for, rather than "nothing wrong"; the list marks nothing
    wl = hung_job(last_log=NOW - 300)
    for hist in (hist_for(wl, (90.0, 600), (0.0, 300)), hist_for(wl, (0.0, STEP))):  # a history, one reading
        h = assess(wl, hist, NOW, Thresholds(hang_after=600))
        assert not h.hung and h.ok and h.marker == ""
        assert h.quiet_for == 300
        assert h.summary == ("no progress for 5m: every GPU under 5% and every rank's log silent "
                             "(hung after 10m: hang_after_minutes)")
        assert h.headline == "no progress for 5m"
    # one rank still logging, a GPU still busy, or a pause shorter than 30 s: nothing said
    for other in (workload("t", [rank("master-0", util=0.0, last_log=NOW - 300, name="t"),
                                 rank("worker-0", util=0.0, last_log=NOW - 2, name="t")]),
                  workload("t", [rank("master-0", util=0.0, last_log=NOW - 300, name="t"),
                                 rank("worker-0", util=80.0, last_log=NOW - 300, name="t")]),
                  hung_job(last_log=NOW - 10)):
        h = assess(other, steady(other), NOW)
        assert h.quiet_for is None and "no progress" not in h.summary


def test_one_rank_still_logging_vetoes_a_hang() -> None:
    wl = workload("train", [rank("master-0", util=0.0, last_log=NOW - 900),
                            rank("worker-0", util=0.0, last_log=NOW - 3)])
    assert not assess(wl, hist_for(wl, (90.0, 600), (0.0, 900)), NOW).hung


def test_one_gpu_still_busy_vetoes_a_hang() -> None:
    wl = workload("train", [rank("master-0", util=0.0, last_log=NOW - 900),
                            rank("worker-0", util=60.0, last_log=NOW - 900)])
    hist = hist_for(wl, (90.0, 600), (0.0, 900))
    hist[(NS, "train-worker-0")] = series((60.0, 1500))
    assert not assess(wl, hist, NOW).hung


def test_unknown_logs_do_not_veto_and_the_summary_says_so() -> None:
    wl = hung_job(last_log=None)
    h = assess(wl, hist_for(wl, (90.0, 600), (0.0, 900)), NOW, Thresholds(hang_after=600))
    assert h.hung and not h.logs_confirmed
    assert "whether the ranks' logs are silent too is not known (no rank's log is followed)" in h.summary
    part = workload("train", [rank("master-0", util=0.0, last_log=NOW - 900), rank("worker-0", util=0.0, last_log=None)])
    h = assess(part, hist_for(part, (90.0, 600), (0.0, 900)), NOW, Thresholds(hang_after=600))
    assert h.hung and h.logs_confirmed and "the logs of 1 of 2 ranks are silent as long" in h.summary


def test_a_history_not_reaching_back_n_says_not_yet_unless_every_log_is_silent_that_long() -> None:
    wl = hung_job(last_log=None)
    # idle over its whole history, which holds only 5 minutes, and no log followed: not yet
    h = assess(wl, hist_for(wl, (0.0, 300)), NOW, Thresholds(hang_after=600))
    assert not h.hung
    assert all(r.idle_for == pytest.approx(300 - STEP) for r in h.ranks)
    # the same, reaching back 15 minutes: hung
    assert assess(wl, hist_for(wl, (0.0, 900)), NOW, Thresholds(hang_after=600)).hung
    # every log silent for 15 minutes and every GPU idle now (a one-shot read without Prometheus'
    # history): hung on the logs' word, and it says the GPUs' idle time is not known
    silent = hung_job(last_log=NOW - 900)
    h = assess(silent, hist_for(silent, (0.0, STEP)), NOW, Thresholds(hang_after=600))
    assert h.hung and h.logs_confirmed and h.hung_for == pytest.approx(900)
    assert "no GPU history says since when" in h.summary
    # but one GPU busy now, or one log not silent long enough: not hung
    busy = workload("train", [rank("master-0", util=0.0, last_log=NOW - 900, name="train"),
                              rank("worker-0", util=80.0, last_log=NOW - 900, name="train")])
    assert not assess(busy, hist_for(busy, (0.0, STEP)), NOW, Thresholds(hang_after=600)).hung
    recent = hung_job(last_log=NOW - 300)
    assert not assess(recent, hist_for(recent, (0.0, STEP)), NOW, Thresholds(hang_after=600)).hung


def test_degraded_jobs_are_never_hung_and_cpu_only_jobs_never() -> None:
    wl = hung_job()
    hist = hist_for(wl, (90.0, 600), (0.0, 900))
    degraded = workload("train", list(wl.ranks), status="Degraded")
    assert not assess(degraded, hist, NOW).hung
    cpu = workload("cpu", [rank("master-0", util=None, gpus=0, last_log=NOW - 9000, name="cpu"),
                           rank("worker-0", util=None, gpus=0, last_log=NOW - 9000, name="cpu")])
    assert not assess(cpu, {}, NOW).hung


def test_an_mpi_launcher_still_logging_vetoes_and_is_no_peer() -> None:
    # the launcher carries every rank's output; its workers' own logs are quiet since their start
    ranks = [rank("launcher", util=None, gpus=0, last_log=NOW - 1, role="launcher"),
             rank("worker-0", util=0.0, last_log=NOW - 7000), rank("worker-1", util=0.0, last_log=NOW - 7000)]
    wl = workload("hvd", ranks, kind="MPIJob")
    h = assess(wl, hist_for(wl, (90.0, 300), (0.0, 900)), NOW)
    assert not h.hung and not h.flagged
    one = workload("hvd", ranks[:2], kind="MPIJob")  # a launcher and one worker: not silent "among peers"
    assert not assess(one, steady(one), NOW).flagged


# -- ranks -------------------------------------------------------------------------------------

def four(utils: tuple[float, ...] = (88.0, 86.0, 85.0, 86.0), logs: tuple[float | None, ...] = (1, 1, 1, 1),
         name: str = "llama") -> WorkloadView:
    labels = ("master-0", "worker-0", "worker-1", "worker-2")
    return workload(name, [rank(lb, util=u, last_log=None if ago is None else NOW - ago, name=name)
                           for lb, u, ago in zip(labels, utils, logs, strict=True)])


def test_a_straggler_by_progress() -> None:
    wl = four()
    rates = {"master-0": 1 / 1.5, "worker-0": 1 / 1.5, "worker-1": 1 / 1.52, "worker-2": 1 / (1.5 * 2.2)}
    h = assess(wl, steady(wl), NOW, DEFAULT, rates)
    assert flags(h) == {"worker-2": ("straggler",)}
    assert h.marker == "straggler" and not h.hung
    (r,) = h.flagged
    assert r.rate == pytest.approx(1 / 3.3)
    assert "2.2x slower" in r.why[0] and r.why[0].startswith("0.303 steps/s against its peers' 0.667 steps/s")
    assert h.summary.startswith("worker-2 straggler: 0.303 steps/s")
    # 0.75x its peers: not a straggler; progress wins over the GPUs' figures
    rates["worker-2"] = 0.75 / 1.5
    assert not assess(wl, steady(wl), NOW, DEFAULT, rates).flagged
    slow_gpu = four((88.0, 86.0, 85.0, 40.0))
    assert not assess(slow_gpu, steady(slow_gpu), NOW, DEFAULT, rates).flagged
    # a rank that makes no progress at all
    rates["worker-2"] = 0.0
    assert "no progress" in assess(wl, steady(wl), NOW, DEFAULT, rates).flagged[0].why[0]


def test_a_straggler_by_utilisation_without_progress() -> None:
    wl = four((88.0, 86.0, 40.0, 86.0))
    h = assess(wl, steady(wl), NOW)
    assert flags(h) == {"worker-1": ("straggler",)}
    assert h.flagged[0].why == ("GPU at 40% against its peers' 86%",)
    # 0.6x is the line; peers not busy: nothing
    wl2 = four((88.0, 86.0, 55.0, 86.0))
    assert not assess(wl2, steady(wl2), NOW).flagged
    wl3 = four((25.0, 24.0, 10.0, 26.0))
    assert not assess(wl3, steady(wl3), NOW).flagged
    # progress given for other ranks only: the GPUs decide for this one
    h = assess(wl, steady(wl), NOW, DEFAULT, {"master-0": 1.0})
    assert flags(h) == {"worker-1": ("straggler",)}


def test_a_silent_rank_among_chatty_peers() -> None:
    wl = four(logs=(2, 3, 300, 1))
    h = assess(wl, steady(wl), NOW)
    assert flags(h) == {"worker-1": ("silent",)}
    assert h.flagged[0].why == ("no log line for 5m while its peers logged within 2s",)
    # peers quiet too (median silence 40 s >= 120 / 4): nothing
    wl2 = four(logs=(40, 45, 300, 35))
    assert not assess(wl2, steady(wl2), NOW).flagged
    # not long enough
    wl3 = four(logs=(2, 3, 100, 1))
    assert not assess(wl3, steady(wl3), NOW).flagged
    # silent_after is a threshold
    assert flags(assess(wl3, steady(wl3), NOW, Thresholds(silent_after=60))) == {"worker-1": ("silent",)}


def test_an_idle_rank_among_busy_peers() -> None:
    wl = four((88.0, 0.0, 85.0, 86.0))
    hist = steady(wl)
    hist[(NS, "llama-worker-0")] = series((85.0, 600), (0.0, 120))
    h = assess(wl, hist, NOW)
    assert flags(h) == {"worker-0": ("idle",)}  # idle, not a straggler too
    r = h.flagged[0]
    assert r.idle_for == pytest.approx(120) and r.why == ("GPU at 0% for 2m while its peers' run at 86%",)
    # both silent and idle
    wl = four((88.0, 0.0, 85.0, 86.0), logs=(1, 500, 2, 3))
    assert flags(assess(wl, hist, NOW)) == {"worker-0": ("silent", "idle")}
    # a two-rank job: one idle beside a busy one
    two = workload("pair", [rank("master-0", util=90.0, name="pair"), rank("worker-0", util=1.0, name="pair")])
    assert flags(assess(two, steady(two), NOW)) == {"worker-0": ("idle",)}


def test_a_single_rank_job_has_no_peers() -> None:
    wl = workload("solo", [rank("master-0", util=0.0, last_log=NOW - 900, name="solo")])
    h = assess(wl, steady(wl), NOW)
    assert not h.flagged
    assert h.hung  # but it can hang


def test_interactive_sessions_and_pending_or_finished_jobs_are_never_flagged() -> None:
    base = hung_job()
    hist = hist_for(base, (90.0, 600), (0.0, 900))
    straggler = four((88.0, 86.0, 0.0, 86.0), logs=(1, 1, 900, 1))
    shist = steady(straggler)
    for status, interactive in (("Running", True), ("Pending", False), ("Failed", False), ("Succeeded", False),
                                ("Suspended", False), ("Restarting", False)):
        for wl, hh in ((base, hist), (straggler, shist)):
            w = workload(wl.name, list(wl.ranks), status=status, interactive=interactive)
            h = assess(w, hh, NOW, Thresholds(hang_after=60))
            assert not h.hung and not h.flagged and h.marker == "", (status, interactive)
            assert h.summary == ("an interactive session (see idle sessions)" if interactive
                                 else f"not assessed: {status}")
    model = model_of([workload("s", list(base.ranks), interactive=True), workload("p", [], status="Pending"),
                          workload("f", list(straggler.ranks), status="Failed"), base], hist | shist)
    assert list(assess_all(model, NOW)) == [base.key]  # type: ignore[arg-type]


def test_unknown_data_never_flags() -> None:
    busy = (88.0, 86.0, 85.0, 86.0)
    for state in ("no data", "stale", "unavailable", "unknown"):
        wl = four(busy)
        ranks = list(wl.ranks)
        ranks[1] = rank("worker-0", util=0.0, state=state, name="llama")
        wl = workload("llama", ranks)
        assert not assess(wl, steady(wl), NOW).flagged, state
    # an ok reading without any history: not known
    wl = four((88.0, 0.0, 85.0, 86.0))
    hist = steady(wl)
    del hist[(NS, "llama-worker-0")]
    h = assess(wl, hist, NOW)
    assert not h.flagged and h.ranks[1].gpu_util is None
    # logs not followed: no silence
    wl2 = four(logs=(None, None, None, None))
    assert not assess(wl2, steady(wl2), NOW).flagged
    wl3 = four(logs=(1, None, None, None))
    assert not assess(wl3, steady(wl3), NOW).flagged
    # a hung shape with one GPU unread, or no history at all: not hung
    base = hung_job()
    hist = hist_for(base, (90.0, 600), (0.0, 900))
    unread = workload("train", [base.ranks[0], rank("worker-0", util=None, state="no data", last_log=NOW - 900)])
    assert not assess(unread, hist, NOW).hung
    h = assess(base, {}, NOW)
    assert not h.hung and not h.flagged
    nothing = workload("x", [rank("master-0", util=None, state="no data", last_log=None, name="x"),
                             rank("worker-0", util=None, state="no data", last_log=None, name="x")])
    assert assess(nothing, {}, NOW).summary == "nothing to judge by yet: no GPU reading and no log followed"


def test_to_json() -> None:
    wl = four((88.0, 0.0, 85.0, 86.0), logs=(1, 500, 2, None))
    hist = steady(wl)
    h = assess(wl, hist, NOW, DEFAULT, {"master-0": 1.0, "worker-0": 1.0, "worker-1": 0.2, "worker-2": 1.0})
    d = json.loads(json.dumps(h.to_json()))
    assert {k: d[k] for k in ("namespace", "kind", "name", "hung", "hung_for", "logs_confirmed", "marker")} == {
        "namespace": NS, "kind": "PyTorchJob", "name": "llama", "hung": False, "hung_for": None,
        "logs_confirmed": False, "marker": "straggler"}
    assert d["summary"] == h.summary
    by = {r["label"]: r for r in d["ranks"]}
    assert list(by) == ["master-0", "worker-0", "worker-1", "worker-2"]
    assert by["worker-0"] == {
        "label": "worker-0", "pod": "llama-worker-0", "silent_for": 500.0, "gpu_util": 0.0,
        "idle_for": pytest.approx(1200 - STEP), "steps_per_second": 1.0,
        "flags": [{"flag": "silent", "why": "no log line for 8m20s while its peers logged within 1s"},
                  {"flag": "idle", "why": "GPU at 0% for 19m while its peers' run at 86%"}]}
    assert by["worker-1"]["flags"][0]["flag"] == "straggler" and by["worker-2"]["silent_for"] is None
    hung = assess(hung_job(), hist_for(hung_job(), (90.0, 600), (0.0, 900)), NOW)
    d = hung.to_json()
    assert d["hung"] and d["hung_for"] == 900.0 and d["marker"] == "hung" and d["logs_confirmed"]
    # cluster text is sanitised
    evil = workload("x\x1b[31m", [rank("master-0\x1b]0;t\x07", name="x"), rank("worker-0", name="x")])
    text = json.dumps(assess(evil, {}, NOW).to_json())
    assert "\\u001b" not in text and "\\u0007" not in text


def test_the_fast_constructor_makes_the_same_object() -> None:
    a = _rank_health("w", "p", 1.0, 2.0, None, ("idle",), ("why",), 0.5)
    b = RankHealth("w", "p", 1.0, 2.0, None, ("idle",), ("why",), 0.5)
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)
    with pytest.raises(AttributeError):
        a.label = "x"  # type: ignore[misc]


def test_median_without() -> None:
    import statistics

    for values in ([1.0, 2.0], [1.0, 2.0, 3.0], [5.0, 1.0, 4.0, 4.0, 9.0], [3.0, 3.0, 3.0], [1.0, 7.0, 2.0, 8.0, 0.5, 6.0]):
        s = sorted(values)
        for i, v in enumerate(values):
            rest = values[:i] + values[i + 1:]
            assert _median_without(s, v) == statistics.median(rest)
    assert _median_without([4.0], 4.0) is None


# -- simcluster's demo shapes --------------------------------------------------------------------

START = NOW - 40  # the demo jobs started 40 s ago


def demo_model() -> LiveModel:
    """The demo's running jobs as the dashboard sees them 40 s in (samples every 5 s)."""
    t0 = START
    hist: dict[PodKey, deque[tuple[float, float]]] = {}

    def job_of(name: str, specs: list[tuple[str, float, float, float]]) -> WorkloadView:
        """specs: (label, util now, gpus, log interval s); history: steady at the util."""
        ranks = []
        for label, util, gpus, every in specs:
            r = rank(label, util=util if gpus else None, gpus=gpus, last_log=NOW - every / 2, name=name,
                     role=label.rsplit("-", 1)[0])
            if gpus:
                hist[(NS, r.pod)] = series((util, NOW - t0 + STEP))
            ranks.append(r)
        return workload(name, ranks)

    # gpt-hung: util stall:90:20 (90 for 20 s, then 0), logs every 2 s until step 6 (12 s)
    gpt = workload("gpt-hung", [rank(lb, util=0.0, last_log=t0 + 12, name="gpt-hung") for lb in ("master-0", "worker-0")])
    for r in gpt.ranks:
        hist[(NS, r.pod)] = deque((t, 90.0 if t - t0 < 20 else 0.0) for t in range(int(t0), int(NOW) + 1, int(STEP)))
    wls = [
        gpt,
        # llama-finetune: 2 GPUs a rank, util ~88 / ~86 / ~85, a step every 1.5 s (worker-2: 3.3 s)
        job_of("llama-finetune", [("master-0", 90.1, 2, 1.5), ("worker-0", 83.0, 2, 1.5), ("worker-1", 88.9, 2, 1.5),
                                  ("worker-2", 84.2, 2, 3.3)]),
        # resnet-tf: chief 72, workers noisy 70 +- 8, the PS without GPU logging every 5 s
        job_of("resnet-tf", [("chief-0", 72.0, 1, 2.5), ("worker-0", 62.5, 1, 2.5), ("worker-1", 77.8, 1, 2.5),
                             ("ps-0", 0.0, 0, 5)]),
        job_of("xgb-churn", [("master-0", 35.0, 1, 3), ("worker-0", 33.0, 1, 3), ("worker-1", 33.0, 1, 3)]),
        job_of("bert-crash", [("master-0", 60.0, 1, 1), ("worker-0", 60.0, 1, 1), ("worker-1", 60.0, 1, 1)]),
    ]
    return model_of(wls, hist)


def demo_progress(key: tuple[str, str, str]) -> dict[str, float] | None:
    if key[2] == "llama-finetune":
        return {"master-0": 1 / 1.5, "worker-0": 1 / 1.5, "worker-1": 1 / 1.5, "worker-2": 1 / (1.5 * 2.2)}
    if key[2] == "resnet-tf":
        return {"chief-0": 0.4, "worker-0": 0.4, "worker-1": 0.4, "ps-0": 0.2}
    return None


def test_the_demo_gpt_hung_is_hung_with_a_short_n_and_nothing_else_is() -> None:
    m = demo_model()
    out = assess_all(m, NOW, Thresholds(hang_after=10), demo_progress)  # type: ignore[arg-type]
    marks = {k[2]: h.marker for k, h in out.items()}
    assert marks == {"gpt-hung": "hung", "llama-finetune": "straggler", "resnet-tf": "", "xgb-churn": "",
                     "bert-crash": ""}
    gpt = out[(NS, "PyTorchJob", "gpt-hung")]
    # the last busy sample at 15 s, the last log line at 12 s: idle for 25 s, silent for 28
    assert gpt.logs_confirmed and gpt.hung_for == 25.0
    assert flags(out[(NS, "PyTorchJob", "llama-finetune")]) == {"worker-2": ("straggler",)}
    # the default N (10 minutes): not yet
    assert not any(h.hung for h in assess_all(m, NOW, DEFAULT, demo_progress).values())  # type: ignore[arg-type]
    # without progress rates the straggler's GPU looks like its peers': nothing to say
    plain = assess_all(m, NOW, Thresholds(hang_after=10))  # type: ignore[arg-type]
    assert {k[2] for k, h in plain.items() if h.marker} == {"gpt-hung"}


def test_the_demo_gpt_hung_before_its_gpus_stall_is_not_hung() -> None:
    m = demo_model()
    # 18 s in: logs stopped at 12 s but the GPUs are still busy
    at = START + 18
    hist = {pk: deque((t, u) for t, u in h if t <= at) for pk, h in m.gpu_history.items()}
    gpt = m.workloads[(NS, "PyTorchJob", "gpt-hung")]
    ranks = [replace(r, gpu_util=90.0) for r in gpt.ranks]
    h = assess(workload("gpt-hung", ranks), hist, at, Thresholds(hang_after=5))
    assert not h.hung


# -- through a LiveModel ----------------------------------------------------------------------------

def model_of(wls: list[WorkloadView], hist: dict[PodKey, deque[tuple[float, float]]]) -> LiveModel:
    """A LiveModel holding these views and GPU histories (set directly: the judging is tested)."""
    m = LiveModel()
    m.workloads = {w.key: w for w in wls}
    m.gpu_history = dict(hist)
    for pk, h in hist.items():  # (as `set_gpu` keeps it)
        busy = [t for t, u in h if u >= m.busy_threshold]
        if busy:
            m.busy_at[pk] = busy[-1]
    return m


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _stamp(obj: dict[str, Any], at: float) -> dict[str, Any]:
    obj["metadata"]["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    return obj


def test_through_a_live_model_with_its_fresher_log_times() -> None:
    t0 = calendar.timegm((2026, 11, 1, 8, 0, 0))
    clock = Clock(t0)
    m = LiveModel(now=clock)
    m.apply_namespaces([(NS, parse_namespace({"metadata": {"name": NS}}))])
    j = _stamp(job("PyTorchJob", "gpt", NS, {"Master": 1, "Worker": 1}, conditions=[("Running", "")]), t0)
    rec = parse_job("PyTorchJob", "kubeflow.org", "v1")(j)
    m.apply_jobs([(rec.key, rec)])
    pods = [parse_pod(_stamp(pod("PyTorchJob", "gpt", NS, "Master", 0), t0)),
            parse_pod(_stamp(pod("PyTorchJob", "gpt", NS, "Worker", 0), t0))]
    m.apply_pods([(p.key, p) for p in pods])
    m.flush()
    keys = [p.key for p in pods]
    for i in range(0, 900, 5):  # busy for 100 s, then idle; logs until 100 s
        clock.t = t0 + i
        util = 90.0 if i < 100 else 0.0
        m.set_gpu({pk: GpuReading("ok", util, 100.0, 81559.0) for pk in keys}, {})
        if i < 100:
            for ns, name in keys:
                m.note_log(ns, name, t0 + i)
        m.flush()
    now = t0 + 895
    key = (NS, "PyTorchJob", "gpt")
    h = assess_all(m, now, Thresholds(hang_after=600))[key]
    assert h.hung and h.logs_confirmed and h.hung_for == pytest.approx(800, abs=5)
    # a log line the view has not seen yet (note_log does not rebuild it) vetoes the hang
    m.note_log(NS, keys[1][1], now - 1)
    assert m.workloads[key].ranks[1].last_log != now - 1
    h = assess_all(m, now, Thresholds(hang_after=600))[key]
    assert not h.hung and h.ranks[1].silent_for == 1.0
    # the model's last-busy time is what a scan of the history finds
    assert m.busy_at[keys[0]] == t0 + 95
    scanned = assess(m.workloads[key], m.gpu_history, now, Thresholds(hang_after=600))
    assert [r.idle_for for r in scanned.ranks] == [r.idle_for for r in h.ranks] == [800, 800]


def test_verdicts_time_cannot_change_are_kept_until_the_job_or_its_logs_change() -> None:
    """No log followed and no GPU reading: "nothing to judge by yet", whenever asked. `assess_all`
    keeps that verdict (the memo) while the view is the same object and none of its ranks logged;
    a job with readings is judged afresh each time."""
    blind = workload("blind", [rank("master-0", util=None, state="unknown", last_log=None),
                               rank("worker-0", util=None, state="unknown", last_log=None)])
    seen = hung_job(name="seen")
    model = model_of([blind, seen], hist_for(seen, (90.0, 600), (0.0, 900)))
    memo: dict = {}
    first = assess_all(model, NOW, Thresholds(hang_after=600), timeless=memo)  # type: ignore[arg-type]
    assert set(memo) == {blind.key} and first[blind.key].summary.startswith("nothing to judge by yet")
    later = assess_all(model, NOW + 600, Thresholds(hang_after=600), timeless=memo)  # type: ignore[arg-type]
    assert later[blind.key] is first[blind.key]
    assert later[seen.key] is not first[seen.key] and later[seen.key].hung_for == pytest.approx(1500, abs=STEP)
    assert later == assess_all(model, NOW + 600, Thresholds(hang_after=600))  # type: ignore[arg-type]
    # a rank of it logs: judged again (silent for 5 s now), and no longer kept
    model.last_log[(NS, blind.ranks[0].pod)] = NOW + 595
    again = assess_all(model, NOW + 600, Thresholds(hang_after=600), timeless=memo)  # type: ignore[arg-type]
    assert again[blind.key].ranks[0].silent_for == 5 and blind.key not in memo
    # a new view of it (its pods changed) is judged again; gone, it leaves the memo
    model.last_log.clear()
    model.workloads[blind.key] = workload("blind", list(blind.ranks))
    assess_all(model, NOW, Thresholds(hang_after=600), timeless=memo)  # type: ignore[arg-type]
    assert memo[blind.key][0] is model.workloads[blind.key]
    del model.workloads[blind.key]
    assess_all(model, NOW, Thresholds(hang_after=600), timeless=memo)  # type: ignore[arg-type]
    assert blind.key not in memo


def test_a_kept_verdict_is_reused_without_reading_its_ranks_while_no_log_is_followed() -> None:
    """No log followed anywhere (an idle dashboard at the SSH door, 20,000 ranks): a kept verdict
    costs no look at each rank every 15 s (#31: most of an idle session's data thread)."""
    read = [0]

    class Ranks(tuple):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            read[0] += 1
            return super().__iter__()

    blind = workload("blind", [rank("master-0", util=None, state="unknown", last_log=None)])
    blind = replace(blind, ranks=Ranks(blind.ranks))
    model = model_of([blind], {})
    memo: dict = {}
    first = assess_all(model, NOW, Thresholds(hang_after=600), timeless=memo)  # type: ignore[arg-type]
    read[0] = 0
    assert assess_all(model, NOW + 600, Thresholds(hang_after=600), timeless=memo)[blind.key] is first[blind.key]  # type: ignore[arg-type]
    assert read[0] == 0
    model.last_log[(NS, "elsewhere")] = NOW  # (a log followed: its ranks are looked at)
    assess_all(model, NOW + 600, Thresholds(hang_after=600), timeless=memo)  # type: ignore[arg-type]
    assert read[0] == 1


def test_a_rank_verdict_is_small() -> None:
    """A dashboard keeps a verdict per rank of every running job (20,000 at the SSH door's scale,
    in each session, #31): each fits in 160 bytes (slots, no dict)."""
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [_rank_health(f"worker-{i}", f"p-{i}", None, None, None, (), (), None) for i in range(1000)]
        each = (tracemalloc.get_traced_memory()[0] - before - sum(len(k.label) + len(k.pod) + 49 * 2 for k in kept)
                - 8 * len(kept)) / len(kept)
    finally:
        tracemalloc.stop()
    assert each <= 160, f"{each:.0f} bytes a rank"
    assert kept[5] == RankHealth("worker-5", "p-5", None, None, None)
