"""The flight recorder keeps a workload's last hang autopsy (#28): its short form beside the failures,
neither replacing the other; a recording file whose autopsy is not a list of lines keeps the rest."""

from __future__ import annotations

from pathlib import Path

import orjson

from monitors.flight_records import AUTOPSY_LINES, Recording
from monitors.flight_store import FlightStore
from tests.unit.test_flight_store import failure


def test_the_autopsy_is_kept_beside_the_failures(tmp_path: Path) -> None:
    store = FlightStore("ctx", "https://api:6443", root=tmp_path)
    store.add("ns", "PyTorchJob", "job", "uid-1", failure("job-worker-1", 3, 200.0))
    store.add_autopsy("ns", "PyTorchJob", "job", "uid-1", ("! 1 rank [5] in read_shard", "  15 ranks [0-4,6-15]"), 300.0)
    rec = store.load("ns", "PyTorchJob", "job", "uid-1")
    assert rec is not None and rec.autopsy == ("! 1 rank [5] in read_shard", "  15 ranks [0-4,6-15]")
    assert rec.autopsy_at == 300.0 and [f.pod for f in rec.failures] == ["job-worker-1"]
    store.add("ns", "PyTorchJob", "job", "uid-1", failure("job-worker-2", 1, 400.0))  # a later failure keeps it
    rec = store.load("ns", "PyTorchJob", "job", "uid-1")
    assert rec is not None and len(rec.autopsy) == 2 and len(rec.failures) == 2
    store.add_autopsy("ns", "PyTorchJob", "job", "uid-1", tuple(f"line {i}" for i in range(100)), 500.0)
    rec = store.load("ns", "PyTorchJob", "job", "uid-1")
    assert rec is not None and len(rec.autopsy) == AUTOPSY_LINES and rec.autopsy_at == 500.0
    assert store.load("ns", "PyTorchJob", "job", "uid-2") is None  # another job of the same name: not its


def test_a_bad_autopsy_field_is_left_out() -> None:
    doc = {"namespace": "ns", "kind": "PyTorchJob", "name": "job", "uid": "u", "failures": [],
           "autopsy": ["ok", 5, None, "x" * 5000], "autopsy_at": "yesterday"}
    rec = Recording.from_json(orjson.loads(orjson.dumps(doc)))
    assert rec.autopsy == ("ok", "x" * 1000) and rec.autopsy_at == 0.0
    rec = Recording.from_json({**doc, "autopsy": "not a list"})
    assert rec.autopsy == ()
