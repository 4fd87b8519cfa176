"""Connecting like kubectl: KUBECONFIG / --kubeconfig / --context, in-cluster config, TLS, exec plugins.

Everything that can go wrong becomes a `ConnectionProblem` with a one-line message and an exit code
(see `ExitCode`); callers print it and exit, never a traceback.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import logging
import os
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubernetes.client import Configuration
    from kubernetes.config.exec_provider import ExecProvider


class ExitCode(enum.IntEnum):
    """The documented exit codes of every `ranks` command."""

    OK = 0
    ERROR = 1  # the operation failed (a rank failed, the server rejected a request, ...)
    USAGE = 2  # bad flags or arguments
    NO_CONFIG = 3  # no kubeconfig, unknown context, unreadable config (or ranks' own), failing exec plugin
    UNREACHABLE = 4  # the API server (or Prometheus when asked for) cannot be reached
    TLS = 5  # TLS verification failed
    UNAUTHORIZED = 6  # 401: credentials rejected or expired
    FORBIDDEN = 7  # 403: RBAC said no
    NOT_FOUND = 8  # the named project/workload/pod does not exist
    INTERRUPTED = 130


class ConnectionProblem(Exception):
    def __init__(self, message: str, code: ExitCode, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.timed_out = timed_out  # the server took the request and did not answer in time


DEFAULT_REQUEST_TIMEOUT = 30.0
REREAD_EVERY = 5.0  # s: after a 401, the kubeconfig is read again at most this often (unless it changed)
_HEADER_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # (what HTTP libraries refuse in a header: it ends it)


@dataclass
class ClusterConfig:
    """What requests need: the server URL, TLS settings and a way to get fresh auth headers.

    The one source of credentials of every path to the cluster (the informers, logs and exec
    through `kube.KubeClient`; GPU metrics and Prometheus discovery through `prom_discovery`'s
    sessions): each request takes them from here as it goes out, and a 401 asks here to read the
    kubeconfig again (`reread_after_401`), for every path at once, from any thread."""

    server: str
    context: str
    namespace: str
    user: str
    verify: bool = True
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    tls_server_name: str | None = None
    _auth: Callable[[], dict[str, str]] = field(default=lambda: {}, repr=False)
    impersonate_user: str | None = None
    impersonate_groups: tuple[str, ...] = ()
    # seconds one request may take (--request-timeout); None: no limit
    request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT
    # where the credentials came from: read again after a 401 (`reload_credentials`); the files
    # whose change means new credentials (the kubeconfigs, a token file)
    _reload: Callable[[], ClusterConfig] | None = field(default=None, repr=False)
    sources: tuple[str, ...] = ()
    # what the user named (--kubeconfig, --context), for hints that run ranks again the same way
    kubeconfig_arg: str | None = None
    context_arg: str | None = None
    # ranks' settings for this context, from its `ranks` extension (raw: `tui.settings` checks them)
    context_settings: dict[str, Any] = field(default_factory=dict)
    # `reread_after_401`: one reader at a time (any thread); when, and the files as they were then
    _reread_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _reread_at: float = field(default=-1e9, repr=False, compare=False)
    _reread_stamp: object = field(default=None, repr=False, compare=False)

    def headers(self) -> dict[str, str]:
        """Auth headers, refreshed through exec plugins / token files when they expire. A value
        no HTTP header can carry (a token with a line break or another control character: it
        would end the header, or the HTTP library refuses it) is a `ConnectionProblem` (exit 3),
        which never shows the value."""
        h = dict(self._auth())
        if self.impersonate_user:
            h["Impersonate-User"] = self.impersonate_user
        for key, value in h.items():
            if not isinstance(value, str) or _HEADER_UNSAFE.search(value):
                what = "credentials" if key in ("Authorization",) else key
                raise ConnectionProblem(f"the kubeconfig's {what} for user {self.user or '?'} of context "
                                        f"{self.context} hold a control character (a line break?): no request "
                                        "can carry them; write the token on one line", ExitCode.NO_CONFIG)
        return h

    def credentials_key(self) -> tuple[str, ...]:
        """What identifies the credentials requests carry now (compared, never shown)."""
        try:
            auth = self._auth().get("Authorization", "")
        except Exception:  # (an unreadable token file: as good as none)
            auth = ""
        return (auth, *self.tls_files())

    def tls_files(self) -> tuple[str, ...]:
        return (self.ca_file or "", self.cert_file or "", self.key_file or "")

    def source_stamp(self) -> object:
        """The state of the files the credentials come from (changes when one is rewritten)."""
        out: list[tuple[int, int, int] | None] = []
        for path in self.sources:
            try:
                st = os.stat(path)
            except OSError:
                out.append(None)
                continue
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(out)

    def reload_credentials(self) -> bool:
        """Read the kubeconfig again (same files and context; an exec plugin runs again) and take
        its credentials: a refreshed token or client certificate is used without a restart. True
        when they changed. Raises `ConnectionProblem` as loading does."""
        if self._reload is None:
            return False
        before = self.credentials_key()
        new = self._reload()
        if new.server.rstrip("/") != self.server.rstrip("/"):
            return False  # (another cluster now: credentials for it are not sent here)
        self._auth = new._auth
        self.ca_file, self.cert_file, self.key_file = new.ca_file, new.cert_file, new.key_file
        self.verify = new.verify
        self.sources = new.sources
        return self.credentials_key() != before

    def reread_after_401(self, sent: tuple[str, ...]) -> bool:
        """The server answered 401 to credentials `sent` (`credentials_key` when the request went
        out): read the kubeconfig again (a token refreshed in it or in its token file, an exec
        plugin run again), at most every REREAD_EVERY seconds unless its files changed. True when
        the credentials are now other than `sent`, so asking again may succeed. Blocking (an exec
        plugin may run); safe from any thread: a 401 seen by several paths at once reads once."""
        with self._reread_lock:
            if self.credentials_key() != sent:
                return True  # (another path read them again meanwhile)
            now, stamp = time.monotonic(), self.source_stamp()
            if stamp == self._reread_stamp and now - self._reread_at < REREAD_EVERY:
                return False
            self._reread_at, self._reread_stamp = now, stamp
            try:
                return self.reload_credentials()
            except Exception:  # (a kubeconfig being rewritten, a failing plugin: the 401 stands)
                return False

    def impersonation_groups(self) -> list[tuple[str, str]]:
        for g in self.impersonate_groups:
            if not isinstance(g, str) or _HEADER_UNSAFE.search(g):
                raise ConnectionProblem("an impersonated group holds a control character: no request can carry it",
                                        ExitCode.USAGE)
        return [("Impersonate-Group", g) for g in self.impersonate_groups]

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        if not self.verify:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else ssl.create_default_context()
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def requests_verify(self) -> str | bool:
        if not self.verify:
            return False
        return self.ca_file or True

    def requests_cert(self) -> tuple[str, str] | None:
        return (self.cert_file, self.key_file) if self.cert_file and self.key_file else None


# A kubeconfig context's extension (a NamedExtension, kept by kubectl) holding ranks' settings for the
# clusters that context reaches, e.g. the threshold `ranks demo` judges hangs by:
#     contexts:
#     - name: ranks-sim
#       context: {cluster: ranks-sim, user: admin, extensions: [{name: ranks, extension: {hang_after_minutes: 1}}]}
EXTENSION = "ranks"


def context_settings(ctx: Any) -> dict[str, Any]:
    """The settings in a kubeconfig context's `ranks` extension ({} when it has none)."""
    found = ctx.get("extensions") if isinstance(ctx, dict) else None
    for ext in found if isinstance(found, list) else ():
        if isinstance(ext, dict) and ext.get("name") == EXTENSION and isinstance(ext.get("extension"), dict):
            return dict(ext["extension"])
    return {}


def write_context_settings(path: str | os.PathLike[str], values: dict[str, Any]) -> None:
    """Give every context of the kubeconfig at `path` the `ranks` extension with `values` (merged
    into what it had); written whole and atomically, readable by its owner alone."""
    import yaml

    file = Path(path)
    doc = yaml.safe_load(file.read_text()) or {}
    for item in doc.get("contexts") or ():
        ctx = item.get("context") if isinstance(item, dict) else None
        if not isinstance(ctx, dict):
            continue
        kept = [e for e in ctx.get("extensions") or () if not (isinstance(e, dict) and e.get("name") == EXTENSION)]
        ctx["extensions"] = [*kept, {"name": EXTENSION, "extension": {**context_settings(ctx), **values}}]
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.replace(tmp, file)


def _kubeconfig_paths(explicit: str | None) -> list[str]:
    if explicit:
        return [explicit]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [p for p in env.split(os.pathsep) if p]
    return [str(Path("~/.kube/config").expanduser())]


def kubeconfig_files(explicit: str | None = None) -> list[str]:
    """The kubeconfig files kubectl would read (`--kubeconfig`, else each of `$KUBECONFIG`'s,
    else ~/.kube/config) that exist, as absolute paths: what another process, started elsewhere,
    needs to read the same ones (`ranks serve --ssh`'s sessions)."""
    return [os.path.abspath(Path(p).expanduser()) for p in _kubeconfig_paths(explicit) if Path(p).expanduser().exists()]


# -- a fast path for plain kubeconfigs ------------------------------------------------------------------
# The official client's loader costs ~0.4 s of imports on every start. A kubeconfig that is one file
# with a token, a token file or client certificates (the common case, and simcluster's) is read
# here; anything else (exec plugins, auth providers, merged files, any problem at all) goes to the
# official loader, which also words every error.

_SIMPLE_USER_KEYS = frozenset({"token", "tokenFile", "client-certificate", "client-certificate-data",
                               "client-key", "client-key-data"})
_SIMPLE_CLUSTER_KEYS = frozenset({"server", "certificate-authority", "certificate-authority-data",
                                  "insecure-skip-tls-verify", "tls-server-name", "extensions"})
_DATA_FILES: dict[bytes, str] = {}
_SPILLED: list[str] = []  # files written where there is no memory file (removed at exit and on SIGTERM/SIGHUP)


def _data_file(b64: str) -> str:
    """A path that reads back base64 `b64` decoded (a client key, a certificate): see `_private_file`."""
    import base64

    return _private_file(base64.standard_b64decode(b64))


def _private_file(raw: bytes) -> str:
    """A path that reads back `raw` and leaves nothing behind whatever ends ranks (exit, SIGTERM,
    SIGKILL, a crash): on Linux an anonymous file in memory (memfd), read through /proc/self/fd;
    elsewhere a 0600 file in a 0700 directory of its own, removed at exit and on SIGTERM/SIGHUP.
    TLS and requests take certificates and keys only as paths, so a path it has to be."""
    path = _DATA_FILES.get(raw)
    if path is not None:
        return path
    path = _memory_file(raw) or _spill_file(raw)
    _DATA_FILES[raw] = path
    return path


def _memory_file(raw: bytes) -> str | None:
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    try:
        fd = create("ranks-credential", os.MFD_CLOEXEC)
    except OSError:
        return None
    try:
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view):]
        path = f"/proc/self/fd/{fd}"
        with open(path, "rb") as f:  # (no /proc: a file it is)
            if f.read() == raw:
                return path
    except OSError:
        pass
    os.close(fd)
    return None


def _spill_file(raw: bytes) -> str:
    import atexit
    import tempfile

    directory = tempfile.mkdtemp(prefix="ranks-credential-")  # 0700
    path = os.path.join(directory, "data")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(raw)
    if not _SPILLED:
        atexit.register(_remove_spilled)
        _remove_on_signals()
    _SPILLED.append(path)
    return path


def _remove_spilled() -> None:
    while _SPILLED:
        path = _SPILLED.pop()
        for remove, p in ((os.unlink, path), (os.rmdir, os.path.dirname(path))):
            try:
                remove(p)
            except OSError:
                pass


def _remove_on_signals() -> None:
    """SIGTERM and SIGHUP where nothing else handles them (they would end ranks without `atexit`):
    remove the files, then end as the signal would have."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def ended(signum: int, _frame: object) -> None:
        _remove_spilled()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, ended)


def _loader_files(cfg: Configuration) -> None:
    """The official loader writes each `*-data` it uses (a client key, certificates) to a temporary
    file it only removes at exit: move them into private files (`_private_file`) and remove its."""
    from kubernetes.config import kube_config

    written = set(kube_config._temp_files.values())
    for attr in ("ssl_ca_cert", "cert_file", "key_file"):
        path = getattr(cfg, attr, None)
        if isinstance(path, str) and path in written:
            try:
                with open(path, "rb") as f:
                    setattr(cfg, attr, _private_file(f.read()))
            except OSError:
                setattr(cfg, attr, None)
    _sweep_loader_files()


def _sweep_loader_files() -> None:
    """Remove what the official loader wrote (a refreshed exec credential writes its certificate
    and key again; ranks keeps those it loaded first)."""
    from kubernetes.config import kube_config

    for path in kube_config._temp_files.values():
        try:
            os.unlink(path)
        except OSError:
            pass
    kube_config._temp_files.clear()


def _by_name(items: Any, name: object, key: str) -> dict[str, Any] | None:
    for item in items or []:
        found = item.get(key) if isinstance(item, dict) and item.get("name") == name else None
        if isinstance(found, dict):
            return found
    return None


def _simple_kubeconfig(paths: list[str], context: str | None, impersonate_user: str | None,
                       impersonate_groups: tuple[str, ...]) -> ClusterConfig | None:
    if len(paths) != 1:
        return None
    try:
        import yaml

        file = Path(paths[0]).expanduser()
        doc = yaml.load(file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        name = context or doc.get("current-context")
        ctx = _by_name(doc.get("contexts"), name, "context") if name else None
        if ctx is None:
            return None
        cluster = _by_name(doc.get("clusters"), ctx.get("cluster"), "cluster")
        user = _by_name(doc.get("users"), ctx.get("user"), "user") or {}
        if cluster is None or not cluster.get("server") or set(cluster) - _SIMPLE_CLUSTER_KEYS \
                or set(user) - _SIMPLE_USER_KEYS:
            return None

        _check_server(cluster["server"], "")  # (a bad one: the official loader's path says so, naming it)

        def rel(p: str) -> str:
            return str((file.parent / p).expanduser()) if not os.path.isabs(p) else p

        ca = (_data_file(cluster["certificate-authority-data"]) if cluster.get("certificate-authority-data")
              else rel(cluster["certificate-authority"]) if cluster.get("certificate-authority") else None)
        cert = (_data_file(user["client-certificate-data"]) if user.get("client-certificate-data")
                else rel(user["client-certificate"]) if user.get("client-certificate") else None)
        key = (_data_file(user["client-key-data"]) if user.get("client-key-data")
               else rel(user["client-key"]) if user.get("client-key") else None)
        token, token_file = user.get("token"), user.get("tokenFile")

        def auth() -> dict[str, str]:
            value = token
            if not value and token_file:
                value = Path(rel(token_file)).read_text().strip()
            return {"Authorization": f"Bearer {value}"} if value else {}

        auth()  # an unreadable token file: let the official loader say so
        return ClusterConfig(
            sources=(rel(token_file),) if token_file and not token else (),
            server=str(cluster["server"]).rstrip("/"), context=str(name),
            namespace=ctx.get("namespace") or "default", user=str(ctx.get("user") or ""),
            verify=not cluster.get("insecure-skip-tls-verify", False), ca_file=ca, cert_file=cert, key_file=key,
            tls_server_name=cluster.get("tls-server-name"), _auth=auth,
            impersonate_user=impersonate_user, impersonate_groups=impersonate_groups,
            context_settings=context_settings(ctx),
        )
    except Exception:  # anything odd: the official loader decides and explains
        return None


def _auth_from(cfg: Configuration) -> Callable[[], dict[str, str]]:
    def headers() -> dict[str, str]:
        # the loader keeps "Bearer X" (or "Basic X") under BearerToken; the hook refreshes exec tokens
        # (a failing refresh logs through `logging`: kept off the terminal, the stale token gets a 401)
        with _client_errors():
            token = cfg.get_api_key_with_prefix("BearerToken") or cfg.get_api_key_with_prefix("authorization")
        _sweep_loader_files()
        if token:
            return {"Authorization": token}
        basic = cfg.get_basic_auth_token() if cfg.username and cfg.password else None
        return {"Authorization": basic} if basic else {}

    return headers


def load_cluster_config(
    kubeconfig: str | None = None,
    context: str | None = None,
    *,
    impersonate_user: str | None = None,
    impersonate_groups: tuple[str, ...] = (),
    exec_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
) -> ClusterConfig:
    """Resolve the cluster to talk to, as kubectl would. The config remembers how: after a 401
    its credentials are read again the same way (`ClusterConfig.reload_credentials`).
    `exec_timeout`: seconds an exec credential plugin may take (the request timeout; None: no
    limit); one that takes longer is killed, and that is a configuration problem (exit 3)."""
    _ExecPlugin.timeout = exec_timeout
    cfg = _load_cluster_config(kubeconfig, context, impersonate_user, impersonate_groups)
    cfg.headers()  # (credentials no request can carry: said now, not at the first request)
    name = cfg.tls_server_name = cfg.tls_server_name or None  # ("" is none, as kubectl)
    if name is not None and (not isinstance(name, str) or _HEADER_UNSAFE.search(name) or " " in name):
        from .sanitize import shown

        raise ConnectionProblem(f"the kubeconfig's tls-server-name {shown(name)} is not a host name",
                                ExitCode.NO_CONFIG)
    cfg._reload = functools.partial(load_cluster_config, kubeconfig, context, impersonate_user=impersonate_user,
                                    impersonate_groups=impersonate_groups, exec_timeout=exec_timeout)
    cfg.kubeconfig_arg, cfg.context_arg = kubeconfig or None, context or None
    return cfg


def _load_cluster_config(kubeconfig: str | None, context: str | None, impersonate_user: str | None,
                         impersonate_groups: tuple[str, ...]) -> ClusterConfig:
    from .sanitize import shown

    paths = _kubeconfig_paths(kubeconfig)
    existing = [p for p in paths if Path(p).expanduser().exists()]
    if kubeconfig and not existing:
        raise ConnectionProblem(f"kubeconfig {shown(kubeconfig, limit=500)} does not exist", ExitCode.NO_CONFIG)
    if not existing:
        if os.environ.get("KUBERNETES_SERVICE_HOST") and not kubeconfig:
            return _in_cluster(impersonate_user, impersonate_groups)
        raise ConnectionProblem(
            "no kubeconfig found (looked at " + ", ".join(paths) + "); set KUBECONFIG or pass --kubeconfig",
            ExitCode.NO_CONFIG,
        )
    sources = tuple(str(Path(p).expanduser()) for p in existing)
    fast = _simple_kubeconfig(existing if len(paths) == 1 else paths, context, impersonate_user, impersonate_groups)
    if fast is not None:
        fast.sources = (*sources, *fast.sources)
        return fast
    from kubernetes.client import Configuration
    from kubernetes.config import ConfigException, kube_config

    # the loader runs exec plugins through this name: ours replaces it
    kube_config.ExecProvider = _exec_plugin_class()  # type: ignore[attr-defined]  # (imported there, not re-exported)
    cfg = Configuration()
    # (KUBECONFIG as it is now: the library reads it once, when it is imported)
    config_file = kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        contexts, current = kube_config.list_kube_config_contexts(config_file=config_file)
    except ConfigException as exc:
        raise ConnectionProblem(f"invalid kubeconfig: {_first_line(exc)}", ExitCode.NO_CONFIG) from None
    except Exception as exc:  # unreadable YAML, wrong types...
        raise ConnectionProblem(f"cannot read kubeconfig: {_first_line(exc)}", ExitCode.NO_CONFIG) from None
    names = [c.get("name") for c in contexts or []]
    if context and context not in names:
        raise ConnectionProblem(
            f'context {shown(context)} not found in kubeconfig (have: {", ".join(map(str, names)) or "none"})',
            ExitCode.NO_CONFIG,
        )
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    if not chosen:
        raise ConnectionProblem("kubeconfig has no current context; pass --context", ExitCode.NO_CONFIG)
    try:
        with _client_errors() as logged:  # a failing exec plugin is only logged by the loader
            kube_config.load_kube_config(
                config_file=config_file, context=context, client_configuration=cfg, persist_config=False
            )
        if logged:
            raise ConnectionProblem(_credential_failure(logged[0]), ExitCode.NO_CONFIG)
    except ConnectionProblem:
        raise
    except ConfigException as exc:
        raise ConnectionProblem(f"invalid kubeconfig: {_first_line(exc)}", ExitCode.NO_CONFIG) from None
    except Exception as exc:
        raise ConnectionProblem(f"cannot load kubeconfig: {_first_line(exc)}", ExitCode.NO_CONFIG) from None
    finally:
        _loader_files(cfg)
    ctx = chosen.get("context") or {}
    _check_server(cfg.host, str(ctx.get("cluster") or ""))
    return ClusterConfig(
        server=cfg.host,
        context=str(chosen.get("name")),
        namespace=ctx.get("namespace") or "default",
        user=str(ctx.get("user") or ""),
        verify=bool(cfg.verify_ssl),
        ca_file=cfg.ssl_ca_cert,
        cert_file=cfg.cert_file,
        key_file=cfg.key_file,
        tls_server_name=getattr(cfg, "tls_server_name", None),
        _auth=_auth_from(cfg),
        impersonate_user=impersonate_user,
        impersonate_groups=impersonate_groups,
        sources=sources,
        context_settings=context_settings(ctx),
    )


def _in_cluster(user: str | None, groups: tuple[str, ...]) -> ClusterConfig:
    from kubernetes.client import Configuration
    from kubernetes.config import ConfigException, incluster_config

    cfg = Configuration()
    try:
        incluster_config.load_incluster_config(client_configuration=cfg)
    except ConfigException as exc:
        raise ConnectionProblem(f"in-cluster config: {_first_line(exc)}", ExitCode.NO_CONFIG) from None
    ns_file = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
    namespace = ns_file.read_text().strip() if ns_file.exists() else "default"
    return ClusterConfig(
        server=cfg.host, context="in-cluster", namespace=namespace, user="serviceaccount",
        ca_file=cfg.ssl_ca_cert, _auth=_auth_from(cfg), impersonate_user=user, impersonate_groups=groups,
        sources=("/var/run/secrets/kubernetes.io/serviceaccount/token",),
    )


def _check_server(server: object, cluster: str) -> None:
    """The kubeconfig's `server` is an http(s) URL with a host (exit 3 otherwise: kubectl would go
    to localhost:8080, which is nobody's cluster)."""
    from urllib.parse import urlsplit

    from .sanitize import shown

    where = f"the kubeconfig's cluster {shown(cluster)}" if cluster else "the kubeconfig's cluster"
    text = server if isinstance(server, str) else ""
    if not text.strip():
        raise ConnectionProblem(f"{where} has no server (clusters[].cluster.server: the API server's URL)",
                                ExitCode.NO_CONFIG)
    try:
        url = urlsplit(text)
        scheme, host = url.scheme, url.hostname
        url.port  # noqa: B018 - (a port that is no number raises)
    except ValueError:
        scheme, host = "", None
    if scheme not in ("https", "http") or not host:
        raise ConnectionProblem(f"{where} has server {shown(text, limit=200)}, not an https:// URL of the API "
                                "server", ExitCode.NO_CONFIG)


class _ExecPlugin:
    """The exec credential plugin runner the official loader uses (`_exec_plugin_class`): the
    library's, except that a plugin that does not answer within `timeout` seconds (the request
    timeout) is killed, with what it started, and that is said in one line (exit 3). A plugin
    that may ask the user something (stdout and stdin a terminal, as the library decides) keeps
    the terminal and has no limit: the user is there to answer it, or to press Ctrl-C."""

    timeout: float | None = DEFAULT_REQUEST_TIMEOUT


@functools.cache
def _exec_plugin_class() -> type[ExecProvider]:
    import json
    import signal
    import subprocess
    import sys

    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.exec_provider import ExecProvider as LibraryExecProvider

    class TimedExecProvider(LibraryExecProvider):
        def run(self, previous_response: Any = None) -> Any:
            interactive = hasattr(sys.stdout, "isatty") and sys.stdout.isatty()
            info: dict[str, Any] = {"apiVersion": self.api_version, "kind": "ExecCredential",
                                    "spec": {"interactive": interactive}}
            if previous_response:
                info["spec"]["response"] = previous_response
            if self.cluster:
                info["spec"]["cluster"] = dict(self.cluster.value)
                for ext in self.cluster.value.get("extensions") or ():
                    if isinstance(ext, dict) and ext.get("name") == "client.authentication.k8s.io/exec":
                        info["spec"]["cluster"]["config"] = ext.get("extension")
                        break
            env = {**self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
            limit = None if interactive else _ExecPlugin.timeout
            try:
                proc = subprocess.Popen(
                    self.args, stdout=subprocess.PIPE, stderr=sys.stderr if interactive else subprocess.PIPE,
                    stdin=sys.stdin if interactive else subprocess.DEVNULL, cwd=self.cwd, env=env, text=True,
                    shell=self.shell, start_new_session=not interactive)
            except OSError as exc:
                raise ConfigException(f"exec: cannot run {self.args[0]!r}: {exc.strerror or exc}") from None
            try:
                stdout, stderr = proc.communicate(timeout=limit)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)  # (its own session: the plugin and what it started)
                proc.kill()
                proc.communicate()
                raise ConfigException(f"exec: the plugin {self.args[0]!r} did not answer within {limit:g} s "
                                      "(--request-timeout) and was stopped") from None
            if proc.returncode != 0:
                detail = (stderr or "").strip()
                raise ConfigException(f"exec: process returned {proc.returncode}" + (f". {detail}" if detail else ""))
            try:
                data = json.loads(stdout)
            except ValueError as exc:
                raise ConfigException(f"exec: failed to decode process output: {exc}") from None
            if not isinstance(data, dict) or any(k not in data for k in ("apiVersion", "kind", "status")):
                raise ConfigException("exec: malformed response: not an ExecCredential (apiVersion, kind, status)")
            if data["apiVersion"] != self.api_version:
                raise ConfigException(f"exec: plugin api version {data['apiVersion']} does not match "
                                      f"{self.api_version}")
            if not isinstance(data["status"], dict):
                raise ConfigException("exec: malformed response: its status is not an object")
            return data["status"]

    return TimedExecProvider


class _Logged(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.messages.append(record.getMessage())
        except Exception:  # (a record that cannot be formatted is still a failure)
            self.messages.append(str(record.msg))


@contextlib.contextmanager
def _client_errors() -> Iterator[list[str]]:
    """The errors the official client logs while inside (its kubeconfig loader reports a failing exec
    credential plugin only through `logging.error`), kept: with a handler on the root logger, an
    unconfigured `logging` prints no stray `ERROR:root:` line on the terminal."""
    handler = _Logged()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler.messages
    finally:
        root.removeHandler(handler)


def _credential_failure(logged: str) -> str:
    """One line for a failed exec credential plugin (`users[].user.exec`), from what the loader logged."""
    from .sanitize import clean

    detail = logged.strip().removeprefix("exec: ")
    if "'NoneType' object has no attribute" in detail:  # (on a terminal the plugin's stderr is not captured)
        detail = "it exited with an error"
    return clean(f"getting credentials: the kubeconfig's exec plugin failed: {detail}", limit=500)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
