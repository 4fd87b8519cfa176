"""Each `ranks` subcommand says once, where it is defined, whether it only reads the cluster
(`tui.cli.options.command(..., reads_only=...)`); the SSH door serves exactly those
(`read_only_commands`, handed to the server by `ranks serve`). A subcommand defined without saying
it fails here, so a new read command cannot be left out of the door, nor an action let in."""

from __future__ import annotations

from tui.cli.group import SUBCOMMANDS, read_only_commands, subcommand
from tui.cli.options import RanksCommand


def test_every_subcommand_says_whether_it_only_reads() -> None:
    undeclared = [name for name in SUBCOMMANDS if not isinstance(subcommand(name), RanksCommand)]
    assert not undeclared, f"define these with tui.cli.options.command(NAME, reads_only=...): {undeclared}"
    assert all(isinstance(getattr(subcommand(n), "reads_only", None), bool) for n in SUBCOMMANDS)


def test_the_read_only_commands_are_the_reading_ones() -> None:
    served = read_only_commands()
    assert served == ("get", "gpus", "idle", "list", "logs", "projects", "stacks", "top", "why")
    # nothing that changes the cluster or starts something
    for name in ("submit", "shell", "exec", "convert", "delete", "suspend", "resume", "demo", "sim", "serve"):
        assert name not in served
