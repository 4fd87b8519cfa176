"""The Kubeflow Training Operator's job status rule (`UpdateJobStatus` of release-1.9), written once.

PyTorchJob, TFJob and XGBoostJob (upstream's PaddleJob and JAXJob too, not emulated here) judge
their replicas by one rule with other names: each kind's row of `STATUS_RULES` holds its messages
and switches, and its `Framework.workers_done_early` the one test of its own. Per replica type, in
name order (Go ranges over a map; TFJob's fixed order, Chief Evaluator Master PS Worker, is the same):

- When the job has a leader (PyTorchJob, XGBoostJob: Master; TFJob: Chief or Master), the leader
  decides: one running sets Running, all succeeded sets Succeeded (PyTorchJob and XGBoostJob stop
  judging there, TFJob goes on to the other types).
- Without one the workers decide (XGBoostJob has none: its Master is required): all succeeded, or
  the kind's early success (PyTorchJob: an elastic job with one worker succeeded; TFJob: worker 0
  completed, unless successPolicy is AllWorkers), sets Succeeded, else one running sets Running.
- Failed replicas restart the job (Restarting) when the kind says so, else fail it: PyTorchJob
  under any restartPolicy but Never, counting failures only while fewer replicas run or succeeded
  than wanted; XGBoostJob under ExitCode; TFJob when a Restarting condition (set as the failed pod
  was replaced) is already there, which is kept.

Reasons are `<Kind>Running`, `<Kind>Succeeded`, `<Kind>Restarting`, `<Kind>Failed`; Succeeded and
Failed set completionTime. An event is recorded when a condition changes (Warning for
Restarting, Normal otherwise, as upstream). Upstream's Running conditions that XGBoostJob sets just
before Succeeded and on failures are not emulated (Succeeded and Restarting replace them at once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .common import get_condition, now, set_condition

if TYPE_CHECKING:
    from .kubeflow import Replica

Record = Callable[[str, str, str], None]  # (event type, reason, message): an event about the job


@dataclass(frozen=True)
class StatusRules:
    """One kind's names and switches of the rule (see the module docstring). Messages are formats
    of `kind`, `name`, `ns` and, for failures, `failed` (how many) and `rtype` (the replica type)."""

    leaders: tuple[str, ...]  # the replica types whose end is the job's, when the job has one
    running: str  # Running, set by a leader
    succeeded: str  # Succeeded, set by the leader
    failed: str  # Failed, set by failed replicas
    workers_running: str = ""  # Running, set by the workers when there is no leader ("": they never decide)
    workers_succeeded: str = ""  # Succeeded, set by the workers
    restarting: str = ""  # Restarting, set by failed replicas the kind restarts
    restarts_under: tuple[str, ...] = ()  # the restart policies under which failed replicas restart the job
    keeps_restarting: bool = False  # failed replicas restart the job while a Restarting condition is there
    stop_at_leader_success: bool = True  # once the leader succeeded no other replica type is judged
    failures_only_while_short: bool = False  # failures count while fewer run or succeeded than wanted


STATUS_RULES: dict[str, StatusRules] = {
    "PyTorchJob": StatusRules(
        leaders=("Master",),
        running="{kind} {name} is running.",
        succeeded="{kind} {name} is successfully completed.",
        failed="{kind} {name} is failed because {failed} {rtype} replica(s) failed.",
        workers_running="{kind} {ns}/{name} is running.",
        workers_succeeded="{kind} {ns}/{name} successfully completed.",
        restarting="{kind} {name} is restarting because {failed} {rtype} replica(s) failed.",
        restarts_under=("Always", "ExitCode", "OnFailure"),
        failures_only_while_short=True,
    ),
    "TFJob": StatusRules(
        leaders=("Chief", "Master"),
        running="{kind} {ns}/{name} is running.",
        succeeded="{kind} {ns}/{name} successfully completed.",
        failed="{kind} {ns}/{name} has failed because {failed} {rtype} replica(s) failed.",
        workers_running="{kind} {ns}/{name} is running.",
        workers_succeeded="{kind} {ns}/{name} successfully completed.",
        keeps_restarting=True,
        stop_at_leader_success=False,
    ),
    "XGBoostJob": StatusRules(
        leaders=("Master",),
        running="{kind} {name} is running.",
        succeeded="{kind} {name} is successfully completed.",
        failed="{kind} {name} is failed because {failed} {rtype} replica(s) failed.",
        restarting="{kind} {name} is restarting because {failed} {rtype} replica(s) failed.",
        restarts_under=("ExitCode",),
    ),
}


def update_job_status(rules: StatusRules, kind: str, job: dict[str, Any], replicas: Mapping[str, Replica],
                      status: dict[str, Any], record: Record, done_early: Callable[[int], bool]) -> None:
    """Set `status`'s conditions from its replicaStatuses' counts by `rules` (`kind`'s row);
    `done_early(succeeded)`: the kind's early success of the workers."""
    meta = job["metadata"]
    words = {"kind": kind, "name": meta["name"], "ns": meta.get("namespace", "")}
    restarting = get_condition(status, "Restarting") if rules.keeps_restarting else None
    has_leader = any(rtype in replicas for rtype in rules.leaders)
    statuses = status["replicaStatuses"]
    for rtype in sorted(replicas):
        rep = replicas[rtype]
        counts = statuses[rtype]
        succeeded, running, failed = counts["succeeded"], counts["active"], counts["failed"]
        expected = rep.replicas - succeeded
        if has_leader:
            if rtype in rules.leaders:
                if running > 0:
                    set_condition(status, "Running", "True", f"{kind}Running", rules.running.format(**words))
                if expected == 0:
                    _succeed(status, kind, rules.succeeded.format(**words), record)
                    if rules.stop_at_leader_success:
                        return
        elif rtype == "Worker" and rules.workers_succeeded:
            if expected == 0 or done_early(succeeded):
                _succeed(status, kind, rules.workers_succeeded.format(**words), record)
            elif running > 0:
                set_condition(status, "Running", "True", f"{kind}Running", rules.workers_running.format(**words))
        if failed <= 0 or (rules.failures_only_while_short and rep.replicas <= succeeded + running):
            continue
        told = {**words, "failed": failed, "rtype": rtype}
        if rules.keeps_restarting and restarting is not None and restarting.get("status") == "True":
            set_condition(status, "Restarting", "True", restarting.get("reason", ""), restarting.get("message", ""))
        elif rep.restart_policy in rules.restarts_under:
            msg = rules.restarting.format(**told)
            if set_condition(status, "Restarting", "True", f"{kind}Restarting", msg):
                record("Warning", f"{kind}Restarting", msg)
        else:
            msg = rules.failed.format(**told)
            status.setdefault("completionTime", now())
            if set_condition(status, "Failed", "True", f"{kind}Failed", msg):
                record("Normal", f"{kind}Failed", msg)


def _succeed(status: dict[str, Any], kind: str, msg: str, record: Record) -> None:
    status.setdefault("completionTime", now())
    if set_condition(status, "Succeeded", "True", f"{kind}Succeeded", msg):
        record("Normal", f"{kind}Succeeded", msg)
