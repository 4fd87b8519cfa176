"""Keys typed ahead of a prompt reach the prompt (tui/widgets/type_ahead.py). Over a slow SSH link
the keys typed together arrive together: `/` and the filter after it were queued to the table,
which passed `/` up to open the input and the letters after it up too, where they were lost or ran
as the screen's keys (`l` opened the logs, `c` the cluster). The keys are posted to the app together,
as a terminal's read hands them over, not one by one with the app idle in between."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input

from tests.dashboard_kit import open_logs, select
from tests.integration.test_tab_keys_burst import burst_of, synced_app
from tests.waiting import pilot_wait
from tui.app import RanksApp
from tui.screens.dialogs import NewSessionScreen, PromptScreen
from tui.screens.lists import WorkloadsScreen
from tui.screens.logs import LogsScreen


def chars(text: str) -> list[tuple[str, str]]:
    return [(c, c) for c in text]


def value(app: RanksApp, input_id: str) -> str:
    return str(app.screen.query_one(f"#{input_id}", Input).value)


async def typed(pilot: Pilot[Any], app: RanksApp, input_id: str, text: str) -> None:
    await pilot_wait(pilot, lambda: value(app, input_id) == text, timeout=10, what=f"{text!r} in #{input_id}",
                     detail=lambda: f"screen {type(app.screen).__name__}, focus {app.focused!r}")


async def test_a_filter_typed_with_slash_goes_into_the_filter_not_to_the_screens_keys() -> None:
    async with synced_app((80, 24)) as (app, pilot, key):
        await select(pilot, app, key)
        # `l` (Logs) and `c` (Cluster) are keys of the list: typed ahead they are the filter's letters
        await burst_of(pilot, app, ("slash", "/"), *chars("lc"))
        await typed(pilot, app, "filter", "lc")
        assert isinstance(app.screen, WorkloadsScreen), app.screen
        assert [type(s).__name__ for s in app.screen_stack][-1] == "WorkloadsScreen"
        await pilot.press("escape")
        await pilot_wait(pilot, lambda: value(app, "filter") == "" or not app.screen.query_one("#filter").display,
                         what="the filter closed")
        # the name and Enter typed together: the list filtered to it
        name = key[2]
        await burst_of(pilot, app, ("slash", "/"), *chars(name), ("enter", "\r"))
        await pilot_wait(pilot, lambda: app.screen.row_filter.text == name, timeout=10, what="the filter applied")
        assert isinstance(app.screen, WorkloadsScreen)


async def test_keys_typed_ahead_reach_the_log_views_prompts() -> None:
    async with synced_app((80, 24)) as (app, pilot, key):
        await open_logs(pilot, app, key)
        await burst_of(pilot, app, ("slash", "/"), *chars("loss"))
        await typed(pilot, app, "filter", "loss")
        await pilot.press("escape")
        await burst_of(pilot, app, ("r", "r"), *chars("0,1"))
        await typed(pilot, app, "filter", "0,1")
        assert isinstance(app.screen, LogsScreen)


async def test_keys_typed_ahead_reach_the_input_of_a_screen_being_put_up() -> None:
    """The run prompt (`x`) and the new session form (`n`) are screens of their own, with no input
    focused for a moment: the keys are held for it, not run as the list's (`c`: Cluster)."""
    async with synced_app((80, 24)) as (app, pilot, key):
        await select(pilot, app, key)
        await burst_of(pilot, app, ("x", "x"), *chars("nvidia-smi -L".replace(" ", "")))
        await pilot_wait(pilot, lambda: isinstance(app.screen, PromptScreen), what="the run prompt")
        await typed(pilot, app, "prompt", "nvidia-smi-L")
        await pilot.press("escape")
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen), what="the list again")
        await burst_of(pilot, app, ("n", "n"), *chars("abc"))
        await pilot_wait(pilot, lambda: isinstance(app.screen, NewSessionScreen), what="the new session form")
        await typed(pilot, app, "f-name", "abc")
        assert [type(s).__name__ for s in app.screen_stack][-2:] == ["WorkloadsScreen", "NewSessionScreen"]
