"""What `ranks serve --ssh` is started with (`ServeConfig`, filled by `tui.cli.serve`): the address,
the keys, the limits, the cluster (`pin_cluster`: the kubeconfig the server was started with, read
once), the users' files."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from sessions.errors import SessionError

LOGIN_GRACE = 30.0  # seconds a connection has to log in (default of ServeConfig.login_grace)
LOGIN_GRACE_ENV = "RANKS_SSH_LOGIN_GRACE"  # (seconds) when ServeConfig.login_grace is None
IDLE_TIMEOUT_ENV = "RANKS_SSH_IDLE_TIMEOUT"  # (seconds, 0: never) when ServeConfig.idle_timeout is None


@dataclass
class ServeConfig:
    host: str
    port: int
    host_key: str
    authorized_keys: str
    users: str | None = None
    as_user: str | None = None
    read_only: bool = False
    max_sessions: int = 20
    max_sessions_per_user: int = 4
    audit_log: str | None = None
    kubeconfig: str | None = None
    context: str | None = None
    # the kubeconfig files every session reads, found when the server starts (`pin_cluster`): those
    # of --kubeconfig, $KUBECONFIG or ~/.kube/config; () when it runs in a pod (in-cluster config)
    kubeconfig_files: tuple[str, ...] = ()
    request_timeout: float | None = None
    prometheus: str | None = None  # every session's GPU metrics from here (else found as the user)
    # the commands a client may run (`ssh HOST list -A`): the CLI's read-only ones, as each declares
    # itself (`tui.cli.group.read_only_commands`; this room does not import the CLI)
    commands: tuple[str, ...] = ()
    command_cpu: float = 0.0  # seconds of CPU one command may use (0: no limit)
    command_time: float = 0.0  # seconds one command may run (0: no limit)
    max_commands_per_user: int = 0  # commands one user may run at once (0: only max_sessions_per_user)
    per_user_watch: bool = False  # `--per-user-watch`: each dashboard LISTs and WATCHes as its user (no `hub`)
    user_files: str | None = None  # `--user-files` (user_files.parse_pattern): each user's own files; None: none
    extra_env: dict[str, str] = field(default_factory=dict)
    login_grace: float | None = None  # seconds to log in; None: $RANKS_SSH_LOGIN_GRACE, else 30
    idle_timeout: float | None = None  # seconds without input; None: $RANKS_SSH_IDLE_TIMEOUT, else (0) never

    def timeouts(self) -> tuple[float, float]:
        """(login grace, idle timeout: 0 for never) in seconds; SessionError (code 2) for a bad value."""
        def pick(value: float | None, env: str, default: float) -> float:
            what = env
            if value is None:
                text = os.environ.get(env, "").strip()
                if not text:
                    return default
                try:
                    value = float(text)
                except ValueError:
                    value = -1.0
            else:
                what = "the " + ("login grace" if env == LOGIN_GRACE_ENV else "idle timeout")
            if not 0 <= value < 10 ** 7:  # (also NaN)
                raise SessionError(f"{what}: {value!r} is not a number of seconds (0 or more)", 2)
            return value

        return pick(self.login_grace, LOGIN_GRACE_ENV, LOGIN_GRACE), pick(self.idle_timeout, IDLE_TIMEOUT_ENV, 0.0)



def pin_cluster(cfg: ServeConfig) -> None:
    """The cluster every session talks to: the kubeconfig the server was started with, however it
    was given (--kubeconfig; $KUBECONFIG, one file or several joined by ':'; ~/.kube/config) and
    its context (--context, else the current one now), read once here so that a missing or broken
    one stops the server before it is ready (SessionError with its exit code, 3) rather than
    ending every session. The files are kept as absolute paths and the context by name: each
    session reads them again (a refreshed token is used), as the same files and context."""
    from monitors.connection import ConnectionProblem, kubeconfig_files, load_cluster_config

    try:
        cluster = load_cluster_config(cfg.kubeconfig, cfg.context)
    except ConnectionProblem as exc:
        raise SessionError(exc.message, int(exc.code)) from None
    cfg.kubeconfig_files = tuple(kubeconfig_files(cfg.kubeconfig))
    if cfg.kubeconfig_files and not cfg.context:
        cfg.context = cluster.context


def parse_listen(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` (IPv6 as `[::1]:PORT`); ValueError with the rule."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host = ""
    host = host.strip("[]") or "0.0.0.0"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f'"{text}" is not [HOST:]PORT (a port is 0-65535)')
    return host, int(port)


def span(seconds: float) -> str:
    """60 -> "1 minute", 90 -> "90 seconds", 7200 -> "2 hours"."""
    for unit, size in (("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds:g} second{'s' if seconds != 1 else ''}"
