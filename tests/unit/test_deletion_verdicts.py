"""#24 item 4a: a container its pod's deletion stopped is no failure (`records.stopped_by_deletion`),
in the model's first failure, the rank views and `why`; one that had failed before is one still."""

from __future__ import annotations

from typing import Any

from monitors.diagnostics.why import explain
from monitors.model import LiveModel
from monitors.parse import parse_pod
from monitors.records import Exit, stopped_by_deletion
from tests.kubeflow_objects import job, pod
from tests.unit.test_model import load

ASKED = "2026-11-01T00:05:00Z"  # deletionTimestamp 00:05:30 less a grace of 30 s


def deleted(p: dict[str, Any], *, at: str = "2026-11-01T00:05:30Z", grace: int = 30) -> dict[str, Any]:
    p["metadata"].update(deletionTimestamp=at, deletionGracePeriodSeconds=grace)
    return p


def ended(p: dict[str, Any], code: int, reason: str, finished: str) -> dict[str, Any]:
    p["status"]["phase"] = "Failed"
    p["status"]["containerStatuses"][0]["state"] = {
        "terminated": {"exitCode": code, "reason": reason, "finishedAt": finished}}
    return p


def worker(i: int = 0, kind: str = "MPIJob", name: str = "hvd") -> dict[str, Any]:
    return pod(kind, name, "a", "Worker", i)


def test_when_the_deletion_was_asked_is_the_timestamp_less_the_grace() -> None:
    rec = parse_pod(deleted(worker()))
    assert rec.deleting and rec.delete_asked == parse_pod(deleted(worker(), at=ASKED, grace=1)).delete_asked + 1
    assert parse_pod(worker()).delete_asked is None
    # the kubelet's final delete (grace 0) moves the timestamp to that moment: the ask is unknown
    assert parse_pod(deleted(worker(), grace=0)).delete_asked is None


def test_stopped_by_the_deletion_or_failed_before_it() -> None:
    def verdict(code: int, finished: str, reason: str = "Error", succeeded_at: float | None = None, **kw: Any) -> bool:
        p = parse_pod(ended(deleted(worker(), **kw), code, reason, finished))
        return stopped_by_deletion(p, p.exits[0], succeeded_at)

    assert verdict(137, "2026-11-01T00:05:30Z")  # SIGKILL when the grace ended
    assert verdict(143, "2026-11-01T00:05:00Z")  # SIGTERM, the second it was asked
    assert verdict(1, "2026-11-01T00:05:01Z")  # torchrun ends with 1 on SIGTERM: a second later
    assert not verdict(1, "2026-11-01T00:05:00Z")  # the same second, not a signal's: a failure of its own
    assert not verdict(3, "2026-11-01T00:04:59Z")  # failed, then the operator deleted it
    assert not verdict(137, "2026-11-01T00:04:50Z")  # killed before anyone deleted it
    assert not verdict(137, "2026-11-01T00:05:30Z", reason="OOMKilled")
    # after its job succeeded, whatever the clean-up stopped is the clean-up's
    assert verdict(1, "2026-11-01T00:05:00Z", succeeded_at=parse_pod(worker()).created or 0.0)
    p = parse_pod(ended(worker(), 137, "Error", "2026-11-01T00:05:30Z"))  # not being deleted: a failure
    assert not stopped_by_deletion(p, p.exits[0])
    unknown = parse_pod(ended(deleted(worker(), grace=0), 137, "Error", "2026-11-01T00:05:30Z"))
    assert stopped_by_deletion(unknown, unknown.exits[0])  # the ask unknown: by the signal's code
    assert not stopped_by_deletion(unknown, Exit("main", 2, "Error", unknown.exits[0].finished_at))


def test_an_mpijob_whose_workers_the_clean_up_killed_has_no_failure() -> None:
    m = LiveModel()
    mpi = job("MPIJob", "hvd", "a", {"Launcher": 1, "Worker": 2}, conditions=[("Succeeded", "")])
    launcher = pod("MPIJob", "hvd", "a", "Launcher", None, gpus=0, name="hvd-launcher-x7k2p",
                   phase="Succeeded", terminated=(0, "Completed"))
    load(m, [mpi], [launcher, ended(deleted(worker(0)), 137, "Error", "2026-11-01T00:05:30Z"),
                    ended(deleted(worker(1)), 137, "Error", "2026-11-01T00:05:31Z")])
    w = m.workloads[("a", "MPIJob", "hvd")]
    assert w.status == "Succeeded" and w.first_failure is None
    assert [r.stopped for r in w.ranks] == [False, True, True]
    d = explain(m, w.key)
    assert d.ok and d.summary == "nothing wrong; it finished", d


def test_a_failure_before_the_clean_up_is_still_the_first_failure() -> None:
    m = LiveModel()
    pt = job("PyTorchJob", "pt", "a", {"Master": 1, "Worker": 2}, conditions=[("Failed", "")])
    master = ended(deleted(pod("PyTorchJob", "pt", "a", "Master", 0)), 137, "Error", "2026-11-01T00:05:30Z")
    failing = ended(deleted(worker(1, "PyTorchJob", "pt")), 3, "Error", "2026-11-01T00:04:58Z")
    load(m, [pt], [master, failing, deleted(worker(0, "PyTorchJob", "pt"))])
    w = m.workloads[("a", "PyTorchJob", "pt")]
    assert w.first_failure is not None and (w.first_failure.label, w.first_failure.exit_code) == ("worker-1", 3)
    d = explain(m, w.key)
    assert "worker-1 failed first: exit code 3" in d.findings[0].text and "2 ranks" not in d.findings[0].text
