"""RBAC as objects (`rbac.authorization.k8s.io/v1`: Role, ClusterRole, RoleBinding,
ClusterRoleBinding), evaluated as kube-apiserver's RBAC authorizer does, beside the rules simcluster
binds in memory (`auth.Authz`): a request is allowed when either allows it.

- a ClusterRoleBinding grants its ClusterRole's rules everywhere (cluster-scoped resources too);
- a RoleBinding grants its Role's (same namespace) or ClusterRole's rules inside its namespace;
- a subject matches by kind: `User` (the name), `Group` (one of the groups), `ServiceAccount`
  (`system:serviceaccount:NS:NAME`);
- a rule matches when its `apiGroups`, `resources` (`*`, `pods/*`, `pods/log`) and `verbs` do and,
  with `resourceNames`, only a request naming one of them;
- `nonResourceURLs` rules are not evaluated (nothing in simcluster asks).

The review endpoints (`reviews`) ask the same question for another identity."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .auth import SA_PREFIX, Identity
from .store import ObjectStore

GROUP = "rbac.authorization.k8s.io"


def _subject_matches(subject: Any, who: Identity, binding_ns: str) -> bool:
    if not isinstance(subject, dict):
        return False
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == who.name
    if kind == "Group":
        return name in who.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return who.name == f"{SA_PREFIX}{ns}:{name}"
    return False


def rule_allows(rule: Any, verb: str, group: str, resource: str, name: str | None) -> bool:
    """One PolicyRule against a request's attributes (`resource` may carry `/subresource`)."""
    if not isinstance(rule, dict):
        return False
    verbs = rule.get("verbs") or []
    if "*" not in verbs and verb not in verbs:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and group not in groups:
        return False
    resources = rule.get("resources") or []
    base, _, sub = resource.partition("/")
    if "*" not in resources and resource not in resources and not (sub and f"{base}/*" in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or (name is not None and name in names)


class RbacObjects:
    """The store's RBAC objects as an authorizer (`allows`) and as rules (`rules_for`)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def _objects(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.store.objects((GROUP, plural), namespace)

    def _role_rules(self, ref: Any, namespace: str) -> list[Any]:
        if not isinstance(ref, dict) or ref.get("apiGroup", GROUP) != GROUP:
            return []
        kind, name = ref.get("kind"), ref.get("name")
        if not isinstance(name, str):
            return []
        if kind == "ClusterRole":
            st = self.store.find((GROUP, "clusterroles"), "", name)
        elif kind == "Role" and namespace:
            st = self.store.find((GROUP, "roles"), namespace, name)
        else:
            return []
        rules = st.obj.get("rules") if st is not None else None
        return rules if isinstance(rules, list) else []

    def rules_for(self, who: Identity, namespace: str | None) -> Iterator[Any]:
        """Every rule granted to `who` that applies in `namespace` (None: cluster-wide only)."""
        for b in self._objects("clusterrolebindings"):
            if any(_subject_matches(s, who, "") for s in b.get("subjects") or ()):
                yield from self._role_rules(b.get("roleRef"), "")
        if namespace:
            for b in self._objects("rolebindings", namespace):
                if any(_subject_matches(s, who, namespace) for s in b.get("subjects") or ()):
                    yield from self._role_rules(b.get("roleRef"), namespace)

    def allows(self, who: Identity, verb: str, group: str, resource: str, namespace: str | None,
               name: str | None = None) -> bool:
        if not self.store.count((GROUP, "clusterrolebindings")) and not self.store.count((GROUP, "rolebindings")):
            return False
        return any(rule_allows(r, verb, group, resource, name) for r in self.rules_for(who, namespace))
