"""A pod's sandbox: its directory, the files the kubelet writes there and, where the kernel allows
it, its own mount and UTS namespaces; where and how the pod's processes run.

The pod's directory `<workdir>/pods/<ns>_<name>_<uid>` (`root`) holds its volumes (`podvolumes`,
at `<root>/<mountPath>`), `<root>/workspace` (the image's WORKDIR; the demo's `train.py` and
`train_sim.py` are copied in), the service-account files at
`<root>/var/run/secrets/kubernetes.io/serviceaccount/` (`token`: the token of
`system:serviceaccount:<ns>:<name>`, the pod's service account, whose rules reach its own namespace
only (`sim.service_account_token`); `ca.crt` when simcluster serves TLS; `namespace`; none with
`automountServiceAccountToken: false` on the pod or its service account, or a volume there) and
`<root>/.kube/config`, which points kubectl and the Python client at simcluster with that same
token (no token when it is not mounted). No other credential is written into a pod.

Where the kernel allows it (`podns`), the pod has its own mount and UTS namespaces, held by a
sleeping process, and every process (containers, probes, exec sessions) joins them through
`nsenter`: the pod sees the host's filesystem copy-on-write with those directories at their
in-pod paths (`/etc/mpi/hostfile`, `/workspace`, `/var/run/secrets/...`, `/root/.kube`), its name
(or spec.hostname) as hostname, `HOME=/root` (written per pod, kept across exec sessions), and
starts in the container's `workingDir`, else `/workspace`. Without namespaces processes see the
host: absolute paths under volume mount paths are rewritten into the root (`podenv`), `HOME` is
the root and they start in `<root>/workspace` (or `<root>/<workingDir>`).

`PATH`: in a pod with its own mount namespace an image's (`/opt/venv/bin:/usr/local/sbin:...`, the
simulated commands bound at `/usr/local/bin`, `launchers.install_pod`), else the simulated
launchers' directory (`<workdir>/bin`: `mpirun`, `horovodrun`, `torchrun`, `nvidia-smi`,
`python`) then the host's PATH.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from . import podsshd
from .launchers import HERE as LAUNCHERS
from .podaddr import CLUSTER_DOMAIN, hosts_file
from .podenv import Lookup, PathRewriter, in_pod_path
from .podns import Holder, PodNamespaceError
from .podvolumes import materialise

if TYPE_CHECKING:
    from ..cluster import SimCluster
    from .launchers import PodView
    from .podns import PodNamespaces

log = logging.getLogger("simcluster.kubelet")

WORKSPACE = "/workspace"  # every simcluster image's WORKDIR
POD_HOME = "/root"  # HOME in a pod with namespaces (the image's root user)
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TRAIN = LAUNCHERS / "train.py"  # the demo's training program, in every pod's /workspace
# with the demo scenario's pretend workloads' program (their commands run it from there)
IMAGE_FILES = (TRAIN, LAUNCHERS.parents[1] / "scenarios" / "workloads" / "train_sim.py")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

class MountFailed(Exception):
    """The pod's volumes cannot be set up (the kubelet's FailedMount)."""


class PodSandbox:
    """The pod's root directory and namespaces (see the module docstring)."""

    def __init__(self, pod: dict[str, Any], root: Path, *, sim: SimCluster, lookup: Lookup,
                 podns: PodNamespaces | None, pod_view: PodView | None, bin_dir: Path | None,
                 pod_ip: str = "127.0.0.1") -> None:
        self.pod = pod
        self.namespace: str = pod["metadata"].get("namespace", "")
        self.name: str = pod["metadata"]["name"]
        self.root = root
        self.sim = sim
        self.lookup = lookup
        self.podns = podns
        self.pod_view = pod_view
        self.bin_dir = bin_dir
        self.pod_ip = pod_ip
        self.hosts_text = ""  # the pod's /etc/hosts as last written (`write_hosts`)
        self.rewriter = PathRewriter(root, ())
        self.holder: Holder | None = None  # the pod's namespaces (None: the host's view, paths rewritten)
        self._tools_seen: bool | None = None  # the holder has the launchers' pod view (`_sees`)

    # -- where processes run -------------------------------------------------------------------
    @property
    def hostname(self) -> str:
        return str((self.pod.get("spec") or {}).get("hostname") or self.name)[:63]

    @property
    def home(self) -> str:
        """The processes' HOME (in the pod's view)."""
        return POD_HOME if self.holder is not None else str(self.root)

    def resolve(self, path: str) -> Path:
        """An absolute in-pod path as the host reaches it: through the pod's namespaces while it
        has them, else under the pod root (where volumes, /workspace and the service-account
        files are in both cases)."""
        if self.holder is not None and self.holder.alive():
            return self.holder.host_path(path)
        return in_pod_path(self.root, path)

    def working_dir(self, spec: Mapping[str, Any] | None) -> str:
        """Where a container's (`spec`'s) processes and exec sessions start (in the pod's view):
        its workingDir, else the image's WORKDIR /workspace (`<root>/workspace` on the host
        without namespaces)."""
        wd = str((spec.get("workingDir") if spec is not None else "") or "")
        if self.holder is not None:
            return os.path.normpath("/" + wd.lstrip("/")) if wd else WORKSPACE
        return str(in_pod_path(self.root, wd or WORKSPACE))

    def find_executable(self, name: str, env: Mapping[str, str], cwd: str) -> str | None:
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

    def base_env(self) -> dict[str, str]:
        """PATH, HOSTNAME and HOME of every process of the pod."""
        view = self.pod_view
        if self.holder is not None and view is not None and self._sees(view):
            return {"PATH": view.path, **view.env, "HOSTNAME": self.hostname, "HOME": self.home}
        path = os.environ.get("PATH") or DEFAULT_PATH
        if self.bin_dir is not None:
            path = f"{self.bin_dir}:{path}"
        return {"PATH": path, "HOSTNAME": self.hostname, "HOME": self.home}

    def rewrite_env(self, env: dict[str, str]) -> dict[str, str]:
        """`env` with paths under volume mount paths rewritten into the root (the host's view)."""
        return self.rewriter.rewrite_env(env, keep=("PATH", "HOME"))

    def _sees(self, view: PodView) -> bool:
        """The pod's namespaces hold the image's view of the simulated commands (every bind made)."""
        if self._tools_seen is None and self.holder is not None:
            self._tools_seen = all(os.path.exists(self.holder.host_path(dest)) for _, dest in view.binds)
        return bool(self._tools_seen)

    # -- setting up and tearing down -----------------------------------------------------------
    async def prepare(self, allocatable: Mapping[str, Any], gone: Callable[[], bool]) -> None:
        """Root directory, volumes, kubeconfig, /workspace, service-account files, namespaces
        (released again when the pod is `gone()` by then). Raises MountFailed when the volumes
        cannot be set up."""
        self.root.mkdir(parents=True, exist_ok=True)
        sa_name, token, automount = self._service_account()
        try:
            mounts = materialise(self.pod, self.root, self.lookup, allocatable, token)
        except Exception as exc:  # a malformed volume must not stop the kubelet
            raise MountFailed(f"MountVolume.SetUp failed: {exc}") from exc
        paths = sorted({os.path.normpath(m) for m in mounts if m.startswith("/") and os.path.normpath(m) != "/"})
        sa = automount and not any(_under(SA_DIR, p) or _under(p, SA_DIR) for p in paths)
        kube, workspace, sa_dir = self.root / ".kube", self.root / WORKSPACE.lstrip("/"), in_pod_path(self.root, SA_DIR)
        for d in (kube, workspace, *([sa_dir] if sa else [])):
            with contextlib.suppress(OSError):
                d.mkdir(parents=True, exist_ok=True)
        sandbox = None
        if self.podns is not None and self.holder is None:  # set up while the files below are written
            sandbox = asyncio.ensure_future(self._create_namespaces(self.podns, paths, sa))
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
                if gone():
                    self.release()
        if self.holder is None:
            self.rewriter = PathRewriter(self.root, [*paths, *([SA_DIR] if sa else [])])

    def release(self) -> None:
        """Kill the pod's namespace holder (the namespaces last as long as a process is in them)."""
        holder = self.holder
        if holder is not None and not holder.killed:
            if self.podns is not None:
                self.podns.release(holder)
            else:
                holder.kill()

    def _service_account(self) -> tuple[str, str, bool]:
        """The pod's service account, its token (`system:serviceaccount:<ns>:<name>`'s, never
        another identity's) and whether it is mounted."""
        spec = self.pod.get("spec") or {}
        sa = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "default")
        token = self.sim.service_account_token(self.namespace, sa)
        automount = spec.get("automountServiceAccountToken")
        if automount is None:
            obj = self.lookup("serviceaccounts", sa)
            automount = obj.get("automountServiceAccountToken") if obj is not None else None
        return sa, token, automount is not False

    def _write_service_account(self, target: Path, token: str) -> bool:
        """token, ca.crt (when simcluster serves TLS) and namespace, as kube-api-access gives them."""
        ca = self.sim.ca_pem
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

    async def _create_namespaces(self, podns: PodNamespaces, paths: list[str], sa: bool) -> Holder:
        """The pod's namespaces (see `podns`): its directories bound at their in-pod paths, its
        own hostname and hosts file."""
        own = self.root / ".simcluster"
        binds: list[tuple[Path | str, str]] = [
            (self.root / WORKSPACE.lstrip("/"), WORKSPACE), (self.root / ".kube", f"{POD_HOME}/.kube"),
        ]
        if sa:
            binds.append((in_pod_path(self.root, SA_DIR), SA_DIR))
        for p in paths:
            binds.append((os.path.realpath(in_pod_path(self.root, p)), p))
        self.hosts_text = hosts_file(self.pod_ip, self.hostname, self.fqdn, ())
        files = [("/etc/hostname", self.hostname + "\n", 0o644), ("/etc/hosts", self.hosts_text, 0o644)]
        if not podsshd.available():
            files += podsshd.files(self.pod_ip)
        view = self.pod_view
        return await podns.create(
            rootfs=own / "rootfs", upper=own / "upper", work=own / "work", scratch=own / "scratch",
            home=(own / "home", POD_HOME), hostname=self.hostname, binds=binds, files=files, dirs=podsshd.DIRS,
            tools=view.binds if view is not None else (),
        )

    @property
    def fqdn(self) -> str:
        """`<hostname>.<subdomain>.<ns>.svc.cluster.local` for a pod with a subdomain, else ""."""
        sub = (self.pod.get("spec") or {}).get("subdomain")
        return f"{self.hostname}.{sub}.{self.namespace}.svc.{CLUSTER_DOMAIN}" if sub else ""

    def write_hosts(self, names: list[tuple[str, list[str]]]) -> None:
        """The pod's /etc/hosts with the namespace's names (`podaddr`), when they changed."""
        holder = self.holder
        if holder is None or not holder.alive():
            return
        text = hosts_file(self.pod_ip, self.hostname, self.fqdn, names)
        if text == self.hosts_text:
            return
        path = holder.host_path("/etc/hosts")
        tmp = path.with_name(".hosts.simcluster")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.replace(tmp, path)  # (glibc reads /etc/hosts anew at each lookup)
        except OSError as exc:
            log.debug("kubelet: cannot write /etc/hosts of %s/%s: %s", self.namespace, self.name, exc)
            return
        self.hosts_text = text


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")
