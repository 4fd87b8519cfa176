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
    # (the `sim` extra: the demo cluster's Open MPI and mpi4py, #27; not the test extras)
    assert installs(demo) == ["PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e '.[sim]'"], demo
    assert any("ranks demo" in c for c in demo)
    assert any(c.endswith("'.[test,sim]'") for c in installs(plan(clone, "test")))  # a clean clone: make test

    # after `make demo` (the venv and its stamp exist): `make test` still installs the extras, once
    venv = clone / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    time.sleep(0.01)
    (venv / ".installed-demo").touch()
    test = plan(clone, "test")
    assert not any("-m venv" in c for c in test), test
    assert installs(test) == ["PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e '.[test,sim]'"], test
    assert installs(plan(clone, "demo")) == []  # the demo is installed: nothing again

    (venv / ".installed-test").touch()  # after `make test`: the demo needs nothing more
    assert installs(plan(clone, "demo")) == [] and installs(plan(clone, "test")) == []
    (venv / ".installed-demo").unlink()
    assert installs(plan(clone, "test")) == []


def test_make_demo_says_what_it_installs_before_it_does(clone: Path) -> None:
    """#24: a new user sees what `make demo` puts on the machine before it does: the virtualenv,
    the Python packages in it, then (scripts/system-deps.sh) the system packages."""
    demo = plan(clone, "demo")
    venv = next(i for i, c in enumerate(demo) if "-m venv .venv" in c)
    pip = next(i for i, c in enumerate(demo) if c in installs(demo))
    said = [c for c in demo[:venv] if c.startswith("echo ")]
    assert said and ".venv/" in said[-1] and "virtualenv" in said[-1], demo
    said = [c for c in demo[venv + 1:pip] if c.startswith("echo ")]
    assert said and "installing ranks" in said[-1] and ".venv/" in said[-1], demo
    assert any("system-deps.sh --optional prometheus" in c for c in demo[pip:]), demo


def test_system_deps_says_what_it_installs_before_apt_get_runs(tmp_path: Path) -> None:
    """The script names the packages and the tool (apt-get, with sudo unless root) before it runs
    it; apt-get is a stand-in here that prints when it is called (the real one would change the
    machine)."""
    stub = tmp_path / "bin"
    stub.mkdir()
    for tool in ("apt-get", "sudo"):
        script = stub / tool
        body = 'exec "$@"' if tool == "sudo" else 'echo "APT-GET $*"'
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
    env = {"PATH": f"{stub}:/usr/bin:/bin", "HOME": str(tmp_path)}
    r = subprocess.run(["bash", str(ROOT / "scripts" / "system-deps.sh"), "--optional", "no-such-tool-xyz"],
                       capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    said = next(i for i, ln in enumerate(lines) if ln.startswith("installing system packages"))
    ran = next(i for i, ln in enumerate(lines) if ln.startswith("APT-GET"))
    assert said < ran, lines
    assert "apt-get" in lines[said] and "no-such-tool-xyz" in lines[said] and "optional" in lines[said], lines
