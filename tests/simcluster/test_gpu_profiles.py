"""The GPU profile grammar of simcluster's DCGM exporter annotations."""

from __future__ import annotations

import pytest

from simcluster.gpu.profiles import ProfileError, parse_profile, parse_xid, seed_of, xid_value


def test_constant() -> None:
    p = parse_profile("85")
    assert [p.value(t) for t in (0, 10, 1e6)] == [85, 85, 85]
    assert parse_profile(" 72.5 ").value(3) == 72.5


def test_noisy_is_bounded_deterministic_and_moves() -> None:
    p = parse_profile("noisy:70:10")
    values = [p.value(t / 4, seed=7) for t in range(400)]
    assert all(60 <= v <= 80 for v in values)
    assert max(values) - min(values) > 8  # it really wobbles
    assert abs(sum(values) / len(values) - 70) < 3
    assert values == [parse_profile("noisy:70:10").value(t / 4, seed=7) for t in range(400)]
    assert values != [p.value(t / 4, seed=8) for t in range(400)]
    assert parse_profile("noisy:5:20").value(0.0) >= 0  # never negative


def test_decay_and_ramp_are_linear_then_flat() -> None:
    d = parse_profile("decay:90:0:120")
    assert d.value(0) == 90
    assert d.value(60) == pytest.approx(45)
    assert d.value(120) == 0 and d.value(500) == 0
    assert d.value(-5) == 90  # before start counts as start
    r = parse_profile("ramp:10:90:40")
    assert [r.value(t) for t in (0, 20, 40, 41)] == [10, 50, 90, 90]


def test_stall_and_cycle() -> None:
    s = parse_profile("stall:80:60")
    assert s.value(0) == 80 and s.value(59.9) == 80
    assert s.value(60) == 0 and s.value(1000) == 0
    c = parse_profile("cycle:95:20:10")
    assert [c.value(t) for t in (0, 4.9, 5, 9.9, 10, 14)] == [95, 95, 20, 20, 95, 95]
    c2 = parse_profile("cycle:100:0:10:0.2")
    assert [c2.value(t) for t in (1, 2, 3)] == [100, 0, 0]


def test_per_gpu_parts_last_repeats() -> None:
    p = parse_profile("85, 85,stall:50:10")
    assert [p.value(0, gpu=i) for i in range(5)] == [85, 85, 50, 50, 50]
    assert [p.value(20, gpu=i) for i in range(4)] == [85, 85, 0, 0]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("  ", "empty"),
        ("abc", "not a number"),
        ("-5", "non-negative"),
        ("nan", "non-negative"),
        ("wobble:1:2", "unknown profile kind"),
        ("noisy:70", "takes 2 numbers"),
        ("decay:90:0", "takes 3 numbers"),
        ("decay:90:0:0", "SECONDS must be > 0"),
        ("stall:80:x", "not a number"),
        ("cycle:1:2:0", "PERIOD must be > 0"),
        ("cycle:1:2:3:1.5", "DUTY"),
        ("85,,85", "empty profile part"),
    ],
)
def test_bad_profiles(text: str, fragment: str) -> None:
    with pytest.raises(ProfileError) as exc:
        parse_profile(text)
    assert fragment in str(exc.value)


def test_xid() -> None:
    assert parse_xid("79") == (79, 0.0)
    assert parse_xid("48@30") == (48, 30.0)
    assert xid_value("48@30", 29) == 0 and xid_value("48@30", 30) == 48
    for bad in ("x", "-1", "79@", "79@-3"):
        with pytest.raises(ProfileError):
            parse_xid(bad)


def test_seed_is_stable() -> None:
    assert seed_of("a", "b") == seed_of("a", "b") != seed_of("a", "c")
    assert seed_of("uid-1", "main") == 3946486253  # the same in every process (crc32, not hash())
