"""The k-way merge of every rank's lines into one stream ordered by timestamp.

Two modes:

- **exact** (history: non-follow reads that end): a line is released only when every source
  that is still reading has at least one line pending (or has finished), so the merged order
  is exactly the timestamp order. Memory stays bounded by backpressure: a source with `high`
  pending lines waits (`await source.wait_space()`) until the merge has taken them.
- **watermark** (following): sources are live and may be silent for hours. A pending line goes
  out as soon as no open source can still send an older one, that is when every other open
  source

  * has shown a line at least as new (a source's lines come in order), or
  * has been quiet for `grace` since its last byte, *and* the line itself has waited `grace`
    since it arrived. The second half matters: a line of a quiet source written just before
    this one may still be on its way on another connection, so a quiet source only releases
    lines that have waited for it.

  `grace` (default 35 ms) must exceed the delivery jitter between two streams: simcluster's
  kubelet flushes each container's log every 25 ms, so lines of two ranks written together
  reach us up to ~25 ms apart (a real kubelet wakes on each write: less); 10 ms more absorb
  scheduling. It is also what a line costs over `kubectl logs -f` when some rank wrote nothing
  newer meanwhile. On the event loop, releasing by the grace waits for the loop to read what
  reached the sockets first (`_due`): a stalled process (a GC pause, a busy CPU) does not take
  unread bytes for a quiet source.

  Sources that ended (`finish`) hold nothing back. Two caps bound the wait and the memory: no
  line is held longer than `window` (default 250 ms, counted from its arrival, not from its
  timestamp, so a node whose clock is behind cannot stall the merge: its lines sort first, the
  others go out at the cap), and no more than `max_pending` lines are held.

  A late line (older than lines already released: a reconnect's backlog, a new pod's first
  lines, a connection slower than the grace) is not dropped: nothing can hold it, so it goes out
  at once. A source's lines sort by the running maximum of its timestamps, so they always come
  out in the order they were read, whatever their timestamps say. Nothing is released twice.

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

DEFAULT_GRACE = 0.035
DEFAULT_MAX_PENDING = 32_768


class Source:
    """One stream's handle in the merge."""

    __slots__ = ("_space", "heard", "high", "last_ts", "low", "open", "pending")

    def __init__(self, high: int = 4096, heard: float = 0.0) -> None:
        self.pending = 0
        self.open = True
        self.high = high
        self.low = high // 2
        self.last_ts = 0  # the newest timestamp added (ns): its lines sort by this running maximum
        self.heard = heard  # when its last byte arrived (the merger's clock)
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


def _last_ts(src: Source) -> int:
    return src.last_ts


class Merger:
    def __init__(
        self,
        emit: Callable[[list[LogLine]], None],
        *,
        window: float = 0.25,
        grace: float = DEFAULT_GRACE,
        collapse: bool = False,
        exact: bool = True,
        clock: Callable[[], float] = time.monotonic,
        schedule: bool = True,
        high: int = 4096,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        self.emit = emit
        self.window = window  # the longest a line is held for another source (watermark mode)
        self.grace = grace
        self.collapse = collapse
        self.exact = exact
        self.clock = clock
        self.schedule = schedule  # run release passes on the event loop (off in unit tests: call tick())
        self.high = high
        self.max_pending = max_pending
        self._heap: list[tuple[int, int, LogLine, Source]] = []
        self._arrivals: deque[tuple[float, int]] = deque()  # (arrival, newest key) of each batch
        self._open: set[Source] = set()
        self._seq = 0
        self._starved = 0  # open sources with nothing pending (exact mode blocks on them)
        self._by_content: dict[bytes, list[tuple[LogLine, Source]]] = {}
        self._soon: asyncio.Handle | None = None  # a release pass at the end of this loop iteration
        self._timer: asyncio.TimerHandle | None = None  # the next pass when nothing else arrives
        self._closed = False
        self.released = 0

    def set_collapse(self, on: bool) -> None:
        """Collapse identical lines of several sources from now on (off: forget the lines kept to compare)."""
        self.collapse = on
        if not on:
            self._by_content.clear()

    # -- sources -------------------------------------------------------------------------------
    def source(self) -> Source:
        src = Source(self.high, self.clock())
        self._starved += 1
        self._open.add(src)
        return src

    def finish(self, src: Source) -> None:
        """The source adds no more lines (its read ended): it holds nothing back any more."""
        if not src.open:
            return
        src.open = False
        self._open.discard(src)
        if src.pending == 0:
            self._starved -= 1
        if self.exact:
            self._release_exact()
        else:
            self._wake()

    def reopen(self, src: Source) -> None:
        """A finished source reads again (the merge waits for it once more)."""
        if src.open:
            return
        src.open = True
        src.heard = self.clock()
        self._open.add(src)
        if src.pending == 0:
            self._starved += 1

    def touch(self, src: Source) -> None:
        """Bytes of the source arrived without a whole line yet: it is not quiet."""
        src.heard = self.clock()

    @property
    def pending(self) -> int:
        return len(self._heap)

    # -- input ---------------------------------------------------------------------------------
    def add(self, src: Source, lines: list[LogLine]) -> None:
        if not lines:
            return
        now = self.clock()
        src.heard = now
        heap = self._heap
        push = heapq.heappush
        seq = self._seq
        key = src.last_ts
        if src.pending == 0 and src.open:
            self._starved -= 1
        src.pending += len(lines)
        by_content = self._by_content if self.collapse else None
        for line in lines:
            if line.ts > key:
                key = line.ts
            line.arrival = now
            push(heap, (key, seq, line, src))
            seq += 1
            if by_content is not None:
                group = by_content.get(line.raw)
                if group is None:
                    by_content[line.raw] = [(line, src)]
                else:
                    group.append((line, src))
        self._seq = seq
        src.last_ts = key
        if self.exact:
            self._release_exact()
        else:
            self._arrivals.append((now, key))
            self._wake()

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

    def _emit(self, out: list[LogLine]) -> None:
        if out:
            self.released += len(out)
            self.emit(out)

    def _release_exact(self) -> None:
        out: list[LogLine] = []
        heap = self._heap
        while heap and self._starved == 0:
            self._pop(out)
        self._emit(out)

    def _release_due(self, now: float, settled: float, out: list[LogLine]) -> float | None:
        """Watermark mode: release every line no open source can still precede (see the module
        docstring), judging quiet sources as of `settled` (every byte that reached the sockets
        before it has been added); returns when the next line becomes due, or None."""
        heap = self._heap
        arrivals = self._arrivals
        held_since = now - self.window
        cutoff = -1  # lines up to this key have been held for `window`: they go whatever holds them
        while arrivals and arrivals[0][0] <= held_since:
            cutoff = max(cutoff, arrivals.popleft()[1])
        behind = sorted(self._open, key=_last_ts)  # holders of a line: a prefix of this list
        n = 0
        latest = float("-inf")  # the newest byte of the sources behind the line at the top
        due: float | None = None
        while heap:
            key, _, line, _ = heap[0]
            while n < len(behind) and behind[n].last_ts < key:
                latest = max(latest, behind[n].heard)
                n += 1
            if n and key > cutoff and len(heap) <= self.max_pending and line.arrival >= 0:
                ready = max(line.arrival, latest) + self.grace
                if ready > settled:
                    due = ready
                    break
            self._pop(out)
        if not heap:
            arrivals.clear()
            return None
        while arrivals and arrivals[0][1] < heap[0][0]:
            arrivals.popleft()  # its lines are out already
        if arrivals:
            capped = arrivals[0][0] + self.window
            due = capped if due is None else min(due, capped)
        return due

    def tick(self, now: float | None = None) -> int:
        """Watermark mode: release what is due at `now` (unit tests drive the merge with this);
        returns the number of lines released."""
        now = self.clock() if now is None else now
        return self._pass(now, now)

    def _pass(self, now: float, settled: float) -> int:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.exact or self._closed:
            return 0
        out: list[LogLine] = []
        due = self._release_due(now, settled, out)
        self._emit(out)
        if self.schedule and due is not None:
            self._timer = asyncio.get_running_loop().call_later(max(0.0, due - now), self._due, due)
        return len(out)

    # On the event loop: a pass after each loop turn that added lines releases what no source can
    # precede any more and what was held for `window`. When a line's grace is over (`_due`), the
    # pass that releases it runs two turns of the loop later, so that bytes that reached the
    # sockets before then are read and added first, and judges quiet sources as of that time.
    def _wake(self) -> None:
        if self.schedule and self._soon is None:
            self._soon = asyncio.get_running_loop().call_soon(self._added)

    def _added(self) -> None:
        self._soon = None
        self._pass(self.clock(), float("-inf"))

    def _due(self, due: float) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._settled, due)

    def _settled(self, due: float) -> None:
        self._pass(self.clock(), due)

    def set_watermark_mode(self) -> None:
        """History is done: from now on lines are released by the watermark."""
        if not self.exact:
            return
        self.flush()
        self.exact = False

    def flush(self) -> None:
        """Release every pending line now, in timestamp order."""
        self._cancel()
        out: list[LogLine] = []
        while self._heap:
            self._pop(out)
        self._arrivals.clear()
        self._emit(out)

    def _cancel(self) -> None:
        for handle in (self._soon, self._timer):
            if handle is not None:
                handle.cancel()
        self._soon = self._timer = None

    def close(self) -> None:
        """No more passes (lines still held stay unreleased; `flush` first to deliver them)."""
        self._closed = True
        self._cancel()
