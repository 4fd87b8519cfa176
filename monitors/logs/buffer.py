"""Bounded line storage: the merged buffer (a ring with a global cap) and per-rank rings.

`LineBuffer` is what a view renders: `len()`, `buf[i]` (O(1), also negative indexes and slices),
`total` (every line ever stored, never decreases: a view compares it with the value it last saw
to say "N new lines") and `dropped` (lines pushed out by the cap). While lines have been dropped,
index 0 is a marker line "N older lines dropped" (kind "dropped"), so the loss is visible.

The cap is a number of lines and a number of bytes (`max_bytes`: each line costs twice its raw
length, for its bytes and its display text, plus a fixed overhead): 200,000 lines of a few
hundred bytes fit, but a process printing megabyte lines (a line is cut at 1 MiB) would otherwise
be held 200,000 times over; the oldest lines go first either way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import overload

from ..humanize import plural
from .lines import LogLine
from .terminal_text import SafeText

DEFAULT_CAP = 200_000
DEFAULT_MAX_BYTES = 512 << 20
LINE_OVERHEAD = 200  # bytes a line costs besides its text (the object, its slots, the ring's slot)
DEFAULT_RANK_CAP = 1_000


def _cost(line: LogLine) -> int:
    return 2 * len(line.raw) + LINE_OVERHEAD


class LineBuffer:
    def __init__(self, cap: int = DEFAULT_CAP, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if cap < 1:
            raise ValueError("cap must be at least 1")
        self.cap = cap
        self.max_bytes = max_bytes
        self.bytes = 0  # what the lines held cost (`_cost`)
        self._ring: list[LogLine | None] = []
        self._start = 0  # ring index of the oldest line
        self._size = 0
        self.total = 0
        self.dropped = 0
        self._marker: LogLine | None = None

    # -- writing -------------------------------------------------------------------------------
    def extend(self, lines: Iterable[LogLine]) -> None:
        ring = self._ring
        cap = self.cap
        for line in lines:
            line.seq = self.total
            self.total += 1
            self.bytes += 2 * len(line.raw) + LINE_OVERHEAD
            if self._size < cap:
                if len(ring) < cap:
                    ring.append(line)
                else:
                    ring[(self._start + self._size) % cap] = line
                self._size += 1
            else:
                old = ring[self._start]
                if old is not None:
                    self.bytes -= _cost(old)
                ring[self._start] = line
                self._start = (self._start + 1) % cap
                self.dropped += 1
            if self.bytes > self.max_bytes:
                self._drop_oldest_over_budget()

    def _drop_oldest_over_budget(self) -> None:
        """The oldest lines go until the rest fit in `max_bytes` (the newest line stays)."""
        ring = self._ring
        while self.bytes > self.max_bytes and self._size > 1:
            old = ring[self._start]
            if old is not None:
                self.bytes -= _cost(old)
            ring[self._start] = None
            self._start = (self._start + 1) % self.cap
            self._size -= 1
            self.dropped += 1

    def clear(self) -> None:
        """Forget every line (the total keeps counting)."""
        self.dropped += self._size
        self._ring = []
        self._start = self._size = 0
        self.bytes = 0

    # -- reading -------------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self.total

    @property
    def first_seq(self) -> int:
        """`seq` of the oldest line still held."""
        return self.total - self._size

    def lines(self) -> int:
        """Lines held (without the dropped marker)."""
        return self._size

    def by_seq(self, seq: int) -> LogLine | None:
        off = seq - (self.total - self._size)
        if off < 0 or off >= self._size:
            return None
        return self._ring[(self._start + off) % self.cap]

    def marker(self) -> LogLine | None:
        if not self.dropped:
            return None
        m = self._marker
        if m is None or m.cut != self.dropped:
            first = self.by_seq(self.first_seq)
            held = f"{self.cap:,}" if self._size >= self.cap else f"{self._size:,}, {self.max_bytes >> 20} MiB"
            text = f"… {plural(self.dropped, 'older line')} dropped (buffer holds the newest {held})"
            m = LogLine(first.ts if first is not None else 0, text.encode(), kind="dropped", cut=self.dropped)
            m.safe = SafeText(text, ((0, len(text), "dim italic"),))
            self._marker = m
        return m

    def __len__(self) -> int:
        return self._size + (1 if self.dropped else 0)

    @overload
    def __getitem__(self, i: int) -> LogLine: ...
    @overload
    def __getitem__(self, i: slice) -> list[LogLine]: ...

    def __getitem__(self, i: int | slice) -> LogLine | list[LogLine]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if i < 0 or i >= n:
            raise IndexError("line index out of range")
        if self.dropped:
            if i == 0:
                m = self.marker()
                assert m is not None
                return m
            i -= 1
        line = self._ring[(self._start + i) % self.cap]
        assert line is not None
        return line

    def __iter__(self) -> Iterator[LogLine]:
        for k in range(len(self)):
            yield self[k]

    def since(self, seq: int) -> list[LogLine]:
        """Lines stored at or after total-order position `seq` that are still held."""
        start = max(seq, self.first_seq)
        return [line for s in range(start, self.total) if (line := self.by_seq(s)) is not None]


class FilteredView:
    """The lines of a `LineBuffer` that match a predicate, kept up to date by `refresh()`.

    Indexable like the buffer (the dropped marker first while the buffer has dropped lines).
    """

    def __init__(self, buffer: LineBuffer, predicate: Callable[[LogLine], bool]) -> None:
        self.buffer = buffer
        self.predicate = predicate
        self._seqs: list[int] = []
        self._head = 0  # entries before _head are gone from the buffer
        self._scanned = buffer.first_seq
        self.refresh()

    def refresh(self) -> int:
        """Take in lines stored since the last call; returns how many matched."""
        buf = self.buffer
        first = buf.first_seq
        seqs = self._seqs
        while self._head < len(seqs) and seqs[self._head] < first:
            self._head += 1
        if self._head > 4096 and self._head * 2 > len(seqs):
            del seqs[: self._head]
            self._head = 0
        added = 0
        pred = self.predicate
        for s in range(max(self._scanned, first), buf.total):
            line = buf.by_seq(s)
            if line is not None and pred(line):
                seqs.append(s)
                added += 1
        self._scanned = buf.total
        return added

    def __len__(self) -> int:
        return len(self._seqs) - self._head + (1 if self.buffer.dropped else 0)

    def __getitem__(self, i: int) -> LogLine:
        n = len(self)
        if i < 0:
            i += n
        if i < 0 or i >= n:
            raise IndexError("line index out of range")
        if self.buffer.dropped:
            if i == 0:
                m = self.buffer.marker()
                assert m is not None
                return m
            i -= 1
        line = self.buffer.by_seq(self._seqs[self._head + i])
        assert line is not None
        return line


class RankRings:
    """The newest lines of each rank (by label), for per-rank views and diagnostics."""

    def __init__(self, cap: int = DEFAULT_RANK_CAP) -> None:
        self.cap = cap
        self.rings: dict[str, deque[LogLine]] = {}

    def add(self, line: LogLine) -> None:
        ring = self.rings.get(line.label)
        if ring is None:
            ring = self.rings[line.label] = deque(maxlen=self.cap)
        ring.append(line)

    def last(self, label: str, n: int) -> list[LogLine]:
        ring = self.rings.get(label)
        if not ring:
            return []
        return list(ring)[-n:] if n < len(ring) else list(ring)
