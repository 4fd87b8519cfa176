"""#2: a full LIST of 20,000 pods vs `kubectl get pods -A -o json` on the same server.

The cluster (`--scenario scale --nodes 1000 --pods 20000`) and both figures come from
tests/perf/conftest.py's `scale_clusters`, measured once and shared with the model and scale
benchmarks: curl's first `GET /api/v1/pods` on the fresh cluster to its last byte (the server
encodes every pod, as kube-apiserver does on each LIST; the repeated ones, served from the
encodings simcluster keeps, are shown too), kubectl's one run.
Goal: the LIST <= 0.5x kubectl (the server is not what makes kubectl slow).
"""

from __future__ import annotations

import statistics

from tests.perf.conftest import ScaleClusters
from tests.perf.results import record

PODS = 20000


def test_list_20000_pods_vs_kubectl(scale_clusters: ScaleClusters) -> None:
    sc = scale_clusters.get(PODS)
    curl = sc.curl_list(repeat=2)
    kubectl = sc.kubectl_get_pods()
    rss = sc.sim.rss_mb()
    repeated = statistics.median(curl.repeated)
    print(f"\n[bench list] GET /api/v1/pods ({PODS:,} pods): {curl.seconds:.2f} s to last byte (repeated: "
          f"{', '.join(f'{s:.2f}' for s in curl.repeated)} s), {curl.bytes / 1e6:.1f} MB; kubectl get pods -A -o json: "
          f"{kubectl.seconds:.2f} s, {kubectl.rss_mb:,.0f} MB; ratio {curl.seconds / kubectl.seconds:.3f}; "
          f"simcluster RSS {rss:.0f} MB")
    items = len(sc.api_get("/api/v1/pods")["items"])
    met = curl.seconds <= 0.5 * kubectl.seconds
    record(f"full pod LIST (GET /api/v1/pods), {PODS:,} pods, vs kubectl", "<= 0.5x kubectl",
           round(curl.seconds, 3), "s", met=met, baseline="kubectl get pods -A -o json",
           baseline_measured=round(kubectl.seconds, 3),
           note=f"the first LIST on the fresh cluster, {curl.bytes / 1e6:,.0f} MB, {items:,} items (repeated: "
                f"{repeated:.2f} s, from simcluster's kept encodings); simcluster RSS {rss:,.0f} MB", pods=PODS)
    assert items == PODS
    assert met
