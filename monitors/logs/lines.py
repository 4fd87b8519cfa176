"""Log lines as the engine keeps them, and the timestamps the kubelet puts in front of them.

With `timestamps=true` every line of `GET .../pods/{name}/log` starts with an RFC3339Nano time
and a space (`2026-01-01T00:00:00.123456789Z text`). Go drops trailing zeros of the fraction, so
timestamps are parsed to integer nanoseconds, never compared as strings.

A line longer than the runtime's limit (containerd: 16 KiB) is stored as several partial records,
and the kubelet prefixes each of them with its own timestamp without a newline between them;
`split_record()` puts such a line back together.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass
from datetime import datetime

from ..humanize import format_ts
from .terminal_text import MAX_LINE_BYTES, NOT_PRINTABLE_ASCII, SafeText, sanitize_line

PARTIAL_RECORD = 16 * 1024  # containerd's max_container_log_line_size
_TS_AT = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d) ")
_SEC_CACHE: dict[bytes, int] = {}


def parse_ts(ts: bytes) -> int | None:
    """An RFC3339(Nano) timestamp as nanoseconds since the epoch, or None."""
    if len(ts) >= 20 and ts[19:20] in (b".", b"Z") and ts[-1:] == b"Z":
        base = ts[:19]
        sec = _SEC_CACHE.get(base)
        if sec is None:
            try:
                sec = calendar.timegm(time.strptime(base.decode("ascii"), "%Y-%m-%dT%H:%M:%S"))
            except (ValueError, UnicodeDecodeError):
                return None
            if len(_SEC_CACHE) > 8192:
                _SEC_CACHE.clear()
            _SEC_CACHE[base] = sec
        if ts[19:20] == b"Z":
            return sec * 1_000_000_000 if len(ts) == 20 else None
        frac = ts[20:-1]
        if not frac or len(frac) > 9 or not frac.isdigit():
            return None
        return sec * 1_000_000_000 + int(frac.ljust(9, b"0"))
    try:  # offsets other than Z, or something odd
        text = ts.decode("ascii")
        frac_ns = 0
        m = re.match(r"^(.{19})\.(\d{1,9})(.*)$", text)
        if m:
            text = m.group(1) + m.group(3)
            frac_ns = int(m.group(2).ljust(9, "0"))
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
        if dt.tzinfo is None:
            return None
        return int(dt.timestamp()) * 1_000_000_000 + frac_ns
    except (ValueError, UnicodeDecodeError):
        return None


def format_since(ns: int) -> str:
    """`sinceTime` for a reopen: the second of `ns` (the API server forwards whole seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns // 1_000_000_000))


def split_record(line: bytes) -> tuple[int | None, bytes]:
    """(timestamp ns or None, content) of one line of a `timestamps=true` log response."""
    sp = line.find(b" ")
    if sp < 0:
        ts = parse_ts(line)
        return (ts, b"") if ts is not None else (None, line)
    ts = parse_ts(line[:sp])
    if ts is None:
        return None, line
    content = line[sp + 1:]
    if len(content) > PARTIAL_RECORD:
        content = join_partials(content)
    return ts, content


def join_partials(content: bytes) -> bytes:
    """Remove the timestamps the kubelet put between the 16 KiB partial records of a long line."""
    pos = PARTIAL_RECORD
    if _TS_AT.match(content, pos) is None:
        return content
    parts = []
    start = 0
    while len(content) > pos:
        m = _TS_AT.match(content, pos)
        if m is None:
            break
        parts.append(content[start:pos])
        start = m.end()
        pos = start + PARTIAL_RECORD
    parts.append(content[start:])
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where lines come from: one container of one rank (shared by all its lines)."""

    label: str = ""  # launcher, master-0, worker-3
    rank: int | None = None  # the global rank, where the framework defines one
    role: str = ""
    replica_index: int | None = None
    namespace: str = ""
    pod: str = ""
    container: str = ""
    stream: str | None = None  # "stdout"/"stderr" where known; the log API does not say (None)


NO_ORIGIN = Origin()


class LogLine:
    """One merged log line. `ranks` is set (labels, in time order) when identical lines collapsed."""

    __slots__ = ("_safe", "arrival", "cut", "kind", "origin", "ranks", "raw", "seq", "ts")

    def __init__(self, ts: int, raw: bytes, origin: Origin = NO_ORIGIN, *, kind: str = "line", cut: int = 0) -> None:
        self.ts = ts
        self.raw = raw
        self.origin = origin
        self.kind = kind  # "line", or "dropped" / "notice" for markers the engine makes
        self.cut = cut  # bytes dropped before the text reached the engine (very long lines)
        self.ranks: tuple[str, ...] = ()
        self.seq = -1  # position in the merged buffer's total order, once stored
        self.arrival = 0.0
        self._safe: SafeText | None = None

    label = property(lambda self: self.origin.label)
    rank = property(lambda self: self.origin.rank)
    role = property(lambda self: self.origin.role)
    replica_index = property(lambda self: self.origin.replica_index)
    namespace = property(lambda self: self.origin.namespace)
    pod = property(lambda self: self.origin.pod)
    container = property(lambda self: self.origin.container)
    stream = property(lambda self: self.origin.stream)

    @property
    def count(self) -> int:
        """How many ranks printed this line (1 unless collapsed)."""
        return len(self.ranks) or 1

    @property
    def safe(self) -> SafeText:
        s = self._safe
        if s is None:
            raw = self.raw
            if not self.cut and NOT_PRINTABLE_ASCII.search(raw) is None:
                return SafeText(raw.decode("ascii"))  # cheap to redo: not kept, to save memory
            s = sanitize_line(raw)
            if self.cut:
                s = _with_cut(s, self.cut)
            self._safe = s
        return s

    @safe.setter
    def safe(self, value: SafeText) -> None:
        """Text that is safe already (a marker the engine makes, with its own style)."""
        self._safe = value

    @property
    def text(self) -> str:
        """Display-safe text (no control or escape sequences)."""
        return self.safe.text

    @property
    def time(self) -> float:
        return self.ts / 1e9

    @property
    def iso(self) -> str:
        return format_ts(self.ts)

    def __repr__(self) -> str:
        return f"LogLine({self.label or self.kind}, {self.iso}, {self.raw[:60]!r})"


def _with_cut(s: SafeText, cut: int) -> SafeText:
    total = cut + s.truncated
    text = s.text
    if s.truncated:  # replace the sanitiser's marker with one counting both cuts
        text = text[: s.spans[-1][0]]
        spans = s.spans[:-1]
    else:
        spans = s.spans
    marker = f" …[{total:,} more bytes not shown]"
    return SafeText(text + marker, (*spans, (len(text), len(text) + len(marker), "dim")), total)


__all__ = ["MAX_LINE_BYTES", "NO_ORIGIN", "LogLine", "Origin", "format_since", "format_ts", "join_partials", "parse_ts", "split_record"]
