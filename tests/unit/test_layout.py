"""The package layout's rules (#12) that import-linter's contracts (pyproject.toml, `make lint`) do
not say: the command line loads nothing heavy until a command runs (imports deferred into
functions), no private name crosses a module, themes use only Textual's colour and theme types,
screens reach the app only through its protocol. (Which room may import which is the contracts'.)"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("tui", "monitors", "sessions", "themes")


def modules_after(code: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", f"import sys; {code}; print(' '.join(sorted(sys.modules)))"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_ranks_help_loads_nothing_heavy() -> None:
    loaded = modules_after("import tui.cli")
    heavy = ("aiohttp", "textual", "pydantic", "yaml", "kubernetes", "asyncio", "monitors.kube", "monitors.monitor",
             "sessions", "tui.app", "tui.settings")
    assert [m for m in loaded if m.split(".")[0] in heavy or m.startswith(heavy)] == []


def test_no_private_name_is_imported_across_modules() -> None:
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom):
                    found += [f"{path.relative_to(ROOT)}:{node.lineno}: {a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == []


def test_themes_use_only_textual_colour_and_theme_types() -> None:
    """Themes are data turned into Textual themes: no widget, screen or app (import-linter cannot
    name an external package's submodules; the other house rules are its contracts in pyproject)."""
    allowed = ("textual.color", "textual.theme")
    found = []
    for path in sorted((ROOT / "themes").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: {n}" for n in names
                      if n.split(".")[0] == "textual" and n not in allowed]
    assert found == []


def test_screens_and_widgets_reach_the_app_only_through_the_dashboard_protocol() -> None:
    """A screen uses what `tui.dashboard.Dashboard` names of the app (mypy checks the members);
    no screen or widget names the app's class or its actions' module, even for typing only."""
    found = []
    for package in ("screens", "widgets"):
        for path in sorted((ROOT / "tui" / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom):
                    module = "." * node.level + (node.module or "")
                    if module.lstrip(".") in ("app", "dashboard_actions", "tui.app", "tui.dashboard_actions"):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {module} import ...")
                elif isinstance(node, ast.Name) and node.id in ("RanksApp", "DashboardActions"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.id}")
    assert found == []
