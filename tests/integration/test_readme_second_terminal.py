"""The README's first lines (#24): it starts with exactly the two set-up commands, and right after
them the lines that point a second terminal at the demo's cluster run as pasted from the
repository's root: `ranks` and a real kubectl v1.35 reach the cluster with them. The repository's
root is a directory laid out as `make demo` leaves it while the demo runs (`.ranks-demo/kubeconfig`,
`.venv/bin`), here over a simcluster serving workloads as the demo's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.kubectl_binary import kubectl_path
from tests.snapshots.test_views import load, objects

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def code_blocks(text: str) -> list[tuple[int, str]]:
    """(line number where it starts, body) of each fenced block."""
    return [(text[:m.start()].count("\n"), m.group(1)) for m in re.finditer(r"^```\w*\n(.*?)^```", text, re.M | re.S)]


def test_the_readme_starts_with_make_demo_and_make_test() -> None:
    first = code_blocks(README.read_text())[0][1]
    commands = [ln.split("#")[0].strip() for ln in first.splitlines()]
    assert commands == ["make demo", "make test"], first


def test_the_second_terminal_lines_run_as_pasted_from_the_repository_root(tmp_path: Path) -> None:
    with sim_in_thread(components=(), workdir=tmp_path / "sim") as simcluster:
        simcluster.call(load, simcluster.sim, objects())
        second_terminal(simcluster, tmp_path)


def second_terminal(simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    text = README.read_text()
    (start1, first), (start2, second) = code_blocks(text)[:2]
    between = text.splitlines()[start1 + first.count("\n") + 2:start2]
    assert all(not ln.startswith(("#", "```")) for ln in between), "the second block follows the first"
    assert "KUBECONFIG=$PWD/.ranks-demo/kubeconfig" in second and "PATH=$PWD/.venv/bin:$PATH" in second, second

    root = tmp_path / "repo"  # as `make demo` leaves the repository's root while the demo runs
    (root / ".ranks-demo").mkdir(parents=True)
    (root / ".ranks-demo" / "kubeconfig").write_bytes(simcluster.sim.kubeconfig_path.read_bytes())
    (root / ".venv").mkdir()
    (root / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    kubectl = kubectl_path()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_", "VIRTUAL_ENV"))}
    env.update(PATH=f"/usr/bin:/bin:{kubectl.parent}", HOME=str(tmp_path), RANKS_CONFIG="", NO_COLOR="1",
               XDG_STATE_HOME=str(tmp_path / "state"))
    lines = [ln for ln in second.splitlines() if ln.strip()]
    script = "\n".join([*lines, "kubectl get pods -n runai-team-a -o name", "command -v ranks"])
    r = subprocess.run(["bash", "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "hvd-interactive" in r.stdout and "team-a" in r.stdout, r.stdout  # ranks list -A
    assert "pod/hvd-interactive-worker-0" in r.stdout, r.stdout  # kubectl
    assert r.stdout.rstrip().endswith(f"{root}/.venv/bin/ranks"), r.stdout
