"""Issue #24 item 8, where a user of `ranks demo` meets simcluster's pods: the dashboard's exec
suggestion `nvidia-smi -L` run on every rank of the demo's sessions (what its exec dialog runs,
here through `ranks exec`) lists each rank's own GPU, the one the DCGM exporter attributes to it;
and what a user types in a session (`command -v torchrun`, `echo $PATH`, a mistyped script, a
failing launch) shows the image's paths, never the simulator's on the machine running it. The demo
scenario with every component, the CLI as a user runs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.integration.test_shell_exec_convert import RANKS, ROOT, clean_env
from tests.simcluster.test_dcgm import scrape, series
from tests.waiting import wait_for

GPU_LINE = re.compile(r"^GPU 0: NVIDIA A100-SXM4-80GB \(UUID: (GPU-[0-9a-f-]{36})\)$")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="demo", workdir=tmp_path_factory.mktemp("demo")) as t:
        yield t


def ranks(demo: ThreadedSimCluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(demo.sim.workdir / "home", Path(demo.sim.kubeconfig_path))
    return subprocess.run([*RANKS, *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env,
                          stdin=subprocess.DEVNULL)


def by_rank(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"^\[([\w-]+)\] (.*)$", line)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def attributed(demo: ThreadedSimCluster, pod: str) -> list[str]:
    """The UUIDs the node exporters attribute to `pod`."""
    found = []
    for node, _, _ in demo.call(demo.sim.dcgm.targets):
        for labels, _ in series(scrape(demo, node), "DCGM_FI_DEV_GPU_UTIL").values():
            if labels.get("pod") == pod:  # (the demo's h100-node-04 exporter has no pod labels)
                found.append(labels["UUID"])
    return found


def test_exec_suggestion_lists_each_ranks_own_gpu(demo: ThreadedSimCluster) -> None:
    wait_for(lambda: len(attributed(demo, "pt-interactive-worker-1")) == 1, timeout=60,
             what="the demo's PyTorch session running with its GPUs")
    r = ranks(demo, "exec", "pt-interactive", "-p", "team-a", "--all", "--", "/bin/sh", "-c", "nvidia-smi -L")
    assert r.returncode == 0, (r.stdout, r.stderr)
    lines = by_rank(r.stdout)
    assert sorted(lines) == ["master-0", "worker-0", "worker-1"], r.stdout
    for rank, got in lines.items():
        m = GPU_LINE.match(got[0]) if len(got) == 1 else None
        assert m, (rank, got)
        assert [m.group(1)] == attributed(demo, f"pt-interactive-{rank}"), rank
    # the MPI session: the launcher has no GPU (the operator blanks its devices), each worker its own
    r = ranks(demo, "exec", "hvd-interactive", "-p", "team-a", "--all", "--", "/bin/sh", "-c", "nvidia-smi -L")
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = by_rank(r.stdout)
    assert lines["launcher"] == ["No devices were found"], r.stdout
    assert all(GPU_LINE.match(lines[w][0]) for w in ("worker-0", "worker-1")), r.stdout
    assert "launcher: exit 6" in r.stderr.splitlines(), r.stderr


def test_no_path_of_the_simulator_in_a_sessions_shell(demo: ThreadedSimCluster) -> None:
    host = {str(demo.sim.workdir), str(ROOT), sys.prefix, sys.base_prefix,
            os.path.dirname(os.path.realpath(sys.executable))}
    script = ("command -v torchrun; command -v python; echo $PATH; python trian.py; "
              "torchrun --nnodes 1 --nproc-per-node 1 trian.py; true")
    r = ranks(demo, "exec", "pt-interactive", "-p", "team-a", "--rank", "master-0", "--", "/bin/sh", "-c", script)
    text = r.stdout + r.stderr
    assert not [h for h in host if h in text], (host, text)
    out = by_rank(r.stdout)["master-0"]
    assert out[:2] == ["/usr/local/bin/torchrun", "/opt/venv/bin/python"], r.stdout
    assert out[2].split(":")[0] == "/opt/venv/bin", r.stdout
    err = by_rank(r.stderr)["master-0"]
    assert err[0] == "python: can't open file '/workspace/trian.py': [Errno 2] No such file or directory", r.stderr
    assert any("ChildFailedError" in ln for ln in err), r.stderr


def test_bert_crashs_surviving_ranks_wait_in_allreduce_once_rank_2_died(demo: ThreadedSimCluster) -> None:
    """A user of the demo saw bert-crash's other ranks go on printing steps while the job said
    Failed; with a dead peer real DDP stops at its next collective (NCCL waits, the GPUs stay held):
    their logs end at the step rank 2 died on, with the wait said once."""
    def master_log() -> str:
        r = ranks(demo, "logs", "bert-crash", "-p", "team-b", "--rank", "0")
        return r.stdout if r.returncode == 0 else ""

    wait_for(lambda: "waiting in allreduce" in master_log(), timeout=120, what="the master waiting on its dead peer")
    steps = [int(m.group(1)) for m in re.finditer(r"\] step (\d+) ", master_log())]
    assert steps and max(steps) == 8, steps  # (rank 2 failed at step 8: nothing after it)
    last = master_log().rstrip().splitlines()[-1]
    assert last.endswith("NCCL WARN rank 2 is gone; waiting in allreduce (step 9)"), last
