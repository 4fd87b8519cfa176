"""The GPUs as `ranks gpus` prints them: table cells (plain text) and the documented JSON.

`ranks gpus -o json` → {"source": str, "gpus": [{node, index, instance, uuid, model, mig_profile,
util, mem_used_mib, mem_total_mib, temp_c, power_w, power_limit_w, sm_clock_mhz, throttle (reason
names, [] for none), clock_event_reasons, xid, ecc_sbe, ecc_dbe, allocated, owner: {namespace, pod,
container, workload, rank, label, project, user, by} or null, flags}], "not_exported": {field:
[nodes]}, "notes": [str]}. A figure the exporter does not serve is null, never 0.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .gpu_fleet import Fleet, Gpu, Owner
from .humanize import mib, percent
from .sanitize import clean


def _n(v: float | None, digits: int = 1) -> float | int | None:
    if v is None:
        return None
    if v.__class__ is float and v.is_integer():  # (most DCGM figures: the same as below, at once)
        return int(v)
    r = round(v, digits)
    i = int(r)
    return i if r == i else r


def short_model(name: str) -> str:
    return name.removeprefix("NVIDIA ").strip() or "-"


def owner_cell(g: Gpu) -> str:
    o = g.owner
    if o is None:
        return "-"
    if o.name:
        rank = f" r{o.rank}" if o.rank is not None else ""
        return f"{o.name} {o.label}{rank}"
    return f"{o.namespace}/{o.pod}"


def throttle_cell(g: Gpu) -> str:
    t = g.throttle
    if t is None:
        return "-"
    return ",".join(t) if t else "none"


def power_cell(g: Gpu) -> str:
    if g.power is None:
        return "-"
    return f"{g.power:.0f}/{g.power_limit:.0f}W" if g.power_limit else f"{g.power:.0f}W"


def mem_cell(g: Gpu) -> str:
    if g.mem_used is None:
        return "-"
    return f"{mib(g.mem_used)}/{mib(g.mem_total)}" if g.mem_total else mib(g.mem_used)


def ecc_cell(g: Gpu) -> str:
    if g.ecc_sbe is None and g.ecc_dbe is None:
        return "-"
    return f"{_n(g.ecc_sbe, 0) if g.ecc_sbe is not None else '-'}/{_n(g.ecc_dbe, 0) if g.ecc_dbe is not None else '-'}"


def gpu_cell(g: Gpu) -> str:
    return f"{g.index}:{g.instance}" if g.instance else str(g.index)


def row_cells(g: Gpu, *, wide: bool = False) -> list[str]:
    """NODE GPU MODEL UTIL MEM TEMP POWER SM THROTTLE XID ECC OWNER PROJECT USER FLAGS [UUID MIG BY]."""
    o = g.owner
    cells = [g.node, gpu_cell(g), short_model(g.model), percent(g.util), mem_cell(g),
             "-" if g.temp is None else f"{g.temp:.0f}C", power_cell(g),
             "-" if g.sm_clock is None else f"{g.sm_clock:.0f}MHz", throttle_cell(g),
             "-" if g.xid is None else str(g.xid), ecc_cell(g), owner_cell(g),
             (o.project or "-") if o else "-", (o.user or "-") if o else "-", ",".join(g.flags) or "-"]
    if wide:
        cells += [g.uuid or "-", g.mig_profile or "-", g.owned_by or "-"]
    return [clean(c) for c in cells]


def gpu_json(g: Gpu, text: Callable[[str], str] = clean) -> dict[str, Any]:
    """One GPU as `-o json` prints it; `text` cleans a string (`fleet_json` passes one that
    remembers: 40,000 GPUs name a few hundred nodes, models and owners)."""
    o = g.owner
    throttle = g.throttle
    return {
        "node": text(g.node), "index": g.index, "instance": text(g.instance) or None, "uuid": text(g.uuid) or None,
        "model": text(g.model) or None, "mig_profile": text(g.mig_profile) or None, "util": _n(g.util),
        "mem_used_mib": _n(g.mem_used, 0), "mem_total_mib": _n(g.mem_total, 0), "temp_c": _n(g.temp),
        "power_w": _n(g.power), "power_limit_w": _n(g.power_limit), "sm_clock_mhz": _n(g.sm_clock, 0),
        "throttle": list(throttle) if throttle is not None else None, "clock_event_reasons": g.reasons,
        "xid": g.xid, "ecc_sbe": _n(g.ecc_sbe, 0), "ecc_dbe": _n(g.ecc_dbe, 0), "allocated": g.allocated,
        "owner": None if o is None else owner_json(o, g.owned_by, text),
        "flags": list(g.flags),
    }


def owner_json(o: Owner, by: str, text: Callable[[str], str] = clean) -> dict[str, Any]:
    return {"namespace": text(o.namespace), "pod": text(o.pod), "container": text(o.container) or None,
            "workload": text(o.workload) or None, "rank": o.rank, "label": text(o.label) or None,
            "project": text(o.project) or None, "user": text(o.user) or None, "by": by}


def fleet_json(gpus: list[Gpu], fleet: Fleet, notes: list[str], source: str) -> dict[str, Any]:
    text = functools.lru_cache(maxsize=65536)(clean)
    return {"source": clean(source), "gpus": [gpu_json(g, text) for g in gpus],
            "not_exported": {k: [clean(n) for n in v] for k, v in fleet.missing().items()},
            "notes": [clean(n, limit=1000) for n in notes]}
