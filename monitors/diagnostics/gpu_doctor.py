"""The metrics doctor (`ranks gpus --doctor`, the GPUs tab's note): what keeps GPU figures from
the screen, one line each, from what was read (pure: no I/O).

- no exporter (nor Prometheus) found;
- a GPU node whose exporter has no series (none runs there, or nothing scrapes it);
- an exporter without the ``pod``/``namespace`` labels (the kubelet's pod-resources socket not
  mounted, or the exporter's Kubernetes mapping off), its GPUs then attributed by UUID;
- fields not exported (and which of them dcgm-exporter's default counters leave out);
- Prometheus relabelling that drops fields or the pod labels the exporters do serve;
- a busy GPU whose UUID no pod claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..gpu_fleet import FIELD_OF_METRIC, FIELDS_BY_KEY, Fleet

POD_RESOURCES = "/var/lib/kubelet/pod-resources"


@dataclass(frozen=True)
class NodeGpus:
    """A GPU node as Kubernetes has it: its `nvidia.com/gpu` capacity, and how many pods hold."""

    capacity: float
    allocated: float


@dataclass(frozen=True)
class Direct:
    """An exporter read directly (beside Prometheus): the fields it serves, whether its series
    carry the pod labels, how many of its GPUs they give an owner."""

    fields: frozenset[str]
    pod_labels: bool
    owned: int


def fields_in(names: Iterable[str]) -> frozenset[str]:
    return frozenset(FIELD_OF_METRIC[n].key for n in names if n in FIELD_OF_METRIC)


def _nodes(nodes: Iterable[str], most: int = 4) -> str:
    nodes = sorted(nodes)
    head = ", ".join(nodes[:most]) + (f" and {len(nodes) - most} more" if len(nodes) > most else "")
    return ("node " if len(nodes) == 1 else "nodes ") + head


def unlabelled_nodes(fleet: Fleet, gpu_nodes: Mapping[str, NodeGpus],
                     direct: Mapping[str, Direct] | None = None) -> list[str]:
    """Nodes whose exporter's own series have no pod label keys (read directly: here, or beside
    Prometheus in `direct`), or, where that was not read, whose series give no GPU an owner though
    pods hold GPUs there (through Prometheus, an idle GPU's empty labels are not kept)."""
    out = []
    for node in sorted({*fleet.pod_labels, *(direct or {})}):
        if direct is not None and node in direct:
            if not direct[node].pod_labels:
                out.append(node)
            continue
        if fleet.pod_labels.get(node, True):
            continue
        k8s = gpu_nodes.get(node)
        if node in fleet.exact_nodes or (k8s is not None and k8s.allocated > 0):
            out.append(node)
    return out


def diagnose(fleet: Fleet, gpu_nodes: Mapping[str, NodeGpus], *, no_source: str = "", prometheus: bool = False,
             direct: Mapping[str, Direct] | None = None, by_uuid: Mapping[str, int] | None = None) -> list[str]:
    """One line per problem, most basic first (an empty list: nothing wrong)."""
    if no_source:
        return [f"no DCGM exporter found: {no_source}"]
    lines: list[str] = []
    silent = sorted(n for n, k in gpu_nodes.items() if k.capacity > 0 and n not in fleet.fields_by_node)
    if silent:
        what = "Prometheus has no DCGM series of" if prometheus else "no DCGM exporter answers for"
        lines.append(f"{what} {_nodes(silent)} ({len(silent)} of {len(gpu_nodes)} GPU nodes): no exporter runs "
                     "there, or nothing scrapes it")
    unlabelled = unlabelled_nodes(fleet, gpu_nodes, direct)
    relabelled: list[str] = []
    if prometheus and direct:  # (the exporter gives owners, Prometheus' series of the node none)
        relabelled = [n for n, d in sorted(direct.items()) if d.pod_labels and d.owned > 0
                      and n in fleet.pod_labels and not fleet.pod_labels[n]]
        if relabelled:
            lines.append(f"Prometheus' series of {_nodes(relabelled)} have no pod/namespace labels though the "
                         "exporter serves them: a relabelling drops them (labeldrop, or a ServiceMonitor's "
                         "relabelings)")
    bare = [n for n in unlabelled if n not in relabelled]
    for node in bare:
        said = by_uuid.get(node) if by_uuid is not None else None
        how = (f"; its GPUs attributed by UUID instead ({said} found in the pods' NVIDIA_VISIBLE_DEVICES or "
               "nvidia-smi -L)") if said is not None else ""
        lines.append(f"the DCGM exporter of node {node} has no pod/namespace labels: the kubelet's pod-resources "
                     f"socket ({POD_RESOURCES}) is not mounted in it, or DCGM_EXPORTER_KUBERNETES is off{how}")
    lines.extend(fleet.missing_notes())
    if prometheus and direct:
        for node, d in sorted(direct.items()):
            dropped = sorted(d.fields - fleet.fields_by_node.get(node, set()))
            if dropped and node in fleet.fields_by_node:
                names = ", ".join(FIELDS_BY_KEY[k].names[0] for k in dropped)
                lines.append(f"Prometheus has no {names} of node {node} though its exporter serves them: a "
                             "metric_relabel_configs drops them")
    unknown = {n for n in bare if by_uuid is None or n not in by_uuid}  # (no owner could be known there)
    for g in sorted(fleet.gpus.values(), key=lambda g: g.key):
        if "unclaimed" in g.flags and g.node not in unknown:
            lines.append(f"GPU {g.index} ({g.uuid or 'no UUID'}) on node {g.node} is busy ({g.util:.0f} %) but no "
                         "pod claims it")
    return lines
