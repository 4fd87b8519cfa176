"""Workload objects of the scale scenario: Kubeflow training jobs (PyTorchJob and TFJob
``kubeflow.org/v1``, MPIJob ``kubeflow.org/v2beta1`` with its ``batch/v1`` launcher Job) and their
pods, as the operators create them: one JSON template per (job, replica type) with a few
substitution tokens, expanded per pod; labels, pod names and injected env variables follow
``docs/conventions.md`` sections 1, 2, 4 and 6.6."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import orjson

from .nodes import NodeInfo
from .plan import Job, Role
from .pod_status import PodStatusBuilder
from .shared import (
    DEFAULT_CONTAINER,
    GPU,
    KF_JOB_NAME,
    KF_JOB_ROLE,
    KF_OPERATOR,
    KF_REPLICA_INDEX,
    KF_REPLICA_TYPE,
    MPIJOB,
    POD_LIST_KEYS,
    PYTORCHJOB,
    TFJOB,
    fields_v1,
    managed_entry,
    random_suffix,
    random_uid,
    rfc3339,
)
from .template import Template

_dumps = orjson.dumps
_loads = orjson.loads

def _env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _env_field(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


_DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]
_GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
_SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"

# per-pod substitution tokens in the JSON templates
_T_NAME = b"@@NAME@@"
_T_UID = b"@@UID@@"
_T_IDX = b"@@IDX@@"
_T_RANK = b"@@RANK@@"
_T_KAPI = b"@@KAPI@@"
_T_CTS = b"@@CTS@@"
_T_NODE = b"@@NODE@@"
_TOKENS = tuple(t.decode() for t in (_T_NAME, _T_UID, _T_IDX, _T_RANK, _T_KAPI, _T_CTS, _T_NODE))


def _restart_policy(job: Job, role: Role) -> str:
    """The replica's restartPolicy as the job's author wrote it (the operator copies it to the pods)."""
    if job.kind == PYTORCHJOB:
        return "OnFailure"
    if job.kind == TFJOB:
        return "Never"
    return "OnFailure" if role.rtype == "Launcher" else "Never"


def _mpi_volumes(job: Job, role: Role) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Volumes and mounts mpi-operator adds (ssh keys; hostfile on the launcher)."""
    if job.kind != MPIJOB:
        return [], []
    ssh_items = [
        {"key": "ssh-privatekey", "path": "id_rsa"},
        {"key": "ssh-publickey", "path": "id_rsa.pub"},
        {"key": "ssh-publickey", "path": "authorized_keys"},
    ]
    vols: list[dict[str, Any]] = [
        {"name": "ssh-auth", "secret": {"secretName": f"{job.name}-ssh", "items": ssh_items, "defaultMode": 384}}
    ]
    mounts: list[dict[str, Any]] = [{"name": "ssh-auth", "mountPath": "/root/.ssh"}]
    if role.rtype == "Launcher":
        vols.append(
            {
                "name": "mpi-job-config",
                "configMap": {
                    "name": f"{job.name}-config",
                    "items": [
                        {"key": "hostfile", "path": "hostfile", "mode": 292},
                        {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 365},
                    ],
                    "defaultMode": 420,
                },
            }
        )
        mounts.append({"name": "mpi-job-config", "mountPath": "/etc/mpi"})
    return vols, mounts


class WorkloadBuilder:
    """The objects of the planned jobs: pods (with `PodStatusBuilder`'s statuses), the jobs' custom
    objects and MPI launcher Jobs; `gpu_used_ns` adds up GPU requests per namespace for the quotas."""

    def __init__(self, rng: random.Random, now: int, nodes: list[NodeInfo], statuses: PodStatusBuilder) -> None:
        self.rng = rng
        self.now = now
        self.node_info = nodes
        self.statuses = statuses
        self.pods: list[dict[str, Any]] = []
        self.jobs: list[dict[str, Any]] = []  # PyTorchJob/MPIJob/TFJob custom objects and MPI launcher Jobs
        self.gpu_used_ns: dict[str, int] = {}
        self._tree_cache: dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]] = {}

    def _container_name(self, job: Job, role: Role) -> str:
        if job.kind == PYTORCHJOB:
            return "pytorch"
        if job.kind == TFJOB:
            return "tensorflow"
        return "mpi-launcher" if role.rtype == "Launcher" else "mpi-worker"

    def _resources(self, job: Job, role: Role) -> dict[str, Any]:
        if role.gpu and job.gpus and not job.frac:
            g = job.gpus
            req = {"cpu": str(12 * g), "memory": f"{96 * g}Gi", GPU: str(g)}
            return {"limits": dict(req), "requests": req}
        if role.gpu and job.frac:
            return {"limits": {"cpu": "8", "memory": "48Gi"}, "requests": {"cpu": "4", "memory": "24Gi"}}
        if role.rtype == "Launcher":
            return {"limits": {"cpu": "2", "memory": "4Gi"}, "requests": {"cpu": "1", "memory": "2Gi"}}
        if role.rtype == "PS":
            req = {"cpu": "8", "memory": "32Gi"}
            return {"limits": dict(req), "requests": req}
        return {"limits": {"cpu": "8", "memory": "16Gi"}, "requests": {"cpu": "4", "memory": "16Gi"}}

    def _user_env(self, job: Job, role: Role) -> list[dict[str, Any]]:
        team = job.team or job.ns
        env = [
            _env("NCCL_DEBUG", "WARN"),
            _env("WANDB_PROJECT", team),
            _env_field("NODE_NAME", "spec.nodeName"),
        ]
        if job.kind == PYTORCHJOB:
            env.append(_env("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"))
        elif job.kind == TFJOB:
            env.append(_env("TF_CPP_MIN_LOG_LEVEL", "1"))
        else:
            env.append(_env("HOROVOD_GPU_OPERATIONS", "NCCL"))
        return env

    def _command(self, job: Job, role: Role) -> tuple[list[str], list[str]]:
        if job.kind == PYTORCHJOB:
            return ["torchrun"], [
                "/workspace/train.py",
                "--config", f"configs/{job.name.rsplit('-', 1)[0]}.yaml",
                "--output-dir", f"/data/ckpt/{job.name}",
                "--bf16",
            ]
        if job.kind == TFJOB:
            return ["python", "/opt/model/train.py"], [
                "--model_dir", f"/data/ckpt/{job.name}",
                "--train_steps", "100000",
            ]
        if role.rtype == "Launcher":
            n = job.size - 1
            slots = max(1, job.gpus)
            return ["mpirun"], [
                "--allow-run-as-root",
                "-np", str(n * slots),
                "-bind-to", "none",
                "-map-by", "slot",
                "-x", "NCCL_DEBUG",
                "python", "/examples/train.py",
            ]
        return ["/usr/sbin/sshd", "-De"], []

    def _user_volumes(self, job: Job, role: Role) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        if role.rtype == "Launcher":
            return [], []
        team = job.team or job.ns
        vols: list[dict[str, Any]] = [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": f"{team}-data"}},
        ]
        mounts: list[dict[str, Any]] = [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "data", "mountPath": "/data"},
        ]
        return vols, mounts

    def _template_container(self, job: Job, role: Role) -> dict[str, Any]:
        """The container as the user wrote it in the job's replica spec."""
        cmd, args = self._command(job, role)
        _vols, mounts = self._user_volumes(job, role)
        c: dict[str, Any] = {"name": self._container_name(job, role), "image": job.image, "command": cmd}
        if args:
            c["args"] = args
        if job.kind == PYTORCHJOB:
            c["ports"] = [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
        elif job.kind == TFJOB:
            c["ports"] = [{"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"}]
        c["env"] = self._user_env(job, role)
        c["resources"] = self._resources(job, role)
        if mounts:
            c["volumeMounts"] = mounts
        c["imagePullPolicy"] = "IfNotPresent"
        return c

    def _template_labels(self, job: Job) -> dict[str, Any]:
        labels = {"owner": job.user}
        if job.team is not None:
            labels["project"] = job.team
        return labels

    def _pod_labels(self, job: Job, role: Role) -> dict[str, Any]:
        labels = self._template_labels(job)
        if job.kind == MPIJOB:
            if role.rtype == "Launcher":
                labels["batch.kubernetes.io/controller-uid"] = job.launcher_uid
                labels["batch.kubernetes.io/job-name"] = f"{job.name}-launcher"
                labels["controller-uid"] = job.launcher_uid
                labels["job-name"] = f"{job.name}-launcher"
            labels[KF_JOB_NAME] = job.name
            labels[KF_JOB_ROLE] = "launcher" if role.rtype == "Launcher" else "worker"
            labels[KF_OPERATOR] = "mpi-operator"
            if role.rtype == "Worker":
                labels[KF_REPLICA_INDEX] = _T_IDX.decode()
            return dict(sorted(labels.items()))
        labels[KF_JOB_NAME] = job.name
        if role.rtype in ("Master", "Chief"):
            labels[KF_JOB_ROLE] = "master"
        labels[KF_OPERATOR] = "pytorchjob-controller" if job.kind == PYTORCHJOB else "tfjob-controller"
        labels[KF_REPLICA_INDEX] = _T_IDX.decode()
        labels[KF_REPLICA_TYPE] = role.rtype.lower()
        return dict(sorted(labels.items()))

    def _operator_env(self, job: Job, role: Role) -> list[dict[str, Any]]:
        if job.kind == PYTORCHJOB:
            nproc = str(job.gpus) if job.gpus > 1 and not job.frac else "auto"
            world = job.size * (job.gpus if nproc != "auto" else 1)
            master = f"{job.name}-master-0"
            return [
                _env("PYTHONUNBUFFERED", "1"),
                _env("MASTER_PORT", "23456"),
                _env("PET_MASTER_PORT", "23456"),
                _env("MASTER_ADDR", master),
                _env("PET_MASTER_ADDR", master),
                _env("PET_NPROC_PER_NODE", nproc),
                _env("WORLD_SIZE", str(world)),
                _env("RANK", _T_RANK.decode()),
                _env("PET_NNODES", str(job.size)),
                _env("PET_NODE_RANK", _T_RANK.decode()),
            ]
        if job.kind == TFJOB:
            cluster: dict[str, list[str]] = {}
            for r in sorted(job.roles, key=lambda x: x.rtype.lower()):
                rt = r.rtype.lower()
                cluster[rt] = [f"{job.name}-{rt}-{i}.{job.ns}.svc:2222" for i in range(r.count)]
            tf = {"cluster": cluster, "task": {"type": role.rtype.lower(), "index": 0}, "environment": "cloud"}
            raw = json.dumps(tf, separators=(",", ":")).replace('"index":0', '"index":@@IDX@@')
            return [_env("TF_CONFIG", raw)]
        slots = str(max(1, job.gpus))
        if role.rtype == "Launcher":
            return [
                _env("K_MPI_JOB_ROLE", "launcher"),
                _env("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
                _env("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
                _env("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
                _env("OMPI_MCA_orte_set_default_slots", slots),
                _env("NVIDIA_VISIBLE_DEVICES", ""),
                _env("NVIDIA_DRIVER_CAPABILITIES", ""),
            ]
        return [_env("K_MPI_JOB_ROLE", "worker")]

    def _pod_template(self, job: Job, role: Role) -> tuple[Template, dict[str, Any], dict[str, Any]]:
        """The pod (no status) as a `Template` with substitution tokens for per-pod values.

        Also returns the operator's managedFields tree (without the per-pod
        kube-api-access volume) and that volume's subtree; ``_emit_job``
        shares them, read-only, between pods of the same shape.
        """
        user = self._template_container(job, role)
        cname = user["name"]
        container = dict(user)
        env = list(user["env"])
        if job.kind == MPIJOB:
            env = self._operator_env(job, role) + env  # mpi-operator prepends
        else:
            env = env + self._operator_env(job, role)
        container["env"] = env
        mounts = list(user.get("volumeMounts", []))
        mpi_vols, mpi_mounts = _mpi_volumes(job, role)
        mounts.extend(mpi_mounts)
        kapi = "kube-api-access-" + _T_KAPI.decode()
        mounts.append({"name": kapi, "readOnly": True, "mountPath": _SA_MOUNT})
        container["volumeMounts"] = mounts
        ordered: dict[str, Any] = {
            k: container[k]
            for k in ("name", "image", "command", "args", "ports", "env", "resources")
            if k in container
        }
        ordered["volumeMounts"] = mounts
        ordered["terminationMessagePath"] = "/dev/termination-log"
        ordered["terminationMessagePolicy"] = "File"
        ordered["imagePullPolicy"] = "IfNotPresent"

        vols, _ = self._user_volumes(job, role)
        vols = list(vols) + mpi_vols
        vols.append(
            {
                "name": kapi,
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    }
                                ]
                            }
                        },
                    ],
                    "defaultMode": 420,
                },
            }
        )

        spec: dict[str, Any] = {
            "volumes": vols,
            "containers": [ordered],
            "restartPolicy": _restart_policy(job, role),
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": _T_NODE.decode(),
            "securityContext": {},
        }
        if job.kind == MPIJOB:
            host = f"{job.name}-launcher" if role.rtype == "Launcher" else _T_NAME.decode()
            spec["hostname"] = host
            spec["subdomain"] = job.name
        spec["schedulerName"] = "runai-scheduler" if job.team is not None else "default-scheduler"
        spec["tolerations"] = [dict(_GPU_TOLERATION)] + [dict(t) for t in _DEFAULT_TOLERATIONS]
        if job.priority_class:
            spec["priorityClassName"] = job.priority_class
            spec["priority"] = 1000
        else:
            spec["priority"] = 0
        if job.kind == MPIJOB and role.rtype == "Worker":
            spec["dnsConfig"] = {"searches": [f"{job.name}.{job.ns}.svc.cluster.local"]}
        spec["enableServiceLinks"] = True
        spec["preemptionPolicy"] = "PreemptLowerPriority"

        labels = self._pod_labels(job, role)
        annotations = {DEFAULT_CONTAINER: cname}
        if job.team is not None:
            annotations["pod-group-name"] = f"pg-{job.name}-{job.uid}"
            if job.frac:
                annotations["gpu-fraction"] = job.frac
            elif role.gpu and job.gpus:
                annotations["received-resource-type"] = "Regular"
        if job.kind == MPIJOB and role.rtype == "Launcher":
            owner = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": f"{job.name}-launcher",
                "uid": job.launcher_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        else:
            owner = {
                "apiVersion": "kubeflow.org/v2beta1" if job.kind == MPIJOB else "kubeflow.org/v1",
                "kind": job.kind,
                "name": job.name,
                "uid": job.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        meta: dict[str, Any] = {"name": _T_NAME.decode()}
        if job.kind == MPIJOB and role.rtype == "Launcher":
            meta["generateName"] = f"{job.name}-launcher-"
        meta["namespace"] = job.ns
        meta["uid"] = _T_UID.decode()
        meta["generation"] = 1
        meta["creationTimestamp"] = _T_CTS.decode()
        meta["labels"] = labels
        meta["annotations"] = annotations
        meta["ownerReferences"] = [owner]
        owned_meta = {"labels": labels, "annotations": annotations, "ownerReferences": [owner]}
        if job.kind == MPIJOB and role.rtype == "Launcher":
            meta["finalizers"] = ["batch.kubernetes.io/job-tracking"]
            owned_meta = {"generateName": meta["generateName"], **owned_meta, "finalizers": meta["finalizers"]}
            manager = "kube-controller-manager"
        elif job.kind == MPIJOB:
            manager = "mpi-operator"
        else:
            manager = "training-operator"
        # The field set only depends on the pod's shape, which these decide:
        shape = (
            job.kind,
            role.rtype,
            job.team is not None,
            job.frac is not None,
            bool(role.gpu and job.gpus),
            job.priority_class is not None,
        )
        cached = self._tree_cache.get(shape)
        if cached is None:
            op_spec = {k: v for k, v in spec.items() if k != "nodeName"}
            spec_tree = fields_v1(op_spec, POD_LIST_KEYS, root=True)
            # every pod has its own kube-api-access-xxxxx volume; added per pod
            kapi_key = "k:" + json.dumps({"name": kapi}, separators=(",", ":"))
            kapi_tree = spec_tree["f:volumes"].pop(kapi_key)
            meta_tree = fields_v1(owned_meta, POD_LIST_KEYS, root=True)
            owner_tree = next(v for k, v in meta_tree["f:ownerReferences"].items() if k != ".")
            cached = self._tree_cache[shape] = (meta_tree, owner_tree, spec_tree, kapi_tree)
        meta_tree, owner_tree, spec_tree, kapi_tree = cached
        meta_tree = dict(meta_tree)
        meta_tree["f:ownerReferences"] = {".": {}, f'k:{{"uid":"{owner["uid"]}"}}': owner_tree}
        meta["managedFields"] = [managed_entry(manager, "v1", _T_CTS.decode(), {})]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        return Template(pod, _TOKENS), {"f:metadata": meta_tree, "f:spec": spec_tree}, kapi_tree

    def emit_job(self, job: Job) -> None:
        """The pods of `job`, then its custom object (and launcher Job)."""
        rng = self.rng
        out_pods = self.pods
        name_of = self._pod_name
        gpu_req = job.gpus if (job.gpus and not job.frac) else 0
        for role in job.roles:
            tmpl, op_tree, kapi_tree = self._pod_template(job, role)
            meta_tree = op_tree["f:metadata"]
            spec_tree = op_tree["f:spec"]
            vols_tree = spec_tree["f:volumes"]
            res = self._resources(job, role)
            cname = self._container_name(job, role)
            for k, (idx, state) in enumerate(role.pods):
                pname = name_of(job, role, idx)
                rank = idx + 1 if (job.kind == PYTORCHJOB and role.rtype == "Worker") else idx
                created = job.created + 1 + rng.randint(0, 2)
                node_i = role.nodes[k] if state not in ("pending", "unschedulable") else None
                node = self.node_info[node_i] if node_i is not None else None
                kapi = random_suffix(rng)
                pod = tmpl.fill({
                    "@@NAME@@": pname,
                    "@@UID@@": random_uid(rng),
                    "@@IDX@@": str(idx),
                    "@@RANK@@": str(rank),
                    "@@KAPI@@": kapi,
                    "@@CTS@@": rfc3339(created),
                    "@@NODE@@": node.name if node else "",
                })
                if node is None:
                    del pod["spec"]["nodeName"]
                vols = dict(vols_tree)
                vols[f'k:{{"name":"kube-api-access-{kapi}"}}'] = kapi_tree
                spec_fields = dict(spec_tree)
                spec_fields["f:volumes"] = vols
                mfields = pod["metadata"]["managedFields"]
                mfields[0]["fieldsV1"] = {"f:metadata": meta_tree, "f:spec": spec_fields}
                status, kubelet = self.statuses.status(job, role, state, created, node, res, cname, pod)
                pod["status"] = status
                mfields.append(kubelet)
                out_pods.append(pod)
                if gpu_req and role.gpu and state not in ("succeeded", "failed"):
                    self.gpu_used_ns[job.ns] = self.gpu_used_ns.get(job.ns, 0) + gpu_req
        self._job_objects(job)

    def _pod_name(self, job: Job, role: Role, idx: int) -> str:
        if job.kind == MPIJOB and role.rtype == "Launcher":
            return f"{job.name}-launcher-{random_suffix(self.rng)}"
        return f"{job.name}-{role.rtype.lower()}-{idx}"

    def _job_objects(self, job: Job) -> None:
        rng = self.rng
        ts_c = rfc3339(job.created)
        start = job.created + 1
        labels = self._template_labels(job)
        if job.kind == MPIJOB:
            api = "kubeflow.org/v2beta1"
            rmap = "mpiReplicaSpecs"
        elif job.kind == TFJOB:
            api = "kubeflow.org/v1"
            rmap = "tfReplicaSpecs"
        else:
            api = "kubeflow.org/v1"
            rmap = "pytorchReplicaSpecs"
        replica_specs: dict[str, Any] = {}
        for role in job.roles:
            pod_spec: dict[str, Any] = {"containers": [self._template_container(job, role)]}
            vols, _ = self._user_volumes(job, role)
            if vols:
                pod_spec["volumes"] = vols
            pod_spec["tolerations"] = [dict(_GPU_TOLERATION)]
            if job.team is not None:
                pod_spec["schedulerName"] = "runai-scheduler"
            if job.priority_class:
                pod_spec["priorityClassName"] = job.priority_class
            annotations = {DEFAULT_CONTAINER: self._container_name(job, role)}
            if job.frac and role.gpu:
                annotations["gpu-fraction"] = job.frac
            replica_specs[role.rtype] = {
                "replicas": role.count,
                "restartPolicy": _restart_policy(job, role),
                "template": {"metadata": {"labels": dict(labels), "annotations": annotations}, "spec": pod_spec},
            }
        spec: dict[str, Any] = {}
        if job.kind == PYTORCHJOB:
            spec["nprocPerNode"] = str(job.gpus) if job.gpus > 1 and not job.frac else "auto"
        elif job.kind == MPIJOB:
            spec["slotsPerWorker"] = max(1, job.gpus)
            spec["runLauncherAsWorker"] = False
            spec["launcherCreationPolicy"] = "AtStartup"
            spec["mpiImplementation"] = "OpenMPI"
            spec["sshAuthMountPath"] = "/root/.ssh"
        else:
            spec["successPolicy"] = ""
            spec["enableDynamicWorker"] = False
        run_policy: dict[str, Any] = {"cleanPodPolicy": "None", "suspend": False}
        if job.kind == MPIJOB:
            run_policy["backoffLimit"] = 6
        spec["runPolicy"] = run_policy
        spec[rmap] = replica_specs

        # status
        prefix = job.kind
        ref = f"{job.ns}/{job.name}"
        created_msg = f"{job.kind} {job.name} is created." if job.kind != MPIJOB else f"MPIJob {ref} is created."
        running_since = start + rng.randint(10, 240)
        conds = [
            {
                "type": "Created",
                "status": "True",
                "reason": f"{prefix}Created",
                "message": created_msg,
                "lastUpdateTime": ts_c,
                "lastTransitionTime": ts_c,
            }
        ]
        completion: int | None = None
        if job.state == "running":
            conds.append(
                {
                    "type": "Running",
                    "status": "True",
                    "reason": f"{prefix}Running",
                    "message": f"{job.kind} {ref} is running.",
                    "lastUpdateTime": rfc3339(running_since),
                    "lastTransitionTime": rfc3339(running_since),
                }
            )
        elif job.state in ("succeeded", "failed"):
            completion = min(self.now - 60, running_since + rng.randint(3600, 2 * 86400))
            ts_done = rfc3339(completion)
            conds.append(
                {
                    "type": "Running",
                    "status": "False",
                    "reason": f"{prefix}Running",
                    "message": f"{job.kind} {ref} is running.",
                    "lastUpdateTime": ts_done,
                    "lastTransitionTime": ts_done,
                }
            )
            if job.state == "succeeded":
                conds.append(
                    {
                        "type": "Succeeded",
                        "status": "True",
                        "reason": f"{prefix}Succeeded",
                        "message": f"{job.kind} {ref} successfully completed.",
                        "lastUpdateTime": ts_done,
                        "lastTransitionTime": ts_done,
                    }
                )
            else:
                failed_role = job.roles[-1].rtype
                conds.append(
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": f"{prefix}Failed",
                        "message": (
                            f"{job.kind} {ref} is failed because {job.roles[-1].count} "
                            f"{failed_role} replica(s) failed."
                        ),
                        "lastUpdateTime": ts_done,
                        "lastTransitionTime": ts_done,
                    }
                )
        replica_statuses: dict[str, Any] = {}
        for role in job.roles:
            counts = {"active": 0, "succeeded": 0, "failed": 0}
            for _idx, st in role.pods:
                if st in ("running", "restarted", "crash"):
                    counts["active"] += 1
                elif st == "succeeded":
                    counts["succeeded"] += 1
                elif st == "failed":
                    counts["failed"] += 1
            rs: dict[str, Any] = {k: v for k, v in counts.items() if v}
            if job.kind != MPIJOB:
                op = "pytorchjob-controller" if job.kind == PYTORCHJOB else "tfjob-controller"
                rs["selector"] = (
                    f"{KF_JOB_NAME}={job.name},{KF_OPERATOR}={op},{KF_REPLICA_TYPE}={role.rtype.lower()}"
                )
            replica_statuses[role.rtype] = rs
        status: dict[str, Any] = {"conditions": conds, "replicaStatuses": replica_statuses, "startTime": rfc3339(start)}
        if completion is not None:
            status["completionTime"] = rfc3339(completion)
        status["lastReconcileTime"] = rfc3339(max(start, self.now - rng.randint(0, 600)))

        operator = "mpi-operator" if job.kind == MPIJOB else "training-operator"
        submitter = "runai-cli" if job.team is not None and rng.random() < 0.3 else "kubectl-client-side-apply"
        meta = {
            "name": job.name,
            "namespace": job.ns,
            "uid": job.uid,
            "generation": 1,
            "creationTimestamp": ts_c,
            "labels": labels,
            "managedFields": [
                managed_entry(
                    submitter,
                    api,
                    ts_c,
                    {"f:metadata": {"f:labels": fields_v1(labels, {})}, "f:spec": fields_v1(spec, {}, root=True)},
                ),
                managed_entry(
                    operator,
                    api,
                    status["lastReconcileTime"],
                    {"f:status": fields_v1(status, {}, root=True)},
                    "status",
                ),
            ],
        }
        self.jobs.append({"apiVersion": api, "kind": job.kind, "metadata": meta, "spec": spec, "status": status})
        if job.kind == MPIJOB:
            self._launcher_job(job, replica_specs["Launcher"]["template"])

    def _launcher_job(self, job: Job, template: dict[str, Any]) -> None:
        rng = self.rng
        lname = f"{job.name}-launcher"
        ts_c = rfc3339(job.created + 1)
        tlabels = dict(template["metadata"]["labels"])
        tlabels.update(
            {
                "batch.kubernetes.io/controller-uid": job.launcher_uid,
                "batch.kubernetes.io/job-name": lname,
                "controller-uid": job.launcher_uid,
                "job-name": lname,
                KF_JOB_NAME: job.name,
                KF_JOB_ROLE: "launcher",
                KF_OPERATOR: "mpi-operator",
            }
        )
        tlabels = dict(sorted(tlabels.items()))
        pod_spec = copy.deepcopy(template["spec"])
        pod_spec["hostname"] = lname
        pod_spec["subdomain"] = job.name
        pod_spec["restartPolicy"] = "OnFailure"
        container = pod_spec["containers"][0]
        container["env"] = self._operator_env(job, job.roles[0]) + container["env"]
        mpi_vols, mpi_mounts = _mpi_volumes(job, job.roles[0])
        container["volumeMounts"] = container.get("volumeMounts", []) + mpi_mounts
        pod_spec["volumes"] = pod_spec.get("volumes", []) + mpi_vols
        spec = {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 6,
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": job.launcher_uid}},
            "manualSelector": False,
            "template": {"metadata": {"labels": tlabels, "annotations": dict(template["metadata"]["annotations"])},
                         "spec": pod_spec},
            "completionMode": "NonIndexed",
            "suspend": False,
            "podReplacementPolicy": "TerminatingOrFailed",
        }
        launcher_state = job.roles[0].pods[0][1]
        running = launcher_state in ("running", "restarted", "crash")
        status = {
            "startTime": ts_c,
            "active": 1,
            "ready": 1 if launcher_state in ("running", "restarted") else 0,
            "terminating": 0,
            "uncountedTerminatedPods": {},
        }
        if not running and launcher_state not in ("pending", "unschedulable"):
            status["active"] = 0
        labels = {"app": job.name}
        meta = {
            "name": lname,
            "namespace": job.ns,
            "uid": job.launcher_uid,
            "generation": 1,
            "creationTimestamp": ts_c,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v2beta1",
                    "kind": "MPIJob",
                    "name": job.name,
                    "uid": job.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                managed_entry(
                    "mpi-operator",
                    "batch/v1",
                    ts_c,
                    {
                        "f:metadata": {
                            "f:labels": fields_v1(labels, {}),
                            "f:ownerReferences": {".": {}, f'k:{{"uid":"{job.uid}"}}': {}},
                        },
                        "f:spec": fields_v1(
                            {k: v for k, v in spec.items() if k not in ("selector", "manualSelector")},
                            POD_LIST_KEYS,
                            root=True,
                        ),
                    },
                ),
                managed_entry(
                    "kube-controller-manager",
                    "batch/v1",
                    rfc3339(max(job.created + 2, self.now - rng.randint(0, 600))),
                    {"f:status": fields_v1(status, {}, root=True)},
                    "status",
                ),
            ],
        }
        self.jobs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec, "status": status})

