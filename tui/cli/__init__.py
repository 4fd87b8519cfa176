"""The `ranks` command line: one module per command group, none of them the dashboard's.

- `group`: the `ranks` group (global and dashboard flags, the dashboard without a subcommand) and
  `main`, the console script's entry point;
- `read`: `projects`, `list`, `get`, `top`; `logs`: `logs`;
- `sessions`: `submit`, `shell`, `exec`, `convert`, `delete`, `suspend`, `resume`;
- `dashboard`: launching the dashboard, `demo` and `sim`;
- `options`: the flags the commands share; what they share besides: `errors` (errors and exit
  codes), `running` (the asyncio runner), `guards` (read-only refusal, confirmation), `loading`
  (the cluster listed once, project resolution, finding a workload), `printers` (tables, JSON/YAML).

What acts on the cluster is in `sessions/` and `monitors/`, shared with the dashboard (`tui.app`),
which never imports this package. A command's module is imported only when the command is
resolved (`group.SUBCOMMANDS`), and heavy imports happen inside the commands, so `ranks shell`
loads neither the dashboard nor the other commands, and `ranks --help` and completion start fast
(tests/unit/test_lazy_imports.py keeps it so).
"""

from .group import cli, main

__all__ = ["cli", "main"]
