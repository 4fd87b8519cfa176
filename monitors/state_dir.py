"""Where ranks keeps what outlives a process: `$XDG_STATE_HOME/ranks/` (default ~/.local/state),
the flight recorder's recordings and the sessions' histories."""

from __future__ import annotations

import os
from pathlib import Path


def state_home() -> Path:
    raw = os.environ.get("XDG_STATE_HOME", "")
    return Path(raw) if raw and os.path.isabs(raw) else Path.home() / ".local" / "state"
