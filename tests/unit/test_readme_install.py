"""The README recommends installing ranks in an environment of its own (#26, item 11): `pipx
install` or `uv tool install`, naming every top-level package it would otherwise put beside a
shared environment's (their names are generic), and leaves its first block as it was."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_says_to_install_ranks_in_its_own_environment() -> None:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```\w*\n(.*?)^```", text, re.M | re.S)
    assert [ln.split("#")[0].strip() for ln in blocks[0].splitlines()] == ["make demo", "make test"]
    assert any(ln.split("#")[0].strip() == "pipx install ." and "uv tool install ." in ln
               for block in blocks for ln in block.splitlines())
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    tops = [name.rstrip("*") for name in packages["include"]]
    paragraph = text[text.index("pipx install ."):]
    paragraph = paragraph[:paragraph.index("\n\n", paragraph.index("pip install"))]
    assert [name for name in tops if f"`{name}`" not in paragraph] == []
