"""scripts/bench_report.py (#16, #31) on a small synthetic bench-results.jsonl: the JSON's shape, the
markdown's tables (a met, an unmet, an unmeasured and a missing goal each visible as such), the
chart file (the commands beside their floor and curl's full LIST) and a partial run (a benchmark
file that did not run is named)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCALE = "tests/perf/test_bench_scale.py::test_read_commands_vs_curl_and_kubectl[20k]"
DASH = "tests/perf/test_bench_dashboard.py::test_idle_cpu"
MACHINE = {"cpu": "Test CPU", "cores": 2, "cores_usable": 2, "memory_gb": 24.0, "python": "CPython 3.11",
           "os": "Linux", "kubectl": "v1.35.0", "curl": "curl 8", "ranks_commit": "abc1234",
           "date": "2026-01-01T00:00:00+00:00", "run_finished": "2026-01-01T00:10:00+00:00",
           "report_written": "2026-01-01T00:10:01+00:00"}


@pytest.fixture(scope="module")
def bench_report() -> Any:
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "scripts" / "bench_report.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_report"] = module
    spec.loader.exec_module(module)
    return module


def goal(name: str, target: str, measured: float | None, unit: str, met: bool | None, source: str,
         **kw: Any) -> dict[str, Any]:
    return {"goal": name, "target": target, "measured": measured, "unit": unit, "baseline": None,
            "baseline_measured": None, "met": met, "note": "", "at": 1_767_225_600.0, "source": source} | kw


def synthetic(tmp_path: Path) -> tuple[Path, Path]:
    lines: list[dict[str, Any]] = []
    curl = {20000: 3.0, 50000: 7.0, 100000: 15.0}
    kubectl = {20000: (80.0, 3800.0), 50000: (200.0, 9500.0), 100000: (None, None)}
    for pods in (20000, 50000, 100000):
        lines.append(goal(f"curl full pod LIST, {pods:,} pods (baseline)", "the floor (figure)", curl[pods], "s", None,
                          SCALE, pods=pods, series="curl full pod LIST", seconds=curl[pods]))
        ks, krss = kubectl[pods]
        lines.append(goal(f"kubectl get pods -A -o json, {pods:,} pods (baseline)", "baseline (figure)", ks, "s", None,
                          SCALE, pods=pods, series="kubectl get pods -A -o json", seconds=ks, rss_mb=krss,
                          note="" if ks else "kubectl not run at 100,000 pods: it would need ~24 GB"))
        lines.append(goal(f"floor: Python start + Table LIST, {pods:,} pods (baseline)", "the commands' floor (figure)",
                          curl[pods] / 10, "s", None, SCALE, pods=pods, series="floor: Python start + Table LIST",
                          seconds=curl[pods] / 10))
        if pods != 50000:
            lines.append(goal(f"ranks get W -p P, {pods:,} pods", "<= 0.5 s", 0.3, "s", True, SCALE, pods=pods,
                              series="ranks get W -p P", seconds=0.3, rss_mb=80.0))
        s = round(curl[pods] * 0.4, 3)
        lines.append(goal(f"ranks list -A -o json, {pods:,} pods, vs curl", "<= 0.5x curl full pod LIST", s, "s",
                          True if pods != 50000 else None, SCALE, baseline="curl full pod LIST",
                          baseline_measured=curl[pods], pods=pods, series="ranks list -A -o json", seconds=s,
                          rss_mb=pods / 200))
    lines.append(goal("ranks list -A -o json, 100,000 pods, vs kubectl", "<= 0.05x kubectl", 6.0, "s", None, SCALE,
                      baseline="kubectl get pods -A -o json", baseline_measured=None,
                      note="kubectl not run at 100,000 pods: it would need ~24 GB"))
    lines.append(goal("ranks projects, 20,000 pods, vs kubectl", "<= 0.05x kubectl", 8.0, "s", False, SCALE,
                      baseline="kubectl get pods -A -o json", baseline_measured=80.0))
    lines.append(goal("dashboard: idle CPU, 20,000 pods", "<= 0.5 % of a core", None, "% of a core", None, DASH,
                      note="not run: 3.0 GB of memory available"))
    lines.append({"test": SCALE, "outcome": "failed", "duration": 300.5, "message": "AssertionError: slow",
                  "at": 1_767_226_000.0})
    lines.append({"test": DASH, "outcome": "passed", "duration": 60.0, "message": "", "at": 1_767_226_100.0,
                  "load1": 3.25})
    jsonl = tmp_path / "bench-results.jsonl"
    jsonl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    previous = tmp_path / "bench-results.json"  # the last report: one goal this run lost, one dropped
    previous.write_text(json.dumps({"goals": [
        {"goal": "ranks top nodes, 20,000 pods, vs curl", "target": "<= 0.5x curl full pod LIST", "unit": "s",
         "source": SCALE},
        {"goal": "an old dashboard goal", "target": "<= 1 s", "unit": "s", "source": DASH},
    ]}))
    return jsonl, previous


def test_report_json_markdown_and_chart(bench_report: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench_report, "machine_info", lambda records=(): dict(MACHINE))
    monkeypatch.setenv("COLUMNS", "200")  # the printed table's width, whatever terminal runs the tests
    jsonl, out_json = synthetic(tmp_path)
    md, chart = tmp_path / "docs" / "performance.md", tmp_path / "docs" / "performance.svg"
    limits = tmp_path / "limits.md"
    limits.write_text("## Design limits\n\nPython's start-up.\n")
    perf = tmp_path / "perf"  # the benchmark files: the door's did not run
    perf.mkdir()
    for name in ("test_bench_scale.py", "test_bench_dashboard.py", "test_bench_door.py", "conftest.py"):
        (perf / name).write_text("")
    assert bench_report.main(["--jsonl", str(jsonl), "--json", str(out_json), "--markdown", str(md),
                              "--chart", str(chart), "--limits", str(limits), "--benchmarks", str(perf)]) == 0
    assert md.read_text().rstrip().endswith("## Design limits\n\nPython's start-up.")

    report = json.loads(out_json.read_text())
    assert report["machine"] == MACHINE
    by_name = {g["goal"]: g for g in report["goals"]}
    for g in report["goals"]:
        assert {"goal", "target", "measured", "unit", "baseline", "baseline_measured", "met"} <= g.keys()
    met = by_name["ranks list -A -o json, 20,000 pods, vs curl"]
    assert (met["measured"], met["baseline"], met["baseline_measured"], met["met"], met["status"]) == (
        1.2, "curl full pod LIST", 3.0, True, "met")
    assert met["ratio"] == pytest.approx(0.4) and met["extra"]["pods"] == 20000
    assert by_name["ranks projects, 20,000 pods, vs kubectl"]["status"] == "NOT MET"
    assert by_name["ranks list -A -o json, 50,000 pods, vs curl"]["status"] == "figure"
    no_baseline = by_name["ranks list -A -o json, 100,000 pods, vs kubectl"]
    assert no_baseline["status"] == "not measured" and no_baseline["measured"] == 6.0 and "24 GB" in no_baseline["note"]
    unmeasured = by_name["dashboard: idle CPU, 20,000 pods"]
    assert unmeasured["status"] == "not measured" and "3.0 GB" in unmeasured["note"]
    missing = by_name["ranks top nodes, 20,000 pods, vs curl"]  # its benchmark failed this run
    assert missing["status"] == "missing" and missing["measured"] is None and "AssertionError: slow" in missing["note"]
    assert "an old dashboard goal" not in by_name  # its benchmark passed without it: dropped
    assert report["summary"] | {"seconds": 0} == {
        "goals": 18, "met": 4, "NOT MET": 1, "not measured": 3, "figure": 9, "missing": 1, "benchmark_tests": 2,
        "benchmarks_failed": 1, "benchmark_files_not_run": 1, "seconds": 0}
    assert report["not_run"] == ["tests/perf/test_bench_door.py"]
    assert [(f["file"], f["failed"], f["seconds"], f["load1"]) for f in report["files"]] == [
        ("tests/perf/test_bench_scale.py", 1, 300.5, None), ("tests/perf/test_bench_dashboard.py", 0, 60.0, 3.25)]

    text = md.read_text()
    assert "| CPU | Test CPU |" in text and "| kubectl | v1.35.0 |" in text
    header = "| Goal | Target | Measured | Baseline | Baseline measured | Ratio | Status | Note |"
    assert text.count(header) == 2  # one table per benchmark file
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines() if line.startswith("| ")}
    assert rows["ranks list -A -o json, 20,000 pods, vs curl"].split(" | ")[1:7] == [
        "<= 0.5x curl full pod LIST", "1.20 s", "curl full pod LIST", "3.00 s", "0.40x", "met"]
    assert "**NOT MET**" in rows["ranks projects, 20,000 pods, vs kubectl"]
    assert "**not measured**" in rows["dashboard: idle CPU, 20,000 pods"] and "3.0 GB" in text
    assert "**missing**" in rows["ranks top nodes, 20,000 pods, vs curl"]
    assert "![" in text and "(performance.svg)" in text
    assert "kubectl get pods -A -o json at 100,000 pods: kubectl not run at 100,000 pods" in text
    assert "| tests/perf/test_bench_scale.py | 1 | 0 | 1 | 0 | 5.0 min | — |" in text
    assert "| tests/perf/test_bench_dashboard.py | 1 | 1 | 0 | 0 | 1.0 min | 3.25 |" in text
    assert "Not run (no outcome" in text and "- `tests/perf/test_bench_door.py`" in text
    assert "benchmark files not run: 1" in text

    svg = chart.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for series in ("ranks list -A -o json", "ranks get W -p P", "floor: Python start + Table LIST",
                   "goal: 1.5x the floor", "goal: ranks get W -p P &lt;= 0.5 s", "kubectl get pods -A -o json",
                   "curl full pod LIST"):
        assert series in svg  # text kept as text (svg.fonttype none)
    assert "not measured at 100k" in svg

    shown = capsys.readouterr().out
    assert "ranks projects, 20,000 pods, vs kubectl" in shown and "NOT MET" in shown and "missing" in shown
    assert "not run: tests/perf/test_bench_door.py" in shown


def test_nothing_to_report(bench_report: Any, tmp_path: Path) -> None:
    out = tmp_path / "bench-results.json"
    assert bench_report.main(["--jsonl", str(tmp_path / "none.jsonl"), "--json", str(out)]) == 2
    assert not out.exists()
