"""The `ranks` command line (also installed as `kubectl-ranks`, so `kubectl ranks ...` works).

Global options (`--kubeconfig`, `--context`, `--prometheus`, `--read-only`, `--request-timeout`)
are accepted before or after the subcommand, as kubectl accepts its flags. Project and workload
names are checked here, before any request (exit 2 with the rule they break). Heavy imports happen inside commands, so
`ranks --help` and completion start fast.

Exit codes: 0 ok, 1 failed, 2 usage, 3 no/invalid kubeconfig or context, 4 server unreachable,
5 TLS failure, 6 unauthorized, 7 forbidden, 8 not found, 130 interrupted.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

import click

from .errors import EXIT_USAGE, fail

GLOBAL_KEYS = ("kubeconfig", "context", "prometheus", "read_only", "request_timeout")
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(h|ms|m|s|us|µs|ns)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_request_timeout(text: str) -> float:
    """kubectl's --request-timeout: `30s`, `1m`, `1m30s`, `500ms`, a bare number of seconds, or
    `0` for no timeout. Seconds (0.0: none); ValueError with the rule when malformed."""
    s = text.strip()
    if re.fullmatch(r"\d+(\.\d*)?", s):
        return float(s)
    pos, total = 0, 0.0
    for m in _DURATION.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(f'"{text}" is not a duration (use e.g. 30s, 1m, 1m30s; 0 means no timeout)')
    return total


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


def global_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The global flags, on the group and on every subcommand (a later one wins)."""
    fn = click.option("--request-timeout", "request_timeout", metavar="DURATION", default=None,
                      callback=_request_timeout,
                      help="How long one request to the API server may take before giving up (as kubectl: "
                           "30s, 1m; 0: no limit). Default 30s; a server that keeps failing is given up on "
                           "after the same time.")(fn)
    fn = click.option("--kubeconfig", metavar="PATH", default=None, help="Path to the kubeconfig file.")(fn)
    fn = click.option("--context", metavar="NAME", default=None, help="The kubeconfig context to use.")(fn)
    fn = click.option("--prometheus", metavar="URL", default=None,
                      help="Prometheus URL (default: discovered through the API server).")(fn)
    fn = click.option("--read-only", "read_only", is_flag=True, default=None,
                      help="Refuse every action that changes the cluster.")(fn)
    return fn


def _merge_globals(ctx: click.Context, kwargs: dict[str, Any]) -> dict[str, Any]:
    obj = ctx.ensure_object(dict)
    merged = dict(obj)
    for key in GLOBAL_KEYS:
        value = kwargs.pop(key, None)
        if value is not None:
            merged[key] = value
    return merged


OUTPUT = click.option("-o", "--output", type=click.Choice(["table", "wide", "json", "yaml"]), default="table",
                      show_default=True, help="Output format.")
PROJECT = click.option("-p", "--project", metavar="PROJECT", default=None, callback=_project_name,
                       help="Project name (team-a) or namespace (runai-team-a).")
ALL = click.option("-A", "--all-projects", "all_projects", is_flag=True, help="All projects.")


PROJECT_COMMANDS = ("demo", "list", "get", "logs", "shell", "exec", "submit", "delete", "suspend", "resume",
                    "convert")


def _group_project(ctx: click.Context, project: str | None) -> str | None:
    """-p given before the subcommand (``ranks -p team-a list``) counts too."""
    return project or (ctx.obj or {}).get("dashboard", {}).get("project")


def dashboard_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--theme", metavar="NAME", default=None,
                      help="Theme: dark, light, high-contrast, colour-blind or one of yours.")(fn)
    fn = click.option("--ascii", is_flag=True, default=False, help="Only ASCII glyphs (no Unicode bars).")(fn)
    fn = click.option("-p", "--project", metavar="PROJECT", default=None, callback=_project_name,
                      help="Open on this project's workloads (default: the config's, else all).")(fn)
    return fn


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             invoke_without_command=True)
@click.version_option(package_name="ranks", prog_name="ranks")
@global_options
@dashboard_options
@click.pass_context
def cli(ctx: click.Context, theme: str | None, ascii: bool, project: str | None, **kwargs: Any) -> None:
    """ranks: distributed training workloads on Kubernetes, rank by rank.

    Without a command, opens the dashboard on the current context.
    """
    ctx.ensure_object(dict)
    for key in GLOBAL_KEYS:
        if kwargs.get(key) is not None:
            ctx.obj[key] = kwargs[key]
    ctx.obj["dashboard"] = {"theme": theme, "ascii": ascii, "project": project}
    sub = ctx.invoked_subcommand
    if sub is not None and sub != "demo" and (theme is not None or ascii):
        raise click.UsageError("--theme and --ascii belong to the dashboard ('ranks' or 'ranks demo')")
    if sub is not None and project and sub not in PROJECT_COMMANDS:
        raise click.UsageError(f"-p/--project does not apply to 'ranks {sub}'")
    if sub is None:
        from .dashboard_command import run_dashboard

        sys.exit(run_dashboard(dict(ctx.obj), theme=theme, ascii=ascii, project=project))


@cli.command("demo")
@dashboard_options
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Keep the demo cluster's kubeconfig and files here (default: a temporary directory).")
@global_options
@click.pass_context
def demo_command(ctx: click.Context, theme: str | None, ascii: bool, project: str | None, workdir: str | None,
                 **kwargs: Any) -> None:
    """The dashboard on simcluster's demo scenario (8 GPU nodes, 8 workloads), with a real
    Prometheus scraping its GPU exporters when `prometheus` is installed."""
    from .dashboard_command import run_demo

    outer = (ctx.obj or {}).get("dashboard", {})
    theme = theme if theme is not None else outer.get("theme")
    sys.exit(run_demo(_merge_globals(ctx, kwargs), theme=theme, ascii=ascii or bool(outer.get("ascii")),
                      project=_group_project(ctx, project), workdir=workdir))


@cli.command("projects")
@OUTPUT
@global_options
@click.pass_context
def projects_command(ctx: click.Context, output: str, **kwargs: Any) -> None:
    """Projects (Run:ai namespaces, or plain namespaces) with GPU quota, allocation and use."""
    from .cli_commands import run_projects

    sys.exit(run_projects(_merge_globals(ctx, kwargs), output))


@cli.command("list")
@PROJECT
@ALL
@click.option("--status", "status", metavar="STATUS", default=None,
              help="Only workloads with this status (Running, Pending, Degraded, Failed, ...).")
@click.option("--mine", is_flag=True, help="Only workloads I submitted.")
@OUTPUT
@global_options
@click.pass_context
def list_command(ctx: click.Context, project: str | None, all_projects: bool, status: str | None, mine: bool,
                 output: str, **kwargs: Any) -> None:
    """Distributed workloads of a project (default: the context's) or of all projects."""
    from .cli_commands import run_list

    sys.exit(run_list(_merge_globals(ctx, kwargs), _group_project(ctx, project), all_projects, status, mine, output))


@cli.command("get")
@workload_argument
@PROJECT
@OUTPUT
@global_options
@click.pass_context
def get_command(ctx: click.Context, workload: str, project: str | None, output: str, **kwargs: Any) -> None:
    """One workload: header, every rank with placement and GPU use, recent events.

    WORKLOAD is a name, or KIND/NAME (pytorchjob/mnist) when names clash.
    """
    from .cli_commands import run_get

    sys.exit(run_get(_merge_globals(ctx, kwargs), workload, _group_project(ctx, project), output))


@cli.command("top")
@click.argument("what", type=click.Choice(["nodes", "projects"]), default="nodes")
@OUTPUT
@global_options
@click.pass_context
def top_command(ctx: click.Context, what: str, output: str, **kwargs: Any) -> None:
    """GPU allocation and utilisation per node or per project."""
    from .cli_commands import run_top

    sys.exit(run_top(_merge_globals(ctx, kwargs), what, output))


@cli.command("logs")
@workload_argument
@PROJECT
@click.option("-f", "--follow", is_flag=True, help="Keep following: new lines, restarted and late pods.")
@click.option("--since", metavar="DURATION", default=None, help="Only lines newer than this (30s, 10m, 1h).")
@click.option("--tail", type=click.IntRange(0, None), default=None, metavar="N",
              help="Only the newest N lines of the merged history (taken before --grep/--exclude).")
@click.option("--rank", "ranks", multiple=True, metavar="R[,R...]",
              help="Only these ranks: labels (worker-3, launcher) or global rank numbers.")
@click.option("--role", "roles", multiple=True, metavar="ROLE[,ROLE...]", help="Only these roles (worker, master...).")
@click.option("--grep", metavar="REGEX", default=None, help="Only lines matching REGEX (highlighted).")
@click.option("--exclude", metavar="REGEX", default=None, help="Drop lines matching REGEX.")
@click.option("--timestamps", is_flag=True, help="Show each line's timestamp.")
@click.option("--no-color", "--no-colour", "no_color", is_flag=True, help="No colour (also: NO_COLOR set).")
@click.option("--previous", is_flag=True, help="The previous (crashed) instance of each container.")
@click.option("--first-failure", "first_failure", is_flag=True,
              help="Name the rank that failed first and print its last lines (--tail, default 20).")
@click.option("--collapse", is_flag=True, help="Show identical lines of several ranks once, as 'xN ranks'.")
@click.option("--max-streams", type=click.IntRange(1, 100_000), default=256, show_default=True,
              help="At most this many log streams open at once.")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="Output format (json: one object per line).")
@global_options
@click.pass_context
def logs_command(ctx: click.Context, workload: str, project: str | None, **kw: Any) -> None:
    """Merged logs of every rank of WORKLOAD, in time order, each line prefixed with its rank.

    WORKLOAD is a name, or KIND/NAME (pytorchjob/mnist) when names clash.
    """
    from .logs_command import run_logs

    opts = _merge_globals(ctx, kw)
    sys.exit(run_logs(opts, workload, _group_project(ctx, project), **kw))


@cli.command("shell")
@workload_argument
@PROJECT
@click.option("--rank", "rank", metavar="R", default=None, help="This rank (worker-2, or a rank number).")
@click.option("--pod", "pod", metavar="POD", default=None, help="This pod of the workload.")
@click.option("-c", "--container", metavar="NAME", default=None, help="This container (default: the main one).")
@click.option("--wait", is_flag=True, help="If the pod is not running yet, wait for it without asking.")
@global_options
@click.pass_context
def shell_cmd(ctx: click.Context, workload: str, project: str | None, rank: str | None, pod: str | None,
              container: str | None, wait: bool, **kwargs: Any) -> None:
    """A shell in the lead pod of WORKLOAD (MPI launcher, PyTorch master, TF chief), or another rank's.

    Prints the world size, the hostfile or master address and ready-to-paste horovodrun / mpirun /
    torchrun lines first. Commands are recorded in ~/.ranks_history in the pod (see `ranks convert
    --from-history`). The exit status is the shell's.
    """
    from .shell_command import run_shell

    if rank and pod:
        raise click.UsageError("--rank and --pod cannot be used together")
    sys.exit(run_shell(_merge_globals(ctx, kwargs), workload, _group_project(ctx, project), rank=rank, pod=pod,
                       container=container, wait=wait))


@cli.command("exec", context_settings={"ignore_unknown_options": True})
@workload_argument
@PROJECT
@click.option("--all", "all_ranks", is_flag=True, help="Every rank.")
@click.option("--rank", "ranks", multiple=True, metavar="R[,R...]", help="These ranks (labels or rank numbers).")
@click.option("-c", "--container", metavar="NAME", default=None, help="This container (default: the main one).")
@click.option("-v", "--verbose", is_flag=True, help="Print every rank's exit status, also when all succeeded.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@global_options
@click.pass_context
def exec_cmd(ctx: click.Context, workload: str, project: str | None, all_ranks: bool, ranks: tuple[str, ...],
             container: str | None, verbose: bool, command: tuple[str, ...], **kwargs: Any) -> None:
    """Run a command on several ranks of WORKLOAD at once: ranks exec WORKLOAD --all -- CMD...

    Output lines are prefixed with the rank. When a rank fails, every rank's exit status is
    printed at the end (always with -v) and the exit status is 1.
    """
    from .shell_command import run_exec

    sys.exit(run_exec(_merge_globals(ctx, kwargs), workload, _group_project(ctx, project), all_ranks=all_ranks,
                      ranks=ranks, container=container, command=command, verbose=verbose))


@cli.command("sim")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port on 127.0.0.1 (0 picks a free one).")
@click.option("--kubeconfig", "kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="Where to write the kubeconfig (default: a temporary directory).")
@click.option("--scenario", type=click.Choice(["empty", "demo", "scale"]), default="empty",
              show_default=True, help="What the cluster contains at start.")
@click.option("--nodes", type=click.IntRange(0, 100_000), default=0, help="Add N GPU nodes.")
@click.option("--gpus-per-node", type=click.IntRange(0, 64), default=8, show_default=True)
@click.option("--pods", type=click.IntRange(0, 1_000_000), default=20_000, show_default=True,
              help="Pods in the scale scenario.")
@click.option("--churn", type=click.FloatRange(0, 100_000), default=0.0,
              help="Pod status changes per second (scale benchmarks).")
@click.option("--tls/--no-tls", default=True, show_default=True, help="Serve HTTPS with a self-signed CA.")
def sim_command(port: int, kubeconfig: str | None, scenario: str, nodes: int, gpus_per_node: int,
                pods: int, churn: float, tls: bool) -> None:
    """Run simcluster, a local cluster for trying ranks and for tests.

    Prints one line `ready: kubeconfig=PATH server=URL` once it serves, and runs until
    interrupted. Real use is against a real cluster's kubeconfig.
    """
    from .sim_command import run_sim

    sys.exit(run_sim(port=port, kubeconfig=kubeconfig, scenario=scenario, nodes=nodes,
                     gpus_per_node=gpus_per_node, pods=pods, churn=churn, tls=tls))


def main(argv: list[str] | None = None) -> None:
    try:
        rc = cli.main(args=argv, prog_name="ranks", standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except click.UsageError as exc:  # one line, not click's usage block
        path = exc.ctx.command_path if exc.ctx is not None else "ranks"
        hint = f" (see '{path} --help')"
        fail(exc.format_message() + hint, EXIT_USAGE)
    except click.ClickException as exc:
        fail(exc.format_message(), exc.exit_code)
    except click.exceptions.Abort:
        print(file=sys.stderr)
        sys.exit(130)
    except (KeyboardInterrupt, EOFError):
        sys.exit(130)
    except Exception as exc:  # never a traceback for the user
        fail(f"internal error: {type(exc).__name__}: {exc}", EXIT_USAGE - 1)


from . import cli_sessions  # noqa: E402,F401  (registers submit, delete, suspend, resume)

if __name__ == "__main__":
    from tui.cli import main as _main  # the group the command modules registered on, not __main__'s copy

    _main()
