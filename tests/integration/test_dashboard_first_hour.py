"""The dashboard's first hour (#11, items 3, 6, 7 and 8) with `App.run_test()` against simcluster's
demo (pods are real processes), plus one gang with a long name that can never be scheduled:

3. what a filter is: the text shows as typed (lists and logs, `/`, `r`), an active filter
   is said after the breadcrumb with its count, an empty result says why;
6. 80 columns: columns give way by priority (AGE never), the footer keeps `?`, a pending reason
   can be read whole (Enter on the row);
7. every key in a footer works there or is not shown (projects, describe, cluster load, tabs);
8. confirmations: focus on the action when harmless, on Cancel when destructive, "cancelled"
   said; the convert checkbox reads as ticked or not without colour.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Button, Static, TabbedContent, TextArea

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests import dashboard_kit as kit
from tests.dashboard_kit import (
    crumbs,
    make_app,
    move_to,
    notifications,
    synced,
    table,
    text_of,
    type_text,
    wait_screen,
)
from tests.kubeflow_objects import job
from tests.waiting import pilot_wait
from themes import ColourMode
from tui.app import RanksApp
from tui.screens.cluster import ClusterScreen
from tui.screens.describe import DescribeScreen, HelpScreen
from tui.screens.dialogs import ConfirmScreen, ConvertScreen
from tui.screens.lists import FilterInput, ProjectsScreen, WorkloadsScreen
from tui.screens.logs import LogsScreen
from tui.screens.workload import WorkloadScreen
from tui.widgets.keyed_table import KeyedTable
from tui.widgets.log_view import LogView

NARROW = (80, 24)
WIDE = (120, 40)
LONG = "multilingual-bert-large-pretraining-sweep-7"
LONG_KEY = ("runai-team-a", "PyTorchJob", LONG)
BIG = ("runai-team-a", "PyTorchJob", "big-pretrain")
HVD = ("runai-team-a", "MPIJob", "hvd-interactive")
RESNET = ("runai-team-b", "TFJob", "resnet-tf")
XGB = ("research", "XGBoostJob", "xgb-churn")
WORKLOADS = 10  # the demo's 9 and the long-named gang


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    """The demo, plus a gang with a long name asking for GPUs no node has (pending for ever)."""
    with sim_in_thread(scenario="demo", workdir=tmp_path_factory.mktemp("first-hour")) as t:
        gang = job("PyTorchJob", LONG, "runai-team-a", {"Master": 1, "Worker": 2}, gpus=16,
                   command=["sleep", "3600"], labels={"ranks/user": "alice"})
        for spec in gang["spec"]["pytorchReplicaSpecs"].values():
            spec["template"]["spec"]["containers"][0]["name"] = "pytorch"  # the operator insists
        t.call(t.sim.apply, gang)
        yield t


rendered = partial(kit.rendered, outer=True)  # (border and padding included)


def crumb_line(app: RanksApp) -> str:
    return rendered(app.screen.query_one("#crumbs", Static))


def footer_keys(app: RanksApp) -> dict[str, Widget]:
    """The footer's keys on screen by description (Textual does not export FooterKey: by type name)."""
    return {str(getattr(k, "description", "")): k for k in app.screen.query("FooterKey") if k.display}


def fully_on_screen(app: RanksApp, widget: Widget) -> bool:
    r = widget.region
    return r.width > 0 and r.x >= 0 and r.right <= app.size.width


def on_screen_keys(app: RanksApp) -> set[str]:
    return {d for d, k in footer_keys(app).items() if fully_on_screen(app, k)}


async def pending_reason(pilot: Pilot[Any], app: RanksApp, key: tuple[str, str, str]) -> str:
    """The scheduler's message on the gang's pods, once the scheduler has given it."""
    def reason() -> str:
        w = app.store.workloads.get(key)
        msgs = [r.message for r in w.ranks if r.phase == "Pending" and r.message] if w else []
        return msgs[0] if msgs else ""

    await pilot_wait(pilot, lambda: len(reason()) > 60, timeout=30, what=f"{key[2]} unschedulable")
    return reason()


# -- 3. what a filter is ----------------------------------------------------------------------------


async def test_list_filter_shows_as_typed_then_in_the_breadcrumb_with_its_count(demo: ThreadedSimCluster) -> None:
    app = make_app(demo)
    async with app.run_test(size=NARROW) as pilot:
        await synced(pilot, app, WORKLOADS)
        await pilot_wait(pilot, lambda: table(app).row_count == WORKLOADS, what="every workload")
        await pilot.press("slash")
        await type_text(pilot, "bert")
        inp = app.screen.query_one(FilterInput)
        await pilot_wait(pilot, lambda: table(app).row_count == 2, what="the filter applied while typing")
        assert inp.region.height == 1, "the input is one row"
        assert "bert" in rendered(inp), f"the typed text is not on screen: {rendered(inp)!r}"
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: table(app).has_focus, what="the table focused")
        assert "/bert  2 of 10" in crumb_line(app), crumb_line(app)
        assert crumbs(app)[:3] == ["ranks", "projects", "all projects  /bert  2 of 10"]

        await pilot.press("escape")  # clears it: the breadcrumb says nothing more
        await pilot_wait(pilot, lambda: table(app).row_count == WORKLOADS, what="the filter cleared")
        assert "of 10" not in crumb_line(app) and "/bert" not in crumb_line(app)

        await pilot.press("slash")
        await type_text(pilot, "xyz")
        await pilot.press("enter")
        note = app.screen.query_one("#empty", Static)
        await pilot_wait(pilot, lambda: "no workload matches /xyz" in rendered(note), what="why the list is empty")
        assert "/xyz  0 of 10" in crumb_line(app)


async def test_log_prompts_show_as_typed_and_an_empty_filtered_view_says_why(demo: ThreadedSimCluster) -> None:
    app = make_app(demo)
    async with app.run_test(size=NARROW) as pilot:
        await synced(pilot, app, WORKLOADS)
        await move_to(pilot, table(app), XGB)
        await pilot.press("l")
        logs = await wait_screen(pilot, LogsScreen)
        await pilot_wait(pilot, lambda: len(logs.buffer) > 0, timeout=20, what="log lines")
        inp = logs.query_one(FilterInput)
        for key, typed in (("slash", "nomatch-zz"), ("r", "worker-9")):  # (ctrl+s asks nothing now: #24)
            await pilot.press(key)
            await pilot_wait(pilot, lambda: inp.has_focus, what=f"the {key} prompt")
            await type_text(pilot, typed)
            await pilot.pause()
            assert inp.region.height == 1 and typed in rendered(inp), (key, rendered(inp))
            await pilot.press("escape")
            await pilot_wait(pilot, lambda: logs.view.has_focus, what="the prompt closed")

        await pilot.press("slash")
        await type_text(pilot, "nomatch-zz")
        await pilot.press("enter")
        view = logs.query_one(LogView)
        await pilot_wait(pilot, lambda: len(view.source) == 0, what="nothing matches")
        await pilot_wait(pilot, lambda: "no line matches /nomatch-zz" in rendered(view), what="why the view is empty")
        # a rank the workload does not have: said so, with the ranks it has
        await pilot.press("slash")
        await pilot_wait(pilot, lambda: inp.has_focus, what="the / prompt")
        await pilot.press("ctrl+u")
        await pilot.press("enter")
        await pilot.press("r")
        await pilot_wait(pilot, lambda: inp.has_focus, what="the r prompt")
        await type_text(pilot, "worker-9")
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: "no rank worker-9 in this workload (ranks: " in rendered(view),
                         what="the unknown rank said")


# -- 6. 80 columns -----------------------------------------------------------------------------------


async def test_80_columns_long_name_gives_way_age_and_help_key_stay(demo: ThreadedSimCluster) -> None:
    app = make_app(demo)
    async with app.run_test(size=NARROW) as pilot:
        await synced(pilot, app, WORKLOADS)
        t = table(app)
        await pilot_wait(pilot, lambda: LONG_KEY in t.order, what="the long-named gang")
        await pilot.pause()
        rows = rendered(t).splitlines()
        long_row = next(r for r in rows if r.lstrip().startswith(LONG[:12]))
        age = t.shown[LONG_KEY][-1].plain
        assert re.fullmatch(r"\d+[smhd]\w*", age), age
        assert re.search(rf" {re.escape(age)}\s*$", long_row), f"AGE cut: {long_row!r} (age {age!r})"
        assert "…" in long_row.split()[0] and len(long_row.split()[0]) >= 12, long_row
        header = rows[0]
        assert re.search(r"\bAGE\s*$", header), header
        assert sum(t.widths) + len(t.widths) + 1 <= t.size.width, "the columns fit the view"

        await pilot_wait(pilot, lambda: "Help" in on_screen_keys(app), what="? Help whole in the footer")

        def keys_under_help() -> list[str]:
            keys = footer_keys(app)
            return [d for d, k in keys.items() if d != "Help" and k.region.right > keys["Help"].region.x]

        await pilot_wait(pilot, lambda: not keys_under_help(), what="no key cut in half under ? Help")
        assert {"Back", "Filter", "Describe", "Logs"} <= on_screen_keys(app), on_screen_keys(app)


async def test_pending_reason_reads_whole_after_enter_on_its_row(demo: ThreadedSimCluster) -> None:
    app = make_app(demo)
    async with app.run_test(size=NARROW) as pilot:
        await synced(pilot, app, WORKLOADS)
        reason = await pending_reason(pilot, app, LONG_KEY)
        await move_to(pilot, table(app), LONG_KEY)
        assert reason not in rendered(table(app)), "the list cell cuts the reason"
        await pilot.press("enter")
        detail = await wait_screen(pilot, WorkloadScreen)
        panel = detail.query_one("#pending", Static)
        await pilot_wait(pilot, lambda: panel.display and panel.region.height > 1, what="the pending panel")
        shown = " ".join(line.strip() for line in rendered(panel).splitlines())
        assert reason in shown, f"{reason!r} not whole in {shown!r}"


# -- 7. keys that do nothing --------------------------------------------------------------------------


async def test_projects_footer_offers_only_working_keys_and_d_describes_the_namespace(
        demo: ThreadedSimCluster) -> None:
    app = make_app(demo)
    async with app.run_test(size=WIDE) as pilot:
        await synced(pilot, app, WORKLOADS)
        await pilot.press("p")
        projects = await wait_screen(pilot, ProjectsScreen)
        await pilot_wait(pilot, lambda: projects.table.row_count == 3, what="the projects")
        await pilot.pause()
        keys = on_screen_keys(app)
        assert not keys & {"Logs", "Only mine"}, sorted(keys)
        assert "Back" not in keys, "Esc does nothing at the bottom of the stack"
        assert {"Filter", "Describe", "Sort", "Help"} <= keys, sorted(keys)
        for key in ("l", "m"):
            await pilot.press(key)
            await pilot.pause(0.1)
            assert app.screen is projects and not projects.mine, key

        await move_to(pilot, projects.table, "runai-team-b")
        await pilot.press("d")
        describe = await wait_screen(pilot, DescribeScreen)
        area = describe.query_one(TextArea)
        await pilot_wait(pilot, lambda: "kind: Namespace" in area.text, what="the namespace's YAML")
        assert "name: runai-team-b" in area.text


async def test_describe_end_and_g_scroll_and_y_is_not_offered(demo: ThreadedSimCluster) -> None:
    app = make_app(demo)
    async with app.run_test(size=NARROW) as pilot:
        await synced(pilot, app, WORKLOADS)
        await move_to(pilot, table(app), BIG)
        await pilot.press("d")
        describe = await wait_screen(pilot, DescribeScreen)
        area = describe.query_one(TextArea)
        await pilot_wait(pilot, lambda: area.text.startswith("apiVersion:"), what="the YAML")
        await pilot.pause()
        assert area.document.line_count > area.size.height, "the YAML is longer than the view"
        assert "YAML" not in on_screen_keys(app)
        assert area.scroll_y == 0
        for key in ("end", "G"):
            await pilot.press("home")
            await pilot.press(key)
            await pilot_wait(pilot, lambda: area.scroll_y == area.max_scroll_y > 0, what=f"{key}: the end")
            assert area.cursor_location[0] == area.document.line_count - 1
        await pilot.press("g")
        await pilot_wait(pilot, lambda: area.scroll_y == 0, what="g: the top")


async def test_cluster_pending_enter_opens_d_describes_and_node_enter_lists_its_pods(
        demo: ThreadedSimCluster) -> None:
    app = make_app(demo)
    async with app.run_test(size=WIDE) as pilot:
        await synced(pilot, app, WORKLOADS)
        await pending_reason(pilot, app, BIG)
        await pilot.press("c")
        cluster = await wait_screen(pilot, ClusterScreen)
        await pilot_wait(pilot, lambda: cluster.table.row_count == 8, what="the nodes")

        # a node's pods: which workload, which rank, its GPUs
        node = "h100-node-01"
        here = {(w.name, r.label) for w in app.store.workloads.values() for r in w.ranks if r.node == node}
        assert here, "the demo runs ranks on h100-node-01"
        await move_to(pilot, cluster.table, node)
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: crumbs(app)[-1] == f"pods on {node}", what="the node's pods")
        pods = app.screen.query_one("#pods", KeyedTable)
        await pilot_wait(pilot, lambda: pods.row_count == len(here), what="a row per rank on the node")
        shown = rendered(pods)
        for name, label in here:
            assert re.search(rf"/{re.escape(name)}\s+{re.escape(label)}\s", shown), (name, label, shown)
        assert re.search(r"WORKLOAD\s+RANK\s+STATUS\s+GPUS", shown.splitlines()[0])
        first = pods.cursor_key
        await pilot.press("enter")
        detail = await wait_screen(pilot, WorkloadScreen)
        assert detail.key == first[0]  # type: ignore[index]
        await pilot.press("escape", "escape")
        assert await wait_screen(pilot, ClusterScreen) is cluster

        tabs = cluster.query_one(TabbedContent)
        await pilot.press("right")  # nodes -> quota: no row to open or describe
        await pilot_wait(pilot, lambda: tabs.active == "tab-quota" and "Quit" in on_screen_keys(app)
                         and "Describe" not in on_screen_keys(app), what="the quota tab without d")
        await pilot.press("right")  # -> pending
        await pilot_wait(pilot, lambda: tabs.active == "tab-pending", what="the pending tab")
        pending = cluster.query_one("#pending-table", KeyedTable)
        await pilot_wait(pilot, lambda: {BIG, LONG_KEY} <= set(pending.order), what="the pending rows")
        await pilot_wait(pilot, lambda: "Describe" in on_screen_keys(app), what="d in the pending tab's footer")
        await move_to(pilot, pending, BIG)
        detail_panel = cluster.query_one("#pending", Static)
        await pilot_wait(pilot, lambda: "big-pretrain" in rendered(detail_panel), what="the row's reasons")
        await pilot.press("enter")
        opened = await wait_screen(pilot, WorkloadScreen)
        assert opened.key == BIG
        await pilot.press("escape")
        await wait_screen(pilot, ClusterScreen)
        await pilot_wait(pilot, lambda: tabs.active == "tab-pending" and pending.has_focus, what="back on pending")
        await move_to(pilot, pending, BIG)
        await pilot.press("d")
        describe = await wait_screen(pilot, DescribeScreen)
        await pilot_wait(pilot, lambda: "name: big-pretrain" in describe.query_one(TextArea).text, what="its YAML")


async def test_workload_tabs_switch_with_left_right_and_help_says_so(demo: ThreadedSimCluster) -> None:
    app = make_app(demo)
    async with app.run_test(size=NARROW) as pilot:
        await synced(pilot, app, WORKLOADS)
        await move_to(pilot, table(app), RESNET)
        await pilot.press("enter")
        detail = await wait_screen(pilot, WorkloadScreen)
        tabs = detail.query_one(TabbedContent)
        await pilot_wait(pilot, lambda: detail.table.has_focus, what="the ranks table focused")
        for key, tab in (("right", "tab-placement"), ("right", "tab-events"), ("left", "tab-placement"),
                         ("left", "tab-ranks")):
            await pilot.press(key)
            await pilot_wait(pilot, lambda t=tab: tabs.active == t, what=f"{key}: {tab}")
        await pilot_wait(pilot, lambda: detail.table.has_focus, what="the ranks table focused again")
        await pilot.press("question_mark")
        help_screen = await wait_screen(pilot, HelpScreen)
        text = text_of(help_screen.query_one("#help-text", Static))
        assert re.search(r"Tab moves the focus", text), text
        assert re.search(r"→\s+Next tab\s+next_tab", text) and re.search(r"←\s+Previous tab\s+previous_tab", text)


# -- 8. confirmations ------------------------------------------------------------------------------------


def job_suspended(demo: ThreadedSimCluster, key: tuple[str, str, str]) -> bool:
    def get() -> bool:
        obj = demo.sim.store.find(("kubeflow.org", key[1].lower() + "s"), key[0], key[2])
        return obj is not None and bool(copy.deepcopy(obj.obj).get("spec", {}).get("runPolicy", {}).get("suspend"))

    return demo.call(get)


def job_exists(demo: ThreadedSimCluster, key: tuple[str, str, str]) -> bool:
    return demo.call(lambda: demo.sim.store.find(("kubeflow.org", key[1].lower() + "s"), key[0], key[2])
                     is not None)


async def test_confirm_focus_on_the_action_when_harmless_on_cancel_when_destructive(
        demo: ThreadedSimCluster) -> None:
    app = make_app(demo)
    async with app.run_test(size=WIDE) as pilot:
        await synced(pilot, app, WORKLOADS)
        await move_to(pilot, table(app), LONG_KEY)
        await pilot.press("ctrl+d")
        confirm = await wait_screen(pilot, ConfirmScreen)
        await pilot_wait(pilot, lambda: confirm.focused is not None, what="a focused button")
        assert isinstance(confirm.focused, Button) and confirm.focused.id == "no", "delete starts on Cancel"
        await pilot.press("enter")
        await wait_screen(pilot, WorkloadsScreen)
        await pilot_wait(pilot, lambda: "cancelled" in notifications(app), what="the cancelled toast")
        assert job_exists(demo, LONG_KEY)

        before = len(notifications(app))
        await pilot.press("z")  # suspend: harmless, Enter does it
        confirm = await wait_screen(pilot, ConfirmScreen)
        await pilot_wait(pilot, lambda: confirm.focused is not None, what="a focused button")
        assert isinstance(confirm.focused, Button) and confirm.focused.id == "yes", "suspend starts on Suspend"
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: job_suspended(demo, LONG_KEY), what="runPolicy.suspend")
        assert "cancelled" not in notifications(app)[before:]

        await pilot.press("z")  # resume, cancelled with n: said too
        await wait_screen(pilot, ConfirmScreen)
        before = len(notifications(app))
        await pilot.press("n")
        await pilot_wait(pilot, lambda: "cancelled" in notifications(app)[before:], what="cancelled again")
        assert job_suspended(demo, LONG_KEY)


@pytest.mark.parametrize(("ascii", "mode"), [(True, ColourMode.TRUECOLOR), (False, ColourMode.MONO)],
                         ids=["ascii", "mono"])
async def test_convert_checkbox_reads_ticked_or_not_without_colour(demo: ThreadedSimCluster, ascii: bool,
                                                                   mode: ColourMode) -> None:
    app = make_app(demo, colour_mode=mode, ascii=ascii)
    async with app.run_test(size=WIDE) as pilot:
        await synced(pilot, app, WORKLOADS)
        await pilot_wait(pilot, lambda: (w := app.store.workloads.get(HVD)) is not None
                         and all(r.phase == "Running" for r in w.ranks) and len(w.ranks) == 3, timeout=60,
                         what="the interactive session running")
        await move_to(pilot, table(app), HVD)
        await pilot.press("t")
        screen = await wait_screen(pilot, ConvertScreen, timeout=20)
        box = await pilot_wait(pilot, lambda: next(iter(screen.query("#delete")), None), what="the form")
        await pilot_wait(pilot, lambda: box.region.height > 0, what="the checkbox")
        # (it starts ticked when the new job would wait on the session's own GPUs: #24, item 5)
        mark, start = {False: "[ ]", True: "[x]"}, bool(getattr(box, "value", False))
        assert f"{mark[start]} delete the interactive session" in rendered(box), rendered(box)
        box.focus()
        await pilot.press("space")
        await pilot_wait(pilot, lambda: bool(getattr(box, "value", False)) is not start, what="toggled")
        assert f"{mark[not start]} delete the interactive session" in rendered(box), rendered(box)
