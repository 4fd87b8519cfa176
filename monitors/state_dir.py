"""Where ranks keeps what outlives a process: `$XDG_STATE_HOME/ranks/` (default ~/.local/state),
the flight recorder's recordings and the sessions' histories."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def state_home() -> Path:
    raw = os.environ.get("XDG_STATE_HOME", "")
    return Path(raw) if raw and os.path.isabs(raw) else Path.home() / ".local" / "state"


def private_dir(directory: Path) -> None:
    """`directory` and its two parents (…/ranks/<room>/<context>), created 0700 where missing; the
    directory itself made 0700."""
    for d in (directory.parent.parent, directory.parent, directory):
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)


def write_private(path: Path, data: bytes) -> None:
    """`data` into `path` atomically (a temporary file replaced), 0600, never through a link."""
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def prune_oldest(directory: Path, keep: int, pattern: str = "*.json") -> None:
    """The oldest files of `directory` beyond the newest `keep` removed."""
    try:
        files = sorted((p.stat().st_mtime, p) for p in directory.glob(pattern))
    except OSError:
        return
    for _, p in files[: max(0, len(files) - keep)]:
        with contextlib.suppress(OSError):
            p.unlink()
