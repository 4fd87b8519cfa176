"""#16, #31: ranks' read commands against the API's floor, their own floor and kubectl, at 20,000,
50,000 and 100,000 pods.

For each size, one simcluster (`ranks sim --scenario scale --nodes 1000 --pods N`, its own process,
TLS; tests/perf/conftest.py's `scale_clusters`, shared with the list and model benchmarks), and on
it, in the same run:

- curl's full pod LIST (`GET /api/v1/pods` to the last byte, the answer discarded): time and bytes.
  No client of the API can show every pod faster: #16's floor. The baseline is the first LIST on
  the fresh cluster, for which the server encodes every pod as kube-apiserver does on every LIST;
  simcluster then keeps each pod's encoding, so the repeated LISTs (median of 2, recorded as a
  figure of their own) only copy bytes, which no real API server does for a LIST.
- the commands' own floor (#31): Python's start (the interpreter of `.venv/bin/ranks`'s `#!` line,
  started as the command starts it, with site and the virtualenv's .pth files: `python -c pass`,
  median of 6, interleaved with the commands) plus curl's cells-only Table LIST of every pod
  (`GET /api/v1/pods?includeObject=None`, `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`,
  to the last byte), what the commands fetch of the pods. The first Table LIST on the fresh cluster
  and 2 repeated ones are recorded; simcluster builds every Table anew (it keeps no Table), so the
  floor takes the median of the three.
- `kubectl get pods -A -o json > /dev/null`: time to exit and peak RSS, one run. Not run where the
  memory available is less than it would take (its peak at 20,000 pods scaled to N, +25 %): at
  100,000 pods it needs ~19 GB. Its figure is then None, with the reason.
- `ranks list -A -o json`, `ranks projects`, `ranks top nodes` (`.venv/bin/ranks --kubeconfig KC`,
  each its own process, stdout to a file): time to exit and peak RSS (`wait4`), median of 3 runs,
  the commands interleaved. Each must exit 0, and list's JSON must hold every workload the cluster
  has (its PyTorchJobs, TFJobs, XGBoostJobs, MPIJobs and unowned batch Jobs, counted through the API).
- `ranks get W -p P` (#31), interleaved with them, median of 3: W is a typical workload of a typical
  project of the scenario, chosen from the first `ranks list`'s JSON: the project with the median
  number of workloads, and in it the running workload whose ranks are nearest the median of every
  workload's (ties by name; the note names it and its pods). It must exit 0 and name W.

Goals, each command at 20,000 and at 100,000 pods: <= 1.5x its floor (#31), <= 0.5x curl's full
LIST (#16), <= 0.05x kubectl where kubectl was run (#16); `ranks get` <= 0.5 s at 100,000 pods
(#31). 50,000 pods (and `ranks get` at 20,000 and 50,000): the same figures, for the chart, without
a verdict. Every figure is recorded (tests/perf/results.py) with `pods`, `series`, `seconds` and
`rss_mb` for the report's chart; a goal is asserted at the end of its size, after everything was
recorded.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.perf.conftest import MemoryShort, Run, ScaleCluster, ScaleClusters, measure, mem_available_gb
from tests.perf.results import record

pytestmark = pytest.mark.timeout(1500)

SIZES = (20000, 50000, 100000)
JUDGED = (20000, 100000)  # the sizes with a verdict; 50,000 is for the chart
RUNS = 3
CURL_REPEAT = 2
PYTHON_RUNS = 2  # Python's start, each round (RUNS x this in all)
VS_CURL = 0.5
VS_KUBECTL = 0.05
VS_FLOOR = 1.5
GET_GOAL_S = 0.5
GET_JUDGED = (100000,)
COMMANDS: dict[str, tuple[str, ...]] = {
    "ranks list -A -o json": ("list", "-A", "-o", "json"),
    "ranks projects": ("projects",),
    "ranks top nodes": ("top", "nodes"),
}
CURL = "curl full pod LIST"
CURL_REPEATED = "curl full pod LIST, repeated"
TABLE = "curl Table pod LIST (cells only)"
TABLE_REPEATED = "curl Table pod LIST (cells only), repeated"
PYTHON = "Python start"
FLOOR = "floor: Python start + Table LIST"
GET = "ranks get W -p P"
KUBECTL = "kubectl get pods -A -o json"
KUBECTL_GB_PER_1000_PODS = 0.19  # kubectl's peak, only to decide whether to run it when 20,000 was not measured
KUBECTL_MARGIN = 1.25
RANKS = Path(sys.executable).with_name("ranks")

# (group/version, plural) of the workload kinds the scale scenario (or anything) may hold
WORKLOAD_LISTS = (("kubeflow.org/v1", "pytorchjobs"), ("kubeflow.org/v1", "tfjobs"),
                  ("kubeflow.org/v1", "xgboostjobs"), ("kubeflow.org/v2beta1", "mpijobs"), ("batch/v1", "jobs"))


@dataclass
class Figures:
    """One size's figures; None where not measured, with the reason in `notes`."""

    pods: int
    curl_s: float | None = None
    curl_repeated_s: float | None = None
    curl_bytes: int | None = None
    table_s: float | None = None  # the first Table LIST
    table_repeated_s: float | None = None
    table_bytes: int | None = None
    table_median_s: float | None = None  # of the first and the repeated ones: the floor's
    python_s: float | None = None
    kubectl: Run | None = None
    get: tuple[float, float] | None = None  # ranks get W -p P: (median s, median RSS MB)
    get_target: str = ""  # "W -p P (N pods)"
    ranks: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # (median s, median RSS MB)
    notes: dict[str, str] = field(default_factory=dict)  # by series
    problems: list[str] = field(default_factory=list)  # what must fail the test once recorded


@pytest.fixture(scope="module")
def kubectl_peaks() -> dict[int, float]:
    """kubectl's peak RSS (MB) by pod count, as measured in this module (to decide whether to run it)."""
    return {}


def cluster_workloads(sc: ScaleCluster) -> int:
    n = 0
    for gv, plural in WORKLOAD_LISTS:
        items = (sc.api_get(f"/apis/{gv}/{plural}") or {}).get("items", [])
        if plural == "jobs":  # batch Jobs an operator made (an MPIJob's launcher) belong to that workload
            items = [i for i in items if not i["metadata"].get("ownerReferences")]
        n += len(items)
    return n


def python_argv() -> list[str]:
    """The interpreter `ranks` starts with, as its `#!` line starts it."""
    first = RANKS.read_text().splitlines()[0]
    return first[2:].split() if first.startswith("#!") else [sys.executable]


def env_for(home: Path) -> dict[str, str]:
    drop = ("KUBE", "XDG_", "RANKS_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)} | {"HOME": str(home)}


def kubectl_need_gb(pods: int, peaks: dict[int, float]) -> tuple[float, str]:
    """Memory kubectl would take at this size: its measured peak at the nearest smaller size, scaled."""
    smaller = [p for p in peaks if p <= pods]
    if smaller:
        base = max(smaller)
        need = peaks[base] / 1024 * pods / base * KUBECTL_MARGIN
        return need, (f"its peak at {base:,} pods, {peaks[base] / 1024:.1f} GB, scaled to {pods:,} pods "
                      f"+{KUBECTL_MARGIN - 1:.0%}")
    need = KUBECTL_GB_PER_1000_PODS * pods / 1000 * KUBECTL_MARGIN
    return need, f"~{KUBECTL_GB_PER_1000_PODS} GB per 1,000 pods, +{KUBECTL_MARGIN - 1:.0%} (not measured in this run)"


def measure_size(sc: ScaleCluster, peaks: dict[int, float], tmp: Path) -> Figures:
    f = Figures(sc.pods)
    curl = sc.curl_list(repeat=CURL_REPEAT)
    f.curl_s, f.curl_bytes = curl.seconds, curl.bytes
    f.curl_repeated_s = statistics.median(curl.repeated)
    table = sc.table_list(repeat=CURL_REPEAT)
    f.table_s, f.table_bytes = table.seconds, table.bytes
    f.table_repeated_s = statistics.median(table.repeated)
    f.table_median_s = statistics.median((table.seconds, *table.repeated))

    need, why = kubectl_need_gb(sc.pods, peaks)
    avail = mem_available_gb()
    if avail < need:
        f.notes[KUBECTL] = (f"kubectl not run at {sc.pods:,} pods: it would need ~{need:.0f} GB ({why}), "
                            f"{avail:.1f} GB available")
    else:
        try:
            f.kubectl = sc.kubectl_get_pods()
            peaks[sc.pods] = f.kubectl.rss_mb
        except AssertionError as exc:
            f.notes[KUBECTL] = f"kubectl failed: {str(exc)[-300:]}"
            f.problems.append(f.notes[KUBECTL])

    expected = cluster_workloads(sc)
    home = tmp / f"home-{sc.pods}"
    home.mkdir()
    env = env_for(home)
    runs: dict[str, list[Run]] = {name: [] for name in COMMANDS}
    starts: list[Run] = []
    gets: list[Run] = []
    target: tuple[str, str] | None = None
    for i in range(RUNS):
        for _ in range(PYTHON_RUNS):
            r = measure([*python_argv(), "-c", "pass"], env=env)
            if r.returncode == 0:
                starts.append(r)
        for name, args in COMMANDS.items():
            out = tmp / f"out-{sc.pods}-{i}.txt"
            r = measure([str(RANKS), "--kubeconfig", str(sc.sim.kubeconfig), *args], stdout=out, env=env)
            if r.returncode != 0:
                f.notes[name] = f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
                f.problems.append(f"{name} at {sc.pods:,} pods: {f.notes[name]}")
            elif name == "ranks list -A -o json":
                listed = json.loads(out.read_bytes())["workloads"]
                got = len(listed)
                if target is None:
                    target, f.get_target = typical_workload(listed)
                if got != expected:
                    f.problems.append(f"{name} at {sc.pods:,} pods: {got} workloads, the cluster has {expected}")
                f.notes.setdefault(name, f"{got:,} workloads listed, as many as the cluster has"
                                   if got == expected else f"{got:,} workloads listed, the cluster has {expected:,}")
            out.unlink(missing_ok=True)
            runs[name].append(r)
        if target is not None:
            gets.append(measure_get(sc, target, env, tmp / f"get-{sc.pods}-{i}.txt", f))
    if starts:
        f.python_s = statistics.median(r.seconds for r in starts)
    ok = [r for r in gets if r.returncode == 0]
    if target is None:
        f.notes.setdefault(GET, "no workload to get: ranks list gave none")
    elif ok and len(ok) == len(gets):
        f.get = (statistics.median(r.seconds for r in ok), statistics.median(r.rss_mb for r in ok))
    for name, rs in runs.items():
        ok = [r for r in rs if r.returncode == 0]
        f.ranks[name] = ((statistics.median(r.seconds for r in ok), statistics.median(r.rss_mb for r in ok))
                         if len(ok) == len(rs) else None)
    return f


def shown_argv(argv: list[str]) -> list[str]:
    """The command as the report shows it: paths in the repository relative to it."""
    root = RANKS.parents[2]
    return [os.path.relpath(a, root) if a.startswith(f"{root}/") else a for a in argv]


def typical_workload(listed: list[dict[str, Any]]) -> tuple[tuple[str, str], str]:
    """((workload, project), its description): the project with the median number of workloads,
    and in it the running workload whose ranks are nearest the median of every workload's."""
    by_project: dict[str, list[dict[str, Any]]] = {}
    for w in listed:
        by_project.setdefault(w["project"], []).append(w)
    projects = sorted(by_project, key=lambda p: (len(by_project[p]), p))
    project = projects[len(projects) // 2]
    median_ranks = statistics.median(w["ranks_total"] for w in listed)
    ws = by_project[project]
    running = [w for w in ws if w["status"] == "Running"] or ws
    w = min(running, key=lambda w: (abs(w["ranks_total"] - median_ranks), w["name"]))
    return (w["name"], project), (f"{w['name']} -p {project} ({w['kind']}, {w['ranks_total']} pods; the project has "
                                  f"{len(ws)} of {len(listed):,} workloads, the median project; median ranks "
                                  f"{median_ranks:g})")


def measure_get(sc: ScaleCluster, target: tuple[str, str], env: dict[str, str], out: Path, f: Figures) -> Run:
    name, project = target
    r = measure([str(RANKS), "--kubeconfig", str(sc.sim.kubeconfig), "get", name, "-p", project], stdout=out, env=env)
    text = out.read_text(errors="replace")
    out.unlink(missing_ok=True)
    if r.returncode != 0:
        f.notes[GET] = f"exit {r.returncode}: {r.stderr.strip()[-300:]}"
        f.problems.append(f"{GET} at {sc.pods:,} pods: {f.notes[GET]}")
    elif name not in text:
        f.notes[GET] = f"its output does not name {name}: {text[:200]!r}"
        f.problems.append(f"{GET} at {sc.pods:,} pods: {f.notes[GET]}")
        r.returncode = -1  # (not a figure of the command the goal is about)
    return r


def floor_s(f: Figures) -> float | None:
    return None if f.python_s is None or f.table_median_s is None else f.python_s + f.table_median_s


def record_size(f: Figures) -> list[str]:
    """Record every figure and goal of one size; returns the goals not met (judged sizes only)."""
    n = f.pods
    judged = n in JUDGED
    unmet: list[str] = []
    record(f"{CURL}, {n:,} pods (baseline)", "the floor (figure)", rnd(f.curl_s), "s", met=None,
           note=f"{f.curl_bytes / 1e6:,.0f} MB to the last byte; the first LIST on the fresh cluster: the "
                "server encodes every pod" if f.curl_bytes else f.notes.get(CURL, ""),
           pods=n, series=CURL, seconds=rnd(f.curl_s), bytes=f.curl_bytes)
    record(f"{CURL_REPEATED}, {n:,} pods", "figure", rnd(f.curl_repeated_s), "s", met=None,
           note=f"median of {CURL_REPEAT} LISTs after the first: simcluster sends the encodings it kept "
                "(a real API server encodes every LIST)" if f.curl_repeated_s else f.notes.get(CURL, ""),
           pods=n, series=CURL_REPEATED, seconds=rnd(f.curl_repeated_s))
    record(f"{TABLE}, {n:,} pods", "figure", rnd(f.table_s), "s", met=None,
           note=(f"{f.table_bytes / 1e6:,.1f} MB to the last byte (GET /api/v1/pods?includeObject=None as a "
                 "meta.k8s.io/v1 Table); the first on the fresh cluster") if f.table_bytes else f.notes.get(CURL, ""),
           pods=n, seconds=rnd(f.table_s), bytes=f.table_bytes)
    record(f"{TABLE_REPEATED}, {n:,} pods", "figure", rnd(f.table_repeated_s), "s", met=None,
           note=f"median of {CURL_REPEAT} after the first (simcluster builds every Table anew)"
           if f.table_repeated_s else f.notes.get(CURL, ""), pods=n,
           seconds=rnd(f.table_repeated_s))
    record(f"{PYTHON}, {n:,} pods", "figure", rnd(f.python_s), "s", met=None,
           note=(f"{' '.join(shown_argv(python_argv()))} -c pass, the interpreter of ranks' #! line started as ranks starts "
                 f"it; median of {RUNS * PYTHON_RUNS}, interleaved with the commands")
           if f.python_s else f.notes.get(CURL, ""), pods=n, seconds=rnd(f.python_s))
    floor = floor_s(f)
    record(f"{FLOOR}, {n:,} pods (baseline)", "the commands' floor (figure)", rnd(floor), "s", met=None,
           note=(f"Python's start {f.python_s:.3f} s + the Table LIST's median of {CURL_REPEAT + 1} "
                 f"{f.table_median_s:.3f} s (first {f.table_s:.3f} s, repeated {f.table_repeated_s:.3f} s)")
           if floor is not None else f.notes.get(CURL, ""), pods=n, series=FLOOR, seconds=rnd(floor))
    k = f.kubectl
    record(f"{KUBECTL}, {n:,} pods (baseline)", "baseline (figure)", rnd(k.seconds) if k else None, "s", met=None,
           note=f.notes.get(KUBECTL, f"peak RSS {k.rss_mb:,.0f} MB, one run" if k else ""),
           pods=n, series=KUBECTL, seconds=rnd(k.seconds) if k else None, rss_mb=rnd(k.rss_mb, 0) if k else None)
    for name in COMMANDS:
        fig = f.ranks.get(name)
        s, rss = fig if fig else (None, None)
        note = f.notes.get(name, "")
        if fig:
            note = f"peak RSS {rss:,.0f} MB, median of {RUNS}" + (f"; {note}" if note else "")
        extra: dict[str, Any] = {"pods": n, "series": name, "seconds": rnd(s), "rss_mb": rnd(rss, 0)}
        target = f"<= {VS_FLOOR}x {FLOOR}" if judged else f"figure (goal <= {VS_FLOOR}x at 20k and 100k)"
        met = None if not judged or s is None or floor is None else s <= VS_FLOOR * floor
        record(f"{name}, {n:,} pods, vs its floor", target, rnd(s), "s", met=met, baseline=FLOOR,
               baseline_measured=rnd(floor), note=note, **extra)
        if met is False:
            unmet.append(f"{name} at {n:,} pods: {s:.2f} s > {VS_FLOOR} x its floor {floor:.2f} s")
        target = f"<= {VS_CURL}x {CURL}" if judged else f"figure (goal <= {VS_CURL}x at 20k and 100k)"
        met = None if not judged or s is None or f.curl_s is None else s <= VS_CURL * f.curl_s
        record(f"{name}, {n:,} pods, vs curl", target, rnd(s), "s", met=met, baseline=CURL,
               baseline_measured=rnd(f.curl_s), note=note, **extra)
        if met is False:
            unmet.append(f"{name} at {n:,} pods: {s:.2f} s > {VS_CURL} x curl {f.curl_s:.2f} s")
        target = f"<= {VS_KUBECTL}x kubectl" if judged else f"figure (goal <= {VS_KUBECTL}x at 20k and 100k)"
        met = None if not judged or s is None or k is None else s <= VS_KUBECTL * k.seconds
        knote = f.notes.get(KUBECTL, "") if k is None else ""
        record(f"{name}, {n:,} pods, vs kubectl", target, rnd(s), "s", met=met, baseline=KUBECTL,
               baseline_measured=rnd(k.seconds) if k else None, note="; ".join(x for x in (note, knote) if x),
               **extra)
        if met is False and k is not None:
            unmet.append(f"{name} at {n:,} pods: {s:.2f} s > {VS_KUBECTL} x kubectl {k.seconds:.2f} s")
    s, rss = f.get if f.get else (None, None)
    get_judged = n in GET_JUDGED
    met = None if not get_judged or s is None else s <= GET_GOAL_S
    note = "; ".join(x for x in (f.get_target, f"peak RSS {rss:,.0f} MB, median of {RUNS}" if rss else "",
                                 f.notes.get(GET, "")) if x)
    record(f"{GET}, {n:,} pods", f"<= {GET_GOAL_S} s" if get_judged else f"figure (goal <= {GET_GOAL_S} s at 100k)",
           rnd(s), "s", met=met, note=note, pods=n, series=GET, seconds=rnd(s), rss_mb=rnd(rss, 0))
    if met is False:
        unmet.append(f"{GET} at {n:,} pods: {s:.2f} s > {GET_GOAL_S} s ({f.get_target})")
    return unmet


def rnd(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(v, digits)


def print_size(f: Figures) -> None:
    floor = floor_s(f)
    print(f"\n[bench scale] {f.pods:,} pods: {CURL} {f.curl_s:.2f} s ({(f.curl_bytes or 0) / 1e6:,.0f} MB; "
          f"repeated {f.curl_repeated_s:.2f} s); {FLOOR} {floor or 0:.2f} s (Python {f.python_s or 0:.3f} s, "
          f"Table LIST first {f.table_s or 0:.2f} s, repeated {f.table_repeated_s or 0:.2f} s, "
          f"{(f.table_bytes or 0) / 1e6:,.1f} MB); "
          + (f"{KUBECTL} {f.kubectl.seconds:.2f} s, {f.kubectl.rss_mb:,.0f} MB" if f.kubectl
             else f.notes.get(KUBECTL, "kubectl not run")))
    for name in COMMANDS:
        fig = f.ranks.get(name)
        if fig is None:
            print(f"[bench scale]   {name}: not measured ({f.notes.get(name, '')})")
            continue
        s, rss = fig
        vs_k = f", {s / f.kubectl.seconds:.3f}x kubectl (goal <= {VS_KUBECTL})" if f.kubectl else ""
        vs_f = f"{s / floor:.2f}x its floor (goal <= {VS_FLOOR}), " if floor else ""
        print(f"[bench scale]   {name}: {s:.2f} s, {rss:,.0f} MB; {vs_f}{s / f.curl_s:.2f}x curl "
              f"(goal <= {VS_CURL}){vs_k}")
    if f.get:
        print(f"[bench scale]   {GET}: {f.get[0]:.2f} s, {f.get[1]:,.0f} MB (goal <= {GET_GOAL_S} s at 100k): "
              f"{f.get_target}")
    else:
        print(f"[bench scale]   {GET}: not measured ({f.notes.get(GET, '')})")


@pytest.fixture(scope="module")
def clusters(scale_clusters: ScaleClusters) -> Iterator[ScaleClusters]:
    yield scale_clusters
    scale_clusters.close()  # the largest holds GBs: not kept for the benchmarks after this one


@pytest.mark.parametrize("pods", SIZES, ids=[f"{n // 1000}k" for n in SIZES])
def test_read_commands_vs_curl_and_kubectl(pods: int, clusters: ScaleClusters, kubectl_peaks: dict[int, float],
                                           tmp_path: Path) -> None:
    try:
        sc = clusters.get(pods)
    except MemoryShort as exc:
        f = Figures(pods, notes=dict.fromkeys((CURL, KUBECTL, GET, *COMMANDS), str(exc)))
        record_size(f)
        pytest.skip(str(exc))
    f = measure_size(sc, kubectl_peaks, tmp_path)
    print_size(f)
    unmet = record_size(f)
    assert not f.problems, f.problems
    assert not unmet, unmet
