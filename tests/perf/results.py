"""Goals measured by the benchmarks, collected for `make bench` (bench-results.json).

Each benchmark calls `record(...)` once per goal it measures; the records are appended, one JSON
object per line, to `$RANKS_BENCH_RESULTS` (default `bench-results.jsonl` at the repository root).
Each record names the test that made it (`source`, from pytest). tests/perf/conftest.py adds one
line per benchmark test with its outcome and duration (`record_outcome`), so the report can say
which benchmark failed and how long each took. `scripts/bench_report.py` turns them into
`bench-results.json` and `docs/performance.md`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[2]


def results_path() -> Path:
    return Path(os.environ.get("RANKS_BENCH_RESULTS") or ROOT / "bench-results.jsonl")


def _append(rec: dict[str, Any]) -> None:
    with open(results_path(), "ab") as fh:
        fh.write(orjson.dumps(rec) + b"\n")


def _current_test() -> str:
    """The node id of the test running (pytest sets PYTEST_CURRENT_TEST: 'path::name (call)')."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]


def record(goal: str, target: str, measured: float | None, unit: str, *, met: bool | None,
           baseline: str | None = None, baseline_measured: float | None = None, note: str = "",
           **extra: Any) -> dict[str, Any]:
    """One goal: what it is (`goal`), its target as text (`"<= 0.5x curl"`, `"<= 2 s"`), the
    figure measured (None: could not be measured, say why in `note`), its unit, whether it was
    met (None: a figure without a verdict), and the baseline it is a ratio to (`baseline` names it,
    `baseline_measured` its figure in the same run). `extra` (e.g. pods=20000) is kept for the
    report's chart."""
    rec: dict[str, Any] = {
        "goal": goal, "target": target, "measured": measured, "unit": unit, "baseline": baseline,
        "baseline_measured": baseline_measured, "met": met, "note": note, "at": time.time(),
        "source": _current_test(), **extra,
    }
    _append(rec)
    return rec


def record_outcome(test: str, outcome: str, duration: float, message: str = "") -> dict[str, Any]:
    """A benchmark test's outcome (passed, failed, skipped; `phase` setup/call/teardown failures
    count as failed), its wall time in seconds and the machine's load average (1 min) as it ended."""
    rec = {"test": test, "outcome": outcome, "duration": round(duration, 2), "message": message,
           "at": time.time(), "load1": round(os.getloadavg()[0], 2)}
    _append(rec)
    return rec
