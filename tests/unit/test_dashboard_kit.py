"""tests/dashboard_kit.py's `Feed`: a dashboard that asks no cluster anything shows what it is fed,
as the data loop's updates would have it (rows, a deletion, the status), and starts no data thread."""

from __future__ import annotations

import threading
from dataclasses import replace

from monitors.dataloop import DataStatus
from tests.dashboard_kit import banner, fed_app, row_names, synced
from tests.snapshots.test_views import NOW, objects
from tests.waiting import pilot_wait


async def test_a_fed_dashboard_shows_what_it_is_fed_and_nothing_else() -> None:
    app, feed = fed_app(clock=lambda: NOW, still=True)
    objs = objects()
    async with app.run_test(size=(120, 30)) as pilot:
        assert app.data.loop is None and not any(t.name == "ranks-data" for t in threading.enumerate())
        feed.apply(*objs).send()
        await synced(pilot, app, 7)
        assert sorted(row_names(app)) == sorted(o["metadata"]["name"] for o in objs if "ReplicaSpecs" in str(o.get("spec")))
        assert app.store.status.phase == "live" and len(app.store.nodes) == 6 and len(app.store.projects) == 3

        mnist = [o for o in objs if o["metadata"]["name"].startswith("mnist-quick")]  # the job and its pod
        feed.delete(*mnist).send()
        await pilot_wait(pilot, lambda: "mnist-quick" not in row_names(app), what="mnist-quick gone")
        assert len(row_names(app)) == 6

        feed.send(status=replace(feed.status, phase="retrying", problem="connection refused"))
        await pilot_wait(pilot, lambda: "connection refused" in banner(app), what="the banner")
        assert feed.sent[0].reset and not any(u.reset for u in feed.sent[1:])
        assert isinstance(feed.sent[-1].status, DataStatus)
