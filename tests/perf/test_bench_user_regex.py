"""#25 benchmark: the worst regex a user can give (`(a*)*b` and kin) on long runs of `a`, as
`ranks logs --grep`, the dashboard's `/` filters and `progress_patterns` run it (RE2, through
`monitors.user_regex`), beside Python's `re` (what ran before: it backtracks, doubling with each `a`).

Goals: the worst case on the longest line ranks keeps (1 MiB) <= 50 ms; the cost on ordinary
lines (a typical `--grep` over 200,000 log lines) measured beside `re`'s.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable

from monitors.logs import LineFilter, LogLine
from monitors.user_regex import compile_user
from tests.perf.results import record

EVIL = (r"(a*)*b", r"(a|aa)*c", r"(a+)+$x", r"(.*a){25}b")
LONGEST = 1 << 20  # characters: a longer line is cut (monitors.logs)
GOAL_MS = 50.0


def best(fn: Callable[[], object], repeat: int = 3) -> float:
    out = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t0)
    return out


def test_the_worst_regex_on_long_runs_of_a() -> None:
    # Python's re: seconds double with every `a` (measured up to 24, the rest extrapolated)
    backtracking = {n: best(lambda n=n: re.compile(r"(a*)*b").search("a" * n), 1) for n in (16, 18, 20, 22, 24)}
    growth = (backtracking[24] / backtracking[16]) ** (1 / 8)
    at_40 = backtracking[24] * growth ** 16
    print(f"re, (a*)*b: {', '.join(f'{n} a: {s * 1000:.1f} ms' for n, s in backtracking.items())}; "
          f"x{growth:.2f} per a; 40 a: ~{at_40 / 3600:.0f} h")
    worst = 0.0
    for pattern in EVIL:
        rx = compile_user(pattern)
        for n in (1_000, 10_000, 100_000, LONGEST):
            took = best(lambda rx=rx, n=n: rx.search("a" * n))
            worst = max(worst, took)
            print(f"RE2 {pattern:>12} on {n:>9,} a: {took * 1000:8.3f} ms")
    record("the worst user regex ((a*)*b and kin) on a 1 MiB line of a", f"<= {GOAL_MS:.0f} ms", round(worst * 1000, 2),
           "ms", met=worst * 1000 <= GOAL_MS, baseline="Python re, (a*)*b on 24 a",
           baseline_measured=round(backtracking[24] * 1000, 1),
           note=f"re doubles with each a (x{growth:.2f}): 40 a would take ~{at_40 / 3600:.0f} h")
    assert worst * 1000 <= GOAL_MS


def test_an_ordinary_grep_over_200000_lines() -> None:
    lines = [LogLine(0, (f"[worker-{i % 8}] step {i} loss={1 / (i + 1):.4f} lr=3e-4 tokens/s=12345"
                         + (" NCCL WARN timeout" if i % 97 == 0 else "")).encode()) for i in range(200_000)]
    for ln in lines:
        _ = ln.text  # (the display-safe text is made once per line, before any filter)
    out = {}
    for name, pattern in (("literal", "NCCL WARN"), ("regex", r"loss=0\.0+[1-3]\d")):
        ours = LineFilter.build(include=pattern)
        theirs = re.compile(pattern)
        t_ours = best(lambda f=ours: sum(1 for ln in lines if f.matches(ln)))
        t_re = best(lambda r=theirs: sum(1 for ln in lines if r.search(ln.text)))
        out[name] = (t_ours, t_re)
        print(f"{name}: ranks {t_ours * 1e6 / len(lines):.2f} us/line, re {t_re * 1e6 / len(lines):.2f} us/line")
        record(f"--grep over 200,000 ordinary lines ({name} pattern)", "a figure", round(t_ours * 1e6 / len(lines), 2),
               "us/line", met=None, baseline="Python re", baseline_measured=round(t_re * 1e6 / len(lines), 2))
