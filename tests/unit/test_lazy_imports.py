"""`ranks shell` imports what it uses and nothing else (#16): the subcommands are loaded when
resolved (tui.cli.group.LazyGroup), so neither `ranks shell --help` nor a shell that starts
loads the dashboard (Textual), Prometheus clients, diagnostics, the official Kubernetes client or
the other commands. Each check runs in a fresh interpreter and reads its `sys.modules`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

from tui.cli.group import SUBCOMMANDS, cli

ROOT = Path(__file__).resolve().parents[2]

# never on the shell's path (a module, or a package and everything in it)
HEAVY = ("textual", "rich", "prometheus_api_client", "kubernetes", "pydantic", "pandas", "numpy", "requests",
         "asyncssh", "simcluster", "tui.app", "tui.screens", "tui.widgets", "tui.settings", "tui.dashboard_actions",
         "themes", "monitors.diagnostics", "monitors.metrics", "monitors.promql", "monitors.prom_discovery",
         "monitors.gpu_feed", "monitors.dataloop", "monitors.logs", "monitors.flight_recorder", "monitors.export",
         "tui.cli.dashboard", "tui.cli.read", "tui.cli.logs", "tui.cli.serve", "tui.cli.why", "tui.cli.idle",
         "tui.cli.diagnose", "tui.cli.zygote")
# not even for the help: nothing that talks to a cluster
NOT_FOR_HELP = (*HEAVY, "aiohttp", "yaml", "asyncio", "monitors.kube", "monitors.monitor", "sessions.shell",
                "sessions.locate")

PROBE = """
import json, sys
from tui.cli.group import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("\\n--modules--", json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def modules_after(args: list[str], tmp_path: Path) -> tuple[int, set[str]]:
    """(exit code, modules imported) of `ranks ARGS` run in a new interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"), NO_COLOR="1")
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert "--modules--" in proc.stdout, proc.stderr
    found = json.loads(proc.stdout.rsplit("--modules--", 1)[1])
    return found["code"], set(found["modules"])


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules for n in names if m == n or m.startswith(n + "."))


def test_shell_help_loads_no_other_command_and_nothing_of_the_cluster(tmp_path: Path) -> None:
    code, modules = modules_after(["shell", "--help"], tmp_path)
    assert code == 0
    assert "tui.cli.sessions" in modules
    assert loaded(modules, NOT_FOR_HELP) == []


def test_a_shell_loads_only_what_it_uses(tmp_path: Path) -> None:
    # every module the shell imports is imported before the kubeconfig is read (tui.cli.sessions.run_shell):
    # a kubeconfig that does not exist stops it right after (exit 3)
    code, modules = modules_after(["shell", "mnist", "--kubeconfig", str(tmp_path / "missing")], tmp_path)
    assert code == 3
    assert {"aiohttp", "monitors.kube", "sessions.shell", "sessions.locate", "sessions.terminal"} <= modules
    assert loaded(modules, HEAVY) == []


def test_the_groups_help_loads_every_command_but_nothing_of_the_cluster(tmp_path: Path) -> None:
    code, modules = modules_after(["--help"], tmp_path)
    assert code == 0
    commands = tuple(f"tui.cli.{module}" for module, _ in SUBCOMMANDS.values())
    assert set(commands) <= modules
    assert loaded(modules, tuple(n for n in NOT_FOR_HELP if n not in commands)) == []


def test_every_command_is_listed_in_order_and_resolves_to_itself() -> None:
    ctx = click.Context(cli)
    names = cli.list_commands(ctx)
    assert names == sorted(names) == sorted(SUBCOMMANDS)
    assert names == ["convert", "debug", "delete", "demo", "exec", "get", "gpus", "idle", "list", "logs",
                     "port-forward", "projects", "resume", "serve", "shell", "sim", "stacks", "submit", "suspend",
                     "top", "why"]
    for name in names:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
    assert cli.get_command(ctx, "nosuch") is None


def test_a_commands_settings_load_no_theme_and_no_textual(tmp_path: Path) -> None:
    """`ranks get`, `why` and `logs` read the settings (thresholds, progress patterns) as the
    dashboard does: that imports neither the themes' models (pydantic classes, Textual's colours)
    nor Textual's bindings (0.1 s of every such command's start, at 100,000 pods 0.9 s in all)."""
    probe = ("import json, sys\nfrom themes import ConfigFileError\nfrom tui.settings import hang_thresholds, "
             "load_settings\nhang_thresholds(load_settings())\nprint(json.dumps(sorted(sys.modules)))")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    config = tmp_path / "config" / "ranks"
    config.mkdir(parents=True)
    env.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"))

    def modules(text: str) -> set[str]:
        (config / "config.toml").write_text(text)
        proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr
        return set(json.loads(proc.stdout))

    plain = modules("hang_after_minutes = 3\n")
    assert loaded(plain, ("themes.model", "themes.glyphs", "themes.loader", "textual")) == []
    # a keymap in the file is checked, with Textual's bindings; still no theme
    keyed = modules('hang_after_minutes = 3\n[keymap]\nlogs = "L"\n')
    assert "textual.binding" in keyed and loaded(keyed, ("themes.model", "themes.glyphs", "themes.loader")) == []
