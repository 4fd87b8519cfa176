"""The image's OpenSSH server, as the MPI operator's workers run it (`/usr/sbin/sshd -De`, their
command when the template gives none): the real sshd (Debian's `openssh-server`), in the pod's
namespaces, listening on the pod's address.

What the simulated image holds for it, written into each pod's own layer when its namespaces are
made (`files`), after `mpioperator/base` (kubeflow/mpi-operator `build/base/Dockerfile`): sshd on
port 2222 with `StrictModes no` (the Secret's files at `sshAuthMountPath` are checked no further),
and the client with `StrictHostKeyChecking no`, `UserKnownHostsFile /dev/null` and port 2222; plus,
simcluster's own, `ListenAddress <pod address>` (the pods share the host's network: each sshd
listens on its own pod's address only) and host keys made at pod start (ed25519 and ECDSA P-256,
`/etc/ssh/ssh_host_*_key`, 0600: a pod never serves another pod's or the host's key).

A container whose process is sshd and that has no readinessProbe turns Ready once its port
accepts a connection (`accepts`), so the operator's `launcherCreationPolicy: WaitForWorkersReady`
waits for the real thing. Where sshd cannot run as in a pod (no namespaces for the pod, or no
`/usr/sbin/sshd` on the machine), the kubelet runs `sleep infinity` in its place, said once in its
log (`stand_in`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable

SSHD = "/usr/sbin/sshd"
PORT = 2222  # mpioperator/base's sshd and ssh client
STAND_IN = ["sleep", "infinity"]
PROBE_PERIOD = 0.05


def is_sshd(argv: list[str]) -> bool:
    """The container's process is OpenSSH's server."""
    return bool(argv) and os.path.basename(argv[0]) == "sshd"


def port_of(argv: list[str]) -> int:
    """The port sshd listens on: `-p N` on its command line, else the image's."""
    for i, a in enumerate(argv[1:], 1):
        value = a[2:] if a.startswith("-p") and len(a) > 2 else argv[i + 1] if a == "-p" and i + 1 < len(argv) else ""
        if value.isdigit():
            return int(value)
    return PORT


def available() -> str:
    """Why sshd cannot run here ("" when it can)."""
    return "" if os.access(SSHD, os.X_OK) else f"{SSHD} is not installed (Debian's openssh-server)"


def host_keys() -> list[tuple[str, str, int]]:
    """Fresh host keys: (in-pod path, text, mode) for the private and public halves."""
    from cryptography.hazmat.primitives import serialization as ser
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519

    out: list[tuple[str, str, int]] = []
    for name, key in (("ed25519", ed25519.Ed25519PrivateKey.generate()), ("ecdsa", ec.generate_private_key(ec.SECP256R1()))):
        private = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.OpenSSH, ser.NoEncryption()).decode()
        public = key.public_key().public_bytes(ser.Encoding.OpenSSH, ser.PublicFormat.OpenSSH).decode()
        out += [(f"/etc/ssh/ssh_host_{name}_key", private, 0o600),
                (f"/etc/ssh/ssh_host_{name}_key.pub", f"{public} root@{name}\n", 0o644)]
    return out


def files(pod_ip: str) -> list[tuple[str, str, int]]:
    """The image's sshd and ssh configuration and the pod's host keys (in-pod path, text, mode)."""
    server = ("# simcluster: the image's sshd (mpioperator/base: port 2222, StrictModes no) on the pod's address\n"
              f"Port {PORT}\nListenAddress {pod_ip}\nStrictModes no\nPidFile none\n"
              "HostKey /etc/ssh/ssh_host_ed25519_key\nHostKey /etc/ssh/ssh_host_ecdsa_key\n")
    client = ("# simcluster: the image's ssh client (mpioperator/base)\n"
              f"Host *\n    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    Port {PORT}\n")
    return [("/etc/ssh/sshd_config.d/simcluster.conf", server, 0o644),
            ("/etc/ssh/ssh_config.d/simcluster.conf", client, 0o644), *host_keys()]


# the privilege separation directory Debian's sshd needs (made by its init script on a real system)
DIRS = [("/run/sshd", 0o755)]


async def accepts(address: str, port: int) -> bool:
    """A TCP connection to `address:port` is accepted now."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        async with asyncio.timeout(1.0):
            await loop.sock_connect(sock, (address, port))
        return True
    except (OSError, TimeoutError):
        return False
    finally:
        with contextlib.suppress(OSError):
            sock.close()


async def wait_accepting(address: str, port: int, running: Callable[[], bool]) -> bool:
    """Poll until `address:port` accepts (True) or `running()` turns false (False)."""
    while running():
        if await accepts(address, port):
            return True
        await asyncio.sleep(PROBE_PERIOD)
    return False
