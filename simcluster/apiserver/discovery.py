"""Discovery documents (/api, /apis, resource lists) and enough OpenAPI v3 for kubectl."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from .resources import Registry, ResourceType

SERVER_VERSION = {
    "major": "1",
    "minor": "35",
    "emulationMajor": "1",
    "emulationMinor": "35",
    "minCompatibilityMajor": "1",
    "minCompatibilityMinor": "34",
    "gitVersion": "v1.35.0-simcluster",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group_entry(group: str, versions: list[str]) -> dict[str, Any]:
    vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": vs, "preferredVersion": vs[0]}


def _sorted_versions(versions: list[str]) -> list[str]:
    # v1 before v1beta1 before v2beta1... as Kubernetes orders: GA first, highest first
    def rank(v: str) -> tuple[int, int, int]:
        stability = 2 if "alpha" in v else 1 if "beta" in v else 0
        major = int("".join(ch for ch in v[1:].split("a")[0].split("b")[0] if ch.isdigit()) or 0)
        return (stability, -major, 0)

    return sorted(versions, key=rank)


def api_group_list(reg: Registry) -> dict[str, Any]:
    groups = []
    for group, versions in reg.groups().items():
        if not group:
            continue
        groups.append(_group_entry(group, _sorted_versions(list(versions))))
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(reg: Registry, group: str) -> dict[str, Any] | None:
    versions = reg.groups().get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, _sorted_versions(list(versions)))}


def resource_list(reg: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = reg.groups().get(group, {}).get(version)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in sorted(types, key=lambda r: r.plural):
        resources.append(rt.discovery_entry())
        for sub in rt.subresources:
            verbs = ["get", "patch", "update"] if sub in ("status", "scale") else ["get", "create"]
            entry = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind if sub == "status" else _sub_kind(sub),
                "verbs": verbs,
            }
            if sub == "scale":  # autoscaling/v1 Scale, as kube-apiserver lists it
                entry["group"], entry["version"] = "autoscaling", "v1"
            resources.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


# -- aggregated discovery (apidiscovery.k8s.io/v2, GA in Kubernetes 1.30) ---------------------------

def _resource_discovery(rt: ResourceType) -> dict[str, Any]:
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    entry: dict[str, Any] = {
        "resource": rt.plural,
        "responseKind": gvk,
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    subs = []
    for sub in rt.subresources:
        verbs = ["get", "patch", "update"] if sub in ("status", "scale") else ["get", "create"]
        kind = rt.kind if sub == "status" else _sub_kind(sub)
        group = rt.group if sub == "status" else "autoscaling" if sub == "scale" else ""
        subs.append({"subresource": sub, "responseKind": {"group": group,
                                                           "version": "v1" if sub == "scale" else rt.version,
                                                           "kind": kind},
                     "verbs": verbs})
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated_discovery(reg: Registry, *, core: bool) -> dict[str, Any]:
    """/api (core: the legacy group "") or /apis as one APIGroupDiscoveryList: every group,
    version (preferred first) and resource in one answer."""
    items = []
    for group, versions in reg.groups().items():
        if bool(group) == core:
            continue
        vs = []
        for version in _sorted_versions(list(versions)):
            types = sorted(versions[version], key=lambda r: r.plural)
            vs.append({"version": version, "resources": [_resource_discovery(rt) for rt in types],
                       "freshness": "Current"})
        items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": vs})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {},
            "items": items}


def _sub_kind(sub: str) -> str:
    return {
        "log": "Pod",
        "exec": "PodExecOptions",
        "attach": "PodAttachOptions",
        "portforward": "PodPortForwardOptions",
        "proxy": "PodProxyOptions",
        "scale": "Scale",
    }.get(sub, "Status")


# -- OpenAPI v3 ---------------------------------------------------------------------------------


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_root(reg: Registry) -> dict[str, Any]:
    paths = {}
    for group, versions in reg.groups().items():
        for version in versions:
            gv = _gv_path(group, version)
            digest = hashlib.sha256(orjson.dumps(openapi_group_version(reg, group, version))).hexdigest()
            paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest[:32].upper()}"}
    return {"paths": paths}


def _model_name(rt: ResourceType) -> str:
    if rt.group:
        rev = ".".join(reversed(rt.group.split(".")))
        return f"{rev}.{rt.version}.{rt.kind}"
    return f"io.k8s.api.core.{rt.version}.{rt.kind}"


def _operation(rt: ResourceType, action: str, verb: str, collection: bool) -> dict[str, Any]:
    gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    params: list[dict[str, Any]] = [
        {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    ]
    if action in ("post", "put", "patch"):
        params.append(
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}
        )
    ref = {"$ref": f"#/components/schemas/{_model_name(rt)}"}
    op: dict[str, Any] = {
        "operationId": f"{verb}{rt.kind}",
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}},
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": gvk,
    }
    if action == "patch":
        content = {
            t: {"schema": {"type": "object"}}
            for t in (
                "application/apply-patch+yaml",
                "application/json-patch+json",
                "application/merge-patch+json",
            )
        }
        if not rt.from_crd:
            content["application/strategic-merge-patch+json"] = {"schema": {"type": "object"}}
        op["requestBody"] = {"content": content, "required": True}
    elif action in ("post", "put"):
        op["requestBody"] = {"content": {"*/*": {"schema": ref}}, "required": True}
    return op


def openapi_group_version(reg: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = reg.groups().get(group, {}).get(version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }
    }
    root = "/" + _gv_path(group, version)
    for rt in types:
        base = f"{root}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{root}/{rt.plural}"
        paths[base] = {
            "get": _operation(rt, "get", "list", True),
            "post": _operation(rt, "post", "post", True),
            "delete": _operation(rt, "delete", "deletecollection", True),
        }
        paths[base + "/{name}"] = {
            "get": _operation(rt, "get", "get", False),
            "put": _operation(rt, "put", "put", False),
            "patch": _operation(rt, "patch", "patch", False),
            "delete": _operation(rt, "delete", "delete", False),
        }
        if "status" in rt.subresources:
            paths[base + "/{name}/status"] = {
                "get": _operation(rt, "get", "get", False),
                "put": _operation(rt, "put", "put", False),
                "patch": _operation(rt, "patch", "patch", False),
            }
        # Built-in kinds keep kubectl's compiled-in schemas (and their strategic-merge keys);
        # custom kinds get a permissive schema, as a CRD with preserve-unknown-fields does.
        schemas[_model_name(rt)] = {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {
                    "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]
                },
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
            "x-kubernetes-group-version-kind": [
                {"group": rt.group, "version": rt.version, "kind": rt.kind}
            ],
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": schemas},
    }
