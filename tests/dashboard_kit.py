"""One kit for the dashboard's tests (`App.run_test()`): the app, the waits and looks every dashboard
test needs, and `Feed`, typed updates for a dashboard with no cluster behind it.

    app = make_app(cluster)                       # a simcluster (or a kubeconfig path, or a ClusterConfig)
    app = make_app(cluster, metrics=False, clock=lambda: NOW, still=True, theme="light")
    async with app.run_test(size=SIZE) as pilot:
        await synced(pilot, app, 3)               # the first sync, the list showing 3 workloads
        await move_to(pilot, table(app), key)     # the cursor on a row, with the arrow keys
        detail = await wait_screen(pilot, WorkloadScreen)

    app, feed = fed_app()                         # no cluster: nothing is asked of one
    async with app.run_test(size=SIZE) as pilot:
        feed.apply(*objects())                    # Kubernetes objects as the API server gives them
        feed.send()                               # one DataUpdate, as the data loop sends it

Use a cluster where the cluster is what the test is about (its answers, its failures, a rank's
process, the logs, an action); `Feed` where only what the dashboard makes of the model is (keys,
sorting, layout, ages): the objects go through the same parsers and `LiveModel` as the data loop's,
and reach the app the way the data loop's updates do (`DataArrived`), so the app takes the path
it takes with a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from rich.text import Text
from textual.geometry import Region
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from monitors.connection import ClusterConfig, load_cluster_config
from monitors.dataloop import DataOptions, DataStatus, DataUpdate
from monitors.model import LiveModel
from monitors.model_views import ModelDiff
from monitors.monitor import WORKLOAD_KINDS
from monitors.parse import parse_event, parse_job, parse_namespace, parse_node, parse_pod, parse_quota
from tests.waiting import pilot_wait
from themes import ColourMode, load_themes
from tui.app import DataArrived, RanksApp
from tui.screens.base import Banner, Crumbs
from tui.screens.lists import WorkloadsScreen
from tui.screens.logs import LogsScreen
from tui.screens.workload import WorkloadScreen
from tui.settings import Settings
from tui.widgets.keyed_table import KeyedTable

Key = tuple[str, str, str]
S = TypeVar("S", bound=Screen[Any])
TIMEOUT = 60.0  # s: a busy machine's first sync and screen changes take their time

# -- the app ------------------------------------------------------------------------------------------


def cluster_config(where: Any) -> ClusterConfig:
    """The configuration of a simcluster (`ThreadedSimCluster` or `SimCluster`), a kubeconfig path,
    or a `ClusterConfig` as it is."""
    if isinstance(where, ClusterConfig):
        return where
    sim = getattr(where, "sim", where)
    path = getattr(sim, "kubeconfig_path", where)
    return load_cluster_config(str(path), None)


def make_app(where: Any, settings: Settings | None = None, *, metrics: bool = True,
             clock: Callable[[], float] | None = None, colour_mode: ColourMode = ColourMode.TRUECOLOR,
             still: bool = False, connect: bool = True, start_project: str | None = None,
             data_options: DataOptions | None = None, **settings_kw: Any) -> RanksApp:
    """The dashboard on `where` (see `cluster_config`) with `settings` (or `Settings(**settings_kw)`),
    the bundled themes and `colour_mode`. `metrics=False`: no GPU metrics are polled (the data
    options are then the defaults, not the settings'; `data_options` gives them all); `clock`: what
    ages are measured from; `still`: no animation (what is painted is final at once); `start_project`:
    as `-p`; `connect=False`: see `fed_app`."""
    if settings is not None and settings_kw:
        raise TypeError(f"settings given twice: {settings!r} and {settings_kw!r}")
    extra: dict[str, Any] = {}
    if data_options is not None or not metrics:
        extra["data_options"] = data_options or DataOptions(metrics=False)
    if clock is not None:
        extra["clock"] = clock
    app = RanksApp(cluster_config(where), settings if settings is not None else Settings(**settings_kw),
                   themes=load_themes(None), colour_mode=colour_mode, connect=connect,
                   start_project=start_project, **extra)
    if still:
        app.animation_level = "none"
    return app


# -- waits ----------------------------------------------------------------------------------------------


async def synced(pilot: Pilot[Any], app: RanksApp, workloads: int = 1, timeout: float = TIMEOUT) -> WorkloadsScreen:
    """The first sync done and the workloads list showing at least `workloads` rows."""
    await pilot_wait(pilot, lambda: app.store.synced and len(app.store.workloads) >= workloads
                     and isinstance(app.screen, WorkloadsScreen) and app.screen.table.row_count >= workloads,
                     timeout, f"the first sync and {workloads} rows")
    assert isinstance(app.screen, WorkloadsScreen)
    return app.screen


async def wait_screen(pilot: Pilot[Any], cls: type[S], timeout: float = TIMEOUT) -> S:
    """The screen shown once it is a `cls`."""
    await pilot_wait(pilot, lambda: isinstance(pilot.app.screen, cls), timeout, f"screen {cls.__name__}")
    screen = pilot.app.screen
    assert isinstance(screen, cls)
    return screen


async def move_to(pilot: Pilot[Any], t: KeyedTable, key: Hashable, timeout: float = TIMEOUT) -> None:
    """Put the cursor on the row of `key` with the arrow keys (once the row is there)."""
    await pilot_wait(pilot, lambda: key in t.order, timeout, f"row {key}")
    while t.cursor_key != key:
        await pilot.press("down" if t.order.index(key) > t.cursor_row else "up")


async def select(pilot: Pilot[Any], app: RanksApp, key: Key, ready: Callable[[], object] = lambda: True,
                 timeout: float = 60.0) -> WorkloadsScreen:
    """The list synced with `key` in it and `ready()` true, the cursor on `key`'s row."""
    await pilot_wait(pilot, lambda: app.store.synced and key in app.store.workloads and ready(), timeout,
                     f"{key[2]} in the model")
    screen = await wait_screen(pilot, WorkloadsScreen)
    await pilot_wait(pilot, lambda: screen.table.move_to_key(key), TIMEOUT, f"{key[2]} in the table")
    return screen


async def open_detail(pilot: Pilot[Any], app: RanksApp, key: Key, ready: Callable[[], object] = lambda: True,
                      timeout: float = 30.0) -> WorkloadScreen:
    """`key`'s detail screen, opened once the model has it and `ready()`, drawn once."""
    await pilot_wait(pilot, lambda: app.store.synced and key in app.store.workloads and ready(), timeout,
                     f"{key[2]}")
    app.open_workload(key)
    await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.last is not None,
                     TIMEOUT, "the detail screen")
    assert isinstance(app.screen, WorkloadScreen)
    return app.screen


async def open_logs(pilot: Pilot[Any], app: RanksApp, key: Key, timeout: float = TIMEOUT) -> LogsScreen:
    """`key`'s log view, opened once the model has it."""
    await pilot_wait(pilot, lambda: app.store.synced and key in app.store.workloads, timeout, f"{key[2]}")
    app.open_logs(key)
    await pilot_wait(pilot, lambda: isinstance(app.screen, LogsScreen) and app.screen.is_mounted, timeout, "logs")
    assert isinstance(app.screen, LogsScreen)
    return app.screen


async def type_text(pilot: Pilot[Any], text: str) -> None:
    await pilot.press(*["space" if ch == " " else ch for ch in text])


# -- what is on screen --------------------------------------------------------------------------------


def table(app: RanksApp, selector: str = "#table") -> KeyedTable:
    return app.screen.query_one(selector, KeyedTable)


def row_names(app: RanksApp) -> list[str]:
    """The workload names of the visible list, top to bottom."""
    return [str(k[2]) for k in table(app).order]  # type: ignore[index]


def status_of(t: KeyedTable, key: Hashable) -> str:
    """The STATUS cell of `key`'s row ("" when the row is not there)."""
    return t.shown[key][t.labels.index("STATUS")].plain if key in t.shown else ""


def text_of(widget: Static) -> str:
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def painted(widget: Widget, *, outer: bool = False) -> list[str]:
    """What the widget paints on the terminal, line by line (`outer`: its border and padding too)."""
    w, h = widget.outer_size if outer else widget.size
    return [strip.text for strip in widget.render_lines(Region(0, 0, w, h))]


def rendered(widget: Widget, *, outer: bool = False) -> str:
    """`painted` as one text."""
    return "\n".join(painted(widget, outer=outer))


def crumbs(app: RanksApp) -> list[str]:
    """The breadcrumb path shown at the top of the screen (the context on the right dropped)."""
    left = re.split(r"\s{3,}", text_of(app.screen.query_one(Crumbs)).strip())[0]
    return [p.strip() for p in left.split("›")]


def banner(app: RanksApp) -> str:
    """The banner's text ("" when it is hidden)."""
    b = app.screen.query_one(Banner)
    return text_of(b) if b.has_class("-shown") else ""


def notifications(app: RanksApp) -> list[str]:
    return [str(n.message) for n in app._notifications]  # (Textual has no public list)


# -- typed updates without a cluster ----------------------------------------------------------------------

STAGES = ("Namespace", "ResourceQuota", "Node", "job", "Pod", "Event")  # the order a first LIST applies them in
FED = ClusterConfig(server="https://fed.invalid:6443", context="fed", namespace="default", user="alice")


def fed_app(settings: Settings | None = None, *, clock: Callable[[], float] | None = None,
            status: DataStatus | None = None, **kw: Any) -> tuple[RanksApp, Feed]:
    """A dashboard that asks no cluster anything (its data loop never starts), and the `Feed` that
    gives it its model. `kw` as `make_app`'s."""
    app = make_app(FED, settings, connect=False, clock=clock, **kw)
    return app, Feed(app, clock=clock, status=status)


class Feed:
    """Typed updates for a dashboard: Kubernetes objects (dicts, as the API server returns them) go
    through the data loop's parsers into a `LiveModel`; each `send` posts the model's diff to the app
    as one `DataUpdate`, as the data loop does (the first one synced, with the app's reset)."""

    def __init__(self, app: RanksApp, *, clock: Callable[[], float] | None = None,
                 status: DataStatus | None = None) -> None:
        self.app = app
        self.model = LiveModel(clock) if clock is not None else LiveModel()
        self.status = status or DataStatus(phase="live", user=app.cfg.user, context=app.cfg.context,
                                           server=app.cfg.server)
        self.sent: list[DataUpdate] = []
        self._jobs = {(group, kind) for group, _plural, kind in WORKLOAD_KINDS}

    def apply(self, *objects: dict[str, Any]) -> Feed:
        """Put `objects` in the model (namespaces, quotas, nodes, workloads, then pods, as a LIST
        would), replacing those of the same key."""
        self._changes(objects, delete=False)
        return self

    def delete(self, *objects: dict[str, Any]) -> Feed:
        """Take `objects` out of the model (as a watch's DELETED)."""
        self._changes(objects, delete=True)
        return self

    def send(self, *, synced: bool = True, **fields: Any) -> DataUpdate:
        """The model's diff since the last send, to the app; `fields`: the update's others (events,
        health, diagnosis, progress, histories, last_logs, status...). The first send resets the
        app's picture, as a new connection does."""
        diff: ModelDiff = self.model.flush()
        fields.setdefault("status", self.status)
        update = DataUpdate(diff, reset=not self.sent, synced=synced, **fields)
        self.sent.append(update)
        self.app.post_message(DataArrived(update))
        return update

    def _changes(self, objects: Iterable[dict[str, Any]], *, delete: bool) -> None:
        parsed = [(self._kind(obj), obj) for obj in objects]
        for stage in STAGES:
            for (kind, parse, key, apply), obj in parsed:
                if kind == stage:
                    rec = parse(obj)
                    apply([(key(rec), None if delete else rec)])

    def _kind(self, obj: dict[str, Any]) -> tuple[str, Callable[[Any], Any], Callable[[Any], Hashable],
                                                   Callable[[Any], None]]:
        m = self.model
        kind, api = obj.get("kind", ""), obj.get("apiVersion", "")
        group, _, version = api.rpartition("/")
        core: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Hashable], Callable[[Any], None]]] = {
            "Namespace": (parse_namespace, lambda r: r.name, m.apply_namespaces),
            "ResourceQuota": (parse_quota, lambda r: (r.namespace, r.name), m.apply_quotas),
            "Node": (parse_node, lambda r: r.name, m.apply_nodes),
            "Pod": (parse_pod, lambda r: r.key, m.apply_pods),
            "Event": (parse_event, lambda r: (r.namespace, r.name), m.apply_events),
        }
        if not group and kind in core:
            return (kind, *core[kind])
        if (group, kind) in self._jobs:
            return ("job", parse_job(kind, group, version), lambda r: r.key, m.apply_jobs)
        raise ValueError(f"the feed knows no {api} {kind}")
