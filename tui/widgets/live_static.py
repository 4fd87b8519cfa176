"""`LiveStatic`: a Static that can take a new text repainting only some of its cells."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from rich.text import Text
from textual.geometry import Region
from textual.widgets import Static


class LiveStatic(Static):
    """A Static that can take a new text repainting only some of its cells (`patch`): an age that
    ticks repaints its own few cells, not the whole block."""

    _only: tuple[Region, ...] = ()

    def patch(self, text: Text, regions: Sequence[Region]) -> None:
        """Show `text`, which differs from the text shown only within `regions` (content coordinates)."""
        self._only = tuple(regions) or (Region(0, 0, 0, 0),)
        try:
            self.update(text, layout=False)
        finally:
            self._only = ()

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Self:
        if self._only and not (regions or layout or recompose):
            regions = self._only
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
