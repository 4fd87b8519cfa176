"""XGBoostJob (kubeflow.org/v1): env from `xgboost/xgboost.go`, conventions §1.7; its row of the
status rule (`XGBoostJobReconciler.UpdateJobStatus`, release-1.9) is in `job_status`."""

from __future__ import annotations

from typing import Any

from .common import forbidden, required
from .kubeflow import Framework, Replica, append_env, containers_of, total_replicas


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
