"""The one-shot commands' tables: kubectl's three-space gaps, two when that makes a table fit the
terminal (SSH users on login nodes have 80 columns); piped output keeps its columns for scripts."""

from __future__ import annotations

import pytest

from tui.cli.printers import table

HEADERS = ("PROJECT", "NAME", "KIND", "STATUS", "RANKS", "GPUS", "GPU UTIL", "AGE")
ROWS = [("research", "mnist-quick", "PyTorchJob", "Succeeded", "0/2", "0/2", "-", "16s"),
        ("team-a", "hvd-interactive", "MPIJob", "Running", "3/3", "2/2", "0%", "16s")]


def widths(text: str) -> list[int]:
    return [len(line) for line in text.splitlines()]


def test_a_table_that_would_wrap_at_80_columns_closes_its_gaps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = table(HEADERS, ROWS)
    assert max(widths(out)) <= 80, out
    assert out.splitlines()[0].split("  ")[:2] == ["PROJECT", " NAME"]  # two spaces after the widest cell
    assert out.splitlines()[1].split() == list(ROWS[0])


def test_a_table_that_fits_keeps_kubectl_s_gaps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    out = table(HEADERS, ROWS)
    assert out.splitlines()[1].startswith("research   mnist-quick       PyTorchJob   "), out
    assert max(widths(out)) == 83


def test_piped_output_keeps_its_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # (pytest's stdout is not a terminal)
    assert max(widths(table(HEADERS, ROWS))) == 83
