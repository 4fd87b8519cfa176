"""The cyclic GC off for a while, as it was afterwards (`gc_paused`): around a burst of acyclic
objects (a parsed LIST page), or a one-shot command whose objects live until it exits. Imports
nothing: a command takes it before its own imports."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic GC off inside; on again afterwards if it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
