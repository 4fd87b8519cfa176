"""Synthetic objects for the ``scale`` benchmark scenario.

``--scenario scale --nodes 1000 --pods 20000`` loads a cluster's worth of plain
API objects into the fake API server: GPU nodes, Run:ai style project
namespaces (``runai-<team>`` labelled ``runai/queue=<team>``) plus a few plain
ones, one ``ResourceQuota`` per namespace on ``requests.nvidia.com/gpu``,
Kubeflow training jobs (PyTorchJob and TFJob ``kubeflow.org/v1``, MPIJob
``kubeflow.org/v2beta1`` with its ``batch/v1`` launcher Job) and their pods.
No process backs any of the pods.

Labels, pod names and injected env variables follow
``docs/conventions.md`` sections 1, 2, 4 and 6.6.

GPU accounting: every Running pod that requests ``nvidia.com/gpu`` is bound
to a node with enough free GPUs, so per-node requests never exceed
allocatable. With the defaults (1000 nodes x 8 GPUs = 8,000 GPUs for 20,000
pods, ~93 % of them Running) not every pod can hold a whole GPU, so the
builder spends about 90 % of the GPU capacity on randomly chosen jobs and
makes the rest of the running jobs CPU-only (data preparation, evaluation,
tokenisation...). Pending jobs keep their GPU requests (that is why they are
Unschedulable). MPI launchers and TF parameter servers never request GPUs.

Building is template based: one JSON template per (job, replica type) with a
few substitution tokens, expanded per pod with ``bytes.replace`` and
``orjson.loads`` (about 2-3 s for 20,000 pods on a 2-vCPU VM, most of it
allocating ~550 MB of Python objects). Every pod's metadata, spec and status
are its own objects, but the ``managedFields[*].fieldsV1`` trees share
read-only sub-dicts between pods of the same shape (that halves the memory).
Copy an object before editing its fieldsV1 in place; ``churn_pod`` and the
store already copy before they change anything.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import json
import random
import time
from bisect import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate
from typing import Any

import orjson

_dumps = orjson.dumps
_loads = orjson.loads


__all__ = ["ScaleObjects", "build_scale", "churn_pod"]

GPU = "nvidia.com/gpu"
GPU_QUOTA_KEY = "requests.nvidia.com/gpu"

# Kubeflow label keys (conventions §1.4, §2.3)
KF_JOB_NAME = "training.kubeflow.org/job-name"
KF_REPLICA_TYPE = "training.kubeflow.org/replica-type"
KF_REPLICA_INDEX = "training.kubeflow.org/replica-index"
KF_JOB_ROLE = "training.kubeflow.org/job-role"
KF_OPERATOR = "training.kubeflow.org/operator-name"
RUNAI_QUEUE = "runai/queue"
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"

PYTORCHJOB = "PyTorchJob"
TFJOB = "TFJob"
MPIJOB = "MPIJob"

KUBELET_VERSION = "v1.35.0"
MAX_JOB_PODS = 64
MIN_JOB_PODS = 2
_MAX_TF_PODS = 16  # TF_CONFIG lists every host; keep pods under 10 KB
_GPU_FILL = 0.9  # share of the cluster's GPUs handed to Running pods

_RAND_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s utilrand alphabet

_TEAMS = [
    "nlp", "vision", "speech", "recsys", "llm-core", "multimodal", "robotics",
    "search", "ads", "safety", "infra", "research", "genai", "translation",
    "autonomy", "fraud", "forecast", "biology", "chem", "climate", "health",
    "finance", "retail", "gaming", "music", "video", "maps", "ocr", "asr",
    "tts", "rl", "agents", "eval", "data", "platform", "perf", "compiler",
    "kernels", "quant", "distill", "pretrain", "alignment", "rlhf", "code",
    "math", "reasoning", "embeddings", "retrieval", "diffusion", "3d", "sim",
    "edge", "mobile", "privacy", "security", "ranking", "ux", "devex",
]
_PLAIN_NAMESPACES = [
    "ml-research", "training-prod", "data-science", "ml-sandbox",
    "batch-inference", "experiments", "hpo", "benchmarks",
]
_FIRST_NAMES = [
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
    "ivan", "judy", "mallory", "niaj", "olivia", "peggy", "rupert", "sybil",
    "trent", "victor", "walter", "yuki", "zoe", "omar", "priya", "chen",
]

# name stems by kind and by whether the job got GPUs
_GPU_STEMS = {
    PYTORCHJOB: [
        "llama3-8b-sft", "llama3-70b-lora", "mistral-7b-dpo", "gpt-neox-pt",
        "vit-huge-pt", "clip-l14", "whisper-ft", "bert-large-mlm", "t5-xl-ft",
        "sdxl-ft", "resnet152-ddp", "dino-v2", "mixtral-moe", "qwen2-7b-sft",
        "phi3-mini-ft", "codegen-2b", "detr-r101", "wav2vec2-ft",
    ],
    TFJOB: ["bert-base-tf", "efficientnet-b7", "wide-deep", "dlrm-tf", "mnist-tf"],
    MPIJOB: ["horovod-resnet", "nccl-allreduce", "megatron-mpi", "hvd-bert", "deepspeed-mpi"],
}
_CPU_STEMS = {
    PYTORCHJOB: [
        "tokenize-shards", "data-prep", "eval-harness", "feature-extract",
        "dedup-corpus", "embed-index", "cpu-ddp-test", "augment-imgs",
    ],
    TFJOB: ["tfx-transform", "tfrecord-gen", "cpu-estimator"],
    MPIJOB: ["mpi-pi", "osu-bench", "hpl-cpu"],
}
_IMAGES = {
    PYTORCHJOB: [
        "nvcr.io/nvidia/pytorch:24.12-py3",
        "nvcr.io/nvidia/pytorch:25.01-py3",
        "ghcr.io/acme-ml/llm-train:2.5.1-cu124",
        "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        "registry.acme.internal/ml/trainer:v3.14.2",
    ],
    TFJOB: [
        "nvcr.io/nvidia/tensorflow:24.03-tf2-py3",
        "docker.io/tensorflow/tensorflow:2.15.0-gpu",
    ],
    MPIJOB: [
        "docker.io/horovod/horovod:0.28.1",
        "docker.io/mpioperator/mpi-pi:openmpi",
        "nvcr.io/nvidia/pytorch:24.12-py3",
    ],
}
_GPU_PRODUCTS = [
    # product label, pool, family, GPU MiB, cpu cores, memory Ki, instance type
    ("NVIDIA-A100-SXM4-80GB", "a100", "ampere", 81920, 256, 2113600512, "dgx-a100"),
    ("NVIDIA-H100-80GB-HBM3", "h100", "hopper", 81559, 224, 2113470240, "dgx-h100"),
]
_GPU_PER_POD_WEIGHTS = ((1, 0.5), (2, 0.15), (4, 0.15), (8, 0.2))
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


# --------------------------------------------------------------------------
# public API


@dataclass
class ScaleObjects:
    """Everything the scale scenario loads, grouped by kind family."""

    namespaces: list[dict] = field(default_factory=list)
    nodes: list[dict] = field(default_factory=list)
    quotas: list[dict] = field(default_factory=list)
    # PyTorchJob/MPIJob/TFJob custom objects and MPI launcher batch/v1 Jobs
    jobs: list[dict] = field(default_factory=list)
    pods: list[dict] = field(default_factory=list)

    def all(self) -> Iterator[dict]:
        """Namespaces, nodes, quotas, jobs, pods, in that order."""
        yield from self.namespaces
        yield from self.nodes
        yield from self.quotas
        yield from self.jobs
        yield from self.pods


def build_scale(
    nodes: int = 1000,
    pods: int = 20000,
    *,
    namespaces: int = 50,
    gpus_per_node: int = 8,
    seed: int = 0,
    now: datetime | None = None,
) -> ScaleObjects:
    """Build the synthetic cluster. Deterministic for a given seed and ``now``.

    Exactly ``pods`` pods are produced, grouped into training jobs of
    2..64 pods (about 20 on average).
    """
    if nodes < 0 or pods < 0 or namespaces < 1 or gpus_per_node < 0:
        raise ValueError("nodes, pods, gpus_per_node must be >= 0 and namespaces >= 1")
    # Hundreds of thousands of fresh containers would trigger the cyclic GC
    # over and over (each full pass walks the whole growing heap); nothing
    # built here is cyclic, so pause it for the duration.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _Builder(nodes, pods, namespaces, gpus_per_node, seed, now).build()
    finally:
        if gc_was_enabled:
            gc.enable()


def churn_pod(pod: dict, rng: random.Random, now: datetime | None = None) -> dict:
    """Return a changed deep copy of ``pod``; ``pod`` itself is not touched.

    A Running pod flips its first container: running/ready becomes a crash
    (restartCount+1, lastState.terminated, waiting CrashLoopBackOff, Ready and
    ContainersReady False); a not-ready one comes back running and ready.
    Pending pods get a fresh scheduling attempt, terminal pods only a new
    status write. The kubelet/scheduler managedFields time is updated too.
    """
    new = _loads(_dumps(pod))
    t = _epoch(now)
    ts = _ts(t)
    status = new.setdefault("status", {})
    statuses = status.get("containerStatuses") or []
    phase = status.get("phase")
    if phase == "Running" and statuses:
        cs = statuses[0]
        cname = cs.get("name", "main")
        if cs.get("ready"):
            started = (cs.get("state", {}).get("running") or {}).get("startedAt", ts)
            exit_code = rng.choice((1, 1, 1, 137, 139))
            cs["lastState"] = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "OOMKilled" if exit_code == 137 else "Error",
                    "startedAt": started,
                    "finishedAt": ts,
                    "containerID": cs.get("containerID", ""),
                }
            }
            cs["restartCount"] = int(cs.get("restartCount", 0)) + 1
            backoff = min(300, 10 * 2 ** min(cs["restartCount"] - 1, 5))
            meta = new.get("metadata", {})
            cs["state"] = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": (
                        f"back-off {_go_duration(backoff)} restarting failed "
                        f"container={cname} pod={meta.get('name')}_"
                        f"{meta.get('namespace')}({meta.get('uid')})"
                    ),
                }
            }
            cs["ready"] = False
            cs["started"] = False
            _set_ready(status, False, ts, cname)
        else:
            cs["state"] = {"running": {"startedAt": ts}}
            cs["ready"] = True
            cs["started"] = True
            cs["containerID"] = "containerd://" + _hex(rng, 64)
            _set_ready(status, True, ts, cname)
        manager = "kubelet"
    elif phase == "Pending" and not new.get("spec", {}).get("nodeName"):
        for cond in status.get("conditions", []):
            if cond.get("type") == "PodScheduled":
                cond["lastTransitionTime"] = ts
                cond["message"] = _unschedulable_message_from(cond.get("message", ""), rng)
        manager = "kube-scheduler"
    else:
        for cond in status.get("conditions", []):
            if cond.get("type") == "Ready":
                cond["lastProbeTime"] = ts
        manager = "kubelet"
    meta = new.setdefault("metadata", {})
    touched = False
    for entry in meta.get("managedFields", []):
        if entry.get("manager") == manager:
            entry["time"] = ts
            touched = True
    if not touched:
        meta.setdefault("managedFields", []).append(
            {
                "manager": manager,
                "operation": "Update",
                "apiVersion": "v1",
                "time": ts,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": {}}},
                "subresource": "status",
            }
        )
    return new


# --------------------------------------------------------------------------
# small helpers


def _epoch(now: datetime | None) -> int:
    if now is None:
        now = datetime.now(UTC)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return int(now.timestamp())


_DAYS: dict[int, str] = {}


def _ts(epoch: int) -> str:
    """RFC 3339 UTC with a ``Z``, as the API server writes timestamps."""
    day, sec = divmod(epoch, 86400)
    date = _DAYS.get(day)
    if date is None:
        date = _DAYS[day] = time.strftime("%Y-%m-%d", time.gmtime(day * 86400))
    hour, sec = divmod(sec, 3600)
    minute, sec = divmod(sec, 60)
    return f"{date}T{hour:02d}:{minute:02d}:{sec:02d}Z"


_UUID_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_UUID_SET = (4 << 76) | (0x8000 << 48)


def _uid(rng: random.Random) -> str:
    """A version-4 UUID string drawn from ``rng`` (same as ``uuid.UUID(int=..., version=4)``)."""
    h = format((rng.getrandbits(128) & _UUID_CLEAR) | _UUID_SET, "032x")
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _hex(rng: random.Random, n: int) -> str:
    return format(rng.getrandbits(4 * n), f"0{n}x")


def _suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choices(_RAND_ALPHABET, k=n))


def _go_duration(seconds: int) -> str:
    minutes, sec = divmod(seconds, 60)
    return f"{minutes}m{sec}s" if minutes else f"{sec}s"


def _env(name: str, value: str) -> dict:
    return {"name": name, "value": value}


def _env_field(name: str, path: str) -> dict:
    return {"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def _cond(ctype: str, status: str, ts: str, reason: str | None = None, msg: str | None = None) -> dict:
    c: dict[str, Any] = {
        "type": ctype,
        "observedGeneration": 1,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": ts,
    }
    if reason:
        c["reason"] = reason
    if msg:
        c["message"] = msg
    return c


def _set_ready(status: dict, ready: bool, ts: str, cname: str) -> None:
    for cond in status.get("conditions", []):
        if cond.get("type") in ("Ready", "ContainersReady"):
            cond["lastTransitionTime"] = ts
            if ready:
                cond["status"] = "True"
                cond.pop("reason", None)
                cond.pop("message", None)
            else:
                cond["status"] = "False"
                cond["reason"] = "ContainersNotReady"
                cond["message"] = f"containers with unready status: [{cname}]"


def _unschedulable_message(nodes: int, what: str) -> str:
    return (
        f"0/{nodes} nodes are available: {nodes} Insufficient {what}. "
        f"preemption: 0/{nodes} nodes are available: {nodes} No preemption "
        "victims found for incoming pod."
    )


def _unschedulable_message_from(old: str, rng: random.Random) -> str:
    # keep the node count, vary the reason split a little
    try:
        total = int(old.split("/", 1)[1].split(" ", 1)[0])
    except (IndexError, ValueError):
        total = 1
    busy = rng.randint(0, total)
    if busy in (0, total):
        return _unschedulable_message(total, GPU)
    return (
        f"0/{total} nodes are available: {busy} Insufficient {GPU}, "
        f"{total - busy} Insufficient cpu. preemption: 0/{total} nodes are "
        f"available: {total} No preemption victims found for incoming pod."
    )


_POD_LIST_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "env": ("name",),
    "ports": ("containerPort", "protocol"),
    "volumeMounts": ("mountPath",),
    "volumes": ("name",),
    "ownerReferences": ("uid",),
    "conditions": ("type",),
    "podIPs": ("ip",),
    "hostIPs": ("ip",),
    "addresses": ("type",),
}
_SET_LISTS = frozenset({"finalizers"})


def _fields(obj: dict, list_keys: dict[str, tuple[str, ...]], *, root: bool = False) -> dict:
    """A managedFields ``fieldsV1`` tree covering every field of ``obj``."""
    out: dict[str, Any] = {} if root else {".": {}}
    for key, val in obj.items():
        fkey = "f:" + key
        if isinstance(val, dict):
            out[fkey] = _fields(val, list_keys) if val else {}
        elif isinstance(val, list) and val and key in list_keys:
            keys = list_keys[key]
            sub: dict[str, Any] = {} if key == "containers" else {".": {}}
            for item in val:
                ident = {k: item[k] for k in keys if k in item}
                sub["k:" + json.dumps(ident, separators=(",", ":"))] = _fields(item, list_keys)
            out[fkey] = sub
        elif isinstance(val, list) and val and key in _SET_LISTS:
            sub = {".": {}}
            for item in val:
                sub["v:" + json.dumps(item)] = {}
            out[fkey] = sub
        else:
            out[fkey] = {}
    return out


# Read-only fieldsV1 pieces shared between pods (nothing edits fieldsV1 in place;
# churn_pod and the store copy objects before changing them).
_LEAF: dict = {}
_IP_FIELDS: dict = {".": _LEAF, "f:ip": _LEAF}
_KUBELET_STATUS_FIELDS: dict = {
    "f:conditions": _LEAF,
    "f:containerStatuses": _LEAF,
    "f:hostIP": _LEAF,
    "f:hostIPs": _LEAF,
    "f:observedGeneration": _LEAF,
    "f:phase": _LEAF,
    "f:podIP": _LEAF,
    "f:podIPs": _LEAF,
    "f:startTime": _LEAF,
}
_COND_FIELDS: dict[tuple[str, ...], dict] = {}


def _cond_fields(cond: dict) -> dict:
    """fieldsV1 of one pod condition; shared (read-only) between equal shapes."""
    keys = tuple(sorted(cond))
    tree = _COND_FIELDS.get(keys)
    if tree is None:
        tree = _COND_FIELDS[keys] = {".": {}, **{f"f:{k}": {} for k in keys}}
    return tree


def _managed(manager: str, api_version: str, ts: str, tree: dict, subresource: str | None = None) -> dict:
    entry = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "time": ts,
        "fieldsType": "FieldsV1",
        "fieldsV1": tree,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _image_id(image: str) -> str:
    repo = image.rsplit(":", 1)[0]
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


# --------------------------------------------------------------------------
# planning


@dataclass
class _Node:
    name: str
    ip: str
    cidr_base: str  # "10.128.3." ; pod IPs are appended
    cpu_milli: int
    product: str
    next_ip: int = 2


@dataclass
class _Role:
    rtype: str  # Master/Worker/Chief/PS/Launcher
    count: int
    gpu: bool  # eligible for GPUs
    pods: list[tuple[int, str]] = field(default_factory=list)  # (index, state)
    nodes: list[int | None] = field(default_factory=list)


@dataclass
class _Job:
    kind: str
    name: str
    ns: str
    team: str | None
    size: int
    roles: list[_Role]
    state: str = "running"  # running/pending/succeeded/failed
    gpus: int = 0  # per GPU pod; 0 = CPU only
    frac: str | None = None  # Run:ai gpu-fraction
    image: str = ""
    created: int = 0
    uid: str = ""
    launcher_uid: str = ""
    user: str = ""
    priority_class: str | None = None


class _Packer:
    """Best-fit GPU packing with free-GPU buckets; random pick inside a bucket."""

    def __init__(self, nodes: list[_Node], gpus: int, rng: random.Random) -> None:
        self.rng = rng
        self.g = gpus
        self.free = [gpus] * len(nodes)
        self.cpu = [n.cpu_milli for n in nodes]
        self.pods = [0] * len(nodes)
        self.buckets: list[list[int]] = [[] for _ in range(gpus + 1)]
        self.buckets[gpus] = list(range(len(nodes)))
        self.pos = list(range(len(nodes)))
        self.max_pods = 110

    def _move(self, node: int, old: int, new: int) -> None:
        b = self.buckets[old]
        i = self.pos[node]
        last = b.pop()
        if last != node:
            b[i] = last
            self.pos[last] = i
        nb = self.buckets[new]
        self.pos[node] = len(nb)
        nb.append(node)

    def take_gpu(self, g: int, cpu: int) -> int | None:
        for k in range(g, self.g + 1):
            b = self.buckets[k]
            if not b:
                continue
            for _ in range(4):
                node = b[self.rng.randrange(len(b))]
                if self.pods[node] < self.max_pods and self.cpu[node] >= cpu:
                    self._move(node, k, k - g)
                    self.free[node] -= g
                    self.cpu[node] -= cpu
                    self.pods[node] += 1
                    return node
        return None

    def give_gpu(self, node: int, g: int, cpu: int) -> None:
        k = self.free[node]
        self._move(node, k, k + g)
        self.free[node] += g
        self.cpu[node] += cpu
        self.pods[node] -= 1

    def take_cpu(self, cpu: int) -> int | None:
        n = len(self.free)
        if not n:
            return None
        for _ in range(16):
            node = self.rng.randrange(n)
            if self.pods[node] < self.max_pods and self.cpu[node] >= cpu:
                break
        else:
            for node in range(n):
                if self.pods[node] < self.max_pods and self.cpu[node] >= cpu:
                    break
            else:
                return None
        self.cpu[node] -= cpu
        self.pods[node] += 1
        return node


def _mpi_volumes(job: _Job, role: _Role) -> tuple[list[dict], list[dict]]:
    """Volumes and mounts mpi-operator adds (ssh keys; hostfile on the launcher)."""
    if job.kind != MPIJOB:
        return [], []
    ssh_items = [
        {"key": "ssh-privatekey", "path": "id_rsa"},
        {"key": "ssh-publickey", "path": "id_rsa.pub"},
        {"key": "ssh-publickey", "path": "authorized_keys"},
    ]
    vols: list[dict] = [
        {"name": "ssh-auth", "secret": {"secretName": f"{job.name}-ssh", "items": ssh_items, "defaultMode": 384}}
    ]
    mounts: list[dict] = [{"name": "ssh-auth", "mountPath": "/root/.ssh"}]
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


def _gpu_cpu_milli(g: int) -> int:
    return 12000 * g


def _pod_cpu_milli(job: _Job, role: _Role) -> int:
    """CPU request in millicores used for placement."""
    if role.gpu and job.gpus:
        return _gpu_cpu_milli(job.gpus)
    if role.rtype == "Launcher":
        return 1000
    if role.rtype == "PS":
        return 8000
    return 4000


def _job_sizes(rng: random.Random, pods: int) -> list[int]:
    sizes: list[int] = []
    remaining = pods
    while remaining > 0:
        r = rng.random()
        if r < 0.3:
            s = rng.randint(2, 8)
        elif r < 0.7:
            s = rng.randint(9, 24)
        elif r < 0.9:
            s = rng.randint(25, 40)
        else:
            s = rng.randint(41, MAX_JOB_PODS)
        if remaining - s < MIN_JOB_PODS:
            s = remaining
            if s > MAX_JOB_PODS:
                s = remaining // 2
        sizes.append(s)
        remaining -= s
    return sizes


def _roles(kind: str, size: int) -> list[_Role]:
    if kind == PYTORCHJOB:
        roles = [_Role("Master", 1, True)]
        if size > 1:
            roles.append(_Role("Worker", size - 1, True))
    elif kind == TFJOB:
        ps = 1 if size >= 4 else 0
        roles = [_Role("Chief", 1, True)]
        if ps:
            roles.append(_Role("PS", ps, False))
        if size - 1 - ps > 0:
            roles.append(_Role("Worker", size - 1 - ps, True))
    else:
        roles = [_Role("Launcher", 1, False), _Role("Worker", size - 1, True)]
    return roles


# --------------------------------------------------------------------------
# builder


class _Builder:
    def __init__(
        self, nodes: int, pods: int, namespaces: int, gpus_per_node: int, seed: int, now: datetime | None
    ) -> None:
        self.n_nodes = nodes
        self.n_pods = pods
        self.n_ns = namespaces
        self.gpn = gpus_per_node
        self.rng = random.Random(seed)
        self.now = _epoch(now)
        self.out = ScaleObjects()
        self.node_info: list[_Node] = []
        self.gpu_used_ns: dict[str, int] = {}
        self.ns_created: dict[str, int] = {}
        self.image_ids: dict[str, str] = {}
        self._tree_cache: dict[tuple, tuple[dict, dict, dict, dict]] = {}
        self._status_tmpl: dict[tuple[str, str], bytes] = {}
        self._running_cond_fields: dict | None = None

    # ---- top level

    def build(self) -> ScaleObjects:
        self._namespaces()
        self._nodes()
        jobs = self._plan_jobs()
        self._place(jobs)
        for job in jobs:
            self._emit_job(job)
        self._quotas()
        return self.out

    # ---- namespaces

    def _namespaces(self) -> None:
        rng = self.rng
        n_plain = self.n_ns // 10
        n_runai = self.n_ns - n_plain
        self.ns_list: list[tuple[str, str | None]] = []
        for i in range(n_runai):
            team = _TEAMS[i % len(_TEAMS)]
            if i >= len(_TEAMS):
                team = f"{team}{i // len(_TEAMS) + 1}"
            self.ns_list.append((f"runai-{team}", team))
        for i in range(n_plain):
            name = _PLAIN_NAMESPACES[i % len(_PLAIN_NAMESPACES)]
            if i >= len(_PLAIN_NAMESPACES):
                name = f"{name}-{i // len(_PLAIN_NAMESPACES) + 1}"
            self.ns_list.append((name, None))
        # a few big teams, a long tail
        weights = [1.0 / (i + 1) ** 0.7 for i in range(len(self.ns_list))]
        rng.shuffle(weights)
        self.ns_cum = list(accumulate(weights))
        for name, team in self.ns_list:
            created = self.now - rng.randint(30, 400) * 86400 - rng.randint(0, 86399)
            self.ns_created[name] = created
            labels = {"kubernetes.io/metadata.name": name}
            if team is not None:
                labels[RUNAI_QUEUE] = team
            ts = _ts(created)
            meta = {
                "name": name,
                "uid": _uid(rng),
                "creationTimestamp": ts,
                "labels": labels,
                "managedFields": [
                    _managed(
                        "runai-operator" if team else "kubectl-create",
                        "v1",
                        ts,
                        {"f:metadata": {"f:labels": _fields(labels, {})}},
                    )
                ],
            }
            self.out.namespaces.append(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": meta,
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                }
            )

    # ---- nodes

    def _nodes(self) -> None:
        rng = self.rng
        width = max(4, len(str(self.n_nodes)))
        n_a100 = (self.n_nodes * 3 + 4) // 5
        for i in range(self.n_nodes):
            prod = _GPU_PRODUCTS[0] if i < n_a100 else _GPU_PRODUCTS[1]
            product, pool, family, gpu_mib, cores, mem_ki, itype = prod
            name = f"gpu-node-{i + 1:0{width}d}"
            ip = f"10.{(i >> 16) + 1}.{(i >> 8) & 255}.{(i & 255) + 1}" if i < 65000 else f"10.200.0.{i % 250}"
            cidr = f"10.{128 + ((i >> 8) & 127)}.{i & 255}."
            alloc_cpu = cores - 2
            self.node_info.append(_Node(name, ip, cidr, alloc_cpu * 1000, product))
            created = self.now - rng.randint(20, 300) * 86400 - rng.randint(0, 86399)
            ready_since = self.now - rng.randint(3600, 20 * 86400)
            hb = self.now - rng.randint(0, 40)
            ts_c, ts_r, ts_hb = _ts(created), _ts(ready_since), _ts(hb)
            labels = {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": itype,
                "topology.kubernetes.io/region": "dc1",
                "topology.kubernetes.io/zone": f"dc1-{'abcd'[i % 4]}",
                "node-pool": pool,
                "run.ai/node-pool": pool,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": product,
                "nvidia.com/gpu.count": str(self.gpn),
                "nvidia.com/gpu.memory": str(gpu_mib),
                "nvidia.com/gpu.family": family,
                "nvidia.com/gpu.machine": itype.upper(),
                "nvidia.com/cuda.driver.major": "550",
                "nvidia.com/cuda.driver.minor": "127",
                "nvidia.com/cuda.runtime.major": "12",
                "nvidia.com/cuda.runtime.minor": "4",
                "nvidia.com/mig.strategy": "single",
                "feature.node.kubernetes.io/pci-10de.present": "true",
            }
            labels = dict(sorted(labels.items()))
            annotations = {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "nvidia.com/gpu-driver-upgrade-enabled": "true",
            }
            res_cap = {
                "cpu": str(cores),
                "ephemeral-storage": "3750770180Ki",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
                "memory": f"{mem_ki}Ki",
                GPU: str(self.gpn),
                "pods": "110",
            }
            res_alloc = dict(res_cap)
            res_alloc["cpu"] = str(alloc_cpu)
            res_alloc["ephemeral-storage"] = "3456711745442"
            res_alloc["memory"] = f"{mem_ki - 4 * 1024 * 1024}Ki"
            spec = {
                "podCIDR": cidr + "0/24",
                "podCIDRs": [cidr + "0/24"],
                "taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}],
            }
            status = {
                "capacity": res_cap,
                "allocatable": res_alloc,
                "conditions": [
                    {"type": t, "status": "False", "lastHeartbeatTime": ts_hb, "lastTransitionTime": ts_r,
                     "reason": r, "message": m}
                    for t, r, m in (
                        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    )
                ]
                + [
                    {"type": "Ready", "status": "True", "lastHeartbeatTime": ts_hb, "lastTransitionTime": ts_r,
                     "reason": "KubeletReady", "message": "kubelet is posting ready status"}
                ],
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": _hex(rng, 32),
                    "systemUUID": _uid(rng),
                    "bootID": _uid(rng),
                    "kernelVersion": "5.15.0-126-generic",
                    "osImage": "Ubuntu 22.04.5 LTS",
                    "containerRuntimeVersion": "containerd://1.7.24",
                    "kubeletVersion": KUBELET_VERSION,
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
                "images": [
                    {"names": [_image_id(img), img], "sizeBytes": 8_000_000_000 + 1_000_003 * k}
                    for k, img in enumerate(_IMAGES[PYTORCHJOB][:3])
                ],
                "runtimeHandlers": [
                    {"name": h, "features": {"recursiveReadOnlyMounts": True, "userNamespaces": True}}
                    for h in ("nvidia", "runc", "")
                ],
                "features": {"supplementalGroupsPolicy": True},
            }
            meta = {
                "name": name,
                "uid": _uid(rng),
                "creationTimestamp": ts_c,
                "labels": labels,
                "annotations": annotations,
                "managedFields": [
                    _managed(
                        "kubelet",
                        "v1",
                        ts_c,
                        {"f:metadata": {"f:annotations": _fields(annotations, {}), "f:labels": _fields(labels, {})}},
                    ),
                    _managed("kube-controller-manager", "v1", ts_c, {"f:spec": _fields(spec, {}, root=True)}),
                    _managed(
                        "kubelet",
                        "v1",
                        ts_hb,
                        {"f:status": {"f:conditions": {}, "f:images": {}, "f:nodeInfo": {"f:bootID": {}}}},
                        "status",
                    ),
                ],
            }
            self.out.nodes.append(
                {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}
            )

    # ---- job plan

    def _plan_jobs(self) -> list[_Job]:
        rng = self.rng
        jobs: list[_Job] = []
        for i, size in enumerate(_job_sizes(rng, self.n_pods)):
            r = rng.random()
            if size < 2 or r < 0.72:
                kind = PYTORCHJOB
            elif r < 0.87:
                kind = MPIJOB
            else:
                kind = TFJOB if size <= _MAX_TF_PODS else PYTORCHJOB
            ns, team = self.ns_list[bisect(self.ns_cum, rng.random() * self.ns_cum[-1])]
            job = _Job(kind, "", ns, team, size, _roles(kind, size))
            job.uid = _uid(rng)
            job.image = rng.choice(_IMAGES[kind])
            job.user = rng.choice(_FIRST_NAMES)
            if rng.random() < 0.1:
                job.priority_class = "high-priority"
            job.name = f"job{i:05d}"  # provisional; final name once GPUs are known
            jobs.append(job)

        # states: ~5 % of pods Pending (whole gangs), ~2 % finished (not MPI)
        order = list(range(len(jobs)))
        rng.shuffle(order)
        pend_target = round(self.n_pods * 0.05)
        fin_target = round(self.n_pods * 0.02)
        pend = fin = 0
        for j in order:
            job = jobs[j]
            if pend < pend_target and job.size <= pend_target - pend + 2:
                job.state = "pending"
                pend += job.size
            elif fin < fin_target and job.kind != MPIJOB and job.size <= fin_target - fin + 2:
                job.state = "succeeded" if rng.random() < 0.6 else "failed"
                fin += job.size
        return jobs

    def _draw_gpus(self) -> int:
        r = self.rng.random()
        acc = 0.0
        for g, w in _GPU_PER_POD_WEIGHTS:
            acc += w
            if r < acc:
                return min(g, max(1, self.gpn))
        return 1

    # ---- placement

    def _place(self, jobs: list[_Job]) -> None:
        rng = self.rng
        packer = _Packer(self.node_info, self.gpn, rng)
        expected_g = sum(min(g, max(1, self.gpn)) * w for g, w in _GPU_PER_POD_WEIGHTS)
        running = [j for j in jobs if j.state == "running"]
        gpu_pods = sum(r.count for j in running for r in j.roles if r.gpu)
        capacity = self.n_nodes * self.gpn
        p_gpu = min(1.0, _GPU_FILL * capacity / (expected_g * gpu_pods)) if gpu_pods and capacity else 0.0

        for job in jobs:
            for role in job.roles:
                for idx in range(role.count):
                    role.pods.append((idx, job.state))
                    role.nodes.append(None)
            if job.state == "pending":
                job.gpus = self._draw_gpus() if self.gpn else 0
            elif job.state in ("succeeded", "failed"):
                job.gpus = self._draw_gpus() if self.gpn and rng.random() < p_gpu else 0
                for role in job.roles:
                    role.nodes = [rng.randrange(self.n_nodes) if self.n_nodes else None for _ in role.nodes]

        order = list(range(len(running)))
        rng.shuffle(order)
        for j in order:
            job = running[j]
            if not (capacity and rng.random() < p_gpu):
                continue
            want = self._draw_gpus()
            frac = job.team is not None and want == 1 and rng.random() < 0.08
            g = want
            while g >= 1:
                placed: list[tuple[_Role, int, int]] = []
                ok = True
                for role in job.roles:
                    if not role.gpu:
                        continue
                    for k in range(role.count):
                        node = packer.take_gpu(g, _gpu_cpu_milli(g))
                        if node is None:
                            ok = False
                            break
                        placed.append((role, k, node))
                    if not ok:
                        break
                if ok:
                    for role, k, node in placed:
                        role.nodes[k] = node
                    job.gpus = g
                    if frac:
                        job.frac = rng.choice(("0.5", "0.5", "0.25", "0.75"))
                    break
                for _role, _k, node in placed:
                    packer.give_gpu(node, g, _gpu_cpu_milli(g))
                g //= 2

        # CPU pods: CPU-only jobs, launchers, parameter servers
        for j in order:
            job = running[j]
            for role in job.roles:
                if role.gpu and job.gpus:
                    continue
                cpu = _pod_cpu_milli(job, role)
                for k in range(role.count):
                    node = packer.take_cpu(cpu)
                    role.nodes[k] = node
                    if node is None:
                        role.pods[k] = (role.pods[k][0], "unschedulable")

        # pod states inside running jobs
        for job in running:
            for role in job.roles:
                for k, (idx, _state) in enumerate(role.pods):
                    if role.nodes[k] is None:
                        continue
                    r = rng.random()
                    state = "crash" if r < 0.004 else "restarted" if r < 0.03 else "running"
                    role.pods[k] = (idx, state)

        # names and timestamps now that GPU use is known
        for i, job in enumerate(jobs):
            stems = _GPU_STEMS if job.gpus else _CPU_STEMS
            job.name = f"{rng.choice(stems[job.kind])}-{i:04d}"
            if job.state == "running":
                job.created = self.now - rng.randint(900, 10 * 86400)
            elif job.state == "pending":
                job.created = self.now - rng.randint(60, 6 * 3600)
            else:
                job.created = self.now - rng.randint(2 * 86400, 14 * 86400)
            job.created = max(job.created, self.ns_created[job.ns] + 3600)
            if job.kind == MPIJOB:
                job.launcher_uid = _uid(rng)

    # ---- emit job + pods

    def _container_name(self, job: _Job, role: _Role) -> str:
        if job.kind == PYTORCHJOB:
            return "pytorch"
        if job.kind == TFJOB:
            return "tensorflow"
        return "mpi-launcher" if role.rtype == "Launcher" else "mpi-worker"

    def _resources(self, job: _Job, role: _Role) -> dict:
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

    def _user_env(self, job: _Job, role: _Role) -> list[dict]:
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

    def _command(self, job: _Job, role: _Role) -> tuple[list[str], list[str]]:
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

    def _user_volumes(self, job: _Job, role: _Role) -> tuple[list[dict], list[dict]]:
        if role.rtype == "Launcher":
            return [], []
        team = job.team or job.ns
        vols: list[dict] = [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
            {"name": "data", "persistentVolumeClaim": {"claimName": f"{team}-data"}},
        ]
        mounts: list[dict] = [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "data", "mountPath": "/data"},
        ]
        return vols, mounts

    def _template_container(self, job: _Job, role: _Role) -> dict:
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

    def _template_labels(self, job: _Job) -> dict:
        labels = {"owner": job.user}
        if job.team is not None:
            labels["project"] = job.team
        return labels

    def _pod_labels(self, job: _Job, role: _Role) -> dict:
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

    def _operator_env(self, job: _Job, role: _Role) -> list[dict]:
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

    def _pod_template(self, job: _Job, role: _Role) -> tuple[bytes, dict, dict]:
        """Pod JSON (no status) with substitution tokens for per-pod values.

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
        ordered = {
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

        if job.kind == PYTORCHJOB:
            restart = "OnFailure"
        elif job.kind == TFJOB:
            restart = "Never"
        else:
            restart = "OnFailure" if role.rtype == "Launcher" else "Never"
        spec: dict[str, Any] = {
            "volumes": vols,
            "containers": [ordered],
            "restartPolicy": restart,
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
            spec_tree = _fields(op_spec, _POD_LIST_KEYS, root=True)
            # every pod has its own kube-api-access-xxxxx volume; added per pod
            kapi_key = "k:" + json.dumps({"name": kapi}, separators=(",", ":"))
            kapi_tree = spec_tree["f:volumes"].pop(kapi_key)
            meta_tree = _fields(owned_meta, _POD_LIST_KEYS, root=True)
            owner_tree = next(v for k, v in meta_tree["f:ownerReferences"].items() if k != ".")
            cached = self._tree_cache[shape] = (meta_tree, owner_tree, spec_tree, kapi_tree)
        meta_tree, owner_tree, spec_tree, kapi_tree = cached
        meta_tree = dict(meta_tree)
        meta_tree["f:ownerReferences"] = {".": {}, f'k:{{"uid":"{owner["uid"]}"}}': owner_tree}
        meta["managedFields"] = [_managed(manager, "v1", _T_CTS.decode(), {})]
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        return _dumps(pod), {"f:metadata": meta_tree, "f:spec": spec_tree}, kapi_tree

    def _emit_job(self, job: _Job) -> None:
        rng = self.rng
        out_pods = self.out.pods
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
                kapi = _suffix(rng)
                b = (
                    tmpl.replace(_T_NAME, pname.encode())
                    .replace(_T_UID, _uid(rng).encode())
                    .replace(_T_IDX, str(idx).encode())
                    .replace(_T_RANK, str(rank).encode())
                    .replace(_T_KAPI, kapi.encode())
                    .replace(_T_CTS, _ts(created).encode())
                    .replace(_T_NODE, node.name.encode() if node else b"")
                )
                pod = _loads(b)
                if node is None:
                    del pod["spec"]["nodeName"]
                vols = dict(vols_tree)
                vols[f'k:{{"name":"kube-api-access-{kapi}"}}'] = kapi_tree
                spec_fields = dict(spec_tree)
                spec_fields["f:volumes"] = vols
                mfields = pod["metadata"]["managedFields"]
                mfields[0]["fieldsV1"] = {"f:metadata": meta_tree, "f:spec": spec_fields}
                status, kubelet = self._pod_status(job, role, state, created, node, res, cname, pod)
                pod["status"] = status
                mfields.append(kubelet)
                out_pods.append(pod)
                if gpu_req and role.gpu and state not in ("succeeded", "failed"):
                    self.gpu_used_ns[job.ns] = self.gpu_used_ns.get(job.ns, 0) + gpu_req
        self._job_objects(job)

    def _pod_name(self, job: _Job, role: _Role, idx: int) -> str:
        if job.kind == MPIJOB and role.rtype == "Launcher":
            return f"{job.name}-launcher-{_suffix(self.rng)}"
        return f"{job.name}-{role.rtype.lower()}-{idx}"

    def _pod_status(
        self,
        job: _Job,
        role: _Role,
        state: str,
        created: int,
        node: _Node | None,
        res: dict,
        cname: str,
        pod: dict,
    ) -> tuple[dict, dict]:
        rng = self.rng
        now = self.now
        qos = "Guaranteed" if res.get("limits") == res.get("requests") else "Burstable"
        if node is None:
            if state == "unschedulable":
                msg = _unschedulable_message(self.n_nodes, "cpu")
            else:
                msg = _unschedulable_message(self.n_nodes, GPU if job.gpus else "cpu")
            ts_c = _ts(created)
            status = {
                "observedGeneration": 1,
                "phase": "Pending",
                "conditions": [_cond("PodScheduled", "False", ts_c, "Unschedulable", msg)],
                "qosClass": qos,
            }
            tree = {
                "f:status": {
                    "f:conditions": {
                        ".": {},
                        'k:{"type":"PodScheduled"}': {
                            ".": {},
                            "f:lastProbeTime": {},
                            "f:lastTransitionTime": {},
                            "f:message": {},
                            "f:observedGeneration": {},
                            "f:reason": {},
                            "f:status": {},
                            "f:type": {},
                        },
                    }
                }
            }
            return status, _managed("kube-scheduler", "v1", _ts(now - rng.randint(0, 30)), tree, "status")

        ip = node.cidr_base + str(node.next_ip)
        node.next_ip = node.next_ip + 1 if node.next_ip < 254 else 2
        sched = created + rng.randint(0, 3)
        start = sched + 1
        c_start = start + rng.randint(5, 240)
        if state == "running":  # ~90 % of pods: the template fast path
            return self._running_status(job, role, res, cname, qos, node, ip, sched, start, c_start)
        ts_sched, ts_start, ts_cstart = _ts(sched), _ts(start), _ts(c_start)
        image = job.image
        image_id = self.image_ids.get(image)
        if image_id is None:
            image_id = self.image_ids[image] = _image_id(image)
        cid = "containerd://" + _hex(rng, 64)
        restarts = 0
        last_state: dict[str, Any] = {}
        ready = True
        kubelet_ts = c_start + 1
        if state in ("running", "restarted"):
            phase = "Running"
            c_state: dict[str, Any] = {"running": {"startedAt": ts_cstart}}
            if state == "restarted":
                restarts = rng.randint(1, 3)
                first = c_start
                c_start = rng.randint(first + 60, max(first + 61, now - 30))
                c_state = {"running": {"startedAt": _ts(c_start)}}
                last_state = {
                    "terminated": {
                        "exitCode": rng.choice((1, 137)),
                        "reason": "Error",
                        "startedAt": ts_cstart,
                        "finishedAt": _ts(c_start - 1),
                        "containerID": "containerd://" + _hex(rng, 64),
                    }
                }
                last_state["terminated"]["reason"] = (
                    "OOMKilled" if last_state["terminated"]["exitCode"] == 137 else "Error"
                )
                kubelet_ts = c_start + 1
            conds = [
                _cond("PodReadyToStartContainers", "True", _ts(start + 2)),
                _cond("Initialized", "True", ts_start),
                _cond("Ready", "True", _ts(c_start + 1)),
                _cond("ContainersReady", "True", _ts(c_start + 1)),
                _cond("PodScheduled", "True", ts_sched),
            ]
            started = True
        elif state == "crash":
            phase = "Running"
            ready = False
            restarts = rng.randint(4, 40)
            fin = now - rng.randint(5, 280)
            backoff = min(300, 10 * 2 ** min(restarts - 1, 5))
            c_state = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": (
                        f"back-off {_go_duration(backoff)} restarting failed container={cname} "
                        f"pod={pod['metadata']['name']}_{job.ns}({pod['metadata']['uid']})"
                    ),
                }
            }
            last_state = {
                "terminated": {
                    "exitCode": 1,
                    "reason": "Error",
                    "startedAt": _ts(fin - rng.randint(3, 60)),
                    "finishedAt": _ts(fin),
                    "containerID": cid,
                }
            }
            not_ready_since = _ts(max(c_start + 5, now - rng.randint(600, 7200)))
            msg = f"containers with unready status: [{cname}]"
            conds = [
                _cond("PodReadyToStartContainers", "True", _ts(start + 2)),
                _cond("Initialized", "True", ts_start),
                _cond("Ready", "False", not_ready_since, "ContainersNotReady", msg),
                _cond("ContainersReady", "False", not_ready_since, "ContainersNotReady", msg),
                _cond("PodScheduled", "True", ts_sched),
            ]
            started = False
            kubelet_ts = fin + 1
        else:  # succeeded / failed
            ok = state == "succeeded"
            phase = "Succeeded" if ok else "Failed"
            ready = False
            finished = min(now - 60, c_start + rng.randint(3600, 2 * 86400))
            finished = max(finished, c_start + 1)
            c_state = {
                "terminated": {
                    "exitCode": 0 if ok else 1,
                    "reason": "Completed" if ok else "Error",
                    "startedAt": ts_cstart,
                    "finishedAt": _ts(finished),
                    "containerID": cid,
                }
            }
            reason = "PodCompleted" if ok else "PodFailed"
            ts_fin = _ts(finished + 1)
            conds = [
                _cond("PodReadyToStartContainers", "False", ts_fin),
                _cond("Initialized", "True", ts_start, "PodCompleted" if ok else None),
                _cond("Ready", "False", ts_fin, reason),
                _cond("ContainersReady", "False", ts_fin, reason),
                _cond("PodScheduled", "True", ts_sched),
            ]
            started = False
            kubelet_ts = finished + 1

        cstatus = {
            "name": cname,
            "state": c_state,
            "lastState": last_state,
            "ready": ready,
            "restartCount": restarts,
            "image": image,
            "imageID": image_id,
            "containerID": cid,
            "started": started,
            "resources": {k: dict(v) for k, v in res.items()},
            "user": {"linux": {"uid": 0, "gid": 0, "supplementalGroups": [0]}},
        }
        ip_list = [{"ip": ip}]
        status = {
            "observedGeneration": 1,
            "phase": phase,
            "conditions": conds,
            "hostIP": node.ip,
            "hostIPs": [{"ip": node.ip}],
            "podIP": ip,
            "podIPs": ip_list,
            "startTime": ts_start,
            "containerStatuses": [cstatus],
            "qosClass": qos,
        }
        cond_fields = {}
        for c in sorted(conds, key=lambda c: c["type"]):
            if c["type"] != "PodScheduled":  # the scheduler's, not the kubelet's
                cond_fields[f'k:{{"type":"{c["type"]}"}}'] = _cond_fields(c)
        fields = dict(_KUBELET_STATUS_FIELDS)
        fields["f:conditions"] = cond_fields
        fields["f:podIPs"] = {".": _LEAF, f'k:{{"ip":"{ip}"}}': _IP_FIELDS}
        return status, _managed("kubelet", "v1", _ts(min(kubelet_ts, now)), {"f:status": fields}, "status")

    def _running_status(
        self,
        job: _Job,
        role: _Role,
        res: dict,
        cname: str,
        qos: str,
        node: _Node,
        ip: str,
        sched: int,
        start: int,
        c_start: int,
    ) -> tuple[dict, dict]:
        """Status of a healthy Running pod, expanded from a per-(job, role) JSON template."""
        key = (job.uid, role.rtype)
        tmpl = self._status_tmpl.get(key)
        if tmpl is None:
            image_id = self.image_ids.get(job.image)
            if image_id is None:
                image_id = self.image_ids[job.image] = _image_id(job.image)
            status = {
                "observedGeneration": 1,
                "phase": "Running",
                "conditions": [
                    _cond("PodReadyToStartContainers", "True", "@@T_PRS@@"),
                    _cond("Initialized", "True", "@@T_START@@"),
                    _cond("Ready", "True", "@@T_READY@@"),
                    _cond("ContainersReady", "True", "@@T_READY@@"),
                    _cond("PodScheduled", "True", "@@T_SCHED@@"),
                ],
                "hostIP": "@@HOSTIP@@",
                "hostIPs": [{"ip": "@@HOSTIP@@"}],
                "podIP": "@@PODIP@@",
                "podIPs": [{"ip": "@@PODIP@@"}],
                "startTime": "@@T_START@@",
                "containerStatuses": [
                    {
                        "name": cname,
                        "state": {"running": {"startedAt": "@@T_CSTART@@"}},
                        "lastState": {},
                        "ready": True,
                        "restartCount": 0,
                        "image": job.image,
                        "imageID": image_id,
                        "containerID": "containerd://@@CID@@",
                        "started": True,
                        "resources": res,
                        "user": {"linux": {"uid": 0, "gid": 0, "supplementalGroups": [0]}},
                    }
                ],
                "qosClass": qos,
            }
            tmpl = self._status_tmpl[key] = _dumps(status)
        ts_ready = _ts(c_start + 1)
        status = _loads(
            tmpl.replace(b"@@T_PRS@@", _ts(start + 2).encode())
            .replace(b"@@T_START@@", _ts(start).encode())
            .replace(b"@@T_READY@@", ts_ready.encode())
            .replace(b"@@T_SCHED@@", _ts(sched).encode())
            .replace(b"@@T_CSTART@@", _ts(c_start).encode())
            .replace(b"@@HOSTIP@@", node.ip.encode())
            .replace(b"@@PODIP@@", ip.encode())
            .replace(b"@@CID@@", _hex(self.rng, 64).encode())
        )
        cond_fields = self._running_cond_fields
        if cond_fields is None:
            cond_fields = self._running_cond_fields = {
                f'k:{{"type":"{c["type"]}"}}': _cond_fields(c)
                for c in sorted(status["conditions"], key=lambda c: c["type"])
                if c["type"] != "PodScheduled"
            }
        fields = dict(_KUBELET_STATUS_FIELDS)
        fields["f:conditions"] = cond_fields
        fields["f:podIPs"] = {".": _LEAF, f'k:{{"ip":"{ip}"}}': _IP_FIELDS}
        return status, _managed("kubelet", "v1", ts_ready, {"f:status": fields}, "status")

    # ---- job custom objects

    def _job_objects(self, job: _Job) -> None:
        rng = self.rng
        ts_c = _ts(job.created)
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
            if job.kind == PYTORCHJOB:
                restart = "OnFailure"
            elif job.kind == TFJOB:
                restart = "Never"
            else:
                restart = "OnFailure" if role.rtype == "Launcher" else "Never"
            replica_specs[role.rtype] = {
                "replicas": role.count,
                "restartPolicy": restart,
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
                    "lastUpdateTime": _ts(running_since),
                    "lastTransitionTime": _ts(running_since),
                }
            )
        elif job.state in ("succeeded", "failed"):
            completion = min(self.now - 60, running_since + rng.randint(3600, 2 * 86400))
            ts_done = _ts(completion)
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
        status: dict[str, Any] = {"conditions": conds, "replicaStatuses": replica_statuses, "startTime": _ts(start)}
        if completion is not None:
            status["completionTime"] = _ts(completion)
        status["lastReconcileTime"] = _ts(max(start, self.now - rng.randint(0, 600)))

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
                _managed(
                    submitter,
                    api,
                    ts_c,
                    {"f:metadata": {"f:labels": _fields(labels, {})}, "f:spec": _fields(spec, {}, root=True)},
                ),
                _managed(
                    operator,
                    api,
                    status["lastReconcileTime"],
                    {"f:status": _fields(status, {}, root=True)},
                    "status",
                ),
            ],
        }
        self.out.jobs.append({"apiVersion": api, "kind": job.kind, "metadata": meta, "spec": spec, "status": status})
        if job.kind == MPIJOB:
            self._launcher_job(job, replica_specs["Launcher"]["template"])

    def _launcher_job(self, job: _Job, template: dict) -> None:
        rng = self.rng
        lname = f"{job.name}-launcher"
        ts_c = _ts(job.created + 1)
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
                _managed(
                    "mpi-operator",
                    "batch/v1",
                    ts_c,
                    {
                        "f:metadata": {
                            "f:labels": _fields(labels, {}),
                            "f:ownerReferences": {".": {}, f'k:{{"uid":"{job.uid}"}}': {}},
                        },
                        "f:spec": _fields(
                            {k: v for k, v in spec.items() if k not in ("selector", "manualSelector")},
                            _POD_LIST_KEYS,
                            root=True,
                        ),
                    },
                ),
                _managed(
                    "kube-controller-manager",
                    "batch/v1",
                    _ts(max(job.created + 2, self.now - rng.randint(0, 600))),
                    {"f:status": _fields(status, {}, root=True)},
                    "status",
                ),
            ],
        }
        self.out.jobs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec, "status": status})

    # ---- quotas

    def _quotas(self) -> None:
        rng = self.rng
        for name, team in self.ns_list:
            used = self.gpu_used_ns.get(name, 0)
            hard = max(8, -(-int(used * 1.25) // 8) * 8)
            created = self.ns_created[name] + rng.randint(60, 3600)
            ts_c = _ts(created)
            spec = {"hard": {GPU_QUOTA_KEY: str(hard)}}
            status = {"hard": {GPU_QUOTA_KEY: str(hard)}, "used": {GPU_QUOTA_KEY: str(used)}}
            labels = {"app.kubernetes.io/managed-by": "runai" if team else "platform-admin"}
            meta = {
                "name": "gpu-quota",
                "namespace": name,
                "uid": _uid(rng),
                "creationTimestamp": ts_c,
                "labels": labels,
                "managedFields": [
                    _managed(
                        "kubectl-client-side-apply",
                        "v1",
                        ts_c,
                        {"f:metadata": {"f:labels": _fields(labels, {})}, "f:spec": _fields(spec, {}, root=True)},
                    ),
                    _managed(
                        "kube-controller-manager",
                        "v1",
                        _ts(max(created + 1, self.now - rng.randint(0, 300))),
                        {"f:status": _fields(status, {}, root=True)},
                        "status",
                    ),
                ],
            }
            self.out.quotas.append(
                {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta, "spec": spec, "status": status}
            )
