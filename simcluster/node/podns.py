"""Pods in their own mount and UTS namespaces, where the kernel allows it.

A real pod sees its image's filesystem, its volumes at their mount paths and its own hostname.
simcluster runs containers as local processes; where it can, it gives them that view too:

- One helper process per kubelet (`podns_helper`: `python -I -S podns_helper.py ...`, stdlib only
  and run by its path, like the reaper's) first sets a throwaway pod up to learn what works, then
  keeps one *holder* forked ahead and hands it the next pod. The holder unshares a mount and a UTS
  namespace (as root; otherwise, or when that is refused, inside a new user namespace mapping the
  caller to root, if unprivileged user namespaces are allowed), makes every mount private
  (nothing propagates back to the host), mounts an overlay of the host's root filesystem at
  `<pod root>/.simcluster/rootfs` (`lowerdir=/`, upper and work directories beside it, or on a
  private tmpfs where that filesystem cannot hold an upper layer; in a user namespace, where `/`
  cannot be overlaid because its submounts are locked, a tmpfs holding one overlay per top-level
  directory), rbinds the host's other top-level mounts (`/proc`, `/dev`, `/sys`, ...) and binds
  the shared directories (`/tmp`, the simulator's workdir: live, shared with the host), writes
  `/etc/hostname` and `/etc/hosts`, binds the pod's directories at their in-pod paths (volumes,
  `/workspace`, `/root/.kube`, the service-account files; paths resolved inside the new root),
  chroots into it, sets the hostname and sleeps. Forking from one small process ahead of time leaves a few milliseconds on a pod's
  start where starting an interpreter or a shell script per pod would add tens.
- Every container process, exec session and probe joins the holder's namespaces:
  `nsenter -t <holder> -m -u -r -w<dir> -- argv` (plus `-U --preserve-credentials` in a user
  namespace). nsenter execs in place (it forks only for a PID namespace), so the pid the kubelet
  and the reaper track, its session and process group, its signal handlers (PID-1 semantics), its
  pipes and its exit status are the command's own.
- The holder is a session of its own, registered with the reaper; it dies with the helper
  (`PR_SET_PDEATHSIG`), which dies with the kubelet (the same, and end of file on its stdin); the
  kubelet kills it once the pod's processes are gone (its start time tells it from a later process
  with the same pid). The mounts exist only in the pod's private namespace: they vanish with its
  last process and never appear in the host's mount table.

Where the probe fails (no privilege and no user namespaces, no overlayfs, no `nsenter`), or with
`SimCluster(pod_namespaces=False)` / `SIMCLUSTER_POD_NAMESPACES=0`, pods run in the host's
filesystem as before (`podenv.PathRewriter`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .podenv import in_pod_path
from .procfs import mount_ns

# the simcluster package's checkout (launchers and train.py run from it)
_SOURCE = str(Path(__file__).resolve().parents[2])


def _needed_under(top: str) -> list[str]:
    """Host directories the pods' processes need (the interpreter's installation, the virtualenv,
    simcluster's source) that lie under `top`, outermost only."""
    wanted = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, _SOURCE,
                                            os.path.dirname(os.path.realpath(sys.executable)))}
    inside = sorted(p for p in wanted if p.startswith(top.rstrip("/") + "/"))
    return [p for i, p in enumerate(inside) if not any(p.startswith(q + "/") for q in inside[:i])]

log = logging.getLogger("simcluster.kubelet")

ENV_VAR = "SIMCLUSTER_POD_NAMESPACES"
HELPER = Path(__file__).with_name("podns_helper.py")
READY_TIMEOUT = 10.0
CREATE_TIMEOUT = 30.0


class PodNamespaceError(Exception):
    """A pod's namespaces could not be set up."""


def wanted(option: bool | None) -> bool:
    """Pods get namespaces unless turned off (the option, else `SIMCLUSTER_POD_NAMESPACES=0`)."""
    if option is not None:
        return bool(option)
    return os.environ.get(ENV_VAR, "").strip().lower() not in ("0", "false", "no", "off")


class Holder:
    """A pod's namespaces, held by a sleeping process: how to run a command inside them."""

    def __init__(self, pid: int, nsenter: str, userns: bool) -> None:
        self.pid = pid
        self.nsenter = nsenter
        self.userns = userns
        self.root = Path(f"/proc/{pid}/root")  # the pod's root, seen from the host
        self.killed = False
        self._started = _start_time(pid)  # told apart from a later process with the same pid
        self.mount_ns = mount_ns(pid)  # every process of the pod is in it (`ProcessTable.in_mount_ns`)

    def alive(self) -> bool:
        return not self.killed and self._started is not None and _start_time(self.pid) == self._started

    def host_path(self, path: str) -> Path:
        """An absolute in-pod path as the host reaches it (through /proc/<holder>/root)."""
        return in_pod_path(self.root, path)

    def command(self, argv: list[str], cwd: str) -> list[str]:
        """`argv` run in the pod's namespaces, in its directory `cwd` (nsenter execs in place)."""
        user = ["-U", "--preserve-credentials"] if self.userns else []
        return [self.nsenter, "-t", str(self.pid), *user, "-m", "-u", "-r", f"-w{self.host_path(cwd)}",
                "--", *argv]

    def which(self, name: str, path: str, cwd: str) -> str | None:
        """Where the pod's `execvp` would find `name` (an in-pod path), or None."""
        if "/" in name:
            candidates = [os.path.join(cwd, name)]  # as is when absolute
        else:
            candidates = [os.path.join(cwd, d or ".", name) for d in path.split(":")]
        for c in candidates:
            host = self.host_path(c)
            if host.is_file() and os.access(host, os.X_OK):
                return c
        return None

    def kill(self) -> None:
        if self.killed:
            return
        alive = self.alive()
        self.killed = True
        if alive:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)


def _start_time(pid: int) -> int | None:
    """When a live process started (clock ticks after boot), None when gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] == b"Z" or len(fields) < 20:
        return None
    return int(fields[19])


class PodNamespaces:
    """The kubelet's side of the helper: start it, learn whether namespaces work, get holders."""

    def __init__(self, workdir: Path, shared: Iterable[Path | str], reaper: Any = None) -> None:
        self.workdir = workdir
        self.shared = [os.path.realpath(p) for p in shared if os.path.isdir(p)]
        self.reaper = reaper
        self.nsenter = shutil.which("nsenter") or ""
        self.mode: str | None = None  # "root" | "userns" once ready
        self.error = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready: asyncio.Future[bool] | None = None
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._next = 0
        self._buf = b""
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def userns(self) -> bool:
        return self.mode == "userns"

    def start(self) -> None:
        """Start the helper (on the loop's thread: it dies with that thread); not waiting for it."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._ready = loop.create_future()
        if not sys.platform.startswith("linux") or not self.nsenter:
            self._fail("nsenter (util-linux) is not installed" if self.nsenter == "" else "not Linux")
            return
        probe = self.workdir / ".podns-probe"
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(HELPER), str(os.getpid()), str(probe), *self.shared],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            self._fail(f"cannot start the helper: {exc}")
            return
        if self.reaper is not None:
            self.reaper.add_group(self._proc.pid)
        assert self._proc.stdout is not None
        os.set_blocking(self._proc.stdout.fileno(), False)
        loop.add_reader(self._proc.stdout.fileno(), self._on_readable)

    def _fail(self, why: str) -> None:
        self.error = why
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(False)
            log.warning("kubelet: pods share the host's filesystem view and hostname (%s)", why)
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(PodNamespaceError(why))
        self._pending.clear()

    async def ready(self) -> bool:
        """True once the helper has found namespaces to work (waits for its probe)."""
        if self._ready is None:
            return False
        if not self._ready.done():
            try:
                async with asyncio.timeout(READY_TIMEOUT):
                    await asyncio.shield(self._ready)
            except TimeoutError:
                self._fail("the helper did not answer")
                self.close()
        return self._ready.result()

    async def create(self, *, rootfs: Path, upper: Path, work: Path, scratch: Path, hostname: str,
                     binds: list[tuple[Path | str, str]], files: list[tuple[str, str, int]],
                     home: tuple[Path, str] | None = None, tools: tuple[tuple[str, str], ...] = (),
                     dirs: list[tuple[str, int]] | None = None) -> Holder:
        """A holder for a pod (raises PodNamespaceError): its root filesystem at `rootfs` (upper,
        work: the overlay's directories; scratch: a tmpfs for them if needed), `binds` (host path,
        in-pod path), `files` (in-pod path, text, mode), `dirs` (in-pod path, mode) and `home` (a host directory, its in-pod path: the
        pod's own home, so the host's dotfiles (a `.bashrc` that puts pyenv first on PATH, history)
        stay out of the pod, as an image's /root would; what the simulator itself runs from under
        that path (its interpreter, its virtualenv, its source) is bound back in at the same path).
        `tools` (host path, in-pod path): the image's view of the simulated commands and their
        interpreter (`launchers.install_pod`), bound where the pod's own layer can hold them."""
        proc = self._proc
        if not await self.ready() or proc is None or proc.stdin is None or self._loop is None:
            raise PodNamespaceError(self.error or "pod namespaces are not available")
        if home is not None:
            home[0].mkdir(parents=True, exist_ok=True)
            binds = [(home[0], home[1]), *((p, p) for p in _needed_under(home[1])), *binds]
        self._next += 1
        rid = self._next
        req = {"id": rid, "rootfs": str(rootfs), "upper": str(upper), "work": str(work), "scratch": str(scratch),
               "hostname": hostname, "binds": [[str(s), d] for s, d in binds], "files": files, "dirs": dirs or [],
               "tools": [[s, d] for s, d in tools]}
        fut = self._loop.create_future()
        self._pending[rid] = fut
        try:
            proc.stdin.write(json.dumps(req).encode() + b"\n")
            proc.stdin.flush()
        except (OSError, ValueError) as exc:
            self._pending.pop(rid, None)
            raise PodNamespaceError(f"the helper is gone: {exc}") from None
        try:
            async with asyncio.timeout(CREATE_TIMEOUT):
                reply = await fut
        except TimeoutError:
            raise PodNamespaceError("the helper did not answer") from None
        finally:
            self._pending.pop(rid, None)
        if "error" in reply:
            raise PodNamespaceError(str(reply["error"]))
        if reply.get("warnings"):
            log.debug("kubelet: pod %s: %s", hostname, "; ".join(reply["warnings"]))
        return self._holder(int(reply["pid"]))

    def _holder(self, pid: int) -> Holder:
        holder = Holder(pid, self.nsenter, self.userns)
        if self.reaper is not None:
            self.reaper.add_group(pid)  # a session of its own
            if holder.mount_ns is not None:
                self.reaper.add_mount_ns(holder.mount_ns)
        return holder

    def release(self, holder: Holder) -> None:
        holder.kill()
        if self.reaper is not None:
            self.reaper.remove_group(holder.pid)
            if holder.mount_ns is not None:
                self.reaper.remove_mount_ns(holder.mount_ns)

    def _on_readable(self) -> None:
        proc = self._proc
        if proc is None or proc.stdout is None:
            return
        try:
            data = os.read(proc.stdout.fileno(), 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._fail(self.error or "the helper exited")
            self.close()
            return
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "ready" in msg:
                if msg["ready"]:
                    self.mode = str(msg.get("mode") or "root")
                    if self._ready is not None and not self._ready.done():
                        self._ready.set_result(True)
                else:
                    self._fail(f"namespaces are not available here: {msg.get('error', '')}")
                continue
            fut = self._pending.get(msg.get("id"))
            if fut is not None and not fut.done():
                fut.set_result(msg)
            elif "pid" in msg:  # nobody waits for it any more (the pod went away): not needed
                self.release(self._holder(int(msg["pid"])))

    def close(self) -> None:
        """Stop the helper: its holders die with it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if self._loop is not None and proc.stdout is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(proc.stdout.fileno())
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(2)
        if self.reaper is not None:
            self.reaper.remove_group(proc.pid)
        self._fail(self.error or "stopped")
