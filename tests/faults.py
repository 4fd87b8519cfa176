"""Checks that a fault a test injected through simcluster (`sim.faults.fail_next`, `stall_next`,
`latency`) really happened: a test whose fault never fires proves nothing.

- `assert_fired(cluster, path_regex, status)`: simcluster's request log (`sim.requests`) shows
  requests whose path matches answered with `status` (a number of them with `times=`).
- `assert_consumed(cluster, path_regex)`: no fail or stall rule for `path_regex` is left, i.e. it
  fired as many times as it was told to (a rule is dropped when its count runs out).

`cluster` is a `SimCluster` (on the test's loop: `simcluster_async`) or a `ThreadedSimCluster`
(`simcluster`, `sim_in_thread`), whose state is then read on its own thread.
"""

from __future__ import annotations

import re
from typing import Any

from simcluster.apiserver.faults import RequestRecord
from simcluster.cluster import SimCluster, ThreadedSimCluster

__all__ = ["answered", "assert_consumed", "assert_fired"]


def _read(cluster: SimCluster | ThreadedSimCluster, fn: Any, *args: Any) -> Any:
    if isinstance(cluster, ThreadedSimCluster):
        return cluster.call(fn, *args)
    return fn(*args)


def _sim(cluster: SimCluster | ThreadedSimCluster) -> SimCluster:
    return cluster.sim if isinstance(cluster, ThreadedSimCluster) else cluster


def answered(cluster: SimCluster | ThreadedSimCluster, path_regex: str, *, since: float = 0.0,
             method: str | None = None) -> list[RequestRecord]:
    """The requests since `since` (time.time()) whose path matches `path_regex` (searched, as
    `fail_next` does), oldest first."""
    pattern = re.compile(path_regex)
    records = _read(cluster, _sim(cluster).requests.since, since)
    return [r for r in records if pattern.search(r.path) and (method is None or r.method == method.upper())]


def assert_fired(cluster: SimCluster | ThreadedSimCluster, path_regex: str, status: int, *, since: float = 0.0,
                 method: str | None = None, times: int | None = None) -> list[RequestRecord]:
    """At least one request (exactly `times`, when given) matching `path_regex` since `since` was
    answered with `status`; returns those requests."""
    seen = answered(cluster, path_regex, since=since, method=method)
    hits = [r for r in seen if r.status == status]
    summary = [(r.method, r.path, r.status) for r in seen][-20:]
    assert hits, f"the injected {status} on {path_regex!r} never fired; matching requests: {summary}"
    if times is not None:
        assert len(hits) == times, f"the injected {status} on {path_regex!r} fired {len(hits)} times, " \
                                   f"not {times}; matching requests: {summary}"
    return hits


def assert_consumed(cluster: SimCluster | ThreadedSimCluster, path_regex: str) -> None:
    """Every fail, stall, answer and delay rule injected for `path_regex` has fired as many times as it was told."""
    faults = _sim(cluster).faults

    def left() -> list[tuple[str, int]]:
        rules = [*faults.fail_rules, *faults.stall_rules, *faults.answer_rules, *faults.delay_rules]
        return [(type(r).__name__, r.remaining) for r in rules if r.pattern.pattern == path_regex]

    remaining = _read(cluster, left)
    assert not remaining, f"injected faults on {path_regex!r} did not all fire: {remaining} left"
