"""Which identity each client key acts as.

- `--authorized-keys DIR`: each regular file of DIR is named after a user and holds that user's keys
  (`DIR/alice`);
- `--authorized-keys FILE`: every key in it acts as `default_user` (`--as USER`), or as the server's
  own identity when that is None;
- `--users FILE` (YAML): `SHA256:fingerprint: {user: alice, groups: [ml], namespace: runai-team-a}`;
  it decides the identity of the keys it names (the keys must still be in the authorized keys).
  `namespace` is what the user's own kubeconfig context would say: a user who may not list
  namespaces sees that one (and the Run:ai ones they can read).

Lines with options (`from=...`, `command=...`) are skipped with a warning: they are not honoured,
so they must not grant more than they say. The login name a client sends is never used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from sessions.errors import SessionError

_USER = re.compile(r"[A-Za-z0-9._@-][A-Za-z0-9._@:-]{0,252}")
_KEY_TYPES = ("ssh-", "ecdsa-", "sk-")


@dataclass(frozen=True)
class Identity:
    """Who a key acts as: `user` None means the server's own identity."""

    user: str | None
    groups: tuple[str, ...] = ()
    namespace: str | None = None  # the user's own project (their kubeconfig context's namespace)

    @property
    def name(self) -> str:
        return self.user or "(server)"


@dataclass
class KeyRing:
    identities: dict[str, Identity] = field(default_factory=dict)  # fingerprint -> identity
    warnings: list[str] = field(default_factory=list)

    def lookup(self, key: asyncssh.SSHKey) -> Identity | None:
        return self.identities.get(key.get_fingerprint("sha256"))


def _keys_of(path: Path, warnings: list[str]) -> list[asyncssh.SSHKey]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SessionError(f"cannot read authorized keys {path}: {exc.strerror or exc}", 2) from None
    keys = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not line.startswith(_KEY_TYPES):
            warnings.append(f"{path}:{n}: key options are not supported; line skipped")
            continue
        try:
            keys.append(asyncssh.import_public_key(" ".join(line.split()[:2])))
        except (asyncssh.KeyImportError, ValueError):
            warnings.append(f"{path}:{n}: not a public key; line skipped")
    return keys


def _user_map(path: Path) -> dict[str, Identity]:
    import yaml

    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SessionError(f"cannot read the user map {path}: {exc.strerror or exc}", 2) from None
    except yaml.YAMLError as exc:
        raise SessionError(f"the user map {path} is not YAML: {str(exc).splitlines()[0]}", 2) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SessionError(f"the user map {path} must map key fingerprints to {{user, groups}}", 2)
    out: dict[str, Identity] = {}
    for fp, entry in data.items():
        if not isinstance(fp, str) or not fp.startswith("SHA256:"):
            raise SessionError(f"the user map {path}: {fp!r} is not a SHA256: key fingerprint", 2)
        if isinstance(entry, str):
            entry = {"user": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("user"), str) or not _USER.fullmatch(entry["user"]):
            raise SessionError(f"the user map {path}: {fp} needs a user name (user: NAME)", 2)
        groups = entry.get("groups") or []
        if not isinstance(groups, list) or not all(isinstance(g, str) and _USER.fullmatch(g) for g in groups):
            raise SessionError(f"the user map {path}: {fp}: groups must be a list of names", 2)
        ns = entry.get("namespace")
        if ns is not None and not (isinstance(ns, str) and _USER.fullmatch(ns)):
            raise SessionError(f"the user map {path}: {fp}: namespace must be a name", 2)
        out[fp] = Identity(entry["user"], tuple(groups), ns)
    return out


def signature(authorized: str, users: str | None) -> tuple[object, ...]:
    """What changes when the authorized keys or the user map change (names, sizes, mtimes); a
    blocking stat: run it off the event loop."""
    out: list[object] = []
    paths = [Path(authorized)] + ([Path(users)] if users else [])
    if paths[0].is_dir():
        try:
            paths += sorted(paths[0].iterdir())
        except OSError:
            pass
    for p in paths:
        try:
            st = p.stat()
            out.append((str(p), st.st_size, st.st_mtime_ns, st.st_ino))
        except OSError:
            out.append((str(p), None))
    return tuple(out)


def load_keyring(authorized: str, users: str | None = None, default_user: str | None = None) -> KeyRing:
    """The key ring of `--authorized-keys`, `--users` and `--as`; SessionError (code 2) when a file
    cannot be read or is malformed."""
    ring = KeyRing()
    path = Path(authorized)
    mapped = _user_map(Path(users)) if users else {}
    if path.is_dir():
        try:
            entries = sorted(path.iterdir())
        except OSError as exc:
            raise SessionError(f"cannot read authorized keys {path}: {exc.strerror or exc}", 2) from None
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_file():
                continue
            if not _USER.fullmatch(entry.name):
                ring.warnings.append(f"{entry}: not a user name; file skipped")
                continue
            for key in _keys_of(entry, ring.warnings):
                fp = key.get_fingerprint("sha256")
                ring.identities[fp] = mapped.get(fp, Identity(entry.name))
    elif path.is_file():
        for key in _keys_of(path, ring.warnings):
            fp = key.get_fingerprint("sha256")
            ring.identities[fp] = mapped.get(fp, Identity(default_user))
    else:
        raise SessionError(f"authorized keys {path} does not exist", 2)
    return ring
