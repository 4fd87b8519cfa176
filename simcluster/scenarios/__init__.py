"""Scenarios: what a fresh simcluster contains (`empty`, `demo`, `scale`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..apiserver.errors import ApiError

if TYPE_CHECKING:
    from ..cluster import SimCluster

SCENARIOS = ("empty", "demo", "scale")


def load_scenario(sim: SimCluster, name: str) -> None:
    if name == "empty":
        return
    if name == "demo":
        from .demo import load_demo

        load_demo(sim)
        return
    if name == "scale":
        from .scale import build_scale

        data = build_scale(nodes=sim.extra_nodes or 1000, pods=sim.scale_pods, gpus_per_node=sim.gpus_per_node,
                           seed=sim.seed)
        sim.extra_nodes = 0
        for obj in data.all():
            sim.apply(obj)
        return
    raise ApiError(400, f"unknown scenario {name!r}: choose one of {', '.join(SCENARIOS)}")
