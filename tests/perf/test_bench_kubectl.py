"""#13: a real kubectl v1.35's typed `create configmap` (a protobuf request body) against
`kubectl apply -f` of the same ConfigMap (JSON), in the same run on the same simcluster.

Each round creates a fresh ConfigMap both ways (then deletes both), alternating which goes first;
the figure is the median wall time of the whole kubectl process (discovery cached after the first
call, as for a user). Goal: create <= 1.2x apply.
"""

from __future__ import annotations

import statistics
import time

import pytest

from tests.perf.results import record

pytestmark = [pytest.mark.timeout(600), pytest.mark.simcluster(scenario="demo", components=())]

ROUNDS = 15
MANIFEST = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}
  namespace: research
data:
  lr: "0.1"
  model: bert large
"""


def test_create_configmap_vs_apply(kubectl):
    kubectl.run("get", "configmaps", "-n", "research")  # fill kubectl's discovery cache
    create: list[float] = []
    apply: list[float] = []

    def timed(*args: str, input: str | None = None) -> float:
        t = time.perf_counter()
        kubectl.run(*args, input=input)
        return time.perf_counter() - t

    for i in range(ROUNDS):
        steps = [
            lambda i=i: create.append(timed("create", "configmap", f"c{i}", "-n", "research",
                                            "--from-literal=lr=0.1", "--from-literal=model=bert large")),
            lambda i=i: apply.append(timed("apply", "-f", "-", input=MANIFEST.format(name=f"a{i}"))),
        ]
        for step in steps if i % 2 == 0 else reversed(steps):
            step()
        kubectl.run("delete", "configmap", f"c{i}", f"a{i}", "-n", "research")
    c, a = statistics.median(create), statistics.median(apply)
    print(f"\nkubectl create configmap: median {c * 1000:.0f} ms; kubectl apply -f: median {a * 1000:.0f} ms; "
          f"ratio {c / a:.2f} (goal <= 1.2)")
    record("kubectl create configmap (protobuf body) vs kubectl apply -f (JSON)", "<= 1.2x apply", round(c, 3), "s",
           met=c <= 1.2 * a, baseline="kubectl apply -f", baseline_measured=round(a, 3),
           note=f"median of {ROUNDS} runs of each, alternating")
    assert c <= 1.2 * a
