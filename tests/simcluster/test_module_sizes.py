"""No module of the simulator does several jobs: none is over 800 lines (issue #26, item 10)."""

from __future__ import annotations

from pathlib import Path

import simcluster

LIMIT = 800


def test_no_simcluster_module_is_over_800_lines():
    root = Path(simcluster.__file__).parent
    sizes = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in sorted(root.rglob("*.py"))}
    assert len(sizes) > 50  # the whole package was read
    assert {name: n for name, n in sizes.items() if n > LIMIT} == {}
