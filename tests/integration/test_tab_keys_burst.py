"""Keys typed ahead move the tabs one each (seen in tmux on a loaded machine, where four Lefts sent
at once moved the cluster screen's tabs once): every Right or Left that reaches the app moves its
tabs by one, however many come before the screen has drawn, on the cluster screen and a workload's
detail alike. The keys are posted to the app together, as a terminal's read hands them over when the
app is busy (or a slow link delivers them), not one by one with the app idle in between."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import pytest
from textual import events
from textual.pilot import Pilot
from textual.widgets import TabbedContent, TabPane

from tests.dashboard_kit import Key, fed_app, open_detail
from tests.snapshots.test_views import NOW, objects
from tests.waiting import pilot_wait
from tui.app import RanksApp
from tui.screens.cluster import ClusterScreen
from tui.screens.workload import WorkloadScreen


def panes(tabbed: TabbedContent) -> list[str]:
    return [p.id for p in tabbed.query(TabPane) if p.id]


def shows(tabbed: TabbedContent, pane: str) -> bool:
    return tabbed.active == pane


async def burst(pilot: Pilot[Any], app: RanksApp, key: str, times: int) -> None:
    """`times` key presses queued at once, then the app left to settle."""
    for _ in range(times):
        app.post_message(events.Key(key, None))
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()


async def each_burst_moves_by_its_length(pilot: Pilot[Any], app: RanksApp) -> None:
    tabbed = app.screen.query_one(TabbedContent)
    ids = panes(tabbed)
    assert len(ids) >= 3, ids
    at = ids.index(tabbed.active)
    for key, times in (("right", 4), ("left", 3), ("right", 2), ("left", 4), ("right", 7)):
        await burst(pilot, app, key, times)
        at = (at + (times if key == "right" else -times)) % len(ids)
        want = ids[at]
        await pilot_wait(pilot, partial(shows, tabbed, want), what=f"{times} x {key}: {want} shown", timeout=10)
        # and the tabs' own bar agrees with the pane shown (no late message moves it back)
        await pilot.pause()
        assert tabbed.active == want, (key, times, tabbed.active, want)
        assert tabbed.get_tab(want).has_class("-active")


@contextlib.asynccontextmanager
async def synced_app(size: tuple[int, int] = (120, 40)) -> AsyncIterator[tuple[RanksApp, Pilot[Any], Key]]:
    """The fed dashboard with its first picture (its 6 nodes in), and the key of its first workload."""
    app, feed = fed_app(clock=lambda: NOW, still=True)
    feed.apply(*objects())
    async with app.run_test(size=size) as pilot:
        feed.send()
        await pilot_wait(pilot, lambda: app.store.synced and len(app.store.nodes) == 6, what="the first picture")
        yield app, pilot, next(iter(app.store.workloads))


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_a_burst_of_arrows_moves_the_cluster_screens_tabs_one_each(size: tuple[int, int]) -> None:
    async with synced_app(size) as (app, pilot, _key):
        await pilot.press("c")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ClusterScreen) and app.screen.table.row_count == 6,
                         what="the nodes table")
        await each_burst_moves_by_its_length(pilot, app)


async def test_a_burst_of_arrows_moves_a_workloads_tabs_one_each() -> None:
    async with synced_app() as (app, pilot, key):
        await open_detail(pilot, app, key)
        assert isinstance(app.screen, WorkloadScreen)
        await each_burst_moves_by_its_length(pilot, app)


# -- keys typed after Enter reach the screen Enter opens -------------------------------------------


async def test_keys_typed_after_enter_reach_the_screen_it_opens() -> None:
    """Enter then `l` typed together on the list: the workload's detail, then its logs on top (the
    Enter was a message handled after the next key, so `l` opened the list row's logs, under the
    detail); Enter then a Right: the detail on its second tab."""
    from tests.dashboard_kit import select
    from tui.screens.lists import WorkloadsScreen
    from tui.screens.logs import LogsScreen

    async with synced_app() as (app, pilot, key):
        await select(pilot, app, key)
        await burst_of(pilot, app, ("enter", "\r"), ("l", "l"))
        await pilot_wait(pilot, lambda: isinstance(app.screen, LogsScreen), what="the logs on top", timeout=10)
        names = [type(s).__name__ for s in app.screen_stack[-3:]]
        assert names == ["WorkloadsScreen", "WorkloadScreen", "LogsScreen"], names
        assert isinstance(app.screen, LogsScreen) and app.screen.key == key
        await pilot.press("escape", "escape")
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen), what="the list again", timeout=10)
        await select(pilot, app, key)
        await burst_of(pilot, app, ("enter", "\r"), ("right", None))
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen)
                         and app.screen.query_one(TabbedContent).active == "tab-placement",
                         what="the detail on its second tab", timeout=10)


async def burst_of(pilot: Pilot[Any], app: RanksApp, *keys: tuple[str, str | None]) -> None:
    for key, char in keys:
        app.post_message(events.Key(key, char))
    await pilot.pause()
