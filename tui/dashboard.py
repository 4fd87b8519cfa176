"""The seam between the dashboard's screens and its app: `Dashboard`, what a screen may use of the
app (its store, look and clock, the data loop, navigation, the actions), and `Actions`, what a
screen may ask the dashboard to do to a workload. `ActionsHost` is what the actions themselves use
of the dashboard. `RanksApp` provides all three; a screen reaches it as `self.dashboard` and
reaches Textual's own `App` (notify, push_screen, console) as `self.app`.

Read-only by design: the members are properties, so a screen reads the dashboard's state and
changes it only through the methods named here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from textual.screen import Screen

from monitors.connection import ClusterConfig
from monitors.dataloop import DataLoop
from monitors.model_views import RankView, WorkloadView

from .cells import Look
from .settings import Settings
from .store import ViewStore

WorkloadKey = tuple[str, str, str]


class Actions(Protocol):
    """The dashboard's actions on a workload (`tui.dashboard_actions.DashboardActions`): each asks
    first where it destroys, refuses in read-only mode with the reason, and runs on the data loop."""

    def shell_into(self, wl: WorkloadView, rank: RankView | None = None) -> None: ...

    def exec_all(self, wl: WorkloadView) -> None: ...

    def delete_workload(self, wl: WorkloadView) -> None: ...

    def toggle_suspend(self, wl: WorkloadView) -> None: ...

    def convert_workload(self, wl: WorkloadView) -> None: ...

    def debug_workload(self, wl: WorkloadView) -> None: ...

    def new_session(self, namespace: str | None = None) -> None: ...

    def submit_conversion(self, key: WorkloadKey, new: dict[str, Any], delete_interactive: bool,
                          secret: tuple[str, dict[str, str]] | None = None) -> None: ...


class Dashboard(Protocol):
    """What a screen may use of the dashboard."""

    @property
    def store(self) -> ViewStore: ...

    @property
    def look(self) -> Look: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def data(self) -> DataLoop: ...

    @property
    def actions(self) -> Actions: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def read_only(self) -> bool: ...

    @property
    def me(self) -> str:
        """The user the dashboard acts as (the impersonated one, if any)."""
        ...

    @property
    def paste_command(self) -> str:
        """`ranks` as the user runs it again, in lines offered to paste."""
        ...

    def ages_shown(self, since: Iterable[float], now: float | None = None) -> None: ...

    def breadcrumbs(self, upto: Screen[Any]) -> list[str]: ...

    def can_go_back(self) -> bool: ...

    def go_back(self) -> None: ...

    def open_workloads(self, namespace: str | None) -> None: ...

    def open_workload(self, key: WorkloadKey, *, created: bool = False) -> None: ...

    def open_logs(self, key: WorkloadKey, *, previous: bool = False, rank: str = "", note: str = "") -> None: ...

    def open_describe(self, w: WorkloadView) -> None: ...

    def open_describe_pod(self, namespace: str, pod: str) -> None: ...

    def open_describe_path(self, title: str, path: str) -> None: ...


class ActionsHost(Dashboard, Protocol):
    """What the actions use of the dashboard besides a screen's share: the connection (for the
    history store) and why read-only mode is on."""

    @property
    def cfg(self) -> ClusterConfig: ...

    @property
    def read_only_why(self) -> str: ...
