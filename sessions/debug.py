"""From a failed (or running) job back to an interactive session: `ranks debug`.

The session is the job's spec (image, env, volumes, resources, framework, replicas, node pool)
with every replica running `sleep infinity` (an MPIJob's launcher; its workers keep their own
command, sshd by default), the interactive marker and grace, a runPolicy for a session, and
optionally pinned to the nodes the job's pods ran on (`--same-nodes`: a required node affinity
per replica type, `kubernetes.io/hostname In [...]`). The job's command is kept in the session's
annotations (and its pod templates'), so the shell opened in it has that command in its history
(↑ runs it again as the job did); convert of the session builds the new job from the original's
spec, and shows the diff against the original job.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
from typing import TYPE_CHECKING, Any

import orjson

from monitors.connection import ExitCode
from monitors.kube import ApiProblem
from monitors.model_views import WorkloadView
from monitors.sanitize import clean

from .convert import FRAMEWORKS, REPLICA_FIELDS, clean_meta, comparable
from .errors import SessionError
from .lifecycle import Target, problem
from .manifests import (
    DEBUG_COMMAND,
    DEBUG_FAILURE,
    DEBUG_OF,
    INTERACTIVE_GRACE_SECONDS,
    INTERACTIVE_KEY,
    SLEEP_INFINITY,
    run_policy,
)
from .names import check_name

if TYPE_CHECKING:
    from monitors.kube import KubeClient

    from .history_store import HistoryStore, SavedSession

HOSTNAME = "kubernetes.io/hostname"
LEAD_ROLES = ("Launcher", "Master", "Chief")
SESSION_POLICY_DROPS = ("backoffLimit", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "suspend")


def default_name(name: str) -> str:
    return f"{name[: 63 - 6].rstrip('-')}-debug"


def retry_name(name: str) -> str:
    """The converted job's default name when the original still has its own: `x` -> `x-2`,
    `x-2` -> `x-3`."""
    m = re.fullmatch(r"(.*)-(\d+)", name)
    return f"{m[1]}-{int(m[2]) + 1}" if m else f"{name[:61]}-2"


def job_command(job: dict[str, Any]) -> str:
    """What the job's lead runs (the MPI launcher, else the master/chief, else the first replica),
    as a shell command line: `sh -c SCRIPT`'s script, else the command and args quoted; "" when it
    runs its image's entrypoint."""
    replicas = ((job.get("spec") or {}).get(REPLICA_FIELDS.get(job.get("kind", ""), "")) or {})
    order = sorted(replicas, key=lambda rtype: (rtype not in LEAD_ROLES, rtype))
    for rtype in order:
        containers = (((replicas[rtype] or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        if not containers:
            continue
        argv = [str(x) for x in [*(containers[0].get("command") or []), *(containers[0].get("args") or [])]]
        if len(argv) >= 3 and re.fullmatch(r"(?:.*/)?(?:ba)?sh", argv[0]) and argv[1] == "-c":
            return argv[2]
        if argv and tuple(argv) != SLEEP_INFINITY:
            return shlex.join(argv)
        if job.get("kind") != "MPIJob" or rtype == "Launcher":
            return ""
    return ""


def session_from(job: dict[str, Any], name: str | None = None, *, nodes: dict[str, list[str]] | None = None,
                 failure: str = "") -> dict[str, Any]:
    """The interactive session made from `job` (see the module's doc); `nodes`: replica type ->
    the nodes to keep it on."""
    kind = job.get("kind", "")
    field = REPLICA_FIELDS.get(kind)
    if field is None:
        raise SessionError(f"cannot debug a {kind or 'workload'}: only Kubeflow PyTorchJob, TFJob, XGBoostJob and "
                           "MPIJob", ExitCode.USAGE)
    src = job["metadata"]["name"]
    new_name = name or default_name(src)
    replicas_in = ((job.get("spec") or {}).get(field) or {})
    workers = int((replicas_in.get("Worker") or {}).get("replicas") or 1)
    check_name(new_name, FRAMEWORKS.get(kind, "pytorch"), workers)
    if new_name == src:
        raise SessionError(f"the session needs a name other than {src} (--name)", ExitCode.USAGE)
    command = job_command(job)
    marks = {INTERACTIVE_KEY: "true", DEBUG_OF: src}
    if command:
        marks[DEBUG_COMMAND] = command
    if failure:
        marks[DEBUG_FAILURE] = failure
    out = comparable(job)
    meta = clean_meta(out["metadata"], drop_interactive=True)
    meta["name"] = new_name
    meta.pop("generateName", None)
    annotations = meta.setdefault("annotations", {})
    for key in ("ranks/converted-from", "ranks/submit-id"):
        annotations.pop(key, None)
    annotations.update(marks)
    out["metadata"] = meta
    spec = out["spec"]
    for rtype, rspec in (spec.get(field) or {}).items():
        tmpl = rspec.setdefault("template", {})
        tmeta = tmpl.setdefault("metadata", {})
        tmeta.setdefault("annotations", {}).update({k: v for k, v in marks.items() if k != INTERACTIVE_KEY})
        pod = tmpl.setdefault("spec", {})
        pod["terminationGracePeriodSeconds"] = INTERACTIVE_GRACE_SECONDS
        wanted = (nodes or {}).get(rtype) or (nodes or {}).get(rtype.lower())
        if wanted:
            pod["affinity"] = {**(pod.get("affinity") or {}), "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": sorted(set(wanted))}]}]}}}
        if kind == "MPIJob" and rtype != "Launcher":
            continue  # workers keep their command (sshd by default)
        containers = pod.get("containers") or []
        if containers:
            containers[0]["command"] = list(SLEEP_INFINITY)
            containers[0].pop("args", None)
    policy = {k: v for k, v in (spec.get("runPolicy") or {}).items() if k not in SESSION_POLICY_DROPS}
    spec["runPolicy"] = {**policy, **run_policy(interactive=True)}
    return out


def debug_of(job: dict[str, Any]) -> str:
    """The job a session was made from by `ranks debug` ("" when it was not)."""
    return str(((job.get("metadata") or {}).get("annotations") or {}).get(DEBUG_OF) or "")


def nodes_of(wl: WorkloadView) -> dict[str, list[str]]:
    """Replica type (as the rank's role: worker, master, launcher) -> the nodes its pods ran on."""
    out: dict[str, list[str]] = {}
    for r in wl.ranks:
        if r.node:
            out.setdefault(r.role.lower(), [])
            if r.node not in out[r.role.lower()]:
                out[r.role.lower()].append(r.node)
    return out


def failure_of(wl: WorkloadView) -> str:
    """How the job stands, in a few words: "failed: worker-1 exited 1 (Error)", "running"."""
    ff = wl.first_failure
    if ff is not None:
        why = f" ({clean(ff.reason, limit=60)})" if ff.reason and ff.reason not in ("Error", "Failed") else ""
        return f"{'failed' if wl.status == 'Failed' else wl.status.lower()}: {clean(ff.label)} exited {ff.exit_code}{why}"
    if wl.status == "Failed" and wl.reason:
        return f"failed: {clean(wl.reason, limit=80)}"
    return wl.status.lower()


async def create_session(client: KubeClient, source: Target, session: dict[str, Any], job: dict[str, Any],
                         store: HistoryStore) -> dict[str, Any]:
    """Create the session (an existing name is an error, never an overwrite); ranks keeps its spec
    and the original's (a convert after either is gone). The object created."""
    from .submit import existing

    name = session["metadata"]["name"]
    clash = await existing(client, source.namespace, name)
    if clash:
        raise SessionError(f'{clash[0].kind.lower()}/{name} already exists in "{source.namespace}"; choose another '
                           "--name", ExitCode.USAGE)
    target = Target(source.namespace, source.kind, name, source.api_version)
    body = {**session, "metadata": {**session["metadata"], "namespace": source.namespace}}
    try:
        created = orjson.loads(await client.request("POST", target.path.rsplit("/", 1)[0], body=body))
    except ApiProblem as exc:
        raise problem(exc, "create", target) from None
    notes = (session["metadata"].get("annotations") or {})
    origin = {"kind": source.kind, "name": source.name, "command": notes.get(DEBUG_COMMAND, ""),
              "failure": notes.get(DEBUG_FAILURE, ""), "job": comparable(job)}
    with contextlib.suppress(OSError):
        await asyncio.to_thread(store.save_job, source.namespace, source.kind, name,
                                str((created.get("metadata") or {}).get("uid") or ""), comparable(created), origin)
    return dict(created)


async def original(client: KubeClient, target: Target, job: dict[str, Any], saved: SavedSession | None
                   ) -> tuple[dict[str, Any] | None, str | None]:
    """A debug session's original job (as the server has it, else as ranks kept it) and the new
    job's default name (the original's when it is gone, else the next: mnist-2); (None, None) for
    a session `ranks debug` did not make."""
    from .lifecycle import get

    origin = str(((job.get("metadata") or {}).get("annotations") or {}).get(DEBUG_OF) or "")
    if not origin:
        return None, None
    try:
        return await get(client, Target(target.namespace, target.kind, origin, target.api_version)), retry_name(origin)
    except SessionError as exc:
        if exc.code != ExitCode.NOT_FOUND:
            raise
    kept = (saved.debug_of or {}).get("job") if saved is not None else None
    return (kept if isinstance(kept, dict) else None), origin
