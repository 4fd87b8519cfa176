"""#29 end to end in a real terminal (tmux, 120x40): `ranks demo`, pt-interactive's detail, `P` opens the
Ports view: its master's Jupyter (declared and listened on, read in the pod) and the operator's port;
Enter forwards Jupyter to a free local port and shows the URL with its token, which answers the
notebook's page; the forward is listed and ctrl+d on its port stops it; Escape goes back and `q` leaves the
terminal as it was."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from tests.e2e.test_demo_tmux import crumbs, demo_in_tmux, quit_and_check_restored, workloads_listed
from tests.waiting import wait_for


def fetch(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode(errors="replace")
    except OSError:
        return None


@pytest.mark.timeout(420)
def test_the_ports_view(tmp_path: Path) -> None:
    with demo_in_tmux(tmp_path, 120, 40) as demo:
        tmux = demo.tmux
        workloads_listed(demo)
        tmux.keys("/")
        tmux.wait_for(lambda s: " / regex" in s, timeout=30, why="the filter input")
        tmux.type("pt-interactive")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: "bert-crash" not in s and "pt-interactive" in s, timeout=30, why="only it listed")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "pt-interactive", timeout=30, why="pt-interactive's detail")
        tmux.wait_for(lambda s: s.count("Running") >= 3, timeout=120, why="its three ranks running")
        tmux.keys("P")
        screen = tmux.wait_for(lambda s: "Jupyter" in s and "port(s) of pt-interactive" in s, timeout=90,
                               why="the ranks' ports read")
        assert crumbs(screen)[-1] == "ports", screen
        row = next(line for line in screen.splitlines() if "Jupyter" in line)
        assert re.search(r"master-0\s+8888\s+Jupyter\s+jupyter\s+yes", row), row
        assert "23456" in screen and "PyTorch master" in screen, screen
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s: "forwarded: open http://127.0.0.1:" in s, timeout=60, why="the URL")
        url = re.search(r"open (http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+)", screen)
        assert url, screen
        page = wait_for(lambda: fetch(url.group(1)), timeout=30, what="the notebook through the forward")
        assert "notebook server in" in page, page
        tmux.keys("C-d")  # (on the forwarded port; in the list of forwards below, after Tab, as well)
        tmux.wait_for("forward stopped", timeout=30, why="the forward stopped")
        assert fetch(url.group(1)) is None
        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "pt-interactive", timeout=30, why="back on the detail")
        quit_and_check_restored(demo)
