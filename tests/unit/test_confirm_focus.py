"""A yes-or-no question's focus from its first moment: on Cancel when the action destroys, on the
action when it is harmless (`tui.screens.dialogs.ConfirmScreen`). Textual focuses the first button
as the screen is composed; an Enter before `on_mount` moved the focus pressed Delete."""

from __future__ import annotations

import pytest
from textual.app import App

from tui.screens.dialogs import ConfirmScreen


@pytest.mark.parametrize(("yes", "focused"), [("Delete", "no"), ("Suspend", "yes")])
async def test_the_focus_is_where_it_belongs_as_soon_as_the_question_is_up(yes: str, focused: str) -> None:
    seen: list[str | None] = []

    class Asker(App[None]):
        async def on_mount(self) -> None:
            screen = ConfirmScreen(f"{yes} it?", yes)
            await self.push_screen(screen)
            seen.append(screen.focused.id if screen.focused else None)  # (before its on_mount's calls ran)

    app = Asker()
    async with app.run_test() as pilot:
        await pilot.pause()
        seen.append(app.screen.focused.id if app.screen.focused else None)
    assert seen == [focused, focused]
