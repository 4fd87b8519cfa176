"""The GPU metrics' HTTP session (`monitors.prom_discovery`: Prometheus discovery, the exporters
through the API server's proxy) impersonates the user and every one of the user's groups, each
group as a header of its own, as kubectl sends them: a user whose rights come through a group (as
the SSH door's users' do) is let in, as on every other path to the cluster."""

from __future__ import annotations

from typing import Any

import pytest

from monitors.connection import load_cluster_config
from monitors.prom_discovery import ApiEndpoint

RBAC = "rbac.authorization.k8s.io"


def test_the_metrics_session_carries_each_impersonated_group(simcluster: Any, k8s: Any) -> None:
    client, api = k8s
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "team-g"}})
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_cluster_role({"metadata": {"name": "pod-lister"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]})
    rbac.create_namespaced_role_binding("team-g", {
        "metadata": {"name": "ml-lists"}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "pod-lister"},
        "subjects": [{"kind": "Group", "name": "ml", "apiGroup": RBAC}]})
    admin = str(simcluster.sim.kubeconfig_path)  # (the admin may impersonate, as the door's identity may)
    url = "/api/v1/namespaces/team-g/pods"

    def status(groups: tuple[str, ...]) -> int:
        cfg = load_cluster_config(admin, None, impersonate_user="gwen", impersonate_groups=groups)
        session = ApiEndpoint(cfg.server, credentials=cfg, server_hostname=cfg.tls_server_name).new_session()
        with session:
            return session.get(cfg.server + url, timeout=30).status_code

    assert status(("other", "ml")) == 200  # the second group's binding: both groups were sent
    assert status(("ml",)) == 200
    assert status(("other",)) == 403
    assert status(()) == 403


pytestmark = pytest.mark.simcluster(components=())
