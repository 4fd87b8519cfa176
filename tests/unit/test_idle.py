"""Idle interactive sessions (#15): `monitors.diagnostics.idle` over a LiveModel built from records."""

from __future__ import annotations

import calendar
import time
from typing import Any

import pytest

from monitors.diagnostics.idle import IdleSession, format_gpu_hours, idle_sessions, rfc3339
from monitors.model import GpuReading, LiveModel
from monitors.parse import parse_job, parse_namespace, parse_pod
from tests.kubeflow_objects import job, pod

NS = "runai-team-a"
START = calendar.timegm((2026, 1, 15, 8, 0, 0))  # the pods' creation
NOW = START + 4 * 3600  # four hours later


def stamp(obj: dict[str, Any], at: float = START) -> dict[str, Any]:
    obj["metadata"]["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    return obj


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def session(name: str, workers: int, *, user: str = "alice", kind: str = "PyTorchJob",
            created: float = START) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An interactive session (sleep infinity on every replica) with a master and `workers` workers."""
    sleep = ["sleep", "infinity"]
    j = stamp(job(kind, name, NS, {"Master": 1, "Worker": workers}, command=sleep, conditions=[("Running", "")],
                  labels={"ranks/user": user}), created)
    pods = [stamp(pod(kind, name, NS, "Master", 0, command=sleep), created)]
    pods += [stamp(pod(kind, name, NS, "Worker", i, command=sleep), created) for i in range(workers)]
    return j, pods


def training(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    j = stamp(job("PyTorchJob", name, NS, {"Master": 1, "Worker": 1}, conditions=[("Running", "")],
                  labels={"ranks/user": "bob"}))
    return j, [stamp(pod("PyTorchJob", name, NS, "Master", 0)), stamp(pod("PyTorchJob", name, NS, "Worker", 0))]


def build(*workloads: tuple[dict[str, Any], list[dict[str, Any]]], clock: Clock | None = None) -> LiveModel:
    m = LiveModel(now=clock or Clock(NOW))
    m.apply_namespaces([(NS, parse_namespace({"metadata": {"name": NS, "labels": {"runai/queue": "team-a"}}}))])
    for j, pods in workloads:
        rec = parse_job(j["kind"], "kubeflow.org", j["apiVersion"].split("/")[1])(j)
        m.apply_jobs([(rec.key, rec)])
        recs = [parse_pod(p) for p in pods]
        m.apply_pods([(r.key, r) for r in recs])
    m.flush()
    return m


def readings(m: LiveModel, utils: dict[str, float | None], at: float | None = None) -> None:
    """One metrics refresh: pod -> utilisation (None: no data for it)."""
    if at is not None:
        m.now = Clock(at)
    m.set_gpu({(NS, p): GpuReading("ok" if u is not None else "no data", u, 100.0, 81559.0)
               for p, u in utils.items()}, {})
    m.flush()


def pods_of(m: LiveModel, name: str) -> list[str]:
    return sorted(p for (_, p) in m.workload_pods[(NS, "PyTorchJob", name)])


def test_an_idle_session_is_listed_since_its_start_and_training_never() -> None:
    m = build(session("notebook", 1), training("train"))
    readings(m, {p: 0.0 for p in pods_of(m, "notebook")} | {p: 0.0 for p in pods_of(m, "train")})
    assert m.workloads[(NS, "PyTorchJob", "notebook")].interactive
    assert not m.workloads[(NS, "PyTorchJob", "train")].interactive
    found = idle_sessions(m, NOW)
    assert [s.name for s in found] == ["notebook"]  # the training job reads 0% too: never listed
    s = found[0]
    assert (s.namespace, s.project, s.user, s.gpus, s.kind) == (NS, "team-a", "alice", 2, "PyTorchJob")
    assert s.idle_since == START  # no busy reading in the history: idle since the pods started
    assert s.idle_gpu_hours == pytest.approx(2 * 4.0)
    assert s.to_json() == {"name": "notebook", "namespace": NS, "project": "team-a", "user": "alice", "gpus": 2,
                           "idle_since": "2026-01-15T08:00:00Z", "idle_gpu_hours": 8.0}


def test_the_threshold_decides() -> None:
    m = build(session("notebook", 1))
    readings(m, {p: 7.0 for p in pods_of(m, "notebook")})
    assert idle_sessions(m, NOW) == []  # 7% is not under the default 5%
    assert [s.name for s in idle_sessions(m, NOW, threshold=10.0)] == ["notebook"]
    assert idle_sessions(m, NOW, threshold=7.0) == []  # at the threshold is not under it
    # one GPU over the threshold is enough to keep the session off the list
    readings(m, {"notebook-master-0": 1.0, "notebook-worker-0": 30.0})
    assert idle_sessions(m, NOW, threshold=10.0) == []
    assert [s.name for s in idle_sessions(m, NOW, threshold=50.0)] == ["notebook"]


def test_idle_since_is_the_start_of_the_current_idle_run_across_all_gpus() -> None:
    clock = Clock(START + 3600)
    m = build(session("notebook", 1), clock=clock)
    master, worker = pods_of(m, "notebook")
    t1, t2, t3, t4 = START + 3600, START + 3600 + 60, START + 3600 + 120, START + 3600 + 180
    readings(m, {master: 90.0, worker: 90.0}, at=t1)  # busy
    readings(m, {master: 1.0, worker: 80.0}, at=t2)  # the master is idle, the worker still busy
    assert idle_sessions(m, t2) == []
    readings(m, {master: 2.0, worker: 0.0}, at=t3)  # both idle from here
    readings(m, {master: 0.0, worker: 0.0}, at=t4)
    [s] = idle_sessions(m, t4 + 60)
    assert s.idle_since == t3  # the master's run began at t2, the worker's at t3: all idle since t3
    assert s.idle_gpu_hours == pytest.approx(2 * 120 / 3600)
    assert s.gpu_hours_at(t4 + 3660) == pytest.approx(2 * 3720 / 3600)
    readings(m, {master: 0.0, worker: 55.0}, at=t4 + 30)  # busy again: not idle now
    assert idle_sessions(m, t4 + 60) == []


def test_a_session_idle_for_seconds_is_listed_with_a_small_figure() -> None:
    clock = Clock(NOW)
    m = build(session("notebook", 0), clock=clock)
    [master] = pods_of(m, "notebook")
    readings(m, {master: 99.0}, at=NOW - 10)
    readings(m, {master: 0.5}, at=NOW - 5)
    [s] = idle_sessions(m, NOW)
    assert s.idle_since == NOW - 5 and s.gpus == 1
    assert 0 < s.idle_gpu_hours < 0.002
    assert format_gpu_hours(s.idle_gpu_hours) == "0.001"
    assert s.to_json()["idle_gpu_hours"] == 0.0014


def test_ordered_by_gpu_hours_most_first() -> None:
    m = build(session("small-old", 0, created=START - 3600),  # 1 GPU for 5 h: 5 GPU-hours
              session("big-new", 3, user="carol", created=START + 2 * 3600),  # 4 GPUs for 2 h: 8
              session("mid", 1, user="dave"))  # 2 GPUs for 4 h: 8 as well, idle longer
    readings(m, {p: 0.0 for name in ("small-old", "big-new", "mid") for p in pods_of(m, name)})
    found = idle_sessions(m, NOW)
    assert [(s.name, round(s.idle_gpu_hours, 6)) for s in found] == [("mid", 8.0), ("big-new", 8.0),
                                                                     ("small-old", 5.0)]
    assert [s.user for s in found] == ["dave", "carol", "alice"]


def test_no_reading_is_unknown_not_idle() -> None:
    m = build(session("unread", 1), session("half-read", 1), session("no-gpu", 1))
    assert idle_sessions(m, NOW) == []  # no metrics at all
    half = pods_of(m, "half-read")
    readings(m, {half[0]: 0.0, half[1]: None} | {p: 0.0 for p in pods_of(m, "no-gpu")})
    assert [s.name for s in idle_sessions(m, NOW)] == ["no-gpu"]  # one GPU of half-read is unread


def test_pending_or_finished_ranks_hold_no_gpu() -> None:
    j, pods = session("notebook", 1)
    pods[1] = stamp(pod("PyTorchJob", "notebook", NS, "Worker", 0, phase="Pending", command=["sleep", "infinity"],
                        unschedulable="0/8 nodes are available"))
    m = build((j, pods))
    readings(m, {"notebook-master-0": 0.0})
    [s] = idle_sessions(m, NOW)
    assert s.gpus == 1  # the pending worker holds no GPU


def test_json_is_sanitised_and_times_are_rfc3339_utc() -> None:
    s = IdleSession("a\x1b[2Jb", NS, "team-a", "e\x07ve", 0.5, START, 1.23456)
    assert s.to_json() == {"name": "ab", "namespace": NS, "project": "team-a", "user": "eve", "gpus": 0.5,
                           "idle_since": "2026-01-15T08:00:00Z", "idle_gpu_hours": 1.2346}
    assert rfc3339(0) == "1970-01-01T00:00:00Z"
    assert [format_gpu_hours(h) for h in (0.0004, 0.05, 12.34, 1234.5)] == ["0.000", "0.05", "12.3", "1,234"]


def test_threshold_setting() -> None:
    from tui.settings import Settings, SettingsError, parse_settings

    assert Settings().idle_threshold_percent == 5.0
    assert parse_settings({"idle_threshold_percent": 12.5}).idle_threshold_percent == 12.5
    assert parse_settings({"idle_threshold_percent": 2}).idle_threshold_percent == 2.0
    for bad in (0, -1, 101):
        with pytest.raises(SettingsError) as info:
            parse_settings({"idle_threshold_percent": bad}, "config.toml", f"idle_threshold_percent = {bad}\n")
        assert str(info.value) == f"config.toml:1: idle_threshold_percent: must be more than 0 and at most 100 (got {bad})"
    assert Settings().with_overrides(idle_threshold_percent=1).idle_threshold_percent == 1.0
