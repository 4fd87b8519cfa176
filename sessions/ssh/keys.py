"""Which identity each client key acts as.

- `--authorized-keys DIR`: each regular file of DIR is named after a user and holds that user's keys
  (`DIR/alice`);
- `--authorized-keys FILE`: every key in it acts as `default_user` (`--as USER`), or as the server's
  own identity when that is None;
- `--users FILE` (YAML): `SHA256:fingerprint: {user: alice, groups: [ml], namespace: runai-team-a}`;
  it decides the identity of the keys it names (the keys must still be in the authorized keys).
  `namespace` is what the user's own kubeconfig context would say: a user who may not list
  namespaces sees that one (and the Run:ai ones they can read).

OpenSSH key options are honoured: `from=` (the client's address must match), `expiry-time=`,
`command=` (that read-only command runs whatever the client asks), `no-pty` and `restrict` (no
dashboard; `pty` gives it back), `no-port-forwarding` (and `restrict` without `port-forwarding`: no
`ssh -L` to a session's port); the other forwarding ones restrict what is refused anyway. A line with
an option that would mean more than ranks does (`cert-authority`, `principals`, `permitopen`,
`environment`, `tunnel`) is skipped with a warning. A key listed for two users (two files, or a
`--users` entry) is refused, with a warning, rather than act as either. The login name a client
sends is never used.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from monitors.sanitize import shown
from monitors.state_dir import read_regular
from sessions.errors import SessionError

_USER = re.compile(r"[A-Za-z0-9._@-][A-Za-z0-9._@:-]{0,252}")
_KEY_TYPES = ("ssh-", "ecdsa-", "sk-")
# options that only take away what the server refuses anyway, or that `Grant` honours
_HARMLESS = {"no-port-forwarding", "no-agent-forwarding", "no-X11-forwarding", "no-user-rc",
             "port-forwarding", "agent-forwarding", "X11-forwarding", "user-rc", "touch-required",
             "no-touch-required", "verify-required"}
_HONOURED = {"from", "command", "no-pty", "pty", "restrict", "expiry-time"}
_READ_LIMIT = 4 << 20  # bytes of an authorized-keys file or the user map (OpenSSH's are far smaller)


def _read(path: Path, what: str) -> bytes:
    """The bytes of `path`, only if it is a regular file (a FIFO would block the server's start,
    and its reload for ever); SessionError (code 2) saying why not."""
    try:
        return read_regular(path, limit=_READ_LIMIT)
    except OSError as exc:
        raise SessionError(f"cannot read {what} {path}: {exc.strerror or exc}", 2) from None


@dataclass(frozen=True)
class Identity:
    """Who a key acts as: `user` None means the server's own identity."""

    user: str | None
    groups: tuple[str, ...] = ()
    namespace: str | None = None  # the user's own project (their kubeconfig context's namespace)

    @property
    def name(self) -> str:
        return self.user or "(server)"


@dataclass(frozen=True)
class Grant:
    """What one authorized-keys line lets its key do: the identity, and the line's options."""

    identity: Identity
    entry: asyncssh.SSHAuthorizedKeys | None = None  # the line itself, when it has options (`from=`)
    command: str | None = None  # command="...": the only thing this key runs
    pty: bool = True  # False: no-pty, or restrict without pty
    expires: float | None = None  # expiry-time, epoch seconds
    forwarding: bool = True  # False: no-port-forwarding, or restrict without port-forwarding

    def admits(self, key: asyncssh.SSHKey, host: str, addr: str) -> bool:
        if self.expires is not None and time.time() >= self.expires:
            return False
        if self.entry is not None:
            try:
                return self.entry.validate(key.convert_to_public(), host, addr) is not None
            except ValueError:  # (an address asyncssh cannot parse)
                return False
        return True


@dataclass
class KeyRing:
    grants: dict[str, list[Grant]] = field(default_factory=dict)  # fingerprint -> its lines
    warnings: list[str] = field(default_factory=list)

    @property
    def identities(self) -> dict[str, Identity]:
        return {fp: g[0].identity for fp, g in self.grants.items()}

    def lookup(self, key: asyncssh.SSHKey, host: str = "", addr: str = "") -> Grant | None:
        """The first line of this key that admits a client at `addr` (`from=`), else None."""
        for grant in self.grants.get(key.get_fingerprint("sha256"), ()):
            if grant.admits(key, host, addr):
                return grant
        return None


def _expiry(value: str) -> float:
    """OpenSSH's expiry-time: YYYYMMDD[HHMM[SS]] local time, or with a Z suffix UTC."""
    utc = value.endswith(("Z", "z"))
    digits = value.rstrip("Zz")
    fmt = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}.get(len(digits))
    if fmt is None or not digits.isdigit():
        raise ValueError(f"expiry-time {value!r} is not YYYYMMDD[HHMM[SS]][Z]")
    t = time.strptime(digits, fmt)
    return float(calendar.timegm(t)) if utc else time.mktime(t)


def _grant_of(line: str, identity: Identity) -> tuple[asyncssh.SSHKey, Grant]:
    """One authorized-keys line -> (its key, its grant); ValueError says why it cannot be used."""
    if line.startswith(_KEY_TYPES):
        try:
            return asyncssh.import_public_key(" ".join(line.split()[:2])), Grant(identity)
        except (asyncssh.KeyImportError, ValueError):
            raise ValueError("not a public key") from None
    opts, rest = _options(line)
    try:
        key = asyncssh.import_public_key(" ".join(rest.split()[:2]))
        entry = asyncssh.import_authorized_keys(line)  # (it checks `from=` at login)
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise ValueError(f"not an authorized-keys line ({exc})") from None
    unknown = sorted(set(opts) - _HONOURED - _HARMLESS)
    if unknown:
        raise ValueError(f"the option {unknown[0]} is not supported")
    expiry = opts.get("expiry-time")
    return key, Grant(identity, entry if "from" in opts else None, command=opts.get("command"),
                      pty="no-pty" not in opts and ("restrict" not in opts or "pty" in opts),
                      expires=_expiry(expiry) if expiry else None,
                      forwarding="no-port-forwarding" not in opts and ("restrict" not in opts or "port-forwarding" in opts))


def _options(line: str) -> tuple[dict[str, str], str]:
    """The options before the key of an authorized-keys line (`a,b="x, y",c`) and the rest."""
    opts: dict[str, str] = {}
    word, quoted, escaped, end = "", False, False, len(line)
    for at, ch in enumerate(line):
        if escaped:
            word, escaped = word + ch, False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif not quoted and ch in " \t,":
            name, _, value = word.partition("=")
            opts[name] = value
            word = ""
            if ch != ",":
                end = at
                break
        else:
            word += ch
    if quoted:
        raise ValueError("unbalanced quote in the options")
    return opts, line[end:]


def _grants_of(path: Path, identity_of: Any, warnings: list[str]) -> list[tuple[str, Grant]]:
    """(fingerprint, grant) of each usable line of `path`; `identity_of(fp)` decides who it is."""
    text = _read(path, "authorized keys").decode("utf-8", errors="replace")
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            key, grant = _grant_of(line, Identity(None))
        except ValueError as exc:
            warnings.append(f"{path}:{n}: {exc}; line skipped")
            continue
        fp = key.get_fingerprint("sha256")
        out.append((fp, Grant(identity_of(fp), grant.entry, grant.command, grant.pty, grant.expires)))
    return out


def _user_map(path: Path) -> dict[str, Identity]:
    import yaml

    raw = _read(path, "the user map")
    try:
        data: Any = yaml.safe_load(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SessionError(f"the user map {path} is not UTF-8 (a byte 0x{raw[exc.start]:02x} at {exc.start})",
                           2) from None
    except yaml.YAMLError as exc:
        raise SessionError(f"the user map {path} is not YAML: {str(exc).splitlines()[0]}", 2) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SessionError(f"the user map {path} must map key fingerprints to {{user, groups}}", 2)
    out: dict[str, Identity] = {}
    for fp, entry in data.items():
        if not isinstance(fp, str) or not fp.startswith("SHA256:"):
            raise SessionError(f"the user map {path}: {shown(fp)} is not a SHA256: key fingerprint", 2)
        if isinstance(entry, str):
            entry = {"user": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("user"), str) or not _USER.fullmatch(entry["user"]):
            raise SessionError(f"the user map {path}: {shown(fp)} needs a user name (user: NAME)", 2)
        groups = entry.get("groups") or []
        if not isinstance(groups, list) or not all(isinstance(g, str) and _USER.fullmatch(g) for g in groups):
            raise SessionError(f"the user map {path}: {shown(fp)}: groups must be a list of names", 2)
        ns = entry.get("namespace")
        if ns is not None and not (isinstance(ns, str) and _USER.fullmatch(ns)):
            raise SessionError(f"the user map {path}: {shown(fp)}: namespace must be a name", 2)
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
        found: list[tuple[str, Grant]] = []
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_file():
                continue
            if not _USER.fullmatch(entry.name):
                ring.warnings.append(f"{path}/{shown(entry.name)}: not a user name; file skipped")
                continue
            found += _grants_of(entry, lambda fp, u=entry.name: mapped.get(fp, Identity(u)), ring.warnings)
    elif path.exists():  # (a FIFO or a device: refused by `_read`, never read)
        found = _grants_of(path, lambda fp: mapped.get(fp, Identity(default_user)), ring.warnings)
    else:
        raise SessionError(f"authorized keys {path} does not exist", 2)
    for fp, grant in found:
        ring.grants.setdefault(fp, []).append(grant)
    for fp, grants in list(ring.grants.items()):  # one key, two users: neither (it would act as the first)
        names = sorted({g.identity.name for g in grants})
        if len(names) > 1:
            del ring.grants[fp]
            ring.warnings.append(f"the key {fp} is listed for {' and '.join(names)}; refused for all of them "
                                 "until it is listed for one user only")
    return ring
