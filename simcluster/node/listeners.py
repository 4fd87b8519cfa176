"""Which TCP ports a pod's processes listen on, and at which address (as /proc shows them).

The pods share the machine's network: a server in a pod binds its pod's address (`podaddr`),
127.0.0.1 or every address. A real kubelet forwards a port to `localhost` in the pod's network
namespace; here the same port may be taken by a server of another pod on another address, so a
port is the pod's only if one of the pod's own processes holds the listening socket: the LISTEN
sockets of machine's LISTEN sockets (their inodes) met among the `socket:[inode]` links of the pod's
processes' file descriptors. `dial_address` is where to connect to reach it.

The LISTEN sockets come from the kernel's sock_diag netlink (the listening table alone, in a
fraction of a millisecond), else from `/proc/net/tcp` and `/proc/net/tcp6`, which the kernel
writes out whole, every established and TIME_WAIT socket of the machine included (20 ms a
connection on a machine whose tests leave a thousand). Stdlib only, no I/O beyond /proc and
the netlink socket.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import socket
import struct
from collections.abc import Iterable


def _address(hex_addr: str) -> str:
    """/proc/net/tcp's address (each 32-bit word in host order) as text."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)) if socket.htonl(1) != 1 else raw
    return str(ipaddress.ip_address(words))


TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
# a LISTEN line: sl, local address:port, remote, st 0A, tx:rx, tr:tm, retrnsmt, uid, timeout, inode
_LINE = r"^\s*\d+:\s+([0-9A-F]+):({port})\s+\S+\s+0A\s+\S+\s+\S+\s+\S+\s+\d+\s+\d+\s+(\d+)"


def listening_sockets(tables: Iterable[str] = TABLES, port: int | None = None) -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket of the machine (on `port` only,
    when given): sock_diag's answer, else /proc's tables (one regular expression over each)."""
    with contextlib.suppress(OSError, struct.error, ValueError):
        return diag_listening(port)
    return proc_listening(tables, port)


def proc_listening(tables: Iterable[str] = TABLES, port: int | None = None) -> dict[int, tuple[str, int]]:
    """`listening_sockets` from /proc/net/tcp and tcp6."""
    pattern = re.compile(_LINE.format(port="[0-9A-F]{4}" if port is None else f"{port:04X}"), re.MULTILINE)
    out: dict[int, tuple[str, int]] = {}
    for table in tables:
        try:
            with open(table, encoding="ascii", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        for m in pattern.finditer(text):
            with contextlib.suppress(ValueError):
                out[int(m.group(3))] = (_address(m.group(1)), int(m.group(2), 16))
    return out


NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY = 4, 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
TCP_LISTEN = 10
_NLMSG = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
# inet_diag_req_v2: family, protocol, extensions, pad, states; inet_diag_sockid: sport and dport
# (2 bytes each, big endian), src, dst (16 bytes each), interface, cookie (2 x 32 bits)
_REQUEST = struct.Struct("=BBBxI2s2s16s16sI8s")
# inet_diag_msg: family, state, timer, retransmits, the sockid, expires, rqueue, wqueue, uid, inode
_ANSWER = struct.Struct("=BBBB2s2s16s16sI8sIIIII")


def diag_listening(port: int | None = None) -> dict[int, tuple[str, int]]:
    """`listening_sockets` from the kernel's sock_diag (NETLINK_SOCK_DIAG): the TCP sockets in
    LISTEN of both families (OSError where the kernel has no sock_diag)."""
    out: dict[int, tuple[str, int]] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(5)
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), start=1):
            body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 1 << TCP_LISTEN, b"", b"", b"", b"", 0, b"")
            nl.send(_NLMSG.pack(_NLMSG.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0)
                    + body)
            done = False
            while not done:
                data = nl.recv(1 << 16)
                if not data:
                    raise OSError("sock_diag answered nothing")
                at = 0
                while at + _NLMSG.size <= len(data):
                    length, kind, _flags, got_seq, _pid = _NLMSG.unpack_from(data, at)
                    if length < _NLMSG.size:
                        raise ValueError("a netlink message shorter than its header")
                    if kind == NLMSG_ERROR:
                        errno = -struct.unpack_from("=i", data, at + _NLMSG.size)[0]
                        raise OSError(errno, os.strerror(errno))
                    if kind == NLMSG_DONE:
                        done = True
                        break
                    if got_seq == seq:
                        fam, state, *_, sport, _dport, src, _dst, _if, _cookie, _e, _r, _w, _uid, inode = \
                            _ANSWER.unpack_from(data, at + _NLMSG.size)
                        number = int.from_bytes(sport, "big")
                        if state == TCP_LISTEN and (port is None or number == port):
                            raw = src[:4] if fam == socket.AF_INET else src
                            out[inode] = (str(ipaddress.ip_address(raw)), number)
                    at += (length + 3) & ~3
    return out


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process `pid` holds open (empty when it is gone or not ours)."""
    found: set[int] = set()
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return found
    for fd in fds:
        try:
            link = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            found.add(int(link[8:-1]))
    return found


def listening(pids: Iterable[int], port: int | None = None) -> dict[int, list[str]]:
    """port -> the addresses it is bound on, for every TCP port (or `port`) the processes `pids`
    listen on."""
    sockets = listening_sockets(port=port)
    ports: dict[int, list[str]] = {}
    if not sockets:
        return ports
    for pid in pids:
        for inode in socket_inodes(pid):
            hit = sockets.get(inode)
            if hit is not None and hit[0] not in ports.setdefault(hit[1], []):
                ports[hit[1]].append(hit[0])
    return ports


def dial_address(bound: Iterable[str]) -> str:
    """Where to connect to reach a server bound on these addresses: its own loopback address
    (the pod's, or 127.0.0.1), the loopback of its family when bound on every address."""
    addrs = list(bound)
    for a in addrs:
        ip = ipaddress.ip_address(a)
        if ip.version == 4 and ip.is_loopback:
            return a
    for a in addrs:
        ip = ipaddress.ip_address(a)
        if ip.is_unspecified:
            return "127.0.0.1" if ip.version == 4 else "::1"
    return addrs[0]
