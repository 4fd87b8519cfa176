"""Timestamps as the printers show them: RFC 3339 parsing, ages (apimachinery ``HumanDuration``,
``translateTimestampSince``) and the default convertor's ``Created At``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any


def human_duration(seconds: float) -> str:
    """apimachinery ``duration.HumanDuration`` for a duration given in seconds."""
    s = int(seconds)  # Go: int(d.Seconds()) truncates toward zero
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        sec = s % 60
        return f"{minutes}m" if sec == 0 else f"{minutes}m{sec}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


@lru_cache(maxsize=65536)
def parse_ts(value: str) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp (UTC when it has no zone), or None."""
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def timestamp_of(value: Any) -> float | None:
    """`parse_ts` of a field's value; None when it is missing, empty or not a string."""
    if not value or not isinstance(value, str):
        return None
    return parse_ts(value)


def since(value: Any, now: float) -> str:
    """translateTimestampSince: ``<unknown>`` for a zero/missing timestamp."""
    ts = timestamp_of(value)
    if ts is None:
        return "<unknown>"
    return human_duration(now - ts)


def now_ts(now: datetime | None) -> float:
    """*now* (UTC when naive), or the current time, in seconds since the epoch."""
    if now is None:
        return datetime.now(UTC).timestamp()
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.timestamp()


def created_at(obj: Mapping[str, Any]) -> str:
    """RFC3339 creation timestamp in UTC, as the default table convertor prints it."""
    raw = (obj.get("metadata") or {}).get("creationTimestamp")
    ts = timestamp_of(raw)
    if ts is None:
        return "0001-01-01T00:00:00Z"
    return datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
