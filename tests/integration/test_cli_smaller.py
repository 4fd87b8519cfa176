"""The command line's smaller points a new user met (#24, item 8): `ranks get`'s tables fit the
terminal (columns left out by priority, the rank's name and status last; `-o wide` shows all), and
`ranks logs --rank R` on an MPIJob splits the launcher's output by its rank prefixes. Real `ranks`
processes against simcluster."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.snapshots.test_views import load, objects

ROOT = Path(__file__).resolve().parents[2]


def ranks(*args: str, kubeconfig: Path, columns: int | None = None,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_")) and k != "COLUMNS"}
    env.update(RANKS_CONFIG="", NO_COLOR="1")
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def passive(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    """The snapshot tests' fixed objects: a 4-rank PyTorchJob, a failed one with 8 events."""
    with sim_in_thread(components=(), workdir=tmp_path_factory.mktemp("sim")) as t:
        t.call(load, t.sim, objects())
        yield t


def section(out: str, first: str) -> list[str]:
    """The lines of `out` from the one starting with `first` to the next empty line."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith(first))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


# -- 4. ranks get fits the terminal -------------------------------------------------------------------


def test_get_s_rank_table_leaves_out_columns_by_priority_to_fit_80_columns(passive: ThreadedSimCluster) -> None:
    kc = passive.sim.kubeconfig_path
    r = ranks("get", "llama-finetune", "-p", "team-a", kubeconfig=kc, columns=80)
    assert r.returncode == 0, r.stderr
    table = section(r.stdout, "ROLE")
    assert all(cell_len(ln) <= 80 for ln in table), "\n".join(table)
    head = table[0].split()
    assert head[:2] == ["ROLE", "RANK"] and "STATUS" in head and "POD" in head, head
    assert "MEM" not in head and "LOSS" not in head, head  # the first to go
    assert [ln.split()[0] for ln in table[1:]] == ["master-0", "worker-0", "worker-1", "worker-2"]
    assert "-o wide shows every column" in r.stderr and "GPU MEM" in r.stderr, r.stderr

    # the narrowest terminal: the rank's name and its status stay
    r = ranks("get", "llama-finetune", "-p", "team-a", kubeconfig=kc, columns=20)
    assert section(r.stdout, "ROLE")[0].split() == ["ROLE", "STATUS"], r.stdout

    # -o wide: every column, whatever the terminal
    r = ranks("get", "llama-finetune", "-p", "team-a", "-o", "wide", kubeconfig=kc, columns=80)
    wide = section(r.stdout, "ROLE")[0]
    for name in ("POD", "RESTARTS", "GPU MEM", "LAST LOG", "STEP", "LOSS", "AGE", "IP", "LEAD"):
        assert name in wide, (name, wide)
    assert "left out" not in r.stderr

    # piped (no terminal, no COLUMNS): every column, for scripts
    r = ranks("get", "llama-finetune", "-p", "team-a", kubeconfig=kc)
    assert "GPU MEM" in section(r.stdout, "ROLE")[0] and "left out" not in r.stderr


def test_get_s_events_put_each_message_under_its_event_at_80_columns(passive: ThreadedSimCluster) -> None:
    kc = passive.sim.kubeconfig_path
    r = ranks("get", "bert-crash", "-p", "team-b", kubeconfig=kc, columns=80)
    assert r.returncode == 0, r.stderr
    events = section(r.stdout, "Events:")[1:]
    assert all(cell_len(ln) <= 80 for ln in events), "\n".join(events)
    assert events[0].split() == ["AGE", "TYPE", "REASON", "OBJECT"], events[0]
    text = " ".join(ln.strip() for ln in events)
    for message in ("Back-off restarting failed container pytorch in pod bert-crash-worker-1",
                    "PyTorchJob bert-crash is failed because 1 Worker replica(s) failed."):
        assert message in text, text  # whole
    # wide enough: one line an event, as before
    r = ranks("get", "bert-crash", "-p", "team-b", kubeconfig=kc, columns=200)
    events = section(r.stdout, "Events:")[1:]
    assert events[0].split() == ["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"] and len(events) == 9, events
