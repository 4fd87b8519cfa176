"""The kubelet component: bound pods become local processes; `pods/log`; graceful deletion.

`install(sim)` sets `sim.kubelet` to one `Kubelet` controller acting for every node:

- A pod with `spec.nodeName` naming a node in the store, not terminal and not being deleted,
  gets a `PodRuntime` (`podruntime`; its status: `podstatus`): a directory
  `<workdir>/pods/<ns>_<name>_<uid>`; a pod IP from the node's `spec.podCIDR` (else
  10.244.0.0/16), `hostIP` the node's InternalIP; volumes (`podvolumes`), `/workspace` and the
  service-account files; where the kernel allows it, its own mount and UTS namespaces (`podns`:
  its volumes at their mount paths, e.g. `/etc/mpi/hostfile`, its name as hostname, HOME `/root`),
  else the host's view with that directory as HOME and absolute paths under volume mount paths
  rewritten into it (`OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile` becomes
  `<root>/etc/mpi/hostfile`); environment (`podenv`: downward API, ConfigMap/Secret refs,
  `envFrom`, `$(VAR)` expansion; the simulated launchers of `simcluster.node.launchers`, installed
  once in `<workdir>/bin`, first on PATH); init containers in order, then every container as a
  real process; status written through the store.
- Pods that arrive already carrying container statuses (scenario data such as the `scale`
  scenario's 20,000 pods, "no process backs any of the pods") are left alone, as are terminal
  pods the kubelet never ran and pods annotated `simcluster.ranks/in-process: "true"`.
- Declared `containerPort`s are registered in the proxy's PortMap as `127.0.0.1:<port>` (the
  processes listen on the host), so `pods/proxy` and `services/proxy` reach them.
- Deleting a pod through the API is graceful for pods with a runtime: a `server.delete_hooks`
  hook marks it deleting (`deletionTimestamp`, grace from DeleteOptions or
  `spec.terminationGracePeriodSeconds`, default 30; 0 deletes at once), the kubelet sends SIGTERM
  to each container's first process as a runtime sends it to PID 1 (dropped unless the process
  handles SIGTERM: a PID 1 ignores default-action signals, so `sleep infinity` or `sh -c` run
  until the grace period ends), SIGKILL to every process group of the pod after the grace
  period, writes the final status and removes the pod from the store. Terminal pods are removed at once. A pod removed from the store
  by other means (cascade, namespace deletion) has its processes stopped the same way.
- `sim.stop()` stops every process (SIGTERM, then SIGKILL after `shutdown_grace`) and waits, then
  the pods' namespace holders. If simcluster is killed outright, the reaper
  (`simcluster.node.reaper`) kills what is left.
- Nodes: a node without a `Ready` condition gets `Ready=True`, one without an InternalIP gets one.
- `pods/log`: see `podlogs`; `rotate_log(ns, pod, container)` rotates a running container's log
  file as the kubelet's container log manager does (tests and admins).

Tunables (attributes of `Kubelet`, also accepted as keyword arguments of `install`):
`backoff_base` (10 s) and `backoff_max` (300 s) of CrashLoopBackOff,
`events` (record kubelet Events), `read_pause` and `flush_interval` of log capture,
`shutdown_grace`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..apiserver.errors import ApiError
from ..apiserver.store import Event, now_rfc3339, shortened_deletion
from ..controllers.base import Controller
from . import attach, ephemeral, podnet
from .launchers import PodView, install_pod
from .launchers import install as install_launchers
from .podaddr import AddressBlock, namespace_names
from .podlogs import serve_pod_log
from .podns import PodNamespaces, wanted
from .podruntime import PodRuntime
from .procfs import ProcessTable
from .reaper import Reaper

if TYPE_CHECKING:
    from ..apiserver.resources import ResourceType
    from ..cluster import SimCluster

log = logging.getLogger("simcluster.kubelet")

PODS = ("", "pods")
NODES = ("", "nodes")
SERVICES = ("", "services")
DEFAULT_POD_CIDR = "10.244.0.0/16"
NODE_IP_CIDR = "172.18.0.0/16"
IN_PROCESS = "simcluster.ranks/in-process"  # served by simcluster itself (dcgm, prometheus): no process


class IPPool:
    """Addresses from CIDRs (a node's podCIDR, or a default), skipping network and gateway."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self._next: dict[str, int] = {}

    def allocate(self, cidr: str | None, default: str = DEFAULT_POD_CIDR) -> str:
        try:
            net = ipaddress.ip_network(cidr or default, strict=False)
        except ValueError:
            net = ipaddress.ip_network(default)
        key = str(net)
        size = net.num_addresses
        n = self._next.get(key, 2)
        for _ in range(max(0, size - 3)):
            if n >= size - 1:
                n = 2
            ip = str(net.network_address + n)
            n += 1
            if ip not in self.used:
                self.used.add(ip)
                self._next[key] = n
                return ip
        if key != str(ipaddress.ip_network(default)):
            return self.allocate(default, default)
        return str(net.network_address + 2)

    def release(self, ip: str) -> None:
        self.used.discard(ip)


class Kubelet(Controller):
    name = "kubelet"
    watches = (PODS, NODES, SERVICES)

    def __init__(
        self,
        sim: SimCluster,
        *,
        backoff_base: float = 10.0,
        backoff_max: float = 300.0,
        events: bool = True,
        read_pause: float = 0.02,
        flush_interval: float = 0.025,
        shutdown_grace: float = 1.0,
    ) -> None:
        super().__init__(sim)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.events = events
        self.read_pause = read_pause
        self.flush_interval = flush_interval
        self.shutdown_grace = shutdown_grace
        self.runtimes: dict[tuple[str, str], PodRuntime] = {}
        self.foreign: set[str] = set()
        self.reaper = Reaper()
        self.proc_table = ProcessTable()
        self.pod_ips = IPPool()  # the node's podCIDR: where no loopback block can be leased
        self.addresses = AddressBlock()  # pods' own loopback addresses (`podaddr`)
        self.node_ips = IPPool()
        self.stopping = False
        self.bin_dir: Path | None = None  # the simulated launchers, first on the PATH of pods in the host's view
        self.pod_view: PodView | None = None  # the same, as pods with a mount namespace see them
        self.podns: PodNamespaces | None = None  # pods' mount and UTS namespaces (None: off)
        self.podnet: podnet.PodNetwork | None = None  # pods' own 0.0.0.0 and localhost (None: off)
        self._node_waiters: dict[str, set[tuple[str, str]]] = {}
        self._disposing: set[asyncio.Task[None]] = set()
        self._noted: set[str] = set()
        self._hosts_here: dict[str, int] = {}  # namespace -> pods running here (whose /etc/hosts to keep)

    # -- API for other components ------------------------------------------------------------------
    def runtime(self, namespace: str, pod: str) -> PodRuntime | None:
        """The pod's runtime here, or None (not bound to a node, foreign, or gone)."""
        rt = self.runtimes.get((namespace, pod))
        return None if rt is None or rt.removed else rt

    def runtimes_on(self, node: str) -> list[PodRuntime]:
        return [rt for rt in self.runtimes.values() if rt.node == node and not rt.removed]

    def rotate_log(self, namespace: str, pod: str, container: str) -> Path | None:
        """Rotate a running container's log file now, as the container log manager does when it
        passes containerLogMaxSize (`podlogs.LogWriter.rotate`): the rotated file, or None when
        the pod or its container is not running here."""
        rt = self.runtime(namespace, pod)
        if rt is None or not rt.is_running(container):
            return None
        try:
            writer = rt.log_writer(container, False)
        except ApiError:
            return None
        return writer.rotate()

    # -- controller --------------------------------------------------------------------------------
    def initial_keys(self) -> Iterable[tuple[Any, ...]]:
        for st in self.store.items(NODES):
            yield ("node", st.obj["metadata"]["name"])
        for st in self.store.items(PODS):
            if (st.obj.get("spec") or {}).get("nodeName"):
                yield ("pod", st.obj["metadata"].get("namespace", ""), st.obj["metadata"]["name"])

    def keys_for(self, ev: Event) -> Iterable[tuple[Any, ...]]:
        meta = ev.obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        names = ev.tkey == SERVICES or (ev.tkey == PODS and (ev.obj.get("status") or {}).get("podIP"))
        if names and self._hosts_here.get(ns):  # a pod here resolves the namespace's names (`podaddr`)
            yield ("hosts", ns)
        if ev.tkey == SERVICES:
            return
        if ev.tkey == PODS:
            key = (ns, meta.get("name", ""))
            if key in self.runtimes or (ev.obj.get("spec") or {}).get("nodeName"):
                yield ("pod", *key)
            return
        name = meta.get("name", "")
        if ev.type != "DELETED":
            yield ("node", name)
            for key in self._node_waiters.pop(name, ()):
                yield ("pod", *key)

    async def reconcile(self, key: tuple[Any, ...]) -> None:
        if self.stopping:
            return
        if key[0] == "node":
            self._sync_node(key[1])
            return
        if key[0] == "hosts":
            self._sync_hosts(key[1])
            return
        _, ns, name = key
        st = self.store.find(PODS, ns, name)
        rt = self.runtimes.get((ns, name))
        if rt is not None and (st is None or st.obj["metadata"].get("uid") != rt.uid):
            self._forget(rt)
            rt = None
        if st is None:
            return
        pod = st.obj
        meta = pod["metadata"]
        spec = pod.get("spec") or {}
        if rt is not None:
            rt.pod = pod
            if meta.get("deletionTimestamp"):
                grace = meta.get("deletionGracePeriodSeconds")
                if grace is None:
                    grace = spec.get("terminationGracePeriodSeconds", 30)
                rt.terminate(_seconds(grace, 30.0))
            return
        uid = meta.get("uid", "")
        node_name = spec.get("nodeName")
        if not node_name or uid in self.foreign or meta.get("deletionTimestamp"):
            return
        status = pod.get("status") or {}
        if (status.get("containerStatuses") or status.get("phase") in ("Succeeded", "Failed")
                or (meta.get("annotations") or {}).get(IN_PROCESS) == "true"):
            self.foreign.add(uid)
            return
        node = self.store.find(NODES, "", node_name)
        if node is None:
            self._node_waiters.setdefault(node_name, set()).add((ns, name))
            return
        ip = self.addresses.allocate() or self.pod_ips.allocate((node.obj.get("spec") or {}).get("podCIDR"))
        try:
            rt = PodRuntime(self, pod, node.obj, ip)
        except Exception:  # a pod the kubelet cannot even read: leave it alone
            log.exception("kubelet: cannot run pod %s/%s", ns, name)
            self._release_ip(ip)
            self.foreign.add(uid)
            return
        if self.podnet is not None and self.addresses.owns(ip):
            try:
                rt.cgroup = self.podnet.join(uid, ip)
            except OSError as exc:
                self.note_once("podnet", f"kubelet: pod {ns}/{name} shares 0.0.0.0 with the machine, as does any "
                                          f"other whose cgroup cannot be made (its bind/connect programs: {exc})")
        self.runtimes[(ns, name)] = rt
        self._hosts_here[ns] = self._hosts_here.get(ns, 0) + 1
        rt.start()

    def _release_ip(self, ip: str) -> None:
        if self.addresses.owns(ip):
            self.addresses.release(ip)
        else:
            self.pod_ips.release(ip)

    def _sync_hosts(self, ns: str) -> None:
        """Every running pod of namespace `ns` gets the namespace's names in its /etc/hosts (`podaddr`)."""
        here = [rt for rt in self.runtimes.values() if rt.namespace == ns and not rt.removed and rt.holder is not None]
        if not here:
            return
        names = namespace_names(ns, (st.obj for st in self.store.items(PODS, ns)),
                                (st.obj for st in self.store.items(SERVICES, ns)))
        for rt in here:
            rt.sandbox.write_hosts(names)

    def _sync_node(self, name: str) -> None:
        st = self.store.find(NODES, "", name)
        if st is None:
            return
        status = st.obj.get("status") or {}
        has_ready = any(c.get("type") == "Ready" for c in status.get("conditions") or ())
        has_ip = any(a.get("type") == "InternalIP" for a in status.get("addresses") or ())
        if has_ready and has_ip:
            return
        rt = self.sim.registry.get("", "v1", "nodes")
        assert rt is not None
        now = now_rfc3339()
        ip = "" if has_ip else self.node_ips.allocate(NODE_IP_CIDR, NODE_IP_CIDR)

        def fn(obj: dict[str, Any]) -> None:
            s = obj.setdefault("status", {})
            if not has_ready:
                s.setdefault("conditions", []).append({
                    "type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now, "lastTransitionTime": now,
                })
            if not has_ip:
                addrs = s.setdefault("addresses", [])
                addrs.insert(0, {"type": "InternalIP", "address": ip})
                if not any(a.get("type") == "Hostname" for a in addrs):
                    addrs.append({"type": "Hostname", "address": name})

        with contextlib.suppress(ApiError):
            self.store.mutate(rt, "", name, fn)

    # -- deletion ----------------------------------------------------------------------------------
    def delete_hook(self, rtype: ResourceType, obj: dict[str, Any], grace: int | None) -> bool:
        """`server.delete_hooks`: graceful deletion of pods that run here."""
        if rtype.key != PODS or self.stopping:
            return False
        meta = obj["metadata"]
        ns, name = meta.get("namespace", ""), meta["name"]
        r = self.runtimes.get((ns, name))
        if r is None or r.removed or r.uid != meta.get("uid"):
            return False
        if r.finished and not r.terminating:
            return False  # terminal pods are deleted at once
        spec_grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds")
        g = int(_seconds(spec_grace, 30.0)) if grace is None else int(grace)
        if g <= 0:
            r.forced = True
            return False
        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds")
            if current is None or g < int(current):
                def shorten(o: dict[str, Any]) -> None:
                    o["metadata"]["deletionTimestamp"] = shortened_deletion(o["metadata"], g)
                    o["metadata"]["deletionGracePeriodSeconds"] = g

                self.store.mutate(rtype, ns, name, shorten)
                r.terminate(g)
            return True
        self.store.mark_deleting(rtype, ns, name, g)
        return True

    def note_once(self, key: str, message: str) -> None:
        """`NodeServices.note_once`: a warning in the log, once per key."""
        if key not in self._noted:
            self._noted.add(key)
            log.warning("%s", message)

    def pod_terminated(self, rt: PodRuntime) -> None:
        """Graceful termination finished: the kubelet's final delete."""
        st = self.store.find(PODS, rt.namespace, rt.name)
        if st is None or st.obj["metadata"].get("uid") != rt.uid:
            return
        prt = self.sim.registry.get("", "v1", "pods")
        assert prt is not None
        with contextlib.suppress(ApiError):
            self.store.remove(prt, rt.namespace, rt.name)

    def _forget(self, rt: PodRuntime) -> None:
        if self.runtimes.get((rt.namespace, rt.name)) is rt:
            del self.runtimes[(rt.namespace, rt.name)]
        rt.removed = True
        rt.unregister_ports()
        self._release_ip(rt.pod_ip)
        left = self._hosts_here.get(rt.namespace, 0) - 1
        if left > 0:
            self._hosts_here[rt.namespace] = left
        else:
            self._hosts_here.pop(rt.namespace, None)
        task = asyncio.get_running_loop().create_task(self._dispose(rt))
        self._disposing.add(task)
        task.add_done_callback(self._disposing.discard)

    async def _dispose(self, rt: PodRuntime) -> None:
        spec = rt.pod.get("spec") or {}
        meta = rt.pod.get("metadata") or {}
        if rt.forced:
            grace = 0.0
        elif meta.get("deletionGracePeriodSeconds") is not None:
            grace = _seconds(meta["deletionGracePeriodSeconds"], 30.0)
        else:
            grace = _seconds(spec.get("terminationGracePeriodSeconds", 30), 30.0)
        try:
            await rt.kill_now(grace)
        finally:
            await asyncio.get_running_loop().run_in_executor(None, rt.cleanup_files)
            await self._leave_network(rt)

    async def _leave_network(self, rt: PodRuntime) -> None:
        """Remove the pod's cgroup once the last of its processes is reaped (`podnet`; what is
        still busy after 10 s goes when the kubelet stops)."""
        if self.podnet is None or rt.cgroup is None:
            return
        for _ in range(40):
            if self.podnet.leave(rt.uid):
                return
            await asyncio.sleep(0.25)

    async def shutdown(self) -> None:
        """`sim.on_stop`: stop every process of every pod and wait for them."""
        self.stopping = True
        rts = list(self.runtimes.values())
        await asyncio.gather(*(rt.kill_now(self.shutdown_grace) for rt in rts), return_exceptions=True)
        for task in list(self._disposing):
            task.cancel()
        for task in list(self._disposing):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.podns is not None:
            self.podns.close()
        if self.podnet is not None:
            self.podnet.close()
        self.reaper.close()
        self.addresses.close()


def _seconds(value: Any, default: float) -> float:
    try:
        return max(0.0, float(value))
    except (TypeError, ValueError):
        return default


def install(sim: SimCluster, **options: Any) -> Kubelet:
    kubelet = Kubelet(sim, **options)
    kubelet.reaper.start()
    kubelet.addresses.lease()
    try:
        kubelet.bin_dir = install_launchers(sim.workdir / "bin")
        kubelet.pod_view = install_pod(sim.workdir / "podbin")
    except OSError as exc:
        log.warning("kubelet: cannot install the simulated launchers: %s", exc)
    if wanted(sim.pod_namespaces):
        kubelet.podns = PodNamespaces(sim.workdir, ("/tmp", sim.workdir), reaper=kubelet.reaper)
        kubelet.podns.start()
    if kubelet.addresses.block is not None and podnet.wanted():
        loopback_api = sim.host in ("127.0.0.1", "localhost", "0.0.0.0", "")
        net = podnet.PodNetwork(api_ports=(sim.port,) if loopback_api else ())
        kubelet.podnet = net if net.start() else None
    sim.kubelet = kubelet
    sim.server.subresources["pods/log"] = functools.partial(serve_pod_log, kubelet)
    ephemeral.install(sim)  # (pods/ephemeralcontainers: kubectl debug --target)
    attach.install(sim)  # (pods/attach: kubectl debug -it, kubectl attach)
    sim.server.delete_hooks.append(kubelet.delete_hook)
    sim.on_stop(kubelet.shutdown)
    sim.add_controller(kubelet)
    return kubelet
