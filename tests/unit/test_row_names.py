"""Which Table-row pods a workload may claim by its name (`monitors.row_names`): the same pods as a hint
per name prefix found (`pod_rows.name_prefixes`), for a pointer a pod instead of five set members."""

from __future__ import annotations

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from monitors.model import LiveModel
from monitors.pod_rows import name_prefixes, pods_from_table
from monitors.row_names import RowNames
from tests.unit.test_pod_rows import COLUMNS, job, row

SEGMENT = st.sampled_from(["a", "b", "ab", "worker", "0", "1", "", "x-"])
NAME = st.lists(SEGMENT, min_size=1, max_size=5).map("-".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["n1", "n2"]), NAME, st.booleans()), max_size=40), NAME)
def test_a_workload_may_claim_exactly_the_rows_a_prefix_of_their_name_names(ops, workload):
    names = RowNames()
    rows: set[tuple[str, str]] = set()
    for ns, name, add in ops:
        if add and (ns, name) not in rows:
            names.add(ns, name)
            rows.add((ns, name))
        elif not add:
            names.discard(ns, name)
            rows.discard((ns, name))
    for ns in ("n1", "n2"):
        want = sorted(k for k in rows if k[0] == ns and workload in name_prefixes(k[1]))
        assert names.claimable(ns, workload) == want


def test_names_longer_than_kubernetes_allows_are_claimed_by_none():
    names = RowNames()
    long = "a-" + "b" * 260
    names.add("n", long)
    assert names.claimable("n", "a") == [] and name_prefixes(long) == ()
    names.discard("n", long)  # (never added: nothing to remove)


def test_the_model_keeps_no_hint_per_name_prefix_of_a_row():
    """5,000 rows of 100 workloads: ~1,060 bytes a row in the live model (each row under each of its
    name's prefixes, as before: ~1,420)."""
    jobs = [job("PyTorchJob", f"llama3-70b-pretrain-{w:04d}", ("Master", 1, 1), ("Worker", 49, 8), uid=f"u{w}")
            for w in range(100)]
    rows = [row(f"llama3-70b-pretrain-{w:04d}-{r}", "1/1", "Running")
            for w in range(100) for r in ["master-0", *(f"worker-{i}" for i in range(49))]]
    pods = pods_from_table({"kind": "Table", "columnDefinitions": COLUMNS, "rows": rows}, "team")
    m = LiveModel(now=lambda: 1000.0)
    m.apply_jobs([(j.key, j) for j in jobs])
    m.flush()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        m.apply_pods([(p.key, p) for p in pods])
        per_row = (tracemalloc.get_traced_memory()[0] - before) / len(pods)
    finally:
        tracemalloc.stop()
    assert per_row < 1250, per_row
    # and a workload arriving after its rows still claims them (found by name)
    late = LiveModel(now=lambda: 1000.0)
    late.apply_pods([(p.key, p) for p in pods])
    late.flush()
    late.apply_jobs([(j.key, j) for j in jobs])
    late.flush()
    m.flush()
    assert late.workloads == m.workloads and len(m.workloads) == 100


@settings(max_examples=300, deadline=None)
@given(NAME)
def test_name_prefixes_made_one_at_a_time_are_every_prefix_before_a_dash_longest_first(name):
    parts = name.split("-")
    assert name_prefixes(name) == tuple("-".join(parts[:i]) for i in range(len(parts) - 1, 0, -1))
