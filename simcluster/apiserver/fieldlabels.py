"""The field labels each resource type supports in field selectors, as kube-apiserver has them.

The labels come from k8s.io/kubernetes' field-label conversion functions (pkg/apis/core/v1 and the
other groups' conversion.go), the values from each registry's ``ToSelectableFields`` (where a
label is not simply the dotted path into the object: a pod's ``status.podIP`` is its first
``podIPs`` entry, ``spec.hostNetwork`` is ``"false"`` when unset, ``status.podIPs`` is accepted but
never set, so it only equals ``""``; a Job's ``status.successful`` is ``status.succeeded``).
Any other label is refused with kube's 400 "field label not supported: <label>".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .selectors import FieldGetter, FieldSelector

_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True)
class FieldLabels:
    """What a resource type accepts in ``fieldSelector``."""

    names: frozenset[str]
    renames: Mapping[str, str] = field(default_factory=dict)
    getters: Mapping[str, FieldGetter] = field(default_factory=dict)

    def parse(self, text: str | None) -> FieldSelector:
        """Parse and convert a field selector (raises `SelectorError` with kube's message)."""
        return FieldSelector.parse(text, self.names | self.renames.keys(), self.renames).bind(self.getters)


def _pod_ip(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or _EMPTY
    ips = status.get("podIPs")
    if ips and isinstance(ips, list) and isinstance(ips[0], Mapping):
        return str(ips[0].get("ip") or "")
    return str(status.get("podIP") or "")  # a v1 object with podIP only converts to podIPs=[podIP]


def _host_network(pod: Mapping[str, Any]) -> str:
    return "true" if (pod.get("spec") or _EMPTY).get("hostNetwork") is True else "false"


def _never_set(_obj: Mapping[str, Any]) -> str:
    return ""


def _job_succeeded(job: Mapping[str, Any]) -> str:
    return str(int((job.get("status") or _EMPTY).get("succeeded") or 0))


META = frozenset({"metadata.name", "metadata.namespace"})
POD = FieldLabels(
    META | {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"},
    renames={"spec.host": "spec.nodeName"},  # old v1 clients' name
    getters={"status.podIP": _pod_ip, "spec.hostNetwork": _host_network, "status.podIPs": _never_set},
)
EVENT = FieldLabels(META | {
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
    "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
    "reportingComponent", "source", "type",
})
BASIC = FieldLabels(META)
BY_TYPE: dict[tuple[str, str], FieldLabels] = {
    ("", "pods"): POD,
    ("", "events"): EVENT,
    ("", "nodes"): FieldLabels(frozenset({"metadata.name", "spec.unschedulable"})),
    ("", "namespaces"): FieldLabels(frozenset({"metadata.name", "status.phase"})),
    ("", "secrets"): FieldLabels(META | {"type"}),
    ("", "services"): FieldLabels(META | {"spec.clusterIP", "spec.type"}),
    ("", "replicationcontrollers"): FieldLabels(META | {"status.replicas"}),
    ("batch", "jobs"): FieldLabels(META | {"status.successful"}, getters={"status.successful": _job_succeeded}),
}


def for_type(key: tuple[str, str]) -> FieldLabels:
    """The field labels of the resource stored under `key` (group, plural); metadata.name and
    metadata.namespace for every other type."""
    return BY_TYPE.get(key, BASIC)
