"""Where ranks keeps what outlives a process: `$XDG_STATE_HOME/ranks/` (default ~/.local/state),
the flight recorder's recordings and the sessions' histories; and the helpers that keep ranks'
own directories its user's alone.

ranks' own directories (`…/ranks/<room>/<context>`: the last `depth` components of a path) are
walked one by one from their base (`$XDG_STATE_HOME`, followed as the user set it), each opened
relative to the one before with `O_DIRECTORY | O_NOFOLLOW` and created 0700 where missing
(`mkdir` relative to its parent: no path is looked up twice). One that is a symbolic link, not a
directory, not the user's, or open to others (any group or other permission bit) is refused with
one line (`PrivateDirError`), never repaired through a path and never written into: a link planted
in the state directory cannot send a recording elsewhere. Files are created 0600 beside a
temporary name and renamed in place, read without following a link, and only when regular (a
FIFO would block the reader).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_LIMIT = 64 << 20  # bytes of one state file read at most


class PrivateDirError(OSError):
    """One of ranks' own directories (or files) is not its user's alone: what and why, one line."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EPERM, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def state_home() -> Path:
    raw = os.environ.get("XDG_STATE_HOME", "")
    return Path(raw) if raw and os.path.isabs(raw) else Path.home() / ".local" / "state"


def _refuse(path: Path, why: str) -> PrivateDirError:
    from .sanitize import shown

    return PrivateDirError(f"{shown(str(path), limit=300)} {why}: refused (ranks keeps its files only in "
                           "directories of its own, 0700)")


def _checked(fd: int, path: Path, *, directory: bool) -> os.stat_result:
    st = os.fstat(fd)
    if directory and not stat.S_ISDIR(st.st_mode):
        raise _refuse(path, "is not a directory")
    if not directory and not stat.S_ISREG(st.st_mode):
        raise _refuse(path, "is not a regular file")
    if st.st_uid != os.geteuid():
        raise _refuse(path, f"belongs to uid {st.st_uid}, not to you")
    if st.st_mode & 0o077:
        raise _refuse(path, f"is open to others (mode {stat.S_IMODE(st.st_mode):04o}; chmod 700 makes it yours alone)")
    return st


def _open_child(parent: int, name: str, path: Path, *, create: bool) -> int | None:
    """`name` in the directory `parent`, opened without following a link (created 0700 when missing
    and `create`); None when missing and not `create`."""
    for _ in range(2):
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
            with contextlib.suppress(FileExistsError):  # (made meanwhile by another ranks: checked as any)
                os.mkdir(name, 0o700, dir_fd=parent)
            continue
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):  # (a link: ENOTDIR with O_DIRECTORY)
                try:
                    link = stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
                except OSError:
                    link = False
                raise _refuse(path, "is a symbolic link" if link else "is not a directory") from None
            raise
        try:
            _checked(fd, path, directory=True)
        except BaseException:
            os.close(fd)
            raise
        return fd
    raise _refuse(path, "could not be created")


@contextlib.contextmanager
def private_dir_fd(directory: Path, *, depth: int = 3, create: bool = True) -> Iterator[int | None]:
    """A descriptor of `directory`, whose last `depth` components are ranks' own (see the module):
    each opened without following links and checked (created 0700 when missing and `create`).
    None when it is missing and not `create`. Raises `PrivateDirError` (one line) for a link, a
    file, someone else's directory or one open to others."""
    parts = directory.parts
    if depth < 1 or len(parts) <= depth:
        raise ValueError(f"{directory}: needs {depth} components under its base")
    base = Path(*parts[:-depth])
    if create:
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise
        yield None
        return
    path = base
    try:
        for name in parts[-depth:]:
            path = path / name
            child = _open_child(fd, name, path, create=create)
            os.close(fd)
            fd = -1
            if child is None:
                break
            fd = child
        yield fd if fd >= 0 else None
    finally:
        if fd >= 0:
            os.close(fd)


def private_dir(directory: Path, *, depth: int = 3) -> None:
    """`directory` and its ranks-owned parents (…/ranks/<room>/<context>) created 0700 where missing,
    each checked (`private_dir_fd`)."""
    with private_dir_fd(directory, depth=depth):
        pass


def write_private(path: Path, data: bytes, *, depth: int = 3) -> None:
    """`data` into `path` atomically (a temporary file beside it, 0600, renamed in place), in its
    directory as opened by `private_dir_fd`: never through a link."""
    with private_dir_fd(path.parent, depth=depth) as fd:
        assert fd is not None
        tmp = f".{path.name}.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=fd)
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view):]
        except BaseException:
            os.close(out)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise
        os.close(out)
        os.replace(tmp, path.name, src_dir_fd=fd, dst_dir_fd=fd)


def read_private(path: Path, *, depth: int = 3, limit: int = READ_LIMIT) -> bytes | None:
    """The bytes of `path` (at most `limit`), read in its directory as `private_dir_fd` opens it,
    without following a link; None when it (or its directory) does not exist. Raises
    `PrivateDirError` for a link, a FIFO or anything not the user's own regular file."""
    with private_dir_fd(path.parent, depth=depth, create=False) as fd:
        if fd is None:
            return None
        try:
            f = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _refuse(path, "is a symbolic link") from None
            raise
        try:
            _checked(f, path, directory=False)
            chunks = []
            left = limit
            while left > 0:
                chunk = os.read(f, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(f)


def private_names(directory: Path, suffix: str = ".json", *, depth: int = 3) -> list[str]:
    """The names of the regular files ending in `suffix` in `directory` (none when it is missing)."""
    with private_dir_fd(directory, depth=depth, create=False) as fd:
        if fd is None:
            return []
        out = []
        for name in os.listdir(fd):
            if not name.endswith(suffix) or name.startswith("."):
                continue
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                    out.append(name)
        return sorted(out)


def prune_oldest(directory: Path, keep: int, suffix: str = ".json", *, depth: int = 3) -> None:
    """The oldest files of `directory` (ending in `suffix`) beyond the newest `keep` removed."""
    with private_dir_fd(directory, depth=depth, create=False) as fd:
        if fd is None:
            return
        files = []
        for name in os.listdir(fd):
            if not name.endswith(suffix) or name.startswith("."):
                continue
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    files.append((st.st_mtime, name))
        files.sort()
        for _, name in files[: max(0, len(files) - keep)]:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)


def read_regular(path: Path, *, limit: int = 1 << 20) -> bytes:
    """The bytes of a file the user named or keeps (a configuration file, a theme): only a regular
    file (a FIFO or a device would block or never end: OSError saying what it is), at most `limit`
    bytes (more: OSError). Links are followed: the user's own dotfiles may be links."""
    f = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(f)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                    else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise OSError(errno.EINVAL, f"is {kind}, not a regular file")
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"is {st.st_size:,} bytes (at most {limit:,} are read)")
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(f, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise OSError(errno.EFBIG, f"is more than {limit:,} bytes")
        return data
    finally:
        os.close(f)
