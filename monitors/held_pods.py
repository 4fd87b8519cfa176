"""The dashboard's pods wait for the workloads' first LISTs.

A pod listed as a Table row is grouped by its name against the workloads of its namespace
(`pod_rows.infer`). Applied before those are known, each of 100,000 rows is read once against no
workload, shown nowhere, then read again when its workload arrives (`LiveModel.apply_jobs`
regroups what it touches), and every workload is rebuilt twice: ~0.9 s of the data thread at
100,000 pods, while the workloads' own LIST pages wait behind it. So, until every workload kind's
informer has its first LIST in (or cannot have it: forbidden, failing), the pods' changes are held
in their order and then applied as they came, each row read once against its workload.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .informer import Informer, InformerState

# an informer that will not have its first LIST soon: nothing is held for it
NOT_COMING = frozenset({InformerState.RETRYING, InformerState.FORBIDDEN, InformerState.UNAUTHORIZED})


class HeldPods:
    def __init__(self, workloads: Iterable[Informer[Any, Any]]) -> None:
        """`workloads`: the informers of the workload kinds the pods wait for."""
        self.workloads = list(workloads)
        self.batches: list[tuple[Callable[[Any], None], Any]] | None = []  # None: released

    @property
    def holding(self) -> bool:
        return self.batches is not None

    def _ready(self) -> bool:
        return all(i.synced.is_set() or i.state in NOT_COMING for i in self.workloads)

    def hold(self, apply: Callable[[Any], None], batch: Any) -> bool:
        """Keep `apply(batch)` for later (True) unless the workloads are in (False: apply it now)."""
        if self.batches is None:
            return False
        if self._ready():
            self.release()
            return False
        self.batches.append((apply, batch))
        return True

    def release(self, force: bool = False) -> bool:
        """Apply what was held, in its order, once the workloads are in (or `force`); True when
        something was applied."""
        if self.batches is None or not (force or self._ready()):
            return False
        batches, self.batches = self.batches, None
        for apply, batch in batches:
            apply(batch)
        return bool(batches)
