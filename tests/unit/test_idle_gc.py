"""The dashboard's full garbage collections at moments without input (`tui.idle_gc`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tui.idle_gc import DUE_AFTER, FORCED_AFTER, NEVER, QUIET_S, IdleCollector


@pytest.fixture(autouse=True)
def gc_as_it_was() -> Iterator[None]:
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        (gc.enable if enabled else gc.disable)()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def middle_collections(n: int) -> None:
    """n collections of the middle generation (each counts toward the next full one, as CPython's own do)."""
    for _ in range(n):
        gc.collect(1)


def test_cpython_makes_no_full_collection_once_taken_over_and_again_when_given_back() -> None:
    c = IdleCollector()
    c.take_over()
    assert gc.get_threshold()[2] == NEVER
    full: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.callbacks.append(seen)
    try:
        junk = [[[]] for _ in range(200_000)]  # (containers enough for ~280 young collections)
        del junk
    finally:
        gc.callbacks.remove(seen)
    assert not full  # CPython's own thresholds would have made one (every 10 middle collections)
    assert gc.get_count()[2] >= DUE_AFTER
    c.give_back()
    assert gc.get_threshold()[2] == DUE_AFTER and not c.active


def test_a_due_collection_waits_for_a_quiet_moment() -> None:
    clock = Clock()
    c = IdleCollector(clock)
    c.take_over()
    gc.collect()
    middle_collections(DUE_AFTER - 1)
    clock.now += 10 * QUIET_S
    assert not c.check()  # quiet, but not due yet
    middle_collections(1)
    c.input_seen()
    assert not c.check()  # due, but a key just came
    clock.now += QUIET_S / 2
    assert not c.check()
    clock.now += QUIET_S
    assert c.check() and c.collections == 1
    assert gc.get_count()[2] == 0  # (a full collection was made)
    assert not c.check()


def test_keys_without_pause_still_get_a_full_collection_when_it_is_overdue() -> None:
    clock = Clock()
    c = IdleCollector(clock)
    c.take_over()
    gc.collect()
    middle_collections(FORCED_AFTER - 1)
    c.input_seen()
    assert not c.check()
    middle_collections(1)
    c.input_seen()
    assert c.check() and c.collections == 1


def test_nothing_is_collected_before_it_takes_over_or_while_the_collector_is_off() -> None:
    clock = Clock()
    c = IdleCollector(clock)
    middle_collections(FORCED_AFTER)
    clock.now += 10 * QUIET_S
    assert not c.check()
    c.take_over()
    gc.disable()
    assert not c.check()
    gc.enable()
    assert c.check()
