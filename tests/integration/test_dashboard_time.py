"""Ages on the dashboard (#11.9), with `App.run_test()` against a passive simcluster (nothing in it
moves unless a test changes it): every age shown is right to its unit at all times, moved by the
app's one age ticker without any model change, repainting only the cells whose text changes; two
workloads created together always show the same age; past 2 minutes the ticker sleeps a minute."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import TabbedContent

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests import dashboard_kit as kit
from tests.kubeflow_objects import job
from tests.waiting import pilot_wait
from tui.app import RanksApp
from tui.screens.lists import WorkloadsScreen
from tui.screens.workload import WorkloadScreen
from tui.widgets.keyed_table import KeyedTable

NS = "default"
SIZE = (120, 30)


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(components=(), workdir=tmp_path_factory.mktemp("sim")) as t:
        yield t


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def add_job(t: ThreadedSimCluster, name: str, created: float, **labels: str) -> tuple[str, str, str]:
    obj = job("PyTorchJob", name, NS, {"Master": 1}, labels=labels)
    obj["metadata"]["creationTimestamp"] = stamp(created)
    t.call(t.sim.apply, obj)
    return (NS, "PyTorchJob", name)


def add_event(t: ThreadedSimCluster, name: str, about: str, at: float) -> None:
    t.call(t.sim.apply, {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": NS},
        "involvedObject": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": about, "namespace": NS},
        "reason": "Created", "message": f"{about} created", "type": "Normal", "count": 1,
        "firstTimestamp": stamp(at), "lastTimestamp": stamp(at)})


def make_app(t: ThreadedSimCluster, clock: Callable[[], float] = time.time) -> RanksApp:
    return kit.make_app(t, metrics=False, clock=clock)


async def list_shown(pilot: Pilot[Any], app: RanksApp, rows: int) -> KeyedTable:
    await pilot_wait(pilot, lambda: app.store.synced and isinstance(app.screen, WorkloadsScreen)
                     and app.screen.table.row_count == rows, 20, f"{rows} rows", interval=0.02)
    assert isinstance(app.screen, WorkloadsScreen)
    return app.screen.table


def age_of(table: KeyedTable, key: tuple[str, str, str]) -> str:
    """The age as painted: the row's last column on its rendered line."""
    return table.row_text(key).split()[-1]


def painted(widget: Widget) -> str:
    w, h = widget.size
    return "\n".join(strip.text for strip in widget.render_lines(Region(0, 0, w, h)))


def seconds(text: str) -> int:
    assert text.endswith("s") and text[:-1].isdigit(), text
    return int(text[:-1])


async def test_an_age_ticks_without_any_model_change_repainting_only_its_cells(
        cluster: ThreadedSimCluster) -> None:
    born = float(int(time.time()) - 3)
    a = add_job(cluster, "fresh-a", born)
    b = add_job(cluster, "fresh-b", born)
    old = add_job(cluster, "old", born - 5 * 3600)
    app = make_app(cluster)
    async with app.run_test(size=SIZE) as pilot:
        table = await list_shown(pilot, app, 3)
        view_a, rebuilds = app.store.workloads[a], table.rebuilds
        first = age_of(table, a)
        await pilot_wait(pilot, lambda: age_of(table, a) != first, 2.5, "the age to tick", interval=0.02)
        assert seconds(age_of(table, a)) > seconds(first)
        assert age_of(table, a) == age_of(table, b)
        assert app.store.workloads[a] is view_a, "no model change moved it"
        assert table.rebuilds == rebuilds
        assert age_of(table, old) == "5h"

        # only the cells whose text changes are repainted: the two fresh rows' lines, one each
        await pilot.pause()
        shown, renders = age_of(table, a), table.render_count
        await pilot_wait(pilot, lambda: age_of(table, a) != shown, 2.5, "the next tick", interval=0.02)
        await pilot_wait(pilot, lambda: table.render_count - renders >= 2, 1.0, "the repaint", interval=0.02)
        await pilot.pause(0.1)
        assert table.render_count - renders == 2, "one line per changed age, nothing else"


async def test_the_age_ticker_wakes_by_the_event_loop_not_a_textual_timer_each_tick(
        cluster: ThreadedSimCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle dashboard's ages tick often (a row's minute turns at its own second): each tick
    makes no Textual timer (a task, and a new callback whose signature Textual reads as it fires:
    most of an idle SSH session's UI thread at 20,000 pods, #31)."""
    made: list[str] = []
    real = RanksApp.set_timer

    def counted(self: RanksApp, *args: Any, **kwargs: Any) -> Any:
        made.append(str(kwargs.get("name")))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(RanksApp, "set_timer", counted)
    a = add_job(cluster, "fresh-a", float(int(time.time()) - 3))
    app = make_app(cluster)
    async with app.run_test(size=SIZE) as pilot:
        table = await list_shown(pilot, app, 1)
        ticks, first = app.age_ticks, age_of(table, a)
        await pilot_wait(pilot, lambda: app.age_ticks >= ticks + 2 and age_of(table, a) != first, 5,
                         "two ticks", interval=0.02)
        assert seconds(age_of(table, a)) > seconds(first)
        assert "ages" not in made


async def test_a_tick_looks_only_at_the_rows_whose_age_is_due(cluster: ThreadedSimCluster) -> None:
    """One young workload among thirty old ones: each second's tick looks at the young row alone,
    not at every row (a thousand rows at the SSH door's scale, every second: most of an idle
    session's UI thread, #31); the old rows keep their ages."""
    born = float(int(time.time()) - 3)
    fresh = add_job(cluster, "fresh", born)
    old = [add_job(cluster, f"old-{i:02d}", born - 5 * 3600 - i) for i in range(30)]
    app = make_app(cluster)

    class Looked(dict):  # type: ignore[type-arg]
        looks = 0

        def get(self, *args: Any) -> Any:
            Looked.looks += 1
            return super().get(*args)

    async with app.run_test(size=SIZE) as pilot:
        table = await list_shown(pilot, app, 31)
        screen = app.screen
        assert isinstance(screen, WorkloadsScreen)
        await pilot_wait(pilot, lambda: not getattr(screen, "_age_new", ()) and not getattr(screen, "_age_all", False), 5, "rows reckoned",
                         interval=0.02)
        screen._age_ahead = Looked(screen._age_ahead)
        ticks, first = app.age_ticks, age_of(table, fresh)
        await pilot_wait(pilot, lambda: app.age_ticks >= ticks + 2 and age_of(table, fresh) != first, 5,
                         "two ticks", interval=0.02)
        assert Looked.looks <= 2 * (app.age_ticks - ticks) + 2, Looked.looks
        assert all(age_of(table, k) == "5h" for k in old)


async def test_workloads_created_together_show_the_same_age_when_one_of_them_changes(
        cluster: ThreadedSimCluster) -> None:
    born = float(int(time.time()) - 3)
    a = add_job(cluster, "fresh-a", born)
    b = add_job(cluster, "fresh-b", born)
    app = make_app(cluster)
    async with app.run_test(size=SIZE) as pilot:
        table = await list_shown(pilot, app, 2)
        await asyncio.sleep(1.2)  # a second later, one of them changes (a new label): its row is rebuilt
        add_job(cluster, "fresh-a", born, team="x")
        await pilot_wait(pilot, lambda: dict(app.store.workloads[a].labels).get("team") == "x", 10, "the change", interval=0.02)
        assert app.store.workloads[b].labels == ()
        end = time.monotonic() + 1.5
        while time.monotonic() < end:  # across at least one tick
            assert age_of(table, a) == age_of(table, b)
            await pilot.pause(0.05)


async def test_minute_ages_turn_when_the_minute_starts_and_the_ticker_sleeps_meanwhile(
        cluster: ThreadedSimCluster) -> None:
    born = float(int(time.time()) - 3600)
    key = add_job(cluster, "steady", born)
    skew = [0.0]
    frozen: list[float | None] = [None]  # a clock stopped at this time (a busy machine takes its time to draw)
    app = make_app(cluster, clock=lambda: frozen[0] if frozen[0] is not None else time.time() + skew[0])
    async with app.run_test(size=SIZE) as pilot:
        table = await list_shown(pilot, app, 1)
        assert age_of(table, key) == "60m"
        frozen[0] = born + 5 * 60 + 59.4  # now the workload is 5 min 59.4 s old
        app.action_refresh()
        await pilot.pause()
        assert age_of(table, key) == "5m"  # the dashboard shows minutes from 2 minutes on (kubectl: 5m59s)
        skew[0] = born + 5 * 60 + 59.4 - time.time()  # the clock goes on from there
        frozen[0] = None
        await pilot_wait(pilot, lambda: age_of(table, key) == "6m", 1.5, '"6m" when the sixth minute starts', interval=0.02)
        assert app.clock() - born < 6 * 60 + 1, "within about a second"

        # only ages past 2 minutes on screen: the ticker sleeps until the next minute starts
        assert app.age_due is not None and 55 < app.age_due - app.clock() <= 60
        ticks = app.age_ticks
        await asyncio.sleep(1.5)
        assert app.age_ticks == ticks and age_of(table, key) == "6m"


async def test_detail_header_and_event_ages_tick(cluster: ThreadedSimCluster) -> None:
    born = float(int(time.time()) - 2)
    key = add_job(cluster, "detail", born)
    add_event(cluster, "detail.created", "detail", born)
    app = make_app(cluster)
    async with app.run_test(size=SIZE) as pilot:
        await list_shown(pilot, app, 1)
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.last is not None,
                         what="the detail screen", interval=0.02)
        screen = app.screen
        assert isinstance(screen, WorkloadScreen)
        header = screen.query_one("#header")

        def header_age() -> str:
            line = painted(header).splitlines()[0]
            return line.split(" age ", 1)[1].split()[0]

        first, view = header_age(), app.store.workloads[key]
        await pilot_wait(pilot, lambda: header_age() != first, 2.5, "the header's age to tick", interval=0.02)
        assert seconds(header_age()) > seconds(first)
        assert "PyTorchJob" in painted(header) and app.store.workloads[key] is view

        screen.query_one(TabbedContent).active = "tab-events"
        events = screen.query_one("#events")
        await pilot_wait(pilot, lambda: "Created" in painted(events), 10, "the event", interval=0.02)

        def event_age() -> str:
            return painted(events).split()[0]

        shown = event_age()
        await pilot_wait(pilot, lambda: event_age() != shown, 2.5, "the event's age to tick", interval=0.02)
        assert seconds(event_age()) > seconds(shown)


async def test_cluster_load_pending_and_node_pod_ages_tick(cluster: ThreadedSimCluster) -> None:
    from simcluster.scenarios.nodes import gpu_node
    from tests.kubeflow_objects import pod
    from tui.screens.cluster import ClusterScreen, NodePodsScreen

    born = float(int(time.time()) - 3)
    pending = add_job(cluster, "gang", born)  # no pods yet: Pending
    add_job(cluster, "placed", born)
    cluster.call(cluster.sim.apply, gpu_node("node-0", 8))
    placed = pod("PyTorchJob", "placed", NS, "Master", 0, node="node-0")
    placed["metadata"]["creationTimestamp"] = stamp(born)
    cluster.call(cluster.sim.apply, placed)
    app = make_app(cluster)
    async with app.run_test(size=SIZE) as pilot:
        await list_shown(pilot, app, 2)
        await pilot.press("c")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ClusterScreen), what="cluster load", interval=0.02)
        app.screen.query_one(TabbedContent).active = "tab-pending"
        table = app.screen.query_one("#pending-table", KeyedTable)
        await pilot_wait(pilot, lambda: pending in table.shown, 10, "the pending row", interval=0.02)

        def waiting() -> str:
            return table.row_text(pending).split()[2]

        first = waiting()
        await pilot_wait(pilot, lambda: waiting() != first, 2.5, "the pending age to tick", interval=0.02)
        assert seconds(waiting()) > seconds(first)
        panel = app.screen.query_one("#pending")
        await pilot_wait(pilot, lambda: f"waiting {waiting()}" in painted(panel), 2.5, "the panel's age", interval=0.02)

        app.push_screen(NodePodsScreen("node-0"))
        await pilot_wait(pilot, lambda: isinstance(app.screen, NodePodsScreen) and app.screen.query("#pods")
                         and app.screen.table.row_count == 1, 10, "the node's pods", interval=0.02)
        pods_table = app.screen.table
        key = pods_table.order[0]
        # (the node's pods are read whole when it is shown: their ages come with them)
        await pilot_wait(pilot, lambda: pods_table.row_text(key).split()[-1] != "-", 5, "the pod's age", interval=0.02)
        shown = pods_table.row_text(key).split()[-1]
        await pilot_wait(pilot, lambda: pods_table.row_text(key).split()[-1] != shown, 2.5, "the pod's age to tick", interval=0.02)
        assert seconds(pods_table.row_text(key).split()[-1]) > seconds(shown)
