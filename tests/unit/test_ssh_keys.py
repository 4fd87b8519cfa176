"""Which identity each key acts as (`sessions.ssh.keys`) and `[HOST:]PORT` (`sessions.ssh.server`)."""

from __future__ import annotations

from pathlib import Path

import asyncssh
import pytest

from sessions.errors import SessionError
from sessions.ssh.config import parse_listen
from sessions.ssh.keys import Identity, load_keyring


def pub(key: asyncssh.SSHKey) -> str:
    return key.export_public_key().decode()


@pytest.fixture
def keys() -> dict[str, asyncssh.SSHKey]:
    return {n: asyncssh.generate_private_key("ssh-ed25519") for n in ("alice", "bob", "ops", "stranger")}


def test_a_directory_names_each_user_by_file_and_the_map_overrides(tmp_path: Path, keys) -> None:
    d = tmp_path / "keys"
    d.mkdir()
    (d / "alice").write_text("# alice's laptop\n" + pub(keys["alice"]) + "\n")
    (d / "bob").write_text(pub(keys["bob"]))
    (d / ".hidden").write_text(pub(keys["stranger"]))
    (d / "bad name!").write_text(pub(keys["stranger"]))
    (d / "ops").write_text('from="10.0.0.0/8" ' + pub(keys["ops"]))  # honoured: only from 10/8
    users = tmp_path / "users.yaml"
    users.write_text(f"{keys['bob'].get_fingerprint('sha256')}: {{user: robert, groups: [ml], namespace: runai-ml}}\n")
    ring = load_keyring(str(d), str(users), default_user="ignored")
    assert ring.lookup(keys["alice"]).identity == Identity("alice")
    assert ring.lookup(keys["bob"]).identity == Identity("robert", ("ml",), "runai-ml")
    assert ring.lookup(keys["ops"], "127.0.0.1", "127.0.0.1") is None
    assert ring.lookup(keys["ops"], "10.1.2.3", "10.1.2.3").identity == Identity("ops")
    assert ring.lookup(keys["stranger"]) is None
    assert any("not a user name" in w for w in ring.warnings)


def test_key_options_are_honoured_or_the_line_is_skipped(tmp_path: Path, keys) -> None:
    f = tmp_path / "authorized_keys"
    f.write_text("\n".join([
        'restrict,command="list -A -o json" ' + pub(keys["alice"]),
        'no-pty,no-port-forwarding,from="192.168.0.0/16,127.0.0.1" ' + pub(keys["bob"]),
        'restrict,pty,expiry-time="20000101" ' + pub(keys["ops"]),
        'cert-authority ' + pub(keys["stranger"]),
        'environment="A=b" ' + pub(keys["stranger"]),
        'command="unbalanced ' + pub(keys["stranger"]),
    ]))
    ring = load_keyring(str(f), default_user="oncall")
    alice = ring.lookup(keys["alice"], "10.0.0.1", "10.0.0.1")
    assert alice.command == "list -A -o json" and not alice.pty  # restrict: no dashboard
    bob = ring.lookup(keys["bob"], "127.0.0.1", "127.0.0.1")
    assert bob.command is None and not bob.pty and ring.lookup(keys["bob"], "10.0.0.1", "10.0.0.1") is None
    assert ring.lookup(keys["ops"]) is None  # expired in 2000
    assert ring.lookup(keys["stranger"]) is None
    said = "\n".join(ring.warnings)
    assert "option cert-authority is not supported" in said and "option environment is not supported" in said
    assert "unbalanced quote" in said


def test_a_single_file_acts_as_the_given_user_or_the_server(tmp_path: Path, keys) -> None:
    f = tmp_path / "authorized_keys"
    f.write_text(pub(keys["alice"]) + "\n" + pub(keys["bob"]) + "\nnot a key at all\n")
    assert load_keyring(str(f), default_user="oncall").lookup(keys["bob"]).identity == Identity("oncall")
    ring = load_keyring(str(f))
    alice = ring.lookup(keys["alice"]).identity
    assert alice == Identity(None) and alice.name == "(server)" and ring.lookup(keys["alice"]).pty
    assert ring.lookup(keys["stranger"]) is None


@pytest.mark.parametrize(("text", "said"), [
    ("[1, 2]", "must map key fingerprints"),
    ("MD5:aa: {user: alice}", "is not a SHA256: key fingerprint"),
    ("SHA256:x: {groups: [a]}", "needs a user name"),
    ("SHA256:x: {user: alice, groups: a}", "groups must be a list"),
    ("SHA256:x: {user: [", "is not YAML"),
])
def test_a_malformed_user_map_is_one_line(tmp_path: Path, keys, text: str, said: str) -> None:
    f = tmp_path / "authorized_keys"
    f.write_text(pub(keys["alice"]))
    users = tmp_path / "users.yaml"
    users.write_text(text)
    with pytest.raises(SessionError, match=said) as info:
        load_keyring(str(f), str(users))
    assert info.value.code == 2 and "\n" not in info.value.message


def test_missing_authorized_keys_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="does not exist"):
        load_keyring(str(tmp_path / "nope"))


def test_listen_addresses() -> None:
    assert parse_listen("2222") == ("0.0.0.0", 2222)
    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("[::1]:22") == ("::1", 22)
    for bad in ("", "host:", "host:99999", "a:b"):
        with pytest.raises(ValueError, match="is not"):
            parse_listen(bad)


def test_the_audit_file_is_private_and_one_line_per_event(tmp_path: Path) -> None:
    from sessions.ssh.audit import Audit

    path = tmp_path / "audit.log"
    audit = Audit(str(path))
    audit.log("login", user="alice", peer="127.0.0.1:5")
    audit.log("refused", user="alice", peer="127.0.0.1:5", what="exec rm -rf /\nfake: line\x1b[2J")
    audit.close()
    assert path.stat().st_mode & 0o777 == 0o600
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and lines[0].endswith("login user=alice from=127.0.0.1:5")
    assert "\x1b" not in lines[1] and "fake: line" in lines[1]


def test_a_key_listed_for_two_users_is_refused_with_a_warning(tmp_path: Path, keys) -> None:
    d = tmp_path / "keys"
    d.mkdir()
    (d / "alice").write_text(pub(keys["alice"]) + "\n" + pub(keys["ops"]) + "\n")
    (d / "bob").write_text(pub(keys["bob"]) + "\n" + 'from="10.0.0.0/8" ' + pub(keys["alice"]) + "\n")
    (d / "carol").write_text(pub(keys["ops"]))  # (the same key twice for one user is no conflict: below)
    (d / "ops").write_text(pub(keys["stranger"]) + "\n" + 'restrict ' + pub(keys["stranger"]) + "\n")
    ring = load_keyring(str(d))
    assert ring.lookup(keys["alice"]) is None and ring.lookup(keys["alice"], "10.1.2.3", "10.1.2.3") is None
    assert ring.lookup(keys["ops"]) is None
    assert ring.lookup(keys["bob"]).identity == Identity("bob")
    assert ring.lookup(keys["stranger"]).identity == Identity("ops")
    fp = keys["alice"].get_fingerprint("sha256")
    assert f"the key {fp} is listed for alice and bob; refused for all of them until it is listed for one user " \
           "only" in ring.warnings, ring.warnings
    assert sum("is listed for" in w for w in ring.warnings) == 2, ring.warnings
    # the user map names the key's one identity: no conflict, whichever files list it
    users = tmp_path / "users.yaml"
    users.write_text(f"{fp}: {{user: alice}}\n")
    assert load_keyring(str(d), str(users)).lookup(keys["alice"]).identity == Identity("alice")
