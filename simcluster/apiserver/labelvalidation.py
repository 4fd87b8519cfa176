"""Label keys and values as ``k8s.io/apimachinery/pkg/util/validation`` checks them, and the error
texts apimachinery writes about them (``field.Invalid``, Go's ``%q``, aggregated errors), so the
selectors' ``400`` answers read as the real API server's."""

from __future__ import annotations

import re
from typing import Any

_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile(_QNAME_FMT)
_QNAME_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_QNAME_MAX = 63
_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MAX = 63
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MAX = 253


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    # Reproduces the Go formatting, double space included: "(e.g. 'a',  or 'b', regex ...".
    parts = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {parts}regex used for validation is '{fmt}')"


def _max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def _blen(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def _is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if _blen(value) > _DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(_DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """validation.IsQualifiedName: label keys, optionally ``dns.prefix/name``. Returns error strings."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in _is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif _blen(name) > _QNAME_MAX:
        errs.append("name part " + _max_len_error(_QNAME_MAX))
    if not _QNAME_RE.fullmatch(name):
        errs.append("name part " + _regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """validation.IsValidLabelValue. Returns error strings (empty when valid)."""
    errs = []
    if _blen(value) > _LABEL_VALUE_MAX:
        errs.append(_max_len_error(_LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


_GO_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_quote(s: str) -> str:
    """Approximates Go's %q / strconv.Quote."""
    out = ['"']
    for ch in s:
        esc = _GO_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        else:
            o = ord(ch)
            out.append(f"\\x{o:02x}" if o < 0x80 else f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def go_json(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(go_json(x) for x in v) + "]"
    return str(v)


def invalid(path: str, value: Any, detail: str) -> str:
    """field.Invalid(path, value, detail).Error()."""
    shown = go_quote(value) if isinstance(value, str) else go_json(value)
    return f"{path}: Invalid value: {shown}: {detail}"


def aggregate(errs: list[str]) -> str:
    seen: list[str] = []
    for e in errs:
        if e not in seen:
            seen.append(e)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def parse_int64(s: str) -> int | None:
    """strconv.ParseInt(s, 10, 64)."""
    if not re.fullmatch(r"[+-]?[0-9]+", s):
        return None
    n = int(s)
    return n if -(2**63) <= n < 2**63 else None
