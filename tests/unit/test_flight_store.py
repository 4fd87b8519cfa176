"""The flight recorder's store (`monitors.flight_recorder.FlightStore`): the user's alone, bounded,
one recording per workload (another workload of the same name is not it), one store per context
and impersonated user."""

from __future__ import annotations

import stat
from pathlib import Path

from monitors.flight_recorder import FlightStore, RecordedFailure


def failure(pod: str, code: int, at: float, lines: tuple[str, ...] = ("boom",)) -> RecordedFailure:
    return RecordedFailure(pod.rsplit("-", 2)[-2] + "-" + pod.rsplit("-", 1)[-1], "worker", 1, pod, "node-1",
                           "pytorch", code, "Error", at, lines=lines, recorded_at=at + 1, source="log")


def test_recordings_are_the_users_alone_and_first_failure_first(tmp_path: Path) -> None:
    store = FlightStore("ctx", "https://api:6443", root=tmp_path)
    store.add("ns", "PyTorchJob", "job", "uid-1", failure("job-worker-1", 3, 200.0))
    store.add("ns", "PyTorchJob", "job", "uid-1", failure("job-worker-0", 137, 100.0))
    store.add("ns", "PyTorchJob", "job", "uid-1", failure("job-worker-0", 137, 100.0))  # (the same: once)
    rec = store.load("ns", "PyTorchJob", "job", "uid-1")
    assert rec is not None and len(rec.failures) == 2
    first = rec.first()
    assert first is not None and (first.pod, first.exit_code, first.lines) == ("job-worker-0", 137, ("boom",))
    files = list(store.dir.glob("*.json"))
    assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(store.dir.stat().st_mode) == 0o700
    assert not list(store.dir.glob("*.tmp"))
    # a new workload of the same name is not the recorded one; without a uid (it is gone) it is
    assert store.load("ns", "PyTorchJob", "job", "uid-2") is None
    assert store.load("ns", "PyTorchJob", "job") is not None


def test_bounded_in_workloads_and_failures(tmp_path: Path) -> None:
    store = FlightStore("ctx", root=tmp_path, max_workloads=3, max_failures=2)
    for i in range(5):
        store.add("ns", "PyTorchJob", f"job{i}", f"u{i}", failure(f"job{i}-worker-0", 1, float(i)))
    names = sorted(p.name for p in store.dir.glob("*.json"))
    assert len(names) == 3 and all("job0" not in n and "job1" not in n for n in names)
    for j in range(4):
        store.add("ns", "PyTorchJob", "job4", "u4", failure(f"job4-worker-{j}", 1, 10.0 + j))
    rec = store.load("ns", "PyTorchJob", "job4")
    assert rec is not None and [f.finished_at for f in rec.failures] == [4.0, 10.0]  # the first ones kept


def test_one_store_per_context_and_impersonated_user(tmp_path: Path) -> None:
    alice = FlightStore("ctx", "s", user="alice", root=tmp_path)
    bob = FlightStore("ctx", "s", user="bob", root=tmp_path)
    other = FlightStore("other", "s", root=tmp_path)
    assert len({alice.dir, bob.dir, other.dir}) == 3
    alice.add("ns", "PyTorchJob", "job", "u", failure("job-worker-0", 1, 1.0))
    assert bob.load("ns", "PyTorchJob", "job") is None and other.load("ns", "PyTorchJob", "job") is None
    # a corrupt file is no recording, never an error
    path = next(alice.dir.glob("*.json"))
    path.write_text("{not json")
    assert alice.load("ns", "PyTorchJob", "job") is None
