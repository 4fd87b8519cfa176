"""The list's cursor starts on its first row, whichever workloads come in first. The list fills as
the kinds' lists come in (MPIJobs, PyTorchJobs...); the cursor followed the row it was on, so it
started on whichever workload the first list brought (a snapshot caught it, on a loaded machine,
on hvd-interactive instead of the first row). Once moved, it follows its row as the rows change."""

from __future__ import annotations

import copy
from typing import Any

from tests.dashboard_kit import fed_app, select
from tests.snapshots.test_views import NOW, objects
from tests.waiting import pilot_wait
from tui.screens.lists import WorkloadsScreen


def is_mpi(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "MPIJob" or any(
        ref.get("kind") == "MPIJob" for ref in (obj.get("metadata") or {}).get("ownerReferences") or ())


async def test_the_cursor_starts_on_the_first_row_and_once_moved_follows_its_row() -> None:
    everything = objects()
    workloads = [o for o in everything if o.get("kind") in ("MPIJob", "PyTorchJob", "TFJob", "XGBoostJob")]
    assert any(o["kind"] == "MPIJob" for o in workloads) and any(o["kind"] == "PyTorchJob" for o in workloads)
    app, feed = fed_app(clock=lambda: NOW, still=True)
    feed.apply(*[o for o in everything if o.get("kind") not in ("MPIJob", "PyTorchJob", "TFJob", "XGBoostJob", "Pod")
                 or is_mpi(o)])
    async with app.run_test(size=(120, 40)) as pilot:
        feed.send()  # the MPIJobs' list came in first
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen) and app.screen.table.row_count > 0,
                         what="the first rows")
        table = app.screen.table
        first = table.cursor_key
        assert first is not None and first[1] == "MPIJob", first
        feed.apply(*everything)
        feed.send()  # then every other kind's
        await pilot_wait(pilot, lambda: table.row_count == len(workloads), what="every workload")
        await pilot.pause()
        assert table.cursor_row == 0 and table.cursor_key == table.order[0] != first, (table.cursor_key, first)

        # moved onto a row: it stays on that row when rows come in before it
        await select(pilot, app, first)
        at = table.cursor_row
        assert at > 0 and table.cursor_key == first
        newcomer = copy.deepcopy(next(o for o in workloads if o["kind"] == "PyTorchJob"))
        newcomer["metadata"].update(name="aaa-newcomer", uid="uid-aaa-newcomer")
        feed.apply(newcomer)
        feed.send()
        await pilot_wait(pilot, lambda: table.row_count == len(workloads) + 1, what="the newcomer listed")
        await pilot.pause()
        assert table.cursor_key == first and table.cursor_row == at + 1, (table.cursor_key, table.cursor_row, at)
