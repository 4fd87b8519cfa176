"""Widgets of the ranks dashboard."""
