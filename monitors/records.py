"""Slim immutable records of what the views need, parsed from raw API JSON.

A 7 KB pod becomes a few hundred bytes: no `V1Pod`, no managedFields, no env. Strings that
repeat across thousands of objects (label keys, node names, phases) are interned.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any

_intern = sys.intern

Labels = tuple[str, ...]  # flat and sorted by key: (k0, v0, k1, v1, ...): one tuple per object, not one per pair
Taint = tuple[str, str, str]  # (key, value, effect)
Toleration = tuple[str, str, str, str]  # (key, operator, value, effect); "" key with Exists: every taint


def parse_time(value: Any) -> float | None:
    """An RFC 3339 time as a POSIX timestamp; None for anything else (garbage, not a string, out of range)."""
    if not value or not isinstance(value, str) or len(value) > 64:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError, OSError):  # OverflowError, OSError: a year the platform cannot place
        return None


def flat_labels(d: Any) -> Labels:
    """Labels (or annotations) as one flat tuple sorted by key, strings interned. Anything but a JSON
    object: none; a value that is not a string: as JSON writes a number or boolean, else ""."""
    if not d or not isinstance(d, dict):
        return ()
    out: list[str] = []
    for k, v in sorted((str(k), v if type(v) is str else _text(v)) for k, v in d.items()):
        out += (_intern(k), _intern(v))
    return tuple(out)


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v) if isinstance(v, int | float) else ""


def decimal(s: str) -> int | None:
    """`s` as a number where it is one written in ASCII digits, as indices and counts in labels, names
    and cells are ("²" and "٣" pass `str.isdigit` but are none; nor are 5,000 digits)."""
    return int(s) if 0 < len(s) <= 18 and s.isascii() and s.isdigit() else None


def pairs(flat: Labels) -> tuple[tuple[str, str], ...]:
    return tuple(zip(flat[::2], flat[1::2], strict=True))


def lookup(flat: Labels, key: str, default: str = "") -> str:
    for i in range(0, len(flat), 2):
        if flat[i] == key:
            return flat[i + 1]
    return default


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: `frozen` costs 7x per record
class Owner:
    kind: str
    name: str
    uid: str


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: `frozen` costs 7x per record
class Exit:
    """A terminated container instance."""

    container: str
    exit_code: int
    reason: str
    finished_at: float | None
    message: str = ""


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: `frozen` costs 7x per record
class PodRec:
    namespace: str
    name: str
    uid: str
    labels: Labels
    owner: Owner | None
    node: str
    phase: str
    reason: str  # what kubectl's STATUS column would show (ContainerCreating, CrashLoopBackOff, OOMKilled...)
    message: str
    restarts: int
    ready: int
    total: int
    pod_ip: str
    gpus: float
    created: float | None
    started: float | None
    deleting: bool
    unschedulable: str  # the scheduler's message while PodScheduled=False
    command: tuple[str, ...]  # the first container's command + args
    containers: tuple[str, ...]
    exits: tuple[Exit, ...]  # terminated states: current and last, per container
    annotations: Labels
    node_selector: Labels = ()  # spec.nodeSelector, flat as labels
    tolerations: tuple[Toleration, ...] = ()
    # made from a Table row (`monitors.pod_rows`): labels, owner and GPUs are inferred from the name,
    # and uid, exits, command and the scheduler's message are not known until a full object arrives
    partial: bool = False
    # when its deletion was asked for (deletionTimestamp less deletionGracePeriodSeconds: the API
    # server sets the timestamp to the end of the grace period); None: not being deleted, or unknown
    delete_asked: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def label(self, key: str, default: str = "") -> str:
        return lookup(self.labels, key, default)

    def annotation(self, key: str, default: str = "") -> str:
        return lookup(self.annotations, key, default)

    @property
    def terminated(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def claimed(self, labels: Labels, owner: Owner | None, gpus: float) -> PodRec:
        """This record with the labels, owner and GPUs its workload gave it (a Table row's pod, once
        its workload is known); four times cheaper than `dataclasses.replace`."""
        return PodRec(self.namespace, self.name, self.uid, labels, owner, self.node, self.phase, self.reason,
                      self.message, self.restarts, self.ready, self.total, self.pod_ip, gpus, self.created,
                      self.started, self.deleting, self.unschedulable, self.command, self.containers, self.exits,
                      self.annotations, self.node_selector, self.tolerations, self.partial, self.delete_asked)


# what the kubelet sends a container whose pod is deleted: SIGTERM, then SIGKILL when the grace ends
DELETION_EXITS = (128 + 15, 128 + 9)


def stopped_by_deletion(p: PodRec, ex: Exit, succeeded_at: float | None = None) -> bool:
    """Whether `ex` is a container stopped because its pod was deleted (an operator's clean-up, a
    user's delete), not a failure of its own: the pod is being deleted and the container ended
    after the deletion was asked for (a container that had failed before is a failure still).
    Timestamps are whole seconds: one ending the second the deletion was asked for was stopped by
    it when it died of the kubelet's SIGTERM or SIGKILL (143, 137). `succeeded_at`: when its job
    succeeded; whatever ended after that in a pod being deleted is the clean-up's (torchrun ends
    with 1 on SIGTERM). OOMKilled is always a failure."""
    if not p.deleting or ex.exit_code == 0 or ex.reason == "OOMKilled":
        return False
    ended = ex.finished_at
    if ended is not None and succeeded_at is not None and ended >= succeeded_at:
        return True
    asked = p.delete_asked
    if ended is None or asked is None:
        return ex.exit_code in DELETION_EXITS
    if ended != asked:
        return ended > asked
    return ex.exit_code in DELETION_EXITS


@dataclass(frozen=True, slots=True)
class ReplicaSpec:
    rtype: str  # as in the spec (Master, Worker, Launcher, Chief, PS...) or a replicatedJob name
    replicas: int
    gpus_per_replica: float
    command: tuple[str, ...]
    restart_policy: str


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    at: float | None


@dataclass(frozen=True, slots=True)
class JobRec:
    """A workload object: a Kubeflow job, TrainJob, JobSet, Run:ai workload, or a batch Job."""

    kind: str
    group: str
    version: str
    namespace: str
    name: str
    uid: str
    labels: Labels
    annotations: Labels
    owner: Owner | None
    created: float | None
    conditions: tuple[Condition, ...]
    replicas: tuple[ReplicaSpec, ...]
    suspended: bool
    min_available: int | None
    started: float | None
    completed: float | None
    extra: tuple[tuple[str, Any], ...] = ()  # kind-specific bits (slotsPerWorker, completion mode...)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.kind, self.name)

    def label(self, key: str, default: str = "") -> str:
        return lookup(self.labels, key, default)

    def annotation(self, key: str, default: str = "") -> str:
        return lookup(self.annotations, key, default)

    def get_extra(self, key: str, default: Any = None) -> Any:
        for k, v in self.extra:
            if k == key:
                return v
        return default


@dataclass(frozen=True, slots=True)
class NamespaceRec:
    name: str
    labels: Labels
    phase: str

    def label(self, key: str, default: str = "") -> str:
        return lookup(self.labels, key, default)


@dataclass(frozen=True, slots=True)
class QuotaRec:
    namespace: str
    name: str
    gpu_hard: float | None
    gpu_used: float | None


@dataclass(frozen=True, slots=True)
class NodeRec:
    name: str
    labels: Labels
    gpus: float
    ready: bool
    unschedulable: bool
    pool: str
    product: str
    taints: tuple[Taint, ...] = ()

    def label(self, key: str, default: str = "") -> str:
        return lookup(self.labels, key, default)


@dataclass(frozen=True, slots=True)
class EventRec:
    namespace: str
    name: str
    kind: str
    object_name: str
    object_uid: str
    type: str
    reason: str
    message: str
    count: int
    last: float | None
