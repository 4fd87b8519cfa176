"""Namespaces of the scale scenario: Run:ai projects (``runai-<team>`` labelled
``runai/queue=<team>``) and a few plain ones, a few big and a long tail (the weights by which
workloads pick them), and one ``ResourceQuota`` per namespace on ``requests.nvidia.com/gpu``."""

from __future__ import annotations

import random
from bisect import bisect
from itertools import accumulate
from typing import Any

from .shared import GPU_QUOTA_KEY, RUNAI_QUEUE, fields_v1, managed_entry, random_uid, rfc3339

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


class NamespaceBuilder:
    def __init__(self, rng: random.Random, now: int) -> None:
        self.rng = rng
        self.now = now
        self.ns_list: list[tuple[str, str | None]] = []  # (name, Run:ai team or None)
        self.ns_cum: list[float] = []
        self.ns_created: dict[str, int] = {}

    def namespaces(self, count: int) -> list[dict[str, Any]]:
        """`count` namespaces: a tenth of them plain, the rest Run:ai projects."""
        rng = self.rng
        out: list[dict[str, Any]] = []
        n_plain = count // 10
        n_runai = count - n_plain
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
        for name, queue in self.ns_list:
            created = self.now - rng.randint(30, 400) * 86400 - rng.randint(0, 86399)
            self.ns_created[name] = created
            labels = {"kubernetes.io/metadata.name": name}
            if queue is not None:
                labels[RUNAI_QUEUE] = queue
            ts = rfc3339(created)
            meta = {
                "name": name,
                "uid": random_uid(rng),
                "creationTimestamp": ts,
                "labels": labels,
                "managedFields": [
                    managed_entry(
                        "runai-operator" if queue else "kubectl-create",
                        "v1",
                        ts,
                        {"f:metadata": {"f:labels": fields_v1(labels, {})}},
                    )
                ],
            }
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": meta,
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                }
            )
        return out

    def pick(self) -> tuple[str, str | None]:
        """A namespace for a workload: (name, team)."""
        return self.ns_list[bisect(self.ns_cum, self.rng.random() * self.ns_cum[-1])]

    def quotas(self, gpu_used: dict[str, int]) -> list[dict[str, Any]]:
        """One GPU quota per namespace, a quarter above what it uses (`gpu_used`), at least 8."""
        rng = self.rng
        out: list[dict[str, Any]] = []
        for name, team in self.ns_list:
            used = gpu_used.get(name, 0)
            hard = max(8, -(-int(used * 1.25) // 8) * 8)
            created = self.ns_created[name] + rng.randint(60, 3600)
            ts_c = rfc3339(created)
            spec = {"hard": {GPU_QUOTA_KEY: str(hard)}}
            status = {"hard": {GPU_QUOTA_KEY: str(hard)}, "used": {GPU_QUOTA_KEY: str(used)}}
            labels = {"app.kubernetes.io/managed-by": "runai" if team else "platform-admin"}
            meta = {
                "name": "gpu-quota",
                "namespace": name,
                "uid": random_uid(rng),
                "creationTimestamp": ts_c,
                "labels": labels,
                "managedFields": [
                    managed_entry(
                        "kubectl-client-side-apply",
                        "v1",
                        ts_c,
                        {"f:metadata": {"f:labels": fields_v1(labels, {})}, "f:spec": fields_v1(spec, {}, root=True)},
                    ),
                    managed_entry(
                        "kube-controller-manager",
                        "v1",
                        rfc3339(max(created + 1, self.now - rng.randint(0, 300))),
                        {"f:status": fields_v1(status, {}, root=True)},
                        "status",
                    ),
                ],
            }
            out.append(
                {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": meta, "spec": spec, "status": status}
            )
        return out
