"""The flight recorder: failures that outlive their pods.

When an operator gives up on a job it deletes the pods (the training-operator cleans up before it
sets Failed, whatever `cleanPodPolicy` says), and with them the logs and the container statuses
that said which rank failed and why. Whenever a ranks process watches workloads (the dashboard,
`ranks logs -f`, the SSH door's dashboards), each rank whose container terminates non-zero (or
OOMKilled; not one its pod's deletion stopped, `model.counts_as_failure`) is written down here: role, rank, pod, node, container, exit code, reason, termination
message and its last lines (from the log being followed, else read once from the API, else the
termination message that `FallbackToLogsOnError` fills).

`FlightStore`: one small JSON file per workload under `$XDG_STATE_HOME/ranks/flight/<context>/`
(directories 0700, files 0600, written atomically), bounded: at most `max_workloads` files (the
oldest go first), `max_failures` failures per workload, `lines` lines of at most 1,000 characters
each. `ranks get`, `ranks logs --first-failure` and the dashboard read it when the pods are gone,
saying that it is a recording and when it was made.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from . import api_paths
from .kube import ApiProblem
from .model import counts_as_failure, succeeded_time
from .sanitize import clean
from .state_dir import PrivateDirError, private_dir, prune_oldest, read_private, state_home, write_private

if TYPE_CHECKING:
    from .kube import KubeClient
    from .model import LiveModel
    from .model_views import WorkloadView
    from .records import Exit, PodRec

LINES = 50
LINE_LIMIT = 1000
SEEN_LIMIT = 20_000  # failures remembered as recorded (pod uid, container, finish time)
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True)
class RecordedFailure:
    """A rank's failure: from the pods while they exist (`recorded_at` None), else as recorded."""

    label: str
    role: str
    rank: int | None
    pod: str
    node: str
    container: str
    exit_code: int
    reason: str
    finished_at: float | None
    message: str = ""
    lines: tuple[str, ...] = ()
    recorded_at: float | None = None  # when the flight recorder wrote it down
    source: str = ""  # where the lines came from: "log", "termination message", "" (none)

    @property
    def key(self) -> tuple[str, str, float | None]:
        return (self.pod, self.container, self.finished_at)

    def to_json(self) -> dict[str, Any]:
        from .logs.lines import format_ts

        def ts(t: float | None) -> str | None:
            return format_ts(int(t * 1e9)) if t else None

        return {"label": self.label, "role": self.role, "rank": self.rank, "pod": self.pod, "node": self.node,
                "container": self.container, "exit_code": self.exit_code, "reason": self.reason,
                "finished_at": ts(self.finished_at), "message": self.message, "lines": list(self.lines),
                "recorded": self.recorded_at is not None, "recorded_at": ts(self.recorded_at),
                "source": self.source}


@dataclass(frozen=True)
class Recording:
    namespace: str
    kind: str
    name: str
    uid: str
    failures: tuple[RecordedFailure, ...] = ()
    recorded_at: float = 0.0

    def first(self) -> RecordedFailure | None:
        return min(self.failures, key=lambda f: (f.finished_at or float("inf"), f.recorded_at or 0.0), default=None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(doc: Any) -> Recording:
        """A recording as written by `to_dict`. A file is outside input (edited, truncated, of
        another version): a document that is not a recording raises ValueError; a failure that is
        not an object is left out; a field of the wrong type, a time out of range (before 1970,
        after 9999) or a number beyond 32 bits is left unset (empty, None)."""
        if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) for k in ("namespace", "kind", "name")):
            raise ValueError("not a flight recording")
        raw = doc.get("failures")
        failures = tuple(_failure(f) for f in (raw if isinstance(raw, list) else ()) if isinstance(f, dict))
        return Recording(doc["namespace"], doc["kind"], doc["name"], _text(doc.get("uid")), failures,
                         _when(doc.get("recorded_at")) or 0.0)


MAX_TIME = 253402300799.0  # 9999-12-31T23:59:59Z: the last time a timestamp can show


def _text(value: Any, limit: int = 4096) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _when(value: Any) -> float | None:
    """A time (seconds since 1970) that can be shown, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value <= MAX_TIME else None


def _int32(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if -(2**31) <= value < 2**31 else None


def _failure(f: dict[str, Any]) -> RecordedFailure:
    lines = f.get("lines")
    code = _int32(f.get("exit_code"))
    return RecordedFailure(
        label=_text(f.get("label")), role=_text(f.get("role")), rank=_int32(f.get("rank")), pod=_text(f.get("pod")),
        node=_text(f.get("node")), container=_text(f.get("container")), exit_code=code if code is not None else -1,
        reason=_text(f.get("reason")), finished_at=_when(f.get("finished_at")), message=_text(f.get("message")),
        lines=tuple(_text(ln, LINE_LIMIT) for ln in (lines if isinstance(lines, list) else ())[-LINES:]
                    if isinstance(ln, str)),
        recorded_at=_when(f.get("recorded_at")), source=_text(f.get("source")))


def store_for(cfg: Any) -> FlightStore:
    """The store of a cluster configuration (`connection.ClusterConfig`): its context, server and
    impersonated user."""
    return FlightStore(cfg.context, cfg.server, user=cfg.impersonate_user)


class FlightStore:
    """The recordings of one context (a cluster and a user), on disk. Blocking file I/O: call it
    from a worker thread (`asyncio.to_thread`) on an event loop."""

    def __init__(self, context: str, server: str = "", *, user: str | None = None, root: Path | None = None,
                 max_workloads: int = 200, max_failures: int = 8) -> None:
        """One store per context, and per impersonated user (`--as`: the SSH door's sessions share
        the server's home, and one user's recordings are not another's)."""
        slug = _SAFE.sub("_", context or "default")[:60] + (f"-as-{_SAFE.sub('_', user)[:40]}" if user else "")
        digest = hashlib.sha256(f"{context}\0{server}\0{user or ''}".encode()).hexdigest()[:10]
        self.dir = (root or state_home() / "ranks" / "flight") / f"{slug}-{digest}"
        self.max_workloads = max_workloads
        self.max_failures = max_failures

    def _path(self, namespace: str, kind: str, name: str) -> Path:
        return self.dir / f"{_SAFE.sub('_', namespace)}__{_SAFE.sub('_', kind.lower())}__{_SAFE.sub('_', name)}.json"

    def load(self, namespace: str, kind: str, name: str, uid: str = "") -> Recording | None:
        """The recording of this workload; None when there is none, or it is of another workload
        that had the same name (another uid), or it cannot be read as one. Raises `PrivateDirError`
        (one line) when the directory or the file is not the user's own (a link planted there)."""
        try:
            raw = read_private(self._path(namespace, kind, name))
            if raw is None:
                return None
            rec = Recording.from_json(orjson.loads(raw))
        except PrivateDirError:
            raise
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError, OverflowError):
            return None
        if uid and rec.uid and rec.uid != uid:
            return None
        return rec

    def add(self, namespace: str, kind: str, name: str, uid: str, failure: RecordedFailure) -> Recording:
        """Write `failure` into the workload's recording (one per pod, container and finish time;
        the newest `max_failures` kept), then drop the oldest recordings beyond `max_workloads`."""
        old = self.load(namespace, kind, name, uid)
        kept = [f for f in (old.failures if old else ()) if f.key != failure.key]
        failures = sorted([*kept, failure], key=lambda f: (f.finished_at or float("inf"), f.recorded_at or 0.0))
        rec = Recording(namespace, kind, name, uid, tuple(failures[: self.max_failures]), failure.recorded_at or 0.0)
        self._write(self._path(namespace, kind, name), orjson.dumps(rec.to_dict()))
        self._prune()
        return rec

    def _write(self, path: Path, data: bytes) -> None:
        private_dir(self.dir)
        write_private(path, data)

    def _prune(self) -> None:
        prune_oldest(self.dir, self.max_workloads, ".json")


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
        task = asyncio.get_running_loop().create_task(self._capture(key, wl, p, ex, read))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
