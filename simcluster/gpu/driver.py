"""The GPUs' driver as a pod's `nvidia-smi` reads it (simulation only, not a Kubernetes API).

Real `nvidia-smi` asks the driver (NVML) about the devices mounted in its container. simcluster's
GPUs live in the DCGM simulator, so a pod's `nvidia-smi` (`simcluster/node/launchers/nvidia_smi.py`)
asks the API server, with the pod's token, about the devices its container was given
(`NVIDIA_VISIBLE_DEVICES`, see `simcluster/node/devices.py`):

    GET /apis/simcluster.ranks/v1/namespaces/<ns>/gpus?uuid=<GPU-...>,<GPU-...>

answers `{"kind": "GpuList", "driverVersion", "cudaVersion", "items": [...]}`, one item per
asked UUID that a container of a pod of `<ns>` holds (in the order asked): `uuid`, `name`,
`busId`, `minor` (its index on the node), `node`, `utilization` and `memoryUtilization` (%),
`memoryUsed` and `memoryTotal` (MiB), `temperature` (C), `powerDraw` and `powerLimit` (W),
`smClock`, `memClock` (MHz) — the readings the node's exporter serves at that moment, so
`nvidia-smi` and the dashboard agree. Authorised as the rendezvous: a service account reads its
own namespace's, other identities need RBAC (`list` on `gpus` in `simcluster.ranks`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from ..apiserver.auth import Identity
from ..apiserver.errors import ApiError
from ..apiserver.rendezvous import GROUP, PREFIX, allow
from . import readings as rd
from .dcgm import DRIVER_VERSION, Dcgm

if TYPE_CHECKING:
    from ..cluster import SimCluster

CUDA_VERSION = "12.4"  # what driver 550.54.15 supports
MAX_UUIDS = 64


class Driver:
    def __init__(self, sim: SimCluster, dcgm: Dcgm) -> None:
        self.sim = sim
        self.dcgm = dcgm

    async def handle(self, request: web.Request, who: Identity) -> web.StreamResponse:
        rest = request.path[len(PREFIX):].split("/")
        if len(rest) != 2 or rest[1] != "gpus" or not rest[0]:
            raise ApiError(404, "the server could not find the requested resource")
        if request.method != "GET":
            raise ApiError(405, "the server does not allow this method on the requested resource")
        ns = rest[0]
        allow(self.sim.authz, who, "list", "gpus", ns, "")
        wanted = [u.strip() for u in request.query.get("uuid", "").split(",") if u.strip()][:MAX_UUIDS]
        body = {"kind": "GpuList", "apiVersion": f"{GROUP}/v1", "driverVersion": DRIVER_VERSION,
                "cudaVersion": CUDA_VERSION, "items": self.items(ns, wanted)}
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    def items(self, ns: str, wanted: list[str]) -> list[dict[str, Any]]:
        """The GPUs of `wanted` that containers of namespace `ns` hold, with their readings now."""
        found: dict[str, dict[str, Any]] = {}
        now = time.time()
        for exp in self.dcgm.exporters.values():
            for index, held in exp.assigned.items():
                uuid = exp.gpu_uuid(index)
                if held.namespace != ns or uuid not in wanted:
                    continue
                reading, _ = self.dcgm._reading(exp, index, now)
                m = exp.model
                lay = exp.layout
                phys = lay.device(index)[0]
                h = rd.health(m.idle_w / lay.mig_per_gpu, m.max_w / lay.mig_per_gpu, m.sm_clock, reading.util,
                              hot=phys in exp.hot)
                power, temp = h.power_w, h.temp_c
                found[uuid] = {
                    "uuid": uuid, "name": m.name, "busId": exp.pci_bus_id(index), "minor": index, "node": exp.node,
                    "utilization": round(reading.util), "memoryUtilization": round(reading.util * 0.6),
                    "memoryUsed": reading.fb_used, "memoryTotal": exp.device_mib(), "temperature": temp,
                    "powerDraw": round(power, 2), "powerLimit": m.max_w / lay.mig_per_gpu, "smClock": h.sm_clock,
                    "memClock": m.mem_clock,
                }
        return [found[u] for u in wanted if u in found]


def install(sim: SimCluster, dcgm: Dcgm) -> None:
    """Serve the driver's answers beside the rendezvous."""
    sim.server.simulated["gpus"] = Driver(sim, dcgm).handle
