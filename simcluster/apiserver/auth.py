"""Identities and permissions: bearer tokens, RBAC-like rules, impersonation."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

from .errors import ApiError, forbidden

MASTERS = "system:masters"


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
    anonymous: bool = False
    # Like the old insecure port: without TLS, clients (kubectl) send no token, so a request
    # without credentials is the cluster admin. Only ever on loopback.
    insecure_admin: bool = False

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

    def expire(self, token: str) -> None:
        self.expired.add(token)

    def authenticate(self, authorization: str | None) -> Identity:
        if authorization and authorization[:7].lower() == "bearer ":  # the scheme is case-insensitive
            tok = authorization[7:].strip()
            ident = self.tokens.get(tok)
            if ident is not None and tok not in self.expired:
                return ident
        elif self.insecure_admin and not authorization:
            return Identity("system:unsecured", (MASTERS, "system:authenticated"))
        elif self.anonymous and not authorization:
            return Identity("system:anonymous", ("system:unauthenticated",))
        raise ApiError(401, "Unauthorized")

    def allowed(
        self, who: Identity, verb: str, group: str, resource: str, namespace: str | None
    ) -> bool:
        if MASTERS in who.groups:
            return True
        subjects = [f"user:{who.name}", *(f"group:{g}" for g in who.groups)]
        for s in subjects:
            for rule in self.bindings.get(s, ()):
                if rule.allows(verb, group, resource, namespace):
                    return True
        return False

    def authorize(
        self,
        who: Identity,
        verb: str,
        group: str,
        resource: str,
        namespace: str | None,
        name: str | None = None,
    ) -> None:
        if not self.allowed(who, verb, group, resource, namespace):
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
