"""Interactive session → unattended training job.

The new job is the interactive one's spec (image, resources, env, volumes, node pool, replicas,
slots) with the chosen command instead of `sleep infinity`: on the launcher for MPIJob (workers
keep their sshd), on every replica for PyTorch, TF and XGBoost jobs; the interactive marker is
dropped; the runPolicy becomes one for unattended runs (backoffLimit, cleanPodPolicy Running,
ttlSecondsAfterFinished). `diff` shows what changes, for a confirmation before anything is created.

The command is rewritten for the new job (`rewrite_command`): the session's own names (pods,
hosts, the MPI headless service) become the new job's, and where the operator gives every pod a
variable or a file, the command uses it: `--master_addr <session>-master-0` → `$MASTER_ADDR`, its
port → `$MASTER_PORT`, a literal `--node_rank` → `$RANK` (the command runs on every replica), and
an MPI `-H` list of all the session's workers → `--hostfile /etc/mpi/hostfile`. The command runs
under `/bin/sh -c` in the new job's containers, where those variables expand.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import yaml

from monitors import api_paths
from monitors.connection import ExitCode
from monitors.humanize import age
from monitors.humanize import gpus as fmt_gpus
from monitors.kube import ApiProblem, KubeClient

from .cmdline import MPI_LAUNCHERS, TORCH_LAUNCHERS, Token, launches_in
from .errors import SessionError
from .lifecycle import Target, problem
from .manifests import DEBUG_COMMAND, DEBUG_FAILURE, DEBUG_OF, GPU, INTERACTIVE_GRACE_SECONDS, run_policy
from .names import check_name

if TYPE_CHECKING:
    from monitors.diagnostics.holders import GpuDemand, GpuFit

REPLICA_FIELDS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
                  "MPIJob": "mpiReplicaSpecs", "JAXJob": "jaxReplicaSpecs", "PaddleJob": "paddleReplicaSpecs"}
INTERACTIVE_KEYS = ("ranks/interactive", "priorityClassName")
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink",
                 "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "finalizers")
UNATTENDED_POLICY = run_policy(interactive=False)  # as `ranks submit --command` gives a job
CONVERTED_FROM = "ranks/converted-from"
DEBUG_MARKS = (DEBUG_OF, DEBUG_COMMAND, DEBUG_FAILURE)  # a `ranks debug` session's (sessions.debug)
FRAMEWORKS = {"PyTorchJob": "pytorch", "TFJob": "tensorflow", "XGBoostJob": "xgboost", "MPIJob": "mpi"}


def default_name(name: str) -> str:
    return f"{name[: 63 - 6].rstrip('-')}-train"


def clean_meta(meta: dict[str, Any], *, drop_interactive: bool) -> dict[str, Any]:
    out = {k: v for k, v in meta.items() if k not in SERVER_FIELDS}
    for key in ("labels", "annotations"):
        values = dict(out.get(key) or {})
        if drop_interactive:
            for k in INTERACTIVE_KEYS:
                values.pop(k, None)
        values.pop("kubectl.kubernetes.io/last-applied-configuration", None)
        if values:
            out[key] = values
        else:
            out.pop(key, None)
    return out


def comparable(job: dict[str, Any]) -> dict[str, Any]:
    """The parts of a job a user wrote (for the diff): no status, no server-set metadata."""
    meta = clean_meta(job.get("metadata") or {}, drop_interactive=False)
    return {"apiVersion": job.get("apiVersion"), "kind": job.get("kind"), "metadata": meta,
            "spec": copy.deepcopy(job.get("spec") or {})}


HOSTFILE = "/etc/mpi/hostfile"  # where the MPI operator mounts the hostfile in the launcher
DEFAULT_MASTER_PORT = 23456  # the PyTorch operator's, when the master has no pytorchjob-port
ROLES = r"(?:(?:master|worker|chief|ps|evaluator)-\d+|launcher(?:-[a-z0-9]{5})?)"
NAME_END = r"(?![\w-]|\.[\w-])"  # a DNS name ends here (not in the middle of a longer one)
ADDR_OPTIONS = frozenset({"--master_addr", "--master-addr"})
PORT_OPTIONS = frozenset({"--master_port", "--master-port"})
RDZV_OPTIONS = frozenset({"--rdzv_endpoint", "--rdzv-endpoint"})
NODE_RANK_OPTIONS = frozenset({"--node_rank", "--node-rank"})
HOST_OPTIONS = frozenset({"-H", "--host", "-host", "--hosts", "-hosts"})


@dataclass(frozen=True)
class SessionNames:
    """What of an interactive job's identity a command may name."""

    name: str
    namespace: str
    kind: str
    workers: int
    slots: int  # MPI slots per worker
    master_port: int
    hostfile: str

    @property
    def domain(self) -> str:
        """The optional `.<job>.<ns>.svc[.cluster.local]` after a pod's name, as a pattern."""
        ns = re.escape(self.namespace) if self.namespace else r"[a-z0-9-]+"
        return rf"(?:\.{re.escape(self.name)}(?:\.{ns}(?:\.svc(?:\.[a-z0-9-]+)*)?)?)?"

    def worker_index(self, host: str) -> int | None:
        m = re.fullmatch(rf"{re.escape(self.name)}-worker-(\d+){self.domain}", host)
        return int(m[1]) if m else None

    def is_master(self, host: str) -> bool:
        return re.fullmatch(rf"{re.escape(self.name)}-master-0{self.domain}", host) is not None


def session_names(job: dict[str, Any]) -> SessionNames:
    kind = job.get("kind", "")
    spec = job.get("spec") or {}
    replicas = spec.get(REPLICA_FIELDS.get(kind, "")) or {}
    workers = int((replicas.get("Worker") or {}).get("replicas") or 0)
    port, hostfile = DEFAULT_MASTER_PORT, HOSTFILE
    for rtype, rspec in replicas.items():
        for c in ((rspec.get("template") or {}).get("spec") or {}).get("containers") or []:
            if rtype == "Master":
                for p in c.get("ports") or []:
                    if p.get("name") == "pytorchjob-port" and str(p.get("containerPort", "")).isdigit():
                        port = int(p["containerPort"])
            if rtype == "Launcher":
                for e in c.get("env") or []:
                    if e.get("name") == "OMPI_MCA_orte_default_hostfile" and e.get("value"):
                        hostfile = str(e["value"])
    slots = spec.get("slotsPerWorker")
    return SessionNames(job["metadata"]["name"], job["metadata"].get("namespace") or "", kind, workers,
                        slots if isinstance(slots, int) and slots > 0 else 1, port, hostfile)


def rename(command: str, names: SessionNames, new: str) -> str:
    """The session's pod and host names in `command` as the new job's: `<s>-worker-1`,
    `<s>-master-0`, `<s>-launcher[-xxxxx]`, with or without `.<s>.<ns>.svc...`, and the headless
    service `<s>.<ns>[.svc...]`."""
    s = re.escape(names.name)
    ns = re.escape(names.namespace) if names.namespace else r"[a-z0-9-]+"
    svc = rf"\.{ns}(?:\.svc(?:\.[a-z0-9-]+)*)?"

    def pod(m: re.Match[str]) -> str:
        role = "launcher" if m["role"].startswith("launcher") else m["role"]  # the launcher's hostname
        return f"{new}-{role}" + (f".{new}{m['rest']}" if m["dom"] is not None else "")

    command = re.sub(rf"(?<![\w.-]){s}-(?P<role>{ROLES})(?P<dom>\.{s}(?P<rest>(?:{svc})?))?{NAME_END}", pod, command)
    return re.sub(rf"(?<![\w.-]){s}(?P<rest>{svc}){NAME_END}", lambda m: f"{new}{m['rest']}", command)


def leftovers(command: str, names: SessionNames) -> bool:
    """Whether the session's name is still in `command` (not as one of its pod or host names,
    which `rename` replaced: a path, a run name...)."""
    return re.search(rf"(?<![\w-]){re.escape(names.name)}(?![\w-])", command) is not None


def _options(args: list[Token], wanted: frozenset[str]) -> list[tuple[str, int, int, int, int, str, bool]]:
    """Each `--opt=value` / `--opt value` of `wanted`: (option, option start, value start, value
    end, end, value, single-quoted)."""
    out = []
    for i, t in enumerate(args):
        opt, eq, value = t.text.partition("=")
        if eq and opt in wanted:
            out.append((opt, t.start, t.start, t.end, t.end, value, t.single_quoted))
        elif not eq and t.text in wanted and i + 1 < len(args):
            v = args[i + 1]
            out.append((t.text, t.start, v.start, v.end, v.end, v.text, t.single_quoted or v.single_quoted))
    return out


def _torch_edits(args: list[Token], names: SessionNames) -> list[tuple[int, int, str]]:
    edits = []
    port = str(names.master_port)
    for opt, start, vstart, vend, end, value, single in _options(
            args, ADDR_OPTIONS | PORT_OPTIONS | RDZV_OPTIONS | NODE_RANK_OPTIONS):
        if single:
            continue  # no expansion there: `rename` gives the new job's names instead
        new = None
        if opt in ADDR_OPTIONS and names.is_master(value):
            new = "$MASTER_ADDR"
        elif opt in PORT_OPTIONS and value == port:
            new = "$MASTER_PORT"
        elif opt in RDZV_OPTIONS:
            host, colon, p = value.rpartition(":") if ":" in value else (value, "", "")
            if names.is_master(host):
                new = "$MASTER_ADDR" + (":$MASTER_PORT" if p == port else f"{colon}{p}")
        elif opt in NODE_RANK_OPTIONS and value.isdigit():
            new = "$RANK"
        if new is not None:
            edits.append((start, end, f"{opt}={new}") if vstart == start else (vstart, vend, new))
    return edits


def _mpi_edits(args: list[Token], names: SessionNames) -> list[tuple[int, int, str]]:
    edits = []
    for _opt, start, _vs, _ve, end, value, _single in _options(args, HOST_OPTIONS):
        seen: list[int] = []
        for entry in value.split(","):
            host, _, slots = entry.partition(":")
            index = names.worker_index(host)
            if index is None or (slots or "1") != str(names.slots):
                break
            seen.append(index)
        else:
            if sorted(seen) == list(range(names.workers)):
                edits.append((start, end, f"--hostfile {names.hostfile}"))
    return edits


def rewrite_command(command: str, job: dict[str, Any], new_name: str) -> str:
    """`command` (from the interactive job `job`'s shell) as the new job `new_name` runs it: the
    operator's variables and hostfile where they say the same, the new job's names elsewhere; no
    pod or host name of the session is left."""
    names = session_names(job)
    edits: list[tuple[int, int, str]] = []
    for launch in launches_in(command):
        args = launch.words[launch.args_from:]
        if names.kind == "MPIJob" and launch.launcher in MPI_LAUNCHERS:
            edits += _mpi_edits(args, names)
        elif names.kind == "PyTorchJob" and launch.launcher in TORCH_LAUNCHERS:
            edits += _torch_edits(args, names)
    for start, end, text in sorted(edits, reverse=True):
        command = command[:start] + text + command[end:]
    return rename(command, names, new_name)


def command_of(job: dict[str, Any]) -> str:
    """The shell command a job built by `unattended` runs (its first replica's `sh -c` argument)."""
    field = REPLICA_FIELDS.get(job.get("kind", ""), "")
    for rspec in ((job.get("spec") or {}).get(field) or {}).values():
        for c in ((rspec.get("template") or {}).get("spec") or {}).get("containers") or []:
            argv = c.get("command") or []
            if argv[:2] == ["/bin/sh", "-c"] and len(argv) == 3:
                return str(argv[2])
    return ""


def unattended(job: dict[str, Any], command: str, name: str | None = None,
               base: dict[str, Any] | None = None, env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The unattended job built from interactive `job`, running `command` (a shell command line,
    rewritten for the new job by `rewrite_command`). `base`: the job a `ranks debug` session was
    made from: the new job is that one's spec (its runPolicy too) with the command. `env`: entries
    for the containers that run the command (what the launch's shell exported, secrets' references:
    `sessions.launch_env.prepare`), replacing those of the same name."""
    kind = job.get("kind", "")
    field = REPLICA_FIELDS.get(kind)
    if field is None:
        raise SessionError(f"cannot convert a {kind or 'workload'}: only Kubeflow PyTorchJob, TFJob, XGBoostJob "
                           "and MPIJob sessions", ExitCode.USAGE)
    if not command.strip():
        raise SessionError("the command is empty", ExitCode.USAGE)
    src_name = job["metadata"]["name"]
    new_name = name or default_name(src_name)
    workers = int(((job.get("spec") or {}).get(field) or {}).get("Worker", {}).get("replicas") or 1)
    check_name(new_name, FRAMEWORKS.get(kind, "pytorch"), workers)
    if new_name == src_name:
        raise SessionError(f"the new job needs a name other than {src_name} (--name)", ExitCode.USAGE)
    if base is not None and base.get("kind") != kind:
        base = None
    out = comparable(base if base is not None else job)
    meta = clean_meta(out["metadata"], drop_interactive=True)
    meta["name"] = new_name
    meta.pop("generateName", None)
    meta.setdefault("annotations", {})[CONVERTED_FROM] = src_name
    for key in ("ranks/submit-id", *DEBUG_MARKS):
        meta["annotations"].pop(key, None)
    out["metadata"] = meta
    spec = out["spec"]
    replicas: dict[str, Any] = spec.get(field) or {}
    argv = ["/bin/sh", "-c", rewrite_command(command, job, new_name)]
    changed = False
    for rtype, rspec in replicas.items():
        tmpl = rspec.setdefault("template", {})
        tmeta = tmpl.get("metadata")
        if tmeta:
            tmeta = clean_meta(tmeta, drop_interactive=True)
            for key in DEBUG_MARKS:
                (tmeta.get("annotations") or {}).pop(key, None)
            if not tmeta.get("annotations"):
                tmeta.pop("annotations", None)
            tmpl["metadata"] = tmeta
        pod_spec = tmpl.get("spec") or {}
        if pod_spec.get("terminationGracePeriodSeconds") == INTERACTIVE_GRACE_SECONDS:
            del pod_spec["terminationGracePeriodSeconds"]  # the training command gets the default to stop
        if kind == "MPIJob" and rtype.lower() != "launcher":
            continue  # MPI workers keep their command (sshd by default)
        containers = (tmpl.get("spec") or {}).get("containers") or []
        if not containers:
            continue
        main = containers[0]
        main["command"] = list(argv)
        main.pop("args", None)
        if env:
            names = {e["name"] for e in env}
            main["env"] = [e for e in main.get("env") or [] if e.get("name") not in names] + copy.deepcopy(env)
        changed = True
    if not changed:
        raise SessionError(f"{kind} {src_name} has no {'launcher' if kind == 'MPIJob' else 'replica'} "
                           "container to run the command in", ExitCode.ERROR)
    policy = dict(spec.get("runPolicy") or {})
    policy.pop("suspend", None)
    if base is None:
        policy.update(UNATTENDED_POLICY)
    spec["runPolicy"] = policy
    return out


def confirmation(kind: str, name: str, namespace: str, *, delete_session: bool) -> tuple[str, bool]:
    """The question convert asks before it submits, the same in the CLI and the dashboard, and
    whether it destroys something (then No is the default, and the dialog starts on Cancel)."""
    more = " and delete the interactive session (its pods' files go with it)" if delete_session else ""
    return f"Submit {kind.lower()}/{name} in {namespace}{more}?", delete_session


def diff(job: dict[str, Any], new: dict[str, Any]) -> str:
    """A unified diff of the interactive job's spec and the new one (YAML)."""
    def lines(obj: dict[str, Any]) -> list[str]:
        return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, width=120).splitlines(keepends=True)

    old_name, new_name = job["metadata"]["name"], new["metadata"]["name"]
    return "".join(difflib.unified_diff(lines(comparable(job)), lines(new), fromfile=f"{job['kind']}/{old_name}",
                                        tofile=f"{new['kind']}/{new_name}", n=2))


async def create(client: KubeClient, source: Target, new: dict[str, Any],
                 secret: tuple[str, dict[str, str]] | None = None) -> Target:
    """Create the new job; an existing name is an error (never an overwrite). `secret`: (name, data)
    of the Secret its env refers to, created first (an existing one is an error too), owned by the
    job once it exists (deleting the job deletes it), removed again when the job cannot be created."""
    from .launch_env import secret_manifest
    from .submit import existing

    target = Target(source.namespace, source.kind, new["metadata"]["name"], source.api_version)
    clash = await existing(client, source.namespace, target.name)
    if clash:
        same = any(fw.kind == source.kind for fw in clash)
        other = "" if same else f" (a {clash[0].kind}: its pods and Services would clash)"
        ref = target.ref if same else f"{clash[0].kind.lower()}/{target.name}"
        raise SessionError(f'{ref} already exists in "{target.namespace}"{other}; choose another --name',
                           ExitCode.USAGE)
    secrets_path = api_paths.resource("", "v1", "secrets", source.namespace)
    secret_target = Target(source.namespace, "Secret", secret[0], "v1") if secret else None
    if secret is not None and secret_target is not None:
        try:
            await client.request("POST", secrets_path, body=secret_manifest(secret[0], source.namespace, secret[1],
                                                                             target.name))
        except ApiProblem as exc:
            if exc.status == 409:
                raise SessionError(f'secret "{secret[0]}" already exists in "{source.namespace}"; choose another '
                                   "--secret-env", ExitCode.USAGE) from None
            raise problem(exc, "create", secret_target) from None
    collection = target.path.rsplit("/", 1)[0]
    new = {**new, "metadata": {**new["metadata"], "namespace": source.namespace}}
    try:
        created = orjson.loads(await client.request("POST", collection, body=new))
    except BaseException as exc:
        if secret is not None:  # nothing half-done: the Secret goes too
            with contextlib.suppress(Exception):
                await client.request("DELETE", api_paths.resource("", "v1", "secrets", source.namespace, secret[0]))
        if isinstance(exc, ApiProblem):
            raise problem(exc, "create", target) from None
        raise
    if secret is not None:
        owner = {"apiVersion": new.get("apiVersion"), "kind": source.kind, "name": target.name,
                 "uid": (created.get("metadata") or {}).get("uid", "")}
        with contextlib.suppress(ApiProblem):  # (without it, the Secret outlives the job: still the user's)
            await client.request("PATCH", api_paths.resource("", "v1", "secrets", source.namespace, secret[0]),
                                 body={"metadata": {"ownerReferences": [owner]}},
                                 content_type="application/merge-patch+json")
    return target


def gpu_demands(job: dict[str, Any]) -> list[GpuDemand]:
    """What the job asks of the cluster's GPUs: per replica type, its pods, each one's GPUs (its
    containers' `nvidia.com/gpu` limits), node selector and tolerations."""
    from monitors.diagnostics.holders import GpuDemand

    out = []
    for rspec in ((job.get("spec") or {}).get(REPLICA_FIELDS.get(job.get("kind", ""), "")) or {}).values():
        pod = ((rspec or {}).get("template") or {}).get("spec") or {}
        gpus = 0.0
        for c in pod.get("containers") or []:
            res = c.get("resources") or {}
            raw = (res.get("limits") or {}).get(GPU) or (res.get("requests") or {}).get(GPU) or 0
            try:
                gpus += float(raw)
            except (TypeError, ValueError):
                continue
        if gpus <= 0:
            continue
        selector = tuple(sorted((str(k), str(v)) for k, v in (pod.get("nodeSelector") or {}).items()))
        tolerations = tuple((str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                             str(t.get("effect") or "")) for t in pod.get("tolerations") or () if isinstance(t, dict))
        out.append(GpuDemand(int(rspec.get("replicas") or 1), gpus, selector, tolerations))
    return out


def waits_on(fit: GpuFit, session: tuple[str, str, str], now: float, command: str) -> list[str]:
    """What to say before submitting a job that would not start now (`fit`, from
    `monitors.diagnostics.holders.gpu_fit`): which GPUs it waits for, the session's own first."""
    if fit.fits:
        return []
    what = "its project's GPU quota" if fit.reason == "quota" else "free GPUs where it can run"
    lines = [f"the new job would wait: only {fit.placed} of its {fit.pods} pods fit the {what} now"]
    for h in fit.holders:
        if h.key == session:
            lines.append(f"its own session {h.name} holds {fmt_gpus(h.gpus)} of the GPUs it needs"
                         + (f" (idle {age(now - h.idle_since)})" if h.idle_since is not None else "")
                         + ": deleting the session once the job is created frees them (its launches stay kept)")
        else:
            lines.append(h.sentence(now, command))
    if fit.holders and not fit.enough:
        lines.append("even with those freed it would not fit now")
    return lines
