"""Each SSH user's own files on the server (`sessions.ssh.user_files`, issue #25 item 1): names
ranks gives, 0700/0600, no link followed, nothing outside the user's directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessions.errors import SessionError
from sessions.ssh import user_files


def test_the_pattern_is_absolute_with_the_user_in_its_last_component(tmp_path: Path) -> None:
    assert user_files.parse_pattern("/srv/files") == "/srv/files/%u"
    assert user_files.parse_pattern("/srv/files/%u/") == "/srv/files/%u"
    assert user_files.parse_pattern("/srv/files/ranks-%u") == "/srv/files/ranks-%u"
    for bad in ("files/%u", "", "/home/%u/ranks"):
        with pytest.raises(SessionError) as info:
            user_files.parse_pattern(bad)
        assert info.value.code == 2 and "--user-files" in info.value.message
    base = tmp_path / "files"
    with pytest.raises(SessionError):  # (missing)
        user_files.check_base(f"{base}/%u")
    base.mkdir(mode=0o755)
    user_files.check_base(f"{base}/%u")
    base.chmod(0o777)
    with pytest.raises(SessionError) as info:
        user_files.check_base(f"{base}/%u")
    assert "not writable by group or others" in info.value.message


def test_a_user_s_directory_is_made_0700_and_a_link_or_a_bad_name_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "files"
    base.mkdir(mode=0o700)
    pattern = f"{base}/%u"
    alice = user_files.user_dir(pattern, "alice")
    assert alice == base / "alice" and oct(alice.stat().st_mode & 0o777) == oct(0o700)
    for name in (None, "..", ".", "a/b", "-x"):
        with pytest.raises(SessionError):
            user_files.user_dir(pattern, name)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (base / "mallory").symlink_to(elsewhere)
    with pytest.raises(SessionError):
        user_files.user_dir(pattern, "mallory")
    (base / "bob").mkdir(mode=0o755)
    with pytest.raises(SessionError) as info:
        user_files.user_dir(pattern, "bob")
    assert "0700" in info.value.message


def test_files_are_new_0600_listed_and_read_back_by_name_only(tmp_path: Path) -> None:
    base = tmp_path / "files"
    base.mkdir(mode=0o700)
    alice = user_files.user_dir(f"{base}/%u", "alice")
    fd, name = user_files.create(alice, "team-a_job", ".log")
    os.write(fd, b"one\n")
    os.close(fd)
    fd2, name2 = user_files.create(alice, "team-a_job", ".log")
    os.close(fd2)
    assert (name, name2) == ("team-a_job.log", "team-a_job-2.log")
    assert oct((alice / name).stat().st_mode & 0o777) == oct(0o600)
    (alice / "link.log").symlink_to(tmp_path / "secret")
    (tmp_path / "secret").write_text("the server's")
    assert sorted(n for n, _, _ in user_files.listing(alice)) == sorted([name, name2])  # (no link)
    fd = user_files.open_file(alice, name)
    assert os.read(fd, 100) == b"one\n"
    os.close(fd)
    for bad, code in (("../secret", 2), ("/etc/passwd", 2), (".hidden", 2), ("link.log", 8), ("nope.log", 8)):
        with pytest.raises(SessionError) as info:
            user_files.open_file(alice, bad)
        assert info.value.code == code, (bad, info.value)
