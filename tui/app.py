"""`RanksApp`: the dashboard.

Data flows one way: the data loop (a background thread: monitor, GPU metrics, log engines) posts
`DataArrived` messages; the app applies each to its `ViewStore` and hands the diff to the visible
screen only, which updates just the rows that changed. Screens that are not visible do nothing and
resync from the store when they come back. Nothing here does I/O on the UI loop.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Iterable
from typing import ClassVar, Protocol, runtime_checkable

from textual import events, on
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import Screen
from textual.scrollbar import ScrollBar, ScrollBarRender

from monitors import api_paths
from monitors.connection import ClusterConfig
from monitors.dataloop import DataLoop, DataOptions, DataUpdate
from monitors.humanize import age_changes_in
from monitors.model_views import WorkloadView
from monitors.monitor import release_memory
from themes import ColourMode, ThemeSet, glyphs_for

from .cells import Look
from .dashboard_actions import DashboardActions
from .idle_gc import CHECK_S, IdleCollector
from .keymap import Keymap
from .screens.base import Crumbs, RanksScreen, bindings
from .screens.cluster import ClusterScreen, NodePodsScreen
from .screens.describe import DescribeScreen, HelpScreen, YamlArea
from .screens.lists import ProjectsScreen, WorkloadsScreen
from .screens.logs import LogsScreen
from .screens.workload import WorkloadScreen
from .settings import Settings
from .store import ViewStore
from .widgets.event_list import EventList
from .widgets.keyed_table import KeyedTable
from .widgets.log_view import LogView
from .widgets.picker import Picker
from .widgets.type_ahead import KeysAhead

WorkloadKey = tuple[str, str, str]
# the screens and widgets that bind keys of the keymap (beside the app)
BINDING_HOMES: tuple[type[DOMNode], ...] = (
    RanksScreen, ProjectsScreen, WorkloadsScreen, WorkloadScreen, LogsScreen, ClusterScreen, NodePodsScreen,
    DescribeScreen, YamlArea, KeyedTable, EventList, LogView, Picker)
AGE_LAG = 0.005  # the age ticker wakes this long after an age's text changes (never just before)


@runtime_checkable
class ShowsAges(Protocol):
    """A screen with ages on it. `tick_ages(now)` brings every age it shows up to `now`, repainting
    only the cells whose text changes, and returns the times those ages are measured from."""

    def tick_ages(self, now: float) -> Iterable[float]: ...


class DataArrived(Message):
    def __init__(self, update: DataUpdate) -> None:
        super().__init__()
        self.update = update


class DataProblem(Message):
    """The data loop gave up (bad credentials, TLS): the app exits with this message and code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__()
        self.message = message
        self.code = code


def workload_path(w: WorkloadView) -> str | None:
    if not w.api_version:
        return None
    try:
        return api_paths.of_api_version(w.api_version, f"{w.kind.lower()}s", w.namespace, w.name)
    except api_paths.BadSegment:
        return None


def settle_heap() -> None:
    """After the first complete picture: what exists now (the model, the views, the app) lives as
    long as the app, so the collector stops scanning it (`gc.freeze`), and young collections run
    less often; without this a full collection over ~300k objects stalls the UI for 0.2-0.8 s. The
    data loop's first monitor leaves this collection to here, and the collector off until it (one
    full collection, not three or four of all that was listed), and the heap the first LISTs freed
    goes back to the OS after it (`release_memory`). Full collections are then made at moments
    without input (`tui.idle_gc`), not in the middle of a key's frame."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(700, 10, 10)
    gc.enable()  # (off since the data loop's first LISTs: `Monitor(collect_listed=False)`)
    release_memory(collect=False)


class AsciiScrollBarRender(ScrollBarRender):
    """Scrollbars without Unicode block elements (``--ascii``)."""

    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * 8


class RanksApp(App[int]):
    TITLE = "ranks"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS: ClassVar[list[BindingType]] = bindings(
        "global", ("quit", "help", "command_palette", "command_palette_alt", "refresh", "projects", "theme", "cluster"))
    CSS = """
    RanksScreen { background: $background; }
    /* --ascii: no Unicode from Textual's own widgets either */
    .-ascii * { text-overflow: clip; }
    .-ascii Underline { display: none; }
    .-ascii Tab.-active { text-style: bold reverse; }
    .-ascii FooterKey.-command-palette { border-left: none; }
    """

    def _fatal_error(self) -> None:
        """A crash report as Textual's, but without the frames' local variables: they can hold a
        token (request headers) or a client key."""
        import rich
        from rich.segment import Segments
        from rich.traceback import Traceback

        self.bell()
        report = Traceback(show_locals=False, width=None, suppress=[rich])
        self._exit_renderables.append(Segments(self.console.render(report, self.console.options)))
        self._close_messages_no_wait()

    def __init__(
        self,
        cfg: ClusterConfig,
        settings: Settings | None = None,
        *,
        themes: ThemeSet,
        colour_mode: ColourMode = ColourMode.TRUECOLOR,
        ascii: bool = False,
        start_project: str | None = None,
        data_options: DataOptions | None = None,
        clock: Callable[[], float] = time.time,
        read_only_why: str = "",
        connect: bool = True,
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.keys_ahead = KeysAhead(self)  # keys typed ahead of a prompt reach it (widgets.type_ahead)
        # False: the data loop is never started (no cluster is asked anything); the app shows only the
        # updates posted to it as `DataArrived` (tests feed it: tests/dashboard_kit.py)
        self.connect = connect
        self.clock = clock  # for ages (tests fix it)
        self.settings = settings or Settings()
        self.keymap: Keymap = self.settings.key_map
        self.theme_set = themes
        self.colour_mode = colour_mode
        self.glyphs = glyphs_for(ascii or self.settings.ascii)
        # (a class attribute: set both ways, so an --ascii app does not leave blank scrollbars to the next)
        ScrollBar.renderer = AsciiScrollBarRender if self.glyphs.name == "ascii" else ScrollBarRender
        self.read_only = self.settings.read_only
        self.read_only_why = read_only_why or (f"read_only = true in {self.settings.path}" if self.settings.path
                                               else "--read-only")
        self.me = cfg.impersonate_user or cfg.user
        from sessions.shell import ranks_command

        self.paste_command = ranks_command(cfg) or "ranks"  # (in the lines offered to paste: they run as pasted)
        self.start_project = start_project if start_project is not None else self.settings.default_project
        self.store = ViewStore()
        self.look = Look(themes.get(self.settings.theme, colour_mode), self.glyphs)
        opts = data_options or DataOptions(
            namespaces=tuple(self.settings.namespaces),
            prometheus_url=self.settings.prometheus_url,
            metric_names=self.settings.metric_names,
            refresh_interval=self.settings.refresh_interval,
            coalesce=self.settings.coalesce,
            project=self.start_project or None,
        )
        self.data = DataLoop(cfg, opts, on_update=self._post_update, on_problem=self._post_problem)
        from monitors.diagnostics.progress import compile_patterns

        from .settings import hang_thresholds

        # (the configuration file's, else the kubeconfig context's, else the default: said in each verdict)
        judging = self.data.judging
        judging.thresholds = hang_thresholds(self.settings, cfg)
        judging.clock = clock
        judging.paste_command, judging.idle_threshold = self.paste_command, self.settings.idle_threshold_percent
        judging.progress_patterns = tuple(compile_patterns(self.settings.progress_patterns))
        self.actions = DashboardActions(self, self)
        self.exit_message = ""
        self._age_timer: asyncio.TimerHandle | None = None
        self.age_due: float | None = None  # when (by `clock`) the age ticker wakes next; None: asleep
        self.age_ticks = 0  # its wakeups (for tests and diagnostics)
        self.idle_gc = IdleCollector()  # full collections at moments without input, once the first picture is in
        self._gc_timer: asyncio.TimerHandle | None = None
        for theme in themes.textual_themes(colour_mode):
            self.register_theme(theme)
        for name in [n for n in self.available_themes if n not in themes]:
            self.unregister_theme(name)
        self.theme = self.settings.theme
        self.set_keymap(self.keymap.textual_keymap())

    def _post_update(self, update: DataUpdate) -> None:  # (on the data loop's thread)
        self.post_message(DataArrived(update))

    def _post_problem(self, message: str, code: int) -> None:  # (the same)
        self.post_message(DataProblem(message, code))

    # -- lifecycle ---------------------------------------------------------------------------------
    async def _on_key(self, event: events.Key) -> None:
        """A key typed ahead of a prompt goes into it, not to the screen's keys (`widgets.type_ahead`)."""
        self.keys_ahead.take(event)  # (when it does, the app's own handling of the key is prevented)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self.keys_ahead.give()  # (the keys held while a prompt's screen came up, into its input)

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.push_screen(ProjectsScreen())
        self.push_screen(WorkloadsScreen(self._start_namespace()))
        if self.connect:
            self.data.start()

    def _start_namespace(self) -> str | None:
        p = self.start_project
        if not p:
            ns = self.cfg.namespace
            return ns if ns and ns != "default" else None
        return p  # a name (team-a) is resolved to its namespace after the first sync

    async def action_quit(self) -> None:
        self.exit(0)

    def on_unmount(self) -> None:
        if self._gc_timer is not None:
            self._gc_timer.cancel()
        if self.idle_gc.active:
            self.idle_gc.give_back()
        self.data.stop(timeout=3.0)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.InputEvent):
            self.idle_gc.input_seen()
        await super().on_event(event)

    def _gc_check(self) -> None:
        """Every CHECK_S: a full collection if one is due and no key came for a moment (`tui.idle_gc`)."""
        self._gc_timer = None
        if self._exit:
            return
        try:
            self.idle_gc.check()
        except Exception as exc:  # (as Textual's timers do: the app's error, not the loop's)
            self._handle_exception(exc)
            return
        self._gc_timer = asyncio.get_running_loop().call_later(CHECK_S, self._gc_check)

    @on(DataArrived)
    def _data(self, msg: DataArrived) -> None:
        update = msg.update
        first_sync = update.synced and not self.store.synced
        diff = self.store.apply(update)
        if first_sync:
            self._resolve_start()
            settle_heap()
            if not self.idle_gc.active:
                self.idle_gc.take_over()
                self._gc_timer = asyncio.get_running_loop().call_later(CHECK_S, self._gc_check)
        stack = self.screen_stack  # empty while the app closes (data already on its way still arrives)
        screen = stack[-1] if stack else None
        # a screen pushed but not composed yet gets nothing: its on_mount reads the store
        if isinstance(screen, RanksScreen) and screen.query(Crumbs):
            screen.model_changed(diff)
            if update.reset:
                screen.resync()
            if diff.status_changed or update.synced:
                screen.show_status()

    def _resolve_start(self) -> None:
        """The start project was given by name (team-a): now that projects are known, use its namespace."""
        for screen in self.screen_stack:
            if isinstance(screen, WorkloadsScreen) and screen.namespace is not None:
                p = self.store.find_project(screen.namespace)
                if p is not None and p.namespace != screen.namespace:
                    screen.namespace = p.namespace
                    screen.resync()

    @on(DataProblem)
    def _problem(self, msg: DataProblem) -> None:
        def leave() -> None:
            self.exit_message = msg.message
            self.exit(msg.code)

        self.actions.when_no_shell(leave)

    # -- ages ----------------------------------------------------------------------------------------
    def ages_shown(self, since: Iterable[float], now: float | None = None) -> None:
        """The visible screen just drew ages measured from the times `since` (at `now`): the one age
        ticker wakes by the first moment one of them shows another text (every second under 2
        minutes, then once a minute, an hour...), never later. A tick that is already due (a row was
        drawn after an age's text changed but before the ticker woke) runs first, so that rows drawn
        at different moments never disagree."""
        if self.age_due is not None and self.age_due <= self.clock():
            self._tick_ages()
        if now is None:
            now = self.clock()
        due = min((now + age_changes_in(now - t) for t in since), default=None)
        if due is None or (self.age_due is not None and self.age_due <= due):
            return
        if self._age_timer is not None:
            self._age_timer.cancel()
        self.age_due = due
        # (the event loop's own timer: Textual's set_timer makes a task and a new callback wrapper
        # each time, whose signature it reads when it fires, most of an idle dashboard's UI thread
        # on a cluster whose rows' minutes turn at different seconds)
        self._age_timer = asyncio.get_running_loop().call_later(max(0.0, due - now) + AGE_LAG, self._age_fired)

    def _age_fired(self) -> None:
        self._age_timer = None
        if self._exit:
            return
        try:
            self._tick_ages()
        except Exception as exc:  # (as Textual's timers do: the app's error, not the loop's)
            self._handle_exception(exc)

    def _tick_ages(self) -> None:
        """Every age on the visible screen up to now (only the cells whose text changes); then
        asleep until the next change of one of them. A screen without ages leaves it asleep."""
        if self._age_timer is not None:
            self._age_timer.cancel()
            self._age_timer = None
        self.age_due = None
        self.age_ticks += 1
        stack = self.screen_stack  # empty while the app closes
        screen = stack[-1] if stack else None
        if isinstance(screen, RanksScreen) and isinstance(screen, ShowsAges) and screen.query(Crumbs):
            now = self.clock()
            self.ages_shown(screen.tick_ages(now), now)

    # -- navigation ----------------------------------------------------------------------------------
    def breadcrumbs(self, upto: Screen[object]) -> list[str]:
        out = []
        for s in self.screen_stack:
            if isinstance(s, RanksScreen):
                out.append(s.crumb)
            if s is upto:
                break
        return out

    def can_go_back(self) -> bool:
        return sum(isinstance(s, RanksScreen) for s in self.screen_stack) > 1

    def go_back(self) -> None:
        if self.can_go_back():
            self.pop_screen()

    def _pop_to(self, cls: type[RanksScreen]) -> bool:
        while len(self.screen_stack) > 1:
            if isinstance(self.screen, cls):
                return True
            self.pop_screen()
        return isinstance(self.screen, cls)

    def open_workloads(self, namespace: str | None) -> None:
        self.push_screen(WorkloadsScreen(namespace))

    def open_workload(self, key: WorkloadKey, *, created: bool = False) -> None:
        """A workload's detail; `created`: one just created here, which the watch has yet to bring."""
        self.push_screen(WorkloadScreen(key, created=created and key not in self.store.workloads))

    def open_logs(self, key: WorkloadKey, *, previous: bool = False, rank: str = "", note: str = "") -> None:
        """The merged logs; `rank`: shown filtered to that rank; `previous`: the previous instances."""
        self.push_screen(LogsScreen(key, previous=previous, rank=rank, note=note))

    def open_describe(self, w: WorkloadView) -> None:
        path = workload_path(w)
        if path is None:
            lead = w.lead or (w.ranks[0] if w.ranks else None)
            if lead is None:
                self.notify("nothing to describe", severity="warning", markup=False)
                return
            self.open_describe_pod(w.namespace, lead.pod)
            return
        self.push_screen(DescribeScreen(f"{w.kind.lower()}/{w.name}", path))

    def open_describe_pod(self, namespace: str, pod: str) -> None:
        try:
            path = api_paths.pod(namespace, pod)
        except api_paths.BadSegment as exc:  # (an event's object: cluster-supplied)
            self.notify(str(exc), severity="warning", markup=False)
            return
        self.push_screen(DescribeScreen(f"pod/{pod}", path))

    def open_describe_path(self, title: str, path: str) -> None:
        self.push_screen(DescribeScreen(title, path))

    def open_cluster(self) -> None:
        if isinstance(self.screen, ClusterScreen):
            return
        for s in self.screen_stack:
            if isinstance(s, ClusterScreen):
                self._pop_to(ClusterScreen)
                return
        self.push_screen(ClusterScreen())

    # -- global actions ------------------------------------------------------------------------------
    def action_projects(self) -> None:
        self._pop_to(ProjectsScreen)

    def action_cluster(self) -> None:
        self.open_cluster()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.keymap, self.bound_ids()))

    def action_refresh(self) -> None:
        screen = self.screen
        if isinstance(screen, RanksScreen):
            screen.resync()
            screen.show_status()

    def action_change_theme(self) -> None:
        names = self.theme_set.names()
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=1.5, markup=False)

    def _theme_changed(self, theme: object) -> None:
        name = getattr(theme, "name", self.theme)
        if name not in self.theme_set:
            return
        self.look = Look(self.theme_set.get(name, self.colour_mode), self.glyphs)
        screen = self.screen
        if isinstance(screen, RanksScreen):
            screen.restyle()
            screen.show_status()

    @staticmethod
    def bound_ids() -> set[str]:
        """Ids of the bindings the app, its screens or their lists and views have: what the help lists."""
        out: set[str] = set()
        homes: tuple[type[DOMNode], ...] = (RanksApp, *BINDING_HOMES)
        for cls in homes:
            out.update(b.id for b in cls.BINDINGS if isinstance(b, Binding) and b.id)
        return out

    # -- command palette -----------------------------------------------------------------------------
    def _open_ports(self, wl: WorkloadView) -> None:
        from .screens.ports import PortsScreen

        self.push_screen(PortsScreen(wl))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield SystemCommand("Projects", "All projects with their GPU quota and use", self.action_projects)
        yield SystemCommand("All workloads", "Workloads of every project", lambda: self.open_workloads(None))
        yield SystemCommand("Cluster load", "Nodes, quota use, pending workloads, idle sessions",
                            self.open_cluster)
        yield SystemCommand("Help", "Every key and its binding id", self.action_help)
        for name in self.theme_set.names():
            yield SystemCommand(f"Theme: {name}", self.theme_set.get(name).description or "Switch theme",
                                lambda n=name: setattr(self, "theme", n))
        for p in sorted(self.store.projects.values(), key=lambda p: p.name):
            yield SystemCommand(f"Project {p.name}", f"Workloads of {p.namespace}",
                                lambda ns=p.namespace: self.open_workloads(ns))
        for w in sorted(self.store.workloads.values(), key=lambda w: (w.project, w.name)):
            yield SystemCommand(f"Workload {w.project}/{w.name}", f"{w.kind} {w.status}",
                                lambda k=w.key: self.open_workload(k))
            yield SystemCommand(f"Logs {w.project}/{w.name}", "Merged logs of every rank",
                                lambda k=w.key: self.open_logs(k))
            yield SystemCommand(f"Ports {w.project}/{w.name}", "Its ranks' ports, and the dashboard's forwards",
                                lambda wl=w: self._open_ports(wl))
        yield SystemCommand("Quit", "Quit ranks", self.exit)
