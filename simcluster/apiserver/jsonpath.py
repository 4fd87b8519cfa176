"""The kubectl JSONPath subset that CRD ``additionalPrinterColumns`` use: fields, escapes, ``*``,
``..``, indexes, slices, unions and ``?()`` filters, evaluated as client-go's jsonpath does, and its
``PrintResults`` text of one value."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any


class JSONPathError(Exception):
    """A path this subset cannot parse, or an index out of bounds while evaluating one."""


Step = tuple[Any, ...]  # ("field", name), ("index", i), ("filter", left, op, right)...
_FILTER_RE = re.compile(
    r"""^\s*@(?P<left>(?:\.[^=!<>\s]*)?)\s*(?:(?P<op>==|!=|<=|>=|<|>)\s*(?P<right>.+?))?\s*$"""
)


def _split_escaped_field(path: str, i: int) -> tuple[str, int]:
    """Read a dotted field name starting at *i* (after the dot); backslash escapes."""
    out: list[str] = []
    n = len(path)
    while i < n:
        ch = path[i]
        if ch == "\\" and i + 1 < n:
            out.append(path[i + 1])
            i += 2
            continue
        if ch in ".[":
            break
        out.append(ch)
        i += 1
    return "".join(out), i


def _parse_literal(text: str) -> tuple[str, Any]:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return ("lit", text[1:-1])
    if text.startswith("@"):
        return ("path", compile_path(text[1:]))
    if text in ("true", "false"):
        return ("lit", text == "true")
    try:
        return ("lit", int(text))
    except ValueError:
        pass
    try:
        return ("lit", float(text))
    except ValueError as exc:
        raise JSONPathError(f"bad literal {text!r}") from exc


def _find_bracket_end(path: str, i: int) -> int:
    """Index of the ']' closing the '[' at *i*, honouring quotes and parentheses."""
    depth = 0
    quote = ""
    j = i + 1
    while j < len(path):
        ch = path[j]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "]" and depth == 0:
            return j
        j += 1
    raise JSONPathError("unterminated '['")


@lru_cache(maxsize=1024)
def compile_path(path: str) -> tuple[Step, ...]:
    """The steps of a JSONPath (``{...}`` and a leading ``$`` optional); raises JSONPathError."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1].strip()
    if path.startswith("$"):
        path = path[1:]
    steps: list[Step] = []
    i = 0
    n = len(path)
    while i < n:
        ch = path[i]
        if ch == ".":
            if i + 1 < n and path[i + 1] == ".":
                steps.append(("recurse",))
                i += 2
                if i < n and path[i] == "[":
                    continue
                name, i = _split_escaped_field(path, i)
                steps.append(("wild",) if name == "*" else ("field", name))
                continue
            name, i = _split_escaped_field(path, i + 1)
            if name == "*":
                steps.append(("wild",))
            elif name:
                steps.append(("field", name))
            continue
        if ch == "[":
            end = _find_bracket_end(path, i)
            inner = path[i + 1:end].strip()
            i = end + 1
            if inner == "*":
                steps.append(("wild",))
            elif inner.startswith("?"):
                expr = inner[1:].strip()
                if expr.startswith("(") and expr.endswith(")"):
                    expr = expr[1:-1]
                m = _FILTER_RE.match(expr)
                if not m:
                    raise JSONPathError(f"unsupported filter {inner!r}")
                left = compile_path(m.group("left") or "")
                op = m.group("op")
                right = _parse_literal(m.group("right")) if op else None
                steps.append(("filter", left, op, right))
            elif inner[:1] in "'\"":
                keys = [k.strip()[1:-1] for k in inner.split(",")]
                steps.append(("keys", tuple(keys)))
            elif ":" in inner:
                parts = [p.strip() for p in inner.split(":")]
                if len(parts) > 3:
                    raise JSONPathError(f"bad slice {inner!r}")
                nums = [int(p) if p else None for p in parts] + [None] * (3 - len(parts))
                steps.append(("slice", nums[0], nums[1], nums[2]))
            elif "," in inner:
                steps.append(("indexes", tuple(int(p) for p in inner.split(","))))
            else:
                try:
                    steps.append(("index", int(inner)))
                except ValueError as exc:
                    raise JSONPathError(f"bad index {inner!r}") from exc
            continue
        raise JSONPathError(f"unexpected {ch!r} in {path!r}")
    return tuple(steps)


def _descendants(value: Any, out: list[Any]) -> None:
    out.append(value)
    if isinstance(value, dict):
        for key in sorted(value):
            _descendants(value[key], out)
    elif isinstance(value, list):
        for item in value:
            _descendants(item, out)


def _compare(left: Any, op: str, right: Any) -> bool:
    if isinstance(left, bool) or isinstance(right, bool):
        if op == "==":
            return bool(left == right)
        if op == "!=":
            return bool(left != right)
        return False
    numeric = isinstance(left, int | float) and isinstance(right, int | float)
    if not numeric and type(left) is not type(right):
        return op == "!="
    try:
        if op == "==":
            return bool(left == right)
        if op == "!=":
            return bool(left != right)
        if op == "<":
            return bool(left < right)
        if op == ">":
            return bool(left > right)
        if op == "<=":
            return bool(left <= right)
        if op == ">=":
            return bool(left >= right)
    except TypeError:
        return False
    return False


def evaluate(steps: Sequence[Step], values: list[Any]) -> list[Any]:
    """Every value *steps* reach from *values*, in client-go's order; raises JSONPathError."""
    for step in steps:
        kind = step[0]
        out: list[Any] = []
        if kind == "field":
            key = step[1]
            for v in values:
                if isinstance(v, dict) and key in v:
                    out.append(v[key])
        elif kind == "keys":
            for v in values:
                if isinstance(v, dict):
                    out.extend(v[k] for k in step[1] if k in v)
        elif kind == "wild":
            for v in values:
                if isinstance(v, dict):
                    out.extend(v[k] for k in sorted(v))
                elif isinstance(v, list):
                    out.extend(v)
        elif kind == "recurse":
            for v in values:
                _descendants(v, out)
        elif kind == "index":
            idx = step[1]
            for v in values:
                if isinstance(v, list):
                    j = idx + len(v) if idx < 0 else idx
                    if not 0 <= j < len(v):
                        raise JSONPathError("array index out of bounds")
                    out.append(v[j])
        elif kind == "indexes":
            for v in values:
                if isinstance(v, list):
                    for idx in step[1]:
                        j = idx + len(v) if idx < 0 else idx
                        if not 0 <= j < len(v):
                            raise JSONPathError("array index out of bounds")
                        out.append(v[j])
        elif kind == "slice":
            start, stop, stride = step[1], step[2], step[3]
            for v in values:
                if not isinstance(v, list):
                    continue
                # Same bounds rules as client-go jsonpath evalArray.
                length = len(v)
                s = 0 if start is None else start
                if s < 0:
                    s += length
                e = length if stop is None else stop
                if e < 0:
                    e += length
                if e == s:
                    continue
                if s >= length or s < 0 or e > length or e < 0 or s > e:
                    raise JSONPathError("array index out of bounds")
                if stride is not None and stride <= 0:
                    raise JSONPathError("step must be > 0")
                out.extend(v[s:e:stride or 1])
        elif kind == "filter":
            left_steps, op, right = step[1], step[2], step[3]
            for v in values:
                items = v if isinstance(v, list) else ([v] if isinstance(v, dict) else [])
                for item in items:
                    try:
                        lhs = evaluate(left_steps, [item])
                    except JSONPathError:
                        continue
                    if op is None:
                        if lhs and lhs[0] is not None:
                            out.append(item)
                        continue
                    if not lhs:
                        continue
                    if right[0] == "lit":
                        rhs: Any = right[1]
                    else:
                        try:
                            rvals = evaluate(right[1], [item])
                        except JSONPathError:
                            continue
                        if not rvals:
                            continue
                        rhs = rvals[0]
                    if _compare(lhs[0], op, rhs):
                        out.append(item)
        values = out
        if not values:
            break
    return values


def jsonpath_first(obj: Any, path: str) -> tuple[bool, Any]:
    """Evaluate a (simple) kubectl JSONPath; return ``(found, first_value)``."""
    try:
        results = evaluate(compile_path(path), [obj])
    except JSONPathError:
        return False, None
    if not results:
        return False, None
    return True, results[0]


def go_text(value: Any) -> str | None:
    """jsonpath PrintResults for one value: scalars via fmt.Fprint, containers as JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
