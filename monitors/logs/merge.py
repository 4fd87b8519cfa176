"""The k-way merge of every rank's lines into one stream ordered by timestamp.

Two modes:

- **exact** (history: non-follow reads that end): a line is released only when every source
  that is still reading has at least one line pending (or has finished), so the merged order
  is exactly the timestamp order. Memory stays bounded by backpressure: a source with `high`
  pending lines waits (`await source.wait_space()`) until the merge has taken them.
- **window** (following): sources are live and may be silent for hours, so a line is held for
  a short reorder window (default 250 ms, counted from its arrival, not from its timestamp, so
  clock skew between nodes cannot stall the merge). When the oldest-arrived line is due,
  every pending line with a timestamp up to the largest due timestamp is released, in
  timestamp order. Lines of one source arrive in order, so lines that arrive within the window
  of each other come out interleaved right.

With `collapse`, identical lines of different ranks within the window are released as one line
whose `ranks` lists the ranks (`xN ranks`).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import deque
from collections.abc import Callable

from .lines import LogLine


class Source:
    """One stream's handle in the merge."""

    __slots__ = ("_space", "high", "low", "open", "pending")

    def __init__(self, high: int = 4096) -> None:
        self.pending = 0
        self.open = True
        self.high = high
        self.low = high // 2
        self._space: asyncio.Event | None = None

    @property
    def full(self) -> bool:
        return self.pending >= self.high

    async def wait_space(self) -> None:
        while self.pending >= self.high:
            if self._space is None:
                self._space = asyncio.Event()
            self._space.clear()
            await self._space.wait()

    def _taken(self) -> None:
        self.pending -= 1
        if self._space is not None and self.pending <= self.low:
            self._space.set()


class Merger:
    def __init__(
        self,
        emit: Callable[[list[LogLine]], None],
        *,
        window: float = 0.25,
        collapse: bool = False,
        exact: bool = True,
        clock: Callable[[], float] = time.monotonic,
        schedule: bool = True,
        high: int = 4096,
    ) -> None:
        self.emit = emit
        self.window = window
        self.collapse = collapse
        self.exact = exact
        self.clock = clock
        self.schedule = schedule  # arm an event-loop timer for the window (off in unit tests: call tick())
        self.high = high
        self._heap: list[tuple[int, int, LogLine, Source]] = []
        self._fifo: deque[LogLine] = deque()
        self._seq = 0
        self._starved = 0  # open sources with nothing pending (exact mode blocks on them)
        self._by_content: dict[bytes, list[tuple[LogLine, Source]]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self.released = 0

    def set_collapse(self, on: bool) -> None:
        """Collapse identical lines of several sources from now on (off: forget the lines kept to compare)."""
        self.collapse = on
        if not on:
            self._by_content.clear()

    # -- sources -------------------------------------------------------------------------------
    def source(self) -> Source:
        src = Source(self.high)
        self._starved += 1
        return src

    def finish(self, src: Source) -> None:
        """The source adds no more lines (its read ended)."""
        if not src.open:
            return
        src.open = False
        if src.pending == 0:
            self._starved -= 1
        if self.exact:
            self._release_exact()

    def reopen(self, src: Source) -> None:
        """A finished source reads again (exact mode waits for it once more)."""
        if src.open:
            return
        src.open = True
        if src.pending == 0:
            self._starved += 1

    @property
    def pending(self) -> int:
        return len(self._heap)

    # -- input ---------------------------------------------------------------------------------
    def add(self, src: Source, lines: list[LogLine]) -> None:
        if not lines:
            return
        now = self.clock()
        heap = self._heap
        push = heapq.heappush
        seq = self._seq
        if src.pending == 0 and src.open:
            self._starved -= 1
        src.pending += len(lines)
        by_content = self._by_content if self.collapse else None
        for line in lines:
            line.arrival = now
            push(heap, (line.ts, seq, line, src))
            seq += 1
            if by_content is not None:
                group = by_content.get(line.raw)
                if group is None:
                    by_content[line.raw] = [(line, src)]
                else:
                    group.append((line, src))
        self._seq = seq
        if self.exact:
            self._release_exact()
        else:
            self._fifo.extend(lines)
            if self.schedule and self._timer is None:
                self._arm()

    # -- release -------------------------------------------------------------------------------
    def _take(self, line: LogLine, src: Source) -> None:
        line.arrival = -1.0
        was = src.pending
        src._taken()
        if was == 1 and src.open:
            self._starved += 1
        if self.collapse:
            group = self._by_content.get(line.raw)
            if group is not None:
                for k, (other, _) in enumerate(group):
                    if other is line:
                        del group[k]
                        break
                if not group:
                    del self._by_content[line.raw]

    def _collapse_into(self, line: LogLine) -> None:
        group = self._by_content.get(line.raw)
        if not group:
            return
        limit = line.ts + int(self.window * 1e9)
        labels = [line.label]
        seen = {line.label}
        for other, osrc in list(group):
            if other.ts <= limit and other.label not in seen:
                seen.add(other.label)
                labels.append(other.label)
                self._take(other, osrc)
        if len(labels) > 1:
            line.ranks = tuple(labels)

    def _pop(self, out: list[LogLine]) -> None:
        _, _, line, src = heapq.heappop(self._heap)
        if line.arrival < 0:
            return  # already released (collapsed into another line)
        self._take(line, src)
        if self.collapse:
            self._collapse_into(line)
        out.append(line)

    def _release_exact(self) -> None:
        out: list[LogLine] = []
        heap = self._heap
        while heap and self._starved == 0:
            self._pop(out)
        if out:
            self.released += len(out)
            self.emit(out)

    def tick(self, now: float | None = None) -> int:
        """Window mode: release what is due at `now`; returns the number of lines released."""
        self._timer = None
        now = self.clock() if now is None else now
        limit = now - self.window
        fifo = self._fifo
        cutoff = -1
        while fifo and fifo[0].arrival <= limit:
            line = fifo.popleft()
            if line.arrival >= 0 and line.ts > cutoff:
                cutoff = line.ts
        out: list[LogLine] = []
        heap = self._heap
        if cutoff >= 0:
            while heap and heap[0][0] <= cutoff:
                self._pop(out)
        if out:
            self.released += len(out)
            self.emit(out)
        if self.schedule and fifo:
            self._arm()
        return len(out)

    def _arm(self) -> None:
        fifo = self._fifo
        while fifo and fifo[0].arrival < 0:
            fifo.popleft()
        if not fifo:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, fifo[0].arrival + self.window - self.clock())
        self._timer = loop.call_later(delay + 0.001, self.tick)

    def set_window_mode(self) -> None:
        """History is done: from now on lines are held for the reorder window only."""
        if not self.exact:
            return
        self.flush()
        self.exact = False

    def flush(self) -> None:
        """Release every pending line now, in timestamp order."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        out: list[LogLine] = []
        while self._heap:
            self._pop(out)
        self._fifo.clear()
        if out:
            self.released += len(out)
            self.emit(out)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
