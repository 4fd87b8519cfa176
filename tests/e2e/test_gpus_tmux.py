"""#30 end to end in a real terminal (tmux, 80x24 and 120x40): `ranks demo`'s cluster load has a GPUs
tab, every GPU of the demo's nodes with its owner and marks (the badly cooled one under
llama-finetune hot and throttled) and the line saying what figures are missing (the node whose
exporter has no pod labels); `/` filters them, Enter opens the owner's workload at that rank; a
node's row in the Nodes tab expands into its GPUs (space)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_demo_tmux import crumbs, demo_in_tmux, quit_and_check_restored, workloads_listed
from tests.tmux_driver import Tmux


def shows_nodes(screen: str) -> bool:
    return "SLOTS" in screen


def gpus_under(node: str, screen: str, gpus: int = 8) -> bool:
    """The node's row on screen with its GPU rows right under it (├ 0 ..., └ 7 ...), in order."""
    lines = screen.splitlines()
    at = next((i for i, line in enumerate(lines) if line.split()[:1] == [node]), None)
    if at is None or at + gpus >= len(lines):
        return False
    return all(lines[at + 1 + k].split()[:2] == ["└" if k == gpus - 1 else "├", str(k)] for k in range(gpus))


def to_tab(tmux: Tmux, key: str, tab: str, shown: Callable[[str], bool], before: Callable[[str], bool]) -> None:
    """`key` (Right or Left) until `tab` is on screen: each tab is seen before the next key, as a
    user would. A key lost on a loaded machine (the screen still on the tab before, unchanged for a
    minute) is pressed again, once, as a user would."""
    tmux.keys(key)
    try:
        tmux.wait_for(shown, timeout=60, why=f"the {tab} tab")
    except AssertionError:
        if not before(tmux.screen()):
            raise
        print(f"{key} pressed again: the {tab} tab had not come in 60 s")
        tmux.keys(key)
        tmux.wait_for(shown, timeout=90, why=f"the {tab} tab")


@pytest.mark.timeout(420)
def test_the_gpus_tab(tmp_path: Path) -> None:
    width, height = 120, 40  # (then 80x24, the same demo: one start for both sizes)
    with demo_in_tmux(tmp_path, width, height) as demo:
        tmux = demo.tmux
        workloads_listed(demo)
        tmux.keys("c")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "cluster load" and "SLOTS" in s and "h100-node-04" in s,
                      timeout=30, why="cluster load's nodes")
        shows = {"quota": lambda s: "SLOTS" not in s, "pending": lambda s: "WAITING" in s,
                 "idle sessions": lambda s: "WAITING" not in s, "GPUs": lambda s: "THRO" in s or "XID" in s}
        before: Callable[[str], bool] = shows_nodes
        for tab, shown in shows.items():  # (each tab on screen before the next key)
            to_tab(tmux, "Right", tab, shown, before)
            before = shown
        screen = tmux.wait_for(lambda s: "48 GPUs" in s and "a100-node-01" in s, timeout=90, why="the GPUs tab")
        screen = tmux.wait_for(lambda s: "hot" in s and "h100-node-04" in s and "pod/namespace labels" in s,
                               timeout=60, why="the hot GPU and the line saying what is missing")
        print(screen)
        assert all(len(line) <= width for line in screen.splitlines())
        tmux.keys("/")
        tmux.wait_for(lambda s: " / regex" in s, timeout=30, why="the filter input")
        tmux.type("worker-2")
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s: "bert-crash" not in s and "llama" in s and "/worker-2: 2 of 48" in s,
                               timeout=30, why="only llama-finetune's worker-2 listed (its 2 GPUs)")
        print(screen)
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s: crumbs(s)[-1] == "llama-finetune", timeout=30, why="its workload")
        tmux.wait_for(lambda s: "worker-2" in s, timeout=30, why="its ranks")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "cluster load", timeout=30, why="back on cluster load")
        tmux.keys("Escape")  # (the filter cleared)
        tmux.wait_for(lambda s: "of 48" not in s and "a100-node-01" in s, timeout=30, why="every GPU again")
        width, height = 80, 24
        tmux.resize(width, height)
        screen = tmux.wait_for(lambda s: "48 GPUs" in s and "h100-node-04" in s and "OWNER" in s
                               and "MODEL" not in s, timeout=30, why="the GPUs tab at 80x24")
        print(screen)
        assert all(len(line) <= width for line in screen.splitlines())
        # the Nodes tab: h100-node-01's row (the fifth: a100 nodes first) expands into its eight GPUs
        # (back to the left each tab is told by what only it shows)
        lefts = {"idle sessions": lambda s: "IDLE FOR" in s, "pending": shows["pending"],
                 "quota": lambda s: "util " in s and "WAITING" not in s and not shows_nodes(s), "nodes": shows_nodes}
        for tab, shown in lefts.items():
            to_tab(tmux, "Left", tab, shown, before)
            before = shown
        # (its rows drawn: the header's columns sized by them, not a frame before)
        screen = tmux.wait_for(lambda s: "SLOTS" in s and "h100-node-04" in s and "a100-node-01" in s, timeout=30,
                               why="the Nodes tab with its rows")
        header = next(line for line in screen.splitlines() if "SLOTS" in line)
        tmux.keys("g", "j", "j", "j", "j", "space")
        screen = tmux.wait_for(lambda s: "HELD BY" in s and gpus_under("h100-node-01", s) and "llama-fi" in s,
                               timeout=60, why="a node's row expanded into its GPUs, their holders in HELD BY")
        print(screen)
        # the node's columns as they were (a GPU's cells widen none of them), HELD BY after them
        assert next(line for line in screen.splitlines() if "SLOTS" in line).startswith(header.rstrip())
        assert all(len(line) <= width for line in screen.splitlines())
        for key in ("o", "o", "O"):  # sorted by NODE, then POOL, then the other way: its GPUs stay under it
            tmux.keys(key)
            screen = tmux.wait_for(lambda s: gpus_under("h100-node-01", s) and ("▲" in s or "▼" in s), timeout=30,
                                   why=f"sorted ({key}), the node's GPUs right under it")
        print(screen)
        tmux.keys("space")
        tmux.wait_for(lambda s: "HELD BY" not in s and "└ 7 " not in s, timeout=30, why="the node folded again")
        # at 120x40 too: the holders in full under HELD BY, the node's columns as they were
        width, height = 120, 40
        tmux.resize(width, height)
        header = tmux.wait_for(lambda s: "SLOTS" in s and "ALLOCATED" in s and "H100-80GB-HBM3" in s, timeout=30,
                               why="the Nodes tab at 120x40, its rows redrawn")
        header = next(line for line in header.splitlines() if "SLOTS" in line)
        tmux.keys("space")
        screen = tmux.wait_for(lambda s: "HELD BY" in s and gpus_under("h100-node-01", s)
                               and "llama-finetune" in s, timeout=60, why="the node expanded at 120x40")
        print(screen)
        assert next(line for line in screen.splitlines() if "SLOTS" in line).startswith(header.rstrip())
        assert all(len(line) <= width for line in screen.splitlines())
        tmux.keys("space")
        tmux.wait_for(lambda s: "HELD BY" not in s, timeout=30, why="the node folded at 120x40")
        quit_and_check_restored(demo)
