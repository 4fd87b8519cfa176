"""The shared test helpers: the three pollers of tests/waiting.py and the fault checks of
tests/faults.py (a helper that cannot fail would make every test using it prove nothing)."""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from simcluster.apiserver.faults import RequestRecord
from simcluster.cluster import SimCluster
from tests.faults import answered, assert_consumed, assert_fired
from tests.waiting import pilot_wait, until, wait_for


def test_wait_for_returns_the_first_true_value() -> None:
    n = itertools.count()
    assert wait_for(lambda: [i] if (i := next(n)) >= 3 else [], 5, "three", interval=0.001) == [3]


def test_wait_for_says_what_it_waited_for_and_the_last_value() -> None:
    start = time.monotonic()
    with pytest.raises(AssertionError) as err:
        wait_for(lambda: [], 0.1, "the pods")
    assert time.monotonic() - start >= 0.1
    assert str(err.value) == "timed out after 0.1s waiting for the pods (last: [])"
    with pytest.raises(AssertionError) as err:
        wait_for(lambda: False, 0.05, "the flag", detail=lambda: "screen:\nempty")
    assert str(err.value) == "timed out after 0.05s waiting for the flag; screen:\nempty"  # no "last: False"
    with pytest.raises(AssertionError) as err:
        wait_for(lambda: "", 0.01)
    assert str(err.value) == "timed out after 0.01s waiting for condition (last: '')"


def test_wait_for_ignores_only_the_exceptions_it_is_told_to() -> None:
    calls = itertools.count()

    def flaky() -> str:
        if next(calls) < 3:
            raise KeyError("not yet")
        return "there"

    assert wait_for(flaky, 5, ignore=lambda e: isinstance(e, KeyError), interval=0.001) == "there"
    with pytest.raises(ValueError):
        wait_for(lambda: int("x"), 5, ignore=lambda e: isinstance(e, KeyError))
    with pytest.raises(AssertionError, match=r"\(last: KeyError\('gone'\)\)"):
        wait_for(lambda: {}["gone"], 0.05, ignore=lambda e: isinstance(e, KeyError))


async def test_until_lets_the_loop_run_and_awaits_async_predicates() -> None:
    done = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, done.set)
    assert await until(done.is_set, 5, "the event") is True

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert await until(answer, 1) == 42
    with pytest.raises(AssertionError, match=r"^timed out after 0.05s waiting for nothing$"):
        await until(lambda: None, 0.05, "nothing")


class FakePilot:
    def __init__(self) -> None:
        self.pauses: list[float | None] = []

    async def pause(self, delay: float | None = None) -> None:
        self.pauses.append(delay)
        await asyncio.sleep(0)


async def test_pilot_wait_pauses_the_pilot_between_checks() -> None:
    pilot, n = FakePilot(), itertools.count()
    assert await pilot_wait(pilot, lambda: next(n) == 2, 5, "two", interval=0.02) is True
    assert pilot.pauses == [0.02, 0.02]
    pilot = FakePilot()
    assert await pilot_wait(pilot, lambda: "shown", settle=True) == "shown"
    assert pilot.pauses == [None]  # settled once more: what the condition saw is on screen
    with pytest.raises(AssertionError, match=r"^timed out after 0.05s waiting for the screen$"):
        await pilot_wait(FakePilot(), lambda: False, 0.05, "the screen")


def test_fault_checks_fail_when_the_fault_did_not_fire(tmp_path: Path) -> None:
    sim = SimCluster(workdir=tmp_path, components=())
    t0 = time.time()

    def served(path: str, status: int, method: str = "GET") -> None:
        sim.requests.add(RequestRecord(time.time(), method, path, "", "get", "admin", status))

    sim.faults.fail_next(r"/pods/a/log$", 503, count=2)
    served("/api/v1/namespaces/n/pods/a/log", 200)  # the fault was injected, but did not fire
    with pytest.raises(AssertionError, match="the injected 503 on '/pods/a/log\\$' never fired"):
        assert_fired(sim, r"/pods/a/log$", 503, since=t0)
    with pytest.raises(AssertionError, match=r"did not all fire: \[\('FailRule', 2\)\] left"):
        assert_consumed(sim, r"/pods/a/log$")
    # it fires (the server takes the rule as it answers) and is used up
    for _ in range(2):
        assert sim.faults.take_failure("GET", "/api/v1/namespaces/n/pods/a/log") is not None
        served("/api/v1/namespaces/n/pods/a/log", 503)
    assert_consumed(sim, r"/pods/a/log$")
    assert len(assert_fired(sim, r"/pods/a/log$", 503, since=t0, method="get", times=2)) == 2
    with pytest.raises(AssertionError, match="fired 2 times, not 1"):
        assert_fired(sim, r"/pods/a/log$", 503, since=t0, times=1)
    with pytest.raises(AssertionError, match="never fired"):
        assert_fired(sim, r"/pods/a/log$", 503, since=t0, method="POST")
    assert [r.status for r in answered(sim, r"/pods/a/log$", since=t0)] == [200, 503, 503]
    # a stall rule is checked the same way
    sim.faults.stall_next(r"/pods/b/log$", after_bytes=10)
    with pytest.raises(AssertionError, match=r"StallRule"):
        assert_consumed(sim, r"/pods/b/log$")
    assert sim.faults.take_stall("/api/v1/namespaces/n/pods/b/log") is not None
    assert_consumed(sim, r"/pods/b/log$")


def test_unique_sleep_is_a_sleep_no_other_run_has() -> None:
    import subprocess

    from tests.waiting import processes_matching, unique_sleep

    lines = {unique_sleep(3) for _ in range(50)}
    assert len(lines) == 50 and all(ln.startswith("sleep 3.") for ln in lines)
    line = unique_sleep(30)
    proc = subprocess.Popen(line.split())  # GNU sleep takes the fraction
    try:
        assert wait_for(lambda: processes_matching(line), 20, "the sleep") == [proc.pid]
    finally:
        proc.kill()
        proc.wait()


def test_no_test_looks_for_processes_by_a_name_another_run_could_share() -> None:
    """`processes_matching` scans the whole machine: a literal marker ("sleep 3173") matches the same
    test of another worker or another checkout's run; the marker must be made per run."""
    import ast

    root = Path(__file__).resolve().parents[1]
    shared = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) ==
                    "processes_matching" and node.args and isinstance(node.args[0], ast.Constant)):
                shared.append(f"{path.relative_to(root)}:{node.lineno}: {node.args[0].value!r}")
    assert shared == []
