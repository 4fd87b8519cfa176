"""#15 in the dashboard (`App.run_test()` against the live demo, no mocks): the hung job's marker in
the workloads list (and none on the others), the straggler highlighted in the detail with each
rank's STEP and LOSS from its followed log, why a gang is pending, and a failure whose pods are gone
shown from the flight recorder's recording."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Static

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.dashboard_kit import make_app, status_of, text_of
from tests.waiting import pilot_wait
from tui.screens.lists import WorkloadsScreen
from tui.screens.workload import WorkloadScreen
from tui.widgets.keyed_table import KeyedTable

SIZE = (160, 48)
HUNG = ("runai-team-b", "PyTorchJob", "gpt-hung")
LLAMA = ("runai-team-a", "PyTorchJob", "llama-finetune")
GANG = ("runai-team-a", "PyTorchJob", "big-pretrain")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="demo", workdir=tmp_path_factory.mktemp("diag") / "sim") as t:
        yield t


async def test_hung_marker_straggler_progress_and_why_pending(live: ThreadedSimCluster,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    app = make_app(live.sim.kubeconfig_path, hang_after_minutes=0.25, refresh_interval=1)
    async with app.run_test(size=SIZE) as pilot:
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and app.store.synced,
                         timeout=20, what="the workloads list")
        lst = app.screen
        await pilot_wait(pilot, lambda: "▲ hung " in status_of(lst.table, HUNG), timeout=60,
                         what="gpt-hung marked hung")
        others = [k for k in lst.table.order if k != HUNG]  # (no hang or straggler marked elsewhere)
        assert others and not any(("▲ hung" in (s := status_of(lst.table, k)) or "▲ straggler" in s) for k in others)

        # the straggler: by each rank's steps per second from the detail's followed log
        app.open_workload(LLAMA)
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and bool(app.screen.query("#ranks")),
                         what="llama's detail")
        detail = app.screen
        ranks = detail.query_one("#ranks", KeyedTable)
        await pilot_wait(pilot, lambda: "▲ slow" in status_of(ranks, "llama-finetune-worker-2"), timeout=60,
                         what="worker-2 flagged a straggler")
        for pod in ("llama-finetune-master-0", "llama-finetune-worker-0", "llama-finetune-worker-1"):
            # (no flag but its GPUs' health: the demo's badly cooled GPU throttles under one of them)
            # (as it heats, more reasons: sw_thermal, then hw_slowdown, hw_thermal)
            assert "▲" not in re.sub(r"▲ throttled [a-z_,]+", "", status_of(ranks, pod))
        cols = ranks.labels
        assert "STEP" in cols and "LOSS" in cols
        step = cols.index("STEP")
        steps = {k: ranks.shown[k][step].plain for k in ranks.order}
        assert all(v.isdigit() for v in steps.values()), steps
        header = detail.query_one("#header", Static)
        await pilot_wait(pilot, lambda: re.search(r"step \d+/5000 \(slowest rank\) · ETA \S+", text_of(header)),
                         timeout=20, what="the slowest rank's step of 5000 and the ETA in the header")
        assert "straggler worker-2" in text_of(detail.query_one("#pending", Static))

        # why the gang waits
        app.go_back()
        app.open_workload(GANG)
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.key == GANG
                         and bool(app.screen.query("#pending")), what="big-pretrain's detail")
        await pilot_wait(pilot, lambda: "needs 5 pods x 8 GPUs together" in text_of(
            app.screen.query_one("#pending", Static)), timeout=20, what="why big-pretrain is pending")


async def test_diagnostics_ask_the_cluster_for_nothing_the_views_do_not_need(live: ThreadedSimCluster,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path: Path) -> None:
    """Hangs and stragglers are judged on what the model holds: on the workloads list the
    dashboard reads no log and the same requests per metrics refresh as ever (the exporters'
    metrics), whatever it flags; the detail follows the logs of the workload shown, and only its."""
    import time

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    app = make_app(live.sim.kubeconfig_path, hang_after_minutes=0.25, refresh_interval=1)
    async with app.run_test(size=SIZE) as pilot:
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and app.store.synced,
                         timeout=20, what="the workloads list")
        crash = ("runai-team-b", "PyTorchJob", "bert-crash")  # (its failure is read once, by the flight
        await pilot_wait(pilot, lambda: crash in app.store.workloads  # recorder: let that be over)
                         and app.store.workloads[crash].status == "Failed", timeout=60, what="bert-crash failed")
        await pilot.pause(2.0)  # (and the first metrics refreshes)
        since = time.time()
        await pilot.pause(4.0)
        seen = live.call(live.sim.requests.since, since)
        # what is asked anew is the GPU metrics (and watches renewed); no log
        assert not [r.path for r in seen if r.path.endswith("/log")]
        assert all("/proxy/" in r.path or r.verb == "watch" for r in seen), sorted({(r.verb, r.path) for r in seen})

        since = time.time()
        app.open_workload(LLAMA)
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and bool(app.screen.query("#ranks")),
                         what="llama's detail")
        await pilot.pause(3.0)
        logs = {r.path for r in live.call(live.sim.requests.since, since) if r.path.endswith("/log")}
        assert logs and all("/pods/llama-finetune-" in p for p in logs), logs
