"""PATCH support: JSON merge patch, JSON patch, strategic merge patch and (simplified) apply.

Every entry point returns a new object and never mutates its arguments.

Strategic merge patch follows ``k8s.io/apimachinery/pkg/util/strategicpatch`` (apply half),
with a small built-in table of patch strategies instead of Go struct tags; see
:func:`strategic_merge_patch`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

import jsonpatch
import jsonpointer

__all__ = [
    "APPLY",
    "BUILTIN_GROUPS",
    "JSON_PATCH",
    "MERGE",
    "STRATEGIC",
    "SUPPORTED_CONTENT_TYPES",
    "PatchError",
    "apply_patch",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
    "strategic_supported",
]

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
SUPPORTED_CONTENT_TYPES = (JSON_PATCH, MERGE, APPLY, STRATEGIC)

MAX_JSON_PATCH_OPERATIONS = 10000

BUILTIN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "apiextensions.k8s.io",
        "rbac.authorization.k8s.io",
        "coordination.k8s.io",
        "events.k8s.io",
        "policy",
        "networking.k8s.io",
        "storage.k8s.io",
        "scheduling.k8s.io",
        "node.k8s.io",
        "discovery.k8s.io",
        "autoscaling",
        "authorization.k8s.io",
        "authentication.k8s.io",
        "certificates.k8s.io",
        "admissionregistration.k8s.io",
        "flowcontrol.apiserver.k8s.io",
    }
)


class PatchError(ValueError):
    """A patch could not be decoded or applied.

    ``status`` is the HTTP code the real API server would use: 400 (malformed patch),
    413 (too many JSON patch operations), 415 (unsupported content type) or 422
    (well-formed patch that does not apply).
    """

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def strategic_supported(group: str) -> bool:
    """Whether strategic merge patch is accepted for resources of this API group.

    The real server answers 415 for strategic merge patches of custom resources.
    ``"group/version"`` is accepted too (the version is ignored); the core group is ``""``.
    """
    if "/" in group:
        group = group.split("/", 1)[0]
    return group in BUILTIN_GROUPS


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------

_MISSING: Any = object()
_DROP: Any = object()
_SCALARS = (str, int, float, bool, type(None))


def _clone(v: Any) -> Any:
    """Deep copy of JSON-like data (much faster than copy.deepcopy)."""
    cls = v.__class__
    if cls is dict:
        return {k: _clone(x) for k, x in v.items()}
    if cls is list:
        return [_clone(x) for x in v]
    if cls in (str, int, float, bool) or v is None:
        return v
    if isinstance(v, Mapping):
        return {k: _clone(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clone(x) for x in v]
    return copy.deepcopy(v)


def _go_fmt(v: Any) -> str:
    """Roughly Go's %v for decoded JSON, for error messages."""
    if v is None:
        return "<nil>"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{_go_fmt(v[k])}" for k in sorted(v, key=str)) + "]"
    if isinstance(v, list):
        return "[" + " ".join(_go_fmt(x) for x in v) + "]"
    return str(v)


def _hkey(v: Any) -> Any:
    """A hashable stand-in for a JSON value (merge key values, primitive list items)."""
    if isinstance(v, _SCALARS):
        return (v.__class__ is bool, v)
    return (None, json.dumps(v, sort_keys=True, default=str))


def _decode(body: Any, content_type: str) -> Any:
    if isinstance(body, (bytes, bytearray, memoryview)):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PatchError(f"error decoding patch: {exc}", 400) from None
    if not isinstance(body, str):
        return body
    try:
        return json.loads(body)
    except ValueError as exc:
        json_error = exc
    if content_type == APPLY:
        try:
            import yaml  # optional: only needed for YAML (non-JSON) apply bodies
        except ImportError:  # pragma: no cover - depends on the environment
            raise PatchError("error decoding YAML patch: PyYAML is not installed; send JSON", 400) from None
        try:
            return yaml.safe_load(body)
        except yaml.YAMLError as exc:
            raise PatchError(f"error decoding YAML: {str(exc).splitlines()[0]}", 400) from None
    raise PatchError(f"invalid JSON document: {json_error}", 400)


# --------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------


def apply_patch(obj: dict[str, Any], patch: Any, content_type: str) -> dict[str, Any]:
    """Apply ``patch`` (decoded JSON, or the raw ``str``/``bytes`` body) to ``obj``.

    ``content_type`` is one of :data:`JSON_PATCH`, :data:`MERGE`, :data:`STRATEGIC` or
    :data:`APPLY` (parameters such as ``; charset=utf-8`` are ignored). Returns a new
    dict; ``obj`` and ``patch`` are never mutated.

    Server-side apply (:data:`APPLY`) is simplified: the YAML/JSON body is applied as a
    JSON merge patch (RFC 7386) to the current object. There is no field ownership,
    no ``managedFields`` bookkeeping, no conflict detection, fields omitted from the
    applied configuration are not removed, and lists are replaced rather than merged by key.

    Raises :class:`PatchError` (``status`` 415 for an unknown content type, whose message
    mentions the accepted media types).
    """
    ct = (content_type or "").split(";", 1)[0].strip().lower()
    if ct not in SUPPORTED_CONTENT_TYPES:
        raise PatchError(
            f"unsupported patch content type {content_type!r}: the body of the request was in an unknown "
            "format - accepted media types include: " + ", ".join(SUPPORTED_CONTENT_TYPES),
            415,
        )
    body = _decode(patch, ct)
    if ct == JSON_PATCH:
        result = json_patch(obj, body)
    elif ct == STRATEGIC:
        result = strategic_merge_patch(obj, body)
    else:
        if not isinstance(body, dict):
            kind = "apply configuration" if ct == APPLY else "merge patch"
            raise PatchError(f"the {kind} must be a JSON object, got {_type_name(body)}", 400)
        result = merge_patch(obj, body)
    if not isinstance(result, dict):
        raise PatchError(f"the patched object must be a JSON object, got {_type_name(result)}", 422)
    return result


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


# --------------------------------------------------------------------------------------
# RFC 7386 merge patch
# --------------------------------------------------------------------------------------


def merge_patch(obj: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7386). Returns a new value; neither argument is mutated."""
    if not isinstance(patch, dict):
        return _clone(patch)
    target = _clone(obj) if isinstance(obj, dict) else {}
    _merge_into(target, patch)
    return target


def _merge_into(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Merge ``patch`` into ``target`` in place (``target`` must be owned by the caller)."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict):
            cur = target.get(k)
            if not isinstance(cur, dict):
                cur = {}
                target[k] = cur
            _merge_into(cur, v)
        else:
            target[k] = _clone(v)


# --------------------------------------------------------------------------------------
# RFC 6902 JSON patch
# --------------------------------------------------------------------------------------


def json_patch(obj: Any, ops: list[Any]) -> Any:
    """JSON patch (RFC 6902) via the ``jsonpatch`` library. Returns a new value.

    Malformed patches raise ``PatchError`` with status 400, operations that do not apply
    (including a failed ``test``) status 422, like the real server.
    """
    if not isinstance(ops, list):
        raise PatchError(
            f"json: cannot unmarshal {_type_name(ops)} into Go value of type jsonpatch.Patch", 400
        )
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise PatchError(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got: {len(ops)}",
            413,
        )
    ops = _clone(ops)  # jsonpatch inserts operation values by reference
    try:
        compiled = [jsonpatch.JsonPatch([op]) for op in ops]
    except (
        jsonpatch.JsonPatchException,
        jsonpointer.JsonPointerException,
        TypeError,
        KeyError,
        AttributeError,
        ValueError,
    ) as exc:
        raise PatchError(f"invalid JSON patch: {exc}", 400) from None
    doc = _clone(obj)
    for op, one in zip(ops, compiled, strict=True):
        name = op.get("op") if isinstance(op, Mapping) else None
        path = op.get("path") if isinstance(op, Mapping) else None
        try:
            doc = one.apply(doc, in_place=True)
        except jsonpatch.JsonPatchTestFailed:
            raise PatchError(f"testing value {path} failed: test failed", 422) from None
        except jsonpatch.InvalidJsonPatch as exc:
            raise PatchError(f"invalid JSON patch: operation {name!r} at {path!r}: {exc}", 400) from None
        except (
            jsonpatch.JsonPatchException,
            jsonpointer.JsonPointerException,
            TypeError,
            KeyError,
            IndexError,
            ValueError,
        ) as exc:
            raise PatchError(f"{name} operation does not apply: path {path!r}: {exc}", 422) from None
    return doc


# --------------------------------------------------------------------------------------
# strategic merge patch
# --------------------------------------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVES = "$deleteFromPrimitiveList/"

_CONTAINER_LISTS = frozenset({"containers", "initContainers", "ephemeralContainers"})

# field name -> merge key for lists merged by key regardless of where they appear
_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "conditions": "type",
    "podIPs": "ip",
    "hostIPs": "ip",
}

_SET_MERGE = object()  # marker: merge as a set of primitives


def _list_strategy(path: tuple[str, ...], key: str) -> str | object | None:
    """Merge key for the list ``key`` found under ``path``; ``_SET_MERGE``; or None (= replace)."""
    parent = path[-1] if path else ""
    if key == "ports":
        if parent in _CONTAINER_LISTS:
            return "containerPort"
        if path == ("spec",):  # Service.spec.ports
            return "port"
        return None
    if key == "finalizers":
        return _SET_MERGE if parent == "metadata" else None
    if key == "ownerReferences":
        return "uid" if parent == "metadata" else None
    if key == "imagePullSecrets":
        return "name" if path else None  # PodSpec merges; ServiceAccount replaces
    if key == "secrets":
        return "name" if not path else None  # ServiceAccount.secrets
    if key == "addresses":
        return "type" if parent == "status" else None  # NodeStatus.addresses
    return _MERGE_KEYS.get(key)


def strategic_merge_patch(obj: Any, patch: Any) -> Any:
    """Strategic merge patch for built-in kinds. Returns a new value; nothing is mutated.

    Like a merge patch (``null`` deletes a key, maps merge recursively, unknown lists are
    replaced), except that lists with a known merge key are merged element by element
    (``containers``/``initContainers``/``ephemeralContainers``/``env``/``volumes``/
    ``imagePullSecrets``/``resourceClaims`` by ``name``, container ``ports`` by
    ``containerPort``, Service ``ports`` by ``port``, ``volumeMounts`` by ``mountPath``,
    ``conditions`` by ``type``, ``ownerReferences`` by ``uid``...), ``metadata.finalizers``
    merges as a set of strings, and ``tolerations`` (like any unlisted list) is replaced.

    Directives: ``$patch: replace`` (on a map or as a list element), ``$patch: delete``
    (on a list element: removes the elements with that merge key; on a map: empties it,
    as the real server does, or leaves it out if the field did not exist),
    ``$retainKeys``, ``$deleteFromPrimitiveList/<field>`` and ``$setElementOrder/<field>``.
    Element order follows the real server: items named in ``$setElementOrder`` (else in
    the patch) are interleaved with server-only items, so items that are new to the
    list end up before the existing ones.
    """
    if not isinstance(patch, dict):
        raise PatchError("invalid JSON document", 400)
    original = _clone(obj) if isinstance(obj, dict) else {}
    return _smp_map(original, patch, ())


def _smp_map(original: dict[str, Any] | None, patch: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """Merge ``patch`` into ``original`` (owned; mutated and returned)."""
    directive = patch.get(_DIRECTIVE, _MISSING)
    if directive is not _MISSING:
        if directive == "replace":
            cleaned = _clean({k: v for k, v in patch.items() if k != _DIRECTIVE}, path)
            return cleaned if isinstance(cleaned, dict) else {}
        if directive == "delete":
            return {}
        raise PatchError(f"unknown patch type: {_go_fmt(directive)} in map: {_go_fmt(patch)}", 400)
    if original is None:
        original = {}

    if _RETAIN_KEYS in patch:
        _apply_retain_keys(original, patch)

    ordered: set[str] = set()
    for k, v in patch.items():
        if k.startswith(_SET_ORDER):
            field = k[len(_SET_ORDER) :]
            if not isinstance(v, list):
                raise PatchError("invalid patch format of setElementOrder list", 400)
            _apply_set_element_order(original, patch, field, v, path)
            ordered.add(field)

    deletions: list[tuple[str, Any]] = []
    for k, pv in patch.items():
        if k == _RETAIN_KEYS or k.startswith(_SET_ORDER) or k in ordered:
            continue
        if k.startswith(_DELETE_PRIMITIVES):
            deletions.append((k[len(_DELETE_PRIMITIVES) :], pv))
            continue
        if pv is None:
            original.pop(k, None)
            continue
        ov = original.get(k, _MISSING)
        if isinstance(ov, dict) and isinstance(pv, dict):
            original[k] = _smp_map(ov, pv, (*path, k))
        elif isinstance(ov, list) and isinstance(pv, list):
            original[k] = _smp_list(ov, pv, path, k)
        else:  # new key, scalar, or type change: take the (cleaned) patch value
            val = _clean(pv, (*path, k))
            if val is _DROP:
                original.pop(k, None)
            else:
                original[k] = val

    for field, pv in deletions:
        if not isinstance(pv, list):
            raise PatchError("invalid patch format of primitive list", 400)
        cur = original.get(field)
        if isinstance(cur, list):
            drop = {_hkey(x) for x in pv if not isinstance(x, (dict, list))}
            original[field] = [x for x in cur if isinstance(x, (dict, list)) or _hkey(x) not in drop]
    return original


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    retain = patch[_RETAIN_KEYS]
    if not isinstance(retain, list):
        raise PatchError("invalid patch format of retainKeys", 400)
    keep = {k for k in retain if isinstance(k, str)}
    for k, v in patch.items():
        if v is None or k in (_RETAIN_KEYS, _DIRECTIVE) or k.startswith((_SET_ORDER, _DELETE_PRIMITIVES)):
            continue
        if k not in keep:
            raise PatchError("invalid patch format of retainKeys", 400)
    for k in list(original):
        if k not in keep:
            del original[k]


def _clean(v: Any, path: tuple[str, ...]) -> Any:
    """A copy of a patch value with nulls and directives removed (``_DROP`` if it deletes itself)."""
    if isinstance(v, dict):
        if _DIRECTIVE in v:
            if v[_DIRECTIVE] == "delete":
                return _DROP
            if v[_DIRECTIVE] != "replace":
                raise PatchError(f"unknown patch type: {_go_fmt(v[_DIRECTIVE])} in map: {_go_fmt(v)}", 400)
        out: dict[str, Any] = {}
        for k, x in v.items():
            if x is None or k in (_DIRECTIVE, _RETAIN_KEYS) or k.startswith((_SET_ORDER, _DELETE_PRIMITIVES)):
                continue
            c = _clean(x, (*path, k))
            if c is not _DROP:
                out[k] = c
        return out
    if isinstance(v, list):
        # In a list, any element carrying $patch is a directive, never data.
        return [_clean(x, path) for x in v if not (isinstance(x, dict) and _DIRECTIVE in x)]
    return v


def _element_kind(*lists: list[Any]) -> str:
    kind = ""
    for lst in lists:
        for x in lst:
            if isinstance(x, list):
                raise PatchError("lists of lists are not supported", 422)
            k = "map" if isinstance(x, dict) else "scalar"
            if kind and k != kind:
                raise PatchError(f"list element types are not identical: {_go_fmt(list(lists))}", 422)
            kind = k
    return kind


def _smp_list(orig: list[Any], patch: list[Any], path: tuple[str, ...], key: str) -> list[Any]:
    strategy = _list_strategy(path, key)
    if strategy is None:
        cleaned: list[Any] = _clean(patch, (*path, key))  # (a list cleans to a list)
        return cleaned
    merge_key = strategy if isinstance(strategy, str) else None
    return _merge_list(orig, patch, merge_key, (*path, key))


def _merge_list(orig: list[Any], patch: list[Any], merge_key: str | None, elem_path: tuple[str, ...]) -> list[Any]:
    """strategicpatch.mergeSlice: ``orig`` is owned; returns the merged, ordered list."""
    if not orig and not patch:
        return orig
    kind = _element_kind(orig, patch)
    if kind != "map" or merge_key is None:
        if kind == "map":
            raise PatchError(f"cannot merge lists without merge key for {'.'.join(elem_path)}", 422)
        merged: list[Any] = []
        seen: set[Any] = set()
        for x in (*orig, *patch):
            h = _hkey(x)
            if h not in seen:
                seen.add(h)
                merged.append(x)
        patch_order = _index_map(patch, None)
        return _order(merged, patch_order, _index_map(orig, None), None)

    # $patch directives inside the list
    plain: list[dict[str, Any]] = []
    replace = False
    for el in patch:
        d = el.get(_DIRECTIVE, _MISSING)
        if d is _MISSING:
            plain.append(el)
        elif d == "delete":
            if merge_key not in el:
                raise PatchError(f"map: {_go_fmt(el)} does not contain declared merge key: {merge_key}", 422)
            kv = el[merge_key]
            orig = [o for o in orig if not (isinstance(o, dict) and merge_key in o and o[merge_key] == kv)]
        elif d == "replace":
            replace = True
        elif d == "merge":
            raise PatchError("merging lists cannot yet be specified in the patch", 422)
        else:
            raise PatchError(f"unknown patch type: {_go_fmt(d)} in map: {_go_fmt(el)}", 400)
    if replace:
        orig = [c for c in (_clean(el, elem_path) for el in plain) if c is not _DROP]
        plain = []

    merged = list(orig)
    for el in plain:
        if merge_key not in el:
            raise PatchError(f"map: {_go_fmt(el)} does not contain declared merge key: {merge_key}", 422)
        kv = el[merge_key]
        for i, m in enumerate(merged):
            if isinstance(m, dict) and merge_key in m and m[merge_key] == kv:
                merged[i] = _smp_map(m, el, elem_path)
                break
        else:
            merged.append(_smp_map(None, el, elem_path))
    return _order(merged, _index_map(plain, merge_key), _index_map(orig, merge_key), merge_key)


def _key_fn(merge_key: str | None) -> Callable[[Any], Any]:
    if merge_key is None:
        return _hkey
    return lambda x: _hkey(x.get(merge_key)) if isinstance(x, dict) and merge_key in x else _MISSING


def _index_map(items: list[Any], merge_key: str | None) -> dict[Any, int]:
    """First index of each item (by merge key value for maps)."""
    keyfn = _key_fn(merge_key)
    out: dict[Any, int] = {}
    for i, x in enumerate(items):
        k = keyfn(x)
        if k is not _MISSING and k not in out:
            out[k] = i
    return out


def _order(merged: list[Any], patch_order: dict[Any, int], server_order: dict[Any, int],
           merge_key: str | None) -> list[Any]:
    """normalizeElementOrder + mergeSortedSlice.

    Items named by ``patch_order`` keep that relative order; the others keep theirs; an
    item from the server goes before a patch item only if both were on the server and it
    came first there.
    """
    keyfn = _key_fn(merge_key)
    patch_items: list[Any] = []
    server_only: list[Any] = []
    for x in merged:
        (patch_items if keyfn(x) in patch_order else server_only).append(x)
    patch_items.sort(key=lambda x: patch_order[keyfn(x)])
    out: list[Any] = []
    i = j = 0
    nl, nr = len(server_only), len(patch_items)
    while i < nl and j < nr:
        li = server_order.get(keyfn(server_only[i]), -1)
        ri = server_order.get(keyfn(patch_items[j]), -1)
        if 0 <= li < ri:
            out.append(server_only[i])
            i += 1
        else:
            out.append(patch_items[j])
            j += 1
    out.extend(server_only[i:])
    out.extend(patch_items[j:])
    return out


def _apply_set_element_order(
    original: dict[str, Any], patch: dict[str, Any], field: str, order: list[Any], path: tuple[str, ...]
) -> None:
    """Process ``$setElementOrder/<field>`` together with ``patch[field]``."""
    ov = original.get(field, _MISSING)
    pv = patch.get(field, _MISSING)
    if pv is None:
        original.pop(field, None)
        return
    found_orig = isinstance(ov, list)
    found_patch = isinstance(pv, list)
    if pv is not _MISSING and not found_patch:
        raise PatchError("invalid patch format of setElementOrder list", 400)
    strategy = _list_strategy(path, field)
    merge_key = strategy if isinstance(strategy, str) else None
    if merge_key is None and order and all(isinstance(x, dict) and len(x) == 1 for x in order):
        keys = {next(iter(x)) for x in order}
        if len(keys) == 1:
            merge_key = keys.pop()  # infer the key for lists missing from the table
    if found_orig and not found_patch:
        merged = ov
    elif found_patch and not found_orig:
        merged = _clean(pv, (*path, field))
    elif found_orig and found_patch:
        merged = _smp_list(ov, pv, path, field)
    else:
        return
    has_maps = any(isinstance(x, dict) for x in merged)
    mk = merge_key if has_maps else None
    if has_maps and mk is None:
        original[field] = merged  # cannot identify elements: keep the merge result's order
        return
    server = ov if found_orig else []
    original[field] = _order(merged, _index_map(order, mk), _index_map(server, mk), mk)
