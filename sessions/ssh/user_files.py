"""Each SSH user's own files on the server (`ranks serve --user-files DIR/%u`): where a dashboard
served by the door saves what the user asks for (the log view's ctrl+s), and what `ssh host files
[NAME]` gives back through the SSH connection. Nothing else of the server's is read or written
for a user, and no path is ever the user's: ranks names the files.

The pattern's last component holds `%u` (the user's name; `%%` is a `%`); the directory above it
must exist, be the server's user's and not be writable by others (another local user could plant a
link there). Each user's directory is created 0700 when a session starts, and opened without
following links: one that is a link, or not the server's user's alone, is refused. Files are
created 0600, never over an existing one, and read back only when they are regular files.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from sessions.errors import SessionError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")  # a file name ranks gives (and a user may ask for)


def parse_pattern(text: str) -> str:
    """`--user-files`: an absolute path whose last component holds `%u` (`DIR` alone means
    `DIR/%u`); SessionError (code 2) naming the rule it breaks."""
    if not text or not os.path.isabs(text):
        raise SessionError(f"--user-files {text!r}: give an absolute path (e.g. /srv/ranks/files/%u)", 2)
    path = text.rstrip("/") or "/"
    if "%u" not in path.replace("%%", ""):
        path = f"{path}/%u"
    parent, last = os.path.split(path)
    if "%u" not in last.replace("%%", "") or "%u" in parent.replace("%%", ""):
        raise SessionError(f"--user-files {text!r}: %u (the user's name) goes in the last component only", 2)
    return path


def check_base(pattern: str) -> None:
    """The directory the users' directories are made in: it exists, is the server's user's and
    nobody else may write to it; SessionError (code 2) otherwise. Blocking (a stat)."""
    base = os.path.dirname(pattern)
    try:
        st = os.stat(base)
    except OSError as exc:
        raise SessionError(f"--user-files: {base}: {exc.strerror or exc}", 2) from None
    if not stat.S_ISDIR(st.st_mode):
        raise SessionError(f"--user-files: {base} is not a directory", 2)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise SessionError(f"--user-files: {base} must be yours (the server's user's) and not writable by "
                           "group or others", 2)


def user_dir(pattern: str, user: str | None) -> Path:
    """The directory of `user`'s files, created 0700 if it is not there; SessionError when it
    cannot be used (no user: the server's own identity; a name that is no file name; a link or a
    directory that is not the server's user's alone). Blocking."""
    if not user or not NAME.fullmatch(user):
        raise SessionError("no files for this identity (its name is not a file name)", 1)
    path = pattern.replace("%u", "\0").replace("%%", "%").replace("\0", user)
    base, name = os.path.split(path)
    try:
        dfd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise SessionError(f"your files' directory cannot be reached: {exc.strerror or exc}", 1) from None
    try:
        try:
            os.mkdir(name, 0o700, dir_fd=dfd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise SessionError(f"your files' directory cannot be made: {exc.strerror or exc}", 1) from None
        fd = open_dir(name, dir_fd=dfd)
        os.close(fd)
    finally:
        os.close(dfd)
    return Path(path)


def open_dir(path: str | Path, *, dir_fd: int | None = None) -> int:
    """`path` opened as a directory without following a link, checked to be the server's user's
    alone (0700); SessionError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        raise SessionError(f"your files' directory cannot be used: {exc.strerror or exc}", 1) from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        raise SessionError("your files' directory is not the server's alone (0700); refused", 1)
    return fd


def create(directory: str | Path, stem: str, suffix: str) -> tuple[int, str]:
    """A new file `STEM.SUFFIX` (`STEM-2.SUFFIX`... when taken) in `directory` (checked as
    `open_dir`), 0600, never over anything there; (its fd open for writing, its name)."""
    dfd = open_dir(directory)
    try:
        for n in range(1, 1000):
            name = f"{stem}{suffix}" if n == 1 else f"{stem}-{n}{suffix}"
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dfd)
            except FileExistsError:
                continue
            return fd, name
    finally:
        os.close(dfd)
    raise FileExistsError(f"no free file name for {stem} in your files")


def listing(directory: str | Path) -> list[tuple[str, int, float]]:
    """(name, size, mtime) of each regular file, oldest first. Blocking."""
    dfd = open_dir(directory)
    out = []
    try:
        for name in os.listdir(dfd):
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and NAME.fullmatch(name):
                out.append((name, st.st_size, st.st_mtime))
    finally:
        os.close(dfd)
    return sorted(out, key=lambda f: (f[2], f[0]))


def open_file(directory: str | Path, name: str) -> int:
    """The file `name` of `directory` opened for reading (a name ranks gives: no path, no link, a
    regular file); SessionError (code 2: a bad name; 8: no such file) otherwise."""
    if not NAME.fullmatch(name):
        raise SessionError(f"{name!r} is not the name of one of your files (ssh HOST files lists them)", 2)
    dfd = open_dir(directory)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
        except OSError as exc:
            raise SessionError(f"no file {name} in your files (ssh HOST files lists them)", 8) from exc
    finally:
        os.close(dfd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SessionError(f"no file {name} in your files (ssh HOST files lists them)", 8)
    return fd
