"""The pods informer of the views that need only what `kubectl get pods` prints.

Its LIST asks for a cells-only Table per namespace (`monitors.pod_rows`: ~120 bytes a pod instead of
~8 KB). Once those are in (the picture complete), the dashboard's (`unsettled`) asks for the full
objects of the pods that failed (a field-selected LIST, `status.phase=Failed`: exit codes,
termination messages) and of the running pods that have restarted (their previous instance's
exit); the monitor reads one pod of each pending workload for its scheduler message
(`Monitor.explain_pending`). Its WATCH is the ordinary one, full
objects, from the oldest of the Tables' resourceVersions: a pod that changes arrives whole (exit
codes for the flight recorder), and the changes between the LISTs are replayed in order, which
leaves each pod as it is now.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from .informer import RESTARTED, Change, Informer, resource_version
from .kube import ApiProblem
from .pod_rows import TABLE_ROWS, pods_from_table
from .records import PodRec

FAILED = "status.phase=Failed"
ROWS_PAGE = 5000
CONCURRENT_LISTS = 16
RESTARTED_READ = 256  # restarted pods read whole at start (their previous instance's exit)


class PodRowsInformer(Informer[PodRec, tuple[str, str]]):
    def __init__(self, *args: Any, namespaces: Callable[[], Awaitable[list[str] | None]], unsettled: bool = True,
                 rows_page: int = ROWS_PAGE, **kwargs: Any) -> None:
        """`namespaces`: the namespaces to list when the informer is cluster-wide (None: they may
        not be listed; then one full cluster-wide LIST is made instead). `unsettled`: then read
        the failed and the restarted pods whole. `rows_page`: rows asked for per page."""
        super().__init__(*args, **kwargs)
        self.list_namespaces = namespaces
        self.with_unsettled = unsettled
        self.rows_page = rows_page

    async def _relist(self) -> None:
        names = [self.namespace] if self.namespace else await self.list_namespaces()
        if names is None:
            await super()._relist()
            return
        gate = asyncio.Semaphore(CONCURRENT_LISTS)

        async def rows(ns: str) -> tuple[list[PodRec], str]:
            recs: list[PodRec] = []
            rv = ""
            async with gate:
                async for doc in self._pages(self.kind.path(ns), {"includeObject": "None"}, TABLE_ROWS,
                                             page_size=self.rows_page):
                    if doc is RESTARTED:  # (its continue token expired: listed again whole)
                        recs, rv = [], ""
                        continue
                    rv = rv or resource_version(doc) or ""
                    if doc.get("kind") == "Table":
                        recs += pods_from_table(doc, ns)
                    else:  # a server without Tables answered with the objects
                        recs += self._parse_items(doc.get("items") or ())
            return recs, rv

        async def failed() -> tuple[list[PodRec], str]:
            recs: list[PodRec] = []
            rv = ""
            async for doc in self._pages(self.kind.path(self.namespace), {"fieldSelector": FAILED}):
                if doc is RESTARTED:
                    recs, rv = [], ""
                    continue
                rv = rv or resource_version(doc) or ""
                recs += self._parse_items(doc.get("items") or ())
            return recs, rv

        answers = await asyncio.gather(*(rows(ns) for ns in names))
        fresh: dict[tuple[str, str], PodRec] = {}
        for recs, _ in answers:
            for rec in recs:
                fresh[rec.key] = rec
        rv = oldest([rv for _, rv in answers])
        del answers  # (the rows as listed: the cache keeps the model's record of each, `applied`)
        self._install(fresh, rv)
        if not self.with_unsettled:
            return
        # then, the picture complete, the details the rows lack: the pods that failed and the
        # running ones that have restarted (their last failure), whole
        (full, _), restarted = await asyncio.gather(
            failed(), self._restarted([r for r in fresh.values() if r.partial and r.restarts]))
        changes: list[Change[PodRec, tuple[str, str]]] = []
        for rec in (*full, *restarted):
            prev = self.cache.get(rec.key)
            if prev != rec:
                self.cache[rec.key] = rec
                changes.append(Change("added" if prev is None else "changed", rec.key, prev, rec))
        if changes:
            self.sink(self, changes)

    def applied(self, apply: Callable[[Any], None], kept: Mapping[tuple[str, str], PodRec],
                batch: list[tuple[Any, Any]]) -> None:
        """`apply(batch)`, then the rows in the cache replaced by the records `kept` holds for them (the
        live model's: the row claimed by its workload), so a row is one record, not two (~25 MB at
        100,000 pods). A claimed row and the row it was made from are the same row (`_differs`)."""
        apply(batch)
        cache = self.cache
        for key, rec in batch:
            if rec is not None and rec.partial and cache.get(key) is rec:
                mine = kept.get(key)
                if mine is not None and mine is not rec and mine.partial:
                    cache[key] = mine

    def _differs(self, prev: PodRec, rec: PodRec) -> bool:
        if prev == rec:
            return False
        # a row the model claimed (`applied`) against the same row listed again: the same
        return not (prev.partial and rec.partial and prev.claimed(rec.labels, rec.owner, rec.gpus) == rec)

    async def _restarted(self, rows: list[PodRec]) -> list[PodRec]:
        """The full objects of (at most RESTARTED_READ of) these pods: their exit codes and reasons."""
        gate = asyncio.Semaphore(CONCURRENT_LISTS)

        async def one(row: PodRec) -> PodRec | None:
            async with gate:
                try:
                    raw = await self.client.request("GET", self.kind.path(row.namespace, row.name))
                except ApiProblem:
                    return None  # gone meanwhile, or not ours to read: the row stays
            try:
                found = self._parse_items([orjson.loads(raw)])
            except orjson.JSONDecodeError:
                return None
            return found[0] if found else None

        found = await asyncio.gather(*(one(r) for r in rows[:RESTARTED_READ]))
        return [r for r in found if r is not None]


def oldest(versions: list[str]) -> str:
    """The oldest resourceVersion of several LISTs (numeric, as etcd's are; else the first)."""
    numeric = [int(v) for v in versions if v.isdigit()]
    if numeric and len(numeric) == len(versions):
        return str(min(numeric))
    return next((v for v in versions if v), "")

