"""What the server sends for an object, a list or a watch event when the client asked for a
``meta.k8s.io`` representation (see `negotiation`), as kube-apiserver's ``transformResponseObject``
and watch encoder make them:

- ``PartialObjectMetadata``: ``{kind, apiVersion: meta.k8s.io/<v>, metadata}`` (the whole metadata,
  managedFields included); ``PartialObjectMetadataList``: those as ``items`` with the list's
  resourceVersion, continue and remainingItemCount.
- ``Table``: the kind's columns and one row per object, the row's ``object`` as ``includeObject``
  asks (``Metadata``, the default: a PartialObjectMetadata; ``None``: none; ``Object``: the object).
  In a watch every event's object is a Table of one row; only the first event carries the
  ``columnDefinitions`` (later ones have null), BOOKMARK events included (a row of the empty object
  that carries the bookmark's resourceVersion).
- A watch asking for ``PartialObjectMetadataList`` gets the objects untransformed (the real server
  fails to transform each event, logs it, and sends the object as it is).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson

from . import tables
from .errors import ApiError
from .negotiation import PARTIAL, PARTIAL_LIST, TABLE, Target
from .resources import ResourceType
from .store import Stored

INCLUDE_OBJECT = ("Metadata", "None", "Object")


def include_object(value: str | None) -> str:
    """``includeObject`` checked as kube-apiserver's ValidateTableOptions does (400 otherwise)."""
    if not value:
        return "Metadata"
    if value not in INCLUDE_OBJECT:
        raise ApiError(400, "Unable to convert to Table as requested: includeObject: Invalid value: "
                            f"{orjson.dumps(value).decode()}: must be 'Metadata', 'Object', 'None', or empty")
    return value


def partial(obj: Mapping[str, Any], target: Target) -> bytes:
    """One object as PartialObjectMetadata, encoded."""
    return (b'{"kind":"PartialObjectMetadata","apiVersion":"' + target.api_version.encode()
            + b'","metadata":' + orjson.dumps(obj.get("metadata") or {}) + b"}")


def list_meta(resource_version: str, continue_token: str = "", remaining: int | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
    return meta


def list_head(kind: str, api_version: str, meta: Mapping[str, Any]) -> bytes:
    """The start of a list body, up to and including ``"items":[``."""
    head = orjson.dumps({"kind": kind, "apiVersion": api_version, "metadata": meta})
    return head[:-1] + b',"items":['


def list_items(target: Target | None, items: Iterable[Stored]) -> Iterator[bytes]:
    """The encoded items of a list: the objects (encoded once and kept), or PartialObjectMetadata."""
    if target is not None and target.kind == PARTIAL_LIST:
        return (partial(st.obj, target) for st in items)
    return (st.raw for st in items)


def table(rt: ResourceType, objects: list[dict[str, Any]], target: Target, include: str, *,
          resource_version: str, continue_token: str = "", remaining: int | None = None,
          no_headers: bool = False) -> dict[str, Any]:
    return tables.table_for(
        rt.kind, rt.group, objects, printer_columns=rt.printer_columns, include_object=include,
        resource_version=resource_version, continue_token=continue_token,
        remaining_item_count=remaining if continue_token else None, api_version=target.api_version,
        no_headers=no_headers,
    )


class WatchEncoder:
    """Encodes one watch stream's events (lines of ``{"type":...,"object":...}``) in the
    representation negotiated for it. Not shared between watches: a Table watch remembers whether
    its first event (the one with the column definitions) has been sent."""

    def __init__(self, rt: ResourceType, target: Target | None, include: str = "Metadata") -> None:
        self.rt = rt
        self.target = target if target is not None and target.kind in (TABLE, PARTIAL) else None
        self.include = include
        self._headers_sent = False

    def object_bytes(self, st: Stored) -> bytes:
        target = self.target
        if target is None:
            return st.raw
        if target.kind == PARTIAL:
            return partial(st.obj, target)
        doc = table(self.rt, [st.obj], target, self.include, resource_version=str(st.rv),
                    no_headers=self._headers_sent)
        self._headers_sent = True
        return orjson.dumps(doc)

    def event(self, etype: str, st: Stored) -> bytes:
        return b'{"type":"' + etype.encode() + b'","object":' + self.object_bytes(st) + b"}\n"

    def bookmark(self, resource_version: int, *, initial_end: bool = False) -> bytes:
        """A BOOKMARK: the kind's empty object carrying the resourceVersion (and, closing the
        initial events of a WatchList, the ``k8s.io/initial-events-end`` annotation)."""
        meta: dict[str, Any] = {"resourceVersion": str(resource_version)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        obj = {"kind": self.rt.kind, "apiVersion": self.rt.api_version, "metadata": meta}
        return self.event("BOOKMARK", Stored(obj, None, resource_version))
