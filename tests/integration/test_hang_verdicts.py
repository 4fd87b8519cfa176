"""#24 item 4c and 4d in the dashboard, against the live demo (`App.run_test()`, no mocks): gpt-hung's
`▲ hung` mark grows while it lasts (it stayed `▲ hung 2m48s` from age 3m to 18m), and its detail,
which follows its ranks' logs (the steps it shows are read from them), judges with them: it never
says "no rank's log is followed"."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.dashboard_kit import make_app
from tests.waiting import pilot_wait
from tui.screens.lists import WorkloadsScreen
from tui.screens.workload import WorkloadScreen
from tui.settings import Settings
from tui.widgets.keyed_table import KeyedTable

HUNG = ("runai-team-b", "PyTorchJob", "gpt-hung")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="demo", workdir=tmp_path_factory.mktemp("hang") / "sim") as t:
        yield t


def status_of(t: KeyedTable, key: Any) -> str:
    return t.shown[key][t.labels.index("STATUS")].plain if key in t.shown else ""


def seconds(text: str) -> int:
    """`▲ hung 1m5s` -> 65."""
    m = re.search(r"hung (?:(\d+)m)?(?:(\d+)s)?", text)
    assert m and (m.group(1) or m.group(2)), text
    return int(m.group(1) or 0) * 60 + int(m.group(2) or 0)


def text_of(widget: Static) -> str:
    content = widget.content
    return getattr(content, "plain", str(content))


async def test_the_hang_grows_and_the_detail_judges_with_the_logs_it_follows(
        live: ThreadedSimCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    app = make_app(live.sim.kubeconfig_path, Settings(hang_after_minutes=0.25, refresh_interval=1))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and app.store.synced,
                         timeout=20, what="the workloads list")
        lst = app.screen
        await pilot_wait(pilot, lambda: "▲ hung " in status_of(lst.table, HUNG), timeout=90, what="gpt-hung hung")
        first = status_of(lst.table, HUNG)
        await pilot_wait(pilot, lambda: seconds(status_of(lst.table, HUNG)) >= seconds(first) + 10, timeout=60,
                         what=f"the hang to grow from {first!r}", detail=lambda: status_of(lst.table, HUNG))

        app.open_workload(HUNG)
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and bool(app.screen.query("#ranks")),
                         what="gpt-hung's detail")
        detail = app.screen
        ranks = detail.query_one("#ranks", KeyedTable)
        step = ranks.labels.index("STEP")
        await pilot_wait(pilot, lambda: all(ranks.shown[k][step].plain.isdigit() for k in ranks.order),
                         timeout=30, what="each rank's step, read from its log")
        why = detail.query_one("#pending", Static)
        await pilot_wait(pilot, lambda: "every rank's log silent" in text_of(why), timeout=40,
                         what="the hang judged with the logs the detail follows", detail=lambda: text_of(why))
        assert "no rank's log is followed" not in text_of(why)


async def test_the_hung_job_offers_its_stacks_and_s_shows_the_rank_apart(
        live: ThreadedSimCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """#28 in the dashboard: a hung job's banner offers `S: stacks` first; `S` opens the Stacks view,
    read in a worker: gpt-hung's rank 1 stuck loading a batch, rank 0 waiting in the all-reduce."""
    from tui.screens.stacks import StacksScreen

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    app = make_app(live.sim.kubeconfig_path, Settings(hang_after_minutes=0.25, refresh_interval=1))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and app.store.synced,
                         timeout=20, what="the workloads list")
        app.open_workload(HUNG)
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and bool(app.screen.query("#pending")),
                         what="gpt-hung's detail")
        why = app.screen.query_one("#pending", Static)
        await pilot_wait(pilot, lambda: "what is wrong (S: stacks): hung for" in text_of(why), timeout=90,
                         what="the hang's banner offering the stacks", detail=lambda: text_of(why))
        await pilot.press("S")
        await pilot_wait(pilot, lambda: isinstance(app.screen, StacksScreen), what="the Stacks view")
        stacks = app.screen.query_one("#stacks", Static)
        await pilot_wait(pilot, lambda: "read_shard" in text_of(stacks), timeout=60, what="the stacks read",
                         detail=lambda: text_of(stacks))
        lines = text_of(stacks).splitlines()
        assert lines[0].startswith("gpt-hung (runai-team-b): 2 ranks read in "), lines
        assert any(line.startswith("  1 rank [1] in read_shard (train.py:") for line in lines), lines  # (1 and 1: none odd)
        assert any(line.startswith("  1 rank [0] in wait_for_peers (train.py:") for line in lines), lines
        # kept with gpt-hung's flight recording, where `ranks why` shows it
        (kept,) = (tmp_path / "state" / "ranks" / "flight").rglob("*gpt-hung.json")
        assert "1 rank [1] in read_shard" in kept.read_text()
        await pilot.press("escape")
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen), what="back to the detail")
