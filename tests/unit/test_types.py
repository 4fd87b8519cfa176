"""The type checker on the dashboard and the command line (#26, item 3): mypy, configured in
pyproject.toml (tui in its default mode), finds nothing in tui/, and every `# type: ignore` left
there names its error code and says why."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<rest>.*)$")


@pytest.mark.timeout(600)
def test_mypy_finds_nothing_in_tui() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "tui"], cwd=ROOT, capture_output=True, text=True,
                          timeout=590)
    assert proc.returncode in (0, 1) and proc.stdout.splitlines()[-1:] != [], proc.stdout + proc.stderr  # it ran
    found = [line for line in proc.stdout.splitlines() if line.startswith("tui/") and ": error:" in line]
    assert found == []


def test_every_type_ignore_in_tui_names_its_code_and_why() -> None:
    bare = []
    for path in sorted((ROOT / "tui").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = IGNORE.search(line)
            if m and not re.match(r"\[[a-z-]+(, *[a-z-]+)*\]\s+#\s*\S", m.group("rest")):
                bare.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert bare == []
