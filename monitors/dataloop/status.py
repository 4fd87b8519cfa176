"""The connection's status as the status line and banners show it (`DataStatus`), and what keeps it
true: the phases of a connection (connecting, waiting for an answer, syncing, live, retrying), the
monitor's forbidden and retrying informers, the GPU metrics' source, and whether the project the
dashboard opens on exists."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from ..connection import ClusterConfig, ConnectionProblem, ExitCode
from ..kube import ApiProblem
from ..monitor import Monitor
from .updates import DataOptions, DataStatus

FATAL = (ExitCode.NO_CONFIG, ExitCode.TLS)  # a connection that cannot work: the dashboard ends


class ConnectionStatus:
    def __init__(self, cfg: ClusterConfig, options: DataOptions, changed: Callable[[], None]) -> None:
        """`changed()`: the status changed on its own (no model diff carries it): send it."""
        self.cfg = cfg
        self.options = options
        self.changed = changed
        self.current = DataStatus(user=cfg.impersonate_user or cfg.user, context=cfg.context, server=cfg.server)
        self._project_checked = not options.project

    def set(self, **changes: Any) -> None:
        self.current = dataclasses.replace(self.current, **changes)

    def refresh(self, monitor: Monitor, live: bool = True) -> None:
        """From the monitor's informers and GPU metrics (before each update is sent)."""
        st = monitor.status
        retrying = "; ".join(sorted(set(st.retrying.values())))
        self.set(phase="retrying" if retrying else ("live" if live else "syncing"), problem=retrying,
                 forbidden=tuple(sorted(st.forbidden.items())), cluster_wide=st.cluster_wide,
                 namespaces=st.namespaces, metrics_note=monitor.metrics_note,
                 metrics_problem=monitor.metrics_problem, metrics_forbidden=monitor.metrics_forbidden)

    def metrics_moved(self, monitor: Monitor) -> bool:
        """The GPU metrics' source or problem differs from what the status says."""
        c = self.current
        return ((monitor.metrics_note, monitor.metrics_problem, monitor.metrics_forbidden)
                != (c.metrics_note, c.metrics_problem, c.metrics_forbidden))

    def lost(self, exc: ConnectionProblem | ApiProblem | OSError | TimeoutError, synced: bool) -> None:
        """The connection failed (`problem_of` says why): retrying; or, when it never answered
        before the first picture, still waiting for it."""
        message, _ = problem_of(exc)
        if not synced and isinstance(exc, ConnectionProblem) and exc.timed_out:
            # took the connection, never answered: still waiting, not "connection lost"
            self.set(phase="waiting", problem=f"{message}; asking again")
        else:
            self.set(phase="retrying", problem=message)
        self.changed()

    async def watch_silence(self, monitor: Monitor) -> None:
        """Until the first LIST is in: a server that took the request and does not answer is
        said to be awaited ("waiting for the server"), not shown as an empty table "connecting"."""
        shown = -1
        while True:
            await asyncio.sleep(0.2)
            silent = monitor.client.silent_for()
            if silent >= self.options.waiting_after:
                secs = int(silent)
                if self.current.phase != "waiting" or secs != shown:
                    shown = secs
                    limit = monitor.client.timeout
                    after = f" (gives up after {limit:g} s and asks again)" if limit else ""
                    self.set(phase="waiting", problem=f"no answer from {self.cfg.server} for {secs} s{after}")
                    self.changed()
            elif self.current.phase == "waiting" and shown >= 0:
                shown = -1
                self.set(phase="connecting" if not monitor.informers else "syncing", problem="")
                self.changed()

    async def check_project(self, monitor: Monitor) -> None:
        """The project the dashboard opens on exists and may be read; if not, the status says
        what the CLI would (`project "x" not found`, forbidden) for the screen to show."""
        if self._project_checked or not self.options.project:
            return
        from ..names import LookupProblem, resolve_project

        project = self.options.project
        try:
            await resolve_project(monitor.client, project, user=self.cfg.impersonate_user or self.cfg.user)
        except LookupProblem as exc:
            self._project_checked = True
            self.set(project=project, project_problem=exc.message)
            self.changed()
            return
        except (ApiProblem, ConnectionProblem):
            return  # asked again with the next connection
        self._project_checked = True
        self.set(project=project, project_problem="")


def problem_of(exc: BaseException) -> tuple[str, ExitCode]:
    """One line and the exit code of what ended a connection."""
    if isinstance(exc, ConnectionProblem):
        return exc.message, exc.code
    if isinstance(exc, ApiProblem):
        return exc.one_line(), exc.exit_code
    if isinstance(exc, TimeoutError):
        return str(exc) or "timed out", ExitCode.UNREACHABLE
    return f"{type(exc).__name__}: {exc}", ExitCode.UNREACHABLE
