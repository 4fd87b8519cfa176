"""ranks: themes."""
