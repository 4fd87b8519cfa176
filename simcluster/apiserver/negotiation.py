"""Content negotiation: what a request's Accept header asks for, decided as kube-apiserver decides it
(k8s.io/apiserver's `NegotiateOutputMediaType` and `RequestScope.AllowsMediaTypeTransform`).

Media ranges are tried in order of their q-value (ties keep the client's order); the first one the
server can satisfy wins. A range may ask for the object itself (no ``as``/``g``/``v``) or for a
``meta.k8s.io`` transformation: ``as=Table`` (JSON or YAML only), ``as=PartialObjectMetadata`` or
``as=PartialObjectMetadataList``, in ``v=v1`` or ``v=v1beta1``. A range naming anything else (another
kind, group or version, or ``g``/``v`` without ``as``) cannot be satisfied and the next one is tried,
so ``application/json;as=Foo;g=meta.k8s.io;v=v1,application/json`` falls back to the object. When no
range can be satisfied the answer is 406 NotAcceptable.

Like the real server, the choice does not depend on the verb: a GET of one object that asks for
``PartialObjectMetadataList`` is not acceptable (406 from the transformation, see `not_a_list`), and
neither is a LIST asking for ``PartialObjectMetadata``; a WATCH sends each event's object as the
single-object form. simcluster always answers JSON (a protobuf range is answered in JSON).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ApiError

AGGREGATED_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
META_GROUP = "meta.k8s.io"
META_VERSIONS = ("v1", "v1beta1")
TABLE = "Table"
PARTIAL = "PartialObjectMetadata"
PARTIAL_LIST = "PartialObjectMetadataList"
# the serializers of the built-in kinds, as kube-apiserver lists them in its 406 message
SERVED_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
_STREAMING = frozenset({"application/json", "application/vnd.kubernetes.protobuf"})


@dataclass(frozen=True, slots=True)
class Target:
    """A ``meta.k8s.io`` representation asked for: Table, PartialObjectMetadata(List)."""

    kind: str
    version: str = "v1"

    @property
    def api_version(self) -> str:
        return f"{META_GROUP}/{self.version}"


def not_acceptable() -> ApiError:
    return ApiError(406, "only the following media types are accepted: " + ", ".join(SERVED_TYPES),
                    reason="NotAcceptable")


def _clauses(accept: str) -> list[tuple[str, dict[str, str]]]:
    """The media ranges of an Accept header, best q first (stable), with their parameters."""
    out: list[tuple[float, int, str, dict[str, str]]] = []
    for i, media_range in enumerate(accept.split(",")):
        parts = [p.strip() for p in media_range.split(";")]
        mime = parts[0].lower()
        if not mime:
            continue
        params: dict[str, str] = {}
        q = 1.0
        for p in parts[1:]:
            key, sep, value = p.partition("=")
            key = key.strip().lower()
            value = value.strip().strip('"')
            if not sep:
                continue
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
                continue
            params[key] = value
        out.append((-q, i, mime, params))
    out.sort(key=lambda c: (c[0], c[1]))
    return [(mime, params) for _, _, mime, params in out]


def _satisfiable(mime: str, params: dict[str, str]) -> tuple[bool, Target | None]:
    """Whether the server can answer this media range, and with which transformation."""
    if mime in ("*/*", "application/*"):
        candidates: tuple[str, ...] = SERVED_TYPES
    elif mime in SERVED_TYPES:
        candidates = (mime,)
    else:
        return False, None
    for media in candidates:
        stream = params.get("stream")
        if stream is not None and (stream != "watch" or media not in _STREAMING):
            continue
        if not ({"as", "g", "v"} & params.keys()):
            return True, None
        kind, group, version = params.get("as", ""), params.get("g", ""), params.get("v", "")
        if group != META_GROUP or version not in META_VERSIONS:
            continue
        if kind == TABLE and media in ("application/json", "application/yaml"):
            return True, Target(TABLE, version)
        if kind in (PARTIAL, PARTIAL_LIST):
            return True, Target(kind, version)
    return False, None


def negotiate(accept: str | None) -> Target | None:
    """The representation an Accept header asks for: None for the object (or list) itself, or a
    `Target`. Raises 406 NotAcceptable when no media range can be served."""
    if not accept or not accept.strip():
        return None
    for mime, params in _clauses(accept):
        ok, target = _satisfiable(mime, params)
        if ok:
            return target
    raise not_acceptable()


def table_api_version(accept: str | None) -> str | None:
    """``meta.k8s.io/v1`` or ``meta.k8s.io/v1beta1`` if *accept* is answered with a Table."""
    try:
        target = negotiate(accept)
    except ApiError:
        return None
    return target.api_version if target is not None and target.kind == TABLE else None


def wants_table(accept: str | None) -> bool:
    """True if the Accept header is answered with a ``meta.k8s.io`` Table (v1 or v1beta1)."""
    return table_api_version(accept) is not None


def internal_type(group: str, kind: str, *, builtin: bool) -> str:
    """How kube-apiserver's messages name the Go type of an object (``*core.Pod``,
    ``*batch.JobList``, ``*unstructured.Unstructured`` for custom resources)."""
    if not builtin:
        return "*unstructured.UnstructuredList" if kind.endswith("List") else "*unstructured.Unstructured"
    package = "core" if not group else group.split(".", 1)[0]
    return f"*{package}.{kind}"


def not_a_list(kind: str) -> ApiError:
    """406 for ``as=PartialObjectMetadataList`` on one object (*kind* as `internal_type` names it)."""
    return ApiError(406, f"you requested PartialObjectMetadataList, but the requested object is not a list ({kind})",
                    reason="NotAcceptable")


def is_a_list(kind: str) -> ApiError:
    """406 for ``as=PartialObjectMetadata`` on a list."""
    return ApiError(406, f"you requested PartialObjectMetadata, but the requested object is a list ({kind})",
                    reason="NotAcceptable")


def wants_aggregated(accept: str | None) -> bool:
    """True when the Accept header offers the v2 APIGroupDiscoveryList (as kubectl and client-go do)."""
    for media in (accept or "").split(","):
        kind, *params = (p.strip() for p in media.split(";"))
        opts = dict(p.partition("=")[::2] for p in params)
        if kind == "application/json" and opts.get("g") == "apidiscovery.k8s.io" and opts.get("v") == "v2" \
                and opts.get("as") == "APIGroupDiscoveryList":
            return True
    return False
