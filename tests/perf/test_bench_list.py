"""#2: a full LIST of 20,000 pods vs `kubectl get pods -A -o json` on the same server."""

from __future__ import annotations

import subprocess
import time

from tests.kubectl_binary import kubectl_path
from tests.perf.conftest import kubectl_env


def test_list_20000_pods_vs_kubectl(sim_process, tmp_path):
    sp = sim_process("--scenario", "scale", "--nodes", "1000", "--pods", "20000")
    out = tmp_path / "pods.json"
    curl = subprocess.run(
        ["curl", "-sS", "--cacert", str(sp.ca), "-H", f"Authorization: Bearer {sp.token}",
         "-o", str(out), "-w", "%{time_total} %{size_download}", f"{sp.url}/api/v1/pods"],
        capture_output=True, text=True, check=True,
    )
    curl_s, size = curl.stdout.split()
    curl_s = float(curl_s)
    size_mb = int(size) / 1e6
    t = time.perf_counter()
    subprocess.run(
        f"{kubectl_path()} --kubeconfig {sp.kubeconfig} get pods -A -o json > /dev/null",
        shell=True, check=True, env=kubectl_env(tmp_path),
    )
    kubectl_s = time.perf_counter() - t
    rss = sp.rss_mb()
    print(f"\n[bench list] GET /api/v1/pods (20,000 pods): {curl_s:.2f} s to last byte, {size_mb:.1f} MB; "
          f"kubectl get pods -A -o json: {kubectl_s:.2f} s; ratio {curl_s / kubectl_s:.3f}; "
          f"simcluster RSS {rss:.0f} MB")
    import orjson

    assert len(orjson.loads(out.read_bytes())["items"]) == 20000
    assert curl_s <= 0.5 * kubectl_s
