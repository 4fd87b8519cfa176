"""What happened to a finished workload whose pods are gone (`monitors.diagnostics.postmortem`)."""

from __future__ import annotations

from monitors.diagnostics.postmortem import first_failure_of, what_happened
from monitors.flight_recorder import RecordedFailure, Recording
from monitors.model_views import ConditionView, WorkloadView
from monitors.records import EventRec

NOW = 10_000.0


def workload(status: str, message: str) -> WorkloadView:
    return WorkloadView(
        namespace="ns", name="job", project="p", kind="PyTorchJob", framework="pytorch", status=status, reason="",
        interactive=False, ranks_ready=0, ranks_total=0, gpus_requested=0, gpus_allocated=0, gpu_util=None,
        created=NOW - 600, user="", command="", labels=(), ranks=(), first_failure=None,
        conditions=(ConditionView(status, "True", f"PyTorchJob{status}", message, NOW - 60),))


def event(kind: str, obj: str, reason: str, message: str) -> EventRec:
    return EventRec("ns", f"{obj}.{reason}", kind, obj, "", "Normal", reason, message, 1, NOW - 60)


DELETED = [event("PyTorchJob", "job", "SuccessfulDeletePod", f"Deleted pod: job-{p}")
           for p in ("master-0", "worker-0", "worker-1")]
KILLED = [event("Pod", f"job-{p}", "Killing", "Stopping container pytorch") for p in ("master-0", "worker-0")]


def test_a_failed_job_without_a_recording_says_what_is_left() -> None:
    story = what_happened(workload("Failed", "reached the backoff limit"), DELETED + KILLED, None, NOW)
    assert story[0].startswith("pytorchjob/job failed at ") and story[0].endswith("(60s ago): reached the backoff limit")
    assert story[1].startswith("the operator deleted 3 pods at ") and "job-worker-1" in story[1]
    assert story[2].startswith("already stopped before the clean-up (no Killing event): job-worker-1 ")
    assert story[3].startswith("the logs went with the pods: no ranks process was watching")


def test_a_recording_names_the_first_failure_and_where_its_lines_are() -> None:
    rec = Recording("ns", "PyTorchJob", "job", "u", (
        RecordedFailure("worker-1", "worker", 2, "job-worker-1", "n1", "pytorch", 3, "Error", NOW - 70,
                        lines=("a", "b"), recorded_at=NOW - 69, source="log"),
        RecordedFailure("worker-0", "worker", 1, "job-worker-0", "n1", "pytorch", 137, "Error", NOW - 65,
                        recorded_at=NOW - 64)))
    story = what_happened(workload("Failed", "x"), DELETED, rec, NOW)
    assert any(s.startswith("worker-1 (pod job-worker-1 on n1) exited 3 (Error)") and s.endswith("the first failure")
               for s in story), story
    assert story[-1].startswith("the logs went with the pods; ranks recorded the last 2 lines of worker-1")
    first = first_failure_of(workload("Failed", "x"), rec)
    assert first is not None and first.pod == "job-worker-1" and first.recorded_at == NOW - 69


def test_a_succeeded_job_is_not_told_as_a_failure_and_pods_still_there_tell_nothing() -> None:
    story = what_happened(workload("Succeeded", "done"), DELETED, None, NOW)
    assert story[0].startswith("pytorchjob/job succeeded at ") and story[-1] == "its logs went with the pods"
    assert not any("fail" in s or "watching" in s for s in story[1:]), story
    assert what_happened(workload("Running", ""), DELETED, None, NOW) == []
