"""Scenarios: what a fresh simcluster contains (`empty`, `demo`, `scale`)."""

from __future__ import annotations

import gc
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
        _load_scale(sim)
        return
    raise ApiError(400, f"unknown scenario {name!r}: choose one of {', '.join(SCENARIOS)}")


def _load_scale(sim: SimCluster) -> None:
    """Build the scale scenario's objects and store them, with the cyclic GC paused: nothing built
    is cyclic, and a collection walking the growing heap (millions of containers at 100,000 pods)
    would cost more than the building. The objects stay as long as the cluster does, so they are
    then frozen out of every later collection (`gc.freeze`)."""
    from .scale import build_scale

    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        data = build_scale(nodes=sim.extra_nodes or 1000, pods=sim.scale_pods, gpus_per_node=sim.gpus_per_node,
                           seed=sim.seed)
        sim.extra_nodes = 0
        for obj in data.all():
            sim.apply(obj)
        del data
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
