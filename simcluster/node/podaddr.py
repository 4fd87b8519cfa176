"""Pod addresses that answer, and the names pods resolve (simulation of the pod network and of
cluster DNS).

Addresses: every pod the kubelet runs gets its own address on the loopback range, which Linux
routes whole to `lo` (`127.0.0.0/8`), so a server in a pod can bind its pod's address and be
reached there from any other pod, and the same port in two pods never collides. Each kubelet
leases a block `127.<b>.0.0/16` of its own for its lifetime (an exclusive `flock` on
`<tmp>/simcluster-podaddr/127.<b>.lock`: two clusters on one machine, in one process or in
several, never hand out the same address; the lease ends with the process; the directory is
1733, the empty lock files 0600: a block whose lock file another user made is left to them), and hands out
`127.<b>.<x>.<y>` (`y` 2..254), each reused only after its pod is gone and the rest of the block
has been used. Where no block can be leased (every one taken, or no writable temporary directory),
pods get the node's podCIDR addresses as before (nothing listens there), said once in the log.

Names: where a pod has its own mount namespace, its `/etc/hosts` (`hosts_file`) carries what a
pod resolves on a real cluster through the kubelet's hosts file and cluster DNS, for the pods of
its namespace that have an address: its own hostname; every pod with a `hostname` and a
`subdomain` naming a headless Service of the namespace as `<hostname>.<subdomain>.<ns>.svc.cluster.local`,
`<hostname>.<subdomain>.<ns>.svc` (the MPI operator's hostfile), `<hostname>.<subdomain>.<ns>` and
`<hostname>.<subdomain>` (the search path `<ns>.svc.cluster.local`); every headless Service
(`clusterIP: None`) with a selector as `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc[.cluster.local]`,
one line per ready pod it selects (every pod not being deleted with `publishNotReadyAddresses`),
as its DNS A records. The kubelet rewrites it whenever those change (`Kubelet._sync_hosts`).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger("simcluster.kubelet")

LEASE_DIR = "simcluster-podaddr"
LEASE_DIR_MODE = 0o1733  # every user may lease there (create, search), none may list it; sticky
FIRST_BLOCK = 16  # 127.0/16 .. 127.15/16 left alone (127.0.0.1, 127.0.1.1 and other local uses)
CLUSTER_DOMAIN = "cluster.local"
HEADER = ("# Kubernetes-managed hosts file (simcluster: pod addresses on the loopback range; "
          "the namespace's pods and headless services as cluster DNS would answer).\n"
          "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\n"
          "fe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")


class AddressBlock:
    """The kubelet's lease of `127.<b>.0.0/16` (see the module docstring)."""

    def __init__(self, lease_dir: str | None = None) -> None:
        self.lease_dir = lease_dir or os.path.join(tempfile.gettempdir(), LEASE_DIR)
        self.block: int | None = None
        self.used: set[str] = set()
        self._fd: int | None = None
        self._next = 0

    def lease(self) -> bool:
        """Take a block (True), or say why not once (False)."""
        if self._fd is not None:
            return True
        try:  # (a drop box every user can lease in and none can list: 1733; the locks 0600, empty)
            os.makedirs(self.lease_dir, mode=0o700, exist_ok=True)
            st = os.stat(self.lease_dir)
            if st.st_uid == os.getuid() and st.st_mode & 0o7777 != LEASE_DIR_MODE:
                os.chmod(self.lease_dir, LEASE_DIR_MODE)
        except OSError as exc:
            log.warning("kubelet: pod addresses from the podCIDR (nothing answers there): %s", exc)
            return False
        start = FIRST_BLOCK + os.getpid() % (255 - FIRST_BLOCK)  # spread: fewer tries when busy
        for i in range(255 - FIRST_BLOCK):
            b = FIRST_BLOCK + (start - FIRST_BLOCK + i) % (255 - FIRST_BLOCK)
            try:
                fd = os.open(os.path.join(self.lease_dir, f"127.{b}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError:  # (another user's lock file: that block may be theirs)
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self._fd, self.block = fd, b
            log.info("kubelet: pod addresses 127.%d.0.0/16", b)
            return True
        log.warning("kubelet: pod addresses from the podCIDR (nothing answers there): every loopback block "
                    "127.%d-254.0.0/16 is leased by another simcluster", FIRST_BLOCK)
        return False

    def allocate(self) -> str | None:
        """The next free address of the block (None: no block, or all 64,008 in use)."""
        if self.block is None:
            return None
        for _ in range(256 * 253):
            n, self._next = self._next, (self._next + 1) % (256 * 253)
            ip = f"127.{self.block}.{n // 253}.{n % 253 + 2}"
            if ip not in self.used:
                self.used.add(ip)
                return ip
        return None

    def owns(self, ip: str) -> bool:
        return self.block is not None and ip.startswith(f"127.{self.block}.")

    def release(self, ip: str) -> None:
        self.used.discard(ip)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # the lock goes with it


def is_pod_address(ip: str) -> bool:
    """A pod address of this scheme (loopback, outside the blocks left alone)."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return False
    return addr.version == 4 and addr.is_loopback and int(ip.split(".")[1]) >= FIRST_BLOCK


def _selects(selector: Mapping[str, Any], labels: Mapping[str, Any] | None) -> bool:
    labels = labels or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _ready(pod: Mapping[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or ()
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def _ip(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("podIP") or "")


def namespace_names(namespace: str, pods: Iterable[Mapping[str, Any]],
                    services: Iterable[Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """(address, names) lines for the namespace's pods and headless services (module docstring)."""
    pods = [p for p in pods if _ip(p) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    headless = [s for s in services if (s.get("spec") or {}).get("clusterIP") == "None"]
    subdomains = {str(s["metadata"]["name"]) for s in headless}
    lines: list[tuple[str, list[str]]] = []
    for p in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
        spec = p.get("spec") or {}
        host, sub = str(spec.get("hostname") or ""), str(spec.get("subdomain") or "")
        if host and sub in subdomains:
            fq = f"{host}.{sub}.{namespace}"
            lines.append((_ip(p), [f"{fq}.svc.{CLUSTER_DOMAIN}", f"{fq}.svc", fq, f"{host}.{sub}"]))
    for s in sorted(headless, key=lambda s: str(s["metadata"]["name"])):
        spec = s.get("spec") or {}
        selector = spec.get("selector")
        if not isinstance(selector, dict) or not selector:
            continue
        name = str(s["metadata"]["name"])
        names = [f"{name}.{namespace}.svc.{CLUSTER_DOMAIN}", f"{name}.{namespace}.svc", f"{name}.{namespace}", name]
        for p in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
            if not _selects(selector, p["metadata"].get("labels")):
                continue
            if _ready(p) or (spec.get("publishNotReadyAddresses") and not p["metadata"].get("deletionTimestamp")):
                lines.append((_ip(p), names))
    return lines


def hosts_file(own_ip: str, hostname: str, fqdn: str, names: Iterable[tuple[str, list[str]]]) -> str:
    """The pod's /etc/hosts: the usual header, its own address and names, then the namespace's."""
    own = f"{fqdn}\t{hostname}" if fqdn else hostname
    body = "".join(f"{ip}\t{' '.join(n)}\n" for ip, n in names)
    return f"{HEADER}{own_ip}\t{own}\n" + ("# the namespace's pods and headless services\n" + body if body else "")
