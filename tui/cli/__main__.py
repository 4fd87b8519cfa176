"""`python -m tui.cli`: the `ranks` command line."""

from tui.cli.group import main

main()
