"""The workload plan of the scale scenario: training jobs of 2..64 pods (kind, size, replica roles,
namespace, image, owner), their states (~5 % of pods Pending as whole gangs, ~2 % finished) and
where each pod runs: about 90 % of the cluster's GPUs packed best-fit onto randomly chosen running
jobs, the other running jobs CPU-only."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .namespaces import NamespaceBuilder
from .nodes import NodeInfo
from .shared import IMAGES, MPIJOB, PYTORCHJOB, TFJOB, random_uid

MAX_JOB_PODS = 64
MIN_JOB_PODS = 2
_MAX_TF_PODS = 16  # TF_CONFIG lists every host; keep pods under 10 KB
_GPU_FILL = 0.9  # share of the cluster's GPUs handed to Running pods

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
_GPU_PER_POD_WEIGHTS = ((1, 0.5), (2, 0.15), (4, 0.15), (8, 0.2))


@dataclass
class Role:
    rtype: str  # Master/Worker/Chief/PS/Launcher
    count: int
    gpu: bool  # eligible for GPUs
    pods: list[tuple[int, str]] = field(default_factory=list)  # (index, state)
    nodes: list[int | None] = field(default_factory=list)


@dataclass
class Job:
    kind: str
    name: str
    ns: str
    team: str | None
    size: int
    roles: list[Role]
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

    def __init__(self, nodes: list[NodeInfo], gpus: int, rng: random.Random) -> None:
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


def _gpu_cpu_milli(g: int) -> int:
    return 12000 * g


def _pod_cpu_milli(job: Job, role: Role) -> int:
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


def _roles(kind: str, size: int) -> list[Role]:
    if kind == PYTORCHJOB:
        roles = [Role("Master", 1, True)]
        if size > 1:
            roles.append(Role("Worker", size - 1, True))
    elif kind == TFJOB:
        ps = 1 if size >= 4 else 0
        roles = [Role("Chief", 1, True)]
        if ps:
            roles.append(Role("PS", ps, False))
        if size - 1 - ps > 0:
            roles.append(Role("Worker", size - 1 - ps, True))
    else:
        roles = [Role("Launcher", 1, False), Role("Worker", size - 1, True)]
    return roles


class Planner:
    """Decides the jobs and where their pods run; `WorkloadBuilder` makes the objects."""

    def __init__(self, rng: random.Random, now: int, nodes: list[NodeInfo], gpus_per_node: int,
                 namespaces: NamespaceBuilder) -> None:
        self.rng = rng
        self.now = now
        self.node_info = nodes
        self.n_nodes = len(nodes)
        self.gpn = gpus_per_node
        self.namespaces = namespaces

    def plan_jobs(self, n_pods: int) -> list[Job]:
        """Jobs of `n_pods` pods in all: kinds, sizes, roles, namespaces, images, owners and states."""
        rng = self.rng
        jobs: list[Job] = []
        for i, size in enumerate(_job_sizes(rng, n_pods)):
            r = rng.random()
            if size < 2 or r < 0.72:
                kind = PYTORCHJOB
            elif r < 0.87:
                kind = MPIJOB
            else:
                kind = TFJOB if size <= _MAX_TF_PODS else PYTORCHJOB
            ns, team = self.namespaces.pick()
            job = Job(kind, "", ns, team, size, _roles(kind, size))
            job.uid = random_uid(rng)
            job.image = rng.choice(IMAGES[kind])
            job.user = rng.choice(_FIRST_NAMES)
            if rng.random() < 0.1:
                job.priority_class = "high-priority"
            job.name = f"job{i:05d}"  # provisional; final name once GPUs are known
            jobs.append(job)

        # states: ~5 % of pods Pending (whole gangs), ~2 % finished (not MPI)
        order = list(range(len(jobs)))
        rng.shuffle(order)
        pend_target = round(n_pods * 0.05)
        fin_target = round(n_pods * 0.02)
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

    def place(self, jobs: list[Job]) -> None:
        """GPUs per pod and a node for each running pod; then names and creation times."""
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
                placed: list[tuple[Role, int, int]] = []
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
            job.created = max(job.created, self.namespaces.ns_created[job.ns] + 3600)
            if job.kind == MPIJOB:
                job.launcher_uid = random_uid(rng)

