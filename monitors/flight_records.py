"""What the flight recorder writes down (`flight_recorder`) and reads back (`flight_store`): a
workload's failed ranks, as plain data. No I/O: diagnostics (`diagnostics.postmortem`) read it.

A recording on disk is outside input (edited, truncated, of another version): `Recording.from_json`
takes what it can and leaves the rest unset, never raising on a field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .humanize import format_ts

LINES = 50
LINE_LIMIT = 1000


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
