"""A workload's status: the last True condition, except that a terminal one (Failed, Succeeded)
wins over Running, Created and Suspended whatever the order of the list (issue #11, item 2)."""

from __future__ import annotations

import pytest

from monitors.model import LiveModel
from monitors.parse import parse_job
from tests.kubeflow_objects import job, pod
from tests.unit.test_model import load


def with_conditions(kind: str, name: str, conds: list[tuple[str, str]]) -> dict:
    obj = job(kind, name, "a", {"Launcher": 1, "Worker": 2} if kind == "MPIJob" else {"Master": 1, "Worker": 1})
    obj["status"]["conditions"] = [
        {"type": t, "status": s, "reason": f"{kind}{t}", "message": f"{kind} a/{name} is {t.lower()}.",
         "lastTransitionTime": "2026-11-01T00:00:00Z"} for t, s in conds]
    return obj


@pytest.mark.parametrize(("conds", "status"), [
    # the converted job of the issue: Failed=True, then a Running=True appended after it
    ([("Created", "True"), ("Failed", "True"), ("Running", "True")], "Failed"),
    ([("Created", "True"), ("Succeeded", "True"), ("Running", "True")], "Succeeded"),
    ([("Failed", "True"), ("Suspended", "True")], "Failed"),
    ([("Created", "True"), ("Running", "False"), ("Failed", "True")], "Failed"),
    ([("Created", "True"), ("Running", "True"), ("Failed", "False")], "Pending"),  # no pods: not running yet
    ([("Created", "True"), ("Suspended", "True")], "Suspended"),
])
def test_terminal_condition_wins_whatever_its_place(conds, status):
    m = LiveModel()
    load(m, [with_conditions("MPIJob", "t", conds)])
    w = m.workloads[("a", "MPIJob", "t")]
    assert w.status == status, (w.status, w.reason)
    if status == "Failed":
        assert w.reason == "MPIJob a/t is failed."
    assert m.projects["a"].pending == (1 if status == "Pending" else 0)


def test_failed_job_whose_pods_were_deleted_is_failed_not_pending():
    m = LiveModel()
    conds = [("Created", "True"), ("Failed", "True"), ("Running", "True")]
    load(m, [with_conditions("PyTorchJob", "gone", conds)])
    w = m.workloads[("a", "PyTorchJob", "gone")]
    assert (w.status, w.reason) == ("Failed", "PyTorchJob a/gone is failed.")
    # with its pods still there (terminated), the same
    m2 = LiveModel()
    load(m2, [with_conditions("PyTorchJob", "kept", conds)],
         [pod("PyTorchJob", "kept", "a", "Master", 0, phase="Failed", terminated=(127, "Error"), ready=False)])
    assert m2.workloads[("a", "PyTorchJob", "kept")].status == "Failed"


def test_batch_and_jobset_terminal_names():
    m = LiveModel()
    obj = with_conditions("PyTorchJob", "c", [("Complete", "True"), ("Running", "True")])
    rec = parse_job("PyTorchJob", "kubeflow.org", "v1")(obj)
    m.apply_jobs([(rec.key, rec)])
    m.flush()
    assert m.workloads[("a", "PyTorchJob", "c")].status == "Succeeded"
