"""What the scale builders share: the GPU resource, label keys, workload kinds and their images,
timestamps, random ids, and managedFields (``fieldsV1``) trees."""

from __future__ import annotations

import hashlib
import json
import random
import time
from datetime import UTC, datetime
from typing import Any

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

_RAND_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s utilrand alphabet

IMAGES = {
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

def epoch_of(now: datetime | None) -> int:
    if now is None:
        now = datetime.now(UTC)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return int(now.timestamp())


_DAYS: dict[int, str] = {}


def rfc3339(epoch: int) -> str:
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


def random_uid(rng: random.Random) -> str:
    """A version-4 UUID string drawn from ``rng`` (same as ``uuid.UUID(int=..., version=4)``)."""
    h = format((rng.getrandbits(128) & _UUID_CLEAR) | _UUID_SET, "032x")
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def random_hex(rng: random.Random, n: int) -> str:
    return format(rng.getrandbits(4 * n), f"0{n}x")


def random_suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choices(_RAND_ALPHABET, k=n))


POD_LIST_KEYS: dict[str, tuple[str, ...]] = {
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


def fields_v1(obj: dict[str, Any], list_keys: dict[str, tuple[str, ...]], *, root: bool = False) -> dict[str, Any]:
    """A managedFields ``fieldsV1`` tree covering every field of ``obj``."""
    out: dict[str, Any] = {} if root else {".": {}}
    for key, val in obj.items():
        fkey = "f:" + key
        if isinstance(val, dict):
            out[fkey] = fields_v1(val, list_keys) if val else {}
        elif isinstance(val, list) and val and key in list_keys:
            keys = list_keys[key]
            sub: dict[str, Any] = {} if key == "containers" else {".": {}}
            for item in val:
                ident = {k: item[k] for k in keys if k in item}
                sub["k:" + json.dumps(ident, separators=(",", ":"))] = fields_v1(item, list_keys)
            out[fkey] = sub
        elif isinstance(val, list) and val and key in _SET_LISTS:
            sub = {".": {}}
            for item in val:
                sub["v:" + json.dumps(item)] = {}
            out[fkey] = sub
        else:
            out[fkey] = {}
    return out


def managed_entry(manager: str, api_version: str, ts: str, tree: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
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


def image_id_of(image: str) -> str:
    """A made-up digest reference for an image (the name as given, not normalised)."""
    repo = image.rsplit(":", 1)[0]
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


