"""End to end, the dashboard's first hour (#11, items 3, 6, 7 and 8) in a real terminal at 80x24
and at 120x40: the installed `ranks demo` in a private tmux server, plus a gang with a long name
that can never be scheduled (submitted with `ranks submit` against the demo's kubeconfig).

One walk per size (the demo starts once): what a filter is (typed text, count after the
breadcrumb, why a list is empty); the long name gives way and AGE and `? Help` stay; the pending
reason reads whole after Enter; ←/→ switch tabs; cluster load's Enter (a node's pods, a pending
workload) and d; describe's End and g; the projects footer offers only keys that work there;
delete's confirmation starts on Cancel and says "cancelled", suspend's starts on Suspend.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_demo_tmux import (
    RANKS,
    clean_env,
    crumbs,
    demo_in_tmux,
    footer,
    quit_and_check_restored,
    workloads_listed,
)
from tests.tmux_driver import Tmux

LONG = "multilingual-bert-large-pretraining-sweep-7"
WHY_TAIL = "No preemption victims found for incoming pod."  # the end of the scheduler's message


def rows(screen: str) -> list[str]:
    return screen.rstrip("\n").splitlines()


def above_footer(screen: str) -> str:
    """The row above the footer: where the filter input is."""
    lines = rows(screen)
    return lines[-2] if len(lines) > 1 else ""


def flat(screen: str) -> str:
    """The screen's rows stripped and joined by single spaces (text the app wrapped reads whole)."""
    return re.sub(r"\s+", " ", " ".join(line.strip() for line in rows(screen)))


def row_of(screen: str, prefix: str) -> str:
    return next((line for line in rows(screen) if line.lstrip().startswith(prefix)), "")


def submit_long_gang(tmp_path: Path, workdir: Path) -> None:
    env = clean_env(tmp_path)
    env["KUBECONFIG"] = str(workdir / "kubeconfig")
    proc = subprocess.run([*RANKS, "submit", LONG, "--framework", "pytorch", "-i", "img", "--workers", "2",
                           "-g", "16", "--command", "sleep 3600", "-p", "team-a"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=30)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)


def open_filter(tmux: Tmux) -> None:
    """`/`, then wait for its row (its prompt and placeholder) above the footer: the input has the focus."""
    tmux.keys("/")
    tmux.wait_for(lambda s: above_footer(s).startswith(" / regex"), timeout=30, why="the filter input")


def filter_list(tmux: Tmux, text: str) -> None:
    open_filter(tmux)
    tmux.type(text)
    tmux.wait_for(lambda s: above_footer(s).strip() == f"/ {text}", timeout=30,
                  why=f"the typed filter {text!r} on screen")
    tmux.keys("Enter")
    tmux.wait_for(lambda s: not above_footer(s).startswith(" / ") and "Quit" in footer(s), timeout=30,
                  why="the filter input closed")


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("width", "height"), [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_first_hour_in_tmux(tmp_path: Path, width: int, height: int) -> None:
    with demo_in_tmux(tmp_path, width, height) as demo:
        tmux = demo.tmux
        workloads_listed(demo)
        submit_long_gang(tmp_path, demo.workdir)

        # 6. the long name gives way; AGE stays whole; the footer keeps ? Help
        screen = tmux.wait_for(lambda s: re.search(r" \d+[smh]\s*$", row_of(s, LONG[:16])) is not None,
                               timeout=30, why="the long-named gang's row with its age")
        name_cell = row_of(screen, LONG[:16]).split()[0]
        assert name_cell == LONG if width >= 120 else name_cell.endswith("…"), name_cell
        assert re.search(r"\bAGE\s*$", rows(screen)[1]), rows(screen)[1]
        screen = tmux.wait_for(lambda s: "l Logs" in footer(s), timeout=30, why="the list's footer")
        assert footer(screen).rstrip().endswith("? Help"), footer(screen)

        # 3. the filter shows as typed, then after the breadcrumb with its count; an empty list says why
        open_filter(tmux)
        tmux.type("bert")
        tmux.wait_for(lambda s: above_footer(s).strip() == "/ bert", timeout=30, why="the typed text")
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s: "l Logs" in footer(s), timeout=30, why="the table focused again")
        assert "all projects  /bert  2 of 10" in rows(screen)[0], rows(screen)[0]
        assert "bert-crash" in screen and "hvd-interactive" not in screen, screen
        tmux.keys("Escape")
        tmux.wait_for(lambda s: "hvd-interactive" in s and "of 10" not in rows(s)[0], timeout=30,
                      why="the filter cleared")
        filter_list(tmux, "xyz")
        tmux.wait_for(lambda s: "no workload matches /xyz" in s and "/xyz  0 of 10" in rows(s)[0], timeout=30,
                      why="why the list is empty")
        tmux.keys("Escape")
        tmux.wait_for("hvd-interactive", timeout=30, why="the filter cleared")

        # 6. Enter on the pending row: the whole reason; 7. left/right switch the tabs, ? says so
        filter_list(tmux, "multilingual")
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s: crumbs(s)[-1] == LONG and WHY_TAIL in flat(s), timeout=30,
                               why="the gang's screen with the whole pending reason")
        assert "why it is pending: 0/8 nodes are available" in flat(screen), screen
        tmux.keys("Right")
        try:
            tmux.wait_for("(unscheduled)", timeout=30, why="right: the placement tab")
        except AssertionError:  # once on a loaded 2-core CI run the first key after the push was not seen
            tmux.keys("Right")
            tmux.wait_for("(unscheduled)", timeout=30, why="right (again): the placement tab")
        tmux.keys("Right")
        tmux.wait_for(lambda s: "(unscheduled)" not in s and "RANK" not in s, timeout=30,
                      why="right: the events tab")
        tmux.keys("Left", "Left")
        tmux.wait_for(lambda s: re.search(r"RANK\s+#", s) is not None, timeout=30, why="left: the ranks tab")
        tmux.keys("?")
        tmux.wait_for(lambda s: "Tab moves the focus" in s and "switch the tabs" in flat(s), timeout=30,
                      why="the help saying Tab and left/right")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1] == LONG and "Tab moves" not in s, timeout=30, why="help closed")

        # 8. delete starts on Cancel: Enter cancels and says so; suspend starts on Suspend: Enter does it
        tmux.keys("C-d")
        tmux.wait_for(lambda s: "Delete workload" in flat(s), timeout=30, why="the delete confirmation")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: "cancelled" in s and "Delete workload" not in flat(s), timeout=30,
                      why="the cancelled toast")
        tmux.keys("z")
        tmux.wait_for(lambda s: "Suspend pytorchjob/" in flat(s), timeout=30, why="the suspend confirmation")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: "suspended" in s and "Suspend pytorchjob/" not in flat(s), timeout=20,
                      why="suspended by Enter (the toast)")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1].startswith("all projects") and LONG[:12] in s, timeout=30,
                      why="back on the (filtered) list")
        tmux.keys("Escape")
        tmux.wait_for("hvd-interactive", timeout=30, why="the filter cleared")

        # 7. cluster load: Enter on a node lists its pods; the pending tab's Enter opens, d describes
        tmux.keys("c")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "cluster load" and "a100-node-01" in s, timeout=15,
                      why="cluster load")
        tmux.keys("Enter")
        screen = tmux.wait_for(lambda s: crumbs(s)[-1] == "pods on a100-node-01", timeout=30,
                               why="the first node's pods")
        assert re.search(r"WORKLOAD\s+RANK\s+STATUS\s+GPUS", screen), screen
        assert re.search(r"^ \S+/\S+\s+(master|worker|launcher|chief|ps)\S*\s", screen, re.M), screen
        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "cluster load", timeout=30, why="back on cluster load")
        tmux.keys("Right")
        tmux.wait_for(lambda s: "team-a" in s and "running" in s and "d Describe" not in footer(s)
                      and "? Help" in footer(s), timeout=30, why="the quota tab, without d in its footer")
        tmux.keys("Right")
        tmux.wait_for(lambda s: "team-a/big-pretrain" in s and WHY_TAIL[:20] in flat(s) and "d Describe" in footer(s),
                      timeout=30, why="the pending tab with the first row's reasons, d in its footer")
        tmux.keys("Enter")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "big-pretrain", timeout=30, why="Enter: the pending workload")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "cluster load" and "team-a/big-pretrain" in s, timeout=30,
                      why="back on the pending tab")
        tmux.keys("d")
        screen = tmux.wait_for(lambda s: crumbs(s)[-1].startswith("describe pytorchjob/big-pretrain")
                               and "apiVersion:" in s and "Quit" in footer(s), timeout=15, why="d: its YAML")
        assert "YAML" not in footer(screen), footer(screen)
        tmux.keys("End")
        tmux.wait_for(lambda s: "apiVersion:" not in s, timeout=30, why="End: the end of the YAML")
        tmux.keys("g")
        tmux.wait_for(lambda s: "apiVersion:" in s, timeout=30, why="g: the top again")
        tmux.keys("G")
        tmux.wait_for(lambda s: "apiVersion:" not in s, timeout=30, why="G: the end again")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "cluster load", timeout=30, why="back on cluster load")

        # 7. projects: no l, no m, no Esc at the bottom; d shows the namespace
        tmux.keys("p")
        gone = ("l Logs", "m Only mine", "esc Back")  # (the footer follows the screen a frame later)
        screen = tmux.wait_for(lambda s: crumbs(s)[-1] == "projects" and "runai-team-a" in s
                               and "Describe" in footer(s) and not any(g in footer(s) for g in gone),
                               timeout=30, why="the projects, their footer without l, m and esc")
        assert "d Describe" in footer(screen) and footer(screen).rstrip().endswith("? Help"), footer(screen)
        tmux.keys("d")
        tmux.wait_for(lambda s: crumbs(s)[-1].startswith("describe namespace/") and "kind: Namespace" in s,
                      timeout=15, why="d: the project's namespace")
        tmux.keys("Escape")
        tmux.wait_for(lambda s: crumbs(s)[-1] == "projects", timeout=30, why="back on the projects")

        quit_and_check_restored(demo)
