"""`nvidia-smi` in simcluster pods (`simcluster/node/launchers/nvidia_smi.py`): the kubelet gives a
GPU container its devices (`NVIDIA_VISIBLE_DEVICES`, `simcluster/node/devices.py`), the DCGM
exporter attributes the same GPUs to the pod, and the pod's `nvidia-smi` lists exactly those, with
the exporter's readings, in the tool's formats; a pod without GPUs gets the tool's "No devices
were found". Real pods (the kubelet's processes), real exec, the exporter's real /metrics.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.simcluster.test_dcgm import gpu_pod, scrape, series
from tests.simcluster.test_launchers import run
from tests.waiting import wait_for

NODE = "gpu-node-01"
SMI = pytest.mark.simcluster(nodes=1, gpus_per_node=8, components=("kubelet", "exec", "dcgm"))
A100 = "NVIDIA A100-SXM4-80GB"


def running(core: Any, *names: str) -> None:
    def ok() -> bool:
        return all(core.read_namespaced_pod(n, "default").status.phase == "Running" for n in names)

    wait_for(ok, timeout=30, what=f"{names} running")


def held(simcluster: Any, pod: str) -> dict[int, tuple[str, float, float]]:
    """The exporter's view: node GPU index -> (UUID, utilisation, framebuffer used) of `pod`'s GPUs."""
    text = scrape(simcluster, NODE)
    util = series(text, "DCGM_FI_DEV_GPU_UTIL")
    used = series(text, "DCGM_FI_DEV_FB_USED")
    return {int(i): (lbl["UUID"], v, used[i][1]) for i, (lbl, v) in util.items() if lbl["pod"] == pod}


@SMI
def test_nvidia_smi_lists_the_pods_own_gpus(simcluster: Any, core: Any) -> None:
    core.create_namespaced_pod("default", gpu_pod("first", NODE, 1, annotations={"simcluster.ranks/gpu-util": "20"}))
    running(core, "first")
    core.create_namespaced_pod("default", gpu_pod("two", NODE, 2, annotations={"simcluster.ranks/gpu-util": "50"}))
    running(core, "two")  # before `hidden` asks for a GPU, so that `two` has the first free ones
    core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cpu"}, "spec": {
        "nodeName": NODE, "containers": [{"name": "main", "image": "python:3.12", "command": ["sleep", "infinity"]}]}})
    hidden = gpu_pod("hidden", NODE, 1)  # its spec blanks the variable, as the MPI operator does on launchers
    hidden["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": ""}]
    core.create_namespaced_pod("default", hidden)
    running(core, "cpu", "hidden")
    gpus = wait_for(lambda: (lambda h: h if len(h) == 2 else None)(held(simcluster, "two")), timeout=10,
                    what="the exporter's attribution")
    assert sorted(gpus) == [1, 2]  # the first free ones after `first`'s
    uuids = [gpus[i][0] for i in sorted(gpus)]
    # the container's devices are the exporter's
    out, _, code = run(core, "two", "echo $NVIDIA_VISIBLE_DEVICES")
    assert (code, out) == (0, ",".join(uuids) + "\n")
    # -L: numbered from 0 in the container
    out, err, code = run(core, "two", "nvidia-smi -L")
    assert code == 0, err
    assert out == "".join(f"GPU {n}: {A100} (UUID: {u})\n" for n, u in enumerate(uuids))
    # the query most people use, with the exporter's readings
    used = [int(gpus[i][2]) for i in sorted(gpus)]
    out, err, code = run(core, "two", "nvidia-smi --query-gpu=index,name,uuid,utilization.gpu,memory.used,"
                                      "memory.total --format=csv")
    assert code == 0, err
    assert out.splitlines() == [
        "index, name, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB]",
        *(f"{n}, {A100}, {u}, 50 %, {used[n]} MiB, 81920 MiB" for n, u in enumerate(uuids))]
    out, _, code = run(core, "two", "nvidia-smi --query-gpu=index,utilization.gpu,memory.used,memory.total "
                                    "--format=csv,noheader,nounits -i 1")
    assert (code, out) == (0, f"1, 50, {used[1]}, 81920\n")
    # the default table: every line as wide as the tool's, one block per GPU, no processes seen
    out, err, code = run(core, "two", "nvidia-smi")
    assert code == 0, err
    lines = out.splitlines()
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} {7}", lines[0]), lines[0]
    assert {len(ln) for ln in lines[1:] if ln.strip()} == {91}, out
    assert "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |" in lines
    for n in range(2):
        row = next(i for i, ln in enumerate(lines) if ln.startswith(f"|{n:>4}  {A100}"))
        assert lines[row].endswith("On  |   " + lines[row].split("|")[2].strip().split()[0] + " Off |" + " " * 20 + "0 |")
        memory = f"{used[n]}MiB /  81920MiB "
        assert lines[row + 1].endswith(f"|{memory:>24}|     50%      Default |"), lines[row + 1]
    assert "|  No running processes found" + " " * 61 + "|" in lines
    # no GPUs: the tool's own words and status
    for pod in ("cpu", "hidden"):
        out, _, code = run(core, pod, "nvidia-smi -L")
        assert (code, out) == (6, "No devices were found\n"), pod
    # bad input: the tool's messages, status 2
    out, _, code = run(core, "two", "nvidia-smi --query-gpu=index,bogus --format=csv")
    assert code == 2 and out.startswith('Field "bogus" is not a valid field to query.'), out
    out, _, code = run(core, "two", "nvidia-smi --query-gpu=index")
    assert code == 2 and "Invalid combination of input arguments" in out, out


@SMI
def test_gpus_are_freed_with_the_pod_and_read_only_in_their_namespace(simcluster: Any, core: Any,
                                                                     tmp_path: Path) -> None:
    sim = simcluster.sim
    core.create_namespaced_pod("default", gpu_pod("a", NODE, 2))
    running(core, "a")
    core.create_namespaced_pod("default", gpu_pod("b", NODE, 1))
    running(core, "b")
    first = wait_for(lambda: (lambda h: h if len(h) == 2 else None)(held(simcluster, "a")), timeout=10)
    assert sorted(first) == [0, 1]
    uuids = [first[i][0] for i in sorted(first)]
    # the driver answers a pod's own namespace about its own devices only
    ca = tmp_path / "ca.pem"
    ca.write_bytes(sim.ca_pem)

    def ask(ns: str, token: str) -> requests.Response:
        return requests.get(f"{sim.url}/apis/simcluster.ranks/v1/namespaces/{ns}/gpus", verify=str(ca), timeout=10,
                            params={"uuid": ",".join(uuids)}, headers={"Authorization": f"Bearer {token}"})

    own = ask("default", simcluster.call(sim.service_account_token, "default"))
    assert [g["uuid"] for g in own.json()["items"]] == uuids
    other_token = simcluster.call(sim.add_user, "system:serviceaccount:other:default")
    assert ask("default", other_token).status_code == 403
    assert ask("other", other_token).json()["items"] == []
    # a pod that goes away frees its GPUs: the next pod gets the first free ones, as the exporter says
    core.delete_namespaced_pod("a", "default", grace_period_seconds=0)
    wait_for(lambda: not held(simcluster, "a"), timeout=15, what="a's GPUs free")
    core.create_namespaced_pod("default", gpu_pod("c", NODE, 1))
    running(core, "c")
    out, _, code = run(core, "c", "nvidia-smi --query-gpu=uuid --format=csv,noheader")
    assert (code, out) == (0, f"{uuids[0]}\n")
    assert [u for u, _, _ in held(simcluster, "c").values()] == [uuids[0]]
