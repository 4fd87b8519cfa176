"""Kubernetes label and field selectors.

A port of the parsing and matching rules in ``k8s.io/apimachinery/pkg/labels``
and ``k8s.io/apimachinery/pkg/fields``, down to the error messages the real API
server returns, so clients see the same ``400`` texts.

Selectors are parsed once and compiled to flat tuples; ``matches`` is then a
tight loop suitable for filtering tens of thousands of objects per list.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .labelvalidation import (
    aggregate,
    go_json,
    go_quote,
    invalid,
    is_qualified_name,
    is_valid_label_value,
    parse_int64,
)

__all__ = [
    "DOES_NOT_EXIST",
    "DOUBLE_EQUALS",
    "EQUALS",
    "EXISTS",
    "GREATER_THAN",
    "IN",
    "LESS_THAN",
    "NOT_EQUALS",
    "NOT_IN",
    "FieldGetter",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "escape_field_value",
    "is_qualified_name",
    "is_valid_label_value",
]


class SelectorError(ValueError):
    """A label or field selector could not be parsed (the real server answers 400)."""


# selection.Operator values, spelled as in apimachinery.
DOES_NOT_EXIST = "!"
EQUALS = "="
DOUBLE_EQUALS = "=="
IN = "in"
NOT_EQUALS = "!="
NOT_IN = "notin"
EXISTS = "exists"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)
_VALID_OPERATORS = (*_BINARY_OPERATORS, EXISTS, DOES_NOT_EXIST)

# --------------------------------------------------------------------------------------
# label selectors
# --------------------------------------------------------------------------------------

_MISSING: Any = object()

# compiled opcodes
_OP_EQ, _OP_NE, _OP_IN, _OP_NOTIN, _OP_EXISTS, _OP_DNE, _OP_GT, _OP_LT, _OP_FALSE = range(9)


@dataclass(frozen=True)
class Requirement:
    """One label requirement: ``key <operator> values`` (values sorted, deduplicated)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    @classmethod
    def new(
        cls, key: str, operator: str, values: Iterable[str] | None = None, path: str | None = None
    ) -> Requirement:
        """labels.NewRequirement: validate and build. Raises SelectorError.

        ``path`` prefixes field paths in messages (``None`` = the root, as the parser uses).
        """
        raw = None if values is None else list(values)
        vals = raw or []
        errs: list[str] = []
        key_path = f"{path}.key" if path else "key"
        values_path = f"{path}.values" if path else "values"
        kerrs = is_qualified_name(key) if isinstance(key, str) else ["must be a string"]
        if kerrs:
            errs.append(invalid(key_path, key, "; ".join(kerrs)))
        if operator in (IN, NOT_IN):
            if not vals:
                errs.append(
                    invalid(
                        values_path, raw or None, "for 'in', 'notin' operators, values set can't be empty"
                    )
                )
        elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
            if len(vals) != 1:
                errs.append(invalid(values_path, raw, "exact-match compatibility requires one single value"))
        elif operator in (EXISTS, DOES_NOT_EXIST):
            if vals:
                errs.append(
                    invalid(values_path, raw, "values set must be empty for exists and does not exist")
                )
        elif operator in (GREATER_THAN, LESS_THAN):
            if len(vals) != 1:
                errs.append(
                    invalid(values_path, raw, "for 'Gt', 'Lt' operators, exactly one value is required")
                )
            for i, v in enumerate(vals):
                if not isinstance(v, str) or parse_int64(v) is None:
                    errs.append(
                        invalid(
                            f"{values_path}[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer"
                        )
                    )
        else:
            supported = ", ".join(go_quote(o) for o in _VALID_OPERATORS)
            errs.append(
                f"{path + '.' if path else ''}operator: Unsupported value: {go_json(operator)}: "
                f"supported values: {supported}"
            )
        for i, v in enumerate(vals):
            if not isinstance(v, str):
                errs.append(invalid(f"{values_path}[{i}]", str(v), "must be a string"))
                continue
            verrs = is_valid_label_value(v)
            if verrs:
                errs.append(invalid(f"{values_path}[{i}][{key}]", v, "; ".join(verrs)))
        if errs:
            raise SelectorError(aggregate(errs))
        return cls(key, operator, tuple(sorted(set(vals))))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return LabelSelector((self,)).matches(labels)

    def __str__(self) -> str:
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        joined = ",".join(self.values)
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({joined})"
        sym = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{sym}{joined}"

    def _compile(self) -> tuple[str, int, Any]:
        op, vals = self.operator, self.values
        if op in (EQUALS, DOUBLE_EQUALS):
            return (self.key, _OP_EQ, vals[0]) if len(vals) == 1 else (self.key, _OP_IN, frozenset(vals))
        if op == NOT_EQUALS:
            return (self.key, _OP_NE, vals[0]) if len(vals) == 1 else (self.key, _OP_NOTIN, frozenset(vals))
        if op == IN:
            return (self.key, _OP_EQ, vals[0]) if len(vals) == 1 else (self.key, _OP_IN, frozenset(vals))
        if op == NOT_IN:
            return (self.key, _OP_NE, vals[0]) if len(vals) == 1 else (self.key, _OP_NOTIN, frozenset(vals))
        if op == EXISTS:
            return (self.key, _OP_EXISTS, None)
        if op == DOES_NOT_EXIST:
            return (self.key, _OP_DNE, None)
        if op in (GREATER_THAN, LESS_THAN):
            n = parse_int64(vals[0]) if len(vals) == 1 else None
            if n is None:
                return (self.key, _OP_FALSE, None)
            return (self.key, _OP_GT if op == GREATER_THAN else _OP_LT, n)
        return (self.key, _OP_FALSE, None)


# ---- lexer / parser (labels/selector.go) ----

_T_EOS = "end of string"
_T_ID = "identifier"
_T_IN = "in"
_T_NOTIN = "notin"
_T_OPEN = "("
_T_CLOSE = ")"
_T_COMMA = ","
_T_NOT = "!"
_T_EQ = "="
_T_EQEQ = "=="
_T_NE = "!="
_T_GT = ">"
_T_LT = "<"

_TOKEN_RE = re.compile(r"[ \t\r\n]*(?:(==|!=|[=!(),<>])|([^ \t\r\n=!(),<>]+))?")
_KEYWORDS = {"in": _T_IN, "notin": _T_NOTIN}
_OPERATOR_TOKENS = {
    _T_IN: IN,
    _T_NOTIN: NOT_IN,
    _T_EQ: EQUALS,
    _T_EQEQ: DOUBLE_EQUALS,
    _T_NE: NOT_EQUALS,
    _T_GT: GREATER_THAN,
    _T_LT: LESS_THAN,
}


def _lex(text: str) -> list[tuple[str, str]]:
    # The Go lexer reads a 0 byte as end of input; mimic that.
    nul = text.find("\x00")
    if nul >= 0:
        text = text[:nul]
    items: list[tuple[str, str]] = []
    pos, n = 0, len(text)
    match = _TOKEN_RE.match
    while True:
        m = match(text, pos)
        assert m is not None  # the pattern can match the empty string
        pos = m.end()
        sym, word = m.group(1), m.group(2)
        if sym is not None:
            items.append((sym, sym))
        elif word is not None:
            items.append((_KEYWORDS.get(word, _T_ID), word))
        else:
            if pos < n:  # pragma: no cover - every character is whitespace, symbol or word
                raise SelectorError(f"unable to parse selector at offset {pos}")
            items.append((_T_EOS, ""))
            return items


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    # context "Values": in/notin are plain identifiers
    def lookahead(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.items[self.pos]
        if values and tok in (_T_IN, _T_NOTIN):
            tok = _T_ID
        return tok, lit

    def consume(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.lookahead(values)
        self.pos += 1
        return tok, lit

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok in (_T_ID, _T_NOT):
                try:
                    reqs.append(self.parse_requirement())
                except SelectorError as exc:
                    raise SelectorError(f"unable to parse requirement: {exc}") from None
                t, lit2 = self.consume()
                if t == _T_EOS:
                    return reqs
                if t == _T_COMMA:
                    t2, l2 = self.lookahead()
                    if t2 not in (_T_ID, _T_NOT):
                        raise SelectorError(f"found '{l2}', expected: identifier after ','")
                else:
                    raise SelectorError(f"found '{lit2}', expected: ',' or 'end of string'")
            elif tok == _T_EOS:
                return reqs
            else:
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def parse_requirement(self) -> Requirement:
        key, op = self.parse_key_and_infer_operator()
        if op in (EXISTS, DOES_NOT_EXIST):
            return Requirement.new(key, op, [])
        op = self.parse_operator()
        values = self.parse_values() if op in (IN, NOT_IN) else self.parse_exact_value()
        return Requirement.new(key, op, sorted(values))

    def parse_key_and_infer_operator(self) -> tuple[str, str]:
        op = ""
        tok, lit = self.consume()
        if tok == _T_NOT:
            op = DOES_NOT_EXIST
            tok, lit = self.consume()
        if tok != _T_ID:
            raise SelectorError(f"found '{lit}', expected: identifier")
        errs = is_qualified_name(lit)
        if errs:
            raise SelectorError(invalid("<nil>", lit, "; ".join(errs)))
        t, _ = self.lookahead()
        if t in (_T_EOS, _T_COMMA) and op != DOES_NOT_EXIST:
            op = EXISTS
        return lit, op

    def parse_operator(self) -> str:
        tok, lit = self.consume(values=False)
        op = _OPERATOR_TOKENS.get(tok)
        if op is None:
            raise SelectorError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        return op

    def parse_values(self) -> set[str]:
        tok, lit = self.consume()
        if tok != _T_OPEN:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok in (_T_ID, _T_COMMA):
            s = self.parse_identifiers_list()
            if self.consume()[0] != _T_CLOSE:
                raise SelectorError(f"found '{lit}', expected: ')'")
            return s
        if tok == _T_CLOSE:  # "()"
            self.consume()
            return {""}
        raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        s: set[str] = set()
        while True:
            tok, lit = self.consume()
            if tok == _T_ID:
                s.add(lit)
                tok2, lit2 = self.lookahead()
                if tok2 == _T_COMMA:
                    continue
                if tok2 == _T_CLOSE:
                    return s
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _T_COMMA:  # "(," / ",," / ",)" all add the empty value
                if not s:
                    s.add("")
                tok2, _ = self.lookahead()
                if tok2 == _T_CLOSE:
                    s.add("")
                    return s
                if tok2 == _T_COMMA:
                    self.consume()
                    s.add("")
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        tok, _ = self.lookahead()
        if tok in (_T_EOS, _T_COMMA):
            return {""}
        tok, lit = self.consume()
        if tok == _T_ID:
            return {lit}
        raise SelectorError(f"found '{lit}', expected: identifier")


_MATCH_EXPRESSION_OPS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector (an AND of requirements).

    ``match_nothing`` marks ``labels.Nothing()`` (what a nil ``metav1.LabelSelector`` means).
    """

    requirements: tuple[Requirement, ...] = ()
    match_nothing: bool = False
    _compiled: tuple[tuple[str, int, Any], ...] = field(default=(), init=False, repr=False, compare=False)

    EVERYTHING: ClassVar[LabelSelector]
    NOTHING: ClassVar[LabelSelector]

    def __post_init__(self) -> None:
        if self.match_nothing:
            compiled: tuple[tuple[str, int, Any], ...] = (("", _OP_FALSE, None),)
        else:
            compiled = tuple(r._compile() for r in self.requirements)
        object.__setattr__(self, "_compiled", compiled)

    # ---- constructors ----

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        """labels.Parse: ``None``/``""`` selects everything. Raises SelectorError."""
        if not text:
            return cls.EVERYTHING
        reqs = _LabelParser(text).parse()
        reqs.sort(key=lambda r: r.key)
        return cls(tuple(reqs))

    @classmethod
    def from_match(cls, selector: Mapping[str, Any] | None) -> LabelSelector:
        """metav1.LabelSelectorAsSelector for a ``{matchLabels, matchExpressions}`` dict.

        ``None`` matches nothing; an empty selector matches everything.
        """
        if selector is None:
            return cls.NOTHING
        if not isinstance(selector, Mapping):
            raise SelectorError(f"invalid label selector: expected an object, got {type(selector).__name__}")
        match_labels = selector.get("matchLabels") or {}
        exprs = selector.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping) or not isinstance(exprs, list):
            raise SelectorError(
                "invalid label selector: matchLabels must be an object and matchExpressions a list"
            )
        if not match_labels and not exprs:
            return cls.EVERYTHING
        reqs = [Requirement.new(k, EQUALS, [v]) for k, v in match_labels.items()]
        for expr in exprs:
            if not isinstance(expr, Mapping):
                raise SelectorError("invalid label selector: matchExpressions entries must be objects")
            raw_op = expr.get("operator")
            op = _MATCH_EXPRESSION_OPS.get(raw_op) if isinstance(raw_op, str) else None
            if op is None:
                shown = go_quote(raw_op) if isinstance(raw_op, str) else go_quote(str(raw_op or ""))
                raise SelectorError(f"{shown} is not a valid label selector operator")
            values = expr.get("values")
            if values is not None and not isinstance(values, list):
                raise SelectorError("invalid label selector: matchExpressions values must be a list")
            reqs.append(Requirement.new(expr.get("key", ""), op, values))
        reqs.sort(key=lambda r: r.key)
        return cls(tuple(reqs))

    @classmethod
    def from_set(cls, labels: Mapping[str, str] | None) -> LabelSelector:
        """labels.SelectorFromSet (validated): every key must equal its value."""
        if not labels:
            return cls.EVERYTHING
        reqs = sorted((Requirement.new(k, EQUALS, [v]) for k, v in labels.items()), key=lambda r: r.key)
        return cls(tuple(reqs))

    # ---- queries ----

    def empty(self) -> bool:
        """True when the selector does not restrict anything (Nothing() is not empty)."""
        return not self.requirements and not self.match_nothing

    def equalities(self) -> list[tuple[str, str]]:
        """The (label, value) pairs every object it matches carries (its single-valued `=`, `==`
        and `in` requirements): where an index may find the candidates."""
        return [(r.key, r.values[0]) for r in self.requirements
                if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        compiled = self._compiled
        if not compiled:
            return True
        if labels is None:
            labels = {}
        get = labels.get
        for key, op, arg in compiled:
            v = get(key, _MISSING)
            if op == _OP_EQ:
                if v != arg:
                    return False
            elif op == _OP_IN:
                if v not in arg:  # _MISSING is hashable and never in the set
                    return False
            elif op == _OP_NE:
                if v == arg:
                    return False
            elif op == _OP_NOTIN:
                if v in arg:
                    return False
            elif op == _OP_EXISTS:
                if v is _MISSING:
                    return False
            elif op == _OP_DNE:
                if v is not _MISSING:
                    return False
            elif op in (_OP_GT, _OP_LT):
                n = parse_int64(v) if isinstance(v, str) else None
                if n is None or (n <= arg if op == _OP_GT else n >= arg):
                    return False
            else:
                return False
        return True

    def requires_exact_match(self, key: str) -> str | None:
        """The single value ``key`` must have (``=``, ``==`` or one-value ``in``), else None."""
        for r in self.requirements:
            if r.key == key:
                if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


LabelSelector.EVERYTHING = LabelSelector()
LabelSelector.NOTHING = LabelSelector(match_nothing=True)


# --------------------------------------------------------------------------------------
# field selectors (fields/selector.go)
# --------------------------------------------------------------------------------------


def escape_field_value(s: str) -> str:
    """fields.EscapeValue."""
    return s.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(s: str) -> str:
    """fields.UnescapeValue (the Go code formats an unescaped rune with %v, i.e. as a number)."""
    if "\\" not in s and "," not in s and "=" not in s:
        return s
    out: list[str] = []
    in_slash = False
    for c in s:
        if in_slash:
            if c in "\\,=":
                out.append(c)
            else:
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """First occurrence of '!=', '==' or '=' (in that preference at each position)."""
    for i in range(len(term)):
        rest = term[i : i + 2]
        if rest == "!=" or rest == "==":
            return term[:i], rest, term[i + 2 :]
        if rest[:1] == "=":
            return term[:i], "=", term[i + 1 :]
    return None


_UNMATCHABLE: Any = object()


def _field_string(v: Any) -> Any:
    """How a non-string field value compares: bools/numbers as Go formats them, composites never."""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() and abs(v) < 1e21 else repr(v)
    return _UNMATCHABLE


FieldGetter = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class FieldSelector:
    """A parsed field selector: an AND of ``(field, '=' | '!=', value)`` terms.

    A field is a dotted path into the object (``metadata.name``, ``spec.nodeName``,
    ``involvedObject.name``...), unless `bind` gave it a getter (the resource's own way of
    reading that field label, e.g. a pod's ``status.podIP`` is its first ``podIPs`` entry). A
    missing field reads as ``""``; booleans and numbers compare in their JSON spelling;
    maps/lists never equal any value.
    """

    terms: tuple[tuple[str, str, str], ...] = ()
    getters: Mapping[str, FieldGetter] | None = field(default=None, compare=False, hash=False, repr=False)
    _compiled: tuple[tuple[tuple[str, ...], bool, str, FieldGetter | None], ...] = field(
        default=(), init=False, repr=False, compare=False
    )

    EVERYTHING: ClassVar[FieldSelector]

    def __post_init__(self) -> None:
        getters = self.getters or {}
        compiled = tuple((tuple(f.split(".")), op == "!=", v, getters.get(f)) for f, op, v in self.terms)
        object.__setattr__(self, "_compiled", compiled)

    @classmethod
    def parse(cls, text: str | None, allowed: Collection[str] | None = None,
              renames: Mapping[str, str] | None = None) -> FieldSelector:
        """fields.ParseSelector plus the per-resource field-label conversion.

        ``allowed``: the field labels the resource supports; others raise
        ``SelectorError("field label not supported: <field>")``. ``renames``: labels the
        resource accepts under another name (a pod's ``spec.host`` is ``spec.nodeName``).
        """
        if not text:
            return cls.EVERYTHING
        terms: list[tuple[str, str, str]] = []
        for part in sorted(_split_terms(text)):
            if not part:
                continue
            split = _split_term(part)
            if split is None:
                raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
            lhs, op, rhs = split
            terms.append((lhs, "!=" if op == "!=" else "=", _unescape_field_value(rhs)))
        if allowed is not None:
            for f, _, _ in terms:
                if f not in allowed:
                    raise SelectorError(f"field label not supported: {f}")
        if renames:
            terms = [(renames.get(f, f), op, v) for f, op, v in terms]
        return cls(tuple(terms))

    def bind(self, getters: Mapping[str, FieldGetter] | None) -> FieldSelector:
        """This selector reading the fields in `getters` with them instead of by path."""
        if not getters or not self.terms:
            return self
        return FieldSelector(self.terms, getters)

    def requirements(self) -> list[tuple[str, str, str]]:
        """The terms as ``(field, '=' | '!=', value)``, sorted as the real parser sorts them."""
        return list(self.terms)

    def empty(self) -> bool:
        return not self.terms

    def requires_exact_match(self, field_name: str) -> str | None:
        """The value ``field_name`` must equal, if the selector has an ``=`` term for it."""
        for f, op, v in self.terms:
            if f == field_name and op == "=":
                return v
        return None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for path, negate, want, getter in self._compiled:
            if getter is not None:
                cur: Any = getter(obj)
            else:
                cur = obj
                for part in path:
                    if cur.__class__ is dict or isinstance(cur, Mapping):
                        cur = cur.get(part)
                        if cur is None:
                            break
                    else:
                        cur = None
                        break
            if cur is None:
                got: Any = ""
            elif cur.__class__ is str:
                got = cur
            else:
                got = _field_string(cur)
            if (got == want) is negate:
                return False
        return True

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{escape_field_value(v)}" for f, op, v in self.terms)


FieldSelector.EVERYTHING = FieldSelector()
