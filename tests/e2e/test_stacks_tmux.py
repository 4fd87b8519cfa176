"""#28 end to end in a real terminal (tmux, 80x24 and 120x40): `ranks demo`, gpt-hung marked hung, its detail's
banner offers `S: stacks` first, `S` opens the Stacks view: rank 1 stuck loading a batch (read_shard),
rank 0 waiting in the all-reduce (wait_for_peers), read in the demo's pods with py-spy; Escape goes
back and `q` leaves the terminal as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_demo_tmux import crumbs, demo_in_tmux, quit_and_check_restored, workloads_listed


@pytest.mark.timeout(420)
@pytest.mark.parametrize("width,height", [(80, 24), (120, 40)])
def test_the_stacks_view(tmp_path: Path, width: int, height: int) -> None:
    config = tmp_path / "config" / "ranks"  # (the demo's XDG_CONFIG_HOME: a file's value wins over the
    config.mkdir(parents=True)              # context's minute; the view, not the threshold, is tested here)
    (config / "config.toml").write_text("hang_after_minutes = 0.25\n")
    with demo_in_tmux(tmp_path, width, height) as demo:
        tmux = demo.tmux
        workloads_listed(demo)
        tmux.keys("/")
        tmux.wait_for(lambda s: " / regex" in s, timeout=30, why="the filter input")
        tmux.type("gpt-hung")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: "bert-crash" not in s and "gpt-hung" in s, timeout=30, why="only gpt-hung listed")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "gpt-hung", timeout=30, why="gpt-hung's detail")
        tmux.wait_for(lambda s: "(S: stacks): hung for" in s, timeout=180, why="the hang's banner offering S")
        tmux.keys("S")
        screen = tmux.wait_for(lambda s: "read_shard" in s and "wait_for_peers" in s, timeout=90,
                               why="the stacks of both ranks")
        assert crumbs(screen)[-1] == "stacks", screen
        lines = screen.splitlines()
        assert any("1 rank [1] in read_shard (train.py:" in line for line in lines), screen
        assert any("1 rank [0] in wait_for_peers (train.py:" in line for line in lines), screen
        assert all(len(line) <= width for line in lines)
        print(screen)
        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "gpt-hung", timeout=30, why="back on gpt-hung's detail")
        quit_and_check_restored(demo)
