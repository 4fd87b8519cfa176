"""Where the log view saves (ctrl+s): a file it names itself, in the user's data directory
(`$XDG_DATA_HOME/ranks/logs/`, by default `~/.local/share/ranks/logs/`), never the current
directory; the directories 0700 and the file 0600 (logs can hold secrets), never an existing file
overwritten. Over the SSH door the dashboard runs on the server as the server's user: a save goes
to the user's own directory there when the operator keeps one (`ranks serve --user-files`; the
user fetches it with `ssh HOST files NAME`), else it is refused (said in one line): it would write
the server's files."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

from monitors.humanize import plural
from monitors.state_dir import private_dir_fd
from sessions.errors import SessionError
from sessions.ssh import SSH_PORT_ENV, SSH_SESSION_ENV, USER_FILES_ENV, door_host, user_files

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def data_home() -> Path:
    raw = os.environ.get("XDG_DATA_HOME", "")
    return Path(raw) if raw and os.path.isabs(raw) else Path.home() / ".local" / "share"


def logs_dir() -> Path:
    return data_home() / "ranks" / "logs"


def door_files() -> str | None:
    """Over the SSH door: the directory of the user's own files on the server, if the operator
    keeps some (`ranks serve --user-files`); None elsewhere."""
    if not os.environ.get(SSH_SESSION_ENV):
        return None
    return os.environ.get(USER_FILES_ENV) or None


def save_refusal() -> str | None:
    """Why the log view may not save here (an SSH session of `ranks serve --ssh` whose server keeps
    no files for its users), or None."""
    if os.environ.get(SSH_SESSION_ENV) and not door_files():
        return ("saving is off over SSH: the file would be written on the server, as the server's user (its "
                "operator can keep your files: ranks serve --user-files); on your machine, `ranks logs WORKLOAD "
                "> FILE` saves them")
    return None


def saved_note(path: Path, lines: int) -> str:
    """What the log view says once it saved: the file's path, or over the door how to fetch it."""
    if door_files():
        port = os.environ.get(SSH_PORT_ENV, "")
        return (f"saved {plural(lines, 'line')} as {path.name} in your files on the server; on your machine: "
                f"ssh {f'-p {port} ' if port and port != '22' else ''}{door_host()} files {path.name} > {path.name}")
    return f"saved {plural(lines, 'line')} to {path}"


def write_log_file(namespace: str, name: str, lines: Sequence[str], now: float | None = None) -> Path:
    """Write `lines` to a new file `<namespace>_<name>-<YYYYmmdd-HHMMSS>.log` (`-2`, `-3`... when
    that name is taken) in `logs_dir()`; returns its path. Blocking: call it from a thread."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    stem = f"{_UNSAFE.sub('_', namespace)[:60]}_{_UNSAFE.sub('_', name)[:80]}-{stamp}"
    door = door_files()
    if door:  # over the SSH door: in the user's own directory, opened without following a link
        try:
            fd, fname = user_files.create(door, stem.lstrip("._-") or "log", ".log")
        except SessionError as exc:
            raise OSError(exc.message) from None
        with open(fd, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line + "\n")
        return Path(door) / fname
    base = logs_dir()
    # ranks/ and ranks/logs/: the user's alone (0700, no link followed, refused in one line if not)
    with private_dir_fd(base, depth=2) as dir_fd:
        for n in range(1, 1000):
            file = f"{stem}.log" if n == 1 else f"{stem}-{n}.log"
            try:
                fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=dir_fd)
            except FileExistsError:
                continue
            with open(fd, "w", encoding="utf-8", newline="\n") as f:
                for line in lines:
                    f.write(line + "\n")
            return base / file
    raise FileExistsError(f"no free file name for {stem} in {base}")
