"""sessions/shell.py: which pod a shell opens (the lead, a rank by label, number or pod) and its
container; why it cannot open yet."""

from __future__ import annotations

from typing import Any

import pytest

from monitors.connection import ExitCode
from monitors.model import LiveModel
from sessions.exec_bridge import ExecError
from sessions.shell import NotYet, default_container, not_running_reason, pick_rank, shell_target
from tests.kubeflow_objects import job, pod
from tests.unit.session_objects import NS, mpi, workload
from tests.unit.test_model import load

# -- shell: which pod a shell opens ----------------------------------------------------------------


def test_mpi_shell_opens_the_launcher_found_by_label_despite_its_random_suffix() -> None:
    wl = mpi()
    r = pick_rank(wl)
    assert (r.pod, r.label, r.role) == ("hvd-launcher-x7k2p", "launcher", "launcher")


def test_mpi_without_a_launcher_pod_is_not_yet() -> None:
    """No worker stands in for a launcher that does not exist yet (the model gives no lead)."""
    with pytest.raises(NotYet) as err:
        pick_rank(mpi(with_launcher=False, workers_ready=False))
    assert "hvd has no launcher pod yet" in err.value.message and "0/2 ready" in err.value.message


def test_pytorch_master_tf_chief_and_xgboost_master_are_the_lead() -> None:
    pt = workload("PyTorchJob", "ddp", {"Master": 1, "Worker": 2},
                  [pod("PyTorchJob", "ddp", NS, "Worker", 1), pod("PyTorchJob", "ddp", NS, "Worker", 0),
                   pod("PyTorchJob", "ddp", NS, "Master", 0)])
    assert pick_rank(pt).pod == "ddp-master-0"
    tf = workload("TFJob", "tf", {"Chief": 1, "PS": 1, "Worker": 2},
                  [pod("TFJob", "tf", NS, "Worker", 0), pod("TFJob", "tf", NS, "PS", 0, gpus=0),
                   pod("TFJob", "tf", NS, "Chief", 0)])
    assert pick_rank(tf).pod == "tf-chief-0"
    xgb = workload("XGBoostJob", "xgb", {"Master": 1, "Worker": 1},
                   [pod("XGBoostJob", "xgb", NS, "Worker", 0), pod("XGBoostJob", "xgb", NS, "Master", 0)])
    assert pick_rank(xgb).pod == "xgb-master-0"


def test_rank_and_pod_choices() -> None:
    wl = workload("PyTorchJob", "ddp", {"Master": 1, "Worker": 2},
                  [pod("PyTorchJob", "ddp", NS, "Master", 0)] + [pod("PyTorchJob", "ddp", NS, "Worker", i)
                                                                 for i in range(2)])
    assert pick_rank(wl, rank="worker-1").pod == "ddp-worker-1"  # by label
    assert pick_rank(wl, rank="1").pod == "ddp-worker-0"  # by global rank: the master is rank 0
    assert pick_rank(wl, rank="0").pod == "ddp-master-0"
    assert pick_rank(wl, pod="ddp-worker-1").label == "worker-1"
    assert pick_rank(mpi(), rank="launcher").pod == "hvd-launcher-x7k2p"
    with pytest.raises(ExecError) as err:
        pick_rank(wl, rank="worker-7")
    assert err.value.code == ExitCode.NOT_FOUND
    assert err.value.message == ('no rank "worker-7" in ddp (ranks: master-0 (rank 0), worker-0 (rank 1), '
                                 'worker-1 (rank 2))')
    with pytest.raises(ExecError) as err:
        pick_rank(wl, pod="ddp-worker-9")
    assert err.value.code == ExitCode.NOT_FOUND
    assert err.value.message == 'pod "ddp-worker-9" is not one of the ranks of ddp (ddp-master-0, ddp-worker-0, ddp-worker-1)'


def test_a_pending_lead_is_chosen_and_says_why_it_cannot_take_a_shell() -> None:
    why = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."
    wl = workload("PyTorchJob", "p", {"Master": 1, "Worker": 1},
                  [pod("PyTorchJob", "p", NS, "Master", 0, phase="Pending", unschedulable=why),
                   pod("PyTorchJob", "p", NS, "Worker", 0)])
    lead = pick_rank(wl)
    assert lead.pod == "p-master-0" and lead.phase == "Pending"
    reason = not_running_reason(lead)
    assert reason is not None and reason.startswith("master-0 (p-master-0) is Pending") and why in reason
    assert not_running_reason(pick_rank(wl, rank="worker-0")) is None  # running: a shell can start


def test_no_pods_yet_is_not_yet() -> None:
    m = LiveModel()
    load(m, [job("PyTorchJob", "new", NS, {"Master": 1}, conditions=[("Created", "")])], [])
    with pytest.raises(NotYet) as err:
        pick_rank(m.workloads[(NS, "PyTorchJob", "new")])
    assert err.value.message.startswith("new has no pods yet")


class FakeClient:
    """Answers GET of a pod with the pod given; records the paths asked."""

    def __init__(self, pod_obj: dict[str, Any]) -> None:
        self.pod = pod_obj
        self.paths: list[str] = []

    async def get(self, path: str) -> dict[str, Any]:
        self.paths.append(path)
        return self.pod


async def test_shell_target_reads_the_pod_and_picks_its_container() -> None:
    wl = mpi()
    launcher = pick_rank(wl)
    raw = pod("MPIJob", "hvd", NS, "Launcher", None, gpus=0, name="hvd-launcher-x7k2p")
    raw["spec"]["containers"].insert(0, {"name": "istio-proxy", "image": "istio"})
    raw["metadata"]["annotations"] = {"kubectl.kubernetes.io/default-container": "main"}
    raw["spec"]["containers"][1]["env"] = [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"}]
    client = FakeClient(raw)
    target = await shell_target(client, wl, launcher)  # type: ignore[arg-type]
    assert client.paths == [f"/api/v1/namespaces/{NS}/pods/hvd-launcher-x7k2p"]
    assert target.container == "main"  # the pod's default container, not the first one
    assert [r.label for r in target.workers] == ["worker-0", "worker-1"]
    assert target.env == {"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile"}
    assert (await shell_target(client, wl, launcher, "istio-proxy")).container == "istio-proxy"  # type: ignore[arg-type]
    with pytest.raises(ExecError) as err:
        await shell_target(client, wl, launcher, "nope")  # type: ignore[arg-type]
    assert err.value.code == ExitCode.NOT_FOUND
    assert err.value.message == 'container "nope" is not in pod "hvd-launcher-x7k2p" (containers: istio-proxy, main)'


def test_default_container() -> None:
    p = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    assert default_container(p) == "a"
    p["metadata"]["annotations"] = {"kubectl.kubernetes.io/default-container": "b"}
    assert default_container(p) == "b"
    p["metadata"]["annotations"] = {"kubectl.kubernetes.io/default-container": "gone"}
    assert default_container(p) == "a"  # an annotation naming no container is ignored
    with pytest.raises(ExecError) as err:
        default_container({"metadata": {"name": "p"}, "spec": {"containers": []}})
    assert err.value.code == ExitCode.ERROR and err.value.message == 'pod "p" has no containers'
