"""No internal error from the SSH door's own files (issue #25, items 6 and 9): `ranks serve`'s
user map (`--users`, YAML) and authorized keys (`--authorized-keys`, OpenSSH lines), fuzzed with
hypothesis as `test_fuzz_outside_input.py` does for the other files: wrong types, bytes that are
no UTF-8, control characters, truncated lines. Each is read into a `KeyRing` or refused with a
`SessionError` of exit 2 (one line, no terminal escape: `ranks serve` prints it); a FIFO or a
device in their place is refused at once, never read (it would block the server's start, and its
reload for ever, which kept SIGTERM from ending it). Derandomised."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import asyncssh
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions.errors import SessionError
from sessions.ssh.keys import KeyRing, load_keyring

FUZZ = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

KEY = asyncssh.generate_private_key("ssh-ed25519")
PUB = KEY.export_public_key().decode().strip()
FP = KEY.get_fingerprint("sha256")

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
                    st.sampled_from(["\x1b]0;t\x07", "a\r\nb", "\u202e", "\x00", FP, "alice", "9" * 3000]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.one_of(st.text(max_size=10), st.sampled_from([FP, "user", "groups",
                                                                                           "namespace"])),
                                        inner, max_size=3), max_leaves=8)
entries = st.one_of(values, st.fixed_dictionaries({}, optional={"user": values, "groups": values,
                                                                 "namespace": values}))
user_maps = st.one_of(values, st.dictionaries(st.one_of(st.sampled_from([FP, "SHA256:", "SHA256:\x1b[2J"]),
                                                        st.text(max_size=12)), entries, max_size=3))


def one_line(exc: SessionError) -> None:
    assert exc.code == 2 and "\n" not in exc.message and "\r" not in exc.message, exc.message
    assert not any(c in exc.message for c in "\x1b\x07\x00\u202e"), exc.message


def ring_or_refusal(keys: Path, users: Path | None) -> KeyRing | None:
    try:
        ring = load_keyring(str(keys), str(users) if users else None)
    except SessionError as exc:
        one_line(exc)
        return None
    for w in ring.warnings:
        assert "\n" not in w and "\x1b" not in w, w
    return ring


@FUZZ
@given(doc=user_maps)
def test_a_user_map_of_any_shape_is_read_or_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                                 doc: Any) -> None:
    d = tmp_path_factory.mktemp("door")
    (d / "keys").write_text(PUB + "\n")
    (d / "users.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True))
    ring_or_refusal(d / "keys", d / "users.yaml")


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), st.sampled_from([
    b"\xff\xfe: x\n", f"{FP}: {{user: al\xe9}}\n".encode("latin-1"), b"\x00\x00", b"a: &x [*x]", b"{" * 200,
    f"{FP}: [".encode(), f"{FP}:\n  user: alice\n  groups: [ml\n".encode()])))
def test_user_map_bytes_of_any_kind_are_read_or_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                                    raw: bytes) -> None:
    d = tmp_path_factory.mktemp("door")
    (d / "keys").write_text(PUB + "\n")
    (d / "users.yaml").write_bytes(raw)
    ring_or_refusal(d / "keys", d / "users.yaml")


@FUZZ
@given(lines=st.lists(st.one_of(st.binary(max_size=80), st.sampled_from([
    PUB.encode(), b"restrict " + PUB.encode(), b'from="\xff" ' + PUB.encode(), b'expiry-time="99999999" ' +
    PUB.encode(), b'command="\x1b]0;x\x07" ' + PUB.encode(), b'expiry-time="\x1b[2J" ' + PUB.encode(),
    b'no-pty,"unbalanced ' + PUB.encode(), b"ssh-ed25519 \xff\xfe", PUB.encode()[:40]])), max_size=5))
def test_authorized_keys_of_any_bytes_are_read_or_refused(tmp_path_factory: pytest.TempPathFactory,
                                                         lines: list[bytes]) -> None:
    d = tmp_path_factory.mktemp("door")
    (d / "keys").write_bytes(b"\n".join(lines))
    (d / "dir").mkdir()
    (d / "dir" / "alice").write_bytes(b"\n".join(lines))
    for keys in (d / "keys", d / "dir"):
        ring_or_refusal(keys, None)


def no_block(call: Any) -> Any:
    """`call()` in a thread: what it returned or raised, or a failure if it blocks (as a read of
    a FIFO nobody writes does)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:  # (handed back to the test)
            out["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)  # (a bound on a hang, not a time measured: a read of a file takes far less)
    assert not t.is_alive(), "blocked on a FIFO"
    if "error" in out:
        raise out["error"]
    return out.get("value")


@pytest.mark.parametrize("which", ["users", "keys"])
def test_a_fifo_in_place_of_the_user_map_or_the_keys_is_refused_at_once(tmp_path: Path, which: str) -> None:
    (tmp_path / "keys").write_text(PUB + "\n")
    (tmp_path / "users.yaml").write_text(f"{FP}: alice\n")
    fifo = tmp_path / ("users.yaml" if which == "users" else "keys")
    fifo.unlink()
    os.mkfifo(fifo, 0o600)
    with pytest.raises(SessionError) as got:
        no_block(lambda: load_keyring(str(tmp_path / "keys"), str(tmp_path / "users.yaml")))
    one_line(got.value)
    assert "is a FIFO, not a regular file" in got.value.message, got.value.message
