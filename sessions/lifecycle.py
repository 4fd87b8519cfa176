"""Delete, suspend and resume a workload; and the read-only refusal every mutating action shares.

Suspending sets `spec.runPolicy.suspend` (Kubeflow v1 kinds and MPIJob v2beta1; `spec.suspend`
for JobSet, TrainJob and batch Jobs) with a JSON merge patch: the operator deletes the pods and
marks the job Suspended; resuming clears it and the operator recreates them. Each error is one line
with its exit code: 404 -> not found (8), 403 -> forbidden naming the verb and resource (7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitors import api_paths
from monitors.connection import ExitCode
from monitors.kube import ApiProblem, KubeClient
from monitors.model_views import WorkloadView

from .errors import SessionError

PLURALS = {
    "PyTorchJob": "pytorchjobs", "TFJob": "tfjobs", "XGBoostJob": "xgboostjobs", "MPIJob": "mpijobs",
    "JAXJob": "jaxjobs", "PaddleJob": "paddlejobs", "TrainJob": "trainjobs", "JobSet": "jobsets",
    "Job": "jobs", "DistributedWorkload": "distributedworkloads",
}
RUN_POLICY_KINDS = frozenset({"PyTorchJob", "TFJob", "XGBoostJob", "MPIJob", "JAXJob", "PaddleJob"})
SPEC_SUSPEND_KINDS = frozenset({"TrainJob", "JobSet", "Job"})
READ_ONLY_WHY = "--read-only or read_only = true in the config file"


@dataclass(frozen=True)
class Target:
    """A workload object to act on."""

    namespace: str
    kind: str
    name: str
    api_version: str  # group/version ("kubeflow.org/v1"), or "v1" for the core group

    @property
    def plural(self) -> str:
        return PLURALS.get(self.kind, self.kind.lower() + "s")

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def path(self) -> str:
        return api_paths.of_api_version(self.api_version, self.plural, self.namespace, self.name)

    @property
    def ref(self) -> str:
        """kubectl's way to name it: pytorchjob.kubeflow.org/NAME."""
        return f"{self.kind.lower()}.{self.group}/{self.name}" if self.group else f"{self.kind.lower()}/{self.name}"

    @property
    def resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


def target_of(wl: WorkloadView) -> Target:
    if not wl.api_version:
        raise SessionError(f"{wl.kind.lower()}/{wl.name} has no workload object of its own (only pods); "
                           "nothing to act on", ExitCode.ERROR)
    return Target(wl.namespace, wl.kind, wl.name, wl.api_version)


def refuse_if_read_only(read_only: bool, action: str, why: str | None = None) -> None:
    """Raise SessionError (exit code 2) when read-only mode forbids `action` ("delete pytorchjob/x")."""
    if read_only:
        raise SessionError(f"read-only mode ({why or READ_ONLY_WHY}): refusing to {action}", ExitCode.USAGE)


def problem(exc: ApiProblem, verb: str, target: Target) -> SessionError:
    text = exc.message.strip() or exc.reason
    if exc.status == 404:
        return SessionError(f'{target.kind.lower()} "{target.name}" not found in {target.namespace}',
                            ExitCode.NOT_FOUND)
    if exc.status == 403:
        return SessionError(f"forbidden: cannot {verb} {target.resource} \"{target.name}\" in "
                            f"{target.namespace}: {text}", ExitCode.FORBIDDEN)
    if exc.status == 401:
        return SessionError(exc.one_line(), ExitCode.UNAUTHORIZED)
    return SessionError(f"could not {verb} {target.ref}: {exc.reason}: {text}", ExitCode.ERROR)


async def delete(client: KubeClient, target: Target) -> None:
    """Delete the workload; its pods and Services go with it (garbage collection)."""
    try:
        await client.request("DELETE", target.path, params={"propagationPolicy": "Background"})
    except ApiProblem as exc:
        raise problem(exc, "delete", target) from None


async def get(client: KubeClient, target: Target) -> dict[str, Any]:
    try:
        return await client.get(target.path)
    except ApiProblem as exc:
        raise problem(exc, "get", target) from None


def is_suspended(kind: str, obj: dict[str, Any]) -> bool:
    spec = obj.get("spec") or {}
    if kind in SPEC_SUSPEND_KINDS:
        return spec.get("suspend") is True
    return (spec.get("runPolicy") or {}).get("suspend") is True


def finished(obj: dict[str, Any]) -> str:
    """"Succeeded"/"Failed"/"Complete" when the job has ended, else ""."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Succeeded", "Failed", "Complete", "Completed"):
            return str(c["type"])
    return ""


def _suspend_patch(kind: str, value: bool) -> dict[str, Any]:
    if kind in SPEC_SUSPEND_KINDS:
        return {"spec": {"suspend": value}}
    return {"spec": {"runPolicy": {"suspend": value}}}


async def set_suspended(client: KubeClient, target: Target, value: bool) -> bool:
    """Suspend (True) or resume (False); False when it already was. Raises SessionError."""
    verb = "suspend" if value else "resume"
    if target.kind not in RUN_POLICY_KINDS | SPEC_SUSPEND_KINDS:
        raise SessionError(f"{target.ref} cannot be {verb}d: {target.kind} has no suspend field", ExitCode.ERROR)
    obj = await get(client, target)
    if is_suspended(target.kind, obj) == value:
        return False
    ended = finished(obj)
    if ended and value:
        raise SessionError(f"{target.ref} has finished ({ended}); there is nothing to suspend", ExitCode.ERROR)
    try:
        await client.request("PATCH", target.path, body=_suspend_patch(target.kind, value),
                             content_type="application/merge-patch+json")
    except ApiProblem as exc:
        raise problem(exc, "patch", target) from None
    return True


async def suspend(client: KubeClient, target: Target) -> bool:
    return await set_suspended(client, target, True)


async def resume(client: KubeClient, target: Target) -> bool:
    return await set_suspended(client, target, False)
