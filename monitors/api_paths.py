"""Every Kubernetes API path and selector ranks sends, built one way: here.

    api_paths.resource("kubeflow.org", "v1", "pytorchjobs", "team-a", "mnist")
        -> /apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist
    api_paths.pod("team-a", "mnist-master-0", "log")  -> /api/v1/namespaces/team-a/pods/mnist-master-0/log
    api_paths.proxy("pods", "gpu-operator", "dcgm-exporter-x", 9400, "metrics")
        -> /api/v1/namespaces/gpu-operator/pods/dcgm-exporter-x:9400/proxy/metrics
    api_paths.field_selector({"spec.nodeName": node}), api_paths.label_selector({"job-name": name})

Every name is one path segment, percent-escaped (`seg`: a `/`, `?`, `#` or `%` in it never
changes the path); a name that no object can have and that would move the path ("", ".", "..":
the HTTP client resolves dot segments) is a `BadSegment`. A field selector's values are escaped
as apimachinery's `fields.EscapeValue` (`\\`, `,`, `=`); a label selector has no escaping, so a
value that is no label value is a `BadSegment` (`label_value`). Nothing else in monitors/,
sessions/ or tui/ spells a path with an f-string (tests/unit/test_api_paths.py looks).

Standard library only: the CLI's lightest commands import it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote

__all__ = ["BadSegment", "field_selector", "group_version", "label_selector", "label_value", "namespace", "node",
           "object_path", "pod", "prometheus_api", "proxy", "resource", "seg"]

LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_KEY = re.compile(r"(?:[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")


class BadSegment(ValueError):
    """A name that cannot go into a path (or a value into a label selector) without changing it."""


def seg(value: str) -> str:
    """`value` as one URL path segment: every reserved character (`/`, `?`, `#`, `%`) escaped;
    `BadSegment` for "", "." and ".." (no object has those names; in a path they would move it)."""
    if value in ("", ".", ".."):
        raise BadSegment(f"{value!r} cannot be a name in an API path")
    return quote(value, safe="")


def group_version(group: str, version: str) -> str:
    """/api/VERSION for the core group (""), else /apis/GROUP/VERSION."""
    return f"/apis/{seg(group)}/{seg(version)}" if group else f"/api/{seg(version)}"


def resource(group: str, version: str, plural: str, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
    """The collection of `plural` (in `namespace`, when given), or the object `name` in it, or
    its `subresource` (log, exec, status...)."""
    path = group_version(group, version)
    if namespace:
        path += f"/namespaces/{seg(namespace)}"
    path += f"/{seg(plural)}"
    if name is not None:
        path += f"/{seg(name)}"
        if subresource:
            path += f"/{seg(subresource)}"
    return path


def of_api_version(api_version: str, plural: str, namespace: str | None, name: str) -> str:
    """An object by its `apiVersion` as the object says it (`v1`, `kubeflow.org/v1`)."""
    group, _, version = api_version.rpartition("/")
    return resource(group, version, plural, namespace, name)


def pod(namespace: str, name: str | None = None, subresource: str | None = None) -> str:
    """The pods of `namespace`, a pod, or its subresource (log, exec)."""
    return resource("", "v1", "pods", namespace, name, subresource)


def namespace(name: str | None = None) -> str:
    """Every Namespace, or one."""
    return resource("", "v1", "namespaces", None, name)


def node(name: str | None = None) -> str:
    """Every Node, or one."""
    return resource("", "v1", "nodes", None, name)


def proxy(plural: str, namespace: str, name: str, port: int | str = "", rest: str = "", *, scheme: str = "") -> str:
    """The API server's proxy to a service's or pod's port: `.../services/[SCHEME:]NAME[:PORT]/proxy`,
    then `rest` (the path behind it, its segments escaped one by one: `api/v1/query`)."""
    ident = (f"{seg(scheme)}:" if scheme else "") + seg(name) + (f":{seg(str(port))}" if port != "" else "")
    path = f"{resource('', 'v1', plural, namespace)}/{ident}/proxy"
    return path + "".join(f"/{seg(part)}" for part in rest.split("/") if part)


def prometheus_api(endpoint: str) -> str:
    """Prometheus' HTTP API (`query`, `query_range`), under its base URL or its proxy path."""
    return f"/api/v1/{seg(endpoint)}"


# kinds an event may be about, besides pods, nodes and workloads, and where to read them:
# (group, version, plural, namespaced)
OBJECTS: dict[str, tuple[str, str, str, bool]] = {
    "Job": ("batch", "v1", "jobs", True), "Service": ("", "v1", "services", True),
    "PersistentVolumeClaim": ("", "v1", "persistentvolumeclaims", True), "ConfigMap": ("", "v1", "configmaps", True),
    "PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups", True), "Namespace": ("", "v1", "namespaces", False),
}


def object_path(kind: str, namespace: str, name: str) -> str | None:
    """The path of an object named by its kind (`OBJECTS`), None for a kind not there or a name no
    object can have (cluster-supplied: an event's involvedObject)."""
    found = OBJECTS.get(kind)
    if found is None:
        return None
    group, version, plural, namespaced = found
    try:
        return resource(group, version, plural, namespace if namespaced else None, name)
    except BadSegment:
        return None


def label_value(value: str) -> str:
    """`value` for a label selector (`key=value`); `BadSegment` when it is not a valid label value
    (a selector has no escaping: `,`, `!`, `=` or spaces would change its meaning)."""
    if len(value) > 63 or not LABEL_VALUE.fullmatch(value):
        raise BadSegment(f"{value!r} is not a valid label value")
    return value


def label_selector(labels: Mapping[str, str]) -> str:
    """`key=value,...` for these labels (each key and value checked: `BadSegment`)."""
    for key in labels:
        if len(key) > 317 or not LABEL_KEY.fullmatch(key):
            raise BadSegment(f"{key!r} is not a valid label key")
    return ",".join(f"{key}={label_value(value)}" for key, value in labels.items())


def escape_field_value(value: str) -> str:
    """A field selector's value as apimachinery's `fields.EscapeValue` writes it."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def field_selector(fields: Mapping[str, str]) -> str:
    """`field=value,...` for these fields, each value escaped (`escape_field_value`)."""
    return ",".join(f"{name}={escape_field_value(value)}" for name, value in fields.items())
