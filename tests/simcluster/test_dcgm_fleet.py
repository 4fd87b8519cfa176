"""simcluster's DCGM exporter, GPU by GPU (#30 item 5): figures that follow the load (a hot GPU
slows its clock and says why), the power limit and ECC counts beside the default counters, MIG
devices of an A100 node, a node whose exporter has no pod labels, an XID on one rank's GPU only."""

from __future__ import annotations

from typing import Any

import pytest

from simcluster.gpu import readings as rd
from simcluster.scenarios.nodes import gpu_node
from tests.simcluster.test_dcgm import core, gpu_pod, parse_metrics, scrape, set_running  # noqa: F401
from tests.waiting import wait_for

FLEET = pytest.mark.simcluster(nodes=0, components=("dcgm",))


def _series(text: str, metric: str) -> list[tuple[dict[str, str], float]]:
    _, samples = parse_metrics(text)
    return [(dict(lbl), v) for name, lbl, v in samples if name == metric]


def test_health_follows_load() -> None:
    cool = [rd.health(60, 400, 1410, u) for u in (0, 50, 100)]
    assert [h.temp_c for h in cool] == sorted(h.temp_c for h in cool)
    assert cool[0].power_w < cool[1].power_w < cool[2].power_w
    assert cool[0].reasons == rd.GPU_IDLE and cool[0].sm_clock < cool[1].sm_clock
    assert cool[2].reasons & rd.SW_POWER_CAP and not cool[1].reasons
    hot = rd.health(60, 400, 1410, 95, hot=True)
    assert hot.temp_c >= rd.THERMAL_SLOWDOWN_C and hot.reasons & rd.SW_THERMAL
    assert hot.sm_clock < cool[1].sm_clock


@FLEET
def test_exporter_layouts_and_an_xid_on_one_rank(simcluster: Any, core: Any) -> None:  # noqa: F811
    sim = simcluster.sim
    mig = gpu_node("mig-node", 4, index=1)
    mig["metadata"]["labels"][rd.MIG_LABEL] = "all-3g.40gb"
    bare = gpu_node("bare-node", 2, index=2)
    bare["metadata"]["labels"].update({rd.POD_LABELS_LABEL: "false", rd.COUNTERS_LABEL: "default"})
    hot = gpu_node("hot-node", 2, index=3)
    hot["metadata"]["labels"][rd.HOT_LABEL] = "1"
    for node in (mig, bare, hot):
        simcluster.call(sim.apply, node)
    wait_for(lambda: len(simcluster.call(sim.dcgm.targets)) == 3, timeout=30)
    busy = {"simcluster.ranks/gpu-util": "95", "simcluster.ranks/gpu-xid": "79;RANK=2"}
    for name, node, gpus, rank in (("hot-0", "hot-node", 2, "2"), ("bare-0", "bare-node", 1, "1"),
                                   ("mig-0", "mig-node", 2, "0")):
        pod = gpu_pod(name, node, gpus, annotations=busy)
        pod["spec"]["containers"][0]["env"] = [{"name": "RANK", "value": rank}]
        core.create_namespaced_pod("default", pod)
        set_running(core, name)
    for node in ("hot-node", "bare-node", "mig-node"):
        wait_for(lambda n=node: simcluster.call(sim.dcgm.assignments, n), timeout=30)

    # a badly cooled GPU at 95 %: hotter, its SM clock lower, thermal slowdown said; its twin is not
    text = scrape(simcluster, "hot-node")
    by_gpu = {lbl["gpu"]: v for lbl, v in _series(text, "DCGM_FI_DEV_GPU_TEMP")}
    clocks = {lbl["gpu"]: v for lbl, v in _series(text, "DCGM_FI_DEV_SM_CLOCK")}
    reasons = {lbl["gpu"]: int(v) for lbl, v in _series(text, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")}
    assert by_gpu["1"] >= rd.THERMAL_SLOWDOWN_C > by_gpu["0"]
    assert clocks["1"] < clocks["0"] and reasons["1"] & rd.SW_THERMAL and not reasons["0"] & rd.SW_THERMAL
    assert {lbl["gpu"]: v for lbl, v in _series(text, "DCGM_FI_DEV_POWER_MGMT_LIMIT")} == {"0": 400, "1": 400}
    assert all(v == 0 for _, v in _series(text, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"))
    # the XID only on the pod whose RANK is 2
    assert {lbl["pod"]: v for lbl, v in _series(text, "DCGM_FI_DEV_XID_ERRORS")} == {"hot-0": 79}

    # no pod-resources mount: no owner labels; the default counters only
    text = scrape(simcluster, "bare-node")
    meta, samples = parse_metrics(text)
    assert samples and not any({"pod", "namespace", "container"} & {k for k, _ in lbl} for _, lbl, _ in samples)
    assert "DCGM_FI_DEV_GPU_UTIL" in meta and "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" not in meta
    assert sorted(v for _, v in _series(text, "DCGM_FI_DEV_GPU_UTIL")) == [0, 95]
    assert [v for _, v in _series(text, "DCGM_FI_DEV_XID_ERRORS")] == [0, 0]  # (its RANK is 1)

    # MIG: four devices on two GPUs, each with its profile and instance id, the parent's UUID
    util = _series(scrape(simcluster, "mig-node"), "DCGM_FI_DEV_GPU_UTIL")
    devices = sorted((lbl["gpu"], lbl["GPU_I_ID"], lbl["GPU_I_PROFILE"], lbl["pod"]) for lbl, _ in util)
    assert devices == [("0", "1", "3g.40gb", "mig-0"), ("0", "2", "3g.40gb", "mig-0"), ("1", "1", "3g.40gb", ""),
                       ("1", "2", "3g.40gb", "")]
    assert len({lbl["UUID"] for lbl, _ in util}) == 2
    free = {(lbl["gpu"], lbl["GPU_I_ID"]): v for lbl, v in _series(scrape(simcluster, "mig-node"),
                                                                     "DCGM_FI_DEV_FB_FREE")}
    assert free[("1", "1")] == 81920 // 2
