"""The dashboard's smaller points of #11 with `App.run_test()` against simcluster: counts said in
the singular when there is one ("1 line", "1 pod"); the log screen counts the lines it shows ("N of
M lines" when filtered); `l` beside a first failure opens the failing rank's log at the instance
that failed (the previous one when the container restarted since); the convert diff keeps its
+/- marker on every row a long line wraps onto.

Pods run as real processes (the kubelet only: they are seeded directly, with no operator)."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widget import Widget
from textual.widgets import Input, Static

from simcluster.cluster import ThreadedSimCluster
from simcluster.scenarios.nodes import gpu_node
from tests import dashboard_kit as kit
from tests.dashboard_kit import open_detail, open_logs
from tests.kubeflow_objects import job
from tests.waiting import pilot_wait
from tui.app import RanksApp
from tui.screens.dialogs import ConfirmScreen, ConvertScreen
from tui.screens.lists import WorkloadsScreen
from tui.screens.logs import LogsScreen

NS = "default"
NODE = "node-0"
TK = "training.kubeflow.org/"
SIZE = (120, 30)

Key = tuple[str, str, str]


def kf_pod(job_name: str, rtype: str, index: int, script: str, *, restart: str = "Never") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{job_name}-{rtype.lower()}-{index}", "namespace": NS, "labels": {
            TK + "job-name": job_name, TK + "replica-type": rtype.lower(), TK + "replica-index": str(index),
            TK + "operator-name": "pytorchjob-controller"}},
        "spec": {"nodeName": NODE, "restartPolicy": restart, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "pytorch", "image": "img", "command": ["sh", "-c", script]}]},
    }


def seed(t: ThreadedSimCluster, name: str, pods: list[dict[str, Any]], *, condition: str = "Running",
         command: list[str] | None = None) -> Key:
    def apply() -> None:
        t.sim.apply(gpu_node(NODE, 8))
        t.sim.apply(job("PyTorchJob", name, NS, {"Master": 1, "Worker": max(0, len(pods) - 1)}, gpus=0,
                        command=command, conditions=[(condition, "")]))
        for p in pods:
            t.sim.apply(p)

    t.call(apply)
    return (NS, "PyTorchJob", name)


def make_app(t: ThreadedSimCluster) -> RanksApp:
    return kit.make_app(t, metrics=False)


def status_of(screen: LogsScreen) -> str:
    content = screen.query_one("#logstatus", Static).content
    return str(getattr(content, "plain", content))


def painted(widget: Widget) -> list[str]:
    return [line.rstrip() for line in kit.painted(widget)]


@pytest.mark.simcluster(components=("kubelet",))
async def test_counts_say_1_line_and_1_pod(simcluster: ThreadedSimCluster) -> None:
    key = seed(simcluster, "single", [kf_pod("single", "Master", 0, "echo only line; sleep 30")])
    app = make_app(simcluster)
    async with app.run_test(size=SIZE) as pilot:
        logs = await open_logs(pilot, app, key)
        await pilot_wait(pilot, lambda: logs.buffer.lines() == 1, what="the line", timeout=15)
        await pilot_wait(pilot, lambda: status_of(logs).startswith("1 line "), 5, f"1 line: {status_of(logs)!r}")

        await pilot.press("escape")
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen), what="the list", timeout=15)
        listing = app.screen
        assert isinstance(listing, WorkloadsScreen)
        await pilot_wait(pilot, lambda: listing.table.move_to_key(key), what="the row", timeout=15)
        listing.action_delete()
        await pilot_wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation", timeout=15)
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.question.plain.endswith(", 1 pod)?"), app.screen.question.plain
        await pilot.press("n")


@pytest.mark.simcluster(components=("kubelet",))
async def test_filtered_logs_count_the_lines_shown_of_all(simcluster: ThreadedSimCluster) -> None:
    key = seed(simcluster, "three", [kf_pod("three", "Master", 0, "echo alpha; echo beta; sleep 30"),
                                     kf_pod("three", "Worker", 0, "echo gamma; sleep 30")])
    app = make_app(simcluster)
    async with app.run_test(size=SIZE) as pilot:
        logs = await open_logs(pilot, app, key)
        await pilot_wait(pilot, lambda: logs.buffer.lines() == 3, what="3 lines", timeout=15)
        await pilot_wait(pilot, lambda: status_of(logs).startswith("3 lines "), 5, "3 lines")
        await pilot.press("slash")
        await pilot_wait(pilot, lambda: isinstance(app.focused, Input), what="the filter prompt", timeout=15)
        await pilot.press(*"beta", "enter")
        await pilot_wait(pilot, lambda: status_of(logs).startswith("1 of 3 lines "), 5,
                         f"1 of 3 lines: {status_of(logs)!r}")
        assert logs.view.visible_text()[0].endswith("beta")


@pytest.mark.simcluster(components=("kubelet",))
async def test_l_beside_a_first_failure_opens_the_failing_ranks_last_lines(simcluster: ThreadedSimCluster) -> None:
    key = seed(simcluster, "crash", [
        kf_pod("crash", "Master", 0, "echo master up; sleep 0.3; echo master on; sleep 30"),
        kf_pod("crash", "Worker", 0, "echo w0 step 1; sleep 0.5; echo 'RuntimeError: boom'; exit 3"),
        kf_pod("crash", "Worker", 1, "echo w1 up; sleep 30")])
    app = make_app(simcluster)
    async with app.run_test(size=SIZE) as pilot:
        def failed() -> bool:
            w = app.store.workloads.get(key)
            return w is not None and w.first_failure is not None and w.status == "Degraded"

        detail = await open_detail(pilot, app, key, failed)
        await pilot_wait(pilot, lambda: detail.query_one("#failure").has_class("-shown"), what="the failure banner", timeout=15)
        assert "(l: logs)" in str(detail.query_one("#failure", Static).content)
        await pilot.press("l")
        await pilot_wait(pilot, lambda: isinstance(app.screen, LogsScreen), what="the logs", timeout=15)
        logs = app.screen
        assert isinstance(logs, LogsScreen)
        assert not logs.previous and logs.rank_filter == "worker-0"
        await pilot_wait(pilot, lambda: logs.buffer.lines() == 5, what="every rank's lines (5)", timeout=15)
        await pilot_wait(pilot, lambda: status_of(logs).startswith("2 of 5 lines "), 5, status_of(logs))
        shown = [ln for ln in logs.view.visible_text() if ln]
        assert shown == ["[worker-0] w0 step 1", "[worker-0] RuntimeError: boom"], shown


@pytest.mark.simcluster(components=("kubelet",))
async def test_l_beside_a_first_failure_opens_the_previous_instance_after_a_restart(
        simcluster: ThreadedSimCluster) -> None:
    simcluster.call(setattr, simcluster.sim.kubelet, "backoff_base", 0.2)
    script = ("if [ -f marker ]; then echo second run; sleep 30; fi; touch marker; "
              "echo first run; echo out of memory; exit 137")
    key = seed(simcluster, "rf", [kf_pod("rf", "Master", 0, "echo fine; sleep 30"),
                                  kf_pod("rf", "Worker", 0, script, restart="OnFailure")], condition="Restarting")
    app = make_app(simcluster)
    async with app.run_test(size=SIZE) as pilot:
        def restarted() -> bool:
            w = app.store.workloads.get(key)
            return w is not None and w.first_failure is not None and any(
                r.restarts >= 1 and r.phase == "Running" and r.label == "worker-0" for r in w.ranks)

        detail = await open_detail(pilot, app, key, restarted)
        await pilot_wait(pilot, lambda: detail.query_one("#failure").has_class("-shown"), what="the failure banner", timeout=15)
        await pilot.press("l")
        await pilot_wait(pilot, lambda: isinstance(app.screen, LogsScreen), what="the logs", timeout=15)
        logs = app.screen
        assert isinstance(logs, LogsScreen)
        assert logs.previous and logs.rank_filter == "worker-0"
        await pilot_wait(pilot, lambda: logs.buffer.lines() == 2, what="the failed instance's lines", timeout=15)
        await pilot.pause(0.3)
        shown = [ln for ln in logs.view.visible_text() if ln]
        assert shown == ["[worker-0] first run", "[worker-0] out of memory"], shown


@pytest.mark.simcluster(components=())
async def test_convert_diff_keeps_the_marker_on_wrapped_rows(simcluster: ThreadedSimCluster) -> None:
    key = seed(simcluster, "sess", [], command=["sleep", "infinity"])
    command = ("torchrun --nnodes=2 --nproc-per-node=8 train.py --config configs/llama-7b-lora.yaml "
               "--epochs 100 --out /data/runs/final")
    app = make_app(simcluster)
    async with app.run_test(size=(80, 40)) as pilot:
        await pilot_wait(pilot, lambda: app.store.synced and isinstance(app.screen, WorkloadsScreen)
                         and app.screen.table.move_to_key(key), what="the session", timeout=15)
        assert isinstance(app.screen, WorkloadsScreen)
        app.screen.action_convert()
        await pilot_wait(pilot, lambda: isinstance(app.screen, ConvertScreen) and app.screen.ready,
                         what="the convert screen", timeout=15)
        screen = app.screen
        screen.query_one("#command", Input).value = command
        diff = screen.query_one("#difftext", Static)
        await pilot_wait(pilot, lambda: "/data/runs/final" in str(diff.content), what="the diff", timeout=15)
        await pilot.pause()
        rows = painted(diff)
        start = next(i for i, row in enumerate(rows) if "torchrun" in row)
        end = next(i for i, row in enumerate(rows) if row.endswith("/data/runs/final"))
        assert end > start, "the command's line wraps at 80 columns"
        assert all(row.startswith("+") for row in rows[start:end + 1]), rows[start:end + 1]
        assert all(row[:1] in ("+", "-", " ", "@") for row in rows if row), rows
