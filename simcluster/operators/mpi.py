"""The MPI Operator v2beta1 (`kubeflow.org/v2beta1` MPIJob), after `mpi_job_controller.go`
(conventions §2).

Objects per MPIJob `<job>`: a headless Service `<job>` selecting the job's pods; a ConfigMap
`<job>-config` with `hostfile` (`<job>-worker-<i>.<job>.<ns>.svc slots=<n>` for OpenMPI,
`...:<n>` for Intel/MPICH) and `discover_hosts.sh` (the running workers); a Secret `<job>-ssh`
(kubernetes.io/ssh-auth, an ECDSA P-521 key); worker pods `<job>-worker-<i>`
(`hostname=<job>-worker-<i>`, `subdomain=<job>`, `K_MPI_JOB_ROLE=worker`, dnsConfig search); and
a batch/v1 Job `<job>-launcher` whose pod the Job controller names `<job>-launcher-<5 chars>`.
The launcher template gets `K_MPI_JOB_ROLE=launcher`, the OMPI_MCA_*/I_MPI_*/HYDRA_* env,
blanked NVIDIA_VISIBLE_DEVICES/NVIDIA_DRIVER_CAPABILITIES, and the ConfigMap as a configMap
volume mounted at `/etc/mpi` (items `hostfile` mode 0444, `discover_hosts.sh` mode 0555), so
`OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile` resolves once the kubelet materialises it.
Every pod mounts the SSH Secret at `sshAuthMountPath`. `launcherCreationPolicy:
WaitForWorkersReady` creates the launcher Job only when every worker pod is Ready.

simcluster specifics:
- A worker whose first container has neither command nor args runs `/usr/sbin/sshd -De`, as
  upstream: the kubelet runs the real OpenSSH server in the pod, on the pod's address
  (`node/podsshd`), Ready once it accepts connections (`sleep infinity` where it cannot).
- The launcher's Open MPI variables (`OMPI_MCA_orte_*`, `OMPI_MCA_plm_rsh_args`) come with the
  same settings under Open MPI 5's names (`PRTE_MCA_prte_default_hostfile`,
  `PRTE_MCA_prte_keep_fqdn_hostnames`, `PRTE_MCA_plm_ssh_args`, `PRTE_MCA_prte_set_default_slots`):
  Open MPI 5 ignores the ORTE names, so a plain `mpirun -np 4 ...` would run every rank on the
  launcher (upstream's open kubeflow/mpi-operator#842).
- Gang scheduling: pods get `scheduling.k8s.io/group-name: <job>` and
  `simcluster.io/pod-group-min-member` = `schedulingPolicy.minAvailable`, else workers + 1 (the
  launcher), or the worker count with WaitForWorkersReady (the launcher comes later).
- Validation errors (upstream: only a `ValidationError` event) also set a Failed condition with
  reason `ValidationError`.
- `ttlSecondsAfterFinished` and `activeDeadlineSeconds` go to the launcher Job, as upstream: the
  Job controller fails it with `DeadlineExceeded` (the MPIJob's Failed reason) and the TTL
  controller deletes the launcher Job, not the MPIJob.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError
from ..apiserver.store import Event
from ..controllers.base import Controller, EventRecorder, Key
from ..controllers.scheduler import POD_GROUP, POD_GROUP_MIN_MEMBER
from .batchjob import job_finished
from .common import (
    CONFIGMAP_KEY,
    JOB_KEY,
    JOB_NAME,
    JOB_ROLE,
    OPERATOR_NAME,
    POD_KEY,
    REPLICA_INDEX,
    SECRET_KEY,
    SERVICE_KEY,
    aggregate,
    api_create,
    api_delete,
    as_dict,
    as_list,
    camel_case_keys,
    canonical_pod_spec,
    container_command_errors,
    controller_ref,
    deleting,
    get_condition,
    invalid,
    is_finished,
    is_int,
    not_supported,
    now,
    owned,
    phase,
    pod_ready,
    required,
    rtype,
    set_condition,
    write_status,
)

if TYPE_CHECKING:
    from ..cluster import SimCluster

COMPONENT = "mpi-job-controller"
OPERATOR = "mpi-operator"
SSHD_COMMAND = ("/usr/sbin/sshd", "-De")  # a worker's command when its template gives none
MPI_IMPLEMENTATIONS = ("Intel", "MPICH", "OpenMPI")
LAUNCHER_POLICIES = ("AtStartup", "WaitForWorkersReady")
RESTART_POLICIES = ("Always", "ExitCode", "Never", "OnFailure")
CLEAN_POD_POLICIES = ("All", "None", "Running")
HOSTFILE = "/etc/mpi/hostfile"
# simcluster's addition to the launcher's Open MPI variables: the same settings under the names
# Open MPI 5 reads (PRRTE's), which ignores the ORTE ones (upstream: kubeflow/mpi-operator#842)
PRTE_NAMES = {
    "OMPI_MCA_orte_keep_fqdn_hostnames": "PRTE_MCA_prte_keep_fqdn_hostnames",
    "OMPI_MCA_orte_default_hostfile": "PRTE_MCA_prte_default_hostfile",
    "OMPI_MCA_plm_rsh_args": "PRTE_MCA_plm_ssh_args",
    "OMPI_MCA_orte_set_default_slots": "PRTE_MCA_prte_set_default_slots",
}


def ssh_key_pair() -> tuple[bytes, bytes]:
    """An ECDSA P-521 private key (PEM) and its authorized_keys line, as the operator makes."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public + b"\n"


class MPISpec:
    """A defaulted MPIJob spec."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.slots = spec.get("slotsPerWorker", 1)
        self.as_worker = spec.get("runLauncherAsWorker") is True
        self.run = as_dict(spec.get("runPolicy"))
        self.clean_policy = self.run.get("cleanPodPolicy") or "None"
        self.ssh_path = spec.get("sshAuthMountPath") or "/root/.ssh"
        self.launcher_policy = spec.get("launcherCreationPolicy") or "AtStartup"
        self.impl = spec.get("mpiImplementation") or "OpenMPI"
        raw = spec.get("mpiReplicaSpecs")
        self.raw_specs = camel_case_keys(raw, ("Launcher", "Worker")) if isinstance(raw, dict) else raw
        self.launcher = self._replica("Launcher", 1, "OnFailure")
        self.worker = self._replica("Worker", 0, "Never")

    def _replica(self, rt: str, replicas: int, policy: str) -> dict[str, Any] | None:
        if not isinstance(self.raw_specs, dict) or not isinstance(self.raw_specs.get(rt), dict):
            return None
        spec: dict[str, Any] = copy.deepcopy(self.raw_specs[rt])
        if spec.get("replicas") is None:
            spec["replicas"] = replicas
        if not spec.get("restartPolicy"):
            spec["restartPolicy"] = policy
        if not isinstance(spec.get("template"), dict):
            spec["template"] = {}
        return spec

    @property
    def workers(self) -> int:
        n = (self.worker or {}).get("replicas", 0)
        return n if is_int(n) and n > 0 else 0

    @property
    def suspended(self) -> bool:
        return self.run.get("suspend") is True

    def validate(self) -> list[str]:
        p = "spec"
        errs: list[str] = []
        if self.raw_specs is None:
            errs.append(required(f"{p}.mpiReplicaSpecs", "must have replica specs"))
        elif not isinstance(self.raw_specs, dict):
            errs.append(invalid(f"{p}.mpiReplicaSpecs", "value", "must be a map of replica type to replica spec"))
        else:
            for key in sorted(self.raw_specs):
                if key not in ("Launcher", "Worker"):
                    errs.append(not_supported(f"{p}.mpiReplicaSpecs[{key}]", key, ("Launcher", "Worker")))
            lpath = f"{p}.mpiReplicaSpecs[Launcher]"
            if self.launcher is None:
                errs.append(required(lpath, "must have Launcher replica spec"))
            else:
                errs += self._replica_errors(self.launcher, lpath, worker=False)
                if self.launcher.get("replicas") != 1:
                    errs.append(invalid(f"{lpath}.replicas", self.launcher.get("replicas"), "must be 1"))
            if self.worker is not None:
                wpath = f"{p}.mpiReplicaSpecs[Worker]"
                errs += self._replica_errors(self.worker, wpath, worker=True)
                n = self.worker.get("replicas")
                if is_int(n) and n <= 0:
                    errs.append(invalid(f"{wpath}.replicas", n, "must be greater than or equal to 1"))
        if not is_int(self.slots) or self.slots < 0:
            errs.append(invalid(f"{p}.slotsPerWorker", self.slots, "must be greater than or equal to 0"))
        run = f"{p}.runPolicy"
        for field in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
            v = self.run.get(field)
            if v is not None and (not is_int(v) or v < 0):
                errs.append(invalid(f"{run}.{field}", v, "must be greater than or equal to 0"))
        if self.clean_policy not in CLEAN_POD_POLICIES:
            errs.append(not_supported(f"{run}.cleanPodPolicy", self.clean_policy, CLEAN_POD_POLICIES))
        if self.impl not in MPI_IMPLEMENTATIONS:
            errs.append(not_supported(f"{p}.mpiImplementation", self.impl, MPI_IMPLEMENTATIONS))
        if self.launcher_policy not in LAUNCHER_POLICIES:
            errs.append(not_supported(f"{p}.launcherCreationPolicy", self.launcher_policy, LAUNCHER_POLICIES))
        return errs

    def _replica_errors(self, spec: dict[str, Any], path: str, *, worker: bool) -> list[str]:
        errs = []
        if not is_int(spec.get("replicas")):
            errs.append(invalid(f"{path}.replicas", spec.get("replicas"), "must be an integer"))
        if spec.get("restartPolicy") not in RESTART_POLICIES:
            errs.append(not_supported(f"{path}.restartPolicy", spec.get("restartPolicy"), RESTART_POLICIES))
        containers = as_dict(spec["template"].get("spec")).get("containers")
        cpath = f"{path}.template.spec.containers"
        if not isinstance(containers, list) or not containers or not all(isinstance(c, dict) for c in containers):
            errs.append(required(cpath, "must define at least one container"))
        else:
            errs += container_command_errors(containers, cpath, skip_first=worker)
        return errs


def _labels(job: str, role: str) -> dict[str, str]:
    return {OPERATOR_NAME: OPERATOR, JOB_NAME: job, JOB_ROLE: role}


def _env(container: dict[str, Any], pairs: Iterable[tuple[str, str]]) -> None:
    env = as_list(container.get("env"))
    env.extend({"name": k, "value": v} if v != "" else {"name": k} for k, v in pairs)
    container["env"] = env


class MPIJobController(Controller):
    name = "mpi-job-controller"
    job_key = ("kubeflow.org", "mpijobs")
    watches = (job_key, POD_KEY, SERVICE_KEY, CONFIGMAP_KEY, SECRET_KEY, JOB_KEY)

    def __init__(self, sim: SimCluster) -> None:
        super().__init__(sim)
        self.events = EventRecorder(sim, COMPONENT)

    def initial_keys(self) -> Iterable[Key]:
        for st in self.store.items(self.job_key):
            yield (st.obj["metadata"].get("namespace", ""), st.obj["metadata"]["name"])

    def keys_for(self, ev: Event) -> Iterable[Key]:
        meta = ev.obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        if ev.tkey == self.job_key:
            if ev.type == "DELETED":
                self.events.forget(meta.get("uid", ""))
            else:
                yield (ns, meta.get("name", ""))
            return
        ref = controller_ref(ev.obj)
        if ref is None:
            return
        if ev.tkey == POD_KEY and ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch/"):
            st = self.store.find(JOB_KEY, ns, ref.get("name", ""))
            if st is None:
                return
            ref = controller_ref(st.obj)
            if ref is None:
                return
        if ref.get("kind") == "MPIJob" and ref.get("apiVersion") == "kubeflow.org/v2beta1":
            yield (ns, ref.get("name", ""))

    # -- reconcile --------------------------------------------------------------------------------
    async def reconcile(self, key: Key) -> None:
        ns, name = key
        st = self.store.find(self.job_key, ns, name)
        if st is None or deleting(st.obj):
            return
        job = st.obj
        if job.get("apiVersion") != "kubeflow.org/v2beta1":
            return
        mpi_rt = rtype(self.sim, "kubeflow.org", "v2beta1", "mpijobs")
        status = copy.deepcopy(as_dict(job.get("status")))
        spec_raw = job.get("spec")
        if not isinstance(spec_raw, dict):
            self._fail_validation(mpi_rt, job, status, [required("spec", "must be specified")])
            return
        if spec_raw.get("runPolicy") is not None and not isinstance(spec_raw.get("runPolicy"), dict):
            self._fail_validation(mpi_rt, job, status, [invalid("spec.runPolicy", "value", "must be an object")])
            return
        spec = MPISpec(spec_raw)
        if spec.run.get("managedBy") not in (None, "", "kubeflow.org/mpi-operator"):
            return
        errs = spec.validate()
        if errs:
            self._fail_validation(mpi_rt, job, status, errs)
            return
        if not as_list(status.get("conditions")):
            msg = f"MPIJob {ns}/{name} is created."
            set_condition(status, "Created", "True", "MPIJobCreated", msg, frozen_when_failed=False, mpi=True)
            self.events.event(job, "Normal", "MPIJobCreated", msg)

        uid = job["metadata"]["uid"]
        if is_finished(status) and status.get("completionTime"):
            if spec.clean_policy in ("All", "Running"):
                self._delete_workers(job, spec)
                rs = status.setdefault("replicaStatuses", {})
                rs["Worker"] = {}
            write_status(self.sim, mpi_rt, job, status)
            return

        if not status.get("startTime") and not spec.suspended:
            status["startTime"] = now()

        launcher_st = self.store.find(JOB_KEY, ns, f"{name}-launcher")
        launcher = launcher_st.obj if launcher_st is not None else None
        if launcher is not None:
            ref = controller_ref(launcher)
            if ref is None or ref.get("uid") != uid:
                self.events.event(
                    job, "Warning", "ErrResourceExists",
                    f'Resource "{name}-launcher" of Kind "Job" already exists and is not managed by MPIJob',
                )
                return
        workers: list[dict[str, Any]] = []
        done = launcher is not None and job_finished(launcher)
        if not done:
            try:
                self._ensure_service(job, spec)
                self._ensure_config(job, spec)
                self._ensure_secret(job)
            except _Conflict:
                return
            if not spec.suspended:
                try:
                    workers = self._ensure_workers(job, spec)
                except _Conflict:
                    return
            if launcher is None and (
                spec.launcher_policy == "AtStartup" or sum(1 for w in workers if pod_ready(w)) == len(workers)
            ):
                launcher = self._create_launcher(job, spec)
        if launcher is not None and bool(as_dict(launcher.get("spec")).get("suspend")) != spec.suspended:
            want = spec.suspended
            job_rt = rtype(self.sim, "batch", "v1", "jobs")

            def fn(o: dict[str, Any]) -> None:
                o["spec"]["suspend"] = want

            launcher = self.store.mutate(job_rt, ns, launcher["metadata"]["name"], fn).obj
        if spec.suspended:
            self._delete_workers(job, spec)
            status.setdefault("replicaStatuses", {})["Worker"] = {}
        self._update_status(mpi_rt, job, spec, status, launcher, workers)

    def _fail_validation(self, mpi_rt: Any, job: dict[str, Any], status: dict[str, Any], errs: list[str]) -> None:
        msg = f"Found validation errors: {aggregate(errs)}"
        if len(msg) > 1024:
            msg = msg[:1021] + "..."
        if get_condition(status, "Failed") is None:
            self.events.event(job, "Warning", "ValidationError", msg)
        ns, name = job["metadata"].get("namespace", ""), job["metadata"]["name"]
        if not as_list(status.get("conditions")):
            set_condition(status, "Created", "True", "MPIJobCreated", f"MPIJob {ns}/{name} is created.", mpi=True)
        set_condition(status, "Failed", "True", "ValidationError", msg, mpi=True)
        write_status(self.sim, mpi_rt, job, status)

    def _owner(self, job: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def _get_owned(self, job: dict[str, Any], tkey: Any, name: str, kind: str) -> dict[str, Any] | None:
        st = self.store.find(tkey, job["metadata"].get("namespace", ""), name)
        if st is None:
            return None
        ref = controller_ref(st.obj)
        if ref is None or ref.get("uid") != job["metadata"]["uid"]:
            self.events.event(
                job, "Warning", "ErrResourceExists",
                f'Resource "{name}" of Kind "{kind}" already exists and is not managed by MPIJob',
            )
            raise _Conflict
        return st.obj

    def _create(self, job: dict[str, Any], plural: str, obj: dict[str, Any], group: str = "", version: str = "v1") -> dict[str, Any] | None:
        try:
            return api_create(self.sim, rtype(self.sim, group, version, plural), obj).obj
        except ApiError as err:
            if err.code != 409:
                self.events.event(job, "Warning", "MPIJobFailed", f"{obj['kind']} creation failed: {err.message}")
            return None

    def _ensure_service(self, job: dict[str, Any], spec: MPISpec) -> None:
        name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "")
        selector = {OPERATOR_NAME: OPERATOR, JOB_NAME: name}
        cur = self._get_owned(job, SERVICE_KEY, name, "Service")
        if cur is None:
            svc: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": ns, "labels": {"app": name}, "ownerReferences": [self._owner(job)]},
                "spec": {"clusterIP": "None", "selector": selector},
            }
            if spec.as_worker:
                svc["spec"]["publishNotReadyAddresses"] = True
            self._create(job, "services", svc)
        elif as_dict(cur.get("spec")).get("selector") != selector:

            def fn(o: dict[str, Any]) -> None:
                o.setdefault("spec", {})["selector"] = selector

            self.store.mutate(rtype(self.sim, "", "v1", "services"), ns, name, fn)

    def _hostfile(self, job: dict[str, Any], spec: MPISpec) -> str:
        name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "")
        hosts = [f"{name}-launcher"] if spec.as_worker else []
        hosts += [f"{name}-worker-{i}" for i in range(spec.workers)]
        if spec.impl == "OpenMPI":
            return "".join(f"{h}.{name}.{ns}.svc slots={spec.slots}\n" for h in hosts)
        return "".join(f"{h}.{name}.{ns}.svc:{spec.slots}\n" for h in hosts)

    def _discover_hosts(self, job: dict[str, Any], spec: MPISpec) -> str:
        name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "")
        running = sorted(
            p["metadata"]["name"]
            for p in owned(self.sim, job["metadata"]["uid"], POD_KEY)
            if as_dict(p["metadata"].get("labels")).get(JOB_ROLE) == "worker" and phase(p) == "Running"
        )
        lines = ["#!/bin/sh"]
        if spec.as_worker:
            lines.append(f"echo {name}-launcher.{name}.{ns}.svc")
        lines += [f"echo {p}.{name}.{ns}.svc" for p in running]
        return "\n".join(lines) + "\n"

    def _ensure_config(self, job: dict[str, Any], spec: MPISpec) -> None:
        name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "")
        data = {"hostfile": self._hostfile(job, spec), "discover_hosts.sh": self._discover_hosts(job, spec)}
        cm_name = f"{name}-config"
        cur = self._get_owned(job, CONFIGMAP_KEY, cm_name, "ConfigMap")
        if cur is None:
            self._create(job, "configmaps", {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": cm_name, "namespace": ns, "labels": {"app": name}, "ownerReferences": [self._owner(job)]},
                "data": data,
            })
        elif cur.get("data") != data:

            def fn(o: dict[str, Any]) -> None:
                o["data"] = data

            self.store.mutate(rtype(self.sim, "", "v1", "configmaps"), ns, cm_name, fn)

    def _ensure_secret(self, job: dict[str, Any]) -> None:
        name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "")
        sec_name = f"{name}-ssh"
        cur = self._get_owned(job, SECRET_KEY, sec_name, "Secret")
        if cur is not None and sorted(as_dict(cur.get("data"))) == ["ssh-privatekey", "ssh-publickey"]:
            return
        private, public = ssh_key_pair()
        data = {"ssh-privatekey": base64.b64encode(private).decode(), "ssh-publickey": base64.b64encode(public).decode()}
        if cur is None:
            self._create(job, "secrets", {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": sec_name, "namespace": ns, "labels": {"app": name}, "ownerReferences": [self._owner(job)]},
                "type": "kubernetes.io/ssh-auth",
                "data": data,
            })
            return

        def fn(o: dict[str, Any]) -> None:
            o["data"] = data

        self.store.mutate(rtype(self.sim, "", "v1", "secrets"), ns, sec_name, fn)

    def _min_member(self, spec: MPISpec) -> int:
        avail = as_dict(spec.run.get("schedulingPolicy")).get("minAvailable")
        if is_int(avail):
            return avail
        if spec.launcher_policy == "WaitForWorkersReady":
            return max(1, spec.workers)
        return spec.workers + 1

    def _setup_ssh(self, pod_spec: dict[str, Any], job: dict[str, Any], spec: MPISpec) -> None:
        vol: dict[str, Any] = {
            "name": "ssh-auth",
            "secret": {
                "secretName": f"{job['metadata']['name']}-ssh",
                "items": [
                    {"key": "ssh-privatekey", "path": "id_rsa"},
                    {"key": "ssh-publickey", "path": "id_rsa.pub"},
                    {"key": "ssh-publickey", "path": "authorized_keys"},
                ],
            },
        }
        if spec.ssh_path == "/root/.ssh":
            vol["secret"]["defaultMode"] = 0o600
        pod_spec["volumes"] = [*as_list(pod_spec.get("volumes")), vol]
        first = pod_spec["containers"][0]
        first["volumeMounts"] = [*as_list(first.get("volumeMounts")), {"name": "ssh-auth", "mountPath": spec.ssh_path}]

    def _restart_policy(self, pod_spec: dict[str, Any], rspec: dict[str, Any]) -> None:
        policy = rspec.get("restartPolicy")
        pod_spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy

    def _ensure_workers(self, job: dict[str, Any], spec: MPISpec) -> list[dict[str, Any]]:
        if spec.worker is None:
            return []
        name = job["metadata"]["name"]
        n = spec.workers
        uid = job["metadata"]["uid"]
        current = [
            p for p in owned(self.sim, uid, POD_KEY)
            if as_dict(p["metadata"].get("labels")).get(JOB_ROLE) == "worker"
        ]
        if len(current) > n:
            for p in current:
                try:
                    idx = int(as_dict(p["metadata"].get("labels")).get(REPLICA_INDEX, ""))
                except ValueError:
                    continue
                if idx >= n:
                    api_delete(self.sim, rtype(self.sim, "", "v1", "pods"), p)
        out = []
        for i in range(n):
            pod_name = f"{name}-worker-{i}"
            pod = self._get_owned(job, POD_KEY, pod_name, "Pod")
            if pod is None:
                pod = self._create(job, "pods", self._new_worker(job, spec, i))
                if pod is None:
                    continue
            out.append(pod)
        return out

    def _new_worker(self, job: dict[str, Any], spec: MPISpec, index: int) -> dict[str, Any]:
        name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "")
        pod_name = f"{name}-worker-{index}"
        assert spec.worker is not None
        tmpl = copy.deepcopy(spec.worker["template"])
        tmeta = as_dict(tmpl.get("metadata"))
        labels = {k: v for k, v in as_dict(tmeta.get("labels")).items() if isinstance(v, str)}
        labels.update(_labels(name, "worker"))
        labels[REPLICA_INDEX] = str(index + 1 if spec.as_worker else index)
        annotations = {k: v for k, v in as_dict(tmeta.get("annotations")).items() if isinstance(v, str)}
        annotations.update({POD_GROUP: name, POD_GROUP_MIN_MEMBER: str(self._min_member(spec))})
        pspec = tmpl["spec"]
        pspec["hostname"] = pod_name
        pspec["subdomain"] = name
        if pspec.get("hostNetwork") is True:
            pspec["dnsPolicy"] = "ClusterFirstWithHostNet"
        search = f"{name}.{ns}.svc.cluster.local"
        dns = as_dict(pspec.get("dnsConfig"))
        dns["searches"] = [*as_list(dns.get("searches")), search]
        pspec["dnsConfig"] = dns
        self._restart_policy(pspec, spec.worker)
        first = pspec["containers"][0]
        if not as_list(first.get("command")) and not as_list(first.get("args")):
            first["command"] = list(SSHD_COMMAND)
        _env(first, [("K_MPI_JOB_ROLE", "worker")])
        self._setup_ssh(pspec, job, spec)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": ns,
                "labels": labels,
                "annotations": annotations,
                "ownerReferences": [self._owner(job)],
            },
            "spec": canonical_pod_spec(pspec),
        }

    def _create_launcher(self, job: dict[str, Any], spec: MPISpec) -> dict[str, Any] | None:
        name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "")
        assert spec.launcher is not None
        tmpl = copy.deepcopy(spec.launcher["template"])
        tmeta = as_dict(tmpl.get("metadata"))
        labels = {k: v for k, v in as_dict(tmeta.get("labels")).items() if isinstance(v, str)}
        labels.update(_labels(name, "launcher"))
        if spec.as_worker:
            labels[REPLICA_INDEX] = "0"
        annotations = {k: v for k, v in as_dict(tmeta.get("annotations")).items() if isinstance(v, str)}
        annotations.update({POD_GROUP: name, POD_GROUP_MIN_MEMBER: str(self._min_member(spec))})
        pspec = tmpl["spec"]
        pspec["hostname"] = f"{name}-launcher"
        pspec["subdomain"] = name
        if pspec.get("hostNetwork") is True:
            pspec["dnsPolicy"] = "ClusterFirstWithHostNet"
        first = pspec["containers"][0]
        env: list[tuple[str, str]] = [("K_MPI_JOB_ROLE", "launcher")]
        slots = str(spec.slots)
        if spec.impl == "OpenMPI":
            env += [
                ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
                ("OMPI_MCA_orte_default_hostfile", HOSTFILE),
                ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
                ("OMPI_MCA_orte_set_default_slots", slots),
                *((PRTE_NAMES[k], v) for k, v in (
                    ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"), ("OMPI_MCA_orte_default_hostfile", HOSTFILE),
                    ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"), ("OMPI_MCA_orte_set_default_slots", slots))),
            ]
        elif spec.impl == "Intel":
            env += [
                ("I_MPI_HYDRA_HOST_FILE", HOSTFILE),
                ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "-o ConnectionAttempts=10"),
                ("I_MPI_PERHOST", slots),
            ]
        else:
            env += [("HYDRA_HOST_FILE", HOSTFILE), ("HYDRA_LAUNCH_EXTRA_ARGS", "-o ConnectionAttempts=10")]
        if not spec.as_worker:
            env += [("NVIDIA_VISIBLE_DEVICES", ""), ("NVIDIA_DRIVER_CAPABILITIES", "")]
        _env(first, env)
        self._setup_ssh(pspec, job, spec)
        if pspec.get("restartPolicy"):
            self.events.event(
                job, "Warning", "SetPodTemplateRestartPolicy",
                "Restart policy in pod template overridden by restart policy in replica spec",
            )
        self._restart_policy(pspec, spec.launcher)
        pspec["volumes"] = [
            *as_list(pspec.get("volumes")),
            {
                "name": "mpi-job-config",
                "configMap": {
                    "name": f"{name}-config",
                    "items": [
                        {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                        {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555},
                    ],
                },
            },
        ]
        first["volumeMounts"] = [*as_list(first.get("volumeMounts")), {"name": "mpi-job-config", "mountPath": "/etc/mpi"}]
        jspec: dict[str, Any] = {
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": canonical_pod_spec(pspec)},
        }
        for src, dst in (
            ("ttlSecondsAfterFinished", "ttlSecondsAfterFinished"),
            ("activeDeadlineSeconds", "activeDeadlineSeconds"),
            ("backoffLimit", "backoffLimit"),
        ):
            if is_int(spec.run.get(src)):
                jspec[dst] = spec.run[src]
        if spec.suspended:
            jspec["suspend"] = True
        return self._create(job, "jobs", {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"{name}-launcher",
                "namespace": ns,
                "labels": {"app": name},
                "ownerReferences": [self._owner(job)],
            },
            "spec": jspec,
        }, group="batch")

    def _delete_workers(self, job: dict[str, Any], spec: MPISpec) -> None:
        name = job["metadata"]["name"]
        uid = job["metadata"]["uid"]
        for i in range(spec.workers):
            st = self.store.find(POD_KEY, job["metadata"].get("namespace", ""), f"{name}-worker-{i}")
            if st is None:
                continue
            ref = controller_ref(st.obj)
            if ref is None or ref.get("uid") != uid:
                continue
            if spec.clean_policy == "Running" and phase(st.obj) not in ("Running", "Pending"):
                continue
            api_delete(self.sim, rtype(self.sim, "", "v1", "pods"), st.obj)

    def _update_status(
        self,
        mpi_rt: Any,
        job: dict[str, Any],
        spec: MPISpec,
        status: dict[str, Any],
        launcher: dict[str, Any] | None,
        workers: list[dict[str, Any]],
    ) -> None:
        ns, name = job["metadata"].get("namespace", ""), job["metadata"]["name"]
        if spec.suspended:
            if set_condition(status, "Suspended", "True", "MPIJobSuspended", "MPIJob suspended", frozen_when_failed=False, mpi=True):
                self.events.event(job, "Normal", "MPIJobSuspended", "MPIJob suspended")
        elif get_condition(status, "Suspended") is not None and set_condition(
            status, "Suspended", "False", "MPIJobResumed", "MPIJob resumed", frozen_when_failed=False, mpi=True
        ):
            self.events.event(job, "Normal", "MPIJobResumed", "MPIJob resumed")
            status["startTime"] = now()
        statuses = status.setdefault("replicaStatuses", {})
        launcher_running = 0
        if launcher is not None:
            lpods = owned(self.sim, launcher["metadata"]["uid"], POD_KEY)
            launcher_running = sum(1 for p in lpods if phase(p) == "Running")
            lstatus = as_dict(launcher.get("status"))
            ls: dict[str, Any] = {}
            if lstatus.get("failed"):
                ls["failed"] = lstatus["failed"]
            statuses["Launcher"] = ls
            conds = {c.get("type"): c for c in as_list(lstatus.get("conditions")) if isinstance(c, dict)}
            complete = conds.get("Complete", {}).get("status") == "True"
            failed = conds.get("Failed", {}).get("status") == "True"
            if complete:
                ls["succeeded"] = 1
                msg = f"MPIJob {ns}/{name} successfully completed."
                if not status.get("completionTime"):
                    status["completionTime"] = lstatus.get("completionTime") or now()
                if set_condition(status, "Succeeded", "True", "MPIJobSucceeded", msg, frozen_when_failed=False, mpi=True):
                    self.events.event(job, "Normal", "MPIJobSucceeded", msg)
            elif failed:
                cond = conds["Failed"]
                reason = cond.get("reason") or "MPIJobFailed"
                msg = cond.get("message") or f"MPIJob {ns}/{name} has failed"
                if reason == "BackoffLimitExceeded":
                    failed_pods = [p for p in lpods if phase(p) == "Failed"]
                    if failed_pods:
                        last = max(failed_pods, key=lambda p: p["metadata"].get("creationTimestamp", ""))
                        pst = as_dict(last.get("status"))
                        reason += "/" + str(pst.get("reason") or "")
                        msg = (msg + ": " + str(pst.get("message") or ""))[:1024]
                if not status.get("completionTime"):
                    status["completionTime"] = now()
                if set_condition(status, "Failed", "True", reason, msg, frozen_when_failed=False, mpi=True):
                    self.events.event(job, "Warning", reason, msg)
            elif launcher_running:
                ls["active"] = launcher_running
        ws: dict[str, Any] = {}
        running = evicted = 0
        for w in workers:
            ph = phase(w)
            if ph == "Failed":
                ws["failed"] = ws.get("failed", 0) + 1
                if as_dict(w.get("status")).get("reason") == "Evicted":
                    evicted += 1
            elif ph == "Succeeded":
                ws["succeeded"] = ws.get("succeeded", 0) + 1
            elif ph == "Running":
                running += 1
                ws["active"] = ws.get("active", 0) + 1
        if not spec.suspended or "Worker" not in statuses:
            statuses["Worker"] = ws
        if evicted:
            msg = f"{evicted}/{len(workers)} workers are evicted"
            if set_condition(status, "Failed", "True", "MPIJobEvicted", msg, frozen_when_failed=False, mpi=True):
                self.events.event(job, "Warning", "MPIJobEvicted", msg)
        if spec.suspended:
            set_condition(
                status, "Running", "False", "MPIJobSuspended", f"MPIJob {ns}/{name} is suspended.",
                frozen_when_failed=False, mpi=True,
            )
        elif is_finished(status):
            # finished: Running is never set True again (mpi-operator); if it was never set at all,
            # a Running=False condition stamped with the completion time is added
            if get_condition(status, "Running") is None:
                stamp = status.get("completionTime") or now()
                status["conditions"] = [*as_list(status.get("conditions")), {
                    "type": "Running", "status": "False", "reason": "MPIJobRunning",
                    "message": f"MPIJob {ns}/{name} is finished but Running condition was never set.",
                    "lastUpdateTime": stamp, "lastTransitionTime": stamp,
                }]
        elif launcher is not None and launcher_running >= 1 and running == len(workers):
            msg = f"MPIJob {ns}/{name} is running."
            if set_condition(status, "Running", "True", "MPIJobRunning", msg, frozen_when_failed=False, mpi=True):
                self.events.event(job, "Normal", "MPIJobRunning", f"MPIJob {ns}/{name} is running")
        if status != as_dict(job.get("status")):
            status["lastReconcileTime"] = now()
        write_status(self.sim, mpi_rt, job, status)


class _Conflict(Exception):
    """A dependent object exists but is not controlled by this MPIJob."""
