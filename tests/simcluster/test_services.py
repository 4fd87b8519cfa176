"""What simcluster's components offer each other is declared on `SimCluster`: a component that is
not installed is None there (never a missing attribute), one that is installed is its service,
and the components' Event recorders are shared through the cluster, not through its `__dict__`."""

from __future__ import annotations

import pytest

from simcluster.cluster import SimCluster
from simcluster.controllers.base import record_event
from simcluster.gpu.dcgm import Dcgm
from simcluster.node.exec import ExecService
from simcluster.node.kubelet import Kubelet
from simcluster.node.proxy import PortMap, Proxy


def _services(sim: SimCluster) -> dict[str, object]:
    return {"kubelet": sim.kubelet, "exec": sim.exec_service, "proxy": sim.proxy, "portmap": sim.portmap,
            "dcgm": sim.dcgm, "devices": sim.devices}


def test_a_cluster_without_components_has_none_of_their_services(tmp_path):
    sim = SimCluster(workdir=tmp_path, components=())
    assert _services(sim) == dict.fromkeys(("kubelet", "exec", "proxy", "portmap", "dcgm", "devices"))


@pytest.mark.simcluster(components=("kubelet", "exec", "dcgm"))
def test_installed_components_are_their_services(simcluster):
    services = simcluster.call(_services, simcluster.sim)
    assert isinstance(services["kubelet"], Kubelet)
    assert isinstance(services["exec"], ExecService)
    assert isinstance(services["dcgm"], Dcgm)
    assert isinstance(services["proxy"], Proxy)  # dcgm installs the proxies
    assert isinstance(services["portmap"], PortMap)
    assert services["devices"] is None  # made on first use, by the first container holding a GPU


def test_a_component_records_its_events_through_one_shared_recorder(tmp_path):
    sim = SimCluster(workdir=tmp_path, components=())
    sim.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    pod = sim.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                     "spec": {"containers": [{"name": "c", "image": "x"}]}})
    for _ in range(2):
        record_event(sim, pod, "Normal", "Pulled", "already present", "kubelet", host="node-1")
    assert list(sim.event_recorders) == ["kubelet"]
    assert not [k for k in vars(sim) if k.startswith("_event")]
    events = [st.obj for st in sim.store.items(("", "events"))]
    assert [(e["reason"], e["count"], e["source"]) for e in events] == [
        ("Pulled", 2, {"component": "kubelet", "host": "node-1"})]
