"""DCGM exporters for simcluster's GPU nodes, served in-process (one port per node).

For every node with ``nvidia.com/gpu`` capacity, a controller keeps:

- an HTTP listener on ``sim.host`` (its own port) serving ``/metrics`` in the Prometheus text
  format, with the DCGM exporter's metric names and labels (conventions §5.1–5.3);
- an exporter Pod ``gpu-operator/nvidia-dcgm-exporter-<5 chars>`` bound to the node, Running and
  Ready, annotated ``simcluster.ranks/in-process: "true"`` (no process: the kubelet and the
  scheduler must leave it alone), with its container port 9400 registered in ``sim.portmap`` so
  the pod and service proxies reach the listener;
- the Service ``gpu-operator/nvidia-dcgm-exporter`` (port ``gpu-metrics`` 9400, selector
  ``app=nvidia-dcgm-exporter``, annotated ``prometheus.io/scrape: "true"``).

GPU assignment: the device table the kubelet fills as it starts containers (`simcluster.node.devices`:
the first free GPU indexes, kept until the pod ends, given to the container as
``NVIDIA_VISIBLE_DEVICES``); a Running pod no kubelet started gets the first free indexes here, in
(namespace, name, container) order.
Readings per GPU (see `simcluster.gpu.profiles` for the annotations):

- utilisation: the ``simcluster.ranks/gpu-util`` profile, else the pod's real CPU use (utime+stime
  of its processes from ``/proc``, between samples at least 0.5 s apart): one busy core per GPU
  reads 100 %, an idle ``sleep`` reads 0;
- framebuffer used: ``simcluster.ranks/gpu-mem-mib``, else 512 MiB + 85 % of the rest scaled by
  utilisation for an assigned GPU, 0 for an idle one; free = total − used;
- power, temperatures, clocks, clock-event reasons, engine ratios: plausible functions of
  utilisation (`simcluster.gpu.readings`: hot GPUs slow their clocks; MIG devices; a node's
  exporter with only the default counters, or without the pod labels);
- XID: ``simcluster.ranks/gpu-xid`` (``CODE[@SECONDS][;VAR=VALUE]``: only for the pods whose
  container has that environment variable, e.g. ``RANK=2``), else 0.

``sim.dcgm.targets()`` gives ``[(node, host, port)]`` for scrape configs.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..apiserver.store import Event, now_rfc3339
from ..apiserver.validation import default
from ..controllers.base import Controller, Key
from ..node import devices, proxy
from ..node.devices import container_gpus
from ..node.kubelet import IN_PROCESS
from ..node.procfs import cpu_times, uptime
from . import profiles as gp
from . import readings as rd

if TYPE_CHECKING:
    from ..cluster import SimCluster

log = logging.getLogger("simcluster.dcgm")

NAMESPACE = "gpu-operator"
SERVICE = "nvidia-dcgm-exporter"
APP = "nvidia-dcgm-exporter"
CONTAINER = "nvidia-dcgm-exporter"
PORT = 9400
PORT_NAME = "gpu-metrics"
IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"
DRIVER_VERSION = "550.54.15"
GPU_RESOURCE = "nvidia.com/gpu"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MIN_SAMPLE = 0.5  # seconds between two CPU samples of one pod


@dataclass(frozen=True)
class GpuModel:
    name: str
    total_mib: int
    idle_w: float
    max_w: float
    sm_clock: int
    mem_clock: int


MODELS: dict[str, GpuModel] = {
    "NVIDIA-H100-80GB-HBM3": GpuModel("NVIDIA H100 80GB HBM3", 81559, 68.0, 700.0, 1980, 2619),
    "NVIDIA-A100-SXM4-80GB": GpuModel("NVIDIA A100-SXM4-80GB", 81920, 58.0, 400.0, 1410, 1593),
}
DEFAULT_PRODUCT = "NVIDIA-A100-SXM4-80GB"
# A DGX-like PCI layout for the first eight GPUs.
PCI_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)

# (name, type, help) in the order the exporter's default-counters.csv lists them.
METRICS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
     "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active sending or receiving data."),
)


# -- CPU sampling ----------------------------------------------------------------------------------


def cpu_seconds(pids: Iterable[int]) -> tuple[float, float | None]:
    """(total CPU seconds of the live `pids`, the earliest start time after boot or None)."""
    total = 0.0
    earliest: float | None = None
    for pid in pids:
        got = cpu_times(pid)
        if got is None:
            continue
        total += got[0]
        earliest = got[1] if earliest is None else min(earliest, got[1])
    return total, earliest


@dataclass
class CpuSample:
    at: float  # monotonic
    cpu: float
    cores: float


class CpuSampler:
    """CPU cores a pod used, per pod uid, measured between successive samples."""

    def __init__(self) -> None:
        self._last: dict[str, CpuSample] = {}

    def cores(self, uid: str, pids: list[int]) -> float:
        now = time.monotonic()
        prev = self._last.get(uid)
        if prev is not None and now - prev.at < MIN_SAMPLE:
            return prev.cores
        cpu, started = cpu_seconds(pids)
        if prev is None:
            # First sample: the average since the oldest process started, once that is long
            # enough to mean something (a just-exec'd `sleep` would read its start-up as load).
            span = uptime() - started if started is not None else 0.0
            cores = cpu / span if span >= 1.0 else 0.0
        else:
            cores = max(0.0, cpu - prev.cpu) / max(1e-6, now - prev.at)
        self._last[uid] = CpuSample(now, cpu, cores)
        return cores

    def forget(self, uid: str) -> None:
        self._last.pop(uid, None)


# -- per-node state --------------------------------------------------------------------------------


@dataclass
class Assignment:
    uid: str
    namespace: str
    pod: str
    container: str
    gpus: list[int]


@dataclass
class NodeExporter:
    node: str
    host: str
    port: int
    site: web.SockSite | None
    pod_name: str = ""
    product: str = DEFAULT_PRODUCT
    model: GpuModel = MODELS[DEFAULT_PRODUCT]
    gpus: int = 0
    assigned: dict[int, Assignment] = field(default_factory=dict)  # gpu index -> assignment
    energy_mj: dict[int, float] = field(default_factory=dict)
    last_scrape: float = 0.0
    layout: rd.Layout = field(default_factory=rd.Layout)
    hot: frozenset[int] = frozenset()  # physical GPUs that run hot (`readings.HOT_LABEL`)

    def gpu_uuid(self, index: int) -> str:
        return devices.gpu_uuid(self.node, index)

    def device_mib(self) -> int:
        """The framebuffer of one device (a MIG instance has its share of its GPU's)."""
        return self.model.total_mib // self.layout.mig_per_gpu

    def label_uuid(self, index: int) -> str:
        """The `UUID` label of device `index`: its physical GPU's (a MIG instance's parent)."""
        return devices.gpu_uuid(self.node, self.layout.device(index)[0])

    def pci_bus_id(self, index: int) -> str:
        bus = PCI_BUSES[index] if index < len(PCI_BUSES) else 0x10 + index * 0x10 % 0xF0
        domain = index // 256
        return f"{domain:08X}:{bus:02X}:00.0"


def gpu_count(node: dict[str, Any]) -> int:
    cap = (node.get("status") or {}).get("capacity") or {}
    try:
        return max(0, int(str(cap.get(GPU_RESOURCE, "0"))))
    except ValueError:
        return 0


def model_for(node: dict[str, Any]) -> tuple[str, GpuModel]:
    labels = node["metadata"].get("labels") or {}
    product = labels.get("nvidia.com/gpu.product") or DEFAULT_PRODUCT
    model = MODELS.get(product)
    if model is None:
        try:
            total = int(labels.get("nvidia.com/gpu.memory", "81920"))
        except ValueError:
            total = 81920
        model = GpuModel(product.replace("-", " "), total, 60.0, 400.0, 1410, 1593)
    return product, model


def _parse_time(ts: Any) -> float | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(UTC).timestamp()
    except ValueError:
        return None


def _started_at(pod: dict[str, Any], container: str) -> float | None:
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or ():
        if cs.get("name") == container:
            t = _parse_time(((cs.get("state") or {}).get("running") or {}).get("startedAt"))
            if t is not None:
                return t
    return _parse_time(status.get("startTime"))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt_float(v: float) -> str:
    return f"{v:.6f}"


@dataclass
class GpuReading:
    util: float
    fb_used: int
    xid: int


class Dcgm:
    """The exporters of all GPU nodes: listeners, API objects, readings. ``sim.dcgm``."""

    def __init__(self, sim: SimCluster) -> None:
        self.sim = sim
        self.store = sim.store
        self.host = sim.host if sim.host not in ("0.0.0.0", "") else "127.0.0.1"
        self.exporters: dict[str, NodeExporter] = {}
        self._by_port: dict[int, NodeExporter] = {}
        self._runner: web.AppRunner | None = None
        self.sampler = CpuSampler()
        self._first_seen: dict[str, float] = {}  # pod uid -> wall time its GPUs were assigned
        self._bad_profiles: set[tuple[str, str]] = set()

    # -- public ------------------------------------------------------------------------------
    def targets(self) -> list[tuple[str, str, int]]:
        """(node, host, port) of every exporter, sorted by node."""
        return sorted((e.node, e.host, e.port) for e in self.exporters.values() if e.site is not None)

    def exporter_pods(self) -> dict[str, str]:
        """node -> exporter pod name (namespace `gpu-operator`)."""
        return {n: e.pod_name for n, e in sorted(self.exporters.items())}

    def assignments(self, node: str) -> dict[int, tuple[str, str, str]]:
        """gpu index -> (namespace, pod, container) on `node`."""
        exp = self.exporters.get(node)
        if exp is None:
            return {}
        return {i: (a.namespace, a.pod, a.container) for i, a in sorted(exp.assigned.items())}

    # -- listeners ---------------------------------------------------------------------------
    async def _ensure_runner(self) -> web.AppRunner:
        if self._runner is None:
            app = web.Application()
            app.router.add_get("/metrics", self._handle_metrics)
            app.router.add_get("/health", self._handle_health)
            runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.2)
            await runner.setup()
            self._runner = runner
        return self._runner

    async def _open(self, node: str) -> NodeExporter:
        runner = await self._ensure_runner()
        site: web.SockSite | None = None
        port = 0
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, 0))
            port = sock.getsockname()[1]
            site = web.SockSite(runner, sock, backlog=128)
            await site.start()
        except OSError as exc:
            log.warning("dcgm: cannot listen for node %s: %s", node, exc)
            site = None
        exp = NodeExporter(node, self.host, port, site)
        self.exporters[node] = exp
        if site is not None:
            self._by_port[port] = exp
        return exp

    async def _close(self, exp: NodeExporter) -> None:
        self._by_port.pop(exp.port, None)
        self.exporters.pop(exp.node, None)
        if exp.site is not None:
            with contextlib.suppress(Exception):
                await exp.site.stop()
            exp.site = None

    async def close(self) -> None:
        for exp in list(self.exporters.values()):
            await self._close(exp)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle_health(self, request: web.Request) -> web.Response:
        return web.Response(text="OK")

    async def _handle_metrics(self, request: web.Request) -> web.Response:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        exp = self._by_port.get(sockname[1]) if sockname else None
        if exp is None:
            return web.Response(status=404, text="no exporter on this port\n")
        return web.Response(body=self.render(exp.node).encode(), headers={"Content-Type": CONTENT_TYPE})

    # -- readings ----------------------------------------------------------------------------
    def _profile(self, pod: dict[str, Any], key: str) -> gp.Profile | None:
        text = (pod["metadata"].get("annotations") or {}).get(key)
        if text is None or not gp.scripted(pod["metadata"]):
            return None
        try:
            return gp.parse_profile(text)
        except gp.ProfileError as exc:
            mark = (pod["metadata"].get("uid", ""), key)
            if mark not in self._bad_profiles:
                self._bad_profiles.add(mark)
                log.warning("dcgm: pod %s/%s: bad %s annotation: %s", pod["metadata"].get("namespace"),
                            pod["metadata"].get("name"), key, exc)
            return None

    def _cpu_util(self, pod: dict[str, Any], gpus_in_pod: int) -> float:
        kubelet = self.sim.kubelet
        if kubelet is None:
            return 0.0
        meta = pod["metadata"]
        try:
            rt = kubelet.runtime(meta.get("namespace", ""), meta["name"])
            pids = list(rt.pids()) if rt is not None else []
        except Exception:  # the kubelet's view is best-effort here
            log.debug("dcgm: no runtime for %s/%s", meta.get("namespace"), meta.get("name"), exc_info=True)
            pids = []
        if not pids:
            return 0.0
        cores = self.sampler.cores(meta.get("uid", meta["name"]), pids)
        return max(0.0, min(100.0, 100.0 * cores / max(1, gpus_in_pod)))

    def _reading(self, exp: NodeExporter, index: int, now: float) -> tuple[GpuReading, Assignment | None]:
        a = exp.assigned.get(index)
        pod_st = self.store.find(("", "pods"), a.namespace, a.pod) if a else None
        if a is None or pod_st is None or pod_st.obj["metadata"].get("uid") != a.uid:
            return GpuReading(0.0, 0, 0), None
        pod = pod_st.obj
        ordinal = a.gpus.index(index) if index in a.gpus else 0
        pod_gpus = self._pod_gpu_total(exp, a.uid)
        started = _started_at(pod, a.container) or self._first_seen.get(a.uid) or now
        t = max(0.0, now - started)
        seed = gp.seed_of(a.uid, a.container)
        prof = self._profile(pod, gp.ANNOTATION_UTIL)
        util = prof.value(t, ordinal, seed) if prof is not None else self._cpu_util(pod, pod_gpus)
        util = max(0.0, min(100.0, util))
        total = exp.device_mib()
        mprof = self._profile(pod, gp.ANNOTATION_MEM)
        if mprof is not None:
            used = round(mprof.value(t, ordinal, seed))
        else:
            used = round(512 + (total - 512) * 0.85 * util / 100.0)
        used = max(0, min(total, used))
        xid = 0
        xid_text = (pod["metadata"].get("annotations") or {}).get(gp.ANNOTATION_XID)
        if xid_text is not None and gp.scripted(pod["metadata"]):
            xid_text, applies = rd.xid_applies(xid_text, rd.container_env(pod, a.container))
            xid_text = xid_text if applies else "0"
            try:
                xid = gp.xid_value(xid_text, t)
            except gp.ProfileError:
                xid = 0
        return GpuReading(util, used, xid), a

    @staticmethod
    def _pod_gpu_total(exp: NodeExporter, uid: str) -> int:
        seen: set[int] = set()
        for a in exp.assigned.values():
            if a.uid == uid:
                seen.update(a.gpus)
        return len(seen)

    def render(self, node: str) -> str:
        """The exporter's /metrics text for `node`."""
        exp = self.exporters.get(node)
        if exp is None:
            return ""
        now = time.time()
        dt = now - exp.last_scrape if exp.last_scrape else 0.0
        exp.last_scrape = now
        m = exp.model
        lay = exp.layout
        metrics = METRICS + (rd.EXTRA_METRICS if lay.extra_counters else ())
        rows: dict[str, list[str]] = {name: [] for name, _, _ in metrics}
        for i in range(exp.gpus):
            r, a = self._reading(exp, i, now)
            phys, instance = lay.device(i)
            mig = f'GPU_I_PROFILE="{lay.mig_profile}",GPU_I_ID="{instance}",' if instance is not None else ""
            owner = (f',container="{_escape(a.container) if a else ""}",'
                     f'namespace="{_escape(a.namespace) if a else ""}",pod="{_escape(a.pod) if a else ""}"'
                     if lay.pod_labels else "")
            labels = (
                f'gpu="{phys}",UUID="{exp.label_uuid(i)}",pci_bus_id="{exp.pci_bus_id(phys)}",device="nvidia{phys}",'
                f'modelName="{_escape(m.name)}",{mig}Hostname="{_escape(node)}",'
                f'DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"{owner}'
            )
            u = r.util / 100.0
            h = rd.health(m.idle_w / lay.mig_per_gpu, m.max_w / lay.mig_per_gpu, m.sm_clock, r.util,
                          hot=phys in exp.hot)
            power, temp = h.power_w, h.temp_c
            energy = exp.energy_mj.get(i)
            if energy is None:
                energy = float(gp.seed_of(node, str(i)) % 10_000_000_000 + 1_000_000_000)
            energy += power * dt * 1000.0
            exp.energy_mj[i] = energy
            values = {
                "DCGM_FI_DEV_SM_CLOCK": str(h.sm_clock),
                "DCGM_FI_DEV_MEM_CLOCK": str(m.mem_clock),
                "DCGM_FI_DEV_MEMORY_TEMP": str(temp + 4),
                "DCGM_FI_DEV_GPU_TEMP": str(temp),
                "DCGM_FI_DEV_POWER_USAGE": f"{power:.3f}",
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": str(int(energy)),
                "DCGM_FI_DEV_GPU_UTIL": str(round(r.util)),
                "DCGM_FI_DEV_MEM_COPY_UTIL": str(round(r.util * 0.6)),
                "DCGM_FI_DEV_XID_ERRORS": str(r.xid),
                "DCGM_FI_DEV_FB_FREE": str(exp.device_mib() - r.fb_used),
                "DCGM_FI_DEV_FB_USED": str(r.fb_used),
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": _fmt_float(u),
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": _fmt_float(u * 0.45),
                "DCGM_FI_PROF_DRAM_ACTIVE": _fmt_float(u * 0.6),
            }
            if lay.extra_counters:
                values.update({
                    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": str(h.reasons),
                    "DCGM_FI_DEV_POWER_MGMT_LIMIT": f"{m.max_w / lay.mig_per_gpu:.3f}",
                    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "0",
                    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "1" if r.xid == 48 else "0",
                })
            for name, val in values.items():
                rows[name].append(f"{name}{{{labels}}} {val}")
        out: list[str] = []
        for name, typ, help_ in metrics:
            out.append(f"# HELP {name} {help_}")
            out.append(f"# TYPE {name} {typ}")
            out.extend(rows[name])
        return "\n".join(out) + "\n"

    # -- API objects ---------------------------------------------------------------------------
    def ensure_namespace_and_service(self) -> None:
        store = self.store
        if store.find(("", "namespaces"), "", NAMESPACE) is None:
            self.sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        if store.find(("", "services"), NAMESPACE, SERVICE) is None:
            rt = self.sim.registry.get("", "v1", "services")
            assert rt is not None
            svc: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {
                    "name": SERVICE,
                    "namespace": NAMESPACE,
                    "labels": {"app": APP},
                    "annotations": {"prometheus.io/scrape": "true"},
                },
                "spec": {
                    "type": "ClusterIP",
                    "selector": {"app": APP},
                    "ports": [{"name": PORT_NAME, "port": PORT, "targetPort": PORT, "protocol": "TCP"}],
                },
            }
            default(rt, svc, self.sim.server.service_ips)
            store.create(rt, svc, NAMESPACE)

    def exporter_pod(self, exp: NodeExporter, node: dict[str, Any]) -> dict[str, Any]:
        now = now_rfc3339()
        addrs = (node.get("status") or {}).get("addresses") or ()
        host_ip = next((a.get("address") for a in addrs if a.get("type") == "InternalIP"), "")
        cidr = (node.get("spec") or {}).get("podCIDR") or ""
        pod_ip = cidr.rsplit(".", 1)[0] + ".200" if cidr.count(".") == 3 else host_ip
        cond = {"status": "True", "lastProbeTime": None, "lastTransitionTime": now}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": exp.pod_name,
                "namespace": NAMESPACE,
                "labels": {"app": APP, "app.kubernetes.io/managed-by": "gpu-operator"},
                "annotations": {IN_PROCESS: "true"},
            },
            "spec": {
                "nodeName": exp.node,
                "serviceAccountName": "nvidia-dcgm-exporter",
                "priorityClassName": "system-node-critical",
                "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{
                    "name": CONTAINER,
                    "image": IMAGE,
                    "ports": [{"name": "metrics", "containerPort": PORT, "protocol": "TCP"}],
                    "env": [
                        {"name": "DCGM_EXPORTER_LISTEN", "value": f":{PORT}"},
                        {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
                        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    ],
                }],
            },
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": t, **cond}
                    for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                              "PodScheduled")
                ],
                "hostIP": host_ip,
                "hostIPs": [{"ip": host_ip}] if host_ip else [],
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}] if pod_ip else [],
                "startTime": now,
                "containerStatuses": [{
                    "name": CONTAINER,
                    "image": IMAGE,
                    "imageID": "",
                    "containerID": f"containerd://{uuid.uuid4().hex}",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }],
            },
        }

    def ensure_pod(self, exp: NodeExporter, node: dict[str, Any]) -> None:
        rt = self.sim.registry.get("", "v1", "pods")
        assert rt is not None
        pm = proxy.portmap(self.sim)
        if exp.pod_name:
            cur = self.store.find(rt.key, NAMESPACE, exp.pod_name)
            if cur is not None and cur.obj["metadata"].get("deletionTimestamp"):
                # Nothing to stop: an in-process pod goes away as soon as it is deleted.
                with contextlib.suppress(Exception):
                    self.store.remove(rt, NAMESPACE, exp.pod_name)
                cur = None
            if cur is not None and (cur.obj.get("spec") or {}).get("nodeName") == exp.node:
                return
            pm.unregister(NAMESPACE, exp.pod_name)
        name = self.store.generate_name(f"{APP}-")
        while self.store.find(rt.key, NAMESPACE, name) is not None:
            name = self.store.generate_name(f"{APP}-")
        exp.pod_name = name
        pod = self.exporter_pod(exp, node)
        default(rt, pod, self.sim.server.service_ips)
        pod["status"]["qosClass"] = "BestEffort"
        self.store.create(rt, pod, NAMESPACE)
        if exp.site is not None:
            pm.register(NAMESPACE, name, PORT, exp.host, exp.port)

    def remove_pod(self, exp: NodeExporter) -> None:
        if not exp.pod_name:
            return
        proxy.portmap(self.sim).unregister(NAMESPACE, exp.pod_name)
        rt = self.sim.registry.get("", "v1", "pods")
        assert rt is not None
        if self.store.find(rt.key, NAMESPACE, exp.pod_name) is not None:
            with contextlib.suppress(Exception):
                self.store.remove(rt, NAMESPACE, exp.pod_name)
        exp.pod_name = ""

    # -- assignment ----------------------------------------------------------------------------
    def assign(self, exp: NodeExporter, pods: list[dict[str, Any]]) -> None:
        """The node's GPUs as the device table holds them (`simcluster.node.devices`): the kubelet's
        allocations, made as it starts each container, and, for Running pods no kubelet started,
        the first free indexes; freed when a pod ends or goes away."""
        table = devices.of(self.sim)
        live: dict[str, dict[str, Any]] = {}
        for pod in pods:
            meta = pod["metadata"]
            if (meta.get("annotations") or {}).get(IN_PROCESS) == "true":
                continue
            if (pod.get("spec") or {}).get("nodeName") != exp.node:
                continue
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            live[meta.get("uid", "")] = pod
        for uid in table.uids(exp.node) - set(live):
            table.release(uid, exp.node)
        for pod in sorted(live.values(), key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"])):
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            meta = pod["metadata"]
            for c in (pod.get("spec") or {}).get("containers") or ():
                if isinstance(c, dict) and c.get("name") and (n := container_gpus(c)) > 0:
                    table.allocate(exp.node, exp.gpus, meta.get("uid", ""), meta.get("namespace", ""), meta["name"],
                                   c["name"], n)
        shared: dict[int, Assignment] = {}
        exp.assigned = {}
        for idx, alloc in table.on(exp.node).items():
            if idx < exp.gpus:
                a = shared.setdefault(id(alloc), Assignment(alloc.uid, alloc.namespace, alloc.pod, alloc.container,
                                                            list(alloc.gpus)))
                exp.assigned[idx] = a
        now = time.time()
        for a in exp.assigned.values():
            self._first_seen.setdefault(a.uid, now)
        gone = set(self._first_seen) - {a.uid for e in self.exporters.values() for a in e.assigned.values()}
        for uid in gone:
            self._first_seen.pop(uid, None)
            self.sampler.forget(uid)


class DcgmController(Controller):
    """Keeps one exporter (listener, pod, port mapping) per GPU node and the GPU assignments."""

    name = "dcgm"
    watches = (("", "nodes"), ("", "pods"))

    def __init__(self, sim: SimCluster, dcgm: Dcgm) -> None:
        super().__init__(sim)
        self.dcgm = dcgm
        self.node_pods: dict[str, set[tuple[str, str]]] = {}
        self.pod_node: dict[tuple[str, str], str] = {}
        for st in self.store.items(("", "pods")):
            self._index(st.obj, deleted=False)

    def _index(self, pod: dict[str, Any], *, deleted: bool) -> str | None:
        meta = pod["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        node = "" if deleted else (pod.get("spec") or {}).get("nodeName") or ""
        prev = self.pod_node.get(key)
        if prev and prev != node:
            bucket = self.node_pods.get(prev)
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del self.node_pods[prev]
        if node:
            self.pod_node[key] = node
            self.node_pods.setdefault(node, set()).add(key)
        else:
            self.pod_node.pop(key, None)
        return prev

    def initial_keys(self) -> Iterable[Key]:
        return [("node", st.obj["metadata"]["name"]) for st in self.store.items(("", "nodes"))]

    def keys_for(self, ev: Event) -> Iterable[Key]:
        if ev.tkey == ("", "nodes"):
            return [("node", ev.obj["metadata"]["name"])]
        prev = self._index(ev.obj, deleted=ev.type == "DELETED")
        node = (ev.obj.get("spec") or {}).get("nodeName") or ""
        return [("node", n) for n in {prev or "", node} if n and (n in self.dcgm.exporters or
                                                                     self._is_gpu_node(n))]

    def _is_gpu_node(self, name: str) -> bool:
        st = self.store.find(("", "nodes"), "", name)
        return st is not None and gpu_count(st.obj) > 0

    async def reconcile(self, key: Key) -> None:
        _, name = key
        st = self.store.find(("", "nodes"), "", name)
        exp = self.dcgm.exporters.get(name)
        node = st.obj if st is not None else None
        if node is None or gpu_count(node) == 0 or node["metadata"].get("deletionTimestamp"):
            if exp is not None:
                self.dcgm.remove_pod(exp)
                await self.dcgm._close(exp)
            return
        if exp is None:
            exp = await self.dcgm._open(name)
        exp.gpus = gpu_count(node)
        exp.product, exp.model = model_for(node)
        exp.layout, exp.hot = rd.layout_of(node), rd.hot_gpus(node)
        self.dcgm.ensure_namespace_and_service()
        self.dcgm.ensure_pod(exp, node)
        pods = []
        for pkey in sorted(self.node_pods.get(name, ())):
            pst = self.store.find(("", "pods"), *pkey)
            if pst is not None:
                pods.append(pst.obj)
        self.dcgm.assign(exp, pods)


def install(sim: SimCluster) -> None:
    """Attach ``sim.dcgm`` and start the exporter controller (installs the proxies too)."""
    if sim.dcgm is not None:
        return
    proxy.install(sim)
    dcgm = Dcgm(sim)
    sim.dcgm = dcgm
    sim.add_controller(DcgmController(sim, dcgm))
    from .driver import install as install_driver  # (imports this module)

    install_driver(sim, dcgm)
    sim.on_stop(dcgm.close)
