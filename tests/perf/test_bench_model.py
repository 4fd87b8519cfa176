"""#4 benchmarks on the scale scenario (1,000 nodes, 20,000 pods): list speed, steady state, memory, CPU."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import requests

from tests.kubectl_binary import kubectl_path
from tests.perf.conftest import ROOT, kubectl_env


def _requests_since(sp, since: float) -> list[dict]:
    s = requests.Session()
    s.trust_env = False
    r = s.get(f"{sp.url}/simcluster/admin/requests", params={"since": since}, verify=str(sp.ca),
              headers={"Authorization": f"Bearer {sp.token}"}, timeout=30)
    r.raise_for_status()
    return r.json()["requests"]


def test_ranks_list_vs_kubectl(sim_process, tmp_path):
    sp = sim_process("--scenario", "scale", "--nodes", "1000", "--pods", "20000")
    env = kubectl_env(tmp_path)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "tui.cli", "list", "-A", "-o", "json", "--kubeconfig",
                          str(sp.kubeconfig)], capture_output=True, text=True, cwd=ROOT, env=env)
    ranks_s = time.perf_counter() - t
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["workloads"]) > 900
    t = time.perf_counter()
    subprocess.run(f"{kubectl_path()} --kubeconfig {sp.kubeconfig} get pods -A -o json > /dev/null",
                   shell=True, check=True, env=env)
    kubectl_s = time.perf_counter() - t
    print(f"\n[bench model] ranks list -A -o json: {ranks_s:.2f} s; kubectl get pods -A -o json: {kubectl_s:.2f} s; "
          f"ratio {ranks_s / kubectl_s:.2f}")
    assert ranks_s <= 1.0 * kubectl_s


def test_steady_state_memory_and_cpu(sim_process, tmp_path):
    sp = sim_process("--scenario", "scale", "--nodes", "1000", "--pods", "20000", "--churn", "10")
    start = time.time()
    probe = subprocess.run([sys.executable, "-m", "tests.perf.monitor_probe", str(sp.kubeconfig), "60"],
                           capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert probe.returncode == 0, probe.stderr
    r = json.loads(probe.stdout)
    reqs = _requests_since(sp, start)
    sync_end = start + r["sync_s"] + 2
    steady_lists = [q for q in reqs if q["verb"] == "list" and q["at"] > sync_end]
    print(f"\n[bench model] churn 10/s for 60 s: LIST requests after sync {len(steady_lists)} "
          f"(monitor's own count {r['lists_during_steady_state']}); sync {r['sync_s']} s; "
          f"RSS synced {r['rss_synced_mb']} MB, end {r['rss_end_mb']} MB (process), of which the model "
          f"{r['model_mb']} MB above the {r['rss_baseline_mb']} MB interpreter+libraries baseline; "
          f"CPU {r['cpu_fraction'] * 100:.1f}% of a core")
    assert not steady_lists and r["lists_during_steady_state"] == 0
    assert r["model_mb"] <= 150


def test_200_events_per_second_cpu(sim_process, tmp_path):
    sp = sim_process("--scenario", "scale", "--nodes", "1000", "--pods", "20000", "--churn", "200")
    probe = subprocess.run([sys.executable, "-m", "tests.perf.monitor_probe", str(sp.kubeconfig), "30"],
                           capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert probe.returncode == 0, probe.stderr
    r = json.loads(probe.stdout)
    print(f"\n[bench model] 200 pod events/s: monitor CPU {r['cpu_fraction'] * 100:.1f}% of a core, "
          f"RSS {r['rss_end_mb']} MB (model {r['model_mb']} MB), workload updates {r['workload_updates']}")
    assert r["cpu_fraction"] <= 0.30
