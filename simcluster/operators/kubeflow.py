"""The Kubeflow Training Operator v1 job reconciler (`ReconcileJobs` of release-1.9), shared by
PyTorchJob, TFJob and XGBoostJob. A `Framework` supplies what differs per kind: defaults,
validation, the master role, the injected cluster spec (env); the status rule is one for every
kind, with each kind's names (`job_status`).

Per replica index the operator creates a pod and a headless Service, both named
`<job>-<lowercase replica type>-<index>`, labelled `training.kubeflow.org/operator-name`,
`job-name`, `replica-type` (lowercase), `replica-index` and, on the master-role pod, `job-role:
master` (conventions §1.4). Pods carry a controller ownerReference to the job and the gang
annotations (`scheduling.k8s.io/group-name: <job>`, `simcluster.io/pod-group-min-member:
<runPolicy.schedulingPolicy.minAvailable or the total replica count>`).

Job conditions, reasons and messages are the operator's (`PyTorchJobCreated`, `...Running`,
`...Restarting`, `...Succeeded`, `...Failed`, `...Suspended`, `...Resumed`); a pod that failed
under restartPolicy OnFailure/Always (or ExitCode with a retryable code >= 128) is deleted and
recreated with a Restarting condition; restartPolicy Never makes the job Failed. runPolicy:
`suspend`, `backoffLimit` (container restarts counted as upstream), `activeDeadlineSeconds`
(reason `<Kind>Failed`, message "... active longer than specified deadline", as upstream),
`cleanPodPolicy`, `ttlSecondsAfterFinished` (deletes the job).

Validation is the operator's admission webhook run inside the reconciler: a bad manifest gets a
Warning event and a Failed condition with reason `<Kind>FailedValidation` and the field errors
("spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1"). simcluster adds
one rule of its own: every container needs a `command` or `args`, since no image is run.
Not emulated: PodGroup objects, the PyTorch `init-pytorch` init container, HPA for elastic jobs.
"""

from __future__ import annotations

import abc
import copy
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..apiserver.errors import ApiError
from ..apiserver.resources import ResourceType
from ..apiserver.store import Event
from ..controllers.base import Controller, EventRecorder, Key
from ..controllers.scheduler import POD_GROUP, POD_GROUP_MIN_MEMBER
from .common import (
    JOB_NAME,
    JOB_ROLE,
    OPERATOR_NAME,
    POD_KEY,
    REPLICA_INDEX,
    REPLICA_TYPE,
    SERVICE_KEY,
    Timers,
    aggregate,
    api_create,
    api_delete,
    as_dict,
    as_list,
    camel_case_keys,
    canonical_pod_spec,
    condition_true,
    container_command_errors,
    controller_ref,
    deleting,
    exit_code,
    forbidden,
    invalid,
    is_active,
    is_finished,
    is_int,
    label_selector_string,
    not_supported,
    now,
    owned,
    parse_time,
    phase,
    required,
    restart_count,
    rtype,
    set_condition,
    write_status,
)
from .job_status import STATUS_RULES, update_job_status

if TYPE_CHECKING:
    from ..cluster import SimCluster

RESTART_POLICIES = ("Always", "ExitCode", "Never", "OnFailure")
CLEAN_POD_POLICIES = ("All", "None", "Running")


@dataclass
class Replica:
    """A defaulted replica spec."""

    rtype: str
    replicas: int
    restart_policy: str
    template: dict[str, Any]


class Framework(abc.ABC):
    """What differs between the training-operator kinds."""

    kind: ClassVar[str] = ""
    plural: ClassVar[str] = ""
    version: ClassVar[str] = "v1"
    replica_field: ClassVar[str] = ""
    replica_types: ClassVar[tuple[str, ...]] = ()
    default_container: ClassVar[str] = ""
    port_name: ClassVar[str] = ""
    default_port: ClassVar[int] = 0
    default_restart: ClassVar[str] = "Never"
    controller_name: ClassVar[str] = ""
    default_clean_pod_policy: ClassVar[str] = "None"

    # -- defaulting and validation ------------------------------------------------------------
    def replica_specs(self, spec: dict[str, Any]) -> tuple[dict[str, Replica], list[str]]:
        path = f"spec.{self.replica_field}"
        raw = spec.get(self.replica_field)
        errs: list[str] = []
        if raw is None:
            return {}, [required(path, "must be required")]
        if not isinstance(raw, dict):
            return {}, [invalid(path, type(raw).__name__, "must be a map of replica type to replica spec")]
        raw = camel_case_keys(raw, self.replica_types)
        out: dict[str, Replica] = {}
        for rt in sorted(raw):
            rspec = raw[rt]
            rpath = f"{path}[{rt}]"
            if rt not in self.replica_types:
                errs.append(not_supported(rpath, rt, self.replica_types))
            if not isinstance(rspec, dict):
                errs.append(required(f"{rpath}.template.spec.containers", "must be specified"))
                continue
            replicas = rspec.get("replicas", 1)
            if replicas is None:
                replicas = 1
            if not is_int(replicas):
                errs.append(invalid(f"{rpath}.replicas", replicas, "must be an integer"))
                replicas = 0
            elif replicas < 0:
                errs.append(invalid(f"{rpath}.replicas", replicas, "must be greater than or equal to 0"))
            policy = rspec.get("restartPolicy") or self.default_restart
            if policy not in RESTART_POLICIES:
                errs.append(not_supported(f"{rpath}.restartPolicy", policy, RESTART_POLICIES))
            template = rspec.get("template")
            tspec = as_dict(as_dict(template).get("spec"))
            containers = tspec.get("containers")
            cpath = f"{rpath}.template.spec.containers"
            if not isinstance(containers, list) or not containers:
                errs.append(required(cpath, "must be specified"))
                containers = []
            elif not all(isinstance(c, dict) for c in containers):
                errs.append(invalid(cpath, "container", "each container must be an object"))
                containers = [c for c in containers if isinstance(c, dict)]
            if containers and not any(c.get("name") == self.default_container for c in containers):
                errs.append(required(cpath, f"must have at least one container with name {self.default_container}"))
            errs.extend(container_command_errors(containers, cpath))
            # shared with the stored object: copy before changing (`defaulted_template`)
            template = template if isinstance(template, dict) else {}
            out[rt] = Replica(rt, replicas if is_int(replicas) else 0, str(policy), template)
        errs.extend(self.validate(spec, out))
        return out, errs

    def defaulted_template(self, rep: Replica) -> dict[str, Any]:
        """A copy of the replica's pod template with the defaulter's port on the default container."""
        template = copy.deepcopy(rep.template)
        self._default_port(template)
        return template

    def _default_port(self, template: dict[str, Any]) -> None:
        for c in as_list(as_dict(template.get("spec")).get("containers")):
            if isinstance(c, dict) and c.get("name") == self.default_container:
                ports = as_list(c.get("ports"))
                if not any(isinstance(p, dict) and p.get("name") == self.port_name for p in ports):
                    ports.append({"name": self.port_name, "containerPort": self.default_port})
                c["ports"] = ports
                return

    def validate(self, spec: dict[str, Any], replicas: dict[str, Replica]) -> list[str]:
        return []

    def port(self, replicas: dict[str, Replica], rt: str) -> int | None:
        rep = replicas.get(rt)
        if rep is None:
            return None
        for c in as_list(as_dict(rep.template.get("spec")).get("containers")):
            if isinstance(c, dict) and c.get("name") == self.default_container:
                for p in as_list(c.get("ports")):
                    if isinstance(p, dict) and p.get("name") == self.port_name:
                        return p["containerPort"] if is_int(p.get("containerPort")) else None
                return self.default_port  # the defaulter adds it
        return None

    # -- per kind behaviour ---------------------------------------------------------------------
    def is_master_role(self, replicas: dict[str, Replica], rt: str, index: int) -> bool:
        return rt == "Master"

    @abc.abstractmethod
    def set_cluster_spec(
        self, job: dict[str, Any], replicas: dict[str, Replica], template: dict[str, Any], rt: str, index: int
    ) -> None:
        """Inject the env the operator sets (raise ValueError to refuse creating the pod)."""

    def update_status(
        self,
        ctrl: KubeflowJobController,
        job: dict[str, Any],
        replicas: dict[str, Replica],
        status: dict[str, Any],
        pods: list[dict[str, Any]],
    ) -> None:
        """Set the job's conditions from its replicaStatuses (the operator's rule, this kind's row
        of `job_status.STATUS_RULES`)."""
        update_job_status(
            STATUS_RULES[self.kind], self.kind, job, replicas, status,
            lambda type_, reason, message: ctrl.record(job, type_, reason, message),
            lambda succeeded: self.workers_done_early(job, replicas, pods, succeeded),
        )

    def workers_done_early(self, job: dict[str, Any], replicas: dict[str, Replica], pods: list[dict[str, Any]],
                           succeeded: int) -> bool:
        """Without a leader, whether the workers are done before all succeeded (`job_status`)."""
        return False

    # -- helpers for subclasses ---------------------------------------------------------------
    def reason(self, what: str) -> str:
        return f"{self.kind}{what}"


def total_replicas(replicas: dict[str, Replica]) -> int:
    return sum(r.replicas for r in replicas.values())


def append_env(container: dict[str, Any], *pairs: tuple[str, str]) -> None:
    env = as_list(container.get("env"))
    env.extend({"name": k, "value": v} for k, v in pairs)
    container["env"] = env


def containers_of(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in as_list(as_dict(template.get("spec")).get("containers")) if isinstance(c, dict)]


class KubeflowJobController(Controller):
    def __init__(self, sim: SimCluster, fw: Framework) -> None:
        super().__init__(sim)
        self.fw = fw
        self.name = fw.controller_name
        self.job_key = ("kubeflow.org", fw.plural)
        self.watches = (self.job_key, POD_KEY, SERVICE_KEY)
        self.events = EventRecorder(sim, fw.controller_name)
        self.timers = Timers(self.enqueue_after)

    # -- wiring -----------------------------------------------------------------------------------
    def initial_keys(self) -> Iterable[Key]:
        for st in self.store.items(self.job_key):
            yield (st.obj["metadata"].get("namespace", ""), st.obj["metadata"]["name"])

    def keys_for(self, ev: Event) -> Iterable[Key]:
        meta = ev.obj.get("metadata") or {}
        if ev.tkey == self.job_key:
            if ev.type == "DELETED":
                self.events.forget(meta.get("uid", ""))
            else:
                yield (meta.get("namespace", ""), meta.get("name", ""))
            return
        ref = controller_ref(ev.obj)
        if ref is not None and ref.get("kind") == self.fw.kind and str(ref.get("apiVersion", "")).startswith("kubeflow.org/"):
            yield (meta.get("namespace", ""), ref.get("name", ""))

    def job_rt(self) -> ResourceType:
        return rtype(self.sim, "kubeflow.org", self.fw.version, self.fw.plural)

    # -- reconcile --------------------------------------------------------------------------------
    async def reconcile(self, key: Key) -> None:
        ns, name = key
        st = self.store.find(self.job_key, ns, name)
        if st is None or deleting(st.obj):
            return
        job = st.obj
        if job.get("apiVersion") != f"kubeflow.org/{self.fw.version}":
            return
        job_rt = self.job_rt()
        fw = self.fw
        status = copy.deepcopy(as_dict(job.get("status")))
        if not as_list(status.get("conditions")):
            set_condition(status, "Created", "True", fw.reason("Created"), f"{fw.kind} {name} is created.")
        spec = job.get("spec")
        if not isinstance(spec, dict):
            self._fail_validation(job, status, [required("spec", "must be specified")])
            return
        run_raw = spec.get("runPolicy")
        if run_raw is not None and not isinstance(run_raw, dict):
            self._fail_validation(job, status, [invalid("spec.runPolicy", run_raw, "must be an object")])
            return
        run = as_dict(run_raw)
        if run.get("managedBy") not in (None, "", "kubeflow.org/training-operator"):
            return  # another controller (e.g. MultiKueue) owns this job
        replicas, errs = fw.replica_specs(spec)
        errs.extend(self._validate_run_policy(run))
        if errs:
            self._fail_validation(job, status, errs)
            return

        uid = job["metadata"]["uid"]
        pods = owned(self.sim, uid, POD_KEY)
        services = owned(self.sim, uid, SERVICE_KEY)
        clean_policy = run.get("cleanPodPolicy") or fw.default_clean_pod_policy

        if is_finished(status):
            self._clean_up(job, status, clean_policy, pods, services, finished=True)
            if condition_true(status, "Succeeded"):
                for rs in as_dict(status.get("replicaStatuses")).values():
                    if isinstance(rs, dict) and rs.get("active"):
                        rs["succeeded"] = int(rs.get("succeeded") or 0) + rs.pop("active")
            write_status(self.sim, job_rt, job, status)
            self._cleanup_ttl(job, run, status)
            return

        if run.get("suspend") is True:
            self._clean_up(job, status, clean_policy, pods, services, finished=False)
            for rs in as_dict(status.get("replicaStatuses")).values():
                if isinstance(rs, dict):
                    rs.pop("active", None)
            msg = f"{fw.kind} {name} is suspended."
            if condition_true(status, "Running"):
                set_condition(status, "Running", "False", fw.reason("Suspended"), msg)
            if not condition_true(status, "Suspended"):
                set_condition(status, "Suspended", "True", fw.reason("Suspended"), msg)
                self.events.event(job, "Normal", fw.reason("Suspended"), msg)
            write_status(self.sim, job_rt, job, status)
            return
        if condition_true(status, "Suspended"):
            msg = f"{fw.kind} {name} is resumed."
            set_condition(status, "Suspended", "False", fw.reason("Resumed"), msg)
            status["startTime"] = now()
            self.events.event(job, "Normal", fw.reason("Resumed"), msg)

        active = [p for p in pods if is_active(p)]
        failed = sum(1 for p in pods if phase(p) == "Failed")
        total = total_replicas(replicas)
        prev_failed = sum(
            int(rs.get("failed") or 0) for rs in as_dict(status.get("replicaStatuses")).values() if isinstance(rs, dict)
        )
        failure_message = None
        backoff = run.get("backoffLimit")
        if is_int(backoff):
            new_failure = failed > prev_failed
            exceeds = new_failure and len(active) != total and backoff < 1
            if exceeds or self._past_backoff_limit(backoff, replicas, pods):
                failure_message = f"Job {name} has failed because it has reached the specified backoff limit"
        if failure_message is None and self._past_deadline(run, status):
            failure_message = f"Job {name} has failed because it was active longer than specified deadline"
        if failure_message is not None:
            if not status.get("completionTime"):
                status["completionTime"] = now()
            self._clean_up(job, status, clean_policy, pods, services, finished=False)
            self.events.event(job, "Normal", fw.reason("Failed"), failure_message)
            set_condition(status, "Failed", "True", fw.reason("Failed"), failure_message)
            write_status(self.sim, job_rt, job, status)
            self._cleanup_ttl(job, run, status)
            return

        statuses: dict[str, Any] = {}
        status["replicaStatuses"] = statuses
        for rt in sorted(replicas):
            self._reconcile_pods(job, status, pods, replicas, replicas[rt], run)
            self._reconcile_services(job, services, replicas[rt], replicas)

        if not status.get("startTime"):
            status["startTime"] = now()
        deadline = run.get("activeDeadlineSeconds")
        if is_int(deadline):
            started = parse_time(status.get("startTime")) or time.time()
            self.timers.at(key, started + deadline - time.time())
        for rt in replicas:
            rs = statuses.setdefault(rt, {})
            labels = {OPERATOR_NAME: fw.controller_name, JOB_NAME: name.replace("/", "-"), REPLICA_TYPE: rt.lower()}
            rs["selector"] = label_selector_string(labels)
        fw.update_status(self, job, replicas, status, pods)
        for rs in statuses.values():
            for k in ("active", "succeeded", "failed"):
                if not rs.get(k):
                    rs.pop(k, None)
        if condition_true(status, "Failed") or condition_true(status, "Succeeded"):
            if not status.get("completionTime"):
                status["completionTime"] = now()
            if status != as_dict(job.get("status")):
                status["lastReconcileTime"] = now()
            write_status(self.sim, job_rt, job, status)
            self.enqueue(key)  # the finished branch applies cleanPodPolicy and the TTL
            return
        if status != as_dict(job.get("status")):
            status["lastReconcileTime"] = now()
        write_status(self.sim, job_rt, job, status)

    # -- pieces ---------------------------------------------------------------------------------
    def _fail_validation(self, job: dict[str, Any], status: dict[str, Any], errs: list[str]) -> None:
        fw = self.fw
        if condition_true(status, "Failed"):
            write_status(self.sim, self.job_rt(), job, status)
            return
        msg = f"{fw.kind} failed validation because {aggregate(errs)}"
        self.events.event(job, "Warning", fw.reason("FailedValidation"), msg)
        set_condition(status, "Failed", "True", fw.reason("FailedValidation"), msg)
        status.setdefault("replicaStatuses", {})
        write_status(self.sim, self.job_rt(), job, status)

    def _validate_run_policy(self, run: dict[str, Any]) -> list[str]:
        errs = []
        p = "spec.runPolicy"
        for field in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
            v = run.get(field)
            if v is not None and (not is_int(v) or v < 0):
                errs.append(invalid(f"{p}.{field}", v, "must be greater than or equal to 0"))
        policy = run.get("cleanPodPolicy")
        if policy is not None and policy not in CLEAN_POD_POLICIES:
            errs.append(not_supported(f"{p}.cleanPodPolicy", policy, CLEAN_POD_POLICIES))
        sched = run.get("schedulingPolicy")
        if sched is not None:
            if not isinstance(sched, dict):
                errs.append(invalid(f"{p}.schedulingPolicy", "value", "must be an object"))
            elif sched.get("minAvailable") is not None and (not is_int(sched["minAvailable"]) or sched["minAvailable"] < 0):
                errs.append(invalid(f"{p}.schedulingPolicy.minAvailable", sched["minAvailable"], "must be greater than or equal to 0"))
        if run.get("suspend") is not None and not isinstance(run.get("suspend"), bool):
            errs.append(invalid(f"{p}.suspend", run["suspend"], "must be a boolean"))
        return errs

    def _past_backoff_limit(self, backoff: int, replicas: dict[str, Replica], pods: list[dict[str, Any]]) -> bool:
        result = 0
        for rt, rep in replicas.items():
            if rep.restart_policy not in ("OnFailure", "Always", "ExitCode"):
                continue
            for p in pods:
                if p["metadata"].get("labels", {}).get(REPLICA_TYPE) == rt.lower() and phase(p) == "Running":
                    result += restart_count(p)
        return result > 0 if backoff == 0 else result >= backoff

    def _past_deadline(self, run: dict[str, Any], status: dict[str, Any]) -> bool:
        deadline = run.get("activeDeadlineSeconds")
        start = parse_time(status.get("startTime"))
        if not is_int(deadline) or start is None:
            return False
        return time.time() - start >= deadline

    def _clean_up(
        self,
        job: dict[str, Any],
        status: dict[str, Any],
        policy: str,
        pods: list[dict[str, Any]],
        services: list[dict[str, Any]],
        *,
        finished: bool,
    ) -> None:
        """`DeletePodsAndServices`: cleanPodPolicy applies only once the job has finished."""
        if finished and policy == "None":
            return
        svc_by_name = {s["metadata"]["name"]: s for s in services}
        for pod in pods:
            if finished and policy == "Running" and phase(pod) not in ("Running", "Pending"):
                continue
            self._delete_pod(job, pod)
            svc = svc_by_name.get(pod["metadata"]["name"])
            if svc is not None:
                self._delete_service(job, svc)

    def _cleanup_ttl(self, job: dict[str, Any], run: dict[str, Any], status: dict[str, Any]) -> None:
        if run.get("suspend") is True:
            return
        ttl = run.get("ttlSecondsAfterFinished")
        if not is_int(ttl):
            return
        done = parse_time(status.get("completionTime"))
        if done is None:
            return
        left = done + ttl - time.time()
        meta = job["metadata"]
        if left > 0:
            self.timers.at((meta.get("namespace", ""), meta["name"]), left)
            return
        if api_delete(self.sim, self.job_rt(), job):
            self.events.event(job, "Normal", "SuccessfulDeletePod", f"Deleted job: {meta['name']}")

    def _reconcile_pods(
        self,
        job: dict[str, Any],
        status: dict[str, Any],
        pods: list[dict[str, Any]],
        replicas: dict[str, Replica],
        rep: Replica,
        run: dict[str, Any],
    ) -> None:
        fw = self.fw
        name = job["metadata"]["name"]
        lower = rep.rtype.lower()
        mine = [p for p in pods if as_dict(p["metadata"].get("labels")).get(REPLICA_TYPE) == lower]
        statuses = status["replicaStatuses"]
        rs = statuses.setdefault(rep.rtype, {})
        rs["active"] = rs["succeeded"] = rs["failed"] = 0
        slices: dict[int, list[dict[str, Any]]] = {}
        for p in mine:
            try:
                idx = int(as_dict(p["metadata"].get("labels")).get(REPLICA_INDEX, ""))
            except ValueError:
                continue
            slices.setdefault(idx, []).append(p)
        size = max([rep.replicas, *(i + 1 for i in slices)])
        for index in range(size):
            group = slices.get(index, [])
            if len(group) > 1:
                continue  # "We have too many pods": left alone, as upstream
            if not group:
                if index < rep.replicas:
                    self._create_pod(job, replicas, rep, index, run)
                continue
            pod = group[0]
            if index >= rep.replicas:
                self._delete_pod(job, pod)
            code = exit_code(pod, fw.default_container)
            if code is not None:
                self.events.event(
                    job, "Normal", "ExitedWithCode",
                    f"Pod: {pod['metadata'].get('namespace')}.{pod['metadata']['name']} exited with code {code}",
                )
            code = 0xBEEF if code is None else code
            failed = phase(pod) == "Failed"
            retryable = rep.restart_policy in ("OnFailure", "Always") or (
                rep.restart_policy == "ExitCode" and code >= 128
            )
            if failed and retryable:
                self._delete_pod(job, pod)
                msg = f"job {name} is restarting because {rep.rtype} replica(s) failed."
                self.events.event(job, "Warning", fw.reason("Restarting"), msg)
                set_condition(status, "Restarting", "True", fw.reason("Restarting"), msg)
            elif failed and rep.restart_policy == "ExitCode":
                msg = f'job "{name}" is failing because "{rep.rtype}" replica(s) failed.'
                self.events.event(job, "Warning", fw.reason("Failed"), msg)
                set_condition(status, "Failed", "True", fw.reason("Failed"), msg)
            ph = phase(pod)
            if ph == "Running":
                if deleting(pod):
                    rs["failed"] += 1
                else:
                    rs["active"] += 1
            elif ph == "Succeeded":
                rs["succeeded"] += 1
            elif ph == "Failed":
                rs["failed"] += 1

    def _gang_annotations(self, job: dict[str, Any], replicas: dict[str, Replica], run: dict[str, Any]) -> dict[str, str]:
        min_member = total_replicas(replicas)
        avail = as_dict(run.get("schedulingPolicy")).get("minAvailable")
        if is_int(avail):
            min_member = avail
        return {POD_GROUP: job["metadata"]["name"], POD_GROUP_MIN_MEMBER: str(min_member)}

    def _create_pod(
        self, job: dict[str, Any], replicas: dict[str, Replica], rep: Replica, index: int, run: dict[str, Any]
    ) -> None:
        fw = self.fw
        meta = job["metadata"]
        lower = rep.rtype.lower()
        template = fw.defaulted_template(rep)
        tmeta = as_dict(template.get("metadata"))
        labels = {k: v for k, v in as_dict(tmeta.get("labels")).items() if isinstance(v, str)}
        labels.update({
            OPERATOR_NAME: fw.controller_name,
            JOB_NAME: meta["name"].replace("/", "-"),
            REPLICA_TYPE: lower,
            REPLICA_INDEX: str(index),
        })
        if fw.is_master_role(replicas, rep.rtype, index):
            labels[JOB_ROLE] = "master"
        annotations = {k: v for k, v in as_dict(tmeta.get("annotations")).items() if isinstance(v, str)}
        annotations.update(self._gang_annotations(job, replicas, run))
        if not isinstance(template.get("spec"), dict):
            template["spec"] = {}
        try:
            fw.set_cluster_spec(job, replicas, template, rep.rtype, index)
        except ValueError as exc:
            self.events.event(job, "Warning", "FailedCreatePod", f"Error creating: {exc}")
            return
        pspec = template["spec"]
        if pspec.get("restartPolicy"):
            self.events.event(
                job, "Warning", "SetPodTemplateRestartPolicy",
                "Restart policy in pod template will be overwritten by restart policy in replica spec",
            )
        pspec["restartPolicy"] = "Never" if rep.restart_policy == "ExitCode" else rep.restart_policy
        pod_name = f"{meta['name']}-{lower}-{index}".replace("/", "-")
        pod_meta: dict[str, Any] = {
            "name": pod_name,
            "namespace": meta.get("namespace", ""),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [self._owner(job)],
        }
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": canonical_pod_spec(pspec)}
        try:
            api_create(self.sim, rtype(self.sim, "", "v1", "pods"), pod)
        except ApiError as err:
            if err.code != 409:
                self.events.event(job, "Warning", "FailedCreatePod", f"Error creating: {err.message}")
            return
        self.events.event(job, "Normal", "SuccessfulCreatePod", f"Created pod: {pod_name}")

    def _owner(self, job: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": job["apiVersion"],
            "kind": job["kind"],
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def _reconcile_services(
        self, job: dict[str, Any], services: list[dict[str, Any]], rep: Replica, replicas: dict[str, Replica]
    ) -> None:
        lower = rep.rtype.lower()
        mine: dict[int, list[dict[str, Any]]] = {}
        for s in services:
            labels = as_dict(s["metadata"].get("labels"))
            if labels.get(REPLICA_TYPE) != lower:
                continue
            try:
                mine.setdefault(int(labels.get(REPLICA_INDEX, "")), []).append(s)
            except ValueError:
                continue
        size = max([rep.replicas, *(i + 1 for i in mine)])
        for index in range(size):
            group = mine.get(index, [])
            if not group and index < rep.replicas:
                self._create_service(job, rep, index)
            elif len(group) == 1 and index >= rep.replicas:
                self._delete_service(job, group[0])

    def _create_service(self, job: dict[str, Any], rep: Replica, index: int) -> None:
        fw = self.fw
        meta = job["metadata"]
        lower = rep.rtype.lower()
        labels = {
            OPERATOR_NAME: fw.controller_name,
            JOB_NAME: meta["name"].replace("/", "-"),
            REPLICA_TYPE: lower,
            REPLICA_INDEX: str(index),
        }
        ports = []
        for c in containers_of(fw.defaulted_template(rep)):
            if c.get("name") == fw.default_container:
                for p in as_list(c.get("ports")):
                    if isinstance(p, dict) and is_int(p.get("containerPort")):
                        ports.append({"name": p.get("name", ""), "port": p["containerPort"]})
        name = f"{meta['name']}-{lower}-{index}".replace("/", "-")
        svc = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": meta.get("namespace", ""),
                "labels": labels,
                "ownerReferences": [self._owner(job)],
            },
            "spec": {"clusterIP": "None", "selector": dict(labels), "ports": ports},
        }
        try:
            api_create(self.sim, rtype(self.sim, "", "v1", "services"), svc)
        except ApiError as err:
            if err.code != 409:
                self.events.event(job, "Warning", "FailedCreateService", f"Error creating: {err.message}")
            return
        self.events.event(job, "Normal", "SuccessfulCreateService", f"Created service: {name}")

    def _delete_pod(self, job: dict[str, Any], pod: dict[str, Any]) -> None:
        if deleting(pod):
            return
        if api_delete(self.sim, rtype(self.sim, "", "v1", "pods"), pod):
            self.events.event(job, "Normal", "SuccessfulDeletePod", f"Deleted pod: {pod['metadata']['name']}")

    def _delete_service(self, job: dict[str, Any], svc: dict[str, Any]) -> None:
        if api_delete(self.sim, rtype(self.sim, "", "v1", "services"), svc):
            self.events.event(job, "Normal", "SuccessfulDeleteService", f"Deleted service: {svc['metadata']['name']}")

    # used by frameworks
    def record(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.event(job, type_, reason, message)


__all__ = [
    "Framework",
    "KubeflowJobController",
    "Replica",
    "append_env",
    "containers_of",
    "forbidden",
    "total_replicas",
]
