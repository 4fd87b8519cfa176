"""Kubeflow manifests for `ranks submit` (and the dashboard's "New session" form).

`SubmitSpec` is what the user asked for; `spec_problems` lists what is wrong with it (flag, one-line
message, in Kubernetes' own words where Kubernetes has them); `render` turns a valid spec into the
job manifest:

- MPI: MPIJob `kubeflow.org/v2beta1` with a Launcher (no GPUs) and N Workers with the GPUs. The
  workers get no command, so mpi-operator gives them its default sshd; the launcher runs the
  command (`/bin/sh -c CMD`) or, interactive, `sleep infinity`. `slotsPerWorker` (default: the
  GPUs per worker, at least 1) and `launcherCreationPolicy: WaitForWorkersReady` (the launcher, and
  so `mpirun` or the shell, starts once every worker is Ready and the hostfile resolves).
- PyTorch: PyTorchJob `kubeflow.org/v1` with one Master and N Workers, as `runai submit-pytorch
  --workers N` (N workers plus the master: WORLD_SIZE = N + 1).
- TensorFlow: TFJob with one Chief and N Workers. XGBoost: XGBoostJob with one Master and N Workers.
  Every replica of these runs the command or, interactive, `sleep infinity`, with the same
  resources (the master, chief and XGBoost master are ranks too).

The job and every pod template carry the labels `project: <project>` (Run:ai) and `ranks/user:
<user>` (an annotation instead when the user name is not a valid label value, e.g. an e-mail
address); an interactive job is annotated `ranks/interactive: "true"` and its pods stop 1 s after a delete
or suspend (`terminationGracePeriodSeconds: 1`: their PID 1 is `sleep infinity`, which ignores
SIGTERM, so the default 30 s would only hold the GPUs). `--port PORT[:NAME]` declares container
ports on the lead replica (launcher, master, chief); `--jupyter` and `--tensorboard LOGDIR` declare
theirs (8888 `jupyter`, 6006 `tensorboard`) and start them there, each only if the image has it,
before the lead becomes `sleep infinity`. A GPU portion is Run:ai's
`gpu-fraction` pod annotation, with no `nvidia.com/gpu` request. runPolicy: `cleanPodPolicy:
Running` (finished pods stay for their logs, running ones go with the job); an unattended job also
gets `backoffLimit` and `ttlSecondsAfterFinished`.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from monitors import api_paths
from monitors.connection import ExitCode

from .errors import SessionError
from .names import label_value_problem, name_problem, subdomain_problem

GROUP = "kubeflow.org"
GPU = "nvidia.com/gpu"
NODE_POOL_LABEL = "run.ai/node-pool"
PROJECT_LABEL = "project"
USER_KEY = "ranks/user"
INTERACTIVE_KEY = "ranks/interactive"
DEBUG_OF = "ranks/debug-of"  # a `ranks debug` session: the job it was made from (sessions.debug)
DEBUG_COMMAND = "ranks/debug-command"  # that job's command (the session's shell history gets it)
DEBUG_FAILURE = "ranks/debug-failure"  # how that job failed, as ranks saw it
FRACTION_KEY = "gpu-fraction"
SLEEP_INFINITY = ("sleep", "infinity")
# An interactive pod's PID 1 is `sleep infinity`, which ignores SIGTERM (PID 1 has no default
# signal actions); what the user started runs through exec and gets no SIGTERM either. A longer
# grace period would only hold the GPUs after delete or suspend.
INTERACTIVE_GRACE_SECONDS = 1
BACKOFF_LIMIT = 3
TTL_AFTER_FINISHED = 7 * 24 * 3600  # an unattended job and its pods (logs) stay a week after it ends
MAX_WORKERS = 10_000
MAX_GPUS_PER_POD = 1024  # whole GPUs a pod may ask (no node has more; a typo's 10^23 is refused here)
MAX_SLOTS = 100_000  # MPI processes per worker

QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
# (Kubernetes' own rule before 1.30, which every version accepts: no space, '$' or leading digit,
# so the shell in the pod can name it; the message is the API server's for that rule)
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
ENV_NAME_MSG = ("a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or "
                "'.', and must not start with a digit (e.g. 'my.env-name', or 'MY_ENV.NAME', or 'MyEnvName1', "
                "regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')")


@dataclass(frozen=True)
class Framework:
    name: str  # mpi, pytorch, tensorflow, xgboost
    kind: str
    version: str
    plural: str
    replica_field: str
    lead_role: str  # Launcher, Master, Chief
    container: str  # the operator's default container name

    @property
    def api_version(self) -> str:
        return f"{GROUP}/{self.version}"

    def collection_path(self, namespace: str) -> str:
        return api_paths.resource(GROUP, self.version, self.plural, namespace)

    def path(self, namespace: str, name: str) -> str:
        return api_paths.resource(GROUP, self.version, self.plural, namespace, name)


FRAMEWORKS: dict[str, Framework] = {
    "mpi": Framework("mpi", "MPIJob", "v2beta1", "mpijobs", "mpiReplicaSpecs", "Launcher", "mpi"),
    "pytorch": Framework("pytorch", "PyTorchJob", "v1", "pytorchjobs", "pytorchReplicaSpecs", "Master", "pytorch"),
    "tensorflow": Framework("tensorflow", "TFJob", "v1", "tfjobs", "tfReplicaSpecs", "Chief", "tensorflow"),
    "xgboost": Framework("xgboost", "XGBoostJob", "v1", "xgboostjobs", "xgbReplicaSpecs", "Master", "xgboost"),
}


@dataclass
class SubmitSpec:
    name: str
    framework: str  # mpi | pytorch | tensorflow | xgboost
    image: str
    workers: int
    namespace: str = ""
    project: str = ""
    user: str = ""
    gpus: int = 0  # whole GPUs per worker (and per master/chief, which are ranks too)
    gpu_portion: float | None = None  # a fraction of one GPU per worker (Run:ai gpu-fraction)
    slots_per_worker: int | None = None  # MPI: processes per worker (default: GPUs per worker, >= 1)
    cpu: str | None = None
    memory: str | None = None
    env: Sequence[str] = ()  # "KEY=VALUE"
    volumes: Sequence[str] = ()  # "PVC:PATH" or "PVC:PATH:ro"
    node_pool: str | None = None
    interactive: bool = False
    command: str | None = None
    ports: Sequence[str] = ()  # "8888" or "8888:jupyter": container ports of the lead replica
    jupyter: bool = False  # start Jupyter next to `sleep infinity` (when the image has it)
    tensorboard: str | None = None  # start TensorBoard on this log directory (when the image has it)
    backoff_limit: int = BACKOFF_LIMIT
    ttl_seconds_after_finished: int | None = TTL_AFTER_FINISHED
    extra_annotations: dict[str, str] = field(default_factory=dict)

    @property
    def fw(self) -> Framework:
        return FRAMEWORKS[self.framework]


@dataclass(frozen=True)
class Problem:
    flag: str  # the command-line flag (the form's field): NAME, --memory, --env...
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Volume:
    claim: str
    path: str
    read_only: bool


def parse_env(items: Sequence[str]) -> tuple[list[tuple[str, str]], list[Problem]]:
    """KEY=VALUE items -> (name, value) pairs (a later KEY wins, as in the pod) and problems."""
    out: dict[str, str] = {}
    problems: list[Problem] = []
    for item in items:
        name, eq, value = item.partition("=")
        if not eq:
            problems.append(Problem("--env", f'--env "{item}": expected KEY=VALUE'))
        elif not name:
            problems.append(Problem("--env", '--env "=…": Required value: the variable needs a name'))
        elif not ENV_NAME.fullmatch(name):
            problems.append(Problem("--env", f'--env "{name}=…": Invalid value: "{name}": {ENV_NAME_MSG}'))
        else:
            out.pop(name, None)
            out[name] = value
    return list(out.items()), problems


def parse_volumes(items: Sequence[str]) -> tuple[list[Volume], list[Problem]]:
    out: list[Volume] = []
    problems: list[Problem] = []
    paths: set[str] = set()
    for item in items:
        claim, sep, rest = item.partition(":")
        read_only = False
        for mode, ro in ((":ro", True), (":rw", False)):
            if rest.endswith(mode):
                rest, read_only = rest[: -len(mode)], ro
        if not sep or not rest:
            problems.append(Problem("--volume", f'--volume "{item}": expected PVC:PATH (or PVC:PATH:ro)'))
            continue
        why = subdomain_problem(claim)
        if why:
            problems.append(Problem("--volume", f'--volume "{item}": Invalid value: "{claim}": {why}'))
            continue
        if not rest.startswith("/"):
            problems.append(Problem("--volume", f'--volume "{item}": the mount path must be absolute'))
            continue
        norm = "/" + "/".join(p for p in rest.split("/") if p)
        if ".." in norm.split("/"):
            problems.append(Problem("--volume", f'--volume "{item}": must not contain \'..\''))
            continue
        if norm in paths:
            problems.append(Problem("--volume", f'--volume "{item}": Invalid value: "{norm}": must be unique'))
            continue
        paths.add(norm)
        out.append(Volume(claim, norm, read_only))
    return out, problems


def parse_ports(items: Sequence[str]) -> tuple[list[tuple[int, str]], list[Problem]]:
    """`PORT[:NAME]` items as (port, name) (NAME: a container port name, IANA_SVC_NAME)."""
    out: list[tuple[int, str]] = []
    problems: list[Problem] = []
    for item in items:
        port_s, _, name = item.partition(":")
        if not port_s.isdigit() or not 0 < int(port_s) < 65536:
            problems.append(Problem("--port", f'--port "{item}": the port must be a number from 1 to 65535 '
                                              "(PORT or PORT:NAME)"))
            continue
        why = port_name_problem(name) if name else None
        if why:
            problems.append(Problem("--port", f'--port "{item}": Invalid value: "{name}": {why}'))
            continue
        if any(p == int(port_s) for p, _ in out):
            problems.append(Problem("--port", f'--port "{item}": port {port_s} is given twice'))
            continue
        out.append((int(port_s), name))
    return out, problems


def port_name_problem(name: str) -> str | None:
    """Kubernetes' IANA_SVC_NAME check of a container port name (its words)."""
    if len(name) > 15:
        return "must be no more than 15 characters"
    if not re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name):
        return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
    if "--" in name:
        return "must not contain consecutive hyphens"
    if not re.search(r"[a-z]", name):
        return "must contain at least one letter (a-z)"
    return None


JUPYTER_PORT = 8888
TENSORBOARD_PORT = 6006


def session_ports(spec: SubmitSpec) -> list[tuple[int, str]]:
    """The lead replica's container ports: those asked for, then Jupyter's and TensorBoard's."""
    ports, _ = parse_ports(spec.ports)
    names = {n for _, n in ports}
    for wanted, name, port in ((spec.jupyter, "jupyter", JUPYTER_PORT),
                               (spec.tensorboard is not None, "tensorboard", TENSORBOARD_PORT)):
        if wanted and name not in names:
            if any(p == port for p, _ in ports):
                ports = [(p, n or name) if p == port else (p, n) for p, n in ports]
            else:
                ports.append((port, name))
    return ports


def _port_of(spec: SubmitSpec, name: str, default: int) -> int:
    return next((p for p, n in session_ports(spec) if n == name), default)


def servers_script(spec: SubmitSpec) -> str:
    """The lead's shell line that starts Jupyter and TensorBoard, each only if the image has it,
    then becomes `sleep infinity` (PID 1 as in any session)."""
    parts: list[str] = []
    if spec.jupyter:
        port = _port_of(spec, "jupyter", JUPYTER_PORT)
        parts.append("command -v jupyter >/dev/null 2>&1 && { jupyter lab --ip=0.0.0.0 "
                     f"--port={port} --no-browser --allow-root >/tmp/jupyter.log 2>&1 & }}")
    if spec.tensorboard is not None:
        port = _port_of(spec, "tensorboard", TENSORBOARD_PORT)
        parts.append(f"command -v tensorboard >/dev/null 2>&1 && {{ tensorboard --logdir {shlex.quote(spec.tensorboard)} "
                     f"--host 0.0.0.0 --port {port} >/tmp/tensorboard.log 2>&1 & }}")
    return "; ".join([*parts, "exec " + " ".join(SLEEP_INFINITY)])


def quantity_problem(flag: str, value: str | None) -> Problem | None:
    if value is None:
        return None
    if not QUANTITY.match(value.strip() or "x"):
        return Problem(flag, f'{flag} "{value}": {QUANTITY_MSG}')
    if value.strip().startswith("-"):
        return Problem(flag, f'{flag} "{value}": must be greater than or equal to 0')
    return None


def spec_problems(spec: SubmitSpec) -> list[Problem]:
    """Everything wrong with `spec`, in flag order; empty when it can be rendered."""
    out: list[Problem] = []
    fw = FRAMEWORKS.get(spec.framework)
    if fw is None:
        out.append(Problem("--framework", f'--framework "{spec.framework}": must be one of '
                                          f'{", ".join(FRAMEWORKS)}'))
    workers_ok = isinstance(spec.workers, int) and not isinstance(spec.workers, bool)
    least = 1 if spec.framework == "mpi" else 0
    if not workers_ok or not least <= spec.workers <= MAX_WORKERS:
        what = "MPI needs at least 1 worker" if spec.framework == "mpi" else "must be at least 0"
        out.append(Problem("--workers", f"--workers {spec.workers}: {what} (at most {MAX_WORKERS})"))
    why = name_problem(spec.name, spec.framework if fw else "pytorch", spec.workers if workers_ok else 1)
    if why:
        out.insert(0, Problem("NAME", f'invalid name "{spec.name}": {why}'))
    if not spec.image or not spec.image.strip():
        out.append(Problem("--image", "-i/--image: an image is required"))
    elif any(ch.isspace() for ch in spec.image):
        out.append(Problem("--image", f'-i/--image "{spec.image}": must not contain whitespace'))
    if spec.gpu_portion is not None and spec.gpus:
        out.append(Problem("--gpu-portion", "-g/--gpus and --gpu-portion cannot be used together"))
    if not 0 <= spec.gpus <= MAX_GPUS_PER_POD:
        out.append(Problem("--gpus", f"-g {spec.gpus}: must be at least 0 (at most {MAX_GPUS_PER_POD} per pod)"))
    if spec.gpu_portion is not None and not (0.01 <= spec.gpu_portion < 1 and math.isfinite(spec.gpu_portion)):
        out.append(Problem("--gpu-portion", f"--gpu-portion {spec.gpu_portion:g}: must be at least 0.01 and "
                                            "less than 1 (a fraction of one GPU); use -g N for whole GPUs"))
    if spec.slots_per_worker is not None:
        if spec.framework != "mpi":
            out.append(Problem("--slots-per-worker", "--slots-per-worker applies to MPI jobs only"))
        elif not 1 <= spec.slots_per_worker <= MAX_SLOTS:
            out.append(Problem("--slots-per-worker", f"--slots-per-worker {spec.slots_per_worker}: must be at least 1 "
                                                     f"(at most {MAX_SLOTS})"))
    for flag, value in (("--cpu", spec.cpu), ("--memory", spec.memory)):
        p = quantity_problem(flag, value)
        if p:
            out.append(p)
    out += parse_env(spec.env)[1]
    out += parse_volumes(spec.volumes)[1]
    if spec.node_pool is not None:
        why = label_value_problem(spec.node_pool) if spec.node_pool else "a node pool name is required"
        if why:
            out.append(Problem("--node-pool", f'--node-pool "{spec.node_pool}": Invalid value: {why}'))
    out += parse_ports(spec.ports)[1]
    if not spec.interactive:
        for flag, asked in (("--jupyter", spec.jupyter), ("--tensorboard", spec.tensorboard is not None)):
            if asked:
                out.append(Problem(flag, f"{flag} starts a server in an interactive session: add --interactive"))
    if spec.tensorboard is not None and not spec.tensorboard.strip():
        out.append(Problem("--tensorboard", "--tensorboard LOGDIR: a log directory is required"))
    if spec.interactive and spec.command is not None:
        out.append(Problem("--command", "--interactive and --command cannot be used together"))
    elif not spec.interactive and not (spec.command or "").strip():
        out.append(Problem("--command", "give --interactive (a session to shell into) or --command CMD "
                                        "(an unattended run)"))
    if not spec.namespace:
        out.append(Problem("--project", "no project: give -p PROJECT"))
    return out


def validate(spec: SubmitSpec) -> None:
    """Raise SessionError (exit code 2) with the first problem of `spec`."""
    problems = spec_problems(spec)
    if problems:
        raise SessionError(problems[0].message, ExitCode.USAGE)


def slots(spec: SubmitSpec) -> int:
    return spec.slots_per_worker or max(spec.gpus, 1)


def metadata_for(spec: SubmitSpec) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) of the job and its pod templates."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if spec.project and not label_value_problem(spec.project):
        labels[PROJECT_LABEL] = spec.project
    if spec.user:
        if label_value_problem(spec.user):
            annotations[USER_KEY] = spec.user  # e.g. an e-mail address: not a label value
        else:
            labels[USER_KEY] = spec.user
    return labels, annotations


def _container(spec: SubmitSpec, command: Sequence[str] | None, gpus: bool, lead: bool = False) -> dict[str, Any]:
    c: dict[str, Any] = {"name": spec.fw.container, "image": spec.image.strip()}
    if command is not None:
        c["command"] = list(command)
    if lead and session_ports(spec):
        c["ports"] = [{"containerPort": p, **({"name": n} if n else {}), "protocol": "TCP"}
                      for p, n in session_ports(spec)]
    # a failing rank's last lines stay in its pod status after its log is gone (or unreadable)
    c["terminationMessagePolicy"] = "FallbackToLogsOnError"
    env, _ = parse_env(spec.env)
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env]
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if gpus and spec.gpus and spec.gpu_portion is None:
        requests[GPU] = limits[GPU] = str(spec.gpus)
    if spec.cpu:
        requests["cpu"] = spec.cpu.strip()
    if spec.memory:
        requests["memory"] = spec.memory.strip()
    if requests or limits:
        c["resources"] = {k: v for k, v in (("limits", limits), ("requests", requests)) if v}
    vols, _ = parse_volumes(spec.volumes)
    if vols:
        names = _volume_names(vols)
        c["volumeMounts"] = [
            {"name": names[v.claim], "mountPath": v.path, **({"readOnly": True} if v.read_only else {})} for v in vols
        ]
    return c


def _volume_names(vols: list[Volume]) -> dict[str, str]:
    names: dict[str, str] = {}
    for v in vols:
        if v.claim not in names:
            names[v.claim] = f"pvc-{len(names)}"
    return names


def _replica(spec: SubmitSpec, count: int, command: Sequence[str] | None, *, gpus: bool,
             restart: str, lead: bool = False) -> dict[str, Any]:
    labels, annotations = metadata_for(spec)
    if gpus and spec.gpu_portion is not None:
        annotations[FRACTION_KEY] = f"{spec.gpu_portion:g}"
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    pod: dict[str, Any] = {"containers": [_container(spec, command, gpus, lead)]}
    if spec.interactive:
        pod["terminationGracePeriodSeconds"] = INTERACTIVE_GRACE_SECONDS
    if spec.node_pool:
        pod["nodeSelector"] = {NODE_POOL_LABEL: spec.node_pool}
    vols, _ = parse_volumes(spec.volumes)
    if vols:
        pod["volumes"] = [{"name": n, "persistentVolumeClaim": {"claimName": claim}}
                          for claim, n in _volume_names(vols).items()]
    return {"replicas": count, "restartPolicy": restart, "template": {"metadata": meta, "spec": pod}}


def lead_command(spec: SubmitSpec, *, lead: bool = False) -> list[str]:
    """What the launcher (MPI) or every replica runs: `sleep infinity`, or the command via sh; on
    the lead of a session with --jupyter or --tensorboard, those started first."""
    if spec.interactive:
        if lead and (spec.jupyter or spec.tensorboard is not None):
            return ["/bin/sh", "-c", servers_script(spec)]
        return list(SLEEP_INFINITY)
    return ["/bin/sh", "-c", str(spec.command)]


def run_policy(interactive: bool, backoff_limit: int = BACKOFF_LIMIT,
               ttl: int | None = TTL_AFTER_FINISHED) -> dict[str, Any]:
    """`cleanPodPolicy: Running`; an unattended job also gets a backoffLimit and a TTL."""
    policy: dict[str, Any] = {"cleanPodPolicy": "Running"}
    if not interactive:
        policy["backoffLimit"] = backoff_limit
        if ttl is not None:
            policy["ttlSecondsAfterFinished"] = ttl
    return policy


def render(spec: SubmitSpec) -> dict[str, Any]:
    """The job manifest for `spec` (validated first: SessionError, exit code 2)."""
    validate(spec)
    fw = spec.fw
    command = lead_command(spec)
    replicas: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    if fw.name == "mpi":
        replicas["Launcher"] = _replica(spec, 1, lead_command(spec, lead=True), gpus=False, restart="OnFailure",
                                        lead=True)
        replicas["Worker"] = _replica(spec, spec.workers, None, gpus=True, restart="Never")
        extra = {"slotsPerWorker": slots(spec), "launcherCreationPolicy": "WaitForWorkersReady"}
    else:
        replicas[fw.lead_role] = _replica(spec, 1, lead_command(spec, lead=True), gpus=True, restart="OnFailure",
                                          lead=True)
        if spec.workers:
            replicas["Worker"] = _replica(spec, spec.workers, command, gpus=True, restart="OnFailure")
    labels, annotations = metadata_for(spec)
    if spec.interactive:
        annotations[INTERACTIVE_KEY] = "true"
    annotations.update(spec.extra_annotations)
    meta: dict[str, Any] = {"name": spec.name, "namespace": spec.namespace}
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": fw.api_version,
        "kind": fw.kind,
        "metadata": meta,
        "spec": {
            **extra,
            "runPolicy": run_policy(spec.interactive, spec.backoff_limit, spec.ttl_seconds_after_finished),
            fw.replica_field: replicas,
        },
    }


def framework_of_kind(kind: str) -> Framework | None:
    return next((f for f in FRAMEWORKS.values() if f.kind == kind), None)


def debug_seed(pod: dict[str, Any]) -> tuple[str, str, str]:
    """A `ranks debug` session pod's (original job, its command, how it failed), from its
    annotations; empty strings for any other pod."""
    notes = (pod.get("metadata") or {}).get("annotations") or {}
    return (str(notes.get(DEBUG_OF) or ""), str(notes.get(DEBUG_COMMAND) or ""), str(notes.get(DEBUG_FAILURE) or ""))
