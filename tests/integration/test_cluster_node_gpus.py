"""Cluster load's Nodes tab, a node's row expanded into its GPUs (#30 item 1): each GPU's figures
in the columns that hold them (the index and its UUID's head under NODE, the model under GPU, its
marks under STATE, UTIL, MEM, its sparkline under SLOTS) and its owner in a HELD BY column of its
own, none of them widening the node's columns; sorting the table by any column keeps each node's
GPU rows right under it, in their order. At 120x40 and 80x24."""

from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest
from textual.pilot import Pilot

from monitors.dataloop.fleet import FleetShown
from monitors.gpu_fleet import Gpu, Owner
from tests.dashboard_kit import fed_app, painted
from tests.snapshots.test_views import NOW, objects
from tests.waiting import pilot_wait
from tui.screens import gpus as gt
from tui.screens.cluster import ClusterScreen
from tui.widgets.keyed_table import KeyedTable

NODE = "h100-node-01"
UUID = "GPU-{:x}e3f9a1-1111-4000-8000-{:012x}"  # (each GPU's head differs: 0e3f9a, 1e3f9a...)
# llama-finetune's master-0, worker-0 and worker-1 on h100-node-01, two GPUs each
HOLDERS = {0: ("master-0", 0), 1: ("master-0", 0), 2: ("worker-0", 1), 3: ("worker-0", 1), 4: ("worker-1", 2),
           5: ("worker-1", 2)}


def fleet() -> FleetShown:
    gpus = []
    for i in range(8):
        held = HOLDERS.get(i)
        owner = None if held is None else Owner(
            "runai-team-a", f"llama-finetune-{held[0]}", "pytorch", "PyTorchJob/llama-finetune", "PyTorchJob",
            "llama-finetune", held[1], held[0], "team-a", "alice")
        util = (3.0 if i == 5 else 90.0 - 7 * i) if owner else 0.0  # (GPU 5 held and idle)
        gpus.append(Gpu(NODE, i, "", UUID.format(i, i), "NVIDIA H100 80GB HBM3", "", util=util,
                        mem_used=1000.0 + 5000 * i, mem_total=81559.0, temp=40.0 + 5 * i, power=300.0,
                        power_limit=700.0, sm_clock=1980.0, reasons=0x20 if i == 7 else 0, xid=0, owner=owner,
                        owned_by="labels" if owner else "", allocated=owner is not None))
    history: dict[Any, tuple[float, ...]] = {g.key: (10.0, 50.0, g.util or 0.0) for g in gpus}
    return FleetShown(tuple(gpus), history, {}, (), "", 4, NOW)


async def wait(pilot: Pilot[Any], cond: Any, what: str) -> None:
    await pilot_wait(pilot, cond, timeout=20.0, what=what)


def lines(table: KeyedTable[Any]) -> list[str]:
    return painted(table)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
async def test_a_nodes_gpus_sit_in_their_columns_and_stay_under_it_when_sorted(size: tuple[int, int]) -> None:
    app, feed = fed_app(clock=lambda: NOW, still=True)
    feed.apply(*objects())
    async with app.run_test(size=size) as pilot:
        feed.send()
        await wait(pilot, lambda: app.store.synced and len(app.store.nodes) == 6, "the first picture")
        await pilot.press("c")
        await wait(pilot, lambda: isinstance(app.screen, ClusterScreen) and app.screen.table.row_count == 6,
                   "the nodes table")
        screen = app.screen
        assert isinstance(screen, ClusterScreen)
        table = screen.table
        header = lines(table)[0]
        # a reading of the node's GPUs, as the data thread hands it over (no data loop here)
        screen.gpu_rows.asked = True
        done: concurrent.futures.Future[FleetShown] = concurrent.futures.Future()
        done.set_result(fleet())
        screen.post_message(gt.FleetRead(done))
        await wait(pilot, lambda: screen.gpu_rows.shown is not None, "the GPUs read")
        assert table.move_to_key(NODE)
        await pilot.press("space")
        await wait(pilot, lambda: table.row_count == 14, "the node's 8 GPU rows")
        shown = lines(table)
        # the node's columns as before (none widened by a GPU's cells), HELD BY after them
        assert shown[0].startswith(header.rstrip()), (header, shown[0])
        assert shown[0].rstrip().endswith("HELD BY"), shown[0]
        held_at = shown[0].index("HELD BY")
        at = next(i for i, ln in enumerate(shown) if ln.split()[:1] == [NODE])
        gpu_lines = shown[at + 1: at + 9]
        for i, ln in enumerate(gpu_lines):
            assert ln[: header.index("POOL")].split() == ["└" if i == 7 else "├", str(i), f"{i:x}e3f9a"], ln
            holder = ln[held_at:].strip()
            if i in HOLDERS:
                assert holder and holder.rstrip("…") == f"llama-finetune {HOLDERS[i][0]} r{HOLDERS[i][1]}"[
                    : len(holder.rstrip("…"))], ln
            else:
                assert holder == "-", ln
        if size[0] >= 120:
            assert "llama-finetune master" in gpu_lines[0] and "llama-finetune worker" in gpu_lines[5]
            assert "H100 80GB" in gpu_lines[0] and "idle" in gpu_lines[5] and "hot" in gpu_lines[7]
        # sorted by each column, one way and the other: the GPU rows right under their node, in order
        children = [("gpu", NODE, i, "") for i in range(8)]
        for _ in range(len(table.base_labels) + 1):
            for key in ("o", "O"):
                await pilot.press(key)
                order: list[Any] = list(table.order)
                at = order.index(NODE)
                assert order[at + 1: at + 9] == children, (table.sort_label(), order)
                assert sorted(order[:at + 1] + order[at + 9:]) == sorted(k for k in order if not isinstance(k, tuple))
        await pilot.press("space")  # folded: the node's columns as they were, no HELD BY
        await wait(pilot, lambda: table.row_count == 6, "the node folded")
        assert "HELD BY" not in lines(table)[0]
