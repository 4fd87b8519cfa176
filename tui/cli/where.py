"""Where the read commands look, one rule for all of them (README, Commands):

- `-p PROJECT`: that project; `-A`: every project you may read;
- neither: the context's namespace (its `namespace:`, `default` when it names none, as kubectl)
  when you may read it and it holds a workload; otherwise every project you may read, which is
  where the dashboard looks, and a note on stderr says so (`Looked.note`). What a command finds
  nothing in says where it looked (`Looked.where`).

`list` and `idle` load by it (`load_where`); `get`, `why` and `logs`, which name one workload,
look in the context's namespace, then in the one project you may read that has it
(`loading.locate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from monitors.connection import ClusterConfig
from monitors.sanitize import clean

from .loading import load_monitor

if TYPE_CHECKING:
    from monitors.monitor import Monitor


@dataclass(frozen=True)
class Looked:
    """Where a read command looked: `how` is "project" (-p), "all" (-A), "context" (the
    context's namespace) or "widened" (every project you may read, because the context's
    namespace held no workload or may not be read: `why`)."""

    how: str
    namespaces: tuple[str, ...] | None  # None: every project the user may read
    context: str  # the context's namespace
    why: str = ""

    @property
    def every_project(self) -> bool:
        """Rows of several projects (a PROJECT column)."""
        return self.namespaces is None

    def where(self) -> str:
        """Where nothing was found, for `No ... {where}.`"""
        if self.how == "all":
            return "in any project"
        if self.how == "widened":
            return "in any project you may read"
        where = ", ".join(clean(ns) for ns in self.namespaces or ()) or "no namespace"
        if self.how == "context":
            return f"in {where} (the context's namespace); -A looks in every project, -p PROJECT in one"
        return f"in {where}"

    def note(self) -> str | None:
        """The stderr line when the command looked further than the context's namespace."""
        if self.how != "widened":
            return None
        return (f"ranks: note: {clean(self.context)} (the context's namespace) {self.why}; "
                "looked in every project you may read")


async def load_where(cfg: ClusterConfig, opts: dict[str, Any], project: str | None, all_projects: bool,
                     **kwargs: Any) -> tuple[Monitor, Looked]:
    """A monitor loaded (`loading.load_monitor`, its keywords) where the rule says, and where that was."""
    if project:
        monitor = await load_monitor(cfg, opts, project, **kwargs)
        return monitor, Looked("project", monitor.scope, cfg.namespace)
    if all_projects:
        return await load_monitor(cfg, opts, None, **kwargs), Looked("all", None, cfg.namespace)
    monitor = await load_monitor(cfg, opts, (cfg.namespace,), widen=True, **kwargs)
    if monitor.scope is not None:
        return monitor, Looked("context", monitor.scope, cfg.namespace)
    readable = monitor.status.cluster_wide or cfg.namespace in monitor.status.namespaces
    return monitor, Looked("widened", None, cfg.namespace,
                           "holds no workload" if readable else "may not be read")
