"""TFJob (kubeflow.org/v1): TF_CONFIG from `tensorflow/tensorflow.go`, conventions §1.6; its row of
the status rule (`TFJobReconciler.UpdateJobStatus`, release-1.9) is in `job_status`, its early
success (worker 0 completed) here."""

from __future__ import annotations

import json
import os
from typing import Any

from .common import (
    REPLICA_INDEX,
    REPLICA_TYPE,
    as_dict,
    exit_code,
    forbidden,
    not_supported,
    phase,
)
from .kubeflow import Framework, Replica, append_env, containers_of


class TensorFlow(Framework):
    kind = "TFJob"
    plural = "tfjobs"
    replica_field = "tfReplicaSpecs"
    replica_types = ("Chief", "Evaluator", "Master", "PS", "Worker")
    default_container = "tensorflow"
    port_name = "tfjob-port"
    default_port = 2222
    default_restart = "Never"
    controller_name = "tfjob-controller"
    default_clean_pod_policy = "Running"

    def validate(self, spec: dict[str, Any], replicas: dict[str, Replica]) -> list[str]:
        errs = []
        if sum(1 for rt in replicas if rt in ("Chief", "Master")) > 1:
            errs.append(forbidden(f"spec.{self.replica_field}", "must not have more than 1 Chief or Master role"))
        policy = spec.get("successPolicy")
        if policy not in (None, "", "AllWorkers"):
            errs.append(not_supported("spec.successPolicy", policy, ("", "AllWorkers")))
        return errs

    def is_master_role(self, replicas: dict[str, Replica], rt: str, index: int) -> bool:
        if "Chief" in replicas or "Master" in replicas:
            return rt in ("Chief", "Master")
        return rt == "Worker" and index == 0

    def set_cluster_spec(
        self, job: dict[str, Any], replicas: dict[str, Replica], template: dict[str, Any], rt: str, index: int
    ) -> None:
        if sum(r.replicas for r in replicas.values()) == 1:
            return  # local training: no TF_CONFIG
        name = job["metadata"]["name"]
        ns = job["metadata"].get("namespace", "")
        domain = os.environ.get("CUSTOM_CLUSTER_DOMAIN", "")
        cluster: dict[str, list[str]] = {}
        for rtype in sorted(replicas, key=str.lower):
            rep = replicas[rtype]
            port = self.port(replicas, rtype)
            if port is None:
                raise ValueError("failed to find the port")
            lower = rtype.lower()
            hosts = []
            for i in range(rep.replicas):
                host = f"{name}-{lower}-{i}.{ns}.svc"
                if domain:
                    host += f".{domain}"
                hosts.append(f"{host}:{port}")
            cluster[lower] = hosts
        task = {"type": rt.lower(), "index": index}
        if job["spec"].get("enableDynamicWorker") is True:
            sparse: dict[str, Any] = {}
            for key, hosts in cluster.items():
                if key == "worker":
                    if rt.lower() == "worker":
                        sparse["worker"] = {str(index): hosts[index]}
                else:
                    sparse[key] = hosts
            cfg: dict[str, Any] = {"cluster": sparse, "task": task}
        else:
            cfg = {"cluster": cluster, "task": task, "environment": "cloud"}
        value = json.dumps(cfg, separators=(",", ":"))
        for c in containers_of(template):
            if c.get("name") == self.default_container:
                append_env(c, ("TF_CONFIG", value))
                break

    def _worker0_completed(self, replicas: dict[str, Replica], pods: list[dict[str, Any]]) -> bool:
        if "Worker" not in replicas:
            return True
        for p in pods:
            labels = as_dict(p["metadata"].get("labels"))
            if labels.get(REPLICA_TYPE) == "worker" and labels.get(REPLICA_INDEX) == "0":
                code = exit_code(p, self.default_container)
                if code is None and not as_dict(p.get("status")).get("containerStatuses"):
                    code = 0  # a pod status without container statuses: trust the phase
                if phase(p) == "Succeeded" and code == 0:
                    return True
        return False

    def workers_done_early(self, job: dict[str, Any], replicas: dict[str, Replica], pods: list[dict[str, Any]],
                           succeeded: int) -> bool:
        """Done once worker 0 completed (`IsWorker0Completed`), unless successPolicy is AllWorkers."""
        return job["spec"].get("successPolicy") != "AllWorkers" and self._worker0_completed(replicas, pods)
