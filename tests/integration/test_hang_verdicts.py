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
