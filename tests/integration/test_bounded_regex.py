"""`ranks logs W --grep '(a*)*b'` on a rank that prints long runs of `a` (issue #25, item 3: it ran
over 60 s of a core with no bound): the regex runs without backtracking, so the command reads the
whole log and answers at once; a pattern RE2 cannot run is one line, exit 2."""

from __future__ import annotations

import pytest

from tests.integration.test_logs import kf_pod, ranks_cli, seed
from tests.waiting import wait_for

pytestmark = [pytest.mark.simcluster(components=("kubelet",)),
              pytest.mark.timeout(180, method="thread")]  # (a backtracking match holds the GIL)

RUN = "a" * 20_000


def test_grep_with_the_worst_regex_on_long_runs_of_a_answers(simcluster) -> None:
    sim = simcluster.sim
    prog = f"for i in 1 2 3 4 5 6 7 8; do printf '{RUN}\\n'; done; printf '{RUN}b\\n'; echo done; sleep 300"
    simcluster.call(seed, sim, "aaa", [kf_pod("aaa", "Master", 0, ["sh", "-c", prog])], workers=0)
    wait_for(lambda: b"done" in ranks_cli(sim.kubeconfig_path, "aaa").stdout, 60, "the rank's lines")
    r = ranks_cli(sim.kubeconfig_path, "aaa", "--grep", "(a*)*b", timeout=120)
    lines = r.stdout.decode().splitlines()
    assert r.returncode == 0 and lines == [f"[master-0] {RUN}b"], (r.returncode, [ln[:40] for ln in lines], r.stderr)
    r = ranks_cli(sim.kubeconfig_path, "aaa", "--exclude", "(a|aa)*c", timeout=120)
    assert r.returncode == 0 and len(r.stdout.decode().splitlines()) == 10, r.stderr
    r = ranks_cli(sim.kubeconfig_path, "aaa", "--grep", r"(a)\1")
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and "without backtracking (RE2)" in err, err
