"""The GPU metrics loop: the running GPU pods the model holds, refreshed every interval into the
model (`gpu_feed`); with no source found, refreshes are skipped until discovery is due again (unless
the GPU pods shown changed). After each refresh the data loop is told (`refreshed`): the focused
workload's histories grew, and hangs may be judged."""

from __future__ import annotations

from collections.abc import Callable

from ..connection import DEFAULT_REQUEST_TIMEOUT, ClusterConfig
from ..metrics import GpuMetrics
from ..monitor import Monitor
from .status import ConnectionStatus
from .thread import LoopThread
from .updates import DataOptions


class MetricsLoop:
    def __init__(self, cfg: ClusterConfig, options: DataOptions, status: ConnectionStatus, thread: LoopThread,
                 refreshed: Callable[[bool, bool], None]) -> None:
        """`refreshed(asked, sent)`: after each turn; `asked`: a refresh was made, `sent`: the
        model's flush sent an update."""
        self.cfg = cfg
        self.options = options
        self.status = status
        self.thread = thread
        self.refreshed = refreshed
        self.gm: GpuMetrics | None = None  # while it runs: its poller (the GPUs tab reads through it)

    async def run(self, monitor: Monitor) -> None:
        """Until the loop is stopped (or this task cancelled: the connection ended)."""
        from .. import promql
        from ..gpu_feed import apply_snapshot, make_metrics

        opts = self.options
        gm = make_metrics(self.cfg, opts.prometheus_url, interval=opts.refresh_interval,
                          timeout=self.cfg.request_timeout or DEFAULT_REQUEST_TIMEOUT)  # a slow link is no failure
        if opts.metric_names:
            gm.names = promql.metric_names(opts.metric_names)
        self.gm = gm
        listed_from: object = None  # the workloads the shown pods were last read from
        told: object = None  # the pods the poller was last told to show (the same again: not told)
        applied: object = None  # the last readings put in the model (the same again: nothing to put)
        pods: list[tuple[str, str]] = []
        try:
            while not self.thread.stopping:
                model = monitor.model
                same = model.workloads is listed_from  # the model replaces it when a workload changes
                if not same:
                    listed_from = model.workloads
                    now_shown = [(r.namespace, r.pod) for w in model.workloads.values() for r in w.ranks
                                 if r.gpus > 0 and r.node and r.phase == "Running"]
                    if now_shown != pods:
                        pods = now_shown
                # no source yet and the same pods shown: the last answer stands, nothing to ask
                skip = same and gm.nothing_to_ask()
                if not skip and told is not pods:
                    gm.set_shown(pods, namespaces={ns for ns, _ in pods}, all_nodes=True)
                    told = pods
                try:
                    snap = None if skip else await gm.refresh()
                except Exception as exc:  # a metrics bug must not take the dashboard down
                    monitor.metrics_problem = f"{type(exc).__name__}: {exc}"
                    snap = None
                if snap is not None:
                    if snap.pods is not applied or snap.nodes:
                        apply_snapshot(model, snap)
                        applied = snap.pods
                    monitor.metrics_note = snap.source.description if snap.source else ""
                    monitor.metrics_problem = snap.reason if snap.state.value == "unavailable" else ""
                    monitor.metrics_forbidden = snap.source.forbidden if snap.source else ""
                model.status_changed = model.status_changed or self.status.metrics_moved(monitor)
                self.refreshed(not skip, not skip and bool(monitor.flush()))
                await self.thread.pause(gm.interval)
        finally:
            self.gm = None
            await gm.aclose()
