"""Line and paragraph separators (U+2028, U+2029, NEL) and bidi controls in cluster text (issue #25,
items 6 and 9): one pod line or cell stays one line in every output format, and no format hands
the terminal a bidi control: the tables and `get` (text), `-o json` and `-o yaml` (escaped there,
so the data read back is what the cluster holds), and the dashboard's detail view and log view."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest
import yaml

from monitors.logs.terminal_text import sanitize_line
from tests.unit.test_sanitize_argv import event, workload
from tui.cli.printers import emit_structured, print_get, print_workloads

SEPARATORS = "\u2028\u2029\x85"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def test_tables_and_get_keep_one_line_per_cell(capsys: pytest.CaptureFixture[str]) -> None:
    w = workload()
    w = dataclasses.replace(w, reason="Unschedulable\u2028second line\u2029third\x85fourth")
    print_workloads([w], "wide", show_project=False)
    table = capsys.readouterr().out
    assert len(table.splitlines()) == 2, table  # the header and one row
    print_get(w, [event()], "wide", "")
    out = capsys.readouterr().out
    assert not any(ch in out for ch in SEPARATORS + BIDI), [c for c in out if c in SEPARATORS + BIDI]
    assert "Unschedulable second line third fourth" in out


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_json_and_yaml_escape_separators_and_bidi_controls(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    doc = {"message": "evil\u202egnp.exe\u2028next\x85line\u2066x\u2069", "plain": "Zürich", "n": 3}
    emit_structured(doc, fmt)
    out = capsys.readouterr().out
    assert not any(ch in out for ch in SEPARATORS + BIDI), out
    assert (json.loads(out) if fmt == "json" else yaml.safe_load(out)) == doc  # the cluster's text, read back
    assert "Zürich" in out  # (other text as it is)


def test_the_dashboards_detail_and_log_views_keep_one_line() -> None:
    from themes import ColourMode, load_themes
    from themes.glyphs import glyphs_for
    from tui.cells import Look
    from tui.screens.workload import event_lines

    look = Look(load_themes(None).get("dark", ColourMode.TRUECOLOR), glyphs_for(False))
    e = event()
    e = dataclasses.replace(e, message="first\u2028second\u2029third\x85fourth")
    text = event_lines(look, (e,), time.time()).plain
    assert not any(ch in text for ch in SEPARATORS) and "first second third fourth" in text, text
    line = sanitize_line("a\u2028b\u2029c\x85d \u202eX".encode())
    assert line.text == "a b c d X"
