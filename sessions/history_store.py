"""Session histories kept outside the pods: what convert needs of an interactive session, so that
suspend/resume, a restarted pod and a deleted session lose nothing of it.

One small JSON file per session under `$XDG_STATE_HOME/ranks/sessions/<context>/` (per context,
server and impersonated user, as the flight recorder's; directories 0700, files 0600, written
atomically under a lock), holding per session uid (a new session of the same name is another):
- the job as it was (its spec, for a convert after it was deleted, or a debug session's original);
- each rank's shell history file as last read (`~/.ranks_history`), one copy per pod instance (a
  restarted or recreated pod starts an empty file: the earlier copy stays);
- the launches `ranks exec` and the dashboard's run-on-ranks ran, each rank's with its status;
- for a session made by `ranks debug`, the command of the job it came from and how that failed.
Blocking file I/O: from a worker thread (`asyncio.to_thread`) on an event loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import fnmatch
import hashlib
import os
import re
import time
import typing
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from monitors.state_dir import (
    PrivateDirError,
    private_dir_fd,
    private_names,
    prune_oldest,
    read_private,
    state_home,
    write_private,
)

from .history import LaunchRun

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
TEXT_LIMIT = 512 * 1024  # bytes of history kept per session (the oldest copies go first)
RUNS_LIMIT = 500  # exec runs kept per session
UIDS_KEPT = 3  # sessions of the same name kept


@dataclass
class PodHistory:
    """A rank's history file as last read, from one pod instance (`instance`: name and start)."""

    label: str
    pod: str
    instance: str
    text: str
    read_at: float


@dataclass
class SavedSession:
    namespace: str
    kind: str
    name: str
    uid: str
    saved_at: float = 0.0
    job: dict[str, Any] | None = None
    histories: list[PodHistory] = field(default_factory=list)
    runs: list[LaunchRun] = field(default_factory=list)
    debug_of: dict[str, Any] | None = None  # {"kind", "name", "command", "failure"}

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        for r in doc["runs"]:
            r.pop("exports", None)  # (an exec run's: none; a shell's are read from its history)
        return doc

    @staticmethod
    def from_dict(doc: Any) -> SavedSession:
        """A saved session as `to_dict` wrote it. The file is outside input: not an object naming a
        session raises ValueError; histories and runs that are not objects are left out; a field of
        the wrong type, a time out of range or an integer beyond 64 bits is left at its default."""
        if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) for k in ("namespace", "kind", "name")):
            raise ValueError("not a saved session")
        out = _typed(SavedSession, {k: v for k, v in doc.items() if k not in ("histories", "runs")})
        histories, runs = doc.get("histories"), doc.get("runs")
        out.histories = [_typed(PodHistory, h) for h in (histories if isinstance(histories, list) else ())
                         if isinstance(h, dict)]
        out.runs = [_typed(LaunchRun, r) for r in (runs if isinstance(runs, list) else ()) if isinstance(r, dict)]
        return out


MAX_TIME = 253402300799.0  # 9999-12-31T23:59:59Z

_Record = TypeVar("_Record", bound="DataclassInstance")  # a dataclass read back by `_typed`


def _typed(cls: type[_Record], doc: dict[str, Any]) -> _Record:
    """`cls` (a dataclass of str, int, float and dict fields, optional or not) from `doc`, each field
    taken only when it has its type (and, for a number, a value that can be shown), else its default
    (None where the field may be None, else "" / 0)."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        kinds = typing.get_args(hints[f.name]) or (hints[f.name],)
        value = doc.get(f.name)
        if isinstance(value, bool) and bool not in kinds:
            value = None
        if isinstance(value, int) and int in kinds and -(2**63) <= value < 2**63:
            values[f.name] = value
        elif isinstance(value, int | float) and float in kinds and -MAX_TIME <= value <= MAX_TIME:
            values[f.name] = float(value)
        elif (isinstance(value, str) and str in kinds) or (isinstance(value, dict) and (dict in kinds or any(typing.get_origin(k) is dict for k in kinds))):
            values[f.name] = value
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = (None if type(None) in kinds else "" if str in kinds else 0.0 if float in kinds
                              else 0 if int in kinds else None)
    return cls(**values)


def store_for(cfg: Any) -> HistoryStore:
    """The store of a cluster configuration (`connection.ClusterConfig`)."""
    return HistoryStore(cfg.context, cfg.server, user=cfg.impersonate_user)


class HistoryStore:
    def __init__(self, context: str, server: str = "", *, user: str | None = None, root: Path | None = None,
                 max_sessions: int = 200) -> None:
        slug = _SAFE.sub("_", context or "default")[:60] + (f"-as-{_SAFE.sub('_', user)[:40]}" if user else "")
        digest = hashlib.sha256(f"{context}\0{server}\0{user or ''}".encode()).hexdigest()[:10]
        self.dir = (root or state_home() / "ranks" / "sessions") / f"{slug}-{digest}"
        self.max_sessions = max_sessions

    def path(self, namespace: str, kind: str, name: str) -> Path:
        return self.dir / f"{_SAFE.sub('_', namespace)}__{_SAFE.sub('_', kind.lower())}__{_SAFE.sub('_', name)}.json"

    # -- reading ---------------------------------------------------------------------------------------------
    def _read(self, namespace: str, kind: str, name: str) -> list[SavedSession]:
        return self._read_path(self.path(namespace, kind, name))

    def load(self, namespace: str, kind: str, name: str, uid: str | None = None) -> SavedSession | None:
        """The saved session of this uid (None: the newest of that name)."""
        found = self._read(namespace, kind, name)
        if uid is not None:
            return next((s for s in found if s.uid == uid or not s.uid), None)
        return max(found, key=lambda s: s.saved_at, default=None)

    def find(self, namespace: str, name: str) -> list[SavedSession]:
        """The newest saved session of each kind named `name` in `namespace` ("*": in any)."""
        out = []
        ns = "*" if namespace == "*" else _SAFE.sub("_", namespace)
        pattern = f"{ns}__*__{_SAFE.sub('_', name)}.json"
        for p in (self.dir / n for n in private_names(self.dir) if fnmatch.fnmatchcase(n, pattern)):
            sessions = [s for s in self._read_path(p) if s.name == name and namespace in ("*", s.namespace)]
            if sessions:
                out.append(max(sessions, key=lambda s: s.saved_at))
        return out

    def _read_path(self, path: Path) -> list[SavedSession]:
        """The sessions saved in `path` (none when missing or not such a file: it is outside input,
        and a session that is not one is left out). Raises `PrivateDirError` (one line) when the
        directory or the file is not the user's own."""
        try:
            raw = read_private(path)
            doc = orjson.loads(raw) if raw is not None else None
        except PrivateDirError:
            raise
        except (OSError, orjson.JSONDecodeError):
            return []
        found = doc.get("sessions") if isinstance(doc, dict) else None
        out = []
        for s in found if isinstance(found, list) else ():
            with contextlib.suppress(KeyError, TypeError, ValueError, OverflowError, AttributeError):
                out.append(SavedSession.from_dict(s))
        return out

    # -- writing ----------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _editing(self, namespace: str, kind: str, name: str, uid: str) -> Iterator[SavedSession]:
        """The saved session of `uid` to change, written back when the block ends (under a lock:
        a dashboard and a CLI may write at once)."""
        with private_dir_fd(self.dir) as dir_fd:
            fd = os.open(".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            sessions = self._read(namespace, kind, name)
            current = next((s for s in sessions if s.uid == uid), None)
            if current is None:
                current = SavedSession(namespace, kind, name, uid)
                sessions.append(current)
            yield current
            current.saved_at = time.time()
            sessions.sort(key=lambda s: s.saved_at)
            self._write(self.path(namespace, kind, name),
                        orjson.dumps({"sessions": [s.to_dict() for s in sessions[-UIDS_KEPT:]]}))
            self._prune()
        finally:
            os.close(fd)

    def save_job(self, namespace: str, kind: str, name: str, uid: str, job: dict[str, Any],
                 debug_of: dict[str, Any] | None = None) -> None:
        with self._editing(namespace, kind, name, uid) as s:
            s.job = job
            if debug_of is not None:
                s.debug_of = debug_of

    def save_history(self, namespace: str, kind: str, name: str, uid: str, label: str, pod: str, instance: str,
                     text: str) -> SavedSession:
        """A rank's history file as just read: it replaces the copy of the same pod instance when it
        holds it whole (the file only grows), else it is another copy."""
        with self._editing(namespace, kind, name, uid) as s:
            same = [h for h in s.histories if h.label == label and h.instance == instance]
            if same and text.startswith(same[-1].text):
                same[-1].text, same[-1].read_at, same[-1].pod = text, time.time(), pod
            elif text.strip() and (not same or text != same[-1].text):
                s.histories.append(PodHistory(label, pod, instance, text, time.time()))
            _bound(s)
            return s

    def add_runs(self, namespace: str, kind: str, name: str, uid: str, runs: list[LaunchRun]) -> None:
        with self._editing(namespace, kind, name, uid) as s:
            s.runs = [*s.runs, *runs][-RUNS_LIMIT:]

    def _write(self, path: Path, data: bytes) -> None:
        write_private(path, data)

    def _prune(self) -> None:
        prune_oldest(self.dir, self.max_sessions, ".json")


def _bound(s: SavedSession) -> None:
    """At most TEXT_LIMIT bytes of history text: the oldest copies go, then the oldest lines."""
    total = sum(len(h.text) for h in s.histories)
    while total > TEXT_LIMIT and len(s.histories) > 1:
        total -= len(s.histories.pop(0).text)
    if total > TEXT_LIMIT and s.histories:
        h = s.histories[0]
        cut = h.text.find("\n", len(h.text) - TEXT_LIMIT)
        h.text = h.text[cut + 1:] if cut >= 0 else ""
