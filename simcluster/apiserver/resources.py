"""The kinds simcluster serves: built-in resource types and those declared by CRDs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)


@dataclass(frozen=True)
class ResourceType:
    """One served resource: enough to route requests, answer discovery and print tables."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()
    printer_columns: tuple[dict[str, Any], ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    from_crd: bool = False

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: objects are kept once per group and plural."""
        return (self.group, self.plural)

    def base_path(self, namespace: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else "/api/v1"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"

    def discovery_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        return entry


def _core(kind: str, plural: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    return ResourceType("", "v1", kind, plural, namespaced, **kw)


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _core("Namespace", "namespaces", False, short_names=("ns",), subresources=("status",),
          verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
    _core("Node", "nodes", False, short_names=("no",), subresources=("status", "proxy")),
    _core("Pod", "pods", short_names=("po",), categories=("all",),
          subresources=("status", "log", "exec", "proxy", "attach", "portforward", "ephemeralcontainers")),
    _core("Event", "events", short_names=("ev",)),
    _core("Service", "services", short_names=("svc",), categories=("all",),
          subresources=("status", "proxy"),
          verbs=("create", "delete", "get", "list", "patch", "update", "watch")),
    _core("ConfigMap", "configmaps", short_names=("cm",)),
    _core("Secret", "secrets"),
    _core("ServiceAccount", "serviceaccounts", short_names=("sa",)),
    _core("ResourceQuota", "resourcequotas", short_names=("quota",), subresources=("status",)),
    _core("PersistentVolumeClaim", "persistentvolumeclaims", short_names=("pvc",),
          subresources=("status",)),
    ResourceType("batch", "v1", "Job", "jobs", True, categories=("all",), subresources=("status",)),
    ResourceType("apps", "v1", "Deployment", "deployments", True, short_names=("deploy",), categories=("all",),
                 subresources=("status", "scale")),
    ResourceType("apps", "v1", "ReplicaSet", "replicasets", True, short_names=("rs",), categories=("all",),
                 subresources=("status", "scale")),
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    ResourceType("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", False,
                 verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "LocalSubjectAccessReview", "localsubjectaccessreviews", True,
                 verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", False,
                 verbs=("create",)),
    ResourceType("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", False,
                 verbs=("create",)),
    ResourceType("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
                 "customresourcedefinitions", False, short_names=("crd", "crds"),
                 categories=("api-extensions",), subresources=("status",)),
)


@dataclass
class Registry:
    """Every served type, indexed the ways requests and manifests name them."""

    _by_path: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    _by_kind: dict[tuple[str, str], ResourceType] = field(default_factory=dict)

    @classmethod
    def with_builtins(cls) -> Registry:
        reg = cls()
        for rt in BUILTIN_TYPES:
            reg.add(rt)
        return reg

    def add(self, rt: ResourceType) -> None:
        self._by_path[(rt.group, rt.version, rt.plural)] = rt
        self._by_kind[(rt.api_version, rt.kind)] = rt

    def remove(self, group: str, version: str, plural: str) -> None:
        rt = self._by_path.pop((group, version, plural), None)
        if rt is not None:
            self._by_kind.pop((rt.api_version, rt.kind), None)

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return self._by_kind.get((api_version, kind))

    def find_plural(self, group: str, plural: str) -> ResourceType | None:
        for (g, _v, p), rt in self._by_path.items():
            if g == group and p == plural:
                return rt
        return None

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(list(self._by_path.values()))

    def groups(self) -> dict[str, dict[str, list[ResourceType]]]:
        """group -> version -> types, core group first, in a stable order."""
        out: dict[str, dict[str, list[ResourceType]]] = {}
        for rt in sorted(self._by_path.values(), key=lambda r: (r.group != "", r.group, r.version)):
            out.setdefault(rt.group, {}).setdefault(rt.version, []).append(rt)
        return out


def types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    """The resource types a CustomResourceDefinition declares (one per served version)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group", "")
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    out = []
    for ver in spec.get("versions") or []:
        if not ver.get("served", True):
            continue
        subs = tuple(sorted((ver.get("subresources") or {}).keys()))
        out.append(
            ResourceType(
                group=group,
                version=ver["name"],
                kind=names.get("kind", ""),
                plural=names.get("plural", ""),
                namespaced=namespaced,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=subs,
                printer_columns=tuple(ver.get("additionalPrinterColumns") or ()),
                from_crd=True,
            )
        )
    return out
