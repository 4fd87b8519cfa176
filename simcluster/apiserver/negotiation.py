"""Content negotiation: what a request's Accept header asks for (a ``meta.k8s.io`` Table, or the
aggregated discovery document), media range by media range, as the real server decides."""

from __future__ import annotations

AGGREGATED_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def table_api_version(accept: str | None) -> str | None:
    """``meta.k8s.io/v1`` or ``meta.k8s.io/v1beta1`` if *accept* asks for a Table first.

    Media ranges are considered in order; the first one the server could
    satisfy wins (a plain ``application/json`` before any Table range means
    the client prefers the object list).
    """
    if not accept:
        return None
    for media_range in accept.split(","):
        parts = [p.strip() for p in media_range.split(";")]
        mime = parts[0].lower()
        if mime not in ("application/json", "application/*", "*/*", "application/yaml",
                        "application/vnd.kubernetes.protobuf"):
            continue
        params: dict[str, str] = {}
        for p in parts[1:]:
            key, sep, value = p.partition("=")
            if sep:
                params[key.strip().lower()] = value.strip().strip('"')
        as_ = params.get("as")
        if as_ is None:
            # A plain media type: the regular object/list representation.
            return None
        if as_ != "Table":
            continue  # e.g. PartialObjectMetadata(List): not ours to decide here
        if params.get("g", "meta.k8s.io") != "meta.k8s.io":
            continue
        version = params.get("v", "v1")
        if version in ("v1", "v1beta1"):
            return f"meta.k8s.io/{version}"
    return None


def wants_table(accept: str | None) -> bool:
    """True if the Accept header asks for ``as=Table`` (meta.k8s.io v1 or v1beta1)."""
    return table_api_version(accept) is not None


def wants_aggregated(accept: str | None) -> bool:
    """True when the Accept header offers the v2 APIGroupDiscoveryList (as kubectl and client-go do)."""
    for media in (accept or "").split(","):
        kind, *params = (p.strip() for p in media.split(";"))
        opts = dict(p.partition("=")[::2] for p in params)
        if kind == "application/json" and opts.get("g") == "apidiscovery.k8s.io" and opts.get("v") == "v2" \
                and opts.get("as") == "APIGroupDiscoveryList":
            return True
    return False
