"""#4 benchmarks on the scale scenario (1,000 nodes, 20,000 pods): list speed, steady state, memory, CPU.

The list comparison runs on tests/perf/conftest.py's shared `scale_clusters` cluster (its kubectl
figure measured once for the list, model and scale benchmarks); the others on their own clusters
with churn. Goals: ranks list <= 1.0x kubectl; no LIST after the sync and the model <= 150 MB with
10 pod changes/s; the monitor <= 30 % of a core at 200 pod events/s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import requests

from tests.perf.conftest import ROOT, ScaleClusters, kubectl_env
from tests.perf.results import record


def _requests_since(sp, since: float) -> list[dict]:
    s = requests.Session()
    s.trust_env = False
    r = s.get(f"{sp.url}/simcluster/admin/requests", params={"since": since}, verify=str(sp.ca),
              headers={"Authorization": f"Bearer {sp.token}"}, timeout=30)
    r.raise_for_status()
    return r.json()["requests"]


def test_ranks_list_vs_kubectl(scale_clusters: ScaleClusters, tmp_path):
    sc = scale_clusters.get(20000)
    env = kubectl_env(tmp_path)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "tui.cli", "list", "-A", "-o", "json", "--kubeconfig",
                          str(sc.sim.kubeconfig)], capture_output=True, text=True, cwd=ROOT, env=env)
    ranks_s = time.perf_counter() - t
    assert out.returncode == 0, out.stderr
    workloads = len(json.loads(out.stdout)["workloads"])
    kubectl_s = sc.kubectl_get_pods().seconds
    print(f"\n[bench model] ranks list -A -o json: {ranks_s:.2f} s; kubectl get pods -A -o json: {kubectl_s:.2f} s; "
          f"ratio {ranks_s / kubectl_s:.2f}")
    met = ranks_s <= 1.0 * kubectl_s
    record("ranks list -A -o json, 20,000 pods, vs kubectl (#4)", "<= 1.0x kubectl", round(ranks_s, 3), "s",
           met=met, baseline="kubectl get pods -A -o json", baseline_measured=round(kubectl_s, 3),
           note=f"{workloads:,} workloads", pods=20000)
    assert workloads > 900
    assert met


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
    record("monitor: LIST requests after the sync, 20,000 pods, 10 pod changes/s for 60 s", "0",
           len(steady_lists), "requests", met=not steady_lists and r["lists_during_steady_state"] == 0,
           note=f"the monitor's own count {r['lists_during_steady_state']}; sync {r['sync_s']} s", pods=20000)
    record("monitor: model memory, 20,000 pods, 10 pod changes/s", "<= 150 MB", r["model_mb"], "MB",
           met=r["model_mb"] <= 150,
           note=f"RSS {r['rss_end_mb']} MB above a {r['rss_baseline_mb']} MB interpreter+libraries baseline; "
                f"CPU {r['cpu_fraction'] * 100:.1f} % of a core", pods=20000)
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
    record("monitor: CPU at 200 pod events/s, 20,000 pods", "<= 30 % of a core", round(r["cpu_fraction"] * 100, 1),
           "% of a core", met=r["cpu_fraction"] <= 0.30,
           note=f"RSS {r['rss_end_mb']} MB (model {r['model_mb']} MB), {r['workload_updates']} workload updates",
           pods=20000)
    assert r["cpu_fraction"] <= 0.30
