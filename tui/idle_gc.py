"""Full garbage collections while nobody waits for a frame.

After the dashboard's first picture (`tui.app.settle_heap`) what was listed is frozen, and what the
collector still tracks is what came since: render caches, updates, log lines. CPython collects all
of it (a full collection, 40-70 ms at 20,000 pods) every tenth middle collection, wherever that
falls: in the middle of a key's frame, as often as not. Here the full collections wait for a
moment without input (`QUIET_S`), and are made then if CPython would have made one by now; while
keys keep coming, one is made at the latest after `FORCED_AFTER` middle collections, so cyclic
garbage never piles up without bound. The young and middle generations are collected as before."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

QUIET_S = 1.0  # no key or mouse input for this long: nobody is waiting for a frame
CHECK_S = 2.0  # how often the collector looks whether a full collection is due
DUE_AFTER = 10  # middle collections since the last full one: CPython's own threshold
FORCED_AFTER = 100  # ...and the most it waits while input keeps coming
NEVER = 1 << 30  # CPython's own full collections: none (the threshold is never reached)


class IdleCollector:
    """Makes the full collections CPython would make, at moments without input (`check`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.input_at = clock()
        self.collections = 0  # full collections made here (for tests and diagnostics)
        self.active = False

    def take_over(self) -> None:
        """From now on, full collections are made by `check` alone."""
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, NEVER)
        self.active = True

    def give_back(self, full_every: int = DUE_AFTER) -> None:
        """CPython makes its full collections itself again."""
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, full_every)
        self.active = False

    def input_seen(self) -> None:
        self.input_at = self.clock()

    def check(self) -> bool:
        """Make a full collection if one is due and the moment is quiet (or it is overdue)."""
        if not self.active or not gc.isenabled():
            return False
        pending = gc.get_count()[2]  # middle collections since the last full one
        quiet = self.clock() - self.input_at >= QUIET_S
        if pending >= FORCED_AFTER or (pending >= DUE_AFTER and quiet):
            gc.collect()
            self.collections += 1
            return True
        return False
