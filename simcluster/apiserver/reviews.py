"""`authorization.k8s.io/v1`: the access reviews, answered from simcluster's RBAC (`auth.Authz`,
RBAC objects included) as kube-apiserver answers them. Each is create-only and stored nowhere:

- `subjectaccessreviews` (cluster-scoped): may `spec.user` with `spec.groups` do
  `spec.resourceAttributes` (verb, group, resource, subresource, namespace, name)? The caller needs
  `create` on `subjectaccessreviews`; the groups are taken as given (none added);
- `localsubjectaccessreviews` (namespaced): the same, within the request's namespace;
- `selfsubjectaccessreviews`: the same question for the caller (after impersonation), allowed to
  every identity, as kube's `system:basic-user` allows it;
- `selfsubjectrulesreviews`: the caller's rules in `spec.namespace` (`status.resourceRules`).

The answer is the request with `status` ({allowed, denied?, reason}), 201."""

from __future__ import annotations

from typing import Any

from .auth import MASTERS, Authz, Identity
from .errors import ApiError

GROUP = "authorization.k8s.io"
PLURALS = ("subjectaccessreviews", "localsubjectaccessreviews", "selfsubjectaccessreviews",
           "selfsubjectrulesreviews")


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def answer(plural: str, body: dict[str, Any], who: Identity, namespace: str | None, authz: Authz) -> dict[str, Any]:
    """The review `body` answered for `who` (the caller); ApiError for a malformed one."""
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise ApiError(400, f"{plural}: spec is required")
    out = {"apiVersion": f"{GROUP}/v1", "kind": body.get("kind") or "", "metadata": {"creationTimestamp": None},
           "spec": spec}
    if plural == "selfsubjectrulesreviews":
        out["status"] = rules_review(who, _str(spec.get("namespace")) or None, authz)
        return out
    if plural in ("subjectaccessreviews", "localsubjectaccessreviews"):
        user = _str(spec.get("user"))
        groups = spec.get("groups") or []
        if not user and not groups:
            raise ApiError(422, f'{body.get("kind") or plural} is invalid: spec.user: Invalid value: "": '
                                "at least one of user or group must be specified")
        subject = Identity(user, tuple(g for g in groups if isinstance(g, str)))
    else:
        subject = who
    attrs = spec.get("resourceAttributes")
    if not isinstance(attrs, dict):
        if isinstance(spec.get("nonResourceAttributes"), dict):  # (nothing here is a non-resource URL)
            out["status"] = {"allowed": MASTERS in subject.groups}
            return out
        raise ApiError(422, f"{plural}: exactly one of nonResourceAttributes or resourceAttributes must be specified")
    ns = _str(attrs.get("namespace")) or None
    if plural == "localsubjectaccessreviews":
        if ns is not None and ns != namespace:
            raise ApiError(422, f"spec.resourceAttributes.namespace must match the request's ({namespace})")
        ns = namespace
    resource = _str(attrs.get("resource"))
    if sub := _str(attrs.get("subresource")):
        resource = f"{resource}/{sub}"
    allowed = authz.allowed(subject, _str(attrs.get("verb")), _str(attrs.get("group")), resource, ns,
                            _str(attrs.get("name")) or None)
    out["status"] = {"allowed": allowed} if allowed else {"allowed": False, "reason": ""}
    return out


def rules_review(who: Identity, namespace: str | None, authz: Authz) -> dict[str, Any]:
    """`who`'s resource rules in `namespace`: the in-memory rules that apply there and those of
    the RBAC objects."""
    if MASTERS in who.groups:
        rules = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
    else:
        rules = [{"verbs": sorted(r.verbs), "apiGroups": sorted(r.groups), "resources": sorted(r.resources)}
                 for r in authz.rules_of(who) if r.namespaces is None or (namespace and namespace in r.namespaces)]
        if authz.objects is not None:
            for r in authz.objects.rules_for(who, namespace):
                if isinstance(r, dict) and not r.get("nonResourceURLs"):
                    rules.append({k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if r.get(k)})
    # (kube adds system:basic-user's: every identity may review itself)
    rules.append({"verbs": ["create"], "apiGroups": [GROUP],
                  "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]})
    return {"resourceRules": rules, "nonResourceRules": [], "incomplete": False}
