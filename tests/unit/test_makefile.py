"""`make demo` installs only what the demo needs; `make test` installs the test extras, also after
`make demo` (issue #11, item 11). Read with `make -n`: nothing is installed."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """What a clean clone has for make: the Makefile and pyproject.toml, no .venv."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def plan(where: Path, target: str) -> list[str]:
    """The commands `make TARGET` would run (make -n: nothing is run)."""
    r = subprocess.run(["make", "-n", "-C", str(where), target], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("make")]


def installs(commands: list[str]) -> list[str]:
    return [c for c in commands if "pip install" in c and "--upgrade pip" not in c]


def test_make_demo_installs_no_test_extras_and_make_test_does(clone: Path) -> None:
    demo = plan(clone, "demo")
    assert any("-m venv .venv" in c for c in demo), demo
    assert installs(demo) == ["PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e ."], demo
    assert any("ranks demo" in c for c in demo)
    assert any(c.endswith("'.[test]'") for c in installs(plan(clone, "test")))  # a clean clone: make test

    # after `make demo` (the venv and its stamp exist): `make test` still installs the extras, once
    venv = clone / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    time.sleep(0.01)
    (venv / ".installed-demo").touch()
    test = plan(clone, "test")
    assert not any("-m venv" in c for c in test), test
    assert installs(test) == ["PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e '.[test]'"], test
    assert installs(plan(clone, "demo")) == []  # the demo is installed: nothing again

    (venv / ".installed-test").touch()  # after `make test`: the demo needs nothing more
    assert installs(plan(clone, "demo")) == [] and installs(plan(clone, "test")) == []
    (venv / ".installed-demo").unlink()
    assert installs(plan(clone, "test")) == []
