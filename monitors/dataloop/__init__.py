"""The data side of the dashboard: the monitor, GPU metrics and log engines on one asyncio loop in
a background thread, so parsing a 20,000-pod LIST or a burst of events never stalls the UI.

    loop = DataLoop(cfg, DataOptions(...), on_update=..., on_problem=...)
    loop.start()                        # returns at once; connects, lists, watches, retries
    loop.focus(key)                     # the workload whose GPU histories ride along with updates
    fut = loop.run_coroutine(coro_fn(...))  # run a coroutine on the data loop (concurrent Future)
    fut = loop.idle_sessions(clock, 5.0)    # a named query of the model (see `DataLoop`'s queries)
    logs = loop.open_logs(key, LogOptions(follow=True, tail=2000), on_lines, on_notice)
    logs.close()
    loop.stop()

Callbacks run on the data thread: a UI must hand them over to its own loop (Textual's
`post_message` is thread-safe). What they carry is immutable by convention (views, snapshots,
tuples: the UI never changes them), so the UI never reads structures the data thread is changing.
Screens ask the model through the loop's named queries, never through its monitor.

Its rooms: `updates` (what it is told and sends), `thread` (the thread and its loop), `status` (the
connection's status), `metrics_loop` (GPU metrics), `health` (hangs and stragglers), `focus` (the
focused workload), `engines` (log engines), `loop` (connections, and the `DataLoop` itself).
"""

from __future__ import annotations

from .engines import LogHandle
from .focus import PROGRESS_LINES, newest_per_rank
from .loop import DataLoop
from .updates import DataOptions, DataStatus, DataUpdate, Judging, Postmortem, Progress, RankProgressView

__all__ = ["PROGRESS_LINES", "DataLoop", "DataOptions", "DataStatus", "DataUpdate", "Judging", "LogHandle",
           "Postmortem", "Progress", "RankProgressView", "newest_per_rank"]
