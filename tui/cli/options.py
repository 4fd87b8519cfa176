"""The flags the `ranks` commands share, and how a command reads them.

The global flags (`--kubeconfig`, `--context`, `--prometheus`, `--read-only`, `--request-timeout`)
are on the group and on every subcommand, so they are accepted before or after the subcommand as
kubectl accepts its flags (a later one wins: `merge_globals`). `-p PROJECT` given before the
subcommand counts too (`group_project`). Project and workload names are checked here, before any
request (exit 2 with the rule they break).

Light: this module is on the path of `ranks --help` and of shell completion.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import click

# ctx.obj's key for the SSH door's settings (`tui.cli.door`), which no flag overrides
PINNED = "pinned"
GLOBAL_KEYS = ("kubeconfig", "context", "prometheus", "read_only", "request_timeout", "as_user", "as_groups",
               "namespace")
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(h|ms|m|s|us|µs|ns)")  # (ASCII digits only, as Go)
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


class RanksCommand(click.Command):
    """A `ranks` subcommand, which says once, where it is defined, whether it only reads the
    cluster (`reads_only`): the SSH door serves exactly those (`tui.cli.group.read_only_commands`),
    so a new read command is served and a new action is not, with no list to keep."""

    def __init__(self, *args: Any, reads_only: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads_only = reads_only


def command(name: str, *, reads_only: bool, **attrs: Any) -> Callable[[Callable[..., Any]], RanksCommand]:
    """`click.command(name)` for a `ranks` subcommand: `reads_only` is required (see `RanksCommand`)."""
    return click.command(name, cls=RanksCommand, reads_only=reads_only, **attrs)


MAX_DURATION = 9223372036.854775807  # s: Go's longest duration (2562047h47m16.854775807s), as kubectl's flags


def in_range(text: str, seconds: float) -> float:
    """`seconds` if a Go duration can hold it, else ValueError (as kubectl: an overflowing duration
    is invalid; ranks' timers could not wait that long either)."""
    if not seconds <= MAX_DURATION:
        from monitors.sanitize import shown

        raise ValueError(f"{shown(text, limit=40)} is out of range (at most 2562047h47m16s, as kubectl's durations)")
    return seconds


def parse_request_timeout(text: str) -> float:
    """kubectl's --request-timeout: `30s`, `1m`, `1m30s`, `500ms`, a bare number of seconds, or
    `0` for no timeout. Seconds (0.0: none); ValueError with the rule when malformed or out of range."""
    s = text.strip()
    if re.fullmatch(r"[0-9]+(\.[0-9]*)?", s):
        return in_range(text, float(s))
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        from monitors.sanitize import shown

        raise ValueError(f"{shown(text)} is not a duration (use e.g. 30s, 1m, 1m30s; 0 means no timeout)")
    return in_range(text, total)


def _request_timeout(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None or ctx.resilient_parsing:  # (shell completion parses half-typed words)
        return None
    try:
        return parse_request_timeout(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def _project_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None or ctx.resilient_parsing:  # (shell completion parses half-typed words)
        return None
    from monitors.names import project_problem

    problem = project_problem(value)
    if problem:
        raise click.BadParameter(problem, ctx=ctx, param=param)
    return value


def _workload_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None or ctx.resilient_parsing:  # (shell completion parses half-typed words)
        return None
    from monitors.names import workload_problem

    problem = workload_problem(value)
    if problem:
        raise click.BadParameter(problem, ctx=ctx, param=param)
    return value


def workload_argument(fn: Callable[..., Any]) -> Callable[..., Any]:
    """WORKLOAD (NAME or KIND/NAME), checked before anything is sent."""
    return click.argument("workload", callback=_workload_name)(fn)


def _identity(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """--as and --as-group: sent as HTTP headers, so no control character (it would end the header)."""
    values = value if isinstance(value, tuple) else (value,) if value is not None else ()
    for v in values:
        if not v or re.search(r"[\x00-\x1f\x7f]", v):
            from monitors.sanitize import shown

            raise click.BadParameter(f"{shown(v)} is not a user or group name (empty, or a control character)",
                                     ctx=ctx, param=param)
    return value


def _as_groups(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...] | None:
    _identity(ctx, param, value)
    return tuple(value) or None  # (None: not given here, so the group's value stands)


def global_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The global flags, on the group and on every subcommand (a later one wins). `--as` and
    `--as-group` (hidden, as kubectl's: impersonation; `ranks serve` runs each SSH user's
    dashboard with them) set Impersonate-User/-Group on every request; `--namespace` (hidden)
    stands for the context's namespace (an impersonated user's own project)."""
    fn = click.option("--as-group", "as_groups", metavar="GROUP", multiple=True, hidden=True, callback=_as_groups,
                      help="Group to impersonate (repeatable; with --as).")(fn)
    fn = click.option("--namespace", "namespace", metavar="NS", default=None, hidden=True,
                      help="The namespace the context is in (the default project), as kubectl's.")(fn)
    fn = click.option("--as", "as_user", metavar="USER", default=None, hidden=True, callback=_identity,
                      help="User to impersonate for every request.")(fn)
    fn = click.option("--request-timeout", "request_timeout", metavar="DURATION", default=None,
                      callback=_request_timeout,
                      help="How long the API server may stay silent (to connect, or between the bytes of "
                           "an answer) before a request is given up (as kubectl: 30s, 1m; 0: no limit); a long "
                           "answer that keeps coming is not cut. Default 30s; a server that keeps failing is "
                           "given up on after the same time.")(fn)
    fn = click.option("--kubeconfig", metavar="PATH", default=None, help="Path to the kubeconfig file.")(fn)
    fn = click.option("--context", metavar="NAME", default=None, help="The kubeconfig context to use.")(fn)
    fn = click.option("--prometheus", metavar="URL", default=None,
                      help="Prometheus URL (default: discovered through the API server).")(fn)
    fn = click.option("--read-only", "read_only", is_flag=True, default=None,
                      help="Refuse every action that changes the cluster.")(fn)
    return fn


def take_global(obj: dict[str, Any], key: str, value: Any) -> bool:
    """Whether the global flag `key` was given (`value` not None); over the SSH door (`PINNED` in
    `obj`) one of the server's flags is a usage error, whatever its value."""
    if value is None:
        return False
    if obj.get(PINNED) is not None:
        from .door import SERVER_FLAGS

        if key in SERVER_FLAGS:
            raise click.UsageError(f"the flag {SERVER_FLAGS[key]} is the server's: ranks serve sets the cluster "
                                   "and your identity")
    return True


def merge_globals(ctx: click.Context, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The global flags given to the group, overridden by those given to the subcommand (which
    are popped from `kwargs`): the `opts` every command runs with. Over the SSH door the server's
    settings (`PINNED`) win over both."""
    obj = ctx.ensure_object(dict)
    merged = {k: v for k, v in obj.items() if k != PINNED}
    for key in GLOBAL_KEYS:
        value = kwargs.pop(key, None)
        if take_global(obj, key, value):
            merged[key] = value
    merged.update(obj.get(PINNED) or {})
    return merged


def impersonation(opts: dict[str, Any]) -> dict[str, Any]:
    """`load_cluster_config`'s keywords from the merged `opts`: impersonation, and how long an exec
    credential plugin may take (--request-timeout: default 30 s, 0 no limit)."""
    timeout = opts.get("request_timeout")
    return {"impersonate_user": opts.get("as_user") or None,
            "impersonate_groups": tuple(opts.get("as_groups") or ()),
            "exec_timeout": 30.0 if timeout is None else (float(timeout) or None)}


def group_project(ctx: click.Context, project: str | None) -> str | None:
    """-p given before the subcommand (``ranks -p team-a list``) counts too."""
    return project or (ctx.obj or {}).get("dashboard", {}).get("project")


def dashboard_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The dashboard's flags (`ranks` and `ranks demo`): theme, ASCII, the project to open on."""
    fn = click.option("--theme", metavar="NAME", default=None,
                      help="Theme: dark, light, high-contrast, colour-blind or one of yours.")(fn)
    fn = click.option("--ascii", is_flag=True, default=False, help="Only ASCII glyphs (no Unicode bars).")(fn)
    fn = click.option("-p", "--project", metavar="PROJECT", default=None, callback=_project_name,
                      help="Open on this project's workloads (default: the config's, else all).")(fn)
    return fn


OUTPUT = click.option("-o", "--output", type=click.Choice(["table", "wide", "json", "yaml"]), default="table",
                      show_default=True, help="Output format.")
PROJECT = click.option("-p", "--project", metavar="PROJECT", default=None, callback=_project_name,
                       help="Project name (team-a) or namespace (runai-team-a).")
ALL = click.option("-A", "--all-projects", "all_projects", is_flag=True, help="All projects.")
