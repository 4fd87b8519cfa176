"""XGBoostJob (kubeflow.org/v1): env from `xgboost/xgboost.go`, status rules of
`XGBoostJobReconciler.UpdateJobStatus` (release-1.9), conventions §1.7."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .common import forbidden, now, required, set_condition
from .kubeflow import Framework, Replica, append_env, containers_of, total_replicas

if TYPE_CHECKING:
    from .kubeflow import KubeflowJobController


class XGBoost(Framework):
    kind = "XGBoostJob"
    plural = "xgboostjobs"
    replica_field = "xgbReplicaSpecs"
    replica_types = ("Master", "Worker")
    default_container = "xgboost"
    port_name = "xgboostjob-port"
    default_port = 9999
    default_restart = "Never"
    controller_name = "xgboostjob-controller"
    default_clean_pod_policy = "None"

    def validate(self, spec: dict[str, Any], replicas: dict[str, Replica]) -> list[str]:
        errs = []
        path = f"spec.{self.replica_field}"
        if replicas or isinstance(spec.get(self.replica_field), dict):
            if "Master" not in replicas:
                errs.append(required(f"{path}[Master]", "must be present"))
            elif replicas["Master"].replicas != 1:
                errs.append(forbidden(f"{path}[Master].replicas", "must be 1"))
        return errs

    def set_cluster_spec(
        self, job: dict[str, Any], replicas: dict[str, Replica], template: dict[str, Any], rt: str, index: int
    ) -> None:
        name = job["metadata"]["name"]
        rank = index + (replicas["Master"].replicas if rt == "Worker" else 0)
        master_port = self.port(replicas, "Master")
        if master_port is None:
            raise ValueError("failed to find the port")
        total = total_replicas(replicas)
        extra: list[tuple[str, str]] = []
        if total > 1:
            worker_port = self.port(replicas, "Worker")
            if worker_port is None:
                raise ValueError("failed to find the port")
            addrs = ",".join(f"{name}-worker-{i}" for i in range(total - 1))
            extra = [("WORKER_PORT", str(worker_port)), ("WORKER_ADDRS", addrs)]
        for c in containers_of(template):
            append_env(
                c,
                ("MASTER_PORT", str(master_port)),
                ("MASTER_ADDR", f"{name}-master-0"),
                ("WORLD_SIZE", str(total)),
                ("RANK", str(rank)),
                ("PYTHONUNBUFFERED", "1"),
                *extra,
            )

    def update_status(
        self,
        ctrl: KubeflowJobController,
        job: dict[str, Any],
        replicas: dict[str, Replica],
        status: dict[str, Any],
        pods: list[dict[str, Any]],
    ) -> None:
        name = job["metadata"]["name"]
        statuses = status["replicaStatuses"]
        for rt in sorted(replicas):
            rep = replicas[rt]
            rs = statuses[rt]
            succeeded, running, failed = rs["succeeded"], rs["active"], rs["failed"]
            expected = rep.replicas - succeeded
            if rt == "Master":
                if running > 0:
                    set_condition(status, "Running", "True", "XGBoostJobRunning", f"XGBoostJob {name} is running.")
                if expected == 0:
                    msg = f"XGBoostJob {name} is successfully completed."
                    status.setdefault("completionTime", now())
                    if set_condition(status, "Succeeded", "True", "XGBoostJobSucceeded", msg):
                        ctrl.record(job, "Normal", "XGBoostJobSucceeded", msg)
                    return
            if failed > 0:
                if rep.restart_policy == "ExitCode":
                    msg = f"XGBoostJob {name} is restarting because {failed} {rt} replica(s) failed."
                    if set_condition(status, "Restarting", "True", "XGBoostJobRestarting", msg):
                        ctrl.record(job, "Warning", "XGBoostJobRestarting", msg)
                else:
                    msg = f"XGBoostJob {name} is failed because {failed} {rt} replica(s) failed."
                    status.setdefault("completionTime", now())
                    if set_condition(status, "Failed", "True", "XGBoostJobFailed", msg):
                        ctrl.record(job, "Normal", "XGBoostJobFailed", msg)
