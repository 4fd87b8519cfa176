"""The dashboard's lists as a new user met them (#24, item 8) with `App.run_test()`: j/k and g/G in
every list (remappable by binding id, listed by `?`), the Events tab's cursor (Enter opens the
event's object, a long message read whole), the Placement tab of a job with a launcher, a pending
job's log view, the log view's save, and the per-column sort.

The cluster is the snapshot tests' passive simcluster (fixed objects with explicit status, nothing
moves), so each test sees the same rows."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static, TabbedContent

from monitors.records import EventRec
from sessions.ssh import SSH_SESSION_ENV
from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests import dashboard_kit as kit
from tests.dashboard_kit import Feed, fed_app, painted
from tests.snapshots.test_views import NOW, load, objects, open_workload, show_tab, synced
from tests.waiting import pilot_wait
from tui.app import RanksApp
from tui.screens.cluster import ClusterScreen, NodePodsScreen
from tui.screens.describe import DescribeScreen, HelpScreen
from tui.screens.dialogs import PromptScreen
from tui.screens.event_message import EventMessageScreen
from tui.screens.lists import ProjectsScreen, WorkloadsScreen
from tui.screens.logs import LogsScreen
from tui.settings import Settings
from tui.widgets.event_list import EventList
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.log_view import LogView
from tui.widgets.picker import Picker

SIZE = (120, 30)
TIMEOUT = 20.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(components=(), workdir=tmp_path_factory.mktemp("sim")) as t:
        t.call(load, t.sim, objects())
        yield t


def make_app(t: ThreadedSimCluster, settings: Settings | None = None) -> RanksApp:
    return kit.make_app(t, settings, metrics=False, clock=lambda: NOW, still=True)


def fed(settings: Settings | None = None) -> tuple[RanksApp, Feed]:
    """A dashboard fed the same objects with no cluster (for the tests of what it makes of them)."""
    app, feed = fed_app(settings, clock=lambda: NOW, still=True)
    feed.apply(*objects())
    return app, feed


async def wait(pilot: Pilot[Any], cond: Any, what: str) -> None:
    await pilot_wait(pilot, cond, timeout=TIMEOUT, what=what)


async def walk(pilot: Pilot[Any], table: KeyedTable, down: str = "j", up: str = "k", last: str = "G",
               first: str = "g") -> None:
    """The four keys move the table's cursor: one down, one up, to the last row, to the first."""
    assert table.row_count >= 2, table.order
    assert table.cursor_row == 0
    await pilot.press(down)
    assert table.cursor_row == 1, down
    await pilot.press(up)
    assert table.cursor_row == 0, up
    await pilot.press(last)
    assert table.cursor_row == table.row_count - 1, last
    await pilot.press(first)
    assert table.cursor_row == 0, first


# -- 1. j/k and g/G in every list ---------------------------------------------------------------------


async def test_j_k_g_G_move_the_cursor_of_every_list() -> None:
    app, feed = fed()
    async with app.run_test(size=SIZE) as pilot:
        feed.send()
        await synced(pilot)
        screen = app.screen
        assert isinstance(screen, WorkloadsScreen)
        await walk(pilot, screen.table)  # workloads

        await pilot.press("p")
        await wait(pilot, lambda: isinstance(app.screen, ProjectsScreen) and app.screen.table.row_count == 3,
                   "the projects")
        await walk(pilot, app.screen.table)  # type: ignore[attr-defined]
        await pilot.press("a")  # (p went back to the projects, the first screen)
        await wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen), "the workloads again")
        screen = app.screen

        detail = await open_workload(pilot, "llama-finetune")
        await walk(pilot, detail.table)  # ranks
        await pilot.press("escape")
        await wait(pilot, lambda: app.screen is screen, "the workloads again")

        await pilot.press("c")
        await wait(pilot, lambda: isinstance(app.screen, ClusterScreen) and app.screen.table.row_count == 6,
                   "the nodes")
        cl = app.screen
        assert isinstance(cl, ClusterScreen)
        await walk(pilot, cl.table)  # nodes
        await show_tab(pilot, "tab-pending")
        pending = cl.query_one("#pending-table", KeyedTable)
        await wait(pilot, lambda: pending.row_count == 1, "the pending table")
        await pilot.press("j", "G", "g")  # one row: the keys stay on it
        assert pending.cursor_row == 0
        await show_tab(pilot, "tab-nodes")
        node = next(i for i, k in enumerate(cl.table.order) if k == "h100-node-01")
        await pilot.press(*["j"] * node, "enter")
        await wait(pilot, lambda: isinstance(app.screen, NodePodsScreen) and app.screen.table.row_count == 3,
                   "the node's pods")
        await walk(pilot, app.screen.table)  # type: ignore[attr-defined]

        prompt = PromptScreen("a picker", choices=["one", "two", "three"])
        await app.push_screen(prompt)
        picker = prompt.query_one(Picker)
        picker.focus()
        picker.highlighted = 0
        await pilot.pause()
        await pilot.press("j")
        assert picker.highlighted == 1
        await pilot.press("G")
        assert picker.highlighted == 2
        await pilot.press("k")
        assert picker.highlighted == 1
        await pilot.press("g")
        assert picker.highlighted == 0


async def test_list_keys_are_remapped_by_id_and_listed_by_help() -> None:
    app, feed = fed(Settings(keymap={"row_down": "ctrl+n", "row_last": "L"}))
    async with app.run_test(size=SIZE) as pilot:
        feed.send()
        await synced(pilot)
        table = app.screen.table  # type: ignore[attr-defined]
        await pilot.press("j")
        assert table.cursor_row == 0, "j is no longer the down key"
        await pilot.press("ctrl+n")
        assert table.cursor_row == 1
        await pilot.press("L")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("k", "k")
        assert table.cursor_row == table.row_count - 3, "k is still the up key"

        await pilot.press("question_mark")
        await wait(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        text = str(app.screen.query_one("#help-text", Static).render())
        for bid, keys in (("row_down", "ctrl+n"), ("row_up", "k"), ("row_first", "g"), ("row_last", "L"),
                          ("event_message", "v")):
            assert re.search(rf"\n  {re.escape(keys)}\S*\s+.*\s{bid}\n", text), (bid, text)


# -- 3. the Placement tab of a job with a launcher ----------------------------------------------------


@pytest.mark.parametrize("width", [80, 100])
async def test_placement_draws_a_launcher_outside_the_gpu_columns(width: int) -> None:
    """hvd-interactive: a launcher without a GPU and two 1-GPU workers on a100-node-01 (4 GPUs). The
    node's row is its four GPU columns (w0, w1, two free), then the launcher under "no GPU"."""
    app, feed = fed()
    async with app.run_test(size=(width, 24)) as pilot:
        feed.send()
        screen = await open_workload(pilot, "hvd-interactive")
        await show_tab(pilot, "tab-placement")
        placement = screen.query_one("#placement", Static)
        await wait(pilot, lambda: "a100-node-01" in str(placement.render()), "the placement grid")
        await pilot.pause()
        lines = [ln.rstrip() for ln in painted(placement)]
        header, row = lines[0], next(ln for ln in lines if "a100-node-01" in ln)
        first = header.index("0   1")
        assert header[first:].split() == ["0", "1", "2", "3", "no", "GPU"], header
        assert row[first:first + 16] == "w0  w1  ··· ··· ", (header, row)
        assert row[header.index("no GPU"):] == "L", (header, row)
        assert len(row) < width - 2, row  # nothing cut at the panel's edge


# -- 7. the log view saves to a file it names, in the user's data directory ---------------------------


@pytest.mark.simcluster(components=("kubelet",))
async def test_ctrl_s_saves_to_a_named_file_in_xdg_data_home_never_the_current_directory(
        simcluster: ThreadedSimCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.dashboard_kit import open_logs
    from tests.integration.test_dashboard_smaller import kf_pod, seed
    from tests.integration.test_dashboard_smaller import make_app as kubelet_app

    data, cwd = tmp_path / "data", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    monkeypatch.delenv(SSH_SESSION_ENV, raising=False)
    key = seed(simcluster, "saved", [kf_pod("saved", "Master", 0, "echo alpha; echo 'beta token=s3cret'; sleep 30")])
    app = kubelet_app(simcluster)
    async with app.run_test(size=SIZE) as pilot:
        logs = await open_logs(pilot, app, key)
        await wait(pilot, lambda: logs.buffer.lines() == 2, "the two lines")
        await pilot.press("ctrl+s")
        await wait(pilot, lambda: logs.saved is not None, "the save")
        saved = logs.saved
        assert saved is not None
        assert saved.parent == data / "ranks" / "logs" and re.fullmatch(r"default_saved-\d{8}-\d{6}\.log", saved.name)
        assert [ln.split("]", 1)[1].strip() for ln in saved.read_text().splitlines()] == ["alpha", "beta token=s3cret"]
        assert oct(saved.stat().st_mode & 0o777) == oct(0o600)
        for d in (data / "ranks", data / "ranks" / "logs"):
            assert oct(d.stat().st_mode & 0o777) == oct(0o700), d
        assert any(str(saved) in str(n.message) for n in app._notifications), [n.message for n in app._notifications]
        assert list(cwd.iterdir()) == []

        await pilot.press("ctrl+s")  # the same second: another file, never the first overwritten
        await wait(pilot, lambda: logs.saved != saved, "the second save")
        assert logs.saved is not None and logs.saved.exists() and saved.exists()
        assert sorted(p.name for p in saved.parent.iterdir()) == sorted({saved.name, logs.saved.name})


@pytest.mark.simcluster(components=("kubelet",))
async def test_ctrl_s_is_refused_over_the_ssh_door(simcluster: ThreadedSimCluster, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A dashboard served by `ranks serve --ssh` runs on the server, as the server's user: a save
    would write the server's files. Refused, saying why (and what does it on the user's machine)."""
    from tests.dashboard_kit import open_logs
    from tests.integration.test_dashboard_smaller import kf_pod, seed
    from tests.integration.test_dashboard_smaller import make_app as kubelet_app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv(SSH_SESSION_ENV, "1")
    key = seed(simcluster, "remote", [kf_pod("remote", "Master", 0, "echo alpha; sleep 30")])
    app = kubelet_app(simcluster)
    async with app.run_test(size=SIZE) as pilot:
        logs = await open_logs(pilot, app, key)
        await wait(pilot, lambda: logs.buffer.lines() == 1, "the line")
        await pilot.press("ctrl+s")
        await wait(pilot, lambda: any("over SSH" in str(n.message) for n in app._notifications), "the refusal")
        said = next(str(n.message) for n in app._notifications if "over SSH" in str(n.message))
        assert "\n" not in said and "server" in said, said
        await pilot.pause(0.3)
        assert logs.saved is None and not (tmp_path / "data").exists()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["sim"]


# -- 6. a pending job's log view ----------------------------------------------------------------------


async def test_a_pending_job_s_log_view_says_no_pod_has_started_and_why(cluster: ThreadedSimCluster) -> None:
    app = make_app(cluster)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot)
        key = ("runai-team-a", "PyTorchJob", "big-pretrain")
        app.open_logs(key)
        await wait(pilot, lambda: isinstance(app.screen, LogsScreen) and app.screen.handle is not None, "the logs")
        logs = app.screen
        assert isinstance(logs, LogsScreen)
        view = logs.query_one(LogView)
        await wait(pilot, lambda: "no pod" in painted(view)[0], "the view to say why it is empty")
        first = painted(view)[0].strip()
        assert first.startswith("no pod of big-pretrain has started yet: 0/6 nodes are available: "
                                "2 Insufficient nvidia.com/gpu"), first
        assert not any(ln.strip() for ln in painted(view)[1:]), "one line"


# -- 5. the log view's `r` on an MPIJob: the launcher's lines tagged with the chosen ranks -------------


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet", "exec"),
                        pod_namespaces=False)  # (the simulated mpirun: see test_cli_smaller.SIM)
async def test_r_1_on_an_mpijob_shows_what_the_launcher_tagged_rank_1(simcluster: ThreadedSimCluster,
                                                                      k8s: Any) -> None:
    from simcluster.scenarios.nodes import gpu_nodes
    from tests.integration.test_cli_smaller import RANK_SAYS, launcher_done, mpijob

    for node in gpu_nodes(2, 8):
        simcluster.call(simcluster.sim.apply, node)
    mpijob(k8s, "tagged", f"mpirun --tag-output -np 2 {RANK_SAYS}")
    launcher_done(k8s, "tagged")
    app = make_app(simcluster)
    async with app.run_test(size=SIZE) as pilot:
        key = ("default", "MPIJob", "tagged")
        await wait(pilot, lambda: key in app.store.workloads and len(app.store.workloads[key].ranks) == 3, "the job")
        app.open_logs(key)
        await wait(pilot, lambda: isinstance(app.screen, LogsScreen) and app.screen.buffer.lines() == 7,
                   "every line (the launcher's 5, a worker's own each)")
        logs = app.screen
        assert isinstance(logs, LogsScreen)
        await pilot.press("r")
        await pilot.press(*"1", "enter")
        await wait(pilot, lambda: len(logs.view.source) == 3, "rank 1's lines")
        shown = sorted(ln.split("] ", 1)[1].strip() for ln in painted(logs.view)[:3])
        assert shown == ["[1,1]<stderr>:err of 1", "[1,1]<stdout>:out of 1", "worker tagged-worker-1 own line"], \
            painted(logs.view)


# -- 9. a per-column sort in every list -----------------------------------------------------------------


async def click_header(pilot: Pilot[Any], table: KeyedTable, label: str) -> None:
    """A click on the header of the column labelled `label` (its arrow aside)."""
    column = next(i for i, lab in enumerate(table.labels) if lab.rstrip("▲▼") == label)
    x = 1 + sum(table.widths[:column]) + column
    assert table.column_at(x) == column
    await pilot.click(table, offset=(x, 0))
    await pilot.pause()


def column_text(table: KeyedTable, label: str) -> list[str]:
    column = next(i for i, lab in enumerate(table.labels) if lab.rstrip("▲▼") == label)
    return [table.shown[k][column].plain for k in table.order]


async def test_a_click_on_a_header_sorts_every_list_by_that_column() -> None:
    app, feed = fed()
    async with app.run_test(size=SIZE) as pilot:
        feed.send()
        await synced(pilot)
        listing = app.screen
        assert isinstance(listing, WorkloadsScreen)
        t = listing.table
        await click_header(pilot, t, "KIND")  # no sort name shows it: by its text
        kinds = column_text(t, "KIND")
        assert kinds == sorted(kinds) and len(set(kinds)) > 1 and "KIND▲" in t.labels, (kinds, t.labels)
        await click_header(pilot, t, "KIND")  # again: the other way
        assert column_text(t, "KIND") == sorted(kinds, reverse=True) and "KIND▼" in t.labels, t.labels
        await click_header(pilot, t, "AGE")  # by the age's time, not its text ("2d1h" is older than "9h")
        assert listing.sort_names[listing.sort_index] == "created" and "AGE▲" in t.labels
        names = [k[2] for k in t.order]  # type: ignore[index]
        assert names[0] == "bert-crash" and names.index("resnet-tf") < names.index("hvd-interactive"), names
        await pilot.press("o")  # o goes on from there: the next named sort
        assert listing.sort_names[listing.sort_index] == "ranks_total" and "RANKS▲" in t.labels, t.labels

        detail = await open_workload(pilot, "resnet-tf")  # ranks: chief, workers, a parameter server
        ranks = detail.table
        await click_header(pilot, ranks, "RST")
        assert "RST▲" in ranks.labels and column_text(ranks, "RST")[-1] == "2", column_text(ranks, "RST")
        await click_header(pilot, ranks, "RST")
        assert "RST▼" in ranks.labels and column_text(ranks, "RST")[0] == "2"
        await pilot.press("escape")

        await pilot.press("c")
        await wait(pilot, lambda: isinstance(app.screen, ClusterScreen) and app.screen.table.row_count == 6,
                   "the nodes")
        nodes = app.screen.table  # type: ignore[attr-defined]
        assert column_text(nodes, "NODE")[0].startswith("a100"), "the screen's order: by pool"
        await click_header(pilot, nodes, "PODS")
        pods = [int(p) for p in column_text(nodes, "PODS")]
        assert pods == sorted(pods) and pods[0] < pods[-1], pods
        await pilot.press("O")  # the other way
        assert [int(p) for p in column_text(nodes, "PODS")] == sorted(pods, reverse=True)
        assert "PODS▼" in nodes.labels


async def test_o_goes_from_column_to_column_in_a_table_that_sorts_itself() -> None:
    app, feed = fed()
    async with app.run_test(size=SIZE) as pilot:
        feed.send()
        await synced(pilot)
        await pilot.press("c")
        await wait(pilot, lambda: isinstance(app.screen, ClusterScreen) and app.screen.table.row_count == 6,
                   "the nodes")
        nodes = app.screen.table  # type: ignore[attr-defined]
        await pilot.press("o")
        assert nodes.labels[0] == "NODE▲" and column_text(nodes, "NODE") == sorted(column_text(nodes, "NODE"))
        await pilot.press("o")
        assert nodes.labels[1] == "POOL▲" and nodes.labels[0] == "NODE"
        for _ in range(len(nodes.labels) - 1):
            await pilot.press("o")
        assert not any(lab.endswith(("▲", "▼")) for lab in nodes.labels), "back to the screen's own order"


# -- 2. the Events tab: a cursor, Enter opens the event's object, v reads a message whole ------------


def cursor_lines(widget: Widget) -> list[int]:
    """The lines of `widget` painted with the event cursor's background."""
    listing = widget.parent
    assert isinstance(listing, EventList)
    bg = listing.get_component_rich_style("event-list--cursor").bgcolor
    w, h = widget.size
    return [y for y, strip in enumerate(widget.render_lines(Region(0, 0, w, h)))
            if any(seg.style is not None and seg.style.bgcolor == bg for seg in strip if seg.text.strip())]


@pytest.mark.parametrize("size", [SIZE, (80, 24)], ids=["120", "80"])
async def test_the_events_tab_has_a_cursor_and_enter_opens_the_event_s_object(cluster: ThreadedSimCluster,
                                                                               size: tuple[int, int]) -> None:
    app = make_app(cluster)
    async with app.run_test(size=size) as pilot:
        screen = await open_workload(pilot, "bert-crash")
        await wait(pilot, lambda: len(app.store.events) == 8, "the workload's events")
        await show_tab(pilot, "tab-events")
        listing = screen.query_one(EventList)
        widget = screen.query_one("#events", Static)
        await wait(pilot, lambda: len(listing.events) == 8 and listing.has_focus, "the events, focused")
        rows = listing.rows
        assert rows == (2 if size[0] == 80 else 1)
        assert listing.current.reason == "PyTorchJobFailed" and cursor_lines(widget) == list(range(rows))

        await pilot.press("j")
        assert listing.current.reason == "BackOff"
        assert cursor_lines(widget) == list(range(rows, 2 * rows)), "the cursor moved down one event"
        await pilot.press("G")
        assert listing.current.reason == "Scheduled" and listing.cursor == 7
        await pilot.pause()
        top, height = int(listing.scroll_y), listing.scrollable_content_region.height
        assert top <= 7 * rows and 8 * rows <= top + height, (top, height, "the last event scrolled into view")
        if size[0] == 80:
            assert top > 0, "16 lines in a smaller pane: scrolled"
        await pilot.press("g", "j")  # the BackOff of worker-1: a rank's pod

        await pilot.press("v")  # its message whole, wrapped
        await wait(pilot, lambda: isinstance(app.screen, EventMessageScreen), "the message")
        dialog = app.screen.query_one("#event-message", Static)
        text = " ".join(ln.strip() for ln in painted(dialog))
        assert "Back-off restarting failed container pytorch in pod bert-crash-worker-1" in text, painted(dialog)
        assert "BackOff" in text and "pod/bert-crash-worker-1" in text and "x3" in text
        await pilot.press("escape")
        await wait(pilot, lambda: app.screen is screen, "the dialog closed")

        await pilot.press("enter")  # the rank's pod: the Ranks tab, on that rank
        tabs = screen.query_one(TabbedContent)
        await wait(pilot, lambda: tabs.active == "tab-ranks" and screen.table.has_focus, "the ranks")
        assert screen.table.cursor_key == "bert-crash-worker-1"

        await show_tab(pilot, "tab-events")
        await wait(pilot, lambda: listing.has_focus, "the events again")
        assert listing.current.reason == "BackOff", "the cursor stayed on its event"
        await pilot.press("k", "enter")  # PyTorchJobFailed: the workload itself, as YAML
        await wait(pilot, lambda: isinstance(app.screen, DescribeScreen), "the workload's YAML")
        assert app.screen.path.endswith("/namespaces/runai-team-b/pytorchjobs/bert-crash")  # type: ignore[attr-defined]
        await pilot.press("escape")
        await wait(pilot, lambda: app.screen is screen, "back on the workload")

        # a node's event: its pods (as Enter on a node of cluster load)
        node = EventRec("runai-team-b", "h100-node-03.x", "Node", "h100-node-03", "", "Warning", "NodeNotReady",
                        "Node h100-node-03 status is now: NodeNotReady", 1, NOW)
        screen.open_event_object(node)
        await wait(pilot, lambda: isinstance(app.screen, NodePodsScreen) and app.screen.node == "h100-node-03",
                   "the node's pods")
