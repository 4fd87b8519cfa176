"""`ranks serve --ssh [HOST:]PORT ...`: the SSH front door (issue #14). The server itself is
headless and lives in `sessions.ssh`; this module reads the flags, checks them (one line, exit 2)
and prints one `ready: ssh=HOST:PORT` line once it listens."""

from __future__ import annotations

from typing import Any

import click

from monitors.connection import ExitCode

from .errors import error
from .options import command, global_options, merge_globals, parse_request_timeout


def _duration(ctx: click.Context, param: click.Parameter, value: str) -> float:
    try:
        seconds = parse_request_timeout(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    if seconds > 10 ** 7:
        raise click.BadParameter(f"{value} is more than 115 days", ctx=ctx, param=param)
    return seconds


@command("serve", reads_only=False)
@click.option("--ssh", "listen", metavar="[HOST:]PORT", required=True,
              help="Serve the dashboard over SSH on this address (port 0: any free port).")
@click.option("--host-key", metavar="FILE", required=True, help="The server's private host key (OpenSSH format).")
@click.option("--authorized-keys", metavar="FILE|DIR", required=True,
              help="DIR: one file per user (DIR/alice holds alice's keys); FILE: every key acts as --as USER "
                   "(else as the server's own identity).")
@click.option("--users", metavar="FILE", default=None,
              help="YAML: key fingerprint (SHA256:...) -> {user: NAME, groups: [...]}.")
@click.option("--max-sessions", type=click.IntRange(1, 10000), default=20, show_default=True,
              help="Sessions open at once, all users.")
@click.option("--max-sessions-per-user", type=click.IntRange(1, 10000), default=4, show_default=True,
              help="Sessions open at once per user.")
@click.option("--max-commands-per-user", type=click.IntRange(1, 10000), default=2, show_default=True,
              help="Commands (ssh HOST list ...) running at once per user.")
@click.option("--command-cpu-limit", metavar="DURATION", default="5m", show_default=True, callback=_duration,
              help="CPU time one command may use (then it is stopped, saying so); 0: no limit.")
@click.option("--command-time-limit", metavar="DURATION", default="1h", show_default=True, callback=_duration,
              help="How long one command may run (logs -f included; then it is stopped, saying so); 0: no limit.")
@click.option("--user-files", metavar="DIR/%u", default=None,
              help="Keep each user's own files here (%u: the user's name), 0700: the dashboard's saves go there, "
                   "and `ssh HOST files [NAME]` gives them back. Without it, saving over SSH is refused.")
@click.option("--audit-log", metavar="FILE", default=None, help="Append the audit lines here (default: stderr).")
@click.option("--per-user-watch", is_flag=True, default=False,
              help="Each dashboard lists and watches the cluster as its user (as before #31), instead of one watch "
                   "by the server's identity filtered by SubjectAccessReviews (which needs list/watch and create "
                   "subjectaccessreviews: docs/ssh.md).")
@global_options
@click.pass_context
def serve_command(ctx: click.Context, /, listen: str, host_key: str, authorized_keys: str, users: str | None,
                  max_sessions: int, max_sessions_per_user: int, max_commands_per_user: int,
                  command_cpu_limit: float, command_time_limit: float, user_files: str | None, audit_log: str | None,
                  per_user_watch: bool, **kwargs: Any) -> int:
    """Serve the dashboard over SSH: each key acts as its own Kubernetes identity (impersonation).

    Public-key logins only. A terminal session (ssh -t) gets the dashboard; `ssh HOST list -A`
    runs a read-only command (at a lower priority than the dashboards, within the command limits). `--as USER` gives the identity of keys of a single authorized-keys
    file. `--prometheus URL` gives every session GPU metrics from there (else each user's own
    access decides). Runs until SIGINT/SIGTERM.
    """
    from sessions.errors import SessionError
    from sessions.ssh.config import ServeConfig, parse_listen
    from sessions.ssh.server import serve

    from .group import read_only_commands

    opts = merge_globals(ctx, kwargs)
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        return error(f"--ssh: {exc}", ExitCode.USAGE)
    if opts.get("as_groups") and not opts.get("as_user"):
        return error("--as-group needs --as USER", ExitCode.USAGE)
    from sessions.ssh.user_files import parse_pattern

    try:
        files = parse_pattern(user_files) if user_files is not None else None
    except SessionError as exc:
        return error(exc.message, exc.code)
    cfg = ServeConfig(host=host, port=port, host_key=host_key, authorized_keys=authorized_keys, users=users,
                      as_user=opts.get("as_user"), read_only=bool(opts.get("read_only")),
                      max_sessions=max_sessions, max_sessions_per_user=max_sessions_per_user, audit_log=audit_log,
                      kubeconfig=opts.get("kubeconfig"), context=opts.get("context"),
                      request_timeout=opts.get("request_timeout"), prometheus=opts.get("prometheus"),
                      commands=read_only_commands(), command_cpu=command_cpu_limit,
                      command_time=command_time_limit, max_commands_per_user=max_commands_per_user,
                      user_files=files, per_user_watch=per_user_watch)

    def ready(where: str) -> None:
        print(f"ready: ssh={where}", flush=True)

    try:
        return serve(cfg, ready)
    except SessionError as exc:
        return error(exc.message, exc.code)
    except OSError as exc:
        return error(f"cannot write the audit log {audit_log}: {exc.strerror or exc}", ExitCode.USAGE)
