"""The Textual dashboard driven through `App.run_test()` against a real simcluster (no mocks).

One live demo cluster (operators, scheduler, kubelet, exec, dcgm: pods are real processes) serves
the read-only tests of the module; the tests that break or change things (deleting a workload,
restarting the API server, planting hostile text) get their own passive demo cluster, seeded with
a workload of their own.
"""

from __future__ import annotations

import asyncio
import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets import Static, TabbedContent

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.dashboard_kit import (
    banner,
    crumbs,
    make_app,
    move_to,
    rendered,
    row_names,
    synced,
    table,
    text_of,
    type_text,
    wait_screen,
)
from tests.kubeflow_objects import job, pod
from tests.waiting import pilot_wait
from tui.screens.cluster import ClusterScreen
from tui.screens.describe import HelpScreen
from tui.screens.lists import FilterInput, ProjectsScreen, WorkloadsScreen
from tui.screens.logs import LogsScreen
from tui.screens.workload import WorkloadScreen
from tui.settings import Settings

SIZE = (160, 48)
DEMO = {
    "runai-team-a": {"hvd-interactive", "pt-interactive", "llama-finetune", "big-pretrain"},
    "runai-team-b": {"resnet-tf", "bert-crash", "gpt-hung"},
    "research": {"xgb-churn", "mnist-quick"},
}
ALL_DEMO = set().union(*DEMO.values())
N_DEMO = len(ALL_DEMO)  # 9
LLAMA = ("runai-team-a", "PyTorchJob", "llama-finetune")


# -- fixtures and helpers -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    """The demo as `ranks demo` runs it, shared by the read-only tests of this module."""
    with sim_in_thread(scenario="demo", workdir=tmp_path_factory.mktemp("live") / "sim") as t:
        yield t


# -- 1. navigation ------------------------------------------------------------------------------


async def test_navigation_projects_workloads_ranks_logs_and_back(live: ThreadedSimCluster) -> None:
    app = make_app(live.sim.kubeconfig_path)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, N_DEMO)
        screen = app.screen
        assert isinstance(screen, WorkloadsScreen) and screen.namespace is None
        await pilot_wait(pilot, lambda: set(row_names(app)) == ALL_DEMO, what=f"the {N_DEMO} demo workloads")
        assert len(row_names(app)) == N_DEMO
        assert crumbs(app) == ["ranks", "projects", "all projects"]

        await pilot.press("p")
        projects = await wait_screen(pilot, ProjectsScreen)
        await pilot_wait(pilot, lambda: set(projects.table.order) == set(DEMO), what="3 projects")
        names = {app.store.projects[ns].name for ns in projects.table.order}
        assert names == {"team-a", "team-b", "research"}
        assert crumbs(app) == ["ranks", "projects"]

        await move_to(pilot, projects.table, "runai-team-a")
        await pilot.press("enter")
        team_a = await wait_screen(pilot, WorkloadsScreen)
        assert team_a.namespace == "runai-team-a"
        await pilot_wait(pilot, lambda: set(row_names(app)) == DEMO["runai-team-a"], what="team-a workloads")
        assert crumbs(app) == ["ranks", "projects", "team-a"]

        await move_to(pilot, team_a.table, LLAMA)
        await pilot.press("enter")
        detail = await wait_screen(pilot, WorkloadScreen)
        assert detail.key == LLAMA
        pods = {"llama-finetune-master-0", *(f"llama-finetune-worker-{i}" for i in range(3))}
        await pilot_wait(pilot, lambda: set(table(app, "#ranks").order) == pods, what="llama ranks")
        assert crumbs(app) == ["ranks", "projects", "team-a", "llama-finetune"]
        assert "PyTorchJob" in text_of(detail.query_one("#header", Static))

        await pilot.press("l")
        logs = await wait_screen(pilot, LogsScreen)
        assert crumbs(app) == ["ranks", "projects", "team-a", "llama-finetune", "logs llama-finetune"]

        def labels() -> set[str]:
            return {line.label for line in logs.buffer if line.kind == "line"}

        await pilot_wait(pilot, lambda: len(labels()) >= 2 and len(logs.buffer) >= 8, timeout=20,
                         what="log lines of several ranks")
        assert labels() <= {"master-0", "worker-0", "worker-1", "worker-2"}, labels()
        await pilot_wait(pilot, lambda: "lines" in text_of(logs.query_one("#logstatus", Static)),
                         what="log status line")

        await pilot.press("escape")
        assert await wait_screen(pilot, WorkloadScreen) is detail
        assert crumbs(app)[-1] == "llama-finetune"
        await pilot.press("escape")
        assert await wait_screen(pilot, WorkloadsScreen) is team_a
        assert crumbs(app) == ["ranks", "projects", "team-a"]
        await pilot.press("escape")
        assert await wait_screen(pilot, ProjectsScreen) is projects
        await pilot.press("escape")  # the bottom of the stack: stays
        await pilot.pause()
        assert app.screen is projects and app.return_code is None


# -- 2. filter ----------------------------------------------------------------------------------


async def test_filter_regex_invert_labels_and_bad_regex(live: ThreadedSimCluster) -> None:
    app = make_app(live.sim.kubeconfig_path)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, N_DEMO)
        await pilot_wait(pilot, lambda: set(row_names(app)) == ALL_DEMO, what="all rows")
        screen = app.screen
        assert isinstance(screen, WorkloadsScreen)
        labels = dict(app.store.workloads[LLAMA].labels)
        assert labels.get("ranks/user") == "alice"

        await pilot.press("slash")
        inp = screen.query_one(FilterInput)
        assert inp.has_focus and inp.has_class("-shown")
        await type_text(pilot, "llama|bert")
        await pilot_wait(pilot, lambda: set(row_names(app)) == {"llama-finetune", "bert-crash"}, what="regex")
        await pilot.press("enter")  # applies and keeps the filter
        await pilot.pause()
        assert set(row_names(app)) == {"llama-finetune", "bert-crash"} and table(app).has_focus
        await pilot.press("escape")  # Esc on the table clears an active filter
        await pilot_wait(pilot, lambda: len(row_names(app)) == N_DEMO, what="filter cleared")
        assert not inp.has_class("-shown") and inp.value == ""

        await pilot.press("slash")
        await type_text(pilot, "!team")
        await pilot_wait(pilot, lambda: set(row_names(app)) == DEMO["research"], what="inverted regex")
        await pilot.press("ctrl+u")  # empties the input: every row again
        await pilot_wait(pilot, lambda: len(row_names(app)) == N_DEMO, what="empty filter")

        await type_text(pilot, "-l ranks/user=bob")
        await pilot_wait(pilot, lambda: set(row_names(app)) == DEMO["runai-team-b"], what="label selector")
        await pilot.press("ctrl+u")
        await type_text(pilot, "-l ranks/user in (carol,alice)")
        await pilot_wait(pilot, lambda: set(row_names(app)) == DEMO["research"] | DEMO["runai-team-a"],
                         what="set-based label selector")
        await pilot.press("escape", "escape")  # leave the input, then clear
        await pilot_wait(pilot, lambda: len(row_names(app)) == N_DEMO, what="cleared")

        await pilot.press("slash")
        await type_text(pilot, "(")
        await pilot.pause()
        assert len(row_names(app)) == N_DEMO, "a bad regex keeps the rows"
        assert "bad regular expression" in str(inp.border_subtitle)
        await pilot.press("enter")  # refused with a notification, no crash
        await pilot.pause()
        assert len(row_names(app)) == N_DEMO and app.screen is screen and app.return_code is None
        # (Textual has no public list of notifications)
        assert any("bad regular expression" in str(n.message) for n in app._notifications)
        await pilot.press("ctrl+u", "escape")
        await pilot.pause()
        assert not inp.has_class("-shown") and len(row_names(app)) == N_DEMO


# -- 3. sort ------------------------------------------------------------------------------------


async def test_sort_cycles_keys_and_reverses(live: ThreadedSimCluster) -> None:
    app = make_app(live.sim.kubeconfig_path)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, N_DEMO)
        await pilot_wait(pilot, lambda: len(row_names(app)) == N_DEMO, what="all rows")
        screen = app.screen
        assert isinstance(screen, WorkloadsScreen)
        t = table(app)

        def column(attr: str) -> list[Any]:
            return [getattr(app.store.workloads[k], attr) for k in t.order]  # type: ignore[index]

        # llama-finetune holds the most GPUs (4 ranks x 2) once it is scheduled
        await pilot_wait(pilot, lambda: app.store.workloads[LLAMA].gpus_allocated == 8, timeout=20,
                         what="llama-finetune scheduled")
        assert row_names(app) == sorted(row_names(app)), "name order first"
        by_name = list(t.order)

        await pilot.press("o")
        assert screen.sort_names[screen.sort_index] == "status"
        statuses = column("status")
        assert statuses == sorted(statuses) and len(set(statuses)) > 1
        assert list(t.order) != by_name
        assert any("STATUS" in label and "▲" in label for label in t.labels)

        await pilot.press("o")
        assert screen.sort_names[screen.sort_index] == "gpus_allocated"
        gpus = column("gpus_allocated")
        assert gpus == sorted(gpus) and gpus[0] < gpus[-1]

        await pilot.press("O")  # reversed: most GPUs first
        gpus_rev = column("gpus_allocated")
        assert gpus_rev == sorted(gpus_rev, reverse=True)
        assert t.order[0] == LLAMA
        assert any("GPUS" in label and "▼" in label for label in t.labels)
        await pilot.press("O")
        assert column("gpus_allocated") == sorted(column("gpus_allocated"))

        for _ in range(len(screen.sort_names) - 2):  # all the way round
            await pilot.press("o")
        assert screen.sort_names[screen.sort_index] == "name"
        assert row_names(app) == sorted(row_names(app))


# -- 4. themes ----------------------------------------------------------------------------------


async def test_themes_switch_and_redraw(live: ThreadedSimCluster) -> None:
    app = make_app(live.sim.kubeconfig_path)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, N_DEMO)
        await pilot_wait(pilot, lambda: LLAMA in table(app).order, what="llama row")
        names = app.theme_set.names()
        assert set(names) >= {"dark", "light", "high-contrast", "colour-blind"}
        assert app.look.theme.name == "dark"

        def status_style() -> str:
            t = table(app)
            cells = t.shown[LLAMA]
            col = next(i for i, label in enumerate(t.labels) if label.strip().startswith("STATUS"))
            return str(cells[col].style) + str(cells[col].spans)

        styles = {"dark": status_style()}
        for _ in names:
            before = app.look.theme.name
            await pilot.press("ctrl+t")
            expected = names[(names.index(before) + 1) % len(names)]
            await pilot_wait(pilot, lambda e=expected: app.look.theme.name == e, what=f"theme {expected}")
            assert app.current_theme.name == expected
            assert len(row_names(app)) == N_DEMO
            styles[expected] = status_style()
        assert app.look.theme.name == "dark"
        assert styles["dark"] != styles["light"], "the rows were redrawn in the new theme's colours"

        await move_to(pilot, table(app), LLAMA)
        await pilot.press("enter")
        detail = await wait_screen(pilot, WorkloadScreen)
        for name in ("light", "high-contrast", "colour-blind", "dark"):
            app.theme = name
            await pilot_wait(pilot, lambda n=name: app.look.theme.name == n, what=f"theme {name}")
            assert app.screen is detail and len(table(app, "#ranks").order) == 4
            assert "PyTorchJob" in text_of(detail.query_one("#header", Static))
        await pilot.press("c")
        await wait_screen(pilot, ClusterScreen)
        app.theme = "light"
        await pilot_wait(pilot, lambda: app.look.theme.name == "light", what="light on the cluster screen")
        await pilot_wait(pilot, lambda: len(table(app, "#nodes").order) == 8, what="8 nodes")
        assert app.return_code is None


# -- 5. forbidden -------------------------------------------------------------------------------


async def test_namespace_limited_user_sees_own_project_and_forbidden_nodes(
        live: ThreadedSimCluster, tmp_path: Path) -> None:
    kubeconfig = live.call(live.sim.write_kubeconfig, tmp_path / "alice.kubeconfig", user="alice")
    app = make_app(kubeconfig)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, 3)
        screen = app.screen
        assert isinstance(screen, WorkloadsScreen) and screen.namespace == "runai-team-a"
        await pilot_wait(pilot, lambda: set(row_names(app)) == DEMO["runai-team-a"], what="team-a rows")
        assert {k[0] for k in app.store.workloads} == {"runai-team-a"}
        assert app.me == "alice"

        await pilot.press("c")
        cluster = await wait_screen(pilot, ClusterScreen)
        note = cluster.query_one("#nodes-note", Static)
        await pilot_wait(pilot, lambda: "forbidden" in text_of(note), what="forbidden note")
        assert "nodes" in text_of(note)
        assert "forbidden" in rendered(note)
        assert table(app, "#nodes").row_count == 0
        await pilot.press("escape")
        assert await wait_screen(pilot, WorkloadsScreen) is screen

        await pilot.press("a")  # all projects: only what alice may watch, and the banner says so
        everything = await wait_screen(pilot, WorkloadsScreen)
        assert everything is not screen and everything.namespace is None
        await pilot_wait(pilot, lambda: set(row_names(app)) == DEMO["runai-team-a"], what="all = team-a")
        await pilot_wait(pilot, lambda: "may not list all namespaces" in banner(app), what="scope banner")
        assert app.return_code is None


# -- 6. deleted workload --------------------------------------------------------------------------

NS = "runai-team-a"


def seed(t: ThreadedSimCluster, name: str, *, workers: int = 2, **job_kw: Any) -> dict[str, Any]:
    """A PyTorchJob and its pods (owned by it, so deleting the job cascades) in a passive cluster."""

    def apply() -> dict[str, Any]:
        obj = t.sim.apply(job("PyTorchJob", name, NS, {"Master": 1, "Worker": workers}, **job_kw))
        owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name,
                 "uid": obj["metadata"]["uid"], "controller": True}
        t.sim.apply(pod("PyTorchJob", name, NS, "Master", 0, node="h100-node-01", owner=owner))
        for i in range(workers):
            t.sim.apply(pod("PyTorchJob", name, NS, "Worker", i, node="h100-node-02", owner=owner))
        return obj

    return t.call(apply)


@pytest.mark.simcluster(scenario="demo")
async def test_deleted_workload_keeps_the_screen_with_a_banner(simcluster: ThreadedSimCluster, k8s: Any) -> None:
    client, api = k8s
    seed(simcluster, "doomed", conditions=[("Running", "")])
    key = (NS, "PyTorchJob", "doomed")
    app = make_app(simcluster.sim.kubeconfig_path)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, 1)
        await move_to(pilot, table(app), key)
        await pilot.press("enter")
        detail = await wait_screen(pilot, WorkloadScreen)
        await pilot_wait(pilot, lambda: len(table(app, "#ranks").order) == 3, what="3 ranks")
        assert banner(app) == ""

        custom = client.CustomObjectsApi(api)
        await asyncio.to_thread(custom.delete_namespaced_custom_object, "kubeflow.org", "v1", NS,
                                "pytorchjobs", "doomed")
        await pilot_wait(pilot, lambda: "deleted" in banner(app), timeout=10, what="deleted banner")
        assert "this workload was deleted" in banner(app)
        assert app.screen is detail and detail.gone
        assert "PyTorchJob" in text_of(detail.query_one("#header", Static)), "what was last seen stays"
        await pilot.press("escape")
        listing = await wait_screen(pilot, WorkloadsScreen)
        await pilot_wait(pilot, lambda: key not in table(app).order, what="row gone")
        assert banner(app) == "" and listing.namespace is None


# -- 7. connection lost ---------------------------------------------------------------------------


@pytest.mark.simcluster(scenario="demo")
async def test_connection_lost_banner_and_recovery(simcluster: ThreadedSimCluster) -> None:
    seed(simcluster, "steady", conditions=[("Running", "")])
    app = make_app(simcluster.sim.kubeconfig_path)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, 1)
        assert banner(app) == ""
        restart = asyncio.create_task(asyncio.to_thread(simcluster.run, simcluster.sim.restart(down_for=3)))
        try:
            await pilot_wait(pilot, lambda: "connection lost" in banner(app), timeout=3, what="connection lost")
            assert not restart.done(), "the banner shows while the server is down"
            assert row_names(app) == ["steady"], "the last data stays on screen"
        finally:
            await asyncio.wait_for(restart, 10)
        await pilot_wait(pilot, lambda: banner(app) == "", timeout=20, what="banner gone after recovery")
        seed(simcluster, "after-restart", conditions=[("Running", "")])
        await pilot_wait(pilot, lambda: "after-restart" in row_names(app), timeout=15, what="change after recovery")
        assert app.return_code is None


# -- 8. untrusted text ----------------------------------------------------------------------------

MARKUP = "[bold red]boom[/]"
HOSTILE = f"{MARKUP} \x1b[31mred\x1b[0m \x1b]0;owned\x07 end"


@pytest.mark.simcluster(scenario="demo")
async def test_cluster_text_is_shown_literally_without_escapes(simcluster: ThreadedSimCluster) -> None:
    seeded = seed(simcluster, "shady", workers=1)

    def plant() -> None:
        obj = copy.deepcopy(seeded)
        obj["status"]["conditions"] = [{"type": "Running", "status": "True", "reason": "[i]R[/i]\x1b[2J",
                                        "message": HOSTILE, "lastTransitionTime": "2026-11-01T00:00:00Z"}]
        simcluster.sim.apply(obj)
        simcluster.sim.apply({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "shady.hostile", "namespace": NS},
            "involvedObject": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "shady",
                               "namespace": NS, "uid": obj["metadata"]["uid"]},
            "type": "Warning", "reason": "[blink]Evil[/]", "message": HOSTILE, "count": 1,
            "lastTimestamp": "2026-11-01T00:00:00Z",
        })
        simcluster.sim.apply(pod("PyTorchJob", "shady", NS, "Worker", 0, node="h100-node-02", ready=False,
                                 waiting="[red]Crash[/]\x1b[5m"))

    simcluster.call(plant)
    key = (NS, "PyTorchJob", "shady")
    app = make_app(simcluster.sim.kubeconfig_path)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, 1)
        # the STATUS column is narrow: the reason is cut, its brackets still show
        await pilot_wait(pilot, lambda: "worker-0: [red]C" in rendered(table(app)), what="hostile reason in the list")
        assert "\x1b" not in rendered(table(app))
        await move_to(pilot, table(app), key)
        await pilot.press("enter")
        detail = await wait_screen(pilot, WorkloadScreen)

        header = detail.query_one("#header", Static)
        await pilot_wait(pilot, lambda: "[i]R[/i]" in rendered(header), what="condition reason")
        ranks = table(app, "#ranks")
        await pilot_wait(pilot, lambda: "[red]Crash[/]" in rendered(ranks), what="rank status")

        detail.query_one(TabbedContent).active = "tab-events"
        events = detail.query_one("#events", Static)
        await pilot_wait(pilot, lambda: MARKUP in rendered(events), what="event message on screen")
        shown = rendered(events)
        assert "[blink]Evil[/]" in shown
        assert "red end" in re.sub(r"\s+", " ", shown)
        assert "owned" not in shown, "the OSC title sequence is dropped whole"
        for widget in (header, ranks, events):
            text = rendered(widget)
            assert "\x1b" not in text and "\x07" not in text
        assert "\x1b" not in text_of(events) and MARKUP in text_of(events)
        assert app.return_code is None


# -- 9. help and command palette ------------------------------------------------------------------


async def test_help_lists_binding_ids_and_palette_jumps_to_a_workload(live: ThreadedSimCluster) -> None:
    app = make_app(live.sim.kubeconfig_path)
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, N_DEMO)
        await pilot.press("question_mark")
        help_screen = await wait_screen(pilot, HelpScreen)
        text = text_of(help_screen.query_one("#help-text", Static))
        for bid in ("quit", "help", "command_palette", "filter", "open", "logs", "sort", "sort_reverse",
                    "tail", "wrap", "cluster"):
            assert re.search(rf"\s{bid}\n", text), bid
        assert "detach" not in text, "only bindings some screen has are listed"
        await pilot.press("escape")
        await wait_screen(pilot, WorkloadsScreen)

        await pilot.press("colon")
        palette = await wait_screen(pilot, CommandPalette)
        await type_text(pilot, "workload team-a/llama")
        results = palette.query_one(CommandList)
        await pilot_wait(pilot, lambda: results.option_count >= 1, what="palette hits")
        first = str(results.get_option_at_index(0).prompt)
        assert "llama-finetune" in first and "Workload" in first
        await pilot.press("enter")
        if isinstance(app.screen, CommandPalette):  # several hits: the first Enter highlights
            await pilot.press("enter")
        detail = await wait_screen(pilot, WorkloadScreen)
        assert detail.key == LLAMA
        assert crumbs(app)[-1] == "llama-finetune"


# -- 10. keymap override ----------------------------------------------------------------------------


async def test_keymap_override_moves_logs_to_shift_l(live: ThreadedSimCluster) -> None:
    app = make_app(live.sim.kubeconfig_path, Settings(keymap={"logs": "L"}))
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, N_DEMO)
        screen = app.screen
        await move_to(pilot, table(app), LLAMA)
        await pilot.press("l")
        await pilot.pause(0.2)
        assert app.screen is screen, "l is no longer the logs key"
        await pilot.press("L")
        logs = await wait_screen(pilot, LogsScreen)
        assert logs.key == LLAMA
        await pilot.press("escape")
        assert await wait_screen(pilot, WorkloadsScreen) is screen
        await pilot.press("enter")
        await wait_screen(pilot, WorkloadScreen)
        await pilot.press("l")
        await pilot.pause(0.2)
        assert isinstance(app.screen, WorkloadScreen)
        await pilot.press("L")
        assert (await wait_screen(pilot, LogsScreen)).key == LLAMA
