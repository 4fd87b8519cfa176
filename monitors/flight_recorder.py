"""The flight recorder: failures that outlive their pods.

When an operator gives up on a job it deletes the pods (the training-operator cleans up before it
sets Failed, whatever `cleanPodPolicy` says), and with them the logs and the container statuses
that said which rank failed and why. Whenever a ranks process watches workloads (the dashboard,
`ranks logs -f`, the SSH door's dashboards), each rank whose container terminates non-zero (or
OOMKilled; not one its pod's deletion stopped, `model.counts_as_failure`) is written down here: role, rank, pod, node, container, exit code, reason, termination
message and its last lines (from the log being followed, else read once from the API, else the
termination message that `FallbackToLogsOnError` fills).

What is written down (`flight_records`) goes to the files of `flight_store`: one small JSON file
per workload, bounded, `lines` lines of at most 1,000 characters each. `ranks get`, `ranks logs
--first-failure` and the dashboard read it when the pods are gone, saying that it is a recording
and when it was made. This module is the recording itself: it hears the model and reads the log.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import api_paths
from .flight_records import LINE_LIMIT, LINES
from .flight_records import RecordedFailure as RecordedFailure
from .flight_records import Recording as Recording
from .flight_store import FlightStore as FlightStore
from .flight_store import store_for as store_for
from .kube import ApiProblem
from .model import counts_as_failure, succeeded_time
from .sanitize import clean
from .state_dir import PrivateDirError

if TYPE_CHECKING:
    from .kube import KubeClient
    from .model import LiveModel
    from .model_views import WorkloadView
    from .records import Exit, PodRec

SEEN_LIMIT = 20_000  # failures remembered as recorded (pod uid, container, finish time)
# failed ranks' logs read at once: past it (a churning cluster fails hundreds at a time) a failure is
# recorded from its status alone (exit, reason, termination message), with no request and no wait
READS_AT_ONCE = 32
# recordings under way at once (each its file write): past it, a failure is not recorded (counted in
# `skipped`) until the recorder catches up; the first failures of a flood are the ones kept
CAPTURES_AT_ONCE = 256


@dataclass
class FlightRecorder:
    """Records each newly terminated failing container of a workload as the model applies it.
    `tail_of(workload_key, rank_label)` may give the last lines a log engine already holds."""

    store: FlightStore
    client: KubeClient
    tail_of: Callable[[Any, str], list[str] | None] | None = None
    lines: int = LINES
    settle: float = 0.5  # seconds for a followed stream's last lines to arrive before they are taken
    # told once, in one line, when the store refuses to be written (its directory is not the user's own)
    on_refused: Callable[[str], None] | None = None
    refused: str = ""
    _seen: dict[tuple[str, str, float | None], None] = field(default_factory=dict)  # (ordered: oldest first)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _reading: int = 0  # captures reading a log now (at most READS_AT_ONCE)
    skipped: int = 0  # failures not recorded: CAPTURES_AT_ONCE were under way

    PRIME_LIMIT = 50  # failures recorded from the first sync (statuses only, no log read)

    def prime(self, model: LiveModel) -> None:
        """After the first sync: failures that were over before this process looked are not read
        again (a big cluster has hundreds); those of workloads still going, which the operator may
        yet clean up, are recorded from their statuses alone (termination messages, no request)."""
        budget = self.PRIME_LIMIT
        for key, wl in model.workloads.items():
            for p, ex in self._failures(model, key):
                if wl.status not in ("Failed", "Succeeded") and budget > 0:
                    budget -= 1
                    self._spawn(key, wl, p, ex, read=False)

    def watch(self, model: LiveModel) -> None:
        """From now on, record each failure as the model applies it (`LiveModel.exit_listeners`:
        a pod that fails and is deleted within one coalesced diff is still seen)."""
        model.exit_listeners.append(lambda p: self.on_pod(model, p))

    def on_pod(self, model: LiveModel, p: PodRec) -> None:
        key = model.pod_workload.get((p.namespace, p.name))
        wl = model.workloads.get(key) if key is not None else None
        if key is None or wl is None:  # (not part of a workload this process shows)
            return
        succeeded = succeeded_time(model.jobs.get(key))
        for ex in p.exits:
            mark = (p.uid, ex.container, ex.finished_at)
            if counts_as_failure(p, ex, succeeded) and mark not in self._seen:
                self._note(mark)
                self._spawn(key, wl, p, ex, read=True)

    def _failures(self, model: LiveModel, key: Any) -> list[tuple[PodRec, Exit]]:
        out = []
        succeeded = succeeded_time(model.jobs.get(key))
        for pk in model.workload_pods.get(key, ()):
            p = model.pods.get(pk)
            if p is None or not p.exits:
                continue
            for ex in p.exits:
                mark = (p.uid, ex.container, ex.finished_at)
                if counts_as_failure(p, ex, succeeded) and mark not in self._seen:
                    self._note(mark)
                    out.append((p, ex))
        return out

    def _note(self, mark: tuple[str, str, float | None]) -> None:
        if len(self._seen) >= SEEN_LIMIT:  # (days of crash loops: forget the oldest half)
            for old in list(self._seen)[: SEEN_LIMIT // 2]:
                del self._seen[old]
        self._seen[mark] = None

    def _spawn(self, key: Any, wl: WorkloadView, p: PodRec, ex: Exit, *, read: bool) -> None:
        if len(self._tasks) >= CAPTURES_AT_ONCE:
            self.skipped += 1
            return
        read = read and self._reading < READS_AT_ONCE
        if read:
            self._reading += 1
        task = asyncio.get_running_loop().create_task(self._capture(key, wl, p, ex, read))
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._done, read))

    def _done(self, read: bool, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if read:
            self._reading -= 1

    async def _capture(self, key: Any, wl: WorkloadView, p: PodRec, ex: Exit, read: bool = True) -> None:
        rank = next((r for r in wl.ranks if r.pod == p.name), None)
        label = rank.label if rank else p.name
        lines: list[str] = []
        source = ""
        # read the log at once (the operator may delete the pod any moment), and meanwhile let a
        # followed stream's last lines arrive: those win (they are what the user saw)
        reading = asyncio.get_running_loop().create_task(self._read_log(p, ex)) if read else None
        if self.tail_of is not None and read:
            await asyncio.sleep(self.settle)
            got = self.tail_of(key, label)
            if got:
                lines, source = got[-self.lines:], "log"
        if reading is not None:
            if lines:
                reading.cancel()
            else:
                lines = await reading
                source = "log" if lines else ""
        if not lines and ex.message:
            lines, source = ex.message.splitlines()[-self.lines:], "termination message"
        failure = RecordedFailure(
            label=label, role=rank.role if rank else "", rank=rank.rank if rank else None, pod=p.name,
            node=p.node, container=ex.container, exit_code=ex.exit_code, reason=ex.reason, finished_at=ex.finished_at,
            message=clean(ex.message, single_line=False, limit=2048),
            lines=tuple(clean(ln, limit=LINE_LIMIT) for ln in lines), recorded_at=time.time(), source=source)
        try:
            await asyncio.to_thread(self.store.add, wl.namespace, wl.kind, wl.name, wl.uid, failure)
        except PrivateDirError as exc:
            if not self.refused:
                self.refused = f"failures are not recorded: {exc}"
                if self.on_refused is not None:
                    self.on_refused(self.refused)
        except OSError:  # (a full disk: the recording is a copy, the watch goes on)
            pass

    async def _read_log(self, p: PodRec, ex: Exit) -> list[str]:
        """The failed instance's last lines, read once: the current container when it has not
        restarted since, else the previous one. Nothing when the pod is gone already."""
        base = [("container", ex.container), ("tailLines", str(self.lines))]
        tries = [[*base, ("previous", "true")], base] if p.restarts else [base, [*base, ("previous", "true")]]
        for params in tries:
            try:
                raw = await self.client.request("GET", api_paths.pod(p.namespace, p.name, "log"), params=params)
            except ApiProblem as exc:
                if exc.status == 404:
                    return []
                continue
            except Exception:  # (a lost connection: the termination message is what is left)
                return []
            text = raw.decode("utf-8", "replace").splitlines()
            if text:
                return text[-self.lines:]
        return []

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait for the captures under way (a command about to exit keeps what it saw)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
