"""Server-side printing (``meta.k8s.io/v1`` ``Table``) for ``kubectl get``.

kubectl asks for tables with::

    Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json

(see `negotiation`) and prints the ``columnDefinitions`` / ``rows[].cells`` it gets back. The
columns and cells of each kind are the `printers`'; this module builds the Table and its rows
(the pods' row conditions, the object or its metadata, as ``includeObject`` asks).
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .printers import Printer, resolve
from .timestamps import now_ts

__all__ = ["column_definitions", "table_for", "table_row"]

TABLE_API_VERSION = "meta.k8s.io/v1"
_GC_PAUSE_ROWS = 1000

_POD_SUCCEEDED = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}]
_POD_FAILED = [{"type": "Completed", "status": "True", "reason": "Failed",
                "message": "The pod failed."}]

_EMPTY: dict[str, Any] = {}


def column_definitions(kind: str, group: str,
                       printer_columns: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """The ``columnDefinitions`` the real server sends for *kind* in *group*."""
    return resolve(kind, group, printer_columns)[0]


def _row_object(obj: dict[str, Any], include_object: str,
                api_version: str = TABLE_API_VERSION) -> dict[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata") or {},
    }


def _make_row(printer: Printer, is_pod: bool, obj: dict[str, Any], include_object: str,
              now: float, api_version: str = TABLE_API_VERSION) -> dict[str, Any]:
    row: dict[str, Any] = {"cells": printer(obj, now)}
    if is_pod:
        phase = (obj.get("status") or _EMPTY).get("phase")
        if phase == "Succeeded":
            row["conditions"] = _POD_SUCCEEDED
        elif phase == "Failed":
            row["conditions"] = _POD_FAILED
    wrapped = _row_object(obj, include_object, api_version)
    if wrapped is not None:
        row["object"] = wrapped
    return row


def table_row(kind: str, group: str, obj: dict[str, Any], *,
              printer_columns: Sequence[Mapping[str, Any]] = (),
              include_object: str = "Metadata", now: datetime | None = None) -> dict[str, Any]:
    """One Table row for *obj* (used for watch events of Table watches)."""
    _, printer = resolve(kind, group, printer_columns)
    is_pod = (group or "") == "" and kind == "Pod"
    return _make_row(printer, is_pod, obj, include_object, now_ts(now))


def table_for(kind: str, group: str, objects: Sequence[dict[str, Any]], *,
              printer_columns: Sequence[Mapping[str, Any]] = (),
              include_object: str = "Metadata", resource_version: str = "",
              continue_token: str = "", remaining_item_count: int | None = None,
              now: datetime | None = None, api_version: str = TABLE_API_VERSION,
              no_headers: bool = False) -> dict[str, Any]:
    """A complete ``meta.k8s.io/v1`` (or *api_version*) Table for *objects* of *kind* in *group*.

    Its metadata is a ListMeta as the real server fills it (``continue`` and
    ``remainingItemCount`` only when set). *no_headers* (every watch event after the first):
    ``columnDefinitions`` is null, as kube-apiserver sends it."""
    columns, printer = resolve(kind, group, printer_columns)
    at = now_ts(now)
    is_pod = (group or "") == "" and kind == "Pod"
    # Building tens of thousands of rows allocates a lot of small containers;
    # with a big store alive, the cyclic GC's full collections would dominate
    # the cost.  Nothing here creates reference cycles, so pause it briefly.
    pause_gc = len(objects) >= _GC_PAUSE_ROWS and gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        rows = [_make_row(printer, is_pod, obj, include_object, at, api_version) for obj in objects]
    finally:
        if pause_gc:
            gc.enable()
    meta: dict[str, Any] = {"resourceVersion": resource_version or ""}
    if continue_token:
        meta["continue"] = continue_token
    if remaining_item_count is not None:
        meta["remainingItemCount"] = remaining_item_count
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": meta,
        "columnDefinitions": None if no_headers else columns,
        "rows": rows,
    }
