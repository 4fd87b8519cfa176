"""A pod's own `0.0.0.0` and `localhost`, where the kernel allows (simulation of a pod's network
namespace for the addresses that matter).

The pods share the machine's network; `podaddr` gives each its own address on the loopback range.
A server that binds `0.0.0.0` or `127.0.0.1` on a fixed port would still take that port for the
whole machine, so two pods' Jupyter on 8888 would collide, where on a real cluster each pod has its
own. Where the kernel allows it (cgroup v2 mounted and the BPF syscall with `CAP_BPF` and
`CAP_NET_ADMIN`, as root), each pod's processes (containers, probes, exec sessions, ephemeral
containers and all they start) run in a cgroup of their own,
`<cgroup2 mount><our cgroup>/simcluster-<pid>.<n>/<pod uid>`, with two small BPF programs attached
(`cgroup/bind4`, `cgroup/connect4`) that do what the pod's network namespace would:

- `bind` to `0.0.0.0` or `127.0.0.1` on a port outside the kernel's ephemeral range
  (`net.ipv4.ip_local_port_range`) binds the pod's own address: no collision with the same port
  in another pod; the kubelet's port-forward and proxy reach it there;
- `connect` to `127.0.0.1` on such a port (but the API server's) connects to the pod's address:
  `curl localhost:8888` in the pod reaches the pod's own Jupyter, never another pod's.

Binds that let the kernel pick the port (port 0: Open MPI's daemons, which announce and dial
`127.0.0.1`) are left alone: a port the kernel picks is free on every address, so they never
collide, and they are reached as before. IPv6 wildcard binds (`::`) are left alone too: whether a
socket is IPv6-only, which decides whether an IPv4-mapped pod address may be bound, is not seen
from the hook; such servers share the port as before.

Where the kernel refuses (not root, no cgroup v2, no BPF), the kubelet says so once in its log and
pods share `0.0.0.0` as before; `SIMCLUSTER_POD_NETWORK=0` turns it off. Stdlib only (`ctypes`
for the `bpf` syscall, whose x86-64 and arm64 numbers are known here).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import logging
import os
import platform
import socket
import struct
from collections.abc import Callable

log = logging.getLogger("simcluster.kubelet")

ENV_VAR = "SIMCLUSTER_POD_NETWORK"
_serial = itertools.count(1)
_NR_BPF = {"x86_64": 321, "aarch64": 280, "arm64": 280}
_BPF_PROG_LOAD, _BPF_PROG_ATTACH = 5, 8
_PROG_TYPE_CGROUP_SOCK_ADDR = 18
_ATTACH_INET4_BIND, _ATTACH_INET4_CONNECT = 8, 10
# struct bpf_sock_addr: user_family, user_ip4 (network order), user_ip6[4], user_port (network order)
_OFF_IP4, _OFF_PORT = 4, 24


def wanted(option: bool | None = None) -> bool:
    """On unless turned off (the option, else `SIMCLUSTER_POD_NETWORK=0`)."""
    if option is not None:
        return bool(option)
    return os.environ.get(ENV_VAR, "").strip().lower() not in ("0", "false", "no", "off")


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def _ip_word(ip: str) -> int:
    """An IPv4 address as the 32-bit immediate whose in-memory bytes are the address (network order)."""
    return int(struct.unpack("<i" if socket.htonl(1) != 1 else ">i", socket.inet_aton(ip))[0])


def _port_to_host() -> bytes:
    """r3 = r3's low 16 bits as a host-order port (the field is in network order)."""
    return _insn(0xDC, 3, imm=16) if socket.htonl(1) != 1 else _insn(0x57, 3, imm=0xFFFF)  # be16 / and


def _fixed_port_or_skip(lo: int, hi: int, skip: tuple[int, ...], to_out: int) -> list[bytes]:
    """r3 = the port; jump `to_out` instructions past this block when it is 0, in [lo, hi] or in `skip`."""
    body: list[bytes] = [_insn(0x61, 3, 1, _OFF_PORT), _port_to_host()]
    checks: list[tuple[int, int]] = [(0x15, 0)]  # jeq 0
    checks += [(0x15, p) for p in skip]
    tail = [(0xA5, lo)]  # jlt lo -> fixed: go on past the range check
    n = len(checks) + 2
    for i, (op, imm) in enumerate(checks):
        body.append(_insn(op, 3, off=n - i - 1 + to_out, imm=imm))
    body.append(_insn(tail[0][0], 3, off=1, imm=lo))
    body.append(_insn(0xB5, 3, off=to_out, imm=hi))  # jle hi -> in the ephemeral range: leave it
    return body


def bind_program(pod_ip: str, lo: int, hi: int) -> bytes:
    """cgroup/bind4: 0.0.0.0 or 127.0.0.1 on a fixed port -> the pod's address."""
    loopback = _ip_word("127.0.0.1")
    tail = [_insn(0xB4, 4, imm=_ip_word(pod_ip)), _insn(0x63, 1, 4, _OFF_IP4)]  # w4 = ip; *(u32*)(r1+4) = r4
    ports = _fixed_port_or_skip(lo, hi, (), len(tail))
    head = [_insn(0x61, 2, 1, _OFF_IP4),  # r2 = user_ip4
            _insn(0x16, 2, off=1, imm=0),  # if w2 == 0 goto ports
            _insn(0x56, 2, off=len(ports) + len(tail), imm=loopback)]  # if w2 != 127.0.0.1 goto out
    return b"".join([*head, *ports, *tail, _insn(0xB7, 0, imm=1), _insn(0x95)])  # r0 = 1 (allow); exit


def connect_program(pod_ip: str, lo: int, hi: int, keep_ports: tuple[int, ...]) -> bytes:
    """cgroup/connect4: 127.0.0.1 on a fixed port (not one of `keep_ports`) -> the pod's address."""
    tail = [_insn(0xB4, 4, imm=_ip_word(pod_ip)), _insn(0x63, 1, 4, _OFF_IP4)]
    ports = _fixed_port_or_skip(lo, hi, keep_ports, len(tail))
    head = [_insn(0x61, 2, 1, _OFF_IP4), _insn(0x56, 2, off=len(ports) + len(tail), imm=_ip_word("127.0.0.1"))]
    return b"".join([*head, *ports, *tail, _insn(0xB7, 0, imm=1), _insn(0x95)])


class _Bpf:
    def __init__(self) -> None:
        nr = _NR_BPF.get(platform.machine())
        if nr is None:
            raise OSError(errno.ENOSYS, f"the bpf syscall's number on {platform.machine()} is not known here")
        self.nr = nr
        self.libc = ctypes.CDLL(None, use_errno=True)

    def _call(self, cmd: int, attr: bytes) -> int:
        buf = ctypes.create_string_buffer(attr, 128)
        r = int(self.libc.syscall(self.nr, cmd, buf, len(buf)))
        if r < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return r

    def load(self, code: bytes, attach_type: int, name: bytes) -> int:
        insns = ctypes.create_string_buffer(code, len(code))
        lic = ctypes.create_string_buffer(b"GPL")
        attr = struct.pack("<IIQQIIQII16sII", _PROG_TYPE_CGROUP_SOCK_ADDR, len(code) // 8, ctypes.addressof(insns),
                           ctypes.addressof(lic), 0, 0, 0, 0, 0, name[:15], 0, attach_type)
        return self._call(_BPF_PROG_LOAD, attr)

    def attach(self, cgroup_fd: int, prog_fd: int, attach_type: int) -> None:
        self._call(_BPF_PROG_ATTACH, struct.pack("<IIIII", cgroup_fd, prog_fd, attach_type, 0, 0))


def _cgroup2_root() -> str | None:
    """Where this process's cgroup v2 directory is, or None (no cgroup v2 mounted)."""
    mount = None
    with contextlib.suppress(OSError), open("/proc/self/mounts", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                mount = parts[1]
                break
    if mount is None:
        return None
    own = "/"
    with contextlib.suppress(OSError), open("/proc/self/cgroup", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("0::"):
                own = line[3:].strip() or "/"
    return os.path.join(mount, own.lstrip("/"))


def port_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            lo, hi = (int(x) for x in fh.read().split()[:2])
            return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


class PodNetwork:
    """The kubelet's pod cgroups (see the module docstring). `start()` says whether the kernel
    allows it; `join(uid, ip)` gives a pod its cgroup and programs; `leave(uid)` removes them."""

    def __init__(self, api_ports: tuple[int, ...] = ()) -> None:
        self.api_ports = api_ports
        self.base: str | None = None
        self.why_not = ""
        self.ports = port_range()
        self._bpf: _Bpf | None = None
        self.pods: dict[str, str] = {}  # pod uid -> its cgroup directory

    @property
    def active(self) -> bool:
        return self.base is not None

    def start(self) -> bool:
        """Make our directory and try one pod's programs on it; say once why not where refused."""
        try:
            root = _cgroup2_root()
            if root is None:
                raise OSError(errno.ENOENT, "no cgroup v2 hierarchy is mounted")
            self._bpf = _Bpf()
            _sweep(root)
            base = os.path.join(root, f"simcluster-{os.getpid()}.{next(_serial)}")  # (one per kubelet)
            os.makedirs(base, exist_ok=True)
            self.base = base
            self.join("probe", "127.0.0.2")
            self.leave("probe")
        except OSError as exc:
            self.why_not = exc.strerror or str(exc)
            if self.base is not None:
                with contextlib.suppress(OSError):
                    os.rmdir(self.base)
            self.base = None
            log.info("kubelet: a pod's server that binds 0.0.0.0 binds every address of the machine (a pod's "
                     "own 0.0.0.0 and localhost need root, cgroup v2 and BPF: %s; README, 'Every pod has its own address')",
                     self.why_not)
            return False
        log.info("kubelet: a pod's 0.0.0.0 and 127.0.0.1 on fixed ports are its own address (cgroup bind/connect "
                 "programs under %s)", self.base)
        return True

    def join(self, uid: str, pod_ip: str) -> str:
        """Give pod `uid` (address `pod_ip`) its cgroup and programs; its directory."""
        assert self.base is not None and self._bpf is not None
        path = os.path.join(self.base, uid)
        os.makedirs(path, exist_ok=True)
        lo, hi = self.ports
        progs = ((bind_program(pod_ip, lo, hi), _ATTACH_INET4_BIND, b"pod_bind4"),
                 (connect_program(pod_ip, lo, hi, self.api_ports), _ATTACH_INET4_CONNECT, b"pod_connect4"))
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for code, kind, name in progs:
                prog = self._bpf.load(code, kind, name)
                try:
                    self._bpf.attach(fd, prog, kind)  # the attachment holds the program
                finally:
                    os.close(prog)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.rmdir(path)
            raise
        os.close(fd)
        self.pods[uid] = path
        return path

    def leave(self, uid: str) -> bool:
        """Remove pod `uid`'s cgroup (its programs go with it): False while a process of it lingers
        (kept for a later call or `close`)."""
        path = self.pods.get(uid)
        if path is None:
            return True
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError:
            return False
        del self.pods[uid]
        return True

    def close(self) -> None:
        for uid in list(self.pods):
            self.leave(uid)
        if self.base is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self.base)


def _sweep(root: str) -> None:
    """Remove the empty pod cgroups that simclusters which have ended left behind."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            pid = entry.name.removeprefix("simcluster-").partition(".")[0]
            if not entry.name.startswith("simcluster-") or not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
                continue
            with contextlib.suppress(OSError):
                for sub in os.scandir(entry.path):
                    if sub.is_dir():
                        with contextlib.suppress(OSError):
                            os.rmdir(sub.path)
                os.rmdir(entry.path)


def joiner(cgroup: str | None, then: Callable[[], None] | None = None) -> Callable[[], None] | None:
    """A `preexec_fn` that moves the child into `cgroup` (when given), then runs `then`."""
    if cgroup is None:
        return then
    procs = os.path.join(cgroup, "cgroup.procs").encode()

    def setup() -> None:
        with contextlib.suppress(OSError):
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        if then is not None:
            then()

    return setup
