"""The follow merge's watermark (`monitors.logs.merge`, watermark mode): a line goes out once every
other open stream has shown a newer line, or has been quiet for the grace while the line waited;
ended streams hold nothing; late lines are delivered at once, never dropped or repeated; no line
waits longer than the window."""

from __future__ import annotations

import asyncio
import itertools
import random
import socket
import time

from aiohttp import web

from monitors.connection import ClusterConfig
from monitors.kube import KubeClient
from monitors.logs.engine import LogEngine, LogOptions
from monitors.logs.lines import LogLine, format_ts
from monitors.logs.merge import Merger
from monitors.model import LiveModel
from monitors.parse import parse_pod
from tests.unit.test_log_merge import Clock, S, mk
from tests.unit.test_log_stream import BASE, KEY, NS, TK, Server, start_stream

MS = 1_000_000
GRACE = 0.035


def merger(out: list[LogLine], clock: Clock, **kw: object) -> Merger:
    return Merger(out.extend, exact=False, schedule=False, clock=clock, grace=GRACE, **kw)  # type: ignore[arg-type]


def texts(out: list[LogLine]) -> list[str]:
    return [ln.text for ln in out]


def test_out_of_order_arrival_across_streams_is_emitted_in_order() -> None:
    out: list[LogLine] = []
    clock = Clock()
    m = merger(out, clock)
    a, b = m.source(), m.source()
    m.add(a, [mk("a", 10 * S + 300 * MS)])
    assert m.tick() == 0  # b has shown nothing newer and was heard just now (it opened)
    clock.t += 0.01
    m.add(b, [mk("b", 10 * S + 100 * MS)])  # written before a's line, arrived after it
    assert m.tick() == 1  # a has shown a newer line: b's goes at once
    assert m.tick() == 0  # a's waits: b (behind it) was heard 0 ms ago
    clock.t += 0.02
    m.add(b, [mk("b", 10 * S + 350 * MS)])  # b passes a: a's line is safe at once
    assert m.tick() == 1
    assert texts(out) == ["b@10100000000", "a@10300000000"]
    clock.t += 0.01
    m.add(a, [mk("a", 10 * S + 360 * MS)])
    clock.t += 0.01
    m.add(b, [mk("b", 10 * S + 355 * MS)])  # a later arrival with an older timestamp still goes first
    clock.t += GRACE + 0.001
    assert m.tick() == 3
    assert [ln.ts for ln in out] == sorted(ln.ts for ln in out)
    assert m.pending == 0


def test_a_quiet_stream_releases_the_others_after_the_grace() -> None:
    out: list[LogLine] = []
    clock = Clock()
    m = merger(out, clock)
    a, quiet = m.source(), m.source()
    clock.t += 5.0  # the quiet stream has said nothing for seconds
    m.add(a, [mk("a", 10 * S)])
    # still, a's line waits the grace: a line the quiet stream wrote just before may be in flight
    clock.t += GRACE - 0.005
    assert m.tick() == 0
    clock.t += 0.006
    assert m.tick() == 1
    # a stream that keeps sending lines older than a's holds it until it catches up or goes quiet
    clock.t += 1.0
    m.add(a, [mk("a", 20 * S)])
    for k in range(5):
        clock.t += 0.02
        m.add(quiet, [mk("quiet", 19 * S + k * MS)])
        m.tick()
    assert texts(out)[-1] == f"quiet@{19 * S + 4 * MS}" and m.pending == 1  # its lines went; a's waits
    clock.t += GRACE - 0.005
    assert m.tick() == 0  # heard 30 ms ago: not quiet yet
    clock.t += 0.006
    assert m.tick() == 1 and out[-1].ts == 20 * S
    assert [ln.ts for ln in out] == sorted(ln.ts for ln in out)


def test_partial_bytes_keep_a_stream_from_being_quiet() -> None:
    out: list[LogLine] = []
    clock = Clock()
    m = merger(out, clock)
    a, b = m.source(), m.source()
    m.add(a, [mk("a", 10 * S)])
    for _ in range(3):  # b is in the middle of a long line
        clock.t += 0.03
        m.touch(b)
        assert m.tick() == 0
    clock.t += 0.01
    m.add(b, [mk("b", 9 * S)])  # the long line, written first
    assert m.tick() == 1 and texts(out) == ["b@9000000000"]
    clock.t += GRACE + 0.001
    assert m.tick() == 1 and texts(out)[-1] == "a@10000000000"


def test_an_ended_stream_holds_nothing() -> None:
    out: list[LogLine] = []
    clock = Clock()
    m = merger(out, clock)
    a, b = m.source(), m.source()
    m.add(a, [mk("a", 10 * S)])
    assert m.tick() == 0  # b is open: a's line waits for it
    m.finish(b)
    assert m.tick() == 1  # b ended: nothing holds a's line
    m.add(a, [mk("a", 11 * S)])
    assert m.tick() == 1  # the only open stream: its lines go at once
    m.reopen(b)  # b reads again (a reconnect of a follow): it holds once more
    m.add(a, [mk("a", 12 * S)])
    assert m.tick() == 0
    m.finish(a)
    m.finish(b)
    assert m.tick() == 1 and m.pending == 0


def test_a_late_line_is_delivered_at_once_and_its_rank_keeps_its_order() -> None:
    out: list[LogLine] = []
    clock = Clock()
    m = merger(out, clock)
    a, b = m.source(), m.source()
    m.add(a, [mk("a", 10 * S)])
    clock.t += GRACE + 0.001
    assert m.tick() == 1  # b was quiet: a's line went out
    # b's line written before a's arrives now (a connection slower than the grace, a reconnect's
    # backlog): older than what was printed, so nothing can hold it: it goes at once, not dropped
    m.add(b, [mk("b", 9 * S)])
    assert m.tick() == 1
    # b's next lines carry timestamps that go backwards (its node's clock was stepped back): they
    # still come out in the order b wrote them, after b's earlier line
    m.add(b, [mk("b", 8 * S, "b second"), mk("b", 8 * S + 1, "b third")])
    m.add(a, [mk("a", 7 * S, "a, stepped back too")])  # a late line of a: after a's own earlier line
    clock.t += GRACE + 0.001
    m.tick()
    assert texts(out) == ["a@10000000000", "b@9000000000", "b second", "b third", "a, stepped back too"]
    assert m.pending == 0


def test_a_skewed_stream_cannot_hold_the_others_longer_than_the_window() -> None:
    out: list[LogLine] = []
    released_at: dict[str, float] = {}
    clock = Clock()

    def emit(lines: list[LogLine]) -> None:
        out.extend(lines)
        for ln in lines:
            released_at[ln.text] = clock.t

    m = Merger(emit, exact=False, schedule=False, clock=clock, grace=GRACE, window=0.25)
    fast, skewed = m.source(), m.source()
    arrived = {}
    # the skewed node's clock is 10 s behind and it never stops: by the watermark alone, fast's
    # lines would wait for 10 s of skewed's lines
    for step in range(40):
        line = mk("fast", 1000 * S + step * 10 * MS)
        m.add(fast, [line])
        arrived[line.text] = clock.t
        m.add(skewed, [mk("skewed", 990 * S + step * 10 * MS)])
        clock.t += 0.01
        m.tick()
    waits = [released_at[t] - arrived[t] for t in arrived if t in released_at]
    assert len(waits) >= 10 and max(waits) <= 0.25 + 0.011, waits
    assert m.pending <= 27  # at most a window's worth of fast's lines is held


def test_held_lines_are_bounded() -> None:
    out: list[LogLine] = []
    clock = Clock()
    m = merger(out, clock, max_pending=100)
    a, _silent_but_open = m.source(), m.source()
    m.add(a, [mk("a", 10 * S + i) for i in range(250)])
    assert m.tick() == 150 and m.pending == 100  # the oldest go first, in order
    assert [ln.ts for ln in out] == [10 * S + i for i in range(150)]


def simulate(seed: int, *, jitter: float, sources: int = 8, lines: int = 150) -> tuple[list[LogLine], list[float]]:
    """Streams that write at random times; each connection delivers in order, each line `0..jitter`
    seconds after it was written. The clock moves in 1 ms steps, a pass after each. Returns the
    lines as released and how long each waited in the merge."""
    rng = random.Random(seed)
    clock = Clock()
    out: list[LogLine] = []
    waits: list[float] = []

    def emit(batch: list[LogLine]) -> None:
        for ln in batch:
            waits.append(clock.t - arrived[id(ln)])
        out.extend(batch)

    m = Merger(emit, exact=False, schedule=False, clock=clock, grace=GRACE, window=0.25)
    arrived: dict[int, float] = {}
    events: list[tuple[float, int, LogLine]] = []
    srcs = [m.source() for _ in range(sources)]
    for s in range(sources):
        t = deliver = 0.0
        for i in range(lines):
            t += rng.expovariate(30)
            deliver = max(deliver, t + rng.uniform(0, jitter))
            events.append((deliver, s, mk(f"r{s}", int((1000 + t) * S), f"r{s} {i}")))
    events.sort(key=lambda e: e[0])
    k = 0
    while k < len(events) or m.pending:
        clock.t += 0.001
        while k < len(events) and 100.0 + events[k][0] <= clock.t:
            _, s, line = events[k]
            arrived[id(line)] = clock.t
            m.add(srcs[s], [line])
            k += 1
        m.tick()
        if k == len(events):
            for src in srcs:
                m.finish(src)
    return out, waits


def test_random_arrivals_within_the_grace_come_out_in_order_once_each() -> None:
    for seed in range(3):
        out, waits = simulate(seed, jitter=0.025)
        assert len(out) == 8 * 150 and len({ln.text for ln in out}) == len(out)  # no gap, no duplicate
        assert [ln.ts for ln in out] == sorted(ln.ts for ln in out)
        waits.sort()
        # a line waits the grace at most, plus the delivery jitter of a stream behind it
        assert waits[-1] <= GRACE + 0.025 + 0.002, waits[-5:]
        assert waits[len(waits) // 2] <= GRACE + 0.002


def test_arrivals_later_than_the_grace_are_late_but_never_lost_and_ranks_keep_their_order() -> None:
    out, _ = simulate(11, jitter=0.2)
    assert len(out) == 8 * 150 and len({ln.text for ln in out}) == len(out)
    late = sum(1 for prev, ln in itertools.pairwise(out) if ln.ts < prev.ts)
    assert late > 0  # the jitter is far beyond the grace: some lines come late (else this proves nothing)
    for s in range(8):
        mine = [int(ln.text.split()[1]) for ln in out if ln.label == f"r{s}"]
        assert mine == list(range(150))


async def test_the_timer_releases_on_its_own_once_per_loop_iteration() -> None:
    batches: list[list[LogLine]] = []
    m = Merger(batches.append, exact=False, grace=0.03, clock=asyncio.get_running_loop().time)
    a, b = m.source(), m.source()
    m.add(a, [mk("a", 2)])
    m.add(b, [mk("b", 1)])  # both read in the same loop iteration: one pass, in order
    await asyncio.sleep(0)
    assert [[ln.label for ln in batch] for batch in batches] == [["b"]]  # a's newer line waits for b
    await asyncio.sleep(0.1)
    assert [[ln.ts for ln in batch] for batch in batches] == [[1], [2]]
    m.close()


async def test_a_stalled_process_does_not_take_unread_bytes_for_a_quiet_stream() -> None:
    """b's older line reaches its socket while the process is stalled (a GC pause, a busy CPU) for
    longer than the grace: it is read before the grace is judged, so it still comes first."""
    loop = asyncio.get_running_loop()
    out: list[LogLine] = []
    m = Merger(out.extend, exact=False, grace=0.03, clock=loop.time)
    a, b = m.source(), m.source()
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)

    async def follow_b() -> None:
        async for raw in reader:
            m.add(b, [mk("b", int(raw))])

    task = loop.create_task(follow_b())
    await asyncio.sleep(0.01)
    m.add(a, [mk("a", 2)])
    theirs.sendall(b"1\n")  # written before a's line, arrives after it
    time.sleep(0.1)  # the stall: nothing of the loop runs
    await asyncio.sleep(0.15)
    assert [ln.label for ln in out] == ["b", "a"]
    task.cancel()
    writer.close()
    theirs.close()
    m.close()


# -- the engine: streams that read history first hold their place while following -------------------


def two_pods() -> LiveModel:
    model = LiveModel()
    for i in range(2):
        rec = parse_pod({
            "metadata": {"name": f"job-worker-{i}", "namespace": NS, "uid": f"uid-{i}", "labels": {
                TK + "job-name": "job", TK + "replica-type": "worker", TK + "replica-index": str(i),
                TK + "operator-name": "pytorchjob-controller"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "x"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}]},
        })
        model.apply_pods([(rec.key, rec)])
    model.flush()
    return model


async def test_engine_follow_orders_lines_of_two_pods_that_arrive_out_of_order() -> None:
    """worker-1's line is written first and reaches the engine 15 ms after worker-0's newer one."""

    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        resp = await start_stream(request)
        if request.query.get("follow") != "true":
            await resp.write_eof()  # no history
            return resp
        pod = request.match_info["pod"]
        await asyncio.sleep(0.2)  # both follows are open
        if pod == "job-worker-0":
            await resp.write(f"{format_ts(BASE + 2 * MS)} newer\n".encode())
        else:
            await asyncio.sleep(0.015)
            await resp.write(f"{format_ts(BASE + 1 * MS)} older\n".encode())
        await asyncio.sleep(30)
        return resp

    async with Server(handler) as srv:
        client = KubeClient(ClusterConfig(server=srv.url, context="t", namespace=NS, user="u"))
        eng = LogEngine(client, KEY, two_pods(), options=LogOptions(follow=True, grace=0.08))
        got: list[LogLine] = []
        eng.subscribe(got.extend)
        await eng.start()
        try:
            for _ in range(200):
                if len(got) >= 2:
                    break
                await asyncio.sleep(0.01)
        finally:
            await eng.stop()
            await client.close()
    assert [ln.text for ln in got] == ["older", "newer"]
