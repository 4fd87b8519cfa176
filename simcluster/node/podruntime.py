"""One pod on a simulated node: its directory, its processes, their restarts, its status.

A `PodRuntime` is created by the kubelet (`simcluster.node.kubelet`) for a pod bound to a node. The
pod's directory `<workdir>/pods/<ns>_<name>_<uid>` (`root`) holds its volumes (`podvolumes`, at
`<root>/<mountPath>`), `<root>/workspace` (the image's WORKDIR; the demo's `train.py` and `train_sim.py` are copied in),
the service-account files at `<root>/var/run/secrets/kubernetes.io/serviceaccount/` (`token`: the
token of `system:serviceaccount:<ns>:<name>`, the pod's service account, whose rules reach its own
namespace only (`sim.service_account_token`); `ca.crt` when simcluster serves TLS; `namespace`;
none with `automountServiceAccountToken: false` on the pod or its service account, or a volume
there) and `<root>/.kube/config`, which points kubectl and the Python client at simcluster with
that same token (no token when it is not mounted). No other credential is written into a pod. Every
container's `command` + `args` runs as a local process (the image is ignored; with only `args`,
the args are the command line) in its own session, stdin `/dev/null`, stdout/stderr captured into
CRI log files (`podlogs`).

Where the kernel allows it (`podns`), the pod has its own mount and UTS namespaces, held by a
sleeping process, and every process (containers, probes, exec sessions) joins them through
`nsenter`: the pod sees the host's filesystem copy-on-write with those directories at their
in-pod paths (`/etc/mpi/hostfile`, `/workspace`, `/var/run/secrets/...`, `/root/.kube`), its name
(or spec.hostname) as hostname, `HOME=/root` (written per pod, kept across exec sessions), and
starts in the container's `workingDir`, else `/workspace`. Without namespaces processes see the
host: absolute paths under volume mount paths are rewritten into the root (`podenv`), `HOME` is
the root and they start in `<root>/workspace` (or `<root>/<workingDir>`).

Environment: see `podenv`. `PATH`: in a pod with its own mount namespace an image's
(`/opt/venv/bin:/usr/local/sbin:/usr/local/bin:...`, the simulated commands bound at
`/usr/local/bin`, `launchers.install_pod`), else the simulated launchers' directory
(`<workdir>/bin`: `mpirun`, `horovodrun`, `torchrun`, `nvidia-smi`, `python`) then the host's PATH;
`HOSTNAME` spec.hostname or the pod name, `KUBERNETES_SERVICE_HOST/PORT` simcluster's address; a
container that asks for `nvidia.com/gpu` gets `NVIDIA_VISIBLE_DEVICES` (`devices`).

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..apiserver.errors import ApiError
from ..apiserver.store import now_rfc3339
from ..controllers.base import record_event
from . import devices
from .launchers import HERE as LAUNCHERS
from .podenv import (
    ContainerConfigError,
    PathRewriter,
    container_env,
    dict_items,
    expand_command,
    in_pod_path,
    service_env,
)
from .podlogs import LogWriter, read_text
from .podns import Holder, PodNamespaceError
from .podns_helper import remove_tree
from .podstatus import Conditions, container_state, default_waiting, go_duration, pod_phase, pod_status
from .podvolumes import materialise
from .procfs import handles_signal, pid_exists
from .reaper import Reaper, pdeathsig_preexec, signal_ids

if TYPE_CHECKING:
    from .kubelet import Kubelet
    from .launchers import PodView

log = logging.getLogger("simcluster.kubelet")

OOM_ANNOTATION = "simcluster.ranks/oom-after-seconds"
PODS = ("", "pods")
WORKSPACE = "/workspace"  # every simcluster image's WORKDIR
POD_HOME = "/root"  # HOME in a pod with namespaces (the image's root user)
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TRAIN = LAUNCHERS / "train.py"  # the demo's training program, in every pod's /workspace
# with the demo scenario's pretend workloads' program (their commands run it from there)
IMAGE_FILES = (TRAIN, LAUNCHERS.parents[1] / "scenarios" / "workloads" / "train_sim.py")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Instance:
    """One run of a container: a process group, its log file, its end."""

    def __init__(self, container: str, attempt: int, log_path: Path, flush_interval: float) -> None:
        self.container = container
        self.attempt = attempt
        self.container_id = "containerd://" + os.urandom(32).hex()
        self.log_path = log_path
        self.writer = LogWriter(log_path, flush_interval=flush_interval)
        self.pid: int | None = None
        self.started_at: str | None = None
        self.finished_at: str | None = None
        self.finished_mono = 0.0
        self.exit_code: int | None = None
        self.reason = ""
        self.message = ""
        self.oom = False
        self.term_sent = False
        self.done = asyncio.Event()
        self.transport: asyncio.SubprocessTransport | None = None
        self.pipes_closed = asyncio.Event()
        self.timers: list[asyncio.TimerHandle] = []
        self.probe_task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.pid is not None and not self.done.is_set() and self.exit_code is None


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, inst: Instance, runtime: PodRuntime, read_pause: float) -> None:
        self.inst = inst
        self.runtime = runtime
        self.read_pause = read_pause
        self.transport: asyncio.SubprocessTransport | None = None
        self._last_read: dict[int, float] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode()
        self.inst.writer.feed(fd, data)
        # Under load (this pipe was read moments ago) pause it briefly so data accumulates and
        # is read in larger chunks; sparse output is read at once, keeping stdout/stderr order.
        now = time.monotonic()
        recent = now - self._last_read.get(fd, float("-inf")) < self.read_pause
        self._last_read[fd] = now
        if recent and len(data) < 65536 and self.transport is not None:
            pipe = self.transport.get_pipe_transport(fd)
            if pipe is not None and not pipe.is_closing():
                pipe.pause_reading()  # type: ignore[attr-defined]
                asyncio.get_running_loop().call_later(self.read_pause, _resume, pipe)

    def process_exited(self) -> None:
        self.runtime._on_exit(self.inst)

    def connection_lost(self, exc: Exception | None) -> None:
        self.inst.pipes_closed.set()


def _resume(pipe: Any) -> None:
    with contextlib.suppress(Exception):
        if not pipe.is_closing():
            pipe.resume_reading()


class ContainerRun:
    """A spec container's life in the pod: its instances, restarts, back-off and state."""

    def __init__(self, spec: dict[str, Any], kind: str) -> None:
        self.spec = spec
        self.name = str(spec.get("name", ""))
        self.kind = kind  # "init" | "sidecar" | "regular"
        self.restart_count = 0
        self.last: Instance | None = None
        self.prev: Instance | None = None
        self.waiting: tuple[str, str] | None = None  # (reason, message) overrides the state
        self.ready = False
        self.env: dict[str, str] | None = None
        self.backoff: tuple[float, float] | None = None  # (duration, lastUpdate monotonic)
        self.task: asyncio.Task[Any] | None = None


class PodRuntime:
    """A pod bound to a simulated node: see the module docstring. Public API for other components:
    `namespace name uid node pod_ip root resolve() container_env() container_names() is_running()
    pids() register_child()`."""

    def __init__(self, kubelet: Kubelet, pod: dict[str, Any], node: dict[str, Any], pod_ip: str) -> None:
        meta = pod["metadata"]
        self.kubelet = kubelet
        self.sim = kubelet.sim
        self.store = kubelet.store
        self.namespace: str = meta.get("namespace", "")
        self.name: str = meta["name"]
        self.uid: str = meta.get("uid", "")
        self.node: str = pod["spec"]["nodeName"]
        self.pod_ip = pod_ip
        self.host_ip = _internal_ip(node)
        self.allocatable: dict[str, Any] = dict((node.get("status") or {}).get("allocatable") or {})
        self.pod = pod
        key = f"{self.namespace}_{self.name}_{self.uid}"
        self.root: Path = kubelet.sim.workdir / "pods" / key
        self.log_dir: Path = kubelet.sim.workdir / "logs" / key
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
        self.rewriter = PathRewriter(self.root, ())
        self.holder: Holder | None = None  # the pod's namespaces (None: the host's view, paths rewritten)
        self._tools_seen: bool | None = None  # the holder has the launchers' pod view (`_sees`)
        self._children: set[int] = set()
        self._child_groups: set[int] = set()
        self.conditions = Conditions()
        self._task: asyncio.Task[None] | None = None
        self._term_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # termination requested: cut back-off sleeps short
        self._deadline = float("inf")
        self._deadline_changed = asyncio.Event()
        self._status_pending = False

    # -- public API ----------------------------------------------------------------------------
    def resolve(self, path: str) -> Path:
        """An absolute in-pod path as the host reaches it: through the pod's namespaces while it
        has them, else under the pod root (where volumes, /workspace and the service-account
        files are in both cases)."""
        if self.holder is not None and self.holder.alive():
            return self.holder.host_path(path)
        return in_pod_path(self.root, path)

    @property
    def hostname(self) -> str:
        return str((self.pod.get("spec") or {}).get("hostname") or self.name)[:63]

    @property
    def home(self) -> str:
        """The processes' HOME (in the pod's view)."""
        return POD_HOME if self.holder is not None else str(self.root)

    def working_dir(self, container: str) -> str:
        """Where the container's processes and exec sessions start (in the pod's view): the
        container's workingDir, else the image's WORKDIR /workspace (`<root>/workspace` on the host
        without namespaces)."""
        run = self._by_name.get(container)
        wd = str((run.spec.get("workingDir") if run is not None else "") or "")
        if self.holder is not None:
            return os.path.normpath("/" + wd.lstrip("/")) if wd else WORKSPACE
        return str(in_pod_path(self.root, wd or WORKSPACE))

    def find_executable(self, name: str, env: dict[str, str], cwd: str) -> str | None:
        """Where the pod finds command `name` (its path in the pod's view), or None."""
        path = env.get("PATH", DEFAULT_PATH)
        if self.holder is not None:
            return self.holder.which(name, path, cwd)
        if "/" in name:
            full = os.path.join(cwd, name)
            return full if os.path.isfile(full) and os.access(full, os.X_OK) else None
        return shutil.which(name, path=path)

    def command(self, argv: list[str], cwd: str) -> tuple[list[str], str]:
        """(argv, cwd) that run `argv` in the pod, in its directory `cwd`, from the host (the
        same process: with namespaces, nsenter execs the command in place)."""
        if self.holder is None:
            return argv, cwd
        if not self.holder.alive():
            raise ProcessLookupError(errno.ESRCH, "the pod sandbox is gone")
        return self.holder.command(argv, cwd), "/"

    def container_names(self) -> list[str]:
        """Regular containers in spec order, then init containers."""
        return [r.name for r in self.runs] + [r.name for r in self.init_runs]

    def container_env(self, container: str) -> dict[str, str]:
        """The full environment of that container's processes (as its main process got it)."""
        run = self._by_name.get(container)
        if run is None:
            raise KeyError(container)
        if run.env is not None:
            return dict(run.env)
        try:
            return self._compute_env(run)
        except ContainerConfigError:
            return self._rewrite(dict(self._base_env()))

    def is_running(self, container: str) -> bool:
        run = self._by_name.get(container)
        return bool(run and run.last is not None and run.last.running)

    def pids(self) -> list[int]:
        """Live pids of every process of the pod (all containers, whole groups, exec'd children)."""
        groups = self._groups()
        table = self.kubelet.proc_table
        pids = set(table.members(groups)) if groups else set()
        for pid in list(self._children):
            if pid_exists(pid):
                pids.add(pid)
            else:
                self._children.discard(pid)
                self.kubelet.reaper.remove_pid(pid)
        return sorted(pids)

    def register_child(self, pid: int) -> None:
        """A process started in the pod by another component (exec): killed with the pod."""
        reaper: Reaper = self.kubelet.reaper
        self.kubelet.proc_table.invalidate()
        try:
            pgid = os.getpgid(pid)
        except OSError:
            return
        if self.terminating or self.finished:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not reaper.is_own(pgid):
            self._child_groups.add(pgid)
            reaper.add_group(pgid)
        else:
            self._children.add(pid)
            reaper.add_pid(pid)

    def unregister_child(self, pid: int) -> None:
        """Forget an exec'd process that has ended (its group no longer needs killing)."""
        reaper: Reaper = self.kubelet.reaper
        self._children.discard(pid)
        reaper.remove_pid(pid)
        if pid in self._child_groups:
            self._child_groups.discard(pid)
            reaper.remove_group(pid)
        else:
            with contextlib.suppress(OSError):
                pgid = os.getpgid(pid)
                if pgid in self._child_groups and not self.kubelet.proc_table.members([pgid], force=True):
                    self._child_groups.discard(pgid)
                    reaper.remove_group(pgid)

    def register_ports(self) -> None:
        try:
            from .proxy import portmap
        except ImportError:  # pragma: no cover - the proxy component is optional
            return
        pm = portmap(self.sim)
        for run in [*self.init_runs, *self.runs]:
            for p in dict_items(run.spec.get("ports")):
                port = p.get("containerPort")
                if isinstance(port, int) and 0 < port < 65536:
                    pm.register(self.namespace, self.name, port, "127.0.0.1", port)

    def unregister_ports(self) -> None:
        pm = getattr(self.sim, "portmap", None)
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
        self._signal_children(signal.SIGKILL)
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
        """Root directory, volumes, kubeconfig, /workspace, service-account files, namespaces.
        False (with an event) when volumes cannot be set up."""
        self.root.mkdir(parents=True, exist_ok=True)
        sa_name, token, automount = self._service_account()
        try:
            mounts = materialise(self.pod, self.root, self._lookup, self.allocatable, token)
        except Exception as exc:  # a malformed volume must not stop the kubelet
            self.event("Warning", "FailedMount", f"MountVolume.SetUp failed: {exc}")
            return False
        paths = sorted({os.path.normpath(m) for m in mounts if m.startswith("/") and os.path.normpath(m) != "/"})
        sa = automount and not any(_under(SA_DIR, p) or _under(p, SA_DIR) for p in paths)
        kube, workspace, sa_dir = self.root / ".kube", self.root / WORKSPACE.lstrip("/"), in_pod_path(self.root, SA_DIR)
        for d in (kube, workspace, *([sa_dir] if sa else [])):
            with contextlib.suppress(OSError):
                d.mkdir(parents=True, exist_ok=True)
        podns = self.kubelet.podns
        sandbox = None
        if podns is not None and self.holder is None:  # set up while the files below are written
            sandbox = asyncio.ensure_future(podns.create(**self._sandbox(paths, sa)))
        try:
            try:
                fd = os.open(kube / "config", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w") as fh:
                    yaml.safe_dump(self.sim.pod_kubeconfig(self.namespace, sa_name, token if automount else None),
                                   fh, sort_keys=False)
            except OSError as exc:
                log.warning("kubelet: cannot write the pod kubeconfig: %s", exc)
            for program in IMAGE_FILES if WORKSPACE not in paths else ():
                try:
                    shutil.copyfile(program, workspace / program.name)
                except OSError as exc:
                    log.warning("kubelet: cannot copy %s into /workspace: %s", program.name, exc)
            if sa:
                sa = self._write_service_account(sa_dir, token)
        finally:
            if sandbox is not None:
                try:
                    self.holder = await sandbox
                except PodNamespaceError as exc:
                    log.warning("kubelet: pod %s/%s runs in the host's view: %s", self.namespace, self.name, exc)
                if self.terminating or self.removed:
                    self.release_sandbox()
        if self.holder is None:
            self.rewriter = PathRewriter(self.root, [*paths, *([SA_DIR] if sa else [])])
        return True

    def _service_account(self) -> tuple[str, str, bool]:
        """The pod's service account, its token (`system:serviceaccount:<ns>:<name>`'s, never
        another identity's) and whether it is mounted."""
        spec = self.pod.get("spec") or {}
        sa = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "default")
        token = self.sim.service_account_token(self.namespace, sa)
        automount = spec.get("automountServiceAccountToken")
        if automount is None:
            obj = self._lookup("serviceaccounts", sa)
            automount = obj.get("automountServiceAccountToken") if obj is not None else None
        return sa, token, automount is not False

    def _write_service_account(self, target: Path, token: str) -> bool:
        """token, ca.crt (when simcluster serves TLS) and namespace, as kube-api-access gives them."""
        ca = getattr(self.sim, "ca_pem", None)
        files = {"token": token.encode(), "namespace": self.namespace.encode()}
        if ca:
            files["ca.crt"] = ca
        try:
            target.mkdir(parents=True, exist_ok=True)
            for name, data in files.items():
                path = target / name
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
        except OSError as exc:
            log.warning("kubelet: cannot write the service-account files: %s", exc)
            return False
        return True

    def _sandbox(self, paths: list[str], sa: bool) -> dict[str, Any]:
        """What the pod's namespaces hold: see `podns`."""
        own = self.root / ".simcluster"
        binds: list[tuple[Path | str, str]] = [
            (self.root / WORKSPACE.lstrip("/"), WORKSPACE), (self.root / ".kube", f"{POD_HOME}/.kube"),
        ]
        if sa:
            binds.append((in_pod_path(self.root, SA_DIR), SA_DIR))
        for p in paths:
            binds.append((os.path.realpath(in_pod_path(self.root, p)), p))
        spec = self.pod.get("spec") or {}
        names = self.hostname
        if spec.get("subdomain"):
            names = f"{self.hostname}.{spec['subdomain']}.{self.namespace}.svc.cluster.local\t{self.hostname}"
        hosts = ("# Kubernetes-managed hosts file (simcluster: the pod's name is a loopback address).\n"
                 "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n"
                 "fe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
                 f"127.0.1.1\t{names}\n")
        view = getattr(self.kubelet, "pod_view", None)
        return {
            "rootfs": own / "rootfs", "upper": own / "upper", "work": own / "work", "scratch": own / "scratch",
            "home": (own / "home", POD_HOME), "hostname": self.hostname, "binds": binds,
            "files": [("/etc/hostname", self.hostname + "\n"), ("/etc/hosts", hosts)],
            "tools": view.binds if view is not None else (),
        }

    def release_sandbox(self) -> None:
        """Kill the pod's namespace holder (the namespaces last as long as a process is in them)."""
        holder = self.holder
        podns = self.kubelet.podns
        if holder is not None and not holder.killed:
            if podns is not None:
                podns.release(holder)
            else:
                holder.kill()

    def _lookup(self, plural: str, name: str) -> dict[str, Any] | None:
        st = self.store.find(("", plural), self.namespace, name)
        return st.obj if st is not None else None

    def _base_env(self) -> dict[str, str]:
        view = getattr(self.kubelet, "pod_view", None)
        if self.holder is not None and view is not None and self._sees(view):
            return {"PATH": view.path, "HOSTNAME": self.hostname, "HOME": self.home}
        path = os.environ.get("PATH") or DEFAULT_PATH
        bin_dir = getattr(self.kubelet, "bin_dir", None)
        if bin_dir is not None:
            path = f"{bin_dir}:{path}"
        return {"PATH": path, "HOSTNAME": self.hostname, "HOME": self.home}

    def _sees(self, view: PodView) -> bool:
        """The pod's namespaces hold the image's view of the simulated commands (every bind made)."""
        if self._tools_seen is None and self.holder is not None:
            self._tools_seen = all(os.path.exists(self.holder.host_path(dest)) for _, dest in view.binds)
        return bool(self._tools_seen)

    def _rewrite(self, env: dict[str, str]) -> dict[str, str]:
        return self.rewriter.rewrite_env(env, keep=("PATH", "HOME"))

    def _compute_env(self, run: ContainerRun) -> dict[str, str]:
        sim = self.sim
        env = container_env(
            self.pod, run.spec, base={**self._base_env(), **self._device_env(run)},
            services=service_env(sim.host, sim.port), lookup=self._lookup, allocatable=self.allocatable,
        )
        return self._rewrite(env)

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
        base, cap = self.kubelet.backoff_base, self.kubelet.backoff_max
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
                if await self._sleep(max(self.kubelet.backoff_base, 1.0)):
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
        inst = Instance(run.name, attempt, self.log_dir / run.name / f"{attempt}.log", self.kubelet.flush_interval)
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
                lambda: _Protocol(inst, self, self.kubelet.read_pause),
                *cmd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                preexec_fn=pdeathsig_preexec(),
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
        self.kubelet.reaper.add_group(inst.pid)
        self.kubelet.proc_table.invalidate()
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
        probe = run.spec.get("readinessProbe") if run.kind != "init" else None
        if (isinstance(probe, dict) and isinstance(probe.get("exec"), dict)
                and isinstance(probe["exec"].get("command"), list) and probe["exec"]["command"]):
            run.ready = False
            inst.probe_task = asyncio.create_task(self._probe_loop(run, inst, probe))
        else:
            run.ready = run.kind != "init"
        self.request_status()
        return inst

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
            signal_ids([inst.pid], signal.SIGKILL, self.kubelet.proc_table)
        try:
            async with asyncio.timeout(2.0):
                await inst.pipes_closed.wait()
        except TimeoutError:
            pass  # something that left the session holds the pipes
        if transport is not None:
            transport.close()
        inst.writer.close()
        if inst.pid is not None:
            self.kubelet.reaper.remove_group(inst.pid)
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

    async def _probe_loop(self, run: ContainerRun, inst: Instance, probe: dict[str, Any]) -> None:
        cmd = [str(a) for a in probe["exec"]["command"]]
        def num(key: str, default: float) -> float:
            try:
                return max(0.0, float(probe.get(key) or default))
            except (TypeError, ValueError):
                return default

        initial = num("initialDelaySeconds", 0)
        period = max(0.1, num("periodSeconds", 10))
        timeout = max(0.1, num("timeoutSeconds", 1))
        need_ok = max(1, int(num("successThreshold", 1)))
        need_fail = max(1, int(num("failureThreshold", 3)))
        ok = fail = 0
        if initial:
            await asyncio.sleep(initial)
        while inst.running and not self.terminating:
            passed = await self._exec_probe(cmd, run, timeout)
            ok, fail = (ok + 1, 0) if passed else (0, fail + 1)
            ready = run.ready
            if passed and ok >= need_ok:
                ready = True
            elif not passed and fail >= need_fail:
                ready = False
            if ready != run.ready and inst.running:
                run.ready = ready
                self.request_status()
            await asyncio.sleep(period)

    async def _exec_probe(self, cmd: list[str], run: ContainerRun, timeout: float) -> bool:
        env = run.env or self._rewrite(self._base_env())
        try:
            argv, cwd = self.command([self.rewriter.rewrite(a) for a in cmd], self.working_dir(run.name))
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                cwd=cwd, env=env, start_new_session=True, preexec_fn=pdeathsig_preexec(),
            )
        except OSError:
            return False
        self.kubelet.reaper.add_group(proc.pid)
        try:
            async with asyncio.timeout(timeout):
                return await proc.wait() == 0
        except TimeoutError:
            return False
        finally:
            signal_ids([proc.pid], signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()
            self.kubelet.reaper.remove_group(proc.pid)

    # -- signals -----------------------------------------------------------------------------------
    def _groups(self) -> list[int]:
        groups = [r.last.pid for r in [*self.init_runs, *self.runs]
                  if r.last is not None and r.last.pid is not None and not r.last.done.is_set()]
        return [g for g in groups if g is not None] + sorted(self._child_groups)

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
        signal_ids([inst.pid], sig, self.kubelet.proc_table if sig == signal.SIGKILL else None)

    def _signal_children(self, sig: int) -> None:
        signal_ids(self._child_groups, sig, self.kubelet.proc_table if sig == signal.SIGKILL else None)
        for pid in self._children:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)

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
                    self._signal_children(signal.SIGKILL)
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
            self._signal_children(signal.SIGKILL)
            if self._task is not None and not self._task.done():
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    async with asyncio.timeout(5):
                        await asyncio.shield(self._task)
            self.finished = True
            self.final_phase = self._phase(terminal=True)
            self.release_sandbox()
            self.release_devices()
            self.write_status_now()
            self.kubelet.pod_terminated(self)
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
        self._signal_children(signal.SIGTERM)
        if live:
            await asyncio.wait([asyncio.ensure_future(i.done.wait()) for i in live], timeout=grace)
        live = [i for i in live if not i.done.is_set()]
        for i in live:
            self._signal_instance(i, signal.SIGKILL)
        self._signal_children(signal.SIGKILL)
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
        if not self.kubelet.events or self.removed:
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
        if self.removed or self.kubelet.stopping:
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


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _internal_ip(node: dict[str, Any]) -> str:
    for a in (node.get("status") or {}).get("addresses") or ():
        if a.get("type") == "InternalIP":
            return str(a.get("address", ""))
    return ""

