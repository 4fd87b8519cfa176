"""ranks: monitors."""
