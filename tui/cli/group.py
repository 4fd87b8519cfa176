"""The `ranks` group and `main` (installed as `ranks` and `kubectl-ranks`, so `kubectl ranks ...`
works; `python -m tui.cli` too).

The group takes the global flags (tui.cli.options; every subcommand takes them too, a later one
wins) and the dashboard's; without a subcommand it opens the dashboard. The subcommands live in
their modules (read, logs, sessions, dashboard) and are added here: they never import this module.
`main` turns every failure into one line on stderr and a documented exit code (tui.cli.common).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from monitors.connection import ExitCode

from .common import fail
from .dashboard import demo_command, run_dashboard, sim_command
from .idle import idle_command
from .logs import logs_command
from .options import GLOBAL_KEYS, dashboard_options, global_options
from .read import get_command, list_command, projects_command, top_command
from .serve import serve_command
from .sessions import (
    convert_command,
    delete_command,
    exec_cmd,
    resume_command,
    shell_cmd,
    submit_command,
    suspend_command,
)
from .why import why_command

PROJECT_COMMANDS = ("demo", "list", "get", "logs", "shell", "exec", "submit", "delete", "suspend", "resume",
                    "convert", "why", "idle")


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
        sys.exit(run_dashboard(dict(ctx.obj), theme=theme, ascii=ascii, project=project))


SUBCOMMANDS = (
    projects_command, list_command, get_command, top_command,  # read
    why_command, idle_command,  # diagnostics
    logs_command,  # logs
    submit_command, shell_cmd, exec_cmd, convert_command, delete_command, suspend_command,  # sessions
    resume_command,
    demo_command, sim_command,  # dashboard
    serve_command,  # serve
)
for subcommand in SUBCOMMANDS:
    cli.add_command(subcommand)


def main(argv: list[str] | None = None) -> None:
    try:
        rc = cli.main(args=argv, prog_name="ranks", standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except click.UsageError as exc:  # one line, not click's usage block
        path = exc.ctx.command_path if exc.ctx is not None else "ranks"
        hint = f" (see '{path} --help')"
        fail(exc.format_message() + hint, ExitCode.USAGE)
    except click.ClickException as exc:
        fail(exc.format_message(), exc.exit_code)
    except click.exceptions.Abort:
        print(file=sys.stderr)
        sys.exit(130)
    except (KeyboardInterrupt, EOFError):
        sys.exit(130)
    except Exception as exc:  # never a traceback for the user
        fail(f"internal error: {type(exc).__name__}: {exc}", ExitCode.USAGE - 1)
