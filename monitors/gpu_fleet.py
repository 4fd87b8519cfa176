"""Every GPU of the cluster, one row each, from the DCGM exporter's own fields and labels (plain
data and pure functions: `gpu_fleet_source` reads the series, `diagnostics.gpu_doctor` judges them).

A GPU is told by its exporter's labels (docs/gpus.md, from dcgm-exporter's `render_metrics.go`):
the node (``Hostname``, ``hostname`` since dcgm-exporter #655, else the exporter pod's node), the
index ``gpu``, ``UUID`` (``uuid`` with ``--use-old-namespace``), ``modelName``, and for a MIG
device ``GPU_I_PROFILE``/``GPU_I_ID``; its owner by ``pod``/``namespace``/``container``
(``exported_*`` when Prometheus renamed them, ``pod_name``/``pod_namespace`` in the old
spelling). Its figures are the fields of `FIELDS`, each read from the first of its metric names
that the exporter serves; a field no exporter of the GPU's node serves is None, never 0, and
`Fleet.missing` says which and why once for the whole view.

Where the exporter's series carry no pod labels (the kubelet's pod-resources socket not mounted),
GPUs are attributed by UUID against what each pod reports (`attribute_by_uuid`): the row says
so (`owned_by == "uuid"`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NamedTuple, Protocol

from .model_views import WorkloadView

PodKey = tuple[str, str]
GpuKey = tuple[str, int, str]  # (node, gpu index, GPU instance id or "")


@dataclass(frozen=True, slots=True)
class DcgmField:
    """A figure of a GPU: its key, the DCGM metric names it is read from (first found wins), the
    query group it is asked in, whether dcgm-exporter's default counters have it, valid bounds."""

    key: str
    names: tuple[str, ...]
    group: str
    default: bool
    what: str
    lo: float = 0.0
    hi: float = 1e12


FIELDS: tuple[DcgmField, ...] = (
    DcgmField("util", ("DCGM_FI_DEV_GPU_UTIL",), "identity", True, "utilisation", hi=100.0),
    DcgmField("mem_used", ("DCGM_FI_DEV_FB_USED",), "memory", True, "memory used", hi=1e7),
    DcgmField("mem_free", ("DCGM_FI_DEV_FB_FREE",), "memory", True, "memory free", hi=1e7),
    DcgmField("temp", ("DCGM_FI_DEV_GPU_TEMP",), "thermal", True, "temperature", hi=200.0),
    DcgmField("power", ("DCGM_FI_DEV_POWER_USAGE",), "thermal", True, "power", hi=1e4),
    DcgmField("power_limit", ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"), "thermal",
              False, "power limit", hi=1e4),
    DcgmField("sm_clock", ("DCGM_FI_DEV_SM_CLOCK",), "thermal", True, "SM clock", hi=1e5),
    DcgmField("reasons", ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"), "thermal",
              False, "throttle reasons", hi=2.0**32),
    DcgmField("xid", ("DCGM_FI_DEV_XID_ERRORS",), "errors", True, "XID", hi=1e6),
    DcgmField("ecc_sbe", ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",), "errors", False, "ECC single-bit errors"),
    DcgmField("ecc_dbe", ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",), "errors", False, "ECC double-bit errors"),
)
FIELDS_BY_KEY = {f.key: f for f in FIELDS}
FIELD_OF_METRIC = {name: f for f in FIELDS for name in f.names}
GROUPS = ("identity", "memory", "thermal", "errors")
SPARSE_GROUPS = frozenset({"errors"})  # asked only where not 0 (with a count per node of what it serves)
IDENTITY_METRIC = "DCGM_FI_DEV_GPU_UTIL"

# DCGM's clock-event reason bits (dcgm-exporter's clock_events_collector names them so)
REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"), (0x2, "clocks_setting"), (0x4, "power_cap"), (0x8, "hw_slowdown"), (0x10, "sync_boost"),
    (0x20, "sw_thermal"), (0x40, "hw_thermal"), (0x80, "hw_power_brake"), (0x100, "display_clocks"),
)
THROTTLING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80  # reasons that slow a busy GPU (idle, settings: not)
THERMAL = 0x20 | 0x40
HOT_C = 85.0
IDLE_UTIL = 5.0  # at most this %: idle
BUSY_UTIL = 10.0  # at least this %: busy

NODE_LABELS = ("Hostname", "hostname")
OWNER_LABELS = (("exported_namespace", "exported_pod", "exported_container"), ("namespace", "pod", "container"),
                ("pod_namespace", "pod_name", "container_name"))
POD_LABEL_KEYS = frozenset(k for trio in OWNER_LABELS for k in trio)
DEFAULT_EXCLUDE = "dcgm-exporter"  # idle GPUs seen through a ServiceMonitor carry the exporter pod's labels


def reason_names(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in REASONS if mask & bit)


def throttle_names(mask: int) -> tuple[str, ...]:
    """The reasons of `mask` that hold a busy GPU's clocks down (not idle, not a clock setting)."""
    return reason_names(mask & THROTTLING)


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: `frozen` costs 3x per object (40,000 made)
class Owner:
    """Who holds a GPU: the pod, and where the model places it (workload, rank, project, user)."""

    namespace: str
    pod: str
    container: str = ""
    workload: str = ""  # KIND/NAME
    kind: str = ""
    name: str = ""
    rank: int | None = None
    label: str = ""  # master-0, worker-3
    project: str = ""
    user: str = ""
    created: float | None = None  # the pod's

    def __reduce__(self) -> tuple[type[Owner], tuple[Any, ...]]:
        return (Owner, _owner_fields(self))


@dataclass(slots=True, unsafe_hash=True)  # immutable by convention: `frozen` costs 3x per object (40,000 made)
class Gpu:
    """One GPU (or MIG device) as its exporter reports it. Figures are None when not exported."""

    node: str
    index: int
    instance: str  # GPU_I_ID ("" without MIG)
    uuid: str
    model: str
    mig_profile: str
    util: float | None = None
    mem_used: float | None = None
    mem_total: float | None = None
    temp: float | None = None
    power: float | None = None
    power_limit: float | None = None
    sm_clock: float | None = None
    reasons: int | None = None
    xid: int | None = None
    ecc_sbe: float | None = None
    ecc_dbe: float | None = None
    owner: Owner | None = None
    owned_by: str = ""  # "labels" (the exporter's pod labels), "uuid" (what the pod reports), ""
    allocated: bool = False  # a pod holds it (by the labels or the UUID)
    owner_unknown: bool = False  # its exporter has no pod labels and no UUID was matched: who holds it is not known

    def __reduce__(self) -> tuple[type[Gpu], tuple[Any, ...]]:
        return (Gpu, _gpu_fields(self))  # (pickled as its fields: `gpu_fleet_child` hands 40,000 over)

    @property
    def key(self) -> GpuKey:
        return (self.node, self.index, self.instance)

    @property
    def name(self) -> str:
        """``node/3`` or ``node/3:1`` (MIG instance 1)."""
        return f"{self.node}/{self.index}" + (f":{self.instance}" if self.instance else "")

    @property
    def throttle(self) -> tuple[str, ...] | None:
        if self.reasons is None:
            return None
        return reason_names(self.reasons & THROTTLING) if self.reasons & THROTTLING else ()

    @property
    def flags(self) -> tuple[str, ...]:
        """idle (allocated but idle), unclaimed (busy, no pod holds it), hot, throttled, erroring."""
        out: list[str] = []
        if self.allocated and self.util is not None and self.util <= IDLE_UTIL:
            out.append("idle")
        if not self.allocated and not self.owner_unknown and (self.util or 0) >= BUSY_UTIL:
            out.append("unclaimed")
        if (self.temp is not None and self.temp >= HOT_C) or (self.reasons or 0) & THERMAL:
            out.append("hot")
        if (self.reasons or 0) & THROTTLING:
            out.append("throttled")
        if (self.xid or 0) > 0 or (self.ecc_dbe or 0) > 0:
            out.append("erroring")
        return tuple(out)


_owner_fields = attrgetter(*(f.name for f in dataclasses.fields(Owner)))
_gpu_fields = attrgetter(*(f.name for f in dataclasses.fields(Gpu)))
_OWNER_AT = [f.name for f in dataclasses.fields(Gpu)].index("owner")


def with_owner(g: Gpu, owner: Owner, owned_by: str, allocated: bool) -> Gpu:
    """`replace(g, owner=..., owned_by=..., allocated=...)`, made as fast as a constructor call."""
    args = list(_gpu_fields(g))
    args[_OWNER_AT:_OWNER_AT + 3] = (owner, owned_by, allocated)
    return Gpu(*args)


class SeriesLike(Protocol):
    """A series as read: an exporter's `exposition.Sample` (Prometheus' answers go to `build_from`)."""

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def value(self) -> float: ...


@dataclass
class Fleet:
    """Every GPU read, and what the reading says about the exporters."""

    gpus: dict[GpuKey, Gpu] = field(default_factory=dict)
    fields_by_node: dict[str, set[str]] = field(default_factory=dict)  # node -> field keys it serves
    pod_labels: dict[str, bool] = field(default_factory=dict)  # node -> its series carry pod labels
    exact_nodes: set[str] = field(default_factory=set)  # nodes whose `pod_labels` a direct read told

    def missing(self) -> dict[str, list[str]]:
        """field key -> the nodes whose exporters do not serve it (only fields some GPU lacks)."""
        out: dict[str, list[str]] = {}
        for f in FIELDS:
            lacking = sorted(n for n, keys in self.fields_by_node.items() if f.key not in keys)
            if lacking:
                out[f.key] = lacking
        return out

    def missing_notes(self) -> list[str]:
        """One line per set of nodes lacking the same fields: which fields, and why."""
        by_nodes: dict[tuple[str, ...], list[DcgmField]] = {}
        for key, lacking in self.missing().items():
            by_nodes.setdefault(tuple(lacking), []).append(FIELDS_BY_KEY[key])
        notes = []
        for nodes, fields in sorted(by_nodes.items(), key=lambda kv: (-len(kv[0]), kv[0])):
            where = "every exporter" if set(nodes) == set(self.fields_by_node) else _nodes_text(nodes)
            off = [f for f in fields if not f.default]
            on = [f for f in fields if f.default]
            parts = []
            if off:
                parts.append(f"{', '.join(f.what for f in off)} ({', '.join(f.names[0] for f in off)}): not exported "
                             f"by {where} (not in dcgm-exporter's default counters: add them to its counters CSV)")
            if on:
                parts.append(f"{', '.join(f.what for f in on)} ({', '.join(f.names[0] for f in on)}): not exported "
                             f"by {where} (a default counter: its counters CSV or a relabelling leaves it out)")
            notes.extend(parts)
        return notes


def _nodes_text(nodes: Iterable[str], most: int = 3) -> str:
    names = list(nodes)
    head = ", ".join(names[:most])
    return f"node {head}" if len(names) == 1 else f"nodes {head}" + (f" and {len(names) - most} more"
                                                                        if len(names) > most else "")


def node_of(labels: Mapping[str, str]) -> str:
    """The GPU's node: ``Hostname``, ``hostname`` (`NODE_LABELS`), else ``node`` ("" for none, or a
    value that is no string: a broken answer's)."""
    node = labels.get("Hostname") or labels.get("hostname") or labels.get("node") or ""
    return node if isinstance(node, str) else ""


def gpu_key(labels: Mapping[str, str]) -> GpuKey | None:
    node = labels.get("Hostname") or labels.get("hostname") or labels.get("node")
    idx = labels.get("gpu")
    if not node or not idx or not (idx.isascii() and idx.isdigit() and len(idx) <= 6):
        return None
    return (node, int(idx), labels.get("GPU_I_ID", ""))


def owner_labels(labels: Mapping[str, str], exclude: str = DEFAULT_EXCLUDE) -> tuple[str, str, str] | None:
    """(namespace, pod, container) of the series' owner, from whichever spelling it carries; None
    for an idle GPU, or one labelled with the exporter's own pod (a ServiceMonitor's target labels)."""
    for ns_l, pod_l, c_l in OWNER_LABELS:
        ns, pod = _text(labels.get(ns_l)), _text(labels.get(pod_l))
        if ns and pod:
            if exclude and exclude in pod:
                return None
            return ns, pod, _text(labels.get(c_l))
    return None


def _text(v: object) -> str:
    """A label's value as text: "" for none, or for one that is no string (a broken answer's)."""
    return v if isinstance(v, str) else ""


def _identify(b: _Build, labels: Mapping[str, str], exclude: str) -> None:
    """What a series says of its GPU (UUID, model, MIG profile, owner), until one with the UUID
    has been read."""
    if not b.uuid:
        b.uuid = _text(labels.get("UUID")) or _text(labels.get("uuid"))
    if not b.model:
        b.model = _text(labels.get("modelName"))
    if not b.mig_profile:
        b.mig_profile = _text(labels.get("GPU_I_PROFILE"))
    if b.owner is None:
        b.owner = owner_labels(labels, exclude)
    b.identified = bool(b.uuid) and ("UUID" in labels or "uuid" in labels)


@dataclass
class _Build:
    node: str
    index: int
    instance: str
    uuid: str = ""
    model: str = ""
    mig_profile: str = ""
    owner: tuple[str, str, str] | None = None
    values: dict[str, float] = field(default_factory=dict)
    identified: bool = False  # a series with the GPU's UUID was read: its identity and owner are known


def build(series: Iterable[SeriesLike], *, pod_labels: Mapping[str, bool] | None = None,
          fields_by_node: Mapping[str, Iterable[str]] | None = None, exclude: str = DEFAULT_EXCLUDE,
          sparse: bool = False) -> Fleet:
    """The fleet from series (raw exporter samples, or Prometheus answers keyed by node and GPU).

    `fields_by_node`: which fields each node's exporter serves (a presence query); else taken from
    the series themselves; with `sparse`, a series of a node without a ``gpu`` label says the node
    serves that field (`SPARSE_GROUPS`' counts), and its GPUs without a series of it read 0. `pod_labels`: whether each node's series carry the pod label keys (only a
    direct scrape can tell: Prometheus drops empty labels); else whether any GPU of the node has an
    owner (through Prometheus a node whose GPUs are all idle cannot be told from one without them)."""
    return build_from(((s.name, s.labels, s.value) for s in series), pod_labels=pod_labels,
                      fields_by_node=fields_by_node, exclude=exclude, sparse=sparse)


Triple = tuple[str, Mapping[str, str], float]  # (metric name, labels, value): a series, unwrapped


def build_from(triples: Iterable[Triple], *, pod_labels: Mapping[str, bool] | None = None,
               fields_by_node: Mapping[str, Iterable[str]] | None = None, exclude: str = DEFAULT_EXCLUDE,
               sparse: bool = False) -> Fleet:
    """`build` from (name, labels, value) triples: what `gpu_fleet_source` hands over from a
    Prometheus answer without making an object of each of its 335,000 elements."""
    rows: dict[GpuKey, _Build] = {}
    seen_fields: dict[str, set[str]] = {}
    field_of = FIELD_OF_METRIC.get
    index_of: dict[str, int] = {}  # the "gpu" label's text -> its index (-1: not one); a few distinct
    for name, labels, v in triples:
        f = field_of(name)
        if f is None:
            continue
        get = labels.get
        node = get("Hostname") or get("hostname") or get("node")
        idx = get("gpu")
        if isinstance(idx, str):
            i = index_of.get(idx, -2)
            if i == -2:  # (as `gpu_key`: ASCII digits, at most 6 of them)
                i = index_of[idx] = int(idx) if idx.isascii() and idx.isdigit() and len(idx) <= 6 else -1
        else:
            i = -1
        inst = get("GPU_I_ID", "")
        if not node or i < 0 or node.__class__ is not str or inst.__class__ is not str:  # (JSON: any type)
            if sparse and f.group in SPARSE_GROUPS and (node := node_of(labels)):
                seen_fields.setdefault(node, set()).add(f.key)
            continue
        key = (node, i, inst)
        b = rows.get(key)
        if b is None:
            b = rows[key] = _Build(*key)
        served_here = seen_fields.get(node)
        if served_here is None:
            served_here = seen_fields[node] = set()
        fk = f.key
        served_here.add(fk)
        if not b.identified:  # (through Prometheus only the identity group's series carry these)
            _identify(b, labels, exclude)
        values = b.values
        if fk in values and name != f.names[0]:
            continue  # (the first name wins: an older spelling beside the new one)
        if f.lo <= v <= f.hi:  # (NaN fails both: dropped)
            values[fk] = v
    saw_owner: dict[str, bool] = {}
    for b in rows.values():
        if b.owner is not None:
            saw_owner[b.node] = True
        else:
            saw_owner.setdefault(b.node, False)
    fleet = Fleet()
    served = {n: set(k) for n, k in fields_by_node.items()} if fields_by_node is not None else seen_fields
    for n in seen_fields:
        served.setdefault(n, seen_fields[n])
    fleet.fields_by_node = served
    fleet.pod_labels = {**saw_owner, **(pod_labels or {})}
    fleet.exact_nodes = set(pod_labels or ())
    zeros = {f.key for f in FIELDS if f.group in SPARSE_GROUPS} if sparse else set()
    zeros_of = {n: tuple(zeros & keys) for n, keys in served.items()}
    # one string object per distinct node, model, profile, namespace and container (a few hundred
    # among 40,000 GPUs): less memory, and a reading pickled once each (`gpu_fleet_child`)
    same: dict[str, str] = {}
    gpus = fleet.gpus
    for b in rows.values():
        vals = b.values
        for fk in zeros_of.get(b.node, ()):
            vals.setdefault(fk, 0.0)
        vget = vals.get
        used, free = vget("mem_used"), vget("mem_free")
        owner = None
        if b.owner:
            ns, pod, container = b.owner
            owner = Owner(same.setdefault(ns, ns), pod, same.setdefault(container, container))
        reasons, xid = vget("reasons"), vget("xid")
        node = same.setdefault(b.node, b.node)
        gpus[(node, b.index, b.instance)] = Gpu(
            node, b.index, b.instance, b.uuid, same.setdefault(b.model, b.model),
            same.setdefault(b.mig_profile, b.mig_profile), vget("util"), used,
            used + free if used is not None and free is not None else None, vget("temp"), vget("power"),
            vget("power_limit"), vget("sm_clock"), int(reasons) if reasons is not None else None,
            int(xid) if xid is not None else None, vget("ecc_sbe"), vget("ecc_dbe"), owner,
            "labels" if owner else "", owner is not None)
    return fleet


def owners_of(workloads: Iterable[WorkloadView]) -> dict[PodKey, Owner]:
    """Each GPU pod of the workloads, placed: workload, rank, project, user."""
    out: dict[PodKey, Owner] = {}
    for w in workloads:
        for r in w.ranks:
            out[(r.namespace, r.pod)] = Owner(r.namespace, r.pod, "", f"{w.kind}/{w.name}", w.kind, w.name,
                                              r.rank, r.label, w.project, w.user, r.created)
    return out


def place(fleet: Fleet, owners: Mapping[PodKey, Owner]) -> None:
    """Each owned GPU's owner completed from the model (workload, rank, project, user)."""
    made: dict[tuple[str, str, str], Owner] = {}  # (a pod's GPUs share one)
    for key, g in fleet.gpus.items():
        o = g.owner
        if o is None:
            continue
        full = made.get((o.namespace, o.pod, o.container))
        if full is None:
            known = owners.get((o.namespace, o.pod))
            if known is None:
                continue
            ns, pod, _, *rest = _owner_fields(known)  # (`replace(known, container=...)`, made faster)
            full = made[(o.namespace, o.pod, o.container)] = Owner(ns, pod, o.container, *rest)
        fleet.gpus[key] = with_owner(g, full, g.owned_by, g.allocated)


class DeviceReport(NamedTuple):
    """What a pod reports of its GPUs (`parse_reported`): whole GPUs by UUID; MIG devices told
    exactly, (parent GPU's UUID, GPU instance id), by ``MIG-GPU-<uuid>/<gi>/<ci>`` (drivers before
    R470); MIG devices told only by their parent GPU and profile, (UUID, profile), by ``nvidia-smi
    -L``'s ``MIG 3g.40gb Device 0: (UUID: MIG-...)`` under its GPU's line (R470 and later name a
    MIG device by a ``MIG-<uuid>`` of its own, which names no instance)."""

    gpus: tuple[str, ...] = ()
    mig: tuple[tuple[str, str], ...] = ()
    mig_profiles: tuple[tuple[str, str], ...] = ()


_UUID = r"GPU-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}"
_MIG_EXACT = re.compile(rf"MIG-({_UUID})/(\d{{1,3}})/(\d{{1,3}})")
_GPU_LINE = re.compile(rf"GPU \d{{1,3}}: .{{0,200}}\(UUID: ({_UUID})\)\s*")
_MIG_LINE = re.compile(r"\s+MIG ([0-9A-Za-z.+]{1,32})\s+Device\s+\d{1,3}: \(UUID: MIG-[0-9A-Za-z-]{8,80}\)\s*")


def parse_reported(text: str) -> DeviceReport:
    """What a pod printed (its ``NVIDIA_VISIBLE_DEVICES``, comma-separated; ``nvidia-smi -L``'s
    lines) as a `DeviceReport`. A GPU line with MIG device lines under it is their parent, not a
    GPU the pod holds whole."""
    gpus: list[str] = []
    mig: list[tuple[str, str]] = []
    profiles: list[tuple[str, str]] = []
    listed: list[str] = []  # GPU lines of nvidia-smi -L
    parents: set[str] = set()
    parent = ""
    for line in text.splitlines():
        if (m := _GPU_LINE.fullmatch(line)) is not None:
            parent = m.group(1)
            listed.append(parent)
            continue
        if (m := _MIG_LINE.fullmatch(line)) is not None:
            if parent:
                profiles.append((parent, m.group(1)))
                parents.add(parent)
            continue
        for word in line.replace(",", " ").split():
            if (m := _MIG_EXACT.fullmatch(word)) is not None:
                mig.append((m.group(1), str(int(m.group(2)))))
            elif re.fullmatch(_UUID, word):
                gpus.append(word)
    gpus += [u for u in listed if u not in parents]
    return DeviceReport(tuple(dict.fromkeys(gpus)), tuple(dict.fromkeys(mig)), tuple(profiles))


def attribute_by_uuid(fleet: Fleet, nodes: Iterable[str], reported: Mapping[PodKey, DeviceReport | Iterable[str]],
                      owners: Mapping[PodKey, Owner]) -> tuple[int, list[str]]:
    """GPUs and MIG devices of `nodes` (whose series carry no pod labels) given the owner whose pod
    reports them (`NVIDIA_VISIBLE_DEVICES` or `nvidia-smi -L`, read in the pod): a whole GPU by
    its UUID; a MIG device by its parent's UUID and instance id, else by its parent's UUID and
    profile where that tells it (one pod reports as many devices of that profile on that GPU as
    are left unattributed there). How many were, and one line per GPU whose MIG devices several
    pods report by profile alone (which instance is whose is not told)."""
    reports = {pk: r if isinstance(r, DeviceReport) else parse_reported(" ".join(r)) for pk, r in reported.items()}
    whole: dict[str, PodKey] = {}
    exact: dict[tuple[str, str], PodKey] = {}
    for pk, rep in reports.items():
        whole.update(dict.fromkeys(rep.gpus, pk))
        exact.update(dict.fromkeys(rep.mig, pk))
    wanted = set(nodes)
    n = 0

    def give(key: GpuKey, g: Gpu, holder: PodKey) -> None:
        nonlocal n
        fleet.gpus[key] = with_owner(g, owners.get(holder) or Owner(*holder), "uuid", True)
        n += 1

    left: dict[tuple[str, str], list[GpuKey]] = {}  # (parent UUID, profile) -> its MIG devices not told yet
    told: dict[tuple[PodKey, str, str], int] = {}  # (pod, parent UUID, profile) -> its MIG devices told exactly
    for key, g in list(fleet.gpus.items()):
        if g.node not in wanted or g.owner is not None:
            continue
        holder = exact.get((g.uuid, g.instance)) if g.instance else whole.get(g.uuid)
        if holder is not None:
            give(key, g, holder)
            if g.instance:
                told[(holder, g.uuid, g.mig_profile)] = told.get((holder, g.uuid, g.mig_profile), 0) + 1
        elif g.instance and g.uuid:
            left.setdefault((g.uuid, g.mig_profile), []).append(key)
    claims: dict[tuple[str, str], dict[PodKey, int]] = {}  # (parent UUID, profile) -> pod -> devices not told
    for pk, rep in reports.items():
        for parent, profile in rep.mig_profiles:
            pods = claims.setdefault((parent, profile), {})
            pods[pk] = pods.get(pk, -told.get((pk, parent, profile), 0)) + 1
    notes = []
    for (parent, profile), pods in sorted(claims.items()):
        pods = {pk: c for pk, c in pods.items() if c > 0}
        keys = sorted(left.get((parent, profile), ()))
        if not pods or not keys:
            continue
        if len(pods) == 1 and next(iter(pods.values())) == len(keys):
            holder = next(iter(pods))
            for key in keys:
                give(key, fleet.gpus[key], holder)
            continue
        node = fleet.gpus[keys[0]].node
        who = ", ".join(f"{ns}/{pod}" for ns, pod in sorted(pods))
        notes.append(f"MIG devices {profile} of {node}'s GPU {parent}: held by {who}; which instance is whose "
                     "their MIG UUIDs do not tell")
    return n, notes


def parse_reported_uuids(text: str) -> list[str]:
    """GPU UUIDs in what a pod printed: ``NVIDIA_VISIBLE_DEVICES`` (comma-separated) and
    ``nvidia-smi -L`` lines (``GPU 0: NAME (UUID: GPU-...)``)."""
    out: list[str] = []
    for word in text.replace(",", " ").replace("(", " ").replace(")", " ").split():
        if (word.startswith("GPU-") or word.startswith("MIG-")) and 8 < len(word) <= 80 and word not in out:
            out.append(word)
    return out


def sort_key(by: str) -> Any:
    """A key for `sorted(gpus, key=...)`: util, mem, temp, power (highest first), age (held longest
    first), else by place (node, index, instance)."""
    def place_key(g: Gpu) -> tuple[str, int, str]:
        return (g.node, g.index, g.instance)

    if by == "util":
        return lambda g: (-(g.util if g.util is not None else -1), place_key(g))
    if by == "mem":
        return lambda g: (-(g.mem_used if g.mem_used is not None else -1), place_key(g))
    if by == "temp":
        return lambda g: (-(g.temp if g.temp is not None else -1), place_key(g))
    if by == "power":
        return lambda g: (-(g.power if g.power is not None else -1), place_key(g))
    if by == "age":  # held longest first; free GPUs last
        return lambda g: (g.owner.created if g.owner is not None and g.owner.created else float("inf"), place_key(g))
    return place_key
