"""`Picker`: an `OptionList` that moves like every other list of the dashboard (j/k, g/G, with the
arrows, Home and End; the catalogue's `row_*` binding ids, so a keymap remaps them here too)."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import BindingType
from textual.widgets import OptionList

from .keyed_table import list_bindings


class Picker(OptionList):
    BINDINGS: ClassVar[list[BindingType]] = list_bindings()
