"""Ages as the dashboard shows them, and when each one next changes its text (what the app's age
ticker sleeps until): `monitors.humanize.age(..., live=True)`, `age_step`, `age_changes_in`."""

from __future__ import annotations

import random

import pytest

from monitors.humanize import age, age_changes_in, age_step, plural

MIN, HOUR, DAY, YEAR = 60, 3600, 86400, 365 * 86400


@pytest.mark.parametrize(("seconds", "kubectl", "live"), [
    (0, "0s", "0s"), (62, "62s", "62s"), (119.9, "119s", "119s"), (120, "2m", "2m"), (150, "2m30s", "2m"),
    (5 * MIN + 59, "5m59s", "5m"), (6 * MIN, "6m", "6m"), (599, "9m59s", "9m"), (10 * MIN, "10m", "10m"),
    (3 * HOUR + 4 * MIN + 5, "3h4m", "3h4m"), (2 * DAY + HOUR, "2d1h", "2d1h"), (740 * DAY, "2y10d", "2y10d"),
])
def test_live_ages_are_kubectl_ages_without_the_seconds_of_2_to_10_minutes(seconds: float, kubectl: str,
                                                                          live: str) -> None:
    assert age(seconds) == kubectl
    assert age(seconds, live=True) == live


def test_next_change_is_exact_for_every_second_of_the_first_nine_hours() -> None:
    """Against a scan: from each whole second (and a quarter past it), the text changes exactly
    `age_changes_in` seconds later and not a second before."""
    end = 9 * HOUR
    texts = [age(s, live=True) for s in range(end + 1)]
    next_change = [0] * (end + 1)
    for s in range(end - 1, -1, -1):
        next_change[s] = s + 1 if texts[s + 1] != texts[s] else next_change[s + 1]
    for s in range(end - 2 * HOUR):  # every next change of these lies within the scan
        assert age_changes_in(s) == next_change[s] - s, s
        assert age_changes_in(s + 0.25) == next_change[s] - s - 0.25, s


@pytest.mark.parametrize("band", [(9 * HOUR, 8 * DAY), (8 * DAY, 2 * YEAR), (2 * YEAR, 8 * YEAR),
                                  (8 * YEAR, 30 * YEAR)])
def test_next_change_of_hours_days_and_years(band: tuple[int, int]) -> None:
    rng = random.Random(band[0])
    for _ in range(2000):
        s = rng.randrange(*band) + 0.25
        d = age_changes_in(s)
        assert 0 < d <= age_step(s)
        assert age(s + d - 0.5, live=True) == age(s, live=True), s  # the same text until then
        assert age(s + d, live=True) != age(s, live=True), s  # another one from then


def test_ages_change_every_second_under_2_minutes_then_at_most_once_a_minute() -> None:
    assert [age_changes_in(s) for s in (0, 0.5, 61, 119, 119.5)] == [1, 0.5, 1, 1, 0.5]
    for s in range(120, 3 * DAY, 7):  # past 2 minutes: a change, then a minute or more until the next
        first = s + age_changes_in(s)
        assert age_changes_in(first) >= MIN, s
    assert age_changes_in(5 * MIN + 59.5) == 0.5  # "5m" turns "6m" when the sixth minute starts
    assert age_changes_in(6 * MIN) == MIN


def test_an_age_in_the_future_shows_0s_until_it_is_a_second_old() -> None:
    assert age(-4, live=True) == "0s"
    assert age_changes_in(-4) == 5


def test_plural() -> None:
    assert [plural(n, "line") for n in (0, 1, 2, 1234)] == ["0 lines", "1 line", "2 lines", "1,234 lines"]
    assert plural(1, "GPU") == "1 GPU" and plural(3, "GPU") == "3 GPUs"
    assert plural(2, "replica", "replicas") == "2 replicas"
