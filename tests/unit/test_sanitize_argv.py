"""What the user typed, and what the cluster says, never acts on the terminal (issue #17, item 12):
argv echoed in errors is shown with visible escapes, bidi controls are stripped from names, labels
and events as from log lines, durations are ASCII Go durations, and a failing exec credential
plugin is one line (exit 3)."""

from __future__ import annotations

import logging
import time

import pytest

from monitors.connection import ExitCode, _client_errors, _credential_failure
from monitors.model_views import ConditionView, WorkloadView
from monitors.names import LookupProblem, project_problem, workload_problem
from monitors.records import EventRec
from monitors.sanitize import clean, shown
from tui.cli.errors import error, fail
from tui.cli.logs import parse_duration
from tui.cli.options import parse_request_timeout
from tui.cli.printers import print_get, print_workloads

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e",
        "\u200f", "\u061c"]
HOSTILE = "a\x1b]0;title\x07b\x1b[2J\nc\u202ed\u2066e\u2069\r\x9b31m"


@pytest.mark.parametrize("ch", BIDI)
def test_clean_strips_every_bidi_control(ch: str) -> None:
    assert clean(f"evil{ch}gnp.exe") == "evilgnp.exe"
    assert clean(f"x{ch}y", single_line=False, limit=None) == "xy"


def test_clean_keeps_right_to_left_text() -> None:
    """Arabic and Hebrew letters are text, not controls."""
    assert clean("שלום مرحبا") == "שלום مرحبا"


def test_shown_makes_every_control_visible() -> None:
    s = shown(HOSTILE)
    assert s.startswith('"') and s.endswith('"')
    assert "\x1b" not in s and "\n" not in s and "\r" not in s and "\x9b" not in s
    assert not any(ch in s for ch in BIDI)
    assert r"\x1b]0;title\x07" in s and r"\n" in s and r"\u202e" in s and r"\x9b" in s
    assert shown("team-a") == '"team-a"'
    assert shown("é") == '"é"'
    assert shown("x" * 100, limit=10) == '"' + "x" * 10 + '…"'


def test_error_and_fail_print_one_clean_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert error(f"workload {HOSTILE} not found", ExitCode.NOT_FOUND) == ExitCode.NOT_FOUND
    with pytest.raises(SystemExit) as exc:
        fail(f"context {HOSTILE}", ExitCode.NO_CONFIG)
    assert exc.value.code == ExitCode.NO_CONFIG
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2 and all(ln.startswith("ranks: error: ") for ln in lines), err
    assert "\x1b" not in err and "\r" not in err and "\x9b" not in err
    assert not any(ch in err for ch in BIDI)
    assert "ab" in lines[0] and "title" not in lines[0]  # the OSC is gone, the visible text kept


def test_names_typed_by_the_user_are_echoed_visibly() -> None:
    for problem in (workload_problem("a\x1b]0;x\x07b"), workload_problem("a\u202eb"), project_problem("a\nb"),
                    project_problem("t\u2066x")):
        assert problem is not None
        assert "\x1b" not in problem and "\n" not in problem and not any(ch in problem for ch in BIDI), problem


def test_a_workload_not_found_echoes_the_name_visibly() -> None:
    from sessions.locate import pick_workload

    with pytest.raises(LookupProblem) as exc:
        pick_workload([], "pytorchjob/a\x1b]0;x\x07b\u202e")
    assert exc.value.code == ExitCode.NOT_FOUND
    assert "\x1b" not in exc.value.message and "\u202e" not in exc.value.message
    assert r"\x1b]0;x\x07b\u202e" in exc.value.message


@pytest.mark.parametrize("text", ["", " ", "٣m", "３m", "1٣s", "m", "3", "1m\x1b[2J", "1mx", "-1m"])
def test_since_is_an_ascii_go_duration(text: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_duration(text)
    message = str(exc.value)
    assert "is not a duration" in message and "\x1b" not in message


@pytest.mark.parametrize(("text", "seconds"), [("3m", 180), ("1h30m", 5400), ("1.5s", 1.5), ("250ms", 0.25)])
def test_since_reads_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "٣", "٣s", "１s", "1s\x1b]0;x\x07"])
def test_request_timeout_is_ascii(text: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_request_timeout(text)
    assert "\x1b" not in str(exc.value)


def test_request_timeout_still_reads_numbers_and_durations() -> None:
    assert parse_request_timeout("30") == 30.0
    assert parse_request_timeout("1m30s") == 90.0
    assert parse_request_timeout("0") == 0.0


def test_the_clients_logged_errors_are_kept_off_the_terminal(capfd: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = []  # as in the ranks process: nothing configured, so logging.error would print
    try:
        with _client_errors() as logged:
            logging.error("exec: process returned 1. boom")
        assert logged == ["exec: process returned 1. boom"]
        assert root.handlers == []  # (no handler left behind, and basicConfig never ran)
    finally:
        root.handlers = saved
    assert "ERROR:root" not in capfd.readouterr().err


def test_credential_failure_is_one_clean_line() -> None:
    line = _credential_failure("exec: process returned 1. token expired\n\x1b]0;x\x07run login")
    assert line.startswith("getting credentials: the kubeconfig's exec plugin failed: process returned 1.")
    assert "\n" not in line and "\x1b" not in line and "token expired" in line
    # on a terminal the client loses the plugin's stderr and logs an AttributeError: say what happened
    assert "NoneType" not in _credential_failure("'NoneType' object has no attribute 'strip'")


SNEAKY = "\u202egnp.exe\u202c\u2066x\u2069\u200e\u200f\u061c"


def workload() -> WorkloadView:
    return WorkloadView(
        namespace="default", name="bidi", project="default", kind="PyTorchJob", framework="pytorch",
        status="Pending", reason=f"Unschedulable{SNEAKY}", interactive=False, ranks_ready=0, ranks_total=1,
        gpus_requested=1, gpus_allocated=0, gpu_util=None, created=time.time() - 60, user=f"mallory{SNEAKY}",
        command=f"python train{SNEAKY}.py", labels=(("ranks/user", f"mallory{SNEAKY}"),), ranks=(),
        first_failure=None, conditions=(ConditionView("Created", "True", f"Odd{SNEAKY}", "", None),))


def event() -> EventRec:
    return EventRec(namespace="default", name="bidi.1", kind="PyTorchJob", object_name="bidi", object_uid="",
                    type="Warning", reason=f"Odd{SNEAKY}", message=f"evil{SNEAKY}\x1b]52;c;cHduZWQ=\x07", count=1,
                    last=time.time())


def test_list_wide_and_get_strip_bidi_controls(capsys: pytest.CaptureFixture[str]) -> None:
    w = workload()
    print_workloads([w], "wide", show_project=False)
    print_get(w, [event()], "wide", "")
    out = capsys.readouterr().out
    assert not any(ch in out for ch in BIDI), out
    assert "\x1b" not in out
    assert "mallorygnp.exe" in out and "traingnp.exe" in out and "Oddgnp.exe" in out and "evilgnp.exe" in out


def test_the_dashboards_detail_view_strips_bidi_controls() -> None:
    from themes import ColourMode, load_themes
    from themes.glyphs import glyphs_for
    from tui.cells import Look
    from tui.screens.workload import event_lines, header_text

    look = Look(load_themes(None).get("dark", ColourMode.TRUECOLOR), glyphs_for(False))
    text = header_text(look, workload(), time.time()).plain + event_lines(look, (event(),), time.time()).plain
    assert not any(ch in text for ch in BIDI), text
    assert "\x1b" not in text and "traingnp.exe" in text and "evilgnp.exe" in text
