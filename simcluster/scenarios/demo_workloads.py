"""The demo's workloads: one of each thing the views must show (see load_demo_workloads)."""

from __future__ import annotations

from typing import Any

# the image's program (the kubelet copies workloads/train_sim.py into each pod's /workspace, its
# working directory), run by the image's `python`: no path of the machine running the simulator
TRAIN = "train_sim.py"
PY = "python"
UTIL = "simcluster.ranks/gpu-util"
XID = "simcluster.ranks/gpu-xid"  # the failing rank's GPU raises an XID before it exits
ANNOTATION_OF = "simcluster.ranks/profile-of"  # the job the two above were written for (simcluster.gpu.profiles)

FIELDS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "XGBoostJob": "xgbReplicaSpecs",
          "MPIJob": "mpiReplicaSpecs"}
CONTAINERS = {"PyTorchJob": "pytorch", "TFJob": "tensorflow", "XGBoostJob": "xgboost", "MPIJob": "mpi"}


def replica(kind: str, command: list[str], *, replicas: int = 1, gpus: int = 1, util: str | None = None,
            restart: str = "OnFailure", pool: str | None = None, xid: str | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": CONTAINERS[kind], "image": "nvcr.io/nvidia/pytorch:24.10-py3",
                                 "command": command}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}
    annotations = {**({UTIL: util} if util else {}), **({XID: xid} if xid else {})}
    meta: dict[str, Any] = {"annotations": annotations} if annotations else {}
    spec: dict[str, Any] = {"containers": [container]}
    if pool:
        spec["nodeSelector"] = {"node-pool": pool}
    return {"replicas": replicas, "restartPolicy": restart, "template": {"metadata": meta, "spec": spec}}


def job(kind: str, name: str, ns: str, replicas: dict[str, dict[str, Any]], *, user: str,
        run_policy: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    version = "v2beta1" if kind == "MPIJob" else "v1"
    for rspec in replicas.values():  # its GPU profiles are its own: a copy elsewhere reads as any pod
        notes = ((rspec.get("template") or {}).get("metadata") or {}).get("annotations")
        if notes:
            notes[ANNOTATION_OF] = name
    return {
        "apiVersion": f"kubeflow.org/{version}", "kind": kind,
        "metadata": {"name": name, "namespace": ns, "labels": {"ranks/user": user}},
        "spec": {FIELDS[kind]: replicas, "runPolicy": run_policy or {"cleanPodPolicy": "None"}, **spec},
    }


def train(*extra: str) -> list[str]:
    return [PY, "-u", TRAIN, *extra]


# the image's train.py (simcluster/node/launchers/train.py): rank 1 hangs at step 7 in its data loader
HANGS = [PY, "-u", "train.py", "--steps", "100000", "--step-seconds", "2", "--busy", "0.05",
         "--hang-rank", "1", "--hang-in", "loader", "--hang-step", "7"]


# what `ranks submit --interactive --jupyter` gives the lead: the image's Jupyter, then `sleep infinity`
JUPYTER = ["/bin/sh", "-c", "command -v jupyter >/dev/null 2>&1 && { jupyter lab --ip=0.0.0.0 --port=8888 "
           "--no-browser --allow-root >/tmp/jupyter.log 2>&1 & }; exec sleep infinity"]


def session(kind: str, name: str, ns: str, workers: int, *, user: str, project: str, pool: str,
            jupyter: bool = False) -> dict[str, Any]:
    """An interactive session as `ranks submit NAME --framework mpi|pytorch --workers N -g 1
    --node-pool POOL --interactive` creates it: the interactive marker, the project and user labels,
    `sleep infinity` on the MPI launcher (the workers keep the operator's sshd) or on every PyTorch
    replica, a 1 s grace period, one GPU per rank (none on the launcher). No utilisation profile: the
    GPUs' utilisation follows what runs in the pods (idle until a launch, busy while train.py runs).
    `jupyter`: the lead runs the image's Jupyter on port 8888 first (`--jupyter`)."""
    labels = {"project": project, "ranks/user": user}

    def replica(command: list[str] | None, replicas: int, gpus: int, restart: str, lead: bool = False
                ) -> dict[str, Any]:
        container: dict[str, Any] = {"name": CONTAINERS[kind], "image": "nvcr.io/nvidia/pytorch:24.10-py3"}
        if command:
            container["command"] = command
        if lead and jupyter:
            container["command"] = JUPYTER
            container["ports"] = [{"containerPort": 8888, "name": "jupyter", "protocol": "TCP"}]
        if gpus:
            container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)},
                                      "requests": {"nvidia.com/gpu": str(gpus)}}
        meta: dict[str, Any] = {"labels": dict(labels)}
        return {"replicas": replicas, "restartPolicy": restart, "template": {"metadata": meta, "spec": {
            "containers": [container], "terminationGracePeriodSeconds": 1,
            "nodeSelector": {"run.ai/node-pool": pool}}}}

    sleep = ["sleep", "infinity"]
    if kind == "MPIJob":
        replicas = {"Launcher": replica(sleep, 1, 0, "OnFailure", lead=True), "Worker": replica(None, workers, 1, "Never")}
        extra: dict[str, Any] = {"slotsPerWorker": 1, "launcherCreationPolicy": "WaitForWorkersReady"}
    else:
        replicas = {"Master": replica(sleep, 1, 1, "OnFailure", lead=True),
                    "Worker": replica(sleep, workers, 1, "OnFailure")}
        extra = {}
    obj = job(kind, name, ns, replicas, user=user, run_policy={"cleanPodPolicy": "Running"}, **extra)
    obj["metadata"]["labels"] = dict(labels)
    obj["metadata"]["annotations"] = {"ranks/interactive": "true"}
    return obj


def demo_workloads() -> list[dict[str, Any]]:
    a, b = "runai-team-a", "runai-team-b"
    return [
        # interactive sessions waiting for a researcher's shell: Horovod (the launcher sleeps) and
        # PyTorch (every replica sleeps; torchrun is started on each node by hand; its master runs the
        # image's Jupyter on port 8888: `ranks port-forward pt-interactive 8888`)
        session("MPIJob", "hvd-interactive", a, 2, user="alice", project="team-a", pool="a100"),
        session("PyTorchJob", "pt-interactive", a, 2, user="alice", project="team-a", pool="a100", jupyter=True),
        # a training run with realistic rank logs (step N/5000: an ETA); worker-2 is a straggler
        job("PyTorchJob", "llama-finetune", a, {
            "Master": replica("PyTorchJob", train("--interval", "1.5", "--straggler-rank", "3", "--total", "5000"),
                              gpus=2, util="noisy:88:5", pool="h100"),
            "Worker": replica("PyTorchJob", train("--interval", "1.5", "--straggler-rank", "3", "--total", "5000"),
                              replicas=3, gpus=2, util="noisy:86:6,noisy:85:6", pool="h100"),
        }, user="alice"),
        job("TFJob", "resnet-tf", b, {
            "Chief": replica("TFJob", train("--interval", "2.5"), util="72"),
            "Worker": replica("TFJob", train("--interval", "2.5"), replicas=2, util="noisy:70:8"),
            "PS": replica("TFJob", train("--interval", "5"), gpus=0),
        }, user="bob"),
        job("XGBoostJob", "xgb-churn", "research", {
            "Master": replica("XGBoostJob", train("--interval", "3", "--batch", "4096"), util="35"),
            "Worker": replica("XGBoostJob", train("--interval", "3", "--batch", "4096"), replicas=2, util="33"),
        }, user="carol"),
        # a non-zero rank fails first with a Python traceback
        job("PyTorchJob", "bert-crash", b, {
            "Master": replica("PyTorchJob", train("--interval", "1", "--fail-rank", "2", "--fail-at", "8"),
                              restart="Never", util="60"),
            "Worker": replica("PyTorchJob", train("--interval", "1", "--fail-rank", "2", "--fail-at", "8"),
                              replicas=2, restart="Never", util="60", xid="79@5;RANK=2"),
        }, user="bob"),
        # a gang that cannot fit: 5 x 8 GPUs in a pool of 4 x 8
        job("PyTorchJob", "big-pretrain", a, {
            "Master": replica("PyTorchJob", train(), gpus=8, pool="h100"),
            "Worker": replica("PyTorchJob", train(), replicas=4, gpus=8, pool="h100"),
        }, user="alice", run_policy={"cleanPodPolicy": "None", "schedulingPolicy": {"minAvailable": 5}}),
        # finishes within seconds
        job("PyTorchJob", "mnist-quick", "research", {
            "Master": replica("PyTorchJob", train("--steps", "3", "--interval", "0.3"), util="50"),
            "Worker": replica("PyTorchJob", train("--steps", "3", "--interval", "0.3"), util="50"),
        }, user="carol"),
        # hung: logs stop after step 6 and the GPUs go idle after 20 s; rank 1 is stuck loading a
        # batch, rank 0 waits for it in the all-reduce (what `ranks stacks` shows)
        job("PyTorchJob", "gpt-hung", b, {
            "Master": replica("PyTorchJob", HANGS, util="stall:90:20"),
            "Worker": replica("PyTorchJob", HANGS, util="stall:90:20"),
        }, user="bob"),
    ]
