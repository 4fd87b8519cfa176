"""Identities and permissions: bearer tokens, RBAC-like rules, impersonation.

Every request needs a valid bearer token (kube-apiserver with `--anonymous-auth=false`): one
without gets 401 Unauthorized, with TLS or without. Pods get their own namespace's service
account (`service_account_token`), whose rules cover what the simulated launchers need in that
namespace only. These identities are for exercising ranks, not a security boundary: every pod is
a process of the one OS user running simcluster.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiError, forbidden

MASTERS = "system:masters"
SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class Rule:
    """Allows `verbs` on `resources` (plural or plural/subresource; "*" for all) in `groups`.

    `namespaces` None means everywhere, cluster-scoped resources included (a ClusterRole
    bound cluster-wide); otherwise only inside the listed namespaces (RoleBindings).
    """

    verbs: frozenset[str]
    resources: frozenset[str] = frozenset({"*"})
    groups: frozenset[str] = frozenset({"*"})
    namespaces: frozenset[str] | None = None

    @classmethod
    def of(
        cls,
        verbs: Iterable[str],
        resources: Iterable[str] = ("*",),
        groups: Iterable[str] = ("*",),
        namespaces: Iterable[str] | None = None,
    ) -> Rule:
        return cls(
            frozenset(verbs),
            frozenset(resources),
            frozenset(groups),
            None if namespaces is None else frozenset(namespaces),
        )

    def allows(self, verb: str, group: str, resource: str, namespace: str | None) -> bool:
        if "*" not in self.verbs and verb not in self.verbs:
            return False
        if "*" not in self.groups and group not in self.groups:
            return False
        if "*" not in self.resources and resource not in self.resources:
            base = resource.split("/")[0]
            if f"{base}/*" not in self.resources:
                return False
        return not (self.namespaces is not None and (namespace is None or namespace not in self.namespaces))


READ_VERBS = ("get", "list", "watch")


def service_account_name(namespace: str, name: str = "default") -> str:
    return f"{SA_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated")


def service_account_rules(namespace: str) -> tuple[Rule, ...]:
    """What a pod's service account may do: what the simulated launchers need (read pods, their
    logs, exec into them) in its own namespace, nothing else (no secrets, no other namespace).
    The torchrun rendezvous of its namespace is allowed by `rendezvous` itself."""
    return (
        Rule.of(READ_VERBS, ["pods", "pods/log"], [""], namespaces=[namespace]),
        Rule.of(("create", "get"), ["pods/exec"], [""], namespaces=[namespace]),
    )


@dataclass(frozen=True)
class Identity:
    name: str
    groups: tuple[str, ...] = ()


@dataclass
class Authz:
    """Tokens map to identities; rules are bound to users ("user:NAME") and groups ("group:NAME")."""

    tokens: dict[str, Identity] = field(default_factory=dict)
    bindings: dict[str, list[Rule]] = field(default_factory=dict)
    expired: set[str] = field(default_factory=set)
    # `system:anonymous` for a request without credentials (kube's --anonymous-auth); off in
    # simcluster (nothing turns it on): such a request gets 401
    anonymous: bool = False
    # RBAC objects (`rbac.RbacObjects`, set by the cluster): what they grant is allowed too
    objects: Any = None

    def add_user(
        self,
        name: str,
        *,
        token: str | None = None,
        groups: Iterable[str] = (),
        rules: Iterable[Rule] = (),
    ) -> str:
        token = token or secrets.token_urlsafe(24)
        self.tokens[token] = Identity(name, tuple(groups))
        if rules:
            self.bindings.setdefault(f"user:{name}", []).extend(rules)
        return token

    def bind(self, subject: str, *rules: Rule) -> None:
        self.bindings.setdefault(subject, []).extend(rules)

    def token_for(self, name: str) -> str | None:
        for tok, ident in self.tokens.items():
            if ident.name == name and tok not in self.expired:
                return tok
        return None

    def service_account_token(self, namespace: str, name: str = "default") -> str:
        """The token of `system:serviceaccount:<namespace>:<name>`: the one already there (a
        scenario's or a test's `add_user` of that name keeps its own rules), else a new one with
        `service_account_rules(namespace)`."""
        user = service_account_name(namespace, name)
        tok = self.token_for(user)
        if tok is not None:
            return tok
        rules = () if f"user:{user}" in self.bindings else service_account_rules(namespace)
        return self.add_user(user, groups=service_account_groups(namespace), rules=rules)

    def expire(self, token: str) -> None:
        self.expired.add(token)

    def authenticate(self, authorization: str | None) -> Identity:
        if authorization and authorization[:7].lower() == "bearer ":  # the scheme is case-insensitive
            tok = authorization[7:].strip()
            ident = self.tokens.get(tok)
            if ident is not None and tok not in self.expired:
                return ident
        elif self.anonymous and not authorization:
            return Identity("system:anonymous", ("system:unauthenticated",))
        raise ApiError(401, "Unauthorized")

    def allowed(
        self, who: Identity, verb: str, group: str, resource: str, namespace: str | None,
        name: str | None = None,
    ) -> bool:
        if MASTERS in who.groups:
            return True
        for rule in self.rules_of(who):
            if rule.allows(verb, group, resource, namespace):
                return True
        return self.objects is not None and self.objects.allows(who, verb, group, resource, namespace, name)

    def rules_of(self, who: Identity) -> list[Rule]:
        """The in-memory rules bound to `who` (its user and its groups)."""
        return [rule for s in (f"user:{who.name}", *(f"group:{g}" for g in who.groups))
                for rule in self.bindings.get(s, ())]

    def authorize(
        self,
        who: Identity,
        verb: str,
        group: str,
        resource: str,
        namespace: str | None,
        name: str | None = None,
    ) -> None:
        if not self.allowed(who, verb, group, resource, namespace, name):
            raise forbidden(who.name, verb, resource, group, namespace, name)

    def impersonate(self, who: Identity, user: str | None, groups: list[str]) -> Identity:
        """Honour Impersonate-User / Impersonate-Group for identities allowed to impersonate."""
        if not user and not groups:
            return who
        if not user:
            raise ApiError(400, "requested impersonation of groups without impersonating a user")
        if not self.allowed(who, "impersonate", "", "users", None):
            raise ApiError(
                403,
                f'users "{user}" is forbidden: User "{who.name}" cannot impersonate resource '
                f'"users" in API group "" at the cluster scope',
                details={"name": user, "kind": "users"},
            )
        for g in groups:
            if not self.allowed(who, "impersonate", "", "groups", None):
                raise ApiError(
                    403,
                    f'groups "{g}" is forbidden: User "{who.name}" cannot impersonate resource '
                    f'"groups" in API group "" at the cluster scope',
                    details={"name": g, "kind": "groups"},
                )
        return Identity(user, (*tuple(groups), "system:authenticated"))
