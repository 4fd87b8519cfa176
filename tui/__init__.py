"""ranks: the Textual app, its screens and widgets, and the `ranks` command line."""
