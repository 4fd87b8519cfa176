"""The helper behind `podns`: sets pods' namespaces up (see `podns` for the design).

Run by its path as `python -I -S podns_helper.py <kubelet pid> <probe dir> <shared dir>...`, so it
imports only the standard library (and starts in a few milliseconds). It probes once, then keeps a
holder forked (and its namespaces unshared) ahead of the next request; a holder reads its request
from its own pipe, builds its pod's root, enters it, answers and sleeps until killed.

Protocol (JSON lines): the helper first answers `{"ready": true, "mode": "root" | "userns"}` or
`{"ready": false, "error"}`; then for each request `{"id", "rootfs", "upper", "work", "scratch",
"hostname", "binds": [[host path, in-pod path]], "files": [[in-pod path, text, mode?]], "dirs": [[in-pod
path, mode]], "tools": [[host path, in-pod path]]}` the holder it forked answers `{"id", "pid", "warnings"?}` or `{"id", "error"}`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
MS_NOSUID = 2
MS_NODEV = 4
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
# host mounts not carried into pods: each pod gets its own
PRIVATE_PATHS = ("/etc/hostname", "/etc/hosts", "/workspace", "/var/run/secrets", "/run/secrets")


class SetupError(Exception):
    pass


def _unescape(field: str) -> str:
    """A mountinfo path (space, tab, newline and backslash are octal escapes)."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        code = field[i + 1:i + 4]
        if field[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def host_mounts(mountinfo: str = "/proc/self/mountinfo") -> list[str]:
    """Mount points whose parent is the root mount (`/proc`, `/dev`, `/sys`, a `/tmp` or `/home`
    of their own...)."""
    try:
        with open(mountinfo) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    rows = [(p[0], p[1], _unescape(p[4])) for p in (line.split() for line in lines) if len(p) >= 5]
    root_ids = {mid for mid, _, point in rows if point == "/"}
    return sorted({point for _, parent, point in rows if parent in root_ids and point != "/"})


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _depth(path: str) -> tuple[int, str]:
    return path.rstrip("/").count("/"), path


class _Sys:
    """The system calls a holder needs, through libc."""

    def __init__(self) -> None:
        import ctypes

        self.ctypes = ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise SetupError(f"{what}: {os.strerror(self.ctypes.get_errno())}")

    def unshare(self, flags: int) -> None:
        self._check(self.libc.unshare(flags), "unshare")

    def mount(self, source: str | None, target: str, fstype: str | None, flags: int,
              data: str | None = None) -> None:
        def enc(s: str | None) -> bytes | None:
            return None if s is None else s.encode()

        rc = self.libc.mount(enc(source), enc(target), enc(fstype), self.ctypes.c_ulong(flags), enc(data))
        self._check(rc, f"mount {fstype or source} on {target}")

    def sethostname(self, name: str) -> None:
        raw = name.encode()
        self._check(self.libc.sethostname(raw, len(raw)), "sethostname")

    def prctl(self, option: int, arg: int | bytes) -> None:
        self.libc.prctl(option, arg, 0, 0, 0)


def _write(path: str, text: str, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _map_user(uid: int, gid: int) -> None:
    """In a new user namespace: the caller is root inside."""
    with contextlib.suppress(OSError):
        _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1\n")
    _write("/proc/self/gid_map", f"0 {gid} 1\n")


def _inside(root: str, path: str) -> str:
    """In-pod `path` as a path under `root`, its symlinks resolved inside `root` (as in the pod)."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    cur: list[str] = []
    hops = 0
    while parts:
        name = parts.pop(0)
        if name == "..":
            if cur:
                cur.pop()
            continue
        here = os.path.join(root, *cur, name)
        if os.path.islink(here):
            hops += 1
            if hops > 40:
                raise OSError(40, "too many levels of symbolic links", path)
            target = os.readlink(here)
            if target.startswith("/"):
                cur = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            continue
        cur.append(name)
    return os.path.join(root, *cur)


def _mountpoint(target: str, is_file: bool) -> None:
    if os.path.lexists(target):
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if is_file:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    else:
        os.mkdir(target, 0o755)


class _Layers:
    """Overlays of host directories: upper and work directories under the pod directory, or on a
    private tmpfs when that filesystem cannot hold an upper layer (e.g. overlayfs itself)."""

    def __init__(self, sysc: _Sys, req: dict[str, Any], userns: bool) -> None:
        self.sysc = sysc
        self.scratch = req["scratch"]
        self.bases = [(req["upper"], req["work"]),
                      (os.path.join(self.scratch, "upper"), os.path.join(self.scratch, "work"))]
        self.scratch_mounted = False
        self.options = (",userxattr", "") if userns else ("",)

    def mount(self, lower: str, target: str, name: str) -> None:
        errors = []
        for i, (upper, work) in enumerate(self.bases):
            if i and not self.scratch_mounted:
                os.makedirs(self.scratch, exist_ok=True)
                self.sysc.mount("tmpfs", self.scratch, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
                self.scratch_mounted = True
            up, wk = os.path.join(upper, name), os.path.join(work, name)
            os.makedirs(up, exist_ok=True)
            os.makedirs(wk, exist_ok=True)
            for extra in self.options:
                try:
                    self.sysc.mount("overlay", target, "overlay", 0,
                                    f"lowerdir={lower},upperdir={up},workdir={wk}{extra}")
                    return
                except SetupError as exc:
                    errors.append(str(exc))
        raise SetupError("; ".join(errors))


def _compose(sysc: _Sys, layers: _Layers, rootfs: str, mounts: list[str], warnings: list[str]) -> list[str]:
    """A root for when `/` cannot be overlaid: a tmpfs of the host's top-level entries, each
    directory an overlay of its own, those holding other mounts bound whole. Returns those."""
    sysc.mount("tmpfs", rootfs, "tmpfs", 0, "mode=0755")
    holding = {"/" + m.strip("/").split("/")[0] for m in mounts}
    bound: list[str] = []
    for name in sorted(os.listdir("/")):
        src, dst = "/" + name, rootfs + "/" + name
        try:
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
                continue
            if not os.path.isdir(src):
                continue
            os.mkdir(dst, 0o755)
            if src not in holding:
                try:
                    layers.mount(src, dst, name)
                    continue
                except SetupError as exc:
                    warnings.append(f"{src}: {exc}")
            sysc.mount(src, dst, None, MS_BIND | MS_REC)
            bound.append(src)
        except (OSError, SetupError) as exc:
            warnings.append(f"{src}: {exc}")
    return bound


def setup_pod(sysc: _Sys, req: dict[str, Any], mounts: list[str], shared: list[str], userns: bool) -> list[str]:
    """In a holder, after unshare: build the pod's root, enter it, add the pod's own files and
    directories. Returns warnings (what could not be set up but does not stop the pod)."""
    warnings: list[str] = []
    rootfs = req["rootfs"]
    sysc.mount(None, "/", None, MS_REC | MS_PRIVATE)
    layers = _Layers(sysc, req, userns)
    os.makedirs(rootfs, exist_ok=True)
    try:
        layers.mount("/", rootfs, "root")
        done: list[str] = []
    except SetupError:
        done = _compose(sysc, layers, rootfs, mounts, warnings)
    # the host's other filesystems (with what is mounted under them) and the directories shared
    # with it (only the directory: the pods' own mounts are under the simulator's workdir), live
    points = sorted([(p, True) for p in mounts] + [(d, False) for d in shared], key=lambda pr: _depth(pr[0]))
    for point, recursive in points:
        if any(_under(point, d) for d in done) or any(_under(point, p) for p in PRIVATE_PATHS):
            continue
        if not os.path.isdir(point) and not os.path.isfile(point):
            continue
        try:
            target = _inside(rootfs, point)
            _mountpoint(target, os.path.isfile(point))
            try:
                sysc.mount(point, target, None, MS_BIND | (MS_REC if recursive else 0))
            except SetupError:
                if recursive:
                    raise
                sysc.mount(point, target, None, MS_BIND | MS_REC)  # a user namespace: locked submounts
            if recursive:
                done.append(point)
        except (SetupError, OSError) as exc:
            warnings.append(f"{point}: {exc}")
    # the pod's own files and directories at their in-pod paths (resolved inside: /var/run may
    # be a link to /run), then enter it (a chroot: detaching the host's tree after a pivot_root
    # would cost the kernel an RCU grace period, milliseconds, per pod)
    for path, mode in req.get("dirs") or ():
        try:
            target = _inside(rootfs, path)
            os.makedirs(target, exist_ok=True)
            os.chmod(target, int(mode))
        except OSError as exc:
            warnings.append(f"{path}: {exc}")
    for path, text, *mode in req.get("files") or ():
        try:
            target = _inside(rootfs, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target)
            _write(target, text, int(mode[0]) if mode else 0o644)
        except OSError as exc:
            warnings.append(f"{path}: {exc}")
    _bind_all(sysc, rootfs, req.get("binds") or (), (), warnings)
    # the simulated commands and their interpreter, never where a mount point would be made in
    # the host's own filesystem (a directory shared live with it)
    _bind_all(sysc, rootfs, req.get("tools") or (), done + [d for d in shared if os.path.isdir(d)], warnings)
    os.chdir(rootfs)
    os.chroot(".")
    os.chdir("/")
    sysc.sethostname(req["hostname"])
    return warnings


def _bind_all(sysc: _Sys, rootfs: str, binds: Any, live: Any, warnings: list[str]) -> None:
    """Bind each (host path, in-pod path), outermost first; none under a directory of `live`."""
    for source, dest in sorted(binds, key=lambda b: _depth(b[1])):
        shared = next((d for d in live if _under(dest, d)), None)
        if shared is not None:
            warnings.append(f"{dest}: under {shared}, shared with the host")
            continue
        try:
            target = _inside(rootfs, dest)
            _mountpoint(target, os.path.isfile(source))
            sysc.mount(source, target, None, MS_BIND | MS_REC)
        except (SetupError, OSError) as exc:
            warnings.append(f"{dest}: {exc}")


def _unshare(sysc: _Sys, userns: bool, ids: tuple[int, int]) -> None:
    sysc.unshare(CLONE_NEWNS | CLONE_NEWUTS | (CLONE_NEWUSER if userns else 0))
    if userns:
        _map_user(*ids)


def _read_line(fd: int) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = os.read(fd, 65536)
        except InterruptedError:
            continue
        if not chunk:
            break
        data += chunk
    return data


def _holder(sysc: _Sys, rfd: int, mounts: list[str], shared: list[str], userns: bool, ids: tuple[int, int]) -> None:
    """A forked child, made before its request (fork and unshare are off the pod's path): reads
    the request from `rfd`, builds the pod's root, answers, then sleeps until killed."""
    parent = os.getppid()
    early: Exception | None = None
    try:
        sysc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setsid()
        _unshare(sysc, userns, ids)
        sysc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # again: a new user namespace's credentials clear it
        if os.getppid() != parent:
            os._exit(0)
    except Exception as exc:
        early = exc
    line = _read_line(rfd)
    if not line:  # the helper is exiting
        os._exit(0)
    reply: dict[str, Any] = {}
    try:
        req = json.loads(line)
        reply["id"] = req.get("id")
        if early is not None:
            raise early
        warnings = setup_pod(sysc, req, mounts, shared, userns)
        reply["pid"] = os.getpid()
        if warnings:
            reply["warnings"] = [w[:300] for w in warnings[:10]]
    except Exception as exc:
        reply["error"] = str(exc)[:1000]
    with contextlib.suppress(OSError):
        os.write(1, (json.dumps(reply) + "\n").encode())  # one write under PIPE_BUF: not interleaved
    if "error" in reply:
        os._exit(1)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 65536)
    with contextlib.suppress(Exception):
        sysc.prctl(PR_SET_NAME, b"simcluster-pod")
    while True:
        signal.pause()


def _spare(sysc: _Sys, mounts: list[str], shared: list[str], userns: bool,
           ids: tuple[int, int]) -> tuple[int, int] | None:
    """The next holder, forked ahead: (pid, the pipe its request goes to), None if fork fails."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:
        try:
            os.close(w)
            _holder(sysc, r, mounts, shared, userns, ids)
        finally:
            os._exit(1)
    os.close(r)
    return pid, w


def _probe(sysc: _Sys, probe_dir: str, mounts: list[str], ids: tuple[int, int], userns: bool) -> str | None:
    """Set a throwaway pod up in a child: None when that works, else why not."""
    req = {"rootfs": os.path.join(probe_dir, "rootfs"), "upper": os.path.join(probe_dir, "upper"),
           "work": os.path.join(probe_dir, "work"), "scratch": os.path.join(probe_dir, "scratch"),
           "hostname": "probe"}
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            _unshare(sysc, userns, ids)
            setup_pod(sysc, req, mounts, [], userns)
            os.write(w, b"ok")
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                os.write(w, str(exc).encode()[:1000] or b"failed")
        os._exit(0)
    os.close(w)
    out = b""
    while chunk := os.read(r, 4096):
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return None if out == b"ok" else out.decode(errors="replace")


def remove_tree(path: str) -> None:
    """Remove a directory tree, overlayfs work directories (mode 000) included."""
    import shutil

    if os.geteuid() != 0:  # root needs no permission; its owner must give itself some first
        for _dir, subdirs, _files in os.walk(path):
            for d in subdirs:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(_dir, d), 0o700, follow_symlinks=False)
    shutil.rmtree(path, ignore_errors=True)


def _helper_main(parent: int, probe_dir: str, shared: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sysc = _Sys()
    sysc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)
    ids = (os.geteuid(), os.getegid())
    mounts = host_mounts()
    why: list[str] = []
    mode: bool | None = None
    for userns in ([False] if ids[0] == 0 else []) + [True]:
        err = _probe(sysc, probe_dir, mounts, ids, userns)
        if err is None:
            mode = userns
            break
        why.append(("in a user namespace: " if userns else "") + err)
    with contextlib.suppress(OSError):
        remove_tree(probe_dir)
    if mode is None:
        os.write(1, (json.dumps({"ready": False, "error": "; ".join(why)}) + "\n").encode())
        os._exit(0)
    os.write(1, (json.dumps({"ready": True, "mode": "userns" if mode else "root"}) + "\n").encode())
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # holders are reaped by the kernel
    spare = _spare(sysc, mounts, shared, mode, ids)
    buf = b""
    while True:
        try:
            data = os.read(0, 65536)
        except InterruptedError:
            continue
        if not data:
            break
        buf += data
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            handed = False
            for _ in range(2):  # a spare that died meanwhile: another one
                if spare is None:
                    spare = _spare(sysc, mounts, shared, mode, ids)
                    if spare is None:
                        break
                with contextlib.suppress(OSError):
                    os.write(spare[1], line + b"\n")
                    handed = True
                os.close(spare[1])
                spare = None
                if handed:
                    break
            if not handed:
                with contextlib.suppress(ValueError, AttributeError):
                    rid = json.loads(line).get("id")
                    os.write(1, (json.dumps({"id": rid, "error": "cannot fork a holder"}) + "\n").encode())
            spare = _spare(sysc, mounts, shared, mode, ids)  # the next one, made while this one works
    os._exit(0)


if __name__ == "__main__":
    _helper_main(int(sys.argv[1]), sys.argv[2], sys.argv[3:])
