"""The k-way merge: exact order for history, the watermark while following (its rules in
test_log_watermark.py), collapse."""

from __future__ import annotations

import asyncio
import random

from monitors.logs.lines import LogLine, Origin
from monitors.logs.merge import Merger

S = 1_000_000_000


def mk(label: str, ts: int, text: str | None = None) -> LogLine:
    return LogLine(ts, (text or f"{label}@{ts}").encode(), Origin(label=label))


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_exact_merge_orders_everything_and_waits_for_every_source() -> None:
    out: list[LogLine] = []
    m = Merger(out.extend, exact=True, schedule=False)
    rng = random.Random(7)
    streams = {}
    for name in ("a", "b", "c"):
        ts = sorted(rng.sample(range(0, 10_000), 200))
        streams[name] = [mk(name, t) for t in ts]
    sources = {name: m.source() for name in streams}
    # deliver in uneven batches; nothing may come out while a live source has nothing pending
    m.add(sources["a"], streams["a"][:150])
    assert out == []
    m.add(sources["b"], streams["b"][:10])
    assert out == []
    cursors = {"a": 150, "b": 10, "c": 0}
    while any(cursors[n] < len(streams[n]) for n in streams):
        name = rng.choice([n for n in streams if cursors[n] < len(streams[n])])
        k = rng.randint(1, 40)
        m.add(sources[name], streams[name][cursors[name]:cursors[name] + k])
        cursors[name] += k
        if cursors[name] >= len(streams[name]):
            m.finish(sources[name])
    assert len(out) == 600
    assert [ln.ts for ln in out] == sorted(ln.ts for ln in out)


def test_exact_backpressure_flags_a_full_source() -> None:
    m = Merger(lambda _: None, exact=True, schedule=False, high=10)
    a, b = m.source(), m.source()
    m.add(a, [mk("a", t) for t in range(12)])
    assert a.full and m.pending == 12  # b has nothing yet: a must wait
    m.add(b, [mk("b", 100)])
    assert not a.full and m.pending == 1  # a's lines all came before b's first: released


def test_window_mode_silent_source_does_not_block_and_skewed_source_does_not_starve() -> None:
    out: list[LogLine] = []
    clock = Clock()
    m = Merger(out.extend, exact=False, schedule=False, window=0.25, clock=clock)
    fast, skewed, _silent = m.source(), m.source(), m.source()
    # the skewed node's clock is 10 s behind: its lines always sort first, and it never stops
    for step in range(20):
        m.add(fast, [mk("fast", 1000 * S + step * 50_000_000)])
        m.add(skewed, [mk("skewed", 990 * S + step * 50_000_000)])
        clock.t += 0.05
        m.tick()
    labels = [ln.label for ln in out]
    assert labels.count("fast") >= 14, labels  # released within the window despite the skewed source
    assert m.pending <= 12


def test_late_line_after_its_window_is_still_emitted() -> None:
    out: list[LogLine] = []
    clock = Clock()
    m = Merger(out.extend, exact=False, schedule=False, window=0.25, clock=clock)
    a, b = m.source(), m.source()
    m.add(a, [mk("a", 5 * S)])
    clock.t += 0.3
    m.tick()
    m.add(b, [mk("b", 4 * S)])  # much older, arrives after a was printed
    clock.t += 0.3
    m.tick()
    assert [ln.label for ln in out] == ["a", "b"]


def test_collapse_identical_lines_of_several_ranks() -> None:
    out: list[LogLine] = []
    clock = Clock()
    m = Merger(out.extend, exact=False, schedule=False, window=0.25, clock=clock, collapse=True)
    srcs = [m.source() for _ in range(4)]
    for i, src in enumerate(srcs):
        m.add(src, [mk(f"worker-{i}", 10 * S + i * 10_000_000, "NCCL INFO ring 0 ready")])
    m.add(srcs[0], [mk("worker-0", 10 * S + 50_000_000, "epoch 1")])
    m.add(srcs[3], [mk("worker-3", 20 * S, "NCCL INFO ring 0 ready")])  # same text, far later: not merged
    clock.t += 0.3
    m.tick()
    assert [(ln.text, ln.count) for ln in out] == [
        ("NCCL INFO ring 0 ready", 4), ("epoch 1", 1), ("NCCL INFO ring 0 ready", 1)]
    assert out[0].ranks == ("worker-0", "worker-1", "worker-2", "worker-3")
    assert m.pending == 0


async def test_window_timer_releases_on_its_own() -> None:
    out: list[LogLine] = []
    m = Merger(out.extend, exact=False, window=0.05, clock=asyncio.get_running_loop().time)
    src = m.source()
    m.add(src, [mk("a", 1), mk("a", 2)])
    assert out == []
    await asyncio.sleep(0.15)
    assert [ln.ts for ln in out] == [1, 2]
    m.close()


def test_flush_releases_everything_in_order() -> None:
    out: list[LogLine] = []
    m = Merger(out.extend, exact=False, schedule=False)
    a, b = m.source(), m.source()
    m.add(a, [mk("a", 3), mk("a", 5)])
    m.add(b, [mk("b", 1), mk("b", 4)])
    m.flush()
    assert [ln.ts for ln in out] == [1, 3, 4, 5]
