"""Typed seams of monitors/ (#26, item 1): each side of a knot asks the other only what a typed
interface names, and no import, not even one for types only, closes the knot again."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported(path: Path) -> set[str]:
    """Every module `path` imports, at run time or for types only, as absolute names."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            out |= {module} | {f"{module}.{a.name}" for a in node.names}
    return out


def test_a_log_stream_knows_its_engine_only_as_its_host() -> None:
    """`LogStream` reached back into `LogEngine` for 15 members through a type-only import; it
    asks a `StreamHost` now, which the engine is (mypy checks that)."""
    found = imported(ROOT / "monitors" / "logs" / "stream.py")
    assert not {m for m in found if m.startswith("monitors.logs.engine")}, sorted(found)
