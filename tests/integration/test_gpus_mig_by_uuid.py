"""`ranks gpus` on a MIG node whose DCGM exporter has no pod labels (#30 item 3): each MIG device is
given the pod that names it (`NVIDIA_VISIBLE_DEVICES`: `MIG-<GPU UUID>/<GPU instance>/<compute
instance>`, as the device plugin gives it with drivers before R470), read in the pod through
pods/exec; the note (and the doctor) say so. The pods' variable is the one the device plugin would
give for the devices the kubelet allocated them (checked against its device table)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from simcluster.node import devices
from simcluster.scenarios.nodes import gpu_node
from tests.cli_inprocess import run_cli
from tests.waiting import wait_for

NODE = "a100-mig-bare"
NS = "research"


def _node() -> dict[str, Any]:
    node = gpu_node(NODE, 4, pool="a100", product="NVIDIA-A100-SXM4-80GB")  # (2 GPUs, 2 3g.40gb each)
    node["metadata"]["labels"].update({"nvidia.com/mig.config": "all-3g.40gb",
                                       "simcluster.ranks/dcgm-pod-labels": "false"})
    return node


def _pod(name: str, gpus: int, visible: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"nodeName": NODE, "containers": [{
                "name": "main", "image": "python:3.12", "command": ["sleep", "infinity"],
                "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": visible}],
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def _phase(t: ThreadedSimCluster, name: str) -> str:
    st = t.call(lambda: t.sim.store.find(("", "pods"), NS, name))
    return ((st.obj if st is not None else {}).get("status") or {}).get("phase", "")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(components=("kubelet", "exec", "dcgm"), workdir=tmp_path_factory.mktemp("sim")) as t:
        t.call(t.sim.apply, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        t.call(t.sim.apply, _node())
        gpu0, gpu1 = devices.gpu_uuid(NODE, 0), devices.gpu_uuid(NODE, 1)
        # the kubelet gives out the first free devices: a's are GPU 0's two instances, then b's GPU 1's first
        t.call(t.sim.apply, _pod("a", 2, f"MIG-{gpu0}/1/0,MIG-{gpu0}/2/0"))
        wait_for(lambda: _phase(t, "a") == "Running", 90, "pod a to run")
        t.call(t.sim.apply, _pod("b", 1, f"MIG-{gpu1}/1/0"))
        wait_for(lambda: _phase(t, "b") == "Running", 90, "pod b to run")
        wait_for(lambda: t.call(lambda: t.sim.dcgm is not None and NODE in t.sim.dcgm.exporters), 30,
                 "the node's exporter")
        yield t


def test_mig_devices_are_attributed_by_what_their_pods_name(cluster: ThreadedSimCluster) -> None:
    t = cluster
    sim = t.sim
    lay = t.call(lambda: sim.dcgm.exporters[NODE].layout)
    held = {lay.device(i): alloc.pod for i, alloc in t.call(lambda: dict(sim.devices.nodes[NODE])).items()}
    assert held == {(0, 1): "a", (0, 2): "a", (1, 1): "b"}  # (what the pods' variable says)
    r = run_cli("gpus", "-A", "-o", "json", "--kubeconfig", str(sim.kubeconfig_path))
    assert r.code == 0, r.err
    data = json.loads(r.out)
    rows = {(g["index"], g["instance"]): g for g in data["gpus"] if g["node"] == NODE}
    assert sorted(rows) == [(0, "1"), (0, "2"), (1, "1"), (1, "2")]
    owners = {k: (g["owner"] or {}).get("pod") for k, g in rows.items()}
    assert owners == {(0, "1"): "a", (0, "2"): "a", (1, "1"): "b", (1, "2"): None}
    assert all(g["owner"]["by"] == "uuid" for g in rows.values() if g["owner"])
    assert rows[(0, "1")]["uuid"] == devices.gpu_uuid(NODE, 0) and rows[(0, "1")]["mig_profile"] == "3g.40gb"
    assert any("3 GPUs (3 of them MIG devices" in n and NODE in n and "attributed by UUID" in n
               for n in data["notes"]), data["notes"]
    r = run_cli("gpus", "--doctor", "--kubeconfig", str(sim.kubeconfig_path))
    assert r.code == 0, r.err
    assert any(NODE in ln and "pod/namespace labels" in ln and "3 found" in ln for ln in r.out.splitlines()), r.out


def test_the_table_says_by_uuid(cluster: ThreadedSimCluster) -> None:
    r = run_cli("gpus", "-A", "-o", "wide", "--node", NODE, "--kubeconfig", str(cluster.sim.kubeconfig_path))
    assert r.code == 0, r.err
    lines = [ln.split() for ln in r.out.splitlines()[1:]]
    assert [(ln[1], ln[-1]) for ln in lines] == [("0:1", "uuid"), ("0:2", "uuid"), ("1:1", "uuid"), ("1:2", "-")]
