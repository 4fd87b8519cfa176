"""What a container's process is given: environment, command line, downward API values.

Follows the kubelet (`pkg/kubelet/kubelet_pods.go` makeEnvironmentVariables and the forked
`third_party/forked/golang/expansion`):

- order: service variables (only `KUBERNETES_*` here), then `envFrom` sources in order (values
  not expanded, keys with an optional prefix), then `env` entries in order; each `env` value is
  `$(VAR)`-expanded against everything defined before it (`$$` is an escaped `$`, an unknown
  `$(X)` stays as written);
- `valueFrom`: `fieldRef` (metadata.name/namespace/uid, metadata.labels['k'],
  metadata.annotations['k'], spec.nodeName, spec.serviceAccountName, status.podIP(s),
  status.hostIP(s)), `resourceFieldRef` (limits/requests cpu, memory, ephemeral-storage and
  extended resources, with divisor; an unset limit is the node's allocatable), `configMapKeyRef`,
  `secretKeyRef` (a missing non-optional source is a `CreateContainerConfigError`);
- command and args are expanded against the container's final environment.

simcluster specific: without pod namespaces (`podns`) processes see the host's filesystem, so
absolute paths that point into volumes would miss the pod's files. `rewrite_paths` maps env values (and whole argv elements) that are absolute
paths at or under a volume mountPath to the pod root: with a ConfigMap mounted at `/etc/mpi`,
`OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile` becomes `<root>/etc/mpi/hostfile`.
Colon-separated lists of absolute paths are rewritten element by element.
"""

from __future__ import annotations

import base64
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

_LABEL_RE = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")
_ENV_NAME_RE = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class ContainerConfigError(Exception):
    """The container cannot be configured (kubelet reason `CreateContainerConfigError`)."""


# -- $(VAR) expansion ------------------------------------------------------------------------------


def expand(value: str, lookup: Callable[[str], str | None]) -> str:
    """Kubernetes `$(VAR)` expansion (third_party/forked/golang/expansion.Expand)."""
    if "$" not in value:
        return value
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    n = len(value)
    while cursor < n:
        if value[cursor] == "$" and cursor + 1 < n:
            out.append(value[checkpoint:cursor])
            nxt = value[cursor + 1]
            advance = 1
            if nxt == "$":
                out.append("$")
            elif nxt == "(":
                close = value.find(")", cursor + 2)
                if close < 0:
                    out.append("$(")
                else:
                    name = value[cursor + 2:close]
                    got = lookup(name)
                    out.append(f"$({name})" if got is None else got)
                    advance = close - cursor
            else:
                out.append("$" + nxt)
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(value[checkpoint:])
    return "".join(out)


# -- quantities ------------------------------------------------------------------------------------

_SUFFIX = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}
_QTY_RE = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+)?(n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


def parse_quantity(q: Any) -> Decimal:
    """A resource.Quantity string (`500m`, `2Gi`, `1e3`) as a Decimal."""
    s = str(q).strip()
    m = _QTY_RE.match(s)
    if not m:
        raise ValueError(f"quantities must match the regular expression: {s!r}")
    try:
        num = Decimal(m.group(1))
        if m.group(2):
            num *= Decimal(10) ** int(m.group(2)[1:])
    except InvalidOperation:
        raise ValueError(f"invalid quantity {s!r}") from None
    return num * _SUFFIX[m.group(3) or ""]


def resource_value(container: Mapping[str, Any], resource: str, divisor: Any,
                   allocatable: Mapping[str, Any]) -> str:
    """A resourceFieldRef value: ceil(quantity / divisor), limits defaulting to allocatable."""
    kind, _, name = resource.partition(".")
    res = container.get("resources") or {}
    if kind not in ("limits", "requests") or not name:
        raise ContainerConfigError(f"unsupported container resource: {resource!r}")
    value = (res.get(kind) or {}).get(name)
    if value is None and kind == "requests":
        value = (res.get("limits") or {}).get(name)  # requests default to limits
    if value is None:
        value = allocatable.get(name)
    if value is None:
        value = "0"
    try:
        qty = parse_quantity(value)
        div = parse_quantity(divisor if divisor not in (None, "", 0) else "1")
    except ValueError as exc:
        raise ContainerConfigError(str(exc)) from None
    if div == 0:
        div = Decimal(1)
    return str(math.ceil(qty / div))


# -- downward API ----------------------------------------------------------------------------------


def field_value(pod: Mapping[str, Any], path: str) -> str:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    m = _LABEL_RE.match(path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "metadata.generateName": meta.get("generateName"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    if path == "status.podIPs":
        return ",".join(p.get("ip", "") for p in status.get("podIPs") or ())
    if path == "status.hostIPs":
        return ",".join(p.get("ip", "") for p in status.get("hostIPs") or ())
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    raise ContainerConfigError(f"unsupported fieldRef fieldPath: {path!r}")


# -- environment -----------------------------------------------------------------------------------

Lookup = Callable[[str, str], dict[str, Any] | None]  # (kind "configmaps"/"secrets", name) -> object


def referenced(lookup: Lookup, secret: bool, name: str, optional: Any) -> dict[str, Any] | None:
    """The Secret (or ConfigMap) `name`; None when it does not exist and the reference is
    optional, a ContainerConfigError when it does not exist and is required."""
    obj = lookup("secrets" if secret else "configmaps", name)
    if obj is None and not optional:
        raise ContainerConfigError(f'{"secret" if secret else "configmap"} "{name}" not found')
    return obj


def _source_data(obj: Mapping[str, Any], secret: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    if secret:
        for k, v in (obj.get("data") or {}).items():
            try:
                out[k] = base64.b64decode(v).decode("utf-8", "replace")
            except (ValueError, TypeError):
                out[k] = ""
        for k, v in (obj.get("stringData") or {}).items():
            out[k] = str(v)
    else:
        for k, v in (obj.get("data") or {}).items():
            out[k] = str(v)
        for k, v in (obj.get("binaryData") or {}).items():
            try:
                out[k] = base64.b64decode(v).decode("utf-8", "replace")
            except (ValueError, TypeError):
                out[k] = ""
    return out


def service_env(host: str, port: int) -> dict[str, str]:
    """The `kubernetes` Service variables, pointing at simcluster itself."""
    p = str(port)
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": p,
        "KUBERNETES_SERVICE_PORT_HTTPS": p,
        "KUBERNETES_PORT": f"tcp://{host}:{p}",
        f"KUBERNETES_PORT_{p}_TCP": f"tcp://{host}:{p}",
        f"KUBERNETES_PORT_{p}_TCP_PROTO": "tcp",
        f"KUBERNETES_PORT_{p}_TCP_PORT": p,
        f"KUBERNETES_PORT_{p}_TCP_ADDR": host,
    }


def container_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    base: Mapping[str, str],
    services: Mapping[str, str],
    lookup: Lookup,
    allocatable: Mapping[str, Any],
) -> dict[str, str]:
    """The environment the kubelet computes for one container (before path rewriting).

    `base` (PATH, HOME, HOSTNAME) comes first and may be overridden by the pod's variables,
    as an image's own variables would be.
    """
    ns = (pod.get("metadata") or {}).get("namespace", "")
    env: dict[str, str] = dict(base)
    env.update(services)
    for src in dict_items(container.get("envFrom")):
        prefix = str(src.get("prefix") or "")
        for key, secret in (("configMapRef", False), ("secretRef", True)):
            ref = src.get(key)
            if not isinstance(ref, dict):
                continue
            obj = referenced(lookup, secret, str(ref.get("name") or ""), ref.get("optional"))
            if obj is None:
                continue
            for k, v in _source_data(obj, secret).items():
                if _ENV_NAME_RE.match(prefix + k):
                    env[prefix + k] = v
    for item in dict_items(container.get("env")):
        name = str(item.get("name") or "")
        if not name:
            continue
        if "value" in item or not item.get("valueFrom"):
            raw = item.get("value")
            env[name] = expand("" if raw is None else str(raw), env.get)
            continue
        vf = item["valueFrom"]
        if not isinstance(vf, dict) or not all(isinstance(v, dict) for v in vf.values()):
            raise ContainerConfigError(f"env {name}: valueFrom: must be an object of objects")
        if vf.get("fieldRef"):
            env[name] = field_value(pod, str(vf["fieldRef"].get("fieldPath", "")))
        elif vf.get("resourceFieldRef"):
            ref = vf["resourceFieldRef"]
            target = container
            if ref.get("containerName"):
                for c in dict_items((pod.get("spec") or {}).get("containers")):
                    if c.get("name") == ref["containerName"]:
                        target = c
            env[name] = resource_value(target, str(ref.get("resource", "")), ref.get("divisor"), allocatable)
        elif vf.get("configMapKeyRef") or vf.get("secretKeyRef"):
            secret = bool(vf.get("secretKeyRef"))
            ref = vf["secretKeyRef"] if secret else vf["configMapKeyRef"]
            src_name = str(ref.get("name") or "")
            key = str(ref.get("key") or "")
            obj = referenced(lookup, secret, src_name, ref.get("optional"))
            kind = "Secret" if secret else "ConfigMap"
            if obj is None:
                continue
            data = _source_data(obj, secret)
            if key not in data:
                if ref.get("optional"):
                    continue
                raise ContainerConfigError(f"couldn't find key {key} in {kind} {ns}/{src_name}")
            env[name] = data[key]
    return env


def expand_command(container: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """command + args, each `$(VAR)`-expanded against the container's environment."""
    argv: list[str] = []
    for key in ("command", "args"):
        value = container.get(key) or []
        if not isinstance(value, list) or not all(isinstance(a, (str, int, float)) for a in value):
            raise ContainerConfigError(f"{key}: must be a list of strings")
        argv += [str(a) for a in value]
    return [expand(a, env.get) for a in argv]


def dict_items(value: Any) -> list[dict[str, Any]]:
    """The dict entries of a list field (anything else in a malformed spec is ignored)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# -- paths -----------------------------------------------------------------------------------------


def in_pod_path(root: Path, path: str) -> Path:
    """An absolute in-pod path as a host path under `root` (never above it)."""
    norm = os.path.normpath("/" + path.lstrip("/"))
    rel = norm.lstrip("/")
    return root / rel if rel else root


class PathRewriter:
    """Maps absolute in-pod paths at or under the pod's mount paths to the pod root."""

    def __init__(self, root: Path, mount_paths: Iterable[str]) -> None:
        self.root = root
        mounts = {os.path.normpath(p) for p in mount_paths if p and p.startswith("/") and p != "/"}
        self._mounts = sorted(mounts, key=len, reverse=True)

    def _one(self, value: str) -> str | None:
        if not value.startswith("/") or value.startswith(str(self.root)):
            return None
        norm = os.path.normpath(value)
        for m in self._mounts:
            if norm == m or norm.startswith(m + "/"):
                out = str(in_pod_path(self.root, norm))
                return out + "/" if value.endswith("/") and not out.endswith("/") else out
        return None

    def rewrite(self, value: str) -> str:
        if not self._mounts or "/" not in value:
            return value
        single = self._one(value)
        if single is not None:
            return single
        if ":" in value:
            parts = value.split(":")
            if all(p.startswith("/") for p in parts if p):
                new = [self._one(p) or p for p in parts]
                return ":".join(new)
        return value

    def rewrite_env(self, env: dict[str, str], keep: Iterable[str] = ()) -> dict[str, str]:
        skip = set(keep)
        return {k: (v if k in skip else self.rewrite(v)) for k, v in env.items()}
