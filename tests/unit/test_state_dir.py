"""ranks' own directories and files (issue #25, item 8): the flight recorder's and the session
histories' directories under $XDG_STATE_HOME/ranks, and the log view's save directory, are created
and opened without following links; one that is a link, a file, someone else's or open to others is
refused in one line and nothing is written there (the link's target untouched, its mode unchanged).
Files are read only when regular and the user's (a FIFO would block the reader); the configuration
file and themes are read only when regular."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from monitors.flight_recorder import FlightStore, RecordedFailure
from monitors.state_dir import (
    PrivateDirError,
    private_dir,
    private_names,
    prune_oldest,
    read_private,
    read_regular,
    write_private,
)
from sessions.history_store import HistoryStore


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def mkdirs(path: Path) -> None:
    """`path` and its missing parents, each 0700 (as ranks makes them)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for d in reversed(missing):
        d.mkdir(mode=0o700)


def failure(pod: str = "job-worker-0") -> RecordedFailure:
    return RecordedFailure("worker-0", "worker", 1, pod, "node-1", "pytorch", 3, "Error", 1_800_000_000.0,
                           lines=("boom",), recorded_at=1_800_000_001.0, source="log")


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "state"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    return home


def test_created_0700_and_files_0600(state: Path) -> None:
    store = FlightStore("ctx", "https://k")
    store.add("ns", "PyTorchJob", "job", "u1", failure())
    for d in (state / "ranks", state / "ranks" / "flight", store.dir):
        assert mode(d) == 0o700, d
    (f,) = store.dir.iterdir()
    assert mode(f) == 0o600 and f.name.endswith(".json")
    rec = store.load("ns", "PyTorchJob", "job", "u1")
    assert rec is not None and rec.first() == failure()


@pytest.mark.parametrize("where", ["ranks", "flight", "context"])
def test_a_planted_link_is_refused_and_its_target_untouched(state: Path, tmp_path: Path, where: str) -> None:
    """The issue's case: a link in the state directory to a world-writable directory elsewhere. The
    recorder refuses it in one line, writes nothing there and leaves its mode as it was (no chmod
    through the link)."""
    store = FlightStore("ctx", "https://k")
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.chmod(target, 0o777)
    link = {"ranks": state / "ranks", "flight": state / "ranks" / "flight", "context": store.dir}[where]
    mkdirs(link.parent)
    link.symlink_to(target, target_is_directory=True)
    with pytest.raises(PrivateDirError) as err:
        store.add("ns", "PyTorchJob", "job", "u1", failure())
    assert "is a symbolic link: refused" in str(err.value) and str(link) in str(err.value)
    assert "\n" not in str(err.value)
    assert list(target.iterdir()) == [] and mode(target) == 0o777
    with pytest.raises(PrivateDirError):
        store.load("ns", "PyTorchJob", "job", "u1")


def test_the_history_store_refuses_a_link_too(state: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (state / "ranks").mkdir(mode=0o700)
    (state / "ranks" / "sessions").symlink_to(target, target_is_directory=True)
    store = HistoryStore("ctx", "https://k")
    with pytest.raises(PrivateDirError):
        store.save_job("ns", "PyTorchJob", "job", "u1", {"kind": "PyTorchJob"})
    with pytest.raises(PrivateDirError):
        store.load("ns", "PyTorchJob", "job")
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("perm", [0o755, 0o770, 0o707, 0o701])
def test_a_directory_open_to_others_is_refused_not_repaired(state: Path, perm: int) -> None:
    store = FlightStore("ctx", "https://k")
    mkdirs(store.dir)
    os.chmod(store.dir, perm)
    with pytest.raises(PrivateDirError) as err:
        store.add("ns", "PyTorchJob", "job", "u1", failure())
    assert f"is open to others (mode {perm:04o}" in str(err.value) and "chmod 700" in str(err.value)
    assert mode(store.dir) == perm and list(store.dir.iterdir()) == []


def test_a_file_in_place_of_a_directory_and_a_planted_file_link_are_refused(state: Path, tmp_path: Path) -> None:
    store = FlightStore("ctx", "https://k")
    mkdirs(store.dir.parent)
    store.dir.write_text("not a directory")
    with pytest.raises(PrivateDirError, match="is not a directory"):
        store.add("ns", "PyTorchJob", "job", "u1", failure())
    store.dir.unlink()
    store.add("ns", "PyTorchJob", "job", "u1", failure())
    (f,) = store.dir.iterdir()
    secret = tmp_path / "secret"
    secret.write_text('{"namespace": "ns", "kind": "PyTorchJob", "name": "job"}')
    f.unlink()
    f.symlink_to(secret)  # a recording replaced by a link to another file: not read through it
    with pytest.raises(PrivateDirError, match="is a symbolic link"):
        store.load("ns", "PyTorchJob", "job", "u1")
    with pytest.raises(PrivateDirError, match="is a symbolic link"):  # (nor written through it)
        store.add("ns", "PyTorchJob", "job", "u1", failure())
    assert f.is_symlink() and secret.read_text().startswith('{"namespace"')
    # a write replaces the file by a rename in place: a link planted since is replaced, not followed
    write_private(f, b"{}")
    assert not f.is_symlink() and secret.read_text().startswith('{"namespace"') and mode(f) == 0o600


def test_a_fifo_as_a_state_file_is_refused_without_blocking(state: Path) -> None:
    store = FlightStore("ctx", "https://k")
    store.add("ns", "PyTorchJob", "other", "u1", failure())
    fifo = store.dir / "ns__pytorchjob__job.json"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(PrivateDirError, match="is not a regular file"):
        store.load("ns", "PyTorchJob", "job", "u1")
    assert private_names(store.dir) == ["ns__pytorchjob__other.json"]


def test_helpers_keep_to_their_directory(tmp_path: Path) -> None:
    base = tmp_path / "base"
    d = base / "ranks" / "room" / "ctx"
    write_private(d / "a.json", b"1")
    write_private(d / "b.json", b"2")
    (d / "c.txt").write_text("x")
    os.utime(d / "a.json", (1, 1))
    assert private_names(d) == ["a.json", "b.json"]
    assert read_private(d / "b.json") == b"2" and read_private(d / "missing.json") is None
    assert read_private(base / "ranks" / "nothing" / "here" / "x.json") is None  # (nothing created)
    assert not (base / "ranks" / "nothing").exists()
    prune_oldest(d, 1)
    assert private_names(d) == ["b.json"] and (d / "c.txt").exists()
    private_dir(d)  # (again: fine)
    assert not [p for p in d.iterdir() if p.name.endswith(".tmp")]


def test_another_users_directory_is_refused(tmp_path: Path) -> None:
    """(as root: a directory given to another uid; skipped where the test cannot chown)"""
    if os.geteuid() != 0:
        pytest.skip("needs root to give a directory to another user")
    d = tmp_path / "base" / "ranks" / "room" / "ctx"
    mkdirs(d)
    os.chown(d.parent, 4242, 4242)
    with pytest.raises(PrivateDirError, match="belongs to uid 4242, not to you"):
        write_private(d / "a.json", b"1")


def test_the_log_save_directory_refuses_a_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tui.log_files import write_log_file

    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    monkeypatch.delenv("RANKS_SSH_SESSION", raising=False)
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.chmod(target, 0o777)
    (data / "ranks").mkdir(mode=0o700)
    (data / "ranks" / "logs").symlink_to(target, target_is_directory=True)
    with pytest.raises(PrivateDirError, match="is a symbolic link"):
        write_log_file("ns", "job", ["a line"])
    assert list(target.iterdir()) == [] and mode(target) == 0o777
    (data / "ranks" / "logs").unlink()
    path = write_log_file("ns", "job", ["a line"])
    assert path.read_text() == "a line\n" and mode(path) == 0o600 and mode(path.parent) == 0o700


def test_read_regular_refuses_what_would_block(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="is a FIFO, not a regular file"):
        read_regular(fifo)
    with pytest.raises(OSError, match="is a directory"):
        read_regular(tmp_path)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2000)
    with pytest.raises(OSError, match="at most 1,000 are read"):
        read_regular(big, limit=1000)
    (tmp_path / "ok").write_text("theme = 'dark'\n")
    (tmp_path / "link").symlink_to(tmp_path / "ok")  # (the user's dotfiles may be links)
    assert read_regular(tmp_path / "link") == b"theme = 'dark'\n"


def test_the_pods_history_reader_skips_a_fifo(tmp_path: Path) -> None:
    """`history_command` runs in the pod: a FIFO at ~/.ranks_history (passes -r and -O) made `tail`
    wait for ever; it is now not a history file at all."""
    from sessions.session_history import history_command

    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / ".ranks_history")
    argv = history_command()
    r = subprocess.run(argv, env={"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                       capture_output=True, timeout=20)
    assert r.returncode == 0 and r.stdout == b"", r
    (home / ".ranks_history").unlink()
    (home / ".ranks_history").write_text("#1 0 echo hi\n")
    r = subprocess.run(argv, env={"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                       capture_output=True, timeout=20)
    assert r.stdout == b"#1 0 echo hi\n", r
