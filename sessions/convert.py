"""Interactive session → unattended training job.

The new job is the interactive one's spec (image, resources, env, volumes, node pool, replicas,
slots) with the chosen command instead of `sleep infinity`: on the launcher for MPIJob (workers
keep their sshd), on every replica for PyTorch, TF and XGBoost jobs; the interactive marker is
dropped; the runPolicy becomes one for unattended runs (backoffLimit, cleanPodPolicy Running,
ttlSecondsAfterFinished). `diff` shows what changes, for a confirmation before anything is created.
"""

from __future__ import annotations

import copy
import difflib
from typing import Any

import yaml

from monitors.connection import ExitCode
from monitors.kube import ApiProblem, KubeClient

from .errors import SessionError
from .lifecycle import Target, problem
from .manifests import INTERACTIVE_GRACE_SECONDS, run_policy
from .names import check_name

REPLICA_FIELDS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
                  "MPIJob": "mpiReplicaSpecs", "JAXJob": "jaxReplicaSpecs", "PaddleJob": "paddleReplicaSpecs"}
INTERACTIVE_KEYS = ("ranks/interactive", "priorityClassName")
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink",
                 "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "finalizers")
UNATTENDED_POLICY = run_policy(interactive=False)  # as `ranks submit --command` gives a job
CONVERTED_FROM = "ranks/converted-from"
FRAMEWORKS = {"PyTorchJob": "pytorch", "TFJob": "tensorflow", "XGBoostJob": "xgboost", "MPIJob": "mpi"}


def default_name(name: str) -> str:
    return f"{name[: 63 - 6].rstrip('-')}-train"


def _clean_meta(meta: dict[str, Any], *, drop_interactive: bool) -> dict[str, Any]:
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
    meta = _clean_meta(job.get("metadata") or {}, drop_interactive=False)
    return {"apiVersion": job.get("apiVersion"), "kind": job.get("kind"), "metadata": meta,
            "spec": copy.deepcopy(job.get("spec") or {})}


def unattended(job: dict[str, Any], command: str, name: str | None = None) -> dict[str, Any]:
    """The unattended job built from interactive `job`, running `command` (a shell command line)."""
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
    out = comparable(job)
    meta = _clean_meta(out["metadata"], drop_interactive=True)
    meta["name"] = new_name
    meta.pop("generateName", None)
    meta.setdefault("annotations", {})[CONVERTED_FROM] = src_name
    meta["annotations"].pop("ranks/submit-id", None)
    out["metadata"] = meta
    spec = out["spec"]
    replicas: dict[str, Any] = spec.get(field) or {}
    argv = ["/bin/sh", "-c", command]
    changed = False
    for rtype, rspec in replicas.items():
        tmpl = rspec.setdefault("template", {})
        tmeta = tmpl.get("metadata")
        if tmeta:
            tmpl["metadata"] = _clean_meta(tmeta, drop_interactive=True)
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
        changed = True
    if not changed:
        raise SessionError(f"{kind} {src_name} has no {'launcher' if kind == 'MPIJob' else 'replica'} "
                           "container to run the command in", ExitCode.ERROR)
    policy = dict(spec.get("runPolicy") or {})
    policy.pop("suspend", None)
    policy.update(UNATTENDED_POLICY)
    spec["runPolicy"] = policy
    return out


def diff(job: dict[str, Any], new: dict[str, Any]) -> str:
    """A unified diff of the interactive job's spec and the new one (YAML)."""
    def lines(obj: dict[str, Any]) -> list[str]:
        return yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, width=120).splitlines(keepends=True)

    old_name, new_name = job["metadata"]["name"], new["metadata"]["name"]
    return "".join(difflib.unified_diff(lines(comparable(job)), lines(new), fromfile=f"{job['kind']}/{old_name}",
                                        tofile=f"{new['kind']}/{new_name}", n=2))


async def create(client: KubeClient, source: Target, new: dict[str, Any]) -> Target:
    """Create the new job; an existing name is an error (never an overwrite)."""
    from .submit import existing

    target = Target(source.namespace, source.kind, new["metadata"]["name"], source.api_version)
    clash = await existing(client, source.namespace, target.name)
    if clash:
        same = any(fw.kind == source.kind for fw in clash)
        other = "" if same else f" (a {clash[0].kind}: its pods and Services would clash)"
        ref = target.ref if same else f"{clash[0].kind.lower()}/{target.name}"
        raise SessionError(f'{ref} already exists in "{target.namespace}"{other}; choose another --name',
                           ExitCode.USAGE)
    collection = target.path.rsplit("/", 1)[0]
    new = {**new, "metadata": {**new["metadata"], "namespace": source.namespace}}
    try:
        await client.request("POST", collection, body=new)
    except ApiProblem as exc:
        raise problem(exc, "create", target) from None
    return target
