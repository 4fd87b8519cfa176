"""PromQL for DCGM exporter series: query builders, response parsing, value checks.

Everything the poller (`monitors.metrics`) asks Prometheus is built here, one aggregated query
per metric ("field") per refresh, never one per pod:

- `pod_queries(names, namespaces)` -> {field: query}: per (namespace, pod), the average over the
  pod's GPUs (``max`` for the XID, ``count`` for the number of GPUs). Both label spellings are
  read (conventions §5.2): the exporter's own ``namespace``/``pod`` (honorLabels on, or a plain
  scrape) and ``exported_namespace``/``exported_pod`` (a ServiceMonitor without honorLabels), the
  latter renamed with ``label_replace`` so every answer is keyed by ``namespace, pod``::

      avg by (namespace, pod) (M{namespace=~"a|b",pod!="",pod!~"EXCL",exported_pod=""} >= 0 <= 100)
      or avg by (namespace, pod) (label_replace(label_replace(
            M{exported_namespace=~"a|b",exported_pod!=""} >= 0 <= 100,
            "namespace", "$1", "exported_namespace", "(.*)"), "pod", "$1", "exported_pod", "(.*)"))

  ``exported_pod=""`` keeps a series from being counted twice, and ``pod!~EXCL`` (default: the
  exporter's own pod names) keeps idle GPUs seen through a ServiceMonitor — which carry the
  exporter pod's ``namespace``/``pod`` — from being attributed to the exporter.
- `node_queries(names, nodes=None)`: the same per node, keyed by ``node`` from ``Hostname`` or
  ``hostname`` (the label was renamed in dcgm-exporter #655), idle GPUs included.
- `history_query(names, namespaces, pods)`: utilisation of the shown pods for ``query_range``.

Out-of-range values are filtered inside the query (``>= lo <= hi``: this also drops NaN and
±Inf, and the 4294967295 DCGM reports for an unreadable utilisation), so one broken GPU does not
spoil a pod's average; `check` applies the same bounds again to every answer, so nothing out of
range ever reaches the screen. The GPU count is taken from the unfiltered series.

Parsing: `parse_response` turns an HTTP answer into an `Answer` (result type, result, warnings)
or raises `PromError` (``unavailable``: Prometheus or the path to it failed — connection, 5xx,
403/404 from the API server's proxy, timeouts; ``query``: Prometheus rejected this query).
`parse_vector` / `parse_matrix` key results by (namespace, pod) (`pod_key`, reading either
spelling) or node (`node_key`) and return `Reading`s (value, or None with the problem).
`aggregate_samples` computes the same per-pod/per-node aggregates from raw exporter samples
(the exporter-scrape fallback), with the same bounds and rules.

Metric names are configurable: `metric_names(overrides)` merges a mapping over
`DEFAULT_METRIC_NAMES` (keys: util, sm_active, mem_used, mem_free, power, temp, xid, reasons).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

DEFAULT_METRIC_NAMES: dict[str, str] = {
    "util": "DCGM_FI_DEV_GPU_UTIL",
    "sm_active": "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "mem_used": "DCGM_FI_DEV_FB_USED",
    "mem_free": "DCGM_FI_DEV_FB_FREE",
    "power": "DCGM_FI_DEV_POWER_USAGE",
    "temp": "DCGM_FI_DEV_GPU_TEMP",
    "xid": "DCGM_FI_DEV_XID_ERRORS",
    "reasons": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",  # not a default counter: absent, None
}
# Idle GPUs scraped through a ServiceMonitor carry the exporter pod's own namespace/pod labels.
DEFAULT_EXCLUDE_PODS = ".*dcgm-exporter.*"
POD_LABELS = ("namespace", "pod")
NODE_LABEL = "node"
HOSTNAME_LABELS = ("Hostname", "hostname")

PodKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Field:
    """One column of a `GpuSample`: how to compute it from the metrics and what is valid.

    `expr` is a template: ``{<metric key>}`` becomes the metric name and ``{sel}`` its label
    matchers. `lo`/`hi` bound the per-GPU value (before `scale`); `agg` is a PromQL aggregation.
    """

    key: str
    metric: str  # the metric key the field is read from (``mem_total_mib`` also uses mem_free)
    expr: str
    agg: str = "avg"
    lo: float | None = None
    hi: float | None = None
    scale: float = 1.0
    integer: bool = False


FIELDS: tuple[Field, ...] = (
    Field("util", "util", "{util}{sel}", "avg", 0.0, 100.0),
    Field("gpus", "util", "{util}{sel}", "count"),
    Field("sm_active", "sm_active", "{sm_active}{sel}", "avg", 0.0, 1.0, scale=100.0),
    Field("mem_used_mib", "mem_used", "{mem_used}{sel}", "avg", 0.0, 1e7),
    Field("mem_total_mib", "mem_used", "({mem_used}{sel} + {mem_free}{sel})", "avg", 0.0, 1e7),
    Field("power_w", "power", "{power}{sel}", "avg", 0.0, 1e4),
    Field("temp_c", "temp", "{temp}{sel}", "avg", 0.0, 200.0),
    Field("xid", "xid", "{xid}{sel}", "max", 0.0, 1e6, integer=True),
    # the clock-event reasons of the pod's GPUs: their highest bitmask (a throttled GPU's beats an
    # idle one's; two GPUs throttled for different reasons show the higher one's)
    Field("throttle", "reasons", "{reasons}{sel}", "max", 0.0, 4294967295.0, integer=True),
)
FIELDS_BY_KEY: dict[str, Field] = {f.key: f for f in FIELDS}
HISTORY_FIELD = FIELDS_BY_KEY["util"]


def metric_names(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """`DEFAULT_METRIC_NAMES` with `overrides` applied (unknown keys raise ValueError)."""
    names = dict(DEFAULT_METRIC_NAMES)
    for k, v in (overrides or {}).items():
        if k not in names:
            raise ValueError(f"unknown metric key {k!r} (one of {', '.join(names)})")
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"metric name for {k!r} must be a non-empty string")
        names[k] = v.strip()
    return names


# -- building ---------------------------------------------------------------------------------

_RE2_SPECIAL = set("\\.+*?()|[]{}^$")


def regex_escape(value: str) -> str:
    """Escape RE2 metacharacters (PromQL regexes are RE2, fully anchored)."""
    return "".join("\\" + c if c in _RE2_SPECIAL else c for c in value)


def promql_string(value: str) -> str:
    """A double-quoted PromQL string literal."""
    return json.dumps(value, ensure_ascii=False)


def alternation(values: Iterable[str]) -> str:
    """``a|b|c`` (sorted, de-duplicated, escaped) for a ``=~`` matcher."""
    return "|".join(regex_escape(v) for v in sorted(set(values)))


def _matchers(pairs: Iterable[tuple[str, str, str]]) -> str:
    return "{" + ",".join(f"{label}{op}{promql_string(value)}" for label, op, value in pairs) + "}"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _expr(f: Field, names: Mapping[str, str], sel: str, *, bounded: bool = True) -> str:
    body = f.expr.format(sel=sel, **names)
    if bounded and f.lo is not None:
        body += f" >= {_num(f.lo)}"
    if bounded and f.hi is not None:
        body += f" <= {_num(f.hi)}"
    return body


def _pod_selectors(namespaces: Iterable[str], pods: Iterable[str] | None,
                   exclude_pods: str | None) -> tuple[str, str]:
    ns_re = alternation(namespaces)
    plain: list[tuple[str, str, str]] = [("namespace", "=~", ns_re), ("pod", "!=", "")]
    exported: list[tuple[str, str, str]] = [("exported_namespace", "=~", ns_re), ("exported_pod", "!=", "")]
    if pods is not None:
        pod_re = alternation(pods)
        plain.append(("pod", "=~", pod_re))
        exported.append(("exported_pod", "=~", pod_re))
    if exclude_pods:
        plain.append(("pod", "!~", exclude_pods))
    plain.append(("exported_pod", "=", ""))
    return _matchers(plain), _matchers(exported)


def pod_query(f: Field, names: Mapping[str, str], namespaces: Iterable[str],
              pods: Iterable[str] | None = None, *, exclude_pods: str | None = DEFAULT_EXCLUDE_PODS) -> str:
    """One query giving `f` per (namespace, pod) for the given namespaces (and pods), both spellings."""
    plain, exported = _pod_selectors(namespaces, pods, exclude_pods)
    bounded = f.agg != "count"
    left = f"{f.agg} by (namespace, pod) ({_expr(f, names, plain, bounded=bounded)})"
    inner = _expr(f, names, exported, bounded=bounded)
    right = (
        f"{f.agg} by (namespace, pod) (label_replace(label_replace({inner}, "
        '"namespace", "$1", "exported_namespace", "(.*)"), "pod", "$1", "exported_pod", "(.*)"))'
    )
    return f"{left} or {right}"


def pod_queries(names: Mapping[str, str], namespaces: Iterable[str], pods: Iterable[str] | None = None,
                *, exclude_pods: str | None = DEFAULT_EXCLUDE_PODS) -> dict[str, str]:
    """{field key: query} for every field; empty when there is no namespace."""
    ns = sorted(set(namespaces))
    if not ns:
        return {}
    return {f.key: pod_query(f, names, ns, pods, exclude_pods=exclude_pods) for f in FIELDS}


def node_query(f: Field, names: Mapping[str, str], nodes: Iterable[str] | None = None) -> str:
    """`f` per node (``node`` label, from ``Hostname`` or ``hostname``); all nodes when None."""
    node_re = alternation(nodes) if nodes is not None else None
    bounded = f.agg != "count"
    parts = []
    for label in HOSTNAME_LABELS:
        sel = [(label, "!=", "")] if node_re is None else [(label, "=~", node_re)]
        inner = _expr(f, names, _matchers(sel), bounded=bounded)
        parts.append(
            f'{f.agg} by (node) (label_replace({inner}, "node", "$1", "{label}", "(.*)"))'
        )
    return " or ".join(parts)


def node_queries(names: Mapping[str, str], nodes: Iterable[str] | None = None) -> dict[str, str]:
    """{field key: query} per node; `nodes` None means every node, an empty iterable none."""
    if nodes is not None:
        nodes = sorted(set(nodes))
        if not nodes:
            return {}
    return {f.key: node_query(f, names, nodes) for f in FIELDS}


def xid_history_query(names: Mapping[str, str], namespace: str, pods: Iterable[str],
                      *, exclude_pods: str | None = DEFAULT_EXCLUDE_PODS) -> str:
    """The XIDs (non-zero) of the pods' GPUs, one series per GPU (node and index kept), for
    ``query_range``: when each was first raised and on which GPU (both spellings)."""
    plain, exported = _pod_selectors([namespace], pods, exclude_pods)
    by = "namespace, pod, Hostname, hostname, gpu"
    xid = names["xid"]
    return (f"max by ({by}) ({xid}{plain} > 0) or max by ({by}) (label_replace(label_replace({xid}{exported} > 0, "
            '"namespace", "$1", "exported_namespace", "(.*)"), "pod", "$1", "exported_pod", "(.*)"))')


def first_xids(result: Iterable[Mapping[str, Any]]) -> list[tuple[PodKey, str, int | None, int, float]]:
    """A `xid_history_query` range answer -> [((namespace, pod), node, gpu, code, first time)]:
    each GPU's first point (its XID then)."""
    out = []
    for series in _series(result):
        labels = series["metric"]
        k = pod_key(labels)
        values = series.get("values")
        if k is None or not isinstance(values, list):
            continue
        points = []
        for pair in values:
            if isinstance(pair, (list, tuple)) and len(pair) == 2:
                r = check(pair[1], 1.0, 1e6)
                try:
                    t = float(pair[0])
                except (TypeError, ValueError, OverflowError):
                    continue
                if r.value is not None and math.isfinite(t):
                    points.append((t, int(r.value)))
        if not points:
            continue
        t, code = min(points)
        gpu = labels.get("gpu", "")
        out.append((k, node_key(labels) or "", int(gpu) if gpu.isascii() and gpu.isdigit() and len(gpu) < 7 else None,
                    code, t))
    return out


def history_query(names: Mapping[str, str], namespaces: Iterable[str], pods: Iterable[str] | None,
                  *, exclude_pods: str | None = DEFAULT_EXCLUDE_PODS) -> str | None:
    """Utilisation per (namespace, pod) for ``query_range``; None when nothing is shown."""
    ns = sorted(set(namespaces))
    if not ns:
        return None
    return pod_query(HISTORY_FIELD, names, ns, pods, exclude_pods=exclude_pods)


# -- parsing ----------------------------------------------------------------------------------


class PromError(Exception):
    """A failed request. `kind` is ``unavailable`` (the source is down or unreachable) or
    ``query`` (Prometheus answered but rejected this query)."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status


@dataclass(frozen=True, slots=True)
class Answer:
    result_type: str
    result: list[dict[str, Any]]
    warnings: tuple[str, ...] = ()


def _short(text: str, n: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def parse_response(status: int, body: bytes | str) -> Answer:
    """An HTTP answer of ``/api/v1/query`` or ``query_range`` (directly or through the API
    server's service proxy) -> `Answer`; raises `PromError`."""
    try:  # (orjson: an answer of 40,000 GPUs is 60 MB; decoded as text only when it is not JSON)
        doc = orjson.loads(body) if body and not body.isspace() else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
        what = f"HTTP {status}" + (f": {_short(text)}" if text.strip() else "")
        if status == 200:
            raise PromError("unavailable", f"not a Prometheus answer ({what})", status)
        raise PromError("unavailable", what, status)
    if doc.get("kind") == "Status":  # the API server itself answered (proxy errors, RBAC)
        msg = doc.get("message") or doc.get("reason") or "error"
        raise PromError("unavailable", f"HTTP {status} from the API server: {_short(str(msg))}", status)
    warnings = tuple(str(w) for w in doc.get("warnings") or () if w)
    if doc.get("status") == "success" and status == 200:
        data = doc.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise PromError("unavailable", "malformed Prometheus answer (no data.result)", status)
        return Answer(str(data.get("resultType", "")), data["result"], warnings)
    etype = str(doc.get("errorType") or "")
    err = str(doc.get("error") or f"HTTP {status}")
    msg = f"HTTP {status}" + (f" {etype}" if etype else "") + f": {_short(err)}"
    if status in (400, 422) and etype not in ("timeout", "canceled", "unavailable"):
        raise PromError("query", msg, status)
    raise PromError("unavailable", msg, status)


@dataclass(frozen=True, slots=True)
class Reading:
    """A checked value: `value` is None when unusable, with the `problem` ("NaN", "out of range")."""

    value: float | None
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.value is not None


def check(raw: Any, lo: float | None = None, hi: float | None = None, scale: float = 1.0) -> Reading:
    """Parse and bound-check one value (a Prometheus string like ``"85"``, ``"NaN"``, or a float)."""
    try:
        v = float(raw)
    except (TypeError, ValueError):
        return Reading(None, f"not a number: {str(raw)[:40]!r}")
    if math.isnan(v):
        return Reading(None, "NaN")
    if math.isinf(v):
        return Reading(None, "+Inf" if v > 0 else "-Inf")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        return Reading(None, f"out of range: {_num(v)}")
    return Reading(v * scale)


def check_field(raw: Any, f: Field) -> Reading:
    r = check(raw, f.lo, f.hi, f.scale)
    if r.value is not None and f.integer:
        return Reading(float(int(r.value)))
    return r


def pod_key(labels: Mapping[str, str]) -> PodKey | None:
    """(namespace, pod) of a series, from ``exported_*``, the plain labels or the old
    ``pod_namespace``/``pod_name`` (``--use-old-namespace``); None for an idle GPU."""
    for ns_l, pod_l in (("exported_namespace", "exported_pod"), ("namespace", "pod"),
                        ("pod_namespace", "pod_name")):
        ns, pod = labels.get(ns_l) or "", labels.get(pod_l) or ""
        if ns and pod and isinstance(ns, str) and isinstance(pod, str):
            return ns, pod
    return None


def node_key(labels: Mapping[str, str]) -> str | None:
    """The node of a series: ``Hostname``/``hostname`` (raw exporter series) or ``node`` (answers
    of `node_queries`)."""
    for label in (*HOSTNAME_LABELS, NODE_LABEL):
        value = labels.get(label)
        if value and isinstance(value, str):
            return value
    return None


def _series(result: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """The series of a result that are objects with a label object (`metric`): what an answer
    holds besides (numbers, lists, a `metric` that is not an object) is left out."""
    for series in result:
        if isinstance(series, dict):
            labels = series.get("metric")
            if labels is None or isinstance(labels, dict):
                yield {**series, "metric": labels or {}}


def parse_vector(result: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, str]], Hashable | None],
                 f: Field | None = None) -> dict[Any, Reading]:
    """An instant-vector result -> {key: Reading}; series without a key are ignored."""
    out: dict[Any, Reading] = {}
    for series in _series(result):
        k = key(series["metric"])
        if k is None:
            continue
        value = series.get("value")
        raw = value[1] if isinstance(value, (list, tuple)) and len(value) == 2 else None
        r = check_field(raw, f) if f is not None else check(raw)
        prev = out.get(k)
        if prev is None or (not prev.ok and r.ok):
            out[k] = r
    return out


def parse_matrix(result: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, str]], Hashable | None],
                 f: Field | None = None) -> dict[Any, list[tuple[float, float]]]:
    """A range-vector result -> {key: [(unix time, value), ...]} with unusable points dropped."""
    out: dict[Any, list[tuple[float, float]]] = {}
    for series in _series(result):
        k = key(series["metric"])
        if k is None:
            continue
        points = out.setdefault(k, [])
        values = series.get("values")
        for pair in values if isinstance(values, list) else ():
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                continue
            r = check_field(pair[1], f) if f is not None else check(pair[1])
            try:
                t = float(pair[0])
            except (TypeError, ValueError, OverflowError):
                continue
            if r.value is not None and math.isfinite(t):
                points.append((t, r.value))
    for points in out.values():
        points.sort()
    return out


# -- the same aggregates from raw exporter samples -----------------------------------------------


def _agg(values: list[float], how: str) -> float:
    if how == "max":
        return max(values)
    if how == "count":
        return float(len(values))
    return sum(values) / len(values)


def aggregate_samples(samples: Iterable[Any], names: Mapping[str, str],
                      key: Callable[[Mapping[str, str]], Hashable | None]) -> dict[Any, dict[str, Reading]]:
    """Raw exporter samples (objects with ``name``, ``labels``, ``value``) -> {key: {field: Reading}},
    computed as the PromQL of `pod_queries`/`node_queries` would (per-GPU bounds, then avg/max/count).

    A key whose series all fail the bounds gets a Reading with the problem (e.g. the 4294967295
    of a broken GPU), so "present but invalid" differs from "absent".
    """
    wanted = {v: k for k, v in names.items()}
    # per metric key -> per group key -> per GPU identity -> value
    table: dict[str, dict[Any, dict[frozenset[tuple[str, str]], float]]] = {}
    for s in samples:
        mkey = wanted.get(s.name)
        if mkey is None:
            continue
        k = key(s.labels)
        if k is None:
            continue
        table.setdefault(mkey, {}).setdefault(k, {})[frozenset(s.labels.items())] = s.value
    out: dict[Any, dict[str, Reading]] = {}
    for f in FIELDS:
        if f.key == "mem_total_mib":
            used, free = table.get("mem_used", {}), table.get("mem_free", {})
            per_key = {
                k: {gpu: v + free[k][gpu] for gpu, v in gpus.items() if gpu in free.get(k, {})}
                for k, gpus in used.items()
            }
        else:
            per_key = table.get(f.metric, {})
        for k, gpus in per_key.items():
            if not gpus:
                continue
            if f.agg == "count":
                out.setdefault(k, {})[f.key] = Reading(float(len(gpus)))
                continue
            good: list[float] = []
            problem = ""
            for v in gpus.values():
                r = check(v, f.lo, f.hi)
                if r.value is not None:
                    good.append(r.value)
                else:
                    problem = problem or r.problem
            if good:
                out.setdefault(k, {})[f.key] = check_field(_agg(good, f.agg), f)
            else:
                out.setdefault(k, {})[f.key] = Reading(None, problem)
    return out
