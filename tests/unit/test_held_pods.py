"""The dashboard's pods wait for the workloads' first LISTs (`monitors.held_pods`): what is held is
applied in its order once every workload kind is in (or cannot be), and the model built that way
is the one built as the rows and the workloads came."""

from __future__ import annotations

import asyncio
from typing import Any

from monitors.held_pods import HeldPods
from monitors.informer import InformerState
from monitors.model import LiveModel
from monitors.pod_rows import pods_from_table
from tests.unit.test_pod_rows import COLUMNS, job, row


class Kind:
    """What `HeldPods` reads of an informer: its first LIST's event and its state."""

    def __init__(self) -> None:
        self.synced = asyncio.Event()
        self.state = InformerState.SYNCING


def test_pods_are_held_until_every_workload_kind_is_listed_then_applied_in_order():
    a, b = Kind(), Kind()
    held = HeldPods([a, b])
    applied: list[Any] = []
    assert held.hold(applied.append, 1) and held.hold(applied.append, 2)
    assert not held.release() and applied == []
    a.synced.set()
    assert not held.release() and applied == []
    b.synced.set()
    assert held.release() and applied == [1, 2]
    assert not held.holding and not held.hold(applied.append, 3)  # released: applied at once by the caller
    assert applied == [1, 2]


def test_a_kind_that_will_not_list_soon_holds_nothing():
    for state in (InformerState.RETRYING, InformerState.FORBIDDEN, InformerState.UNAUTHORIZED):
        k = Kind()
        held = HeldPods([k])
        applied: list[Any] = []
        assert held.hold(applied.append, 1)
        k.state = state
        assert held.release() and applied == [1]
    k = Kind()
    held = HeldPods([k])
    k.state = InformerState.RETRYING
    assert not held.hold(applied.append, 2)  # (not held: the caller applies it)
    assert HeldPods([]).hold(applied.append, 3) is False


def test_forced_release_applies_what_is_held():
    held = HeldPods([Kind()])
    applied: list[Any] = []
    held.hold(applied.append, 1)
    assert held.release(force=True) and applied == [1] and not held.holding


def _views(m: LiveModel) -> tuple[Any, ...]:
    m.flush()
    return m.workloads, m.projects, m.nodes


def test_rows_after_their_workloads_build_the_model_rows_before_them_build():
    """The held order (workloads, then their rows) against the order the LISTs may come in (rows
    first, each regrouped when its workload arrives): the same views, rank by rank."""
    rows = [row(f"llama-worker-{i}", "1/1", "Running", node=f"n{i % 3}") for i in range(6)]
    rows += [row("llama-master-0", "1/1", "Running"), row("bert-launcher", "0/1", "Pending", node="<none>"),
             row("bert-worker-0", "1/1", "Running"), row("bert-worker-1", "0/1", "ContainerCreating"),
             row("stray-pod", "1/1", "Running"), row("llama-worker-9", "1/1", "Running"),
             row("tiny-0-abcde", "0/1", "Completed", completed="Succeeded")]
    pods = pods_from_table({"kind": "Table", "columnDefinitions": COLUMNS, "rows": rows}, "team")
    jobs = [job("PyTorchJob", "llama", ("Master", 1, 1), ("Worker", 6, 8), uid="u1"),
            job("MPIJob", "bert", ("Launcher", 1, 0), ("Worker", 2, 4), uid="u2"),
            job("Job", "tiny", ("Job", 1, 0), uid="u3")]
    held_order = LiveModel(now=lambda: 1000.0)
    held_order.apply_jobs([(j.key, j) for j in jobs])
    held_order.apply_pods([(p.key, p) for p in pods])
    as_came = LiveModel(now=lambda: 1000.0)
    as_came.apply_pods([(p.key, p) for p in pods])
    as_came.flush()
    as_came.apply_jobs([(j.key, j) for j in jobs])
    got, want = _views(held_order), _views(as_came)
    assert set(got[0]) == {("team", "PyTorchJob", "llama"), ("team", "MPIJob", "bert"), ("team", "Job", "tiny")}
    assert len(got[0][("team", "PyTorchJob", "llama")].ranks) == 7  # (worker-9 is beyond the spec: no rank)
    assert got == want
    assert held_order.pods == as_came.pods and held_order.pod_workload == as_came.pod_workload


def test_a_row_is_one_record_the_models_and_listed_again_it_is_no_change():
    """The rows informer's cache keeps the live model's record of each row (claimed by its workload),
    not a second one; a relist of the same rows tells no change, a row that changed is one."""
    from monitors.kube import Kind as ApiKind
    from monitors.parse import parse_pod
    from monitors.row_informer import PodRowsInformer

    told: list[Any] = []

    async def no_namespaces() -> None:
        return None

    inf = PodRowsInformer(None, ApiKind("", "v1", "pods"), parse_pod, lambda r: r.key,  # type: ignore[arg-type]
                          lambda _i, changes: told.append(changes), namespaces=no_namespaces)

    def listed(status: str) -> dict[tuple[str, str], Any]:
        rows = [row("llama-worker-0", "1/1", "Running"), row("llama-worker-1", "1/1", status),
                row("stray", "1/1", "Running")]
        return {p.key: p for p in pods_from_table({"kind": "Table", "columnDefinitions": COLUMNS, "rows": rows}, "team")}

    m = LiveModel(now=lambda: 1000.0)
    pt = job("PyTorchJob", "llama", ("Worker", 2, 8))
    m.apply_jobs([(pt.key, pt)])
    inf._install(listed("Running"), "1")
    inf.applied(m.apply_pods, m.pods, [(c.key, c.new) for c in told[-1]])
    claimed = ("team", "llama-worker-0")
    assert m.pods[claimed].owner is not None and inf.cache[claimed] is m.pods[claimed]
    assert inf.cache[("team", "stray")] is m.pods[("team", "stray")]  # (claimed by none: the row itself)

    inf._install(listed("Running"), "2")  # listed again (a relist after 410): the same rows
    assert len(told) == 1  # (no change: nothing told)
    inf._install(listed("Error"), "3")
    assert [(c.type, c.key) for c in told[-1]] == [("changed", ("team", "llama-worker-1"))]
    assert told[-1][0].new.reason == "Error"
