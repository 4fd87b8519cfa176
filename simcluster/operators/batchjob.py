"""The batch/v1 Job controller (and the TTL-after-finished controller) of kube-controller-manager.

Pods are named `<job>-<5 random chars>` (`<job>-<index>-<5>` for Indexed Jobs) and carry
`batch.kubernetes.io/job-name`, `job-name`, `batch.kubernetes.io/controller-uid` and
`controller-uid` (conventions §6.6) plus a controller ownerReference to the Job.

Supported: NonIndexed and Indexed completion modes, `parallelism`/`completions` (a null
completions is the work-queue pattern), `backoffLimit` (failed pods with restartPolicy Never,
container restarts with OnFailure), `activeDeadlineSeconds`, `suspend`, `ttlSecondsAfterFinished`.
Status keeps `active`, `ready`, `terminating`, `succeeded`, `failed`, `startTime`,
`completionTime`, `completedIndexes` and the conditions SuccessCriteriaMet+Complete or
FailureTarget+Failed (reasons `CompletionsReached`, `BackoffLimitExceeded`, `DeadlineExceeded`),
Suspended. Not emulated: pod finalizers (`batch.kubernetes.io/job-tracking`), the pod-creation
backoff delay, podFailurePolicy, successPolicy and backoffLimitPerIndex.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError
from ..apiserver.store import Event
from ..controllers.base import Controller, EventRecorder, Key, event_keys, keys_of
from .common import (
    BATCH_CONTROLLER_UID,
    BATCH_JOB_NAME,
    COMPLETION_INDEX,
    JOB_KEY,
    LEGACY_CONTROLLER_UID,
    LEGACY_JOB_NAME,
    POD_KEY,
    Timers,
    api_create,
    api_delete,
    as_dict,
    as_list,
    deleting,
    is_active,
    is_int,
    now,
    owned,
    parse_time,
    phase,
    pod_ready,
    restart_count,
    rtype,
    write_status,
)

if TYPE_CHECKING:
    from ..cluster import SimCluster

COMPONENT = "job-controller"


def _job_conditions_true(status: dict[str, Any], ctype: str) -> bool:
    return any(
        isinstance(c, dict) and c.get("type") == ctype and c.get("status") == "True"
        for c in as_list(status.get("conditions"))
    )


def job_finished(job: dict[str, Any]) -> bool:
    st = as_dict(job.get("status"))
    return _job_conditions_true(st, "Complete") or _job_conditions_true(st, "Failed")


def _cond(ctype: str, status: str, reason: str, message: str) -> dict[str, Any]:
    t = now()
    return {
        "type": ctype,
        "status": status,
        "lastProbeTime": t,
        "lastTransitionTime": t,
        "reason": reason,
        "message": message,
    }


def _set_job_condition(status: dict[str, Any], cond: dict[str, Any]) -> None:
    conds = [c for c in as_list(status.get("conditions")) if isinstance(c, dict)]
    for i, c in enumerate(conds):
        if c.get("type") == cond["type"]:
            if c.get("status") == cond["status"]:
                cond["lastTransitionTime"] = c.get("lastTransitionTime", cond["lastTransitionTime"])
            conds[i] = cond
            status["conditions"] = conds
            return
    conds.append(cond)
    status["conditions"] = conds


def _format_indexes(indexes: Iterable[int]) -> str:
    """`completedIndexes`: "0-2,5" style intervals."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(set(indexes)):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [i]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)


def _pod_index(pod: dict[str, Any]) -> int | None:
    meta = pod["metadata"]
    raw = as_dict(meta.get("annotations")).get(COMPLETION_INDEX) or as_dict(meta.get("labels")).get(COMPLETION_INDEX)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


class BatchJobController(Controller):
    name = "job-controller"
    watches = (JOB_KEY, POD_KEY)

    def __init__(self, sim: SimCluster) -> None:
        super().__init__(sim)
        self.events = EventRecorder(sim, COMPONENT)
        self.ttl_events = EventRecorder(sim, "ttl-after-finished-controller")
        self.timers = Timers(self.enqueue_after)

    def initial_keys(self) -> Iterable[Key]:
        return keys_of(self.store, JOB_KEY)

    def keys_for(self, ev: Event) -> Iterable[Key]:
        return event_keys(ev, JOB_KEY, "Job", "batch")

    async def reconcile(self, key: Key) -> None:
        ns, name = key
        st = self.store.find(JOB_KEY, ns, name)
        if st is None:
            return
        job = st.obj
        if deleting(job):
            return
        job_rt = rtype(self.sim, "batch", "v1", "jobs")
        if not isinstance(job.get("spec"), dict):
            return
        if self._ensure_selector(job_rt, job):
            return  # the write re-queues this Job
        spec = job["spec"]
        status = copy.deepcopy(as_dict(job.get("status")))
        uid = job["metadata"]["uid"]
        pods = owned(self.sim, uid, POD_KEY)

        if job_finished(job):
            self._handle_ttl(job_rt, job, status)
            return

        if spec.get("suspend") is True:
            self._suspend(job, status, pods)
            write_status(self.sim, job_rt, job, status)
            return
        if _job_conditions_true(status, "Suspended"):
            _set_job_condition(status, _cond("Suspended", "False", "JobResumed", "Job resumed"))
            status["startTime"] = now()
            self.events.event(job, "Normal", "Resumed", "Job resumed")
        if not status.get("startTime"):
            status["startTime"] = now()
        deadline = spec.get("activeDeadlineSeconds")
        started = parse_time(status.get("startTime")) or time.time()

        active = [p for p in pods if is_active(p)]
        succeeded_pods = [p for p in pods if phase(p) == "Succeeded"]
        failed_pods = [p for p in pods if phase(p) == "Failed"]
        succeeded = max(len(succeeded_pods), int(status.get("succeeded") or 0))
        failed = max(len(failed_pods), int(status.get("failed") or 0))
        template_spec = as_dict(as_dict(spec.get("template")).get("spec"))
        restart_policy = template_spec.get("restartPolicy", "Never")
        backoff = spec.get("backoffLimit", 6)
        backoff = backoff if is_int(backoff) else 6
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        completions = completions if is_int(completions) else None
        parallelism = spec.get("parallelism", 1)
        parallelism = parallelism if is_int(parallelism) and parallelism >= 0 else 1

        fail_reason = fail_msg = None
        restarts = sum(restart_count(p) for p in active) if restart_policy == "OnFailure" else 0
        if failed > backoff or (restart_policy == "OnFailure" and (restarts > 0 if backoff == 0 else restarts >= backoff)):
            fail_reason, fail_msg = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        elif is_int(deadline) and time.time() - started >= deadline:
            fail_reason, fail_msg = "DeadlineExceeded", "Job was active longer than specified deadline"

        done_indexes: set[int] = set()
        if indexed:
            done_indexes = {i for p in succeeded_pods if (i := _pod_index(p)) is not None}
            if completions is not None:
                done_indexes = {i for i in done_indexes if 0 <= i < completions}
        if fail_reason is not None:
            for p in active:
                self._delete_pod(job, p)
            _set_job_condition(status, _cond("FailureTarget", "True", fail_reason, fail_msg or ""))
            _set_job_condition(status, _cond("Failed", "True", fail_reason, fail_msg or ""))
            self.events.event(job, "Warning", fail_reason, fail_msg or "")
            active = []
        else:
            complete = False
            if indexed:
                complete = completions is not None and len(done_indexes) >= completions
            elif completions is not None:
                complete = succeeded >= completions
            else:
                complete = succeeded > 0 and not active
            if complete:
                for p in active:
                    self._delete_pod(job, p)
                active = []
                msg = "Reached expected number of succeeded pods"
                _set_job_condition(status, _cond("SuccessCriteriaMet", "True", "CompletionsReached", msg))
                _set_job_condition(status, _cond("Complete", "True", "CompletionsReached", msg))
                status["completionTime"] = now()
                self.events.event(job, "Normal", "Completed", "Job completed")
            else:
                active = active + self._create_pods(
                    job, active, succeeded, completions, parallelism, indexed, done_indexes
                )
            if is_int(deadline) and not complete:
                self.timers.at(key, started + deadline - time.time())

        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if pod_ready(p))
        status["terminating"] = sum(1 for p in pods if deleting(p) and phase(p) not in ("Succeeded", "Failed"))
        status["succeeded"] = succeeded
        status["failed"] = failed
        status.setdefault("uncountedTerminatedPods", {})
        if indexed and done_indexes:
            status["completedIndexes"] = _format_indexes(done_indexes)
        for k in ("active", "succeeded", "failed"):
            if not status[k]:
                del status[k]
        write_status(self.sim, job_rt, job, status)
        if job_finished({"status": status}):
            self._handle_ttl(job_rt, job, status)

    # -- helpers -------------------------------------------------------------------------------
    def _ensure_selector(self, job_rt: Any, job: dict[str, Any]) -> bool:
        """What the API server does on create: selector on the controller-uid, template labels."""
        spec = job["spec"]
        meta = job["metadata"]
        uid, name = meta["uid"], meta["name"]
        tmpl_labels = as_dict(as_dict(as_dict(spec.get("template")).get("metadata")).get("labels"))
        want = {
            BATCH_CONTROLLER_UID: uid,
            BATCH_JOB_NAME: name,
            LEGACY_CONTROLLER_UID: uid,
            LEGACY_JOB_NAME: name,
        }
        if spec.get("manualSelector") is True and spec.get("selector"):
            return False
        if spec.get("selector") and all(tmpl_labels.get(k) == v for k, v in want.items()):
            return False

        def fn(o: dict[str, Any]) -> None:
            s = o["spec"]
            if not (s.get("manualSelector") is True and s.get("selector")):
                s["selector"] = {"matchLabels": {BATCH_CONTROLLER_UID: uid}}
            tmpl = s.setdefault("template", {})
            if not isinstance(tmpl, dict):
                tmpl = s["template"] = {}
            tmeta = tmpl.setdefault("metadata", {})
            if not isinstance(tmeta.get("labels"), dict):
                tmeta["labels"] = {}
            tmeta["labels"].update(want)

        self.store.mutate(job_rt, meta.get("namespace", ""), name, fn)
        return True

    def _suspend(self, job: dict[str, Any], status: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        for p in pods:
            if is_active(p):
                self._delete_pod(job, p)
        if not _job_conditions_true(status, "Suspended"):
            _set_job_condition(status, _cond("Suspended", "True", "JobSuspended", "Job suspended"))
            self.events.event(job, "Normal", "Suspended", "Job suspended")
        status.pop("startTime", None)
        status.pop("active", None)
        status["ready"] = 0
        status.setdefault("uncountedTerminatedPods", {})

    def _create_pods(
        self,
        job: dict[str, Any],
        active: list[dict[str, Any]],
        succeeded: int,
        completions: int | None,
        parallelism: int,
        indexed: bool,
        done: set[int],
    ) -> list[dict[str, Any]]:
        made: list[dict[str, Any]] = []
        if indexed:
            if completions is None:
                return made
            busy = {i for p in active if (i := _pod_index(p)) is not None}
            unstarted = [i for i in range(completions) if i not in done and i not in busy]
            room = max(0, parallelism - len(active))
            for i in unstarted[:room]:
                pod = self._create_pod(job, i)
                if pod is None:
                    break
                made.append(pod)
            return made
        if completions is None:
            want = parallelism if succeeded == 0 else 0
        else:
            want = min(parallelism, max(0, completions - succeeded))
        for _ in range(max(0, want - len(active))):
            pod = self._create_pod(job, None)
            if pod is None:
                break
            made.append(pod)
        return made

    def _create_pod(self, job: dict[str, Any], index: int | None) -> dict[str, Any] | None:
        meta = job["metadata"]
        name, uid = meta["name"], meta["uid"]
        tmpl = copy.deepcopy(as_dict(job["spec"].get("template")))
        tmeta = as_dict(tmpl.get("metadata"))
        labels = dict(as_dict(tmeta.get("labels")))
        labels.update({BATCH_CONTROLLER_UID: uid, BATCH_JOB_NAME: name, LEGACY_CONTROLLER_UID: uid, LEGACY_JOB_NAME: name})
        annotations = dict(as_dict(tmeta.get("annotations")))
        spec = as_dict(tmpl.get("spec"))
        prefix = f"{name}-"
        if index is not None:
            annotations[COMPLETION_INDEX] = str(index)
            labels[COMPLETION_INDEX] = str(index)
            prefix = f"{name}-{index}-"
            if not spec.get("hostname"):
                spec["hostname"] = f"{name}-{index}"
            env = {
                "name": "JOB_COMPLETION_INDEX",
                "valueFrom": {
                    "fieldRef": {
                        "apiVersion": "v1",
                        "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']",
                    }
                },
            }
            for key in ("initContainers", "containers"):
                for c in as_list(spec.get(key)):
                    if isinstance(c, dict):
                        c["env"] = [*as_list(c.get("env")), env]
        pod_meta: dict[str, Any] = {
            "name": self.store.generate_name(prefix),
            "generateName": prefix,
            "namespace": meta.get("namespace", ""),
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name,
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        if annotations:
            pod_meta["annotations"] = annotations
        if tmeta.get("finalizers"):
            pod_meta["finalizers"] = list(tmeta["finalizers"])
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}
        try:
            st = api_create(self.sim, rtype(self.sim, "", "v1", "pods"), pod)
        except ApiError as err:
            self.events.event(job, "Warning", "FailedCreate", f"Error creating: {err.message}")
            return None
        self.events.event(job, "Normal", "SuccessfulCreate", f"Created pod: {st.obj['metadata']['name']}")
        return st.obj

    def _delete_pod(self, job: dict[str, Any], pod: dict[str, Any]) -> None:
        if api_delete(self.sim, rtype(self.sim, "", "v1", "pods"), pod):
            self.events.event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")

    def _handle_ttl(self, job_rt: Any, job: dict[str, Any], status: dict[str, Any]) -> None:
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if not is_int(ttl):
            return
        finished = parse_time(status.get("completionTime"))
        if finished is None:
            for c in as_list(status.get("conditions")):
                if isinstance(c, dict) and c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                    finished = parse_time(c.get("lastTransitionTime"))
        if finished is None:
            finished = time.time()
        left = finished + ttl - time.time()
        meta = job["metadata"]
        if left > 0:
            self.timers.at((meta.get("namespace", ""), meta["name"]), left)
            return
        api_delete(self.sim, job_rt, job)
        self.events.forget(meta.get("uid", ""))
