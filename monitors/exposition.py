"""A tolerant parser for the Prometheus text exposition format (what a DCGM exporter serves).

Used by the exporter-scrape fallback of `monitors.metrics` (no Prometheus in the cluster: the
exporter pods' ``/metrics`` are fetched through the API server's pod proxy and parsed here).

    exp = parse(text)
    for s in exp.samples:          # Sample(name, labels, value, timestamp_ms)
        ...
    exp.types["DCGM_FI_DEV_GPU_UTIL"] == "gauge"; exp.helps[...]; exp.skipped  # bad lines

Handled: ``# HELP`` (escapes ``\\\\`` and ``\\n``) and ``# TYPE`` lines, other comments, blank
lines, CRLF, label values with the escapes ``\\"`` ``\\\\`` ``\\n`` (an unknown escape is kept as
written), a trailing comma in the label set, values ``NaN``, ``+Inf``, ``-Inf``, ``Inf`` and
decimal floats (``1e3``; hex such as ``0x1F`` is rejected), an optional timestamp in
milliseconds (or OpenMetrics seconds with a fraction), OpenMetrics ``# EOF``, and the quoted
UTF-8 metric names of Prometheus 3 (``{"my.metric",a="b"} 1``). A line that does not parse is
skipped and counted in ``skipped`` (its first few line numbers are kept in ``errors``); it never
raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["Exposition", "Sample", "parse", "parse_float", "parse_sample_line"]

_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_SPECIAL = {"nan": math.nan, "+inf": math.inf, "inf": math.inf, "-inf": -math.inf}
MAX_ERRORS_KEPT = 20


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float
    timestamp_ms: int | None = None


@dataclass
class Exposition:
    samples: list[Sample] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    helps: dict[str, str] = field(default_factory=dict)
    skipped: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line number, why), the first few

    def by_name(self, name: str) -> Iterator[Sample]:
        return (s for s in self.samples if s.name == name)


class _Bad(ValueError):
    pass


def parse_float(text: str) -> float:
    """A sample value as Prometheus writes it (``NaN``, ``+Inf``, ``-Inf``, decimals); ValueError."""
    t = text.strip()
    special = _SPECIAL.get(t.lower())
    if special is not None:
        return special
    if not _FLOAT_RE.fullmatch(t):
        raise ValueError(f"not a number: {text!r}")
    return float(t)


def _unescape_help(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "\\n":
            out.append("\n" if text[i + 1] == "n" else "\\")
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _quoted(line: str, i: int) -> tuple[str, int]:
    """Parse a double-quoted string starting at line[i] == '"'; return (value, index after it)."""
    if i >= len(line) or line[i] != '"':
        raise _Bad("expected '\"'")
    i += 1
    out: list[str] = []
    while i < len(line):
        c = line[i]
        if c == '"':
            return "".join(out), i + 1
        if c == "\\":
            if i + 1 >= len(line):
                raise _Bad("dangling backslash")
            nxt = line[i + 1]
            if nxt == "n":
                out.append("\n")
            elif nxt in '"\\':
                out.append(nxt)
            else:  # unknown escape: keep both characters
                out.append("\\" + nxt)
            i += 2
            continue
        out.append(c)
        i += 1
    raise _Bad("unterminated string")


def _skip_ws(line: str, i: int) -> int:
    while i < len(line) and line[i] in " \t":
        i += 1
    return i


def _labels(line: str, i: int) -> tuple[str | None, dict[str, str], int]:
    """Parse ``{...}`` at line[i] == '{'. Returns (quoted metric name if any, labels, index after '}')."""
    i += 1
    labels: dict[str, str] = {}
    name: str | None = None
    while True:
        i = _skip_ws(line, i)
        if i >= len(line):
            raise _Bad("unterminated label set")
        if line[i] == "}":
            return name, labels, i + 1
        if line[i] == '"':  # a quoted name: the metric name, or a quoted label name before '='
            text, j = _quoted(line, i)
            j = _skip_ws(line, j)
            if j < len(line) and line[j] == "=":
                key, i = text, j + 1
            else:
                if name is not None:
                    raise _Bad("two metric names")
                name, i = text, j
                if i < len(line) and line[i] == ",":
                    i += 1
                continue
        else:
            m = _LABEL_RE.match(line, i)
            if not m:
                raise _Bad(f"bad label name at column {i + 1}")
            key = m.group(0)
            i = _skip_ws(line, m.end())
            if i >= len(line) or line[i] != "=":
                raise _Bad(f"expected '=' after label {key!r}")
            i += 1
        i = _skip_ws(line, i)
        value, i = _quoted(line, i)
        if key in labels:
            raise _Bad(f"duplicate label {key!r}")
        labels[key] = value
        i = _skip_ws(line, i)
        if i < len(line) and line[i] == ",":
            i += 1
        elif i < len(line) and line[i] != "}":
            raise _Bad(f"expected ',' or '}}' at column {i + 1}")


def parse_sample_line(line: str) -> Sample:
    """One sample line (no comments); raises ValueError when it does not parse."""
    i = _skip_ws(line, 0)
    name: str | None = None
    m = _NAME_RE.match(line, i)
    if m:
        name = m.group(0)
        i = m.end()
    j = _skip_ws(line, i)
    labels: dict[str, str] = {}
    braced = j < len(line) and line[j] == "{"
    if braced:
        qname, labels, i = _labels(line, j)
        if qname is not None:
            if name is not None:
                raise _Bad("metric name given twice")
            name = qname
    if not name:
        raise _Bad("no metric name")
    rest = line[i:].split()
    if not rest or len(rest) > 2 or (not braced and line[i] not in " \t"):
        raise _Bad("expected ' VALUE [TIMESTAMP]'")
    try:
        value = parse_float(rest[0])
    except ValueError as exc:
        raise _Bad(str(exc)) from None
    ts: int | None = None
    if len(rest) == 2:
        try:
            ts = int(rest[1])
        except ValueError:
            try:  # OpenMetrics writes seconds with a fraction
                ts = int(float(rest[1]) * 1000)
            except (ValueError, OverflowError):
                raise _Bad(f"bad timestamp {rest[1]!r}") from None
    return Sample(name, labels, value, ts)


def parse(text: str | bytes) -> Exposition:
    """Parse a whole exposition; never raises (bad lines are counted in ``skipped``)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    exp = Exposition()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line[1:].strip().split(None, 2)
            if len(parts) >= 2 and parts[0] == "HELP":
                exp.helps[parts[1]] = _unescape_help(parts[2]) if len(parts) > 2 else ""
            elif len(parts) >= 2 and parts[0] == "TYPE":
                exp.types[parts[1]] = parts[2].strip().lower() if len(parts) > 2 else "untyped"
            continue  # other comments, `# EOF`, `# UNIT`
        try:
            exp.samples.append(parse_sample_line(line))
        except ValueError as exc:
            exp.skipped += 1
            if len(exp.errors) < MAX_ERRORS_KEPT:
                exp.errors.append((lineno, str(exc)))
    return exp
