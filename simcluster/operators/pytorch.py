"""PyTorchJob (kubeflow.org/v1): env from `pytorch/envvar.go` and `elastic.go`, conventions §1.5;
its row of the status rule (`PyTorchJobReconciler.UpdateJobStatus`, release-1.9) is in
`job_status`, its early success (an elastic job's first worker done) here."""

from __future__ import annotations

from typing import Any

from .common import as_dict, as_list, forbidden, is_int, required
from .kubeflow import Framework, Replica, append_env, containers_of, total_replicas


class PyTorch(Framework):
    kind = "PyTorchJob"
    plural = "pytorchjobs"
    replica_field = "pytorchReplicaSpecs"
    replica_types = ("Master", "Worker")
    default_container = "pytorch"
    port_name = "pytorchjob-port"
    default_port = 23456
    default_restart = "OnFailure"
    controller_name = "pytorchjob-controller"
    default_clean_pod_policy = "None"

    def validate(self, spec: dict[str, Any], replicas: dict[str, Replica]) -> list[str]:
        errs = []
        path = f"spec.{self.replica_field}"
        raw = {str(k).lower(): v for k, v in as_dict(spec.get(self.replica_field)).items()}
        for rt, rep in replicas.items():
            explicit = as_dict(raw.get(rt.lower())).get("replicas")
            if rt == "Master" and rep.replicas != 1:
                errs.append(forbidden(f"{path}[Master].replicas", "must be 1"))
            elif rt != "Master" and is_int(explicit) and explicit < 1:
                errs.append(forbidden(f"{path}[{rt}].replicas", "must be at least 1"))
        if spec.get("elasticPolicy") is not None and "Worker" not in replicas:
            errs.append(required(f"{path}[Worker]", "must be configured if elastic policy is used"))
        if spec.get("elasticPolicy") is not None and not isinstance(spec.get("elasticPolicy"), dict):
            errs.append(forbidden("spec.elasticPolicy", "must be an object"))
        return errs

    def is_master_role(self, replicas: dict[str, Replica], rt: str, index: int) -> bool:
        return rt == "Master"

    def _nproc(self, spec: dict[str, Any]) -> str:
        elastic = as_dict(spec.get("elasticPolicy"))
        if spec.get("nprocPerNode") is not None:
            return str(spec["nprocPerNode"])
        if elastic.get("nProcPerNode") is not None:
            return str(elastic["nProcPerNode"])
        return "auto"

    def set_cluster_spec(
        self, job: dict[str, Any], replicas: dict[str, Replica], template: dict[str, Any], rt: str, index: int
    ) -> None:
        spec = job["spec"]
        name = job["metadata"]["name"]
        has_master = "Master" in replicas
        rank = index + 1 if (rt == "Worker" and has_master) else index
        total = total_replicas(replicas)
        nproc = self._nproc(spec)
        nproc_int = int(nproc) if nproc.isdigit() else 1
        master_env: list[tuple[str, str]] = []
        if has_master:
            port = self.port(replicas, "Master")
            if port is None:
                raise ValueError("failed to find the port")
            addr = f"{name}-master-0"
            master_env = [
                ("MASTER_PORT", str(port)),
                ("PET_MASTER_PORT", str(port)),
                ("MASTER_ADDR", addr),
                ("PET_MASTER_ADDR", addr),
            ]
        elastic = spec.get("elasticPolicy")
        for c in containers_of(template):
            pairs: list[tuple[str, str]] = [("PYTHONUNBUFFERED", "1"), *master_env]
            pairs.append(("PET_NPROC_PER_NODE", nproc))
            if has_master:
                pairs += [("WORLD_SIZE", str(total * nproc_int)), ("RANK", str(rank))]
            if isinstance(elastic, dict):
                pairs += self._elastic_env(job, replicas, elastic)
            else:
                pairs.append(("PET_NNODES", str(total)))
            pairs.append(("PET_NODE_RANK", str(rank)))
            append_env(c, *pairs)

    def _elastic_env(self, job: dict[str, Any], replicas: dict[str, Replica], elastic: dict[str, Any]) -> list[tuple[str, str]]:
        name = job["metadata"]["name"]
        workers = replicas.get("Worker")
        n_workers = workers.replicas if workers else 0
        lo, hi = elastic.get("minReplicas"), elastic.get("maxReplicas")
        if is_int(lo) and is_int(hi):
            nnodes = f"{lo}:{hi}"
        elif is_int(lo) or is_int(hi):
            v = lo if is_int(lo) else hi
            nnodes = f"{v}:{v}"
        else:
            nnodes = str(n_workers)
        port = elastic.get("rdzvPort")
        if not is_int(port):
            port = self.port(replicas, "Worker") or self.default_port
        host = elastic.get("rdzvHost") or f"{name}-worker-0"
        out = [
            ("PET_NNODES", nnodes),
            ("PET_RDZV_BACKEND", str(elastic.get("rdzvBackend") or "c10d")),
            ("PET_RDZV_ENDPOINT", f"{host}:{port}"),
        ]
        if elastic.get("rdzvId"):
            out.append(("PET_RDZV_ID", str(elastic["rdzvId"])))
        conf = [f"{kv.get('key')}={kv.get('value')}" for kv in as_list(elastic.get("rdzvConf")) if isinstance(kv, dict)]
        if conf:
            out.append(("PET_RDZV_CONF", ",".join(conf)))
        if elastic.get("standalone") is True:
            out.append(("PET_STANDALONE", ""))
        if is_int(elastic.get("maxRestarts")):
            out.append(("PET_MAX_RESTARTS", str(elastic["maxRestarts"])))
        return out

    def workers_done_early(self, job: dict[str, Any], replicas: dict[str, Replica], pods: list[dict[str, Any]],
                           succeeded: int) -> bool:
        """An elastic job is done once one worker succeeded."""
        return job["spec"].get("elasticPolicy") is not None and succeeded > 0
