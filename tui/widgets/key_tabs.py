"""Tabs whose shown pane is the one the keys chose.

Textual's TabbedContent shows the pane of any widget focused inside it (a `TabPane.Focused` message,
handled after the focus). Our screens focus only the shown pane's widgets, each time a tab is
shown; with keys typed ahead (a busy machine, a slow SSH link) that late message arrived after the
next key had moved on, and moved the tabs back to the pane it named, so a burst of arrows moved the
tabs less than once each. Here a focus never chooses the pane: the keys (and the screen) do.
"""

from __future__ import annotations

from textual.widgets import TabbedContent, TabPane


class KeyTabs(TabbedContent):
    """A TabbedContent on which a focus inside a pane does not switch to that pane."""

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        event.stop()
        event.prevent_default()  # (TabbedContent's own handler would show the pane)
