"""The flight recorder's files: one small JSON file per workload under
`$XDG_STATE_HOME/ranks/flight/<context>/` (directories 0700, files 0600, written atomically),
bounded: at most `max_workloads` files (the oldest go first), `max_failures` failures per
workload (`flight_records` says what one holds). Blocking file I/O, no network.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from .flight_records import RecordedFailure, Recording
from .state_dir import PrivateDirError, private_dir, prune_oldest, read_private, state_home, write_private

if TYPE_CHECKING:
    from .connection import ClusterConfig

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def store_for(cfg: ClusterConfig) -> FlightStore:
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
