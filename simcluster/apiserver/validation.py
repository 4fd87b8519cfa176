"""Create-time validation and defaulting, with the real server's messages."""

from __future__ import annotations

import base64
import ipaddress
import re
from typing import Any

from .errors import ApiError, invalid
from .resources import ResourceType

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)

# Kinds whose names must be DNS-1123 labels rather than subdomains.
LABEL_NAMED = {("", "namespaces"), ("", "services")}


def name_problem(name: str, label: bool) -> str | None:
    if label:
        if len(name) > 63:
            return "must be no more than 63 characters"
        if not DNS1123_LABEL.match(name):
            return LABEL_MSG
        return None
    if len(name) > 253:
        return "must be no more than 253 characters"
    if not DNS1123_SUBDOMAIN.match(name):
        return SUBDOMAIN_MSG
    return None


def check_body_type(rt: ResourceType, obj: Any) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ApiError(400, f"the object provided is unrecognized (must be of type {rt.kind})")
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if api_version and api_version != rt.api_version:
        raise ApiError(
            400,
            f"the API version in the data ({api_version}) does not match the expected API version "
            f"({rt.api_version})",
        )
    if kind and kind != rt.kind:
        raise ApiError(
            400, f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
        )
    meta = obj.get("metadata")
    if meta is None:
        obj["metadata"] = {}
    elif not isinstance(meta, dict):
        raise ApiError(400, "metadata: expected an object")
    return obj


def validate_new(rt: ResourceType, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    name = meta.get("name") or ""
    causes: list[tuple[str, str]] = []
    if not name and not meta.get("generateName"):
        causes.append(("metadata.name", "Required value: name or generateName is required"))
    elif name:
        problem = name_problem(name, rt.key in LABEL_NAMED)
        if problem:
            causes.append(("metadata.name", f'Invalid value: "{name}": {problem}'))
    for field in ("labels", "annotations"):
        value = meta.get(field)
        if value is not None and (
            not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values())
        ):
            causes.append((f"metadata.{field}", "Invalid value: values must be strings"))
    if rt.key == ("", "pods"):
        spec = obj.get("spec")
        containers = spec.get("containers") if isinstance(spec, dict) else None
        if not containers:
            causes.append(("spec.containers", "Required value"))
        else:
            for i, c in enumerate(containers):
                if not isinstance(c, dict) or not c.get("name"):
                    causes.append((f"spec.containers[{i}].name", "Required value"))
    if rt.key in (("apps", "deployments"), ("apps", "replicasets")):
        causes += _selector_problems(obj.get("spec"))
    if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
        spec = obj.get("spec") or {}
        expected = f"{(spec.get('names') or {}).get('plural', '')}.{spec.get('group', '')}"
        if name and name != expected:
            causes.append(("metadata.name", f'Invalid value: "{name}": must be spec.names.plural+"."+spec.group'))
    if causes:
        raise invalid(rt.kind, rt.group, name or meta.get("generateName", ""), causes)


def default(rt: ResourceType, obj: dict[str, Any], next_ip: Any) -> None:
    """The defaulting the real API server applies to the kinds simcluster's users create."""
    if rt.key == ("", "pods"):
        spec = obj.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("priority", 0)
        spec.setdefault("securityContext", {})  # (kubectl debug reads it: the API server always sets it)
        for c in spec.get("containers") or ():
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("imagePullPolicy", "IfNotPresent")
            c.setdefault("resources", {})
        status = obj.setdefault("status", {})
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", _qos(spec))
    elif rt.key == ("", "services"):
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        if spec.get("clusterIP") != "None" and not spec.get("clusterIP"):
            spec["clusterIP"] = str(next_ip())
        if spec.get("clusterIP"):
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
        for p in spec.get("ports") or ():
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
        spec.setdefault("sessionAffinity", "None")
    elif rt.key == ("", "secrets"):
        if not obj.get("type"):
            obj["type"] = "Opaque"  # SetDefaults_Secret
        string_data = obj.pop("stringData", None)  # merged into data, never stored (as the v1 conversion)
        if isinstance(string_data, dict) and string_data:
            data = obj["data"] if isinstance(obj.get("data"), dict) else {}
            obj["data"] = {**data, **{str(k): base64.b64encode(str(v).encode()).decode()
                                      for k, v in string_data.items()}}
    elif rt.key == ("batch", "jobs"):
        spec = obj.setdefault("spec", {})
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        tmpl = spec.setdefault("template", {})
        tmpl.setdefault("spec", {}).setdefault("restartPolicy", "Never")
    elif rt.key in (("apps", "deployments"), ("apps", "replicasets")):
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        if rt.plural == "deployments":
            spec.setdefault("strategy", {"type": "RollingUpdate",
                                         "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
            spec.setdefault("revisionHistoryLimit", 10)
            spec.setdefault("progressDeadlineSeconds", 600)
        tspec = spec.setdefault("template", {}).setdefault("spec", {})
        tspec.setdefault("restartPolicy", "Always")
        tspec.setdefault("terminationGracePeriodSeconds", 30)
        tspec.setdefault("dnsPolicy", "ClusterFirst")
        tspec.setdefault("schedulerName", "default-scheduler")
        for c in tspec.get("containers") or ():
            if isinstance(c, dict):
                c.setdefault("terminationMessagePath", "/dev/termination-log")
                c.setdefault("terminationMessagePolicy", "File")
                c.setdefault("imagePullPolicy", "IfNotPresent")
                c.setdefault("resources", {})


def _selector_problems(spec: Any) -> list[tuple[str, str]]:
    """apps/v1 ValidateDeploymentSpec / ValidateReplicaSetSpec: a selector that the template's
    labels match (only matchLabels are checked here)."""
    if not isinstance(spec, dict):
        return [("spec", "Required value")]
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return [("spec.selector", "Required value")]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    wanted = selector.get("matchLabels") or {}
    if not isinstance(labels, dict) or any(labels.get(k) != v for k, v in wanted.items()):
        return [("spec.template.metadata.labels",
                 f"Invalid value: {labels!r}: `selector` does not match template `labels`")]
    if not ((spec.get("template") or {}).get("spec") or {}).get("containers"):
        return [("spec.template.spec.containers", "Required value")]
    return []


def _qos(spec: dict[str, Any]) -> str:
    containers = spec.get("containers") or []
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and req[r] != lim[r]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


class IPAllocator:
    """Hands out addresses from a CIDR, skipping the network address."""

    def __init__(self, cidr: str) -> None:
        self._net = ipaddress.ip_network(cidr)
        self._next = 1

    def __call__(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        ip = self._net.network_address + self._next
        self._next += 1
        if ip not in self._net:
            self._next = 1
            ip = self._net.network_address + 1
        return ip
