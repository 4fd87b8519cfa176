"""Fork hooks are registered before simcluster's first `preexec_fn` fork.

A module that registers a before/after-in-parent pair of fork hooks (concurrent.futures.thread)
and is first imported by another thread while a Popen with a `preexec_fn` is between its hooks
makes the parent release a lock its "before" never took: "release unlocked lock" on the demo's
stderr at exit. Whatever can start a pod process imports such modules first.
"""

from __future__ import annotations

import subprocess
import sys


def test_preexec_helpers_import_the_modules_with_fork_hooks_first() -> None:
    code = (
        "import sys\n"
        "assert 'concurrent.futures.thread' not in sys.modules\n"
        "import simcluster.node.reaper\n"
        "print('concurrent.futures.thread' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
