"""`ranks idle` (#15) as a user runs it: a real process against simcluster's demo, with the DCGM
exporters scraped directly and with a real Prometheus (whose utilisation history decides since
when a session is idle). The demo's interactive sessions (hvd-interactive, pt-interactive) run
`sleep infinity` with no utilisation profile, so their GPUs read ~0%; its training jobs never
count, whatever they read."""

from __future__ import annotations

import calendar
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.dashboard_kit import make_app
from tests.prometheus_server import prometheus_server
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
A = "runai-team-a"
SESSIONS = {"hvd-interactive": 2, "pt-interactive": 3}  # GPUs: 2 MPI workers; a master and 2 workers
TRAINING = {"llama-finetune", "resnet-tf"}
UTIL = "simcluster.ranks/gpu-util"
KEYS = ["name", "namespace", "project", "user", "gpus", "idle_since", "idle_gpu_hours"]


def idle(*args: str, kubeconfig: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    e.update({"RANKS_CONFIG": "", "NO_COLOR": "1", **(env or {})})
    return subprocess.run([sys.executable, "-m", "tui.cli", "idle", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=e, stdin=subprocess.DEVNULL)


def pods(t: ThreadedSimCluster, ns: str = A) -> dict[str, dict[str, Any]]:
    import copy

    return t.call(lambda: {p["metadata"]["name"]: copy.deepcopy(p) for p in t.sim.store.objects(("", "pods"), ns)})


def running(t: ThreadedSimCluster) -> bool:
    phases = {n: p["status"].get("phase") for n, p in pods(t).items()}
    # (the sessions whole: hvd-interactive's launcher starts once its workers are ready)
    want = [n for n in phases if n.startswith(("hvd-interactive", "pt-interactive", "llama-finetune"))]
    return len(want) == 1 + 2 + 3 + 4 and all(phases[n] == "Running" for n in want)


def created(p: dict[str, Any]) -> float:
    return calendar.timegm(time.strptime(p["metadata"]["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))


def parse(ts: str) -> float:
    return calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ"))


def annotate(t: ThreadedSimCluster, names: list[str], util: str) -> None:
    def apply() -> None:
        rt = t.sim.registry.get("", "v1", "pods")
        for name in names:
            t.sim.store.mutate(rt, A, name, lambda o: o["metadata"].setdefault("annotations", {}).__setitem__(UTIL, util))
    t.call(apply)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="demo", workdir=tmp_path_factory.mktemp("idle")) as t:
        wait_for(lambda: running(t), 60, "the demo's sessions and llama-finetune running", interval=0.2)
        yield t


def sessions_of(out: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert list(data) == ["sessions"]
    for s in data["sessions"]:
        assert list(s) == KEYS
    return data["sessions"]


def test_demo_sessions_listed_training_jobs_never(demo: ThreadedSimCluster) -> None:
    kc = demo.sim.kubeconfig_path

    def listed() -> tuple[float, list[dict[str, Any]]] | None:
        # (a session with a GPU rank its exporter did not answer for, on a busy machine, is not
        # known to be idle, and is rightly not listed: asked again)
        t = time.time()
        found = sessions_of(idle("-A", "-o", "json", kubeconfig=kc))
        return (t, found) if {s["name"] for s in found} >= set(SESSIONS) else None

    def hvd() -> str:
        r = subprocess.run([sys.executable, "-m", "tui.cli", "get", "hvd-interactive", "-p", "team-a", "--kubeconfig",
                            str(kc)], capture_output=True, text=True, timeout=60, cwd=ROOT)
        return r.stdout + r.stderr

    before, found = wait_for(listed, timeout=60, interval=1, what="both demo sessions read idle", detail=hvd)
    assert {s["name"]: s["gpus"] for s in found} == SESSIONS  # not llama-finetune, resnet-tf...
    hours = [s["idle_gpu_hours"] for s in found]
    assert hours == sorted(hours, reverse=True) and all(h > 0 for h in hours)
    by_pod = pods(demo)
    for s in found:
        assert (s["namespace"], s["project"], s["user"]) == (A, "team-a", "alice")
        # no Prometheus: one reading, nothing says otherwise, so idle since its GPU pods started
        start = max(created(p) for n, p in by_pod.items() if n.startswith(s["name"]) and "launcher" not in n)
        assert parse(s["idle_since"]) == start
        assert s["idle_gpu_hours"] == pytest.approx(SESSIONS[s["name"]] * (before - start) / 3600, abs=0.01)

    # the sessions read 0%, under any threshold; -p scopes to a project; -p with -A is a usage error
    # (each call reads the exporters again: on a busy machine one may not answer in time, as above)
    wait_for(lambda: len(sessions_of(idle("-A", "-o", "json", "--threshold", "0.0001", kubeconfig=kc))) == 2,
             timeout=60, interval=1, what="both sessions idle under a threshold of 0.0001%")
    assert sessions_of(idle("-p", "team-b", "-o", "json", kubeconfig=kc)) == []
    none = idle("-p", "team-b", kubeconfig=kc)
    assert none.returncode == 0 and none.stdout == ""
    assert "No interactive session holds idle GPUs in runai-team-b (all under 5% now)." in none.stderr
    both = idle("-p", "team-a", "-A", kubeconfig=kc)
    assert both.returncode == 2 and "cannot be used together" in both.stderr
    bad = idle("-A", "--threshold", "0", kubeconfig=kc)
    assert bad.returncode == 2, bad.stderr


def test_without_p_or_a_it_looks_where_the_dashboard_looks_and_says_so(demo: ThreadedSimCluster,
                                                                        tmp_path: Path) -> None:
    """The admin's context names `default`, where nothing runs: `ranks idle` looks in every project
    (team-a's sessions hold idle GPUs) and says why; a context whose namespace holds workloads is
    looked in alone, and an empty answer says where it looked and how to look further."""
    kc = demo.sim.kubeconfig_path
    wait_for(lambda: {s["name"] for s in sessions_of(idle("-A", "-o", "json", kubeconfig=kc))} >= set(SESSIONS),
             60, "both demo sessions read idle", interval=1)
    r = idle(kubeconfig=kc)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["PROJECT", "NAME"], r.stdout
    assert {tuple(ln.split()[:2]) for ln in lines[1:]} == {("team-a", n) for n in SESSIONS}, r.stdout
    assert r.stderr.strip() == ("ranks: note: default (the context's namespace) holds no workload; looked in every "
                                "project you may read"), r.stderr
    # the same rule for list
    r = subprocess.run([sys.executable, "-m", "tui.cli", "list", "--kubeconfig", str(kc)], capture_output=True,
                       text=True, timeout=120, cwd=ROOT, env={**os.environ, "RANKS_CONFIG": "", "NO_COLOR": "1"},
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and "holds no workload; looked in every project" in r.stderr, r.stderr
    assert {"team-a", "team-b", "research"} <= {ln.split()[0] for ln in r.stdout.splitlines()[1:]}, r.stdout
    # a context in team-b (its namespace holds workloads, none of them a session): looked there alone
    doc = yaml.safe_load(kc.read_text())
    for c in doc["contexts"]:
        c["context"]["namespace"] = "runai-team-b"
    other = tmp_path / "team-b.kubeconfig"
    other.write_text(yaml.safe_dump(doc))
    other.chmod(0o600)
    r = idle(kubeconfig=other)
    assert r.returncode == 0 and r.stdout == "", r
    assert r.stderr.strip() == ("No interactive session holds idle GPUs in runai-team-b (the context's namespace); "
                                "-A looks in every project, -p PROJECT in one (all under 5% now)."), r.stderr


def test_text_table_and_config_threshold(demo: ThreadedSimCluster, tmp_path: Path) -> None:
    kc = demo.sim.kubeconfig_path
    text = idle("-p", "team-a", kubeconfig=kc)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].split() == ["NAME", "USER", "GPUS", "IDLE", "SINCE", "IDLE", "FOR", "GPU-HOURS"]
    assert {ln.split()[0] for ln in lines[1:]} == set(SESSIONS)
    wide = idle("-A", "-o", "text", kubeconfig=kc)
    assert wide.stdout.splitlines()[0].split()[:2] == ["PROJECT", "NAME"]
    # hvd-interactive's GPUs read 3%: idle under the default 5%, not under a configured 2%
    hvd = sorted(n for n in pods(demo) if n.startswith("hvd-interactive-worker"))
    config = tmp_path / "config.toml"
    config.write_text("idle_threshold_percent = 2\n")
    annotate(demo, hvd, "3")
    try:
        assert {s["name"] for s in sessions_of(idle("-A", "-o", "json", kubeconfig=kc))} == set(SESSIONS)
        assert [s["name"] for s in sessions_of(idle("-A", "-o", "json", kubeconfig=kc,
                                                    env={"RANKS_CONFIG": str(config)}))] == ["pt-interactive"]
        assert len(sessions_of(idle("-A", "-o", "json", "--threshold", "4", kubeconfig=kc,
                                    env={"RANKS_CONFIG": str(config)}))) == 2  # the flag wins
    finally:
        annotate(demo, hvd, "0")
    config.write_text("idle_threshold_percent = 500\n")
    broken = idle("-A", kubeconfig=kc, env={"RANKS_CONFIG": str(config)})
    assert broken.returncode == 3 and "idle_threshold_percent" in broken.stderr


def test_prometheus_history_decides_since_when(demo: ThreadedSimCluster, tmp_path: Path) -> None:
    """pt-interactive is made busy (a utilisation profile on its pods) for longer than the CLI's
    history step (15 s), then idle again: while busy it is not listed; afterwards it is idle only
    since the end of the busy spell, which only Prometheus' history can tell."""
    from simcluster.gpu.prometheus import dcgm_scrape_config

    kc = demo.sim.kubeconfig_path
    targets = len(wait_for(lambda: t if len(t := demo.call(demo.sim.dcgm.targets)) >= 8 else None, 20,
                           "the 8 GPU nodes' exporters", interval=0.1))
    pt = sorted(n for n in pods(demo) if n.startswith("pt-interactive"))
    cfg = demo.call(dcgm_scrape_config, demo.sim)
    with prometheus_server(cfg, tmp_path / "prom") as prom:
        prom.wait_for("up == 1", lambda r: len(r) >= targets, timeout=45)
        prom.wait_for('DCGM_FI_DEV_GPU_UTIL{pod="hvd-interactive-worker-0"}', bool, timeout=45)
        url = prom.url
        found = sessions_of(idle("-A", "-o", "json", "--prometheus", url, kubeconfig=kc))
        assert {s["name"] for s in found} == set(SESSIONS)

        busy_from = time.time()
        annotate(demo, pt, "90")
        query = 'DCGM_FI_DEV_GPU_UTIL{pod=~"pt-interactive-.*"}'
        prom.wait_for(query, lambda r: len(r) == 3 and all(float(s["value"][1]) >= 80 for s in r), timeout=30)
        found = sessions_of(idle("-A", "-o", "json", "--prometheus", url, kubeconfig=kc))
        assert [s["name"] for s in found] == ["hvd-interactive"]  # pt-interactive reads 90%: not idle
        assert sessions_of(idle("-A", "-o", "json", "--prometheus", url, "--threshold", "95",
                                kubeconfig=kc))[0]["name"] in SESSIONS  # unless 90% counts as idle
        time.sleep(max(0.0, busy_from + 20 - time.time()))  # a history step (15 s) sees it busy
        annotate(demo, pt, "0")
        prom.wait_for(query, lambda r: len(r) == 3 and all(float(s["value"][1]) < 1 for s in r), timeout=30)
        found = {s["name"]: s for s in sessions_of(idle("-A", "-o", "json", "--prometheus", url, kubeconfig=kc))}
        assert set(found) == set(SESSIONS)
        since = parse(found["pt-interactive"]["idle_since"])
        assert since >= busy_from - 1, (since, busy_from)  # idle since the busy spell ended, not the start
        assert found["pt-interactive"]["idle_gpu_hours"] < 3 * 60 / 3600
        hvd_start = max(created(p) for n, p in pods(demo).items() if n.startswith("hvd-interactive-worker"))
        assert parse(found["hvd-interactive"]["idle_since"]) == hvd_start  # never busy in the history


async def test_dashboard_cluster_load_lists_the_same_sessions(demo: ThreadedSimCluster) -> None:
    """The cluster-load view's idle tab: the same function, run on the data thread over the live
    model (its GPU history included), with the configured threshold; Enter opens the session."""
    from textual.geometry import Region
    from textual.widgets import Static, TabbedContent

    from tests.waiting import pilot_wait
    from tui.screens.cluster import ClusterScreen
    from tui.screens.workload import WorkloadScreen
    from tui.settings import Settings
    from tui.widgets.keyed_table import KeyedTable

    def rendered(widget: Any) -> str:
        w, h = widget.size
        return "\n".join(strip.text for strip in widget.render_lines(Region(0, 0, w, h)))

    app = make_app(demo.sim.kubeconfig_path, Settings(refresh_interval=1, idle_threshold_percent=4))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot_wait(pilot, lambda: app.store.synced and len(app.store.workloads) >= 4, timeout=60,
                         what="first sync")
        await pilot.press("c")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ClusterScreen), 30, "cluster load")
        cluster = app.screen
        cluster.query_one(TabbedContent).active = "tab-idle"
        idle_table = cluster.query_one("#idle-table", KeyedTable)
        want = {(A, "MPIJob", "hvd-interactive"), (A, "PyTorchJob", "pt-interactive")}
        # (a busy machine's first GPU readings, then the verdict on the data thread: seconds)
        await pilot_wait(pilot, lambda: set(idle_table.order) == want, timeout=90, what="the two idle sessions",
                         detail=lambda: (idle_table.order, app.store.status.metrics_note, app.store.status.metrics_problem))
        shown = rendered(idle_table)
        assert shown.splitlines()[0].split() == ["SESSION", "PROJECT", "USER", "GPUS", "IDLE", "FOR", "GPU-HOURS"]
        assert idle_table.order[0] == (A, "PyTorchJob", "pt-interactive")  # 3 GPUs idle as long: more GPU-hours
        for line in shown.splitlines()[1:3]:
            name, project, user, gpus = line.split()[:4]
            assert (project, user, int(gpus)) == ("team-a", "alice", SESSIONS[name])
        # the age ticker moves "idle for" (and the GPU-hours) without a new computation
        pt = (A, "PyTorchJob", "pt-interactive")
        first = idle_table.row_text(pt).split()[4]
        await pilot_wait(pilot, lambda: idle_table.row_text(pt).split()[4] != first, 130, "idle for to tick",
                         interval=0.05)
        note = rendered(cluster.query_one("#idle", Static))
        assert "2 interactive sessions hold 5 GPUs all under 4% use" in note, note
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen), 30, "the session's screen")
        assert app.screen.key == (A, "PyTorchJob", "pt-interactive")
