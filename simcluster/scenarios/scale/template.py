"""Object templates with ``@@TOKEN@@`` placeholders, instantiated without copying what does not vary.

A `Template` is compiled once from a JSON-like tree (dicts, lists, strings, numbers) whose strings
may contain tokens. `fill` returns a new tree in which every dict and list on the way to a token is
a fresh copy and every token-free subtree is *shared* with the template (and so with every other
object filled from it): a pod's tolerations, resources, ports, most of its env and volumes exist
once per replica type, not once per pod. That is why objects built this way must never be
modified in place below the levels that hold tokens: copy before editing, as the object store and
`churn_pod` do (stored objects are never modified in place anyway).

Tokens start with ``@@`` (``@@NAME@@``); dict keys must not contain any; the key order of the
template is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

MARK = "@@"  # every token starts with it
Values = Mapping[str, str]
_Filler = Callable[[Values], Any]


class Template:
    """A tree with tokens, compiled into a function that builds its copies."""

    __slots__ = ("_fill", "tokens")

    def __init__(self, tree: Any, tokens: Iterable[str]) -> None:
        self.tokens = tuple(tokens)
        if not all(t.startswith(MARK) for t in self.tokens):
            raise ValueError(f"tokens start with {MARK}: {self.tokens}")
        fill = self._compile(tree)
        self._fill: _Filler = fill if fill is not None else (lambda _values: tree)

    def fill(self, values: Values) -> Any:
        """A copy of the template with each token replaced by ``values[token]``."""
        return self._fill(values)

    def _compile(self, node: Any) -> _Filler | None:
        """A function building `node` from the values, or None when `node` has no token (then
        it is used as it is). Thousands of templates are compiled for a big cluster: the walk
        looks for the tokens' common mark before anything else."""
        kind = type(node)
        if kind is str:
            if MARK not in node:
                return None
            present = tuple(t for t in self.tokens if t in node)
            if not present:
                return None
            if len(present) == 1 and node == present[0]:
                token = present[0]
                return lambda values: values[token]
            if len(present) == 1:
                token = present[0]
                return lambda values: node.replace(token, values[token])

            def fill_str(values: Values) -> str:
                out: str = node
                for t in present:
                    out = out.replace(t, values[t])
                return out

            return fill_str
        if kind is dict:
            dyn_items: list[tuple[Any, _Filler]] = []
            for key, value in node.items():
                if type(key) is str and MARK in key:
                    raise ValueError(f"a template's keys cannot hold tokens: {key!r}")
                vkind = type(value)
                if vkind is not str and vkind is not dict and vkind is not list:
                    continue
                fn = self._compile(value)
                if fn is not None:
                    dyn_items.append((key, fn))
            if not dyn_items:
                return None
            src = node

            def fill_dict(values: Values) -> dict[Any, Any]:
                out: dict[Any, Any] = src.copy()
                for key, fn in dyn_items:
                    out[key] = fn(values)
                return out

            return fill_dict
        if kind is list:
            dyn_list: list[tuple[int, _Filler]] = []
            for i, value in enumerate(node):
                fn = self._compile(value)
                if fn is not None:
                    dyn_list.append((i, fn))
            if not dyn_list:
                return None
            items = node

            def fill_list(values: Values) -> list[Any]:
                out: list[Any] = items.copy()
                for i, fn in dyn_list:
                    out[i] = fn(values)
                return out

            return fill_list
        return None
