"""simcluster's RBAC as objects (Role, ClusterRole, RoleBinding, ClusterRoleBinding) and the
access reviews (`authorization.k8s.io/v1`) answered from it, through the official client: what
the SSH door's one watch asks the API server for each user (issue #31)."""

from __future__ import annotations

import pytest
from kubernetes import client as kclient
from kubernetes import config as kconfig
from kubernetes.client.rest import ApiException


def _client(simcluster, tmp_path, user: str) -> kclient.ApiClient:
    path = simcluster.sim.write_kubeconfig(tmp_path / f"{user}.yaml", user=user)
    return kconfig.new_client_from_config(config_file=str(path))


def sar(authz: kclient.AuthorizationV1Api, user: str, groups: list[str], verb: str, resource: str,
        namespace: str = "", group: str = "") -> bool:
    spec = kclient.V1SubjectAccessReviewSpec(user=user, groups=groups, resource_attributes=kclient.V1ResourceAttributes(
        verb=verb, resource=resource, namespace=namespace, group=group))
    return authz.create_subject_access_review(kclient.V1SubjectAccessReview(spec=spec)).status.allowed


def test_bindings_as_objects_decide_and_reviews_say_so(simcluster, k8s, tmp_path) -> None:
    client, api = k8s
    sim = simcluster.sim
    simcluster.call(sim.add_user, "erin")
    for ns in ("team-x", "team-y"):
        client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
    rbac = client.RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role("team-x", {"metadata": {"name": "reader"}, "rules": [
        {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]}]})
    rbac.create_namespaced_role_binding("team-x", {
        "metadata": {"name": "erin-reads"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                         "name": "reader"},
        "subjects": [{"kind": "User", "name": "erin", "apiGroup": "rbac.authorization.k8s.io"}]})
    rbac.create_cluster_role({"metadata": {"name": "events-reader"}, "rules": [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]}]})
    rbac.create_namespaced_role_binding("team-y", {
        "metadata": {"name": "ml-events"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                                        "name": "events-reader"},
        "subjects": [{"kind": "Group", "name": "ml", "apiGroup": "rbac.authorization.k8s.io"}]})
    erin = _client(simcluster, tmp_path, "erin")
    try:
        assert kclient.CoreV1Api(erin).list_namespaced_pod("team-x").items == []  # the RoleBinding lets her
        with pytest.raises(ApiException) as exc:
            kclient.CoreV1Api(erin).list_namespaced_pod("team-y")
        assert exc.value.status == 403
        # the same answers to a SubjectAccessReview, asked by the door's identity
        door = kclient.AuthorizationV1Api(_client(simcluster, tmp_path, "ranks-ssh"))
        assert sar(door, "erin", [], "list", "pods", "team-x")
        assert sar(door, "erin", [], "get", "pods", "team-x")
        assert not sar(door, "erin", [], "delete", "pods", "team-x")
        assert not sar(door, "erin", [], "list", "pods", "team-y")
        assert not sar(door, "erin", [], "list", "pods")  # (not cluster-wide)
        assert not sar(door, "erin", [], "list", "events", "team-y")  # the group's binding, erin in no group
        assert sar(door, "erin", ["ml"], "list", "events", "team-y")
        assert not sar(door, "erin", ["ml"], "watch", "events", "team-y")
        # removed, then back: decided anew each time
        rbac.delete_namespaced_role_binding("erin-reads", "team-x")
        assert not sar(door, "erin", [], "list", "pods", "team-x")
        with pytest.raises(ApiException) as exc:
            kclient.CoreV1Api(erin).list_namespaced_pod("team-x")
        assert exc.value.status == 403
        rbac.create_cluster_role_binding({
            "metadata": {"name": "erin-everywhere"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "events-reader"},
            "subjects": [{"kind": "User", "name": "erin", "apiGroup": "rbac.authorization.k8s.io"}]})
        assert sar(door, "erin", [], "list", "events")
        # the self reviews: every identity may ask about itself
        mine = kclient.AuthorizationV1Api(erin)
        ssar = mine.create_self_subject_access_review(kclient.V1SelfSubjectAccessReview(
            spec=kclient.V1SelfSubjectAccessReviewSpec(resource_attributes=kclient.V1ResourceAttributes(
                verb="list", resource="events", namespace="team-y"))))
        assert ssar.status.allowed
        rules = mine.create_self_subject_rules_review(kclient.V1SelfSubjectRulesReview(
            spec=kclient.V1SelfSubjectRulesReviewSpec(namespace="team-y"))).status.resource_rules
        assert any(r.resources == ["events"] and r.verbs == ["list"] for r in rules)
        assert not any("pods" in (r.resources or []) for r in rules)
        # a SubjectAccessReview needs `create` on them: erin may not ask about others
        with pytest.raises(ApiException) as exc:
            sar(mine, "alice", [], "list", "pods", "team-x")
        assert exc.value.status == 403
    finally:
        erin.close()
