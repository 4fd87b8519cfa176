"""ranks: sessions."""
