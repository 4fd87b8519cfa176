"""Hangs and stragglers of every running job (`diagnostics.hangs`), judged after a metrics refresh
at most every ASSESS_EVERY seconds; what is flagged is sent when what it says changed."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .updates import Judging, WorkloadKey

if TYPE_CHECKING:
    from ..diagnostics.hangs import JobHealth
    from ..model import LiveModel
    from ..model_views import WorkloadView

ASSESS_EVERY = 15.0  # s: hangs and stragglers judged at most this often

# a job's rank rates (steps per second, from its followed logs), None when its logs are not followed
RatesOf = Callable[[WorkloadKey], "dict[str, float] | None"]


class HealthJudge:
    def __init__(self, judging: Judging) -> None:
        self.judging = judging
        self.flagged: dict[WorkloadKey, JobHealth] = {}  # the jobs last judged hung or straggling
        self._sign: dict[WorkloadKey, tuple[Any, ...]] = {}  # what was last sent of each
        # verdicts time cannot change (`diagnostics.hangs.assess_all`'s memo)
        self._timeless: dict[WorkloadKey, tuple[WorkloadView, JobHealth]] = {}
        self._assessed_at = -1e9  # (monotonic) when hangs and stragglers were last judged

    def again(self) -> None:
        """Judge again at the next refresh (what it judges by changed: a rank's logs are read)."""
        self._assessed_at = -1e9

    def due(self) -> bool:
        """Whether to judge after this refresh: at most every 15 s (a quarter of the shortest
        threshold when that is less). Judging every running job costs ~30 ms per 1,000 jobs; after
        every refresh that was most of an idle dashboard's CPU, for verdicts that count in minutes."""
        from ..diagnostics.hangs import DEFAULT

        t = self.judging.thresholds or DEFAULT
        now = time.monotonic()
        if now - self._assessed_at < min(ASSESS_EVERY, t.hang_after / 4, t.silent_after / 4):
            return False
        self._assessed_at = now
        return True

    def assess(self, model: LiveModel, rates_of: RatesOf | None = None) -> dict[WorkloadKey, JobHealth] | None:
        """The flagged running jobs when what is flagged changed, else None. `rates_of` names
        stragglers by rate where a job's logs are followed (the focused workload's)."""
        from ..diagnostics.hangs import DEFAULT, assess_all

        found = assess_all(model, self.judging.clock(), self.judging.thresholds or DEFAULT, rates_of, self._timeless)
        flagged = {k: h for k, h in found.items() if not h.ok}
        # what is shown of each: a hang's duration grows while it lasts, and its words change once
        # the ranks' logs are followed (the detail's): a verdict whose sentences moved is sent again
        sign = {k: (h.marker, h.summary, tuple((r.label, r.flags, r.why) for r in h.flagged))
                for k, h in flagged.items()}
        self.flagged = flagged
        if sign == self._sign:
            return None
        self._sign = sign
        return flagged
