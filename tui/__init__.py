"""ranks: the Textual dashboard (app, screens, widgets) and, in `tui.cli`, the `ranks` command line."""
