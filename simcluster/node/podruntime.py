"""One pod on a simulated node: its processes, their restarts, its status.

A `PodRuntime` is created by the kubelet (`simcluster.node.kubelet`) for a pod bound to a node,
with the node's services (`NodeServices`: what the runtime asks of its kubelet). Its sandbox
(`podsandbox`: the pod's directory `<workdir>/pods/<ns>_<name>_<uid>`, its files and namespaces)
is prepared first. Every container's `command` + `args` runs as a local process (the image is
ignored; with only `args`, the args are the command line) in its own session, stdin `/dev/null`,
stdout/stderr captured into CRI log files (`container`, `podlogs`).

Environment: see `podenv`, and `podsandbox` for `PATH` and `HOME`; `HOSTNAME` spec.hostname or the
pod name, `KUBERNETES_SERVICE_HOST/PORT` simcluster's address; a container that asks for
`nvidia.com/gpu` gets `NVIDIA_VISIBLE_DEVICES` (`devices`).

The runtime supervises the processes (starting, restarting, probing, signalling, reaping) and keeps
each container's runs; the status computed from them is `podstatus`'s, written here through the
store (coalesced, one write per loop iteration). Restarts use the kubelet's back-off
(`flowcontrol.Backoff`: the first restart is immediate, then `base`, doubling up to `max`; reset
after the container has been stable for 2 x max). Readiness: a running container is ready; an
`exec` readinessProbe is run when given (other probe kinds count as passing; liveness and startup
probes are not run). The annotation `simcluster.ranks/oom-after-seconds: "N"` SIGKILLs each
instance of the pod's (regular) containers after N seconds and reports `OOMKilled`, exit code 137.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import shutil
import signal
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..apiserver.errors import ApiError
from ..apiserver.store import ObjectStore, now_rfc3339
from ..controllers.base import record_event
from . import devices, podsshd
from .container import CaptureProtocol, ContainerRun, Instance, probe_loop
from .podchildren import ExecChildren
from .podenv import (
    ContainerConfigError,
    container_env,
    dict_items,
    expand_command,
    service_env,
)
from .podlogs import LogWriter, read_text
from .podnet import joiner
from .podns_helper import remove_tree
from .podsandbox import TRAIN as TRAIN  # (the demo's training program, copied into every pod)
from .podsandbox import MountFailed, PodSandbox
from .podstatus import Conditions, container_state, default_waiting, go_duration, pod_phase, pod_status
from .procfs import ProcessTable, handles_signal
from .proxy import portmap
from .reaper import Reaper, pdeathsig_preexec, signal_ids

if TYPE_CHECKING:
    from ..cluster import SimCluster
    from .ephemeral import EphemeralRun
    from .launchers import PodView
    from .podenv import PathRewriter
    from .podns import Holder, PodNamespaces

log = logging.getLogger("simcluster.kubelet")

OOM_ANNOTATION = "simcluster.ranks/oom-after-seconds"
PODS = ("", "pods")


class NodeServices(Protocol):
    """What a pod's runtime asks of its node (the kubelet): the cluster, its processes' reaper
    and table, the pods' namespaces and commands, the tunables, and its final delete."""

    sim: SimCluster
    store: ObjectStore
    reaper: Reaper
    proc_table: ProcessTable
    podns: PodNamespaces | None  # pods' mount and UTS namespaces (None: off)
    pod_view: PodView | None  # the simulated commands as pods with a mount namespace see them
    bin_dir: Path | None  # the same, first on the PATH of pods in the host's view
    events: bool  # record the kubelet's Events
    stopping: bool  # the kubelet is shutting down: no more status writes
    backoff_base: float  # CrashLoopBackOff's first delay, doubling up to backoff_max
    backoff_max: float
    read_pause: float  # of log capture (`container.CaptureProtocol`)
    flush_interval: float

    def pod_terminated(self, rt: PodRuntime) -> None:
        """Graceful termination of `rt` finished: the kubelet's final delete."""

    def note_once(self, key: str, message: str) -> None:
        """Say `message` in the kubelet's log, the first time only for `key`."""


class PodRuntime:
    """A pod bound to a simulated node: see the module docstring. Public API for other components:
    `namespace name uid node pod_ip root holder resolve() working_dir() command() container_env()
    container_names() is_running() pids() register_child()`."""

    def __init__(self, services: NodeServices, pod: dict[str, Any], node: dict[str, Any], pod_ip: str) -> None:
        meta = pod["metadata"]
        self.services = services
        self.sim = services.sim
        self.store = services.store
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.uid: str = meta.get("uid", "")
        self.node: str = pod["spec"]["nodeName"]
        self.pod_ip = pod_ip
        self.cgroup: str | None = None  # its own cgroup, whose programs give it its 0.0.0.0 (`podnet`)
        self.host_ip = _internal_ip(node)
        self.allocatable: dict[str, Any] = dict((node.get("status") or {}).get("allocatable") or {})
        self.pod = pod
        key = f"{self.namespace}_{self.name}_{self.uid}"
        self.root: Path = self.sim.workdir / "pods" / key
        self.log_dir: Path = self.sim.workdir / "logs" / key
        self.sandbox = PodSandbox(pod, self.root, sim=self.sim, lookup=self._lookup, podns=services.podns,
                                  pod_view=services.pod_view, bin_dir=services.bin_dir, pod_ip=pod_ip)
        spec = pod.get("spec") or {}
        self.restart_policy = str(spec.get("restartPolicy") or "Always")
        self.init_runs = [
            ContainerRun(c, "sidecar" if c.get("restartPolicy") == "Always" else "init")
            for c in dict_items(spec.get("initContainers"))
        ]
        self.runs = [ContainerRun(c, "regular") for c in dict_items(spec.get("containers"))]
        self._by_name = {r.name: r for r in [*self.init_runs, *self.runs]}
        self.sandbox_ready = False
        self.initialized = not self.init_runs
        self.finished = False  # every container done for good: the pod is terminal
        self.terminating = False
        self.forced = False  # deleted with grace 0
        self.removed = False
        self.final_phase: str | None = None
        self.start_time = now_rfc3339()
        self.children = ExecChildren(services.reaper, services.proc_table)
        self.ephemeral: dict[str, EphemeralRun] = {}  # (`ephemeral`: kubectl debug's containers)
        self.conditions = Conditions()
        self._task: asyncio.Task[None] | None = None
        self._term_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # termination requested: cut back-off sleeps short
        self._deadline = float("inf")
        self._deadline_changed = asyncio.Event()
        self._status_pending = False

    # -- public API ----------------------------------------------------------------------------
    @property
    def holder(self) -> Holder | None:
        """The pod's namespaces (None: the host's view, paths rewritten): `podsandbox`."""
        return self.sandbox.holder

    @property
    def rewriter(self) -> PathRewriter:
        return self.sandbox.rewriter

    @property
    def hostname(self) -> str:
        return self.sandbox.hostname

    @property
    def home(self) -> str:
        """The processes' HOME (in the pod's view)."""
        return self.sandbox.home

    def resolve(self, path: str) -> Path:
        """An absolute in-pod path as the host reaches it (`PodSandbox.resolve`)."""
        return self.sandbox.resolve(path)

    def working_dir(self, container: str) -> str:
        """Where the container's processes and exec sessions start (in the pod's view)."""
        run = self._by_name.get(container)
        return self.sandbox.working_dir(run.spec if run is not None else None)

    def find_executable(self, name: str, env: dict[str, str], cwd: str) -> str | None:
        """Where the pod finds command `name` (its path in the pod's view), or None."""
        return self.sandbox.find_executable(name, env, cwd)

    def command(self, argv: list[str], cwd: str) -> tuple[list[str], str]:
        """(argv, cwd) that run `argv` in the pod, in its directory `cwd`, from the host."""
        return self.sandbox.command(argv, cwd)

    def container_names(self) -> list[str]:
        """Regular containers in spec order, then init containers."""
        return [r.name for r in self.runs] + [r.name for r in self.init_runs]

    def container_env(self, container: str) -> dict[str, str]:
        """The full environment of that container's processes (as its main process got it)."""
        run = self._by_name.get(container)
        if run is None and container in self.ephemeral:
            return dict(self.ephemeral[container].env)
        if run is None:
            raise KeyError(container)
        if run.env is not None:
            return dict(run.env)
        try:
            return self._compute_env(run)
        except ContainerConfigError:
            return self._base_env()

    def is_running(self, container: str) -> bool:
        if container in self.ephemeral:
            return self.ephemeral[container].running
        run = self._by_name.get(container)
        return bool(run and run.last is not None and run.last.running)

    def pids(self) -> list[int]:
        """Live pids of every process of the pod (all containers, whole groups, exec'd children,
        and whatever else runs in its mount namespace: sshd's sessions and what they started)."""
        groups = self._groups()
        pids = set(self.services.proc_table.members(groups)) if groups else set()
        holder = self.holder
        if holder is not None and holder.mount_ns is not None and holder.alive():
            pids.update(self.services.proc_table.in_mount_ns(holder.mount_ns))
            pids.discard(holder.pid)
        return sorted(pids | self.children.live_pids())

    def register_child(self, pid: int) -> None:
        """A process started in the pod by another component (exec): killed with the pod."""
        self.children.register(pid, kill=self.terminating or self.finished)

    def unregister_child(self, pid: int) -> None:
        """Forget an exec'd process that has ended (its group no longer needs killing)."""
        self.children.unregister(pid)

    def register_ports(self) -> None:
        pm = portmap(self.sim)
        for run in [*self.init_runs, *self.runs]:
            for p in dict_items(run.spec.get("ports")):
                port = p.get("containerPort")
                if isinstance(port, int) and 0 < port < 65536:
                    pm.register(self.namespace, self.name, port, self.pod_ip if self.cgroup else "127.0.0.1", port)

    def unregister_ports(self) -> None:
        pm = self.sim.portmap
        if pm is not None:
            with contextlib.suppress(Exception):
                pm.unregister(self.namespace, self.name)

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        self.write_status_now()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"pod {self.namespace}/{self.name}")

    async def _run(self) -> None:
        try:
            while not await self._prepare():
                if await self._sleep(1.0):
                    return
            self.sandbox_ready = True
            self.register_ports()
            self.request_status()
            for run in self.init_runs:
                if self.terminating:
                    return
                if run.kind == "sidecar":
                    run.task = asyncio.create_task(self._supervise(run, "Always"))
                    while not (run.last is not None and run.last.started_at) and not run.task.done():
                        if await self._sleep(0.05):
                            return
                    continue
                policy = "Never" if self.restart_policy == "Never" else "OnFailure"
                run.task = asyncio.create_task(self._supervise(run, policy))
                code = await run.task
                if self.terminating:
                    return
                if code != 0:  # Never: the pod fails
                    self._complete()
                    return
            self.initialized = True
            self.request_status()
            for run in self.runs:
                run.task = asyncio.create_task(self._supervise(run, self.restart_policy))
            await asyncio.gather(*(r.task for r in self.runs if r.task is not None))
            if not self.terminating:
                self._complete()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kubelet: pod %s/%s failed", self.namespace, self.name)

    def _complete(self) -> None:
        """Every container is done for good: stop sidecars and exec'd processes; phase is terminal."""
        self.finished = True
        self.final_phase = self._phase()
        self.release_sandbox()
        self.release_devices()
        for run in self.init_runs:
            if run.kind == "sidecar" and run.last is not None and run.last.running:
                self._signal_instance(run.last, signal.SIGTERM)
        self.children.signal(signal.SIGKILL)
        self.request_status()

    async def _sleep(self, seconds: float) -> bool:
        """Sleep unless termination is requested; True when it was."""
        if self.terminating:
            return True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()
        return self.terminating

    async def _prepare(self) -> bool:
        """The pod's sandbox (`PodSandbox.prepare`); False (with an event) when its volumes
        cannot be set up."""
        try:
            await self.sandbox.prepare(self.allocatable, lambda: self.terminating or self.removed)
        except MountFailed as exc:
            self.event("Warning", "FailedMount", str(exc))
            return False
        return True

    def release_sandbox(self) -> None:
        """Kill what still runs in the pod's mount namespace, then its holder (the namespaces last
        as long as a process is in them)."""
        self._kill_in_namespace(keep=())
        self.sandbox.release()

    def _kill_in_namespace(self, keep: Iterable[int]) -> None:
        """SIGKILL every process in the pod's mount namespace but the holder and `keep` (what a
        container's PID namespace going away kills: sshd's sessions, daemons)."""
        holder = self.holder
        if holder is None or holder.mount_ns is None or holder.killed:
            return
        spared = {holder.pid, *keep}
        for pid in self.services.proc_table.in_mount_ns(holder.mount_ns, force=True):
            if pid not in spared:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _lookup(self, plural: str, name: str) -> dict[str, Any] | None:
        st = self.store.find(("", plural), self.namespace, name)
        return st.obj if st is not None else None

    def _base_env(self) -> dict[str, str]:
        return self.sandbox.rewrite_env(self.sandbox.base_env())

    def _compute_env(self, run: ContainerRun) -> dict[str, str]:
        sim = self.sim
        env = container_env(
            self.pod, run.spec, base={**self.sandbox.base_env(), **self._device_env(run)},
            services=service_env(sim.host, sim.port), lookup=self._lookup, allocatable=self.allocatable,
        )
        return self.sandbox.rewrite_env(env)

    def _device_env(self, run: ContainerRun) -> dict[str, str]:
        """The container's GPUs, allocated now (see `devices`): the device plugin's variable."""
        count = devices.container_gpus(run.spec)
        if not count:
            return {}
        try:
            capacity = int(str(self.allocatable.get(devices.GPU_RESOURCE, 0)))
        except ValueError:
            capacity = 0
        gpus = devices.of(self.sim).allocate(self.node, capacity, self.uid, self.namespace, self.name, run.name, count)
        return {devices.VISIBLE: ",".join(devices.gpu_uuid(self.node, i) for i in gpus)} if gpus else {}

    def release_devices(self) -> None:
        """The pod's processes are gone: its GPUs are free again."""
        devices.of(self.sim).release(self.uid, self.node)

    # -- one container -----------------------------------------------------------------------------
    def _backoff(self, run: ContainerRun, finished: float) -> float:
        """flowcontrol.Backoff as the kubelet uses it: seconds still to wait, or 0 (and Next)."""
        base, cap = self.services.backoff_base, self.services.backoff_max
        now = time.monotonic()
        entry = run.backoff
        expired = entry is not None and finished - entry[1] > 2 * cap
        if entry is not None and not expired and now - finished < entry[0]:
            return entry[0] - (now - finished)
        if entry is None or expired:
            run.backoff = (base, now)
        else:
            run.backoff = (min(entry[0] * 2, cap), now)
        return 0.0

    async def _supervise(self, run: ContainerRun, policy: str) -> int | None:
        """Run a container until its restart policy lets it rest; returns the last exit code."""
        code: int | None = None
        while not self.terminating:
            if run.last is not None and run.last.exit_code is not None:
                while True:
                    delay = self._backoff(run, run.last.finished_mono)
                    if delay <= 0:
                        break
                    assert run.backoff is not None
                    msg = (f"back-off {go_duration(run.backoff[0])} restarting failed container={run.name} "
                           f"pod={self.name}_{self.namespace}({self.uid})")
                    if run.waiting != ("CrashLoopBackOff", msg):
                        run.waiting = ("CrashLoopBackOff", msg)
                        self.event("Warning", "BackOff",
                                   f"Back-off restarting failed container {run.name} in pod "
                                   f"{self.name}_{self.namespace}({self.uid})")
                        self.request_status()
                    if await self._sleep(delay):
                        return code
            inst = await self._start(run)
            if inst is None:  # configuration error: retry later, as the kubelet's next sync would
                if await self._sleep(max(self.services.backoff_base, 1.0)):
                    return code
                continue
            await inst.done.wait()
            code = inst.exit_code
            self.request_status()
            if self.terminating:
                return code
            if policy == "Never" or (policy == "OnFailure" and code == 0):
                return code
        return code

    async def _start(self, run: ContainerRun) -> Instance | None:
        try:
            env = self._compute_env(run)
            argv = [self.rewriter.rewrite(a) for a in expand_command(run.spec, env)]
            sshd = podsshd.is_sshd(argv)
            if sshd and (why := self._no_sshd()):
                self.services.note_once("sshd", f"kubelet: sshd runs as `sleep infinity` in pods ({why})")
                argv, sshd = list(podsshd.STAND_IN), False
        except Exception as exc:  # ContainerConfigError, or a malformed spec
            msg = str(exc) if isinstance(exc, ContainerConfigError) else f"invalid container spec: {exc}"
            if run.waiting != ("CreateContainerConfigError", msg):
                run.waiting = ("CreateContainerConfigError", msg)
                self.event("Warning", "Failed", f"Error: {msg}")
                self.request_status()
            return None
        attempt = run.restart_count + (1 if run.last is not None else 0)
        if not argv:
            cid = os.urandom(32).hex()
            msg = f'failed to generate container "{cid}" spec: failed to generate spec: no command specified'
            if run.waiting is None or run.waiting[0] != "CreateContainerError":
                run.waiting = ("CreateContainerError", msg)
                self.event("Warning", "Failed", f"Error: {msg}")
                self.request_status()
            return None
        run.env = env
        inst = Instance(run.name, attempt, self.log_dir / run.name / f"{attempt}.log", self.services.flush_interval)
        if run.last is not None:
            old = run.prev
            run.prev = run.last
            run.restart_count = attempt
            if old is not None and old.log_path != run.prev.log_path:
                with contextlib.suppress(OSError):
                    old.log_path.unlink()
        run.last = inst
        image = str(run.spec.get("image") or "")
        self.event("Normal", "Pulled", f'Container image "{image}" already present on machine')
        workdir = self.working_dir(run.name)
        with contextlib.suppress(OSError):  # created when missing, as runc does
            (self.holder.host_path(workdir) if self.holder is not None else Path(workdir)).mkdir(
                parents=True, exist_ok=True)
        loop = asyncio.get_running_loop()
        try:
            if self.holder is not None and self.find_executable(argv[0], env, workdir) is None:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
            cmd, cwd = self.command(argv, workdir)
            transport, _ = await loop.subprocess_exec(
                lambda: CaptureProtocol(inst, self._on_exit, self.services.read_pause),
                *cmd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                preexec_fn=joiner(self.cgroup, pdeathsig_preexec()),
            )
        except OSError as exc:
            now = now_rfc3339()
            inst.started_at = inst.finished_at = now
            inst.finished_mono = time.monotonic()
            inst.exit_code = 128
            inst.reason = "StartError"
            why = exc.strerror or str(exc)
            if isinstance(exc, FileNotFoundError):
                why = f'exec: "{argv[0]}": executable file not found in $PATH'
            inst.message = (
                "failed to create containerd task: failed to create shim task: OCI runtime create failed: "
                f"runc create failed: unable to start container process: {why}: unknown"
            )
            inst.writer.close()
            run.waiting = None
            run.ready = False
            inst.done.set()
            self.event("Warning", "Failed", f"Error: {inst.message}")
            return inst
        inst.transport = transport
        inst.pid = transport.get_pid()
        self.services.reaper.add_group(inst.pid)
        self.services.proc_table.invalidate()
        inst.started_at = now_rfc3339()
        run.waiting = None
        self.event("Normal", "Created", f"Created container: {run.name}")
        self.event("Normal", "Started", f"Started container {run.name}")
        if self.terminating:
            self._signal_instance(inst, signal.SIGTERM, as_runtime=True)
        if run.kind == "regular":
            oom = (self.pod["metadata"].get("annotations") or {}).get(OOM_ANNOTATION)
            if oom:
                try:
                    after = float(oom)
                except (TypeError, ValueError):
                    after = -1.0
                if after >= 0:
                    inst.timers.append(loop.call_later(after, self._oom_kill, inst))
        probe = run.exec_probe()
        if probe is not None:
            run.ready = False
            inst.probe_task = asyncio.create_task(probe_loop(
                run, inst, probe, lambda cmd, timeout: self._exec_probe(cmd, run, timeout),
                lambda: self.terminating, self.request_status))
        elif sshd and run.kind != "init" and not run.spec.get("readinessProbe"):
            run.ready = False  # Ready once sshd accepts connections (podsshd)
            inst.probe_task = asyncio.create_task(self._sshd_ready(run, inst, podsshd.port_of(argv)))
        else:
            run.ready = run.kind != "init"
        self.request_status()
        return inst

    def _no_sshd(self) -> str:
        """Why the image's sshd cannot run in this pod ("" when it can)."""
        if self.holder is None:
            return "pods have no namespaces of their own here"
        return podsshd.available()

    async def _sshd_ready(self, run: ContainerRun, inst: Instance, port: int) -> None:
        if await podsshd.wait_accepting(self.pod_ip, port, lambda: inst.running and not self.terminating):
            run.ready = True
            self.request_status()

    def _oom_kill(self, inst: Instance) -> None:
        if inst.running:
            inst.oom = True
            self._signal_instance(inst, signal.SIGKILL)

    def _on_exit(self, inst: Instance) -> None:
        asyncio.get_running_loop().create_task(self._finish(inst))

    async def _finish(self, inst: Instance) -> None:
        transport = inst.transport
        rc = transport.get_returncode() if transport is not None else None
        inst.finished_mono = time.monotonic()
        inst.finished_at = now_rfc3339()
        for t in inst.timers:
            t.cancel()
        if inst.pid is not None:  # the rest of the container goes with its main process
            signal_ids([inst.pid], signal.SIGKILL, self.services.proc_table)
            others = [i.pid for i in self._instances() if i is not inst and i.pid is not None and i.running]
            self._kill_in_namespace(self.services.proc_table.members(others, force=True) if others else ())
        try:
            async with asyncio.timeout(2.0):
                await inst.pipes_closed.wait()
        except TimeoutError:
            pass  # something that left the session holds the pipes
        if transport is not None:
            transport.close()
        inst.writer.close()
        if inst.pid is not None:
            self.services.reaper.remove_group(inst.pid)
        code = 0 if rc is None else rc if rc >= 0 else 128 - rc
        if inst.oom:
            code, inst.reason = 137, "OOMKilled"
        else:
            inst.reason = "Completed" if code == 0 else "Error"
        inst.exit_code = code
        run = self._by_name.get(inst.container)
        if run is not None:
            run.ready = False
            policy = (run.spec.get("terminationMessagePolicy") or "File")
            if policy == "FallbackToLogsOnError" and code != 0:
                inst.message = read_text(inst.log_path)
        if inst.probe_task is not None:
            inst.probe_task.cancel()
        inst.done.set()
        self.request_status()

    async def _exec_probe(self, cmd: list[str], run: ContainerRun, timeout: float) -> bool:
        env = run.env or self._base_env()
        try:
            argv, cwd = self.command([self.rewriter.rewrite(a) for a in cmd], self.working_dir(run.name))
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                cwd=cwd, env=env, start_new_session=True, preexec_fn=joiner(self.cgroup, pdeathsig_preexec()),
            )
        except OSError:
            return False
        self.services.reaper.add_group(proc.pid)
        try:
            async with asyncio.timeout(timeout):
                return await proc.wait() == 0
        except TimeoutError:
            return False
        finally:
            signal_ids([proc.pid], signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
            self.services.reaper.remove_group(proc.pid)

    # -- signals -----------------------------------------------------------------------------------
    def _groups(self) -> list[int]:
        groups = [r.last.pid for r in [*self.init_runs, *self.runs]
                  if r.last is not None and r.last.pid is not None and not r.last.done.is_set()]
        return [g for g in groups if g is not None] + sorted(self.children.groups)

    def _signal_instance(self, inst: Instance, sig: int, *, as_runtime: bool = False) -> None:
        """`sig` to the container. `as_runtime` (a graceful stop): SIGTERM goes to the container's
        first process only, as a container runtime sends it to PID 1, and the kernel drops it
        unless that process handles SIGTERM (PID 1 of a PID namespace ignores default-action
        signals): `sh -c '...; echo done'` or `sleep infinity` keep running until SIGKILL at the
        end of the grace period, as in a real pod."""
        if inst.pid is None or inst.done.is_set():
            return
        if sig == signal.SIGTERM:
            inst.term_sent = True
            if as_runtime:
                if handles_signal(inst.pid, signal.SIGTERM):
                    with contextlib.suppress(OSError):
                        os.kill(inst.pid, signal.SIGTERM)
                return
        signal_ids([inst.pid], sig, self.services.proc_table if sig == signal.SIGKILL else None)

    def _instances(self) -> list[Instance]:
        return [r.last for r in [*self.init_runs, *self.runs] if r.last is not None]

    def terminate(self, grace: float) -> None:
        """Graceful stop (pod deletion): SIGTERM, SIGKILL after `grace` seconds, then removal."""
        deadline = time.monotonic() + max(0.0, grace)
        if deadline < self._deadline:
            self._deadline = deadline
            self._deadline_changed.set()
        if self.terminating:
            return
        self.terminating = True
        self._wake.set()
        self._term_task = asyncio.get_running_loop().create_task(self._terminate())

    async def _terminate(self) -> None:
        try:
            for run in [*self.runs, *reversed(self.init_runs)]:
                inst = run.last
                if inst is not None and inst.running:
                    self.event("Normal", "Killing", f"Stopping container {run.name}")
                    self._signal_instance(inst, signal.SIGTERM, as_runtime=True)
            while True:
                live = [i for i in self._instances() if not i.done.is_set()]
                if not live:
                    break
                left = self._deadline - time.monotonic()
                if left <= 0:
                    for i in live:
                        self._signal_instance(i, signal.SIGKILL)
                    self.children.signal(signal.SIGKILL)
                    await asyncio.wait([asyncio.ensure_future(i.done.wait()) for i in live], timeout=5)
                    break
                for i in live:
                    if not i.term_sent:
                        self._signal_instance(i, signal.SIGTERM, as_runtime=True)
                self._deadline_changed.clear()
                waits = [asyncio.ensure_future(i.done.wait()) for i in live]
                waits.append(asyncio.ensure_future(self._deadline_changed.wait()))
                _, pending = await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                for p in pending:
                    p.cancel()
            self.children.signal(signal.SIGKILL)
            if self._task is not None and not self._task.done():
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    async with asyncio.timeout(5):
                        await asyncio.shield(self._task)
            self.finished = True
            self.final_phase = self._phase(terminal=True)
            self.release_sandbox()
            self.release_devices()
            self.write_status_now()
            self.services.pod_terminated(self)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("kubelet: terminating %s/%s failed", self.namespace, self.name)

    async def kill_now(self, grace: float = 1.0) -> None:
        """Stop every process (shutdown, or the pod vanished): SIGTERM, SIGKILL after `grace`."""
        self.terminating = True
        self._wake.set()
        live = [i for i in self._instances() if not i.done.is_set()]
        for i in live:
            self._signal_instance(i, signal.SIGTERM)
        self.children.signal(signal.SIGTERM)
        if live:
            await asyncio.wait([asyncio.ensure_future(i.done.wait()) for i in live], timeout=grace)
        live = [i for i in live if not i.done.is_set()]
        for i in live:
            self._signal_instance(i, signal.SIGKILL)
        self.children.signal(signal.SIGKILL)
        if live:
            await asyncio.wait([asyncio.ensure_future(i.done.wait()) for i in live], timeout=5)
        for task in (self._task, self._term_task, *(r.task for r in [*self.init_runs, *self.runs])):
            if task is not None and not task.done():
                task.cancel()
        for i in self._instances():
            i.writer.close()
        self.release_sandbox()
        self.release_devices()

    def cleanup_files(self) -> None:
        """The pod's directories (in a worker thread, after `kill_now`)."""
        with contextlib.suppress(OSError):
            remove_tree(str(self.root))
        shutil.rmtree(self.log_dir, ignore_errors=True)

    # -- logs --------------------------------------------------------------------------------------
    def log_writer(self, container: str, previous: bool) -> LogWriter:
        """The instance a log request reads (the kubelet's validateContainerLogStatus)."""
        run = self._by_name.get(container)
        pod = self.name
        if run is None:
            raise ApiError(400, f'container "{container}" in pod "{pod}" is not available')
        state, last_state = container_state(run, default_waiting(self.init_runs))
        last_term = last_state.get("terminated")
        if previous:
            if not last_term:
                raise ApiError(400, f'previous terminated container "{container}" in pod "{pod}" not found')
            inst = run.last if "waiting" in state else run.prev
        elif "running" in state or "terminated" in state or last_term:
            inst = run.last
        elif "waiting" in state:
            reason = state["waiting"].get("reason", "")
            raise ApiError(400, f'container "{container}" in pod "{pod}" is waiting to start: {reason}')
        else:
            raise ApiError(400, f'container "{container}" in pod "{pod}" is waiting to start - no logs yet')
        if inst is None:
            raise ApiError(400, f'container "{container}" in pod "{pod}" is terminated')
        return inst.writer

    # -- status ------------------------------------------------------------------------------------
    def event(self, type_: str, reason: str, message: str) -> None:
        if not self.services.events or self.removed:
            return
        try:
            record_event(self.sim, self.pod, type_, reason, message, "kubelet", host=self.node)
        except Exception:  # an event must never break a pod
            log.debug("kubelet: event failed", exc_info=True)

    def _phase(self, terminal: bool = False) -> str:
        if self.final_phase is not None:
            return self.final_phase
        return pod_phase(self.init_runs, self.runs, self.restart_policy, terminal)

    def request_status(self) -> None:
        """Coalesce status writes: one per loop iteration."""
        if self._status_pending or self.removed:
            return
        self._status_pending = True
        asyncio.get_running_loop().call_soon(self.write_status_now)

    def write_status_now(self) -> None:
        self._status_pending = False
        if self.removed or self.services.stopping:
            return
        rt = self.sim.registry.get("", "v1", "pods")
        if rt is None:
            return
        uid = self.uid

        def fn(obj: dict[str, Any]) -> None:
            if obj["metadata"].get("uid") != uid:
                return
            obj["status"] = pod_status(self, obj.get("status") or {}, self._phase())

        try:
            st = self.store.mutate(rt, self.namespace, self.name, fn)
        except ApiError:
            return
        if st.obj["metadata"].get("uid") == uid:
            self.pod = st.obj


def _internal_ip(node: dict[str, Any]) -> str:
    for a in (node.get("status") or {}).get("addresses") or ():
        if a.get("type") == "InternalIP":
            return str(a.get("address", ""))
    return ""

