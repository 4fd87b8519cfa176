"""The training operator's job status rule (`UpdateJobStatus`, release-1.9) is one rule with each
kind's names (`simcluster.operators.job_status`): the cases upstream tells apart, for PyTorchJob,
TFJob and XGBoostJob, judged from their replicas' counts as the reconciler hands them over."""

from __future__ import annotations

from typing import Any

import pytest

from simcluster.operators import FRAMEWORKS
from simcluster.operators.job_status import STATUS_RULES
from simcluster.operators.kubeflow import Framework, Replica
from simcluster.operators.pytorch import PyTorch
from simcluster.operators.tensorflow import TensorFlow
from simcluster.operators.xgboost import XGBoost


class Events:
    """What the controller is asked to record about the job (the framework's `ctrl.record`)."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, str, str]] = []

    def record(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.recorded.append((type_, reason, message))


def judge(fw: Framework, replicas: dict[str, tuple[int, str]], counts: dict[str, tuple[int, int, int]], *,
          spec: dict[str, Any] | None = None, conditions: list[dict[str, Any]] | None = None,
          pods: list[dict[str, Any]] | None = None) -> tuple[dict[str, tuple[str, str, str]], list[Any], bool]:
    """Conditions (type -> status, reason, message), events and whether completionTime was set, after
    the rule judged replicas {type: (wanted, restartPolicy)} with counts {type: (active, succeeded, failed)}."""
    status: dict[str, Any] = {
        "conditions": conditions or [],
        "replicaStatuses": {t: {"active": a, "succeeded": s, "failed": f} for t, (a, s, f) in counts.items()},
    }
    job = {"metadata": {"name": "j", "namespace": "ns"}, "spec": spec or {}}
    events = Events()
    reps = {t: Replica(t, n, policy, {}) for t, (n, policy) in replicas.items()}
    fw.update_status(events, job, reps, status, pods or [])  # (a recorder stands in for the controller)
    conds = {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}
    return conds, events.recorded, "completionTime" in status


def test_every_kind_is_a_row_of_the_one_rule():
    assert set(STATUS_RULES) == {fw.kind for fw in FRAMEWORKS}
    assert [fw.__name__ for fw in FRAMEWORKS if "update_status" in vars(fw)] == []
    assert {kind: rules.leaders for kind, rules in STATUS_RULES.items()} == {
        "PyTorchJob": ("Master",), "TFJob": ("Chief", "Master"), "XGBoostJob": ("Master",)}


@pytest.mark.parametrize(("fw", "message"), [
    (PyTorch(), "PyTorchJob j is running."),
    (TensorFlow(), "TFJob ns/j is running."),
    (XGBoost(), "XGBoostJob j is running."),
])
def test_a_running_master_sets_running_in_the_kinds_words(fw, message):
    conds, events, done = judge(fw, {"Master": (1, "Never"), "Worker": (2, "Never")},
                                {"Master": (1, 0, 0), "Worker": (0, 0, 0)})
    assert conds == {"Running": ("True", f"{fw.kind}Running", message)}
    assert events == [] and not done


@pytest.mark.parametrize(("fw", "message", "stops"), [
    (PyTorch(), "PyTorchJob j is successfully completed.", True),
    (TensorFlow(), "TFJob ns/j successfully completed.", False),
    (XGBoost(), "XGBoostJob j is successfully completed.", True),
])
def test_the_masters_success_is_the_jobs_and_only_tfjob_goes_on_judging(fw, message, stops):
    conds, events, done = judge(fw, {"Master": (1, "Never"), "Worker": (2, "Never")},
                                {"Master": (0, 1, 0), "Worker": (1, 0, 1)})
    assert conds["Succeeded"] == ("True", f"{fw.kind}Succeeded", message) and done
    assert events[0] == ("Normal", f"{fw.kind}Succeeded", message)
    # a worker failed after the master succeeded: TFJob judges it (Worker comes after Master)
    assert ("Failed" in conds) is not stops


def test_a_tfjob_chief_leads_as_a_master_does():
    conds, _, _ = judge(TensorFlow(), {"Chief": (1, "Never"), "Worker": (2, "Never")},
                        {"Chief": (0, 1, 0), "Worker": (2, 0, 0)})
    assert conds["Succeeded"] == ("True", "TFJobSucceeded", "TFJob ns/j successfully completed.")


def test_without_a_master_the_workers_decide_in_their_own_words():
    replicas = {"Worker": (2, "OnFailure")}
    conds, _, _ = judge(PyTorch(), replicas, {"Worker": (1, 1, 0)})
    assert conds == {"Running": ("True", "PyTorchJobRunning", "PyTorchJob ns/j is running.")}
    conds, _, done = judge(PyTorch(), replicas, {"Worker": (0, 2, 0)})
    assert conds == {"Succeeded": ("True", "PyTorchJobSucceeded", "PyTorchJob ns/j successfully completed.")} and done


def test_an_elastic_pytorchjob_is_done_when_one_worker_is():
    replicas, counts = {"Worker": (3, "OnFailure")}, {"Worker": (2, 1, 0)}
    conds, _, _ = judge(PyTorch(), replicas, counts, spec={"elasticPolicy": {"minReplicas": 1}})
    assert conds["Succeeded"][0] == "True"
    conds, _, _ = judge(PyTorch(), replicas, counts)
    assert "Succeeded" not in conds


def test_a_tfjob_without_chief_is_done_when_worker_0_is_unless_all_workers_must_be():
    worker0 = {"metadata": {"labels": {"training.kubeflow.org/replica-type": "worker",
                                       "training.kubeflow.org/replica-index": "0"}},
               "status": {"phase": "Succeeded"}}
    replicas, counts = {"Worker": (2, "Never")}, {"Worker": (1, 1, 0)}
    conds, _, _ = judge(TensorFlow(), replicas, counts, pods=[worker0])
    assert conds["Succeeded"] == ("True", "TFJobSucceeded", "TFJob ns/j successfully completed.")
    conds, _, _ = judge(TensorFlow(), replicas, counts, pods=[worker0], spec={"successPolicy": "AllWorkers"})
    assert conds == {"Running": ("True", "TFJobRunning", "TFJob ns/j is running.")}


@pytest.mark.parametrize(("fw", "policy", "outcome"), [
    (PyTorch(), "OnFailure", "Restarting"),
    (PyTorch(), "ExitCode", "Restarting"),
    (PyTorch(), "Never", "Failed"),
    (XGBoost(), "ExitCode", "Restarting"),
    (XGBoost(), "OnFailure", "Failed"),
    (TensorFlow(), "OnFailure", "Failed"),
])
def test_failed_replicas_restart_or_fail_the_job_by_each_kinds_policy(fw, policy, outcome):
    conds, events, done = judge(fw, {"Master": (1, policy), "Worker": (2, policy)},
                                {"Master": (1, 0, 0), "Worker": (1, 0, 1)})
    verb = {"TFJob": "has failed", "PyTorchJob": "is failed", "XGBoostJob": "is failed"}[fw.kind]
    name = "ns/j" if fw.kind == "TFJob" else "j"
    message = (f"{fw.kind} {name} is restarting because 1 Worker replica(s) failed." if outcome == "Restarting"
               else f"{fw.kind} {name} {verb} because 1 Worker replica(s) failed.")
    assert conds[outcome] == ("True", f"{fw.kind}{outcome}", message)
    assert events == [("Warning" if outcome == "Restarting" else "Normal", f"{fw.kind}{outcome}", message)]
    assert done is (outcome == "Failed")


def test_pytorchjob_counts_failures_only_while_short_of_replicas():
    # one worker failed, but two run: as many as wanted (a replaced pod already runs again)
    conds, events, _ = judge(PyTorch(), {"Worker": (2, "Never")}, {"Worker": (2, 0, 1)})
    assert "Failed" not in conds and events == []
    conds, _, _ = judge(XGBoost(), {"Master": (1, "Never"), "Worker": (2, "Never")},
                        {"Master": (1, 0, 0), "Worker": (2, 0, 1)})
    assert conds["Failed"][0] == "True"


def test_a_tfjob_keeps_the_restarting_condition_the_replaced_pod_set():
    restarting = {"type": "Restarting", "status": "True", "reason": "TFJobRestarting",
                  "message": "job j is restarting because Worker replica(s) failed."}
    replicas, counts = {"Worker": (2, "OnFailure")}, {"Worker": (1, 0, 1)}
    conds, events, done = judge(TensorFlow(), replicas, counts, conditions=[restarting])
    assert conds == {"Restarting": ("True", "TFJobRestarting", restarting["message"])}
    assert events == [] and not done
