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


def test_a_data_update_is_typed_to_the_last_field() -> None:
    """5 of `DataUpdate`'s 11 fields carried `Any` (the diagnosis, the postmortem, the progress, the
    health, the events): a screen could not know what it was given."""
    from monitors.dataloop import DataUpdate

    loose = {name: hint for name, hint in DataUpdate.__annotations__.items() if "Any" in str(hint)}
    assert loose == {}


def test_screens_ask_the_data_loop_never_its_monitor() -> None:
    """What a screen or an action needs of the model or the connection is a named query of the data
    loop (`idle_sessions`, `locate_failure`, `gpu_fit`, `api_client`...): nothing in the dashboard
    reaches across the thread seam through `data.monitor` (`.client`, `.model`)."""
    found = []
    for path in sorted((ROOT / "tui").rglob("*.py")):
        if "cli" in path.relative_to(ROOT / "tui").parts:
            continue  # (the command line runs its own Monitor, on its own loop)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == "monitor" and \
                    ast.unparse(node.value).split(".")[-1] == "data":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_the_data_loop_is_rooms_each_under_300_lines() -> None:
    """`monitors/dataloop.py` was the hub of eight jobs in 686 lines; its rooms now hold one each."""
    package = ROOT / "monitors" / "dataloop"
    modules = [ROOT / "monitors" / "dataloop.py", *sorted(package.glob("*.py"))]
    sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines()) for p in modules if p.exists()}
    assert len(sizes) >= 5 and all(n < 300 for n in sizes.values()), sizes
