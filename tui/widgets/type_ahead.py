"""Keys typed ahead of a prompt reach the prompt.

Over a slow SSH link (or on a busy machine) the keys a user types together arrive together: `/`
and the filter typed after it, `r` and the ranks, `n` and the new session's name. The app hands each
key to the widget focused when the key is read, so all of them are queued to the table (or the log
view) that had the focus. `/` is one of the screen's keys: the table passes it up, and by the time
it reaches the app (which runs it: the input opens and takes the focus) the table has passed up the
letters behind it too. They were lost, and a letter that is also a key of the screen (`l` Logs, `c`
Cluster) ran as that key: a key is matched against the bindings of the focus of the moment.

A key queued to a `TypeAhead` view (the dashboard's tables, log view and events) is marked with it.
When it reaches the app (or the view) while a text input that is not that view has the focus, it
goes to that input, in order, as if it had been read after the focus moved. While a screen that
takes text (`takes_text`: the run prompt, the new session form) is being put up and no input on it
has the focus yet, such keys (printable ones) are held, and given to its input once it has the focus
(`KeysAhead`).
"""

from __future__ import annotations

from typing import Any, cast

from textual import events
from textual.app import App
from textual.dom import NoScreen
from textual.widget import Widget
from textual.widgets import Input

TYPED_TO = "_ranks_typed_to"  # the view a key was queued to (an attribute of the event)
HOLD_MAX = 256  # keys held for a screen being put up, at most


class TypeAhead:
    """A focusable view's keys, queued to it before the focus moved to a text input, go to that
    input. A mixin, not a Widget: Textual takes a widget's CSS from its first DOMNode base alone."""

    async def _on_key(self, event: events.Key) -> None:
        view = cast(Widget, self)
        keys = getattr(view.app, "keys_ahead", None)
        if not (isinstance(keys, KeysAhead) and keys.take(event, view)):
            setattr(event, TYPED_TO, getattr(event, TYPED_TO, None) or view)
        # (else this view's own handling follows, as for any key, and the key goes up if not taken)


class KeysAhead:
    """The app's keys typed ahead of a text input: given to it, or held while its screen comes up."""

    def __init__(self, app: App[Any]) -> None:
        self.app = app
        self.held: list[tuple[str, str | None]] = []

    def take(self, event: events.Key, typed_to: Widget | None = None) -> bool:
        """`event` (queued to `typed_to`, else to the view it is marked with) given to the text
        input that has the focus now, or held for the screen that takes text being put up: True;
        False when the view still has the focus, or no input has it or is coming."""
        view = typed_to or getattr(event, TYPED_TO, None)
        focused = self.app.focused
        if view is None or focused is view:
            return False
        if isinstance(focused, Input):
            self.give()
            focused.post_message(events.Key(event.key, event.character))
        elif (getattr(self.app.screen, "takes_text", False) and event.is_printable and len(self.held) < HOLD_MAX
              and _screen_of(view) is not self.app.screen):  # (its input not focused yet: held for it)
            self.held.append((event.key, event.character))
        else:
            return False
        event.prevent_default()  # (not the view's own handling, nor the screen's keys)
        event.stop()
        return True

    def give(self) -> None:
        """The keys held, to the text input that has the focus now; still held while the screen
        that takes text has none focused, dropped once the screen shown takes none."""
        focused = self.app.focused
        if isinstance(focused, Input):
            held, self.held = self.held, []
            for key, character in held:
                focused.post_message(events.Key(key, character))
        elif not getattr(self.app.screen, "takes_text", False):
            self.held = []


def _screen_of(widget: Widget) -> object:
    try:
        return widget.screen
    except NoScreen:  # (a view whose screen is gone)
        return None
