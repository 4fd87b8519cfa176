"""The `ranks` group and `main` (installed as `ranks` and `kubectl-ranks`, so `kubectl ranks ...`
works; `python -m tui.cli` too).

The group takes the global flags (tui.cli.options; every subcommand takes them too, a later one
wins) and the dashboard's; without a subcommand it opens the dashboard. The subcommands live in
their modules (read, logs, sessions, dashboard...) and never import this module; they are named
here (`SUBCOMMANDS`) and each module is imported only when its command is resolved, so `ranks
shell` loads the command line it uses and none of the others (`ranks --help` and completion load
them all, for their help lines). `main` turns every failure into one line on stderr and a
documented exit code (tui.cli.errors).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from monitors.connection import ExitCode

from .errors import fail
from .options import GLOBAL_KEYS, PINNED, dashboard_options, global_options, take_global

PROJECT_COMMANDS = ("demo", "list", "get", "logs", "shell", "exec", "submit", "delete", "suspend", "resume",
                    "convert", "debug", "why", "idle", "stacks", "gpus", "port-forward")


# name -> (its module in tui.cli, the command there); `ranks --help` lists them sorted by name
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "projects": ("read", "projects_command"), "list": ("read", "list_command"),  # read
    "get": ("read", "get_command"), "top": ("read", "top_command"), "gpus": ("gpus", "gpus_command"),
    "why": ("why", "why_command"), "idle": ("idle", "idle_command"),  # diagnostics
    "stacks": ("stacks", "stacks_command"),
    "logs": ("logs", "logs_command"),  # logs
    "submit": ("sessions", "submit_command"), "shell": ("sessions", "shell_cmd"),  # sessions
    "exec": ("sessions", "exec_cmd"), "convert": ("convert", "convert_command"),
    "debug": ("convert", "debug_command"),
    "delete": ("sessions", "delete_command"), "suspend": ("sessions", "suspend_command"),
    "resume": ("sessions", "resume_command"), "port-forward": ("ports", "port_forward_command"),
    "demo": ("dashboard", "demo_command"), "sim": ("dashboard", "sim_command"),  # dashboard
    "serve": ("serve", "serve_command"),  # serve
}


def subcommand(name: str) -> click.Command:
    """The subcommand `name` of `SUBCOMMANDS` (its module imported)."""
    module, attr = SUBCOMMANDS[name]
    cmd: click.Command = getattr(importlib.import_module(f"tui.cli.{module}"), attr)
    return cmd


def read_only_commands() -> tuple[str, ...]:
    """The subcommands that only read the cluster, as each declares itself (`options.command`):
    what the SSH door serves. Imports every command's module (for `ranks serve`, once)."""
    return tuple(sorted(name for name in SUBCOMMANDS if getattr(subcommand(name), "reads_only", False)))


class LazyGroup(click.Group):
    """A group whose subcommands (`SUBCOMMANDS`) are imported when they are resolved."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *SUBCOMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in SUBCOMMANDS:
            self.add_command(subcommand(cmd_name), cmd_name)
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             invoke_without_command=True)
@click.version_option(package_name="ranks", prog_name="ranks")
@global_options
@dashboard_options
@click.pass_context
def cli(ctx: click.Context, /, theme: str | None, ascii: bool, project: str | None, **kwargs: Any) -> None:
    """ranks: distributed training workloads on Kubernetes, rank by rank.

    Without a command, opens the dashboard on the current context.
    """
    ctx.ensure_object(dict)
    for key in GLOBAL_KEYS:
        if take_global(ctx.obj, key, kwargs.get(key)):
            ctx.obj[key] = kwargs[key]
    ctx.obj.update(ctx.obj.get(PINNED) or {})  # (over the SSH door: the server's settings)
    ctx.obj["dashboard"] = {"theme": theme, "ascii": ascii, "project": project}
    sub = ctx.invoked_subcommand
    if sub is not None and sub != "demo" and (theme is not None or ascii):
        raise click.UsageError("--theme and --ascii belong to the dashboard ('ranks' or 'ranks demo')")
    if sub is not None and project and sub not in PROJECT_COMMANDS:
        raise click.UsageError(f"-p/--project does not apply to 'ranks {sub}'")
    if sub is None:
        from .dashboard import run_dashboard

        opts = {k: v for k, v in ctx.obj.items() if k != PINNED}
        sys.exit(run_dashboard(opts, theme=theme, ascii=ascii, project=project))


def main(argv: list[str] | None = None) -> None:
    from .door import apply_limits, server_settings

    try:
        door = server_settings()  # (a session of the SSH door: the server's settings, out of band)
    except ValueError as exc:
        fail(str(exc), ExitCode.NO_CONFIG)
    if door is not None:
        apply_limits(door)
    try:
        rc = cli.main(args=argv, prog_name="ranks", standalone_mode=False,
                      obj={PINNED: door.pinned} if door is not None else None)
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
