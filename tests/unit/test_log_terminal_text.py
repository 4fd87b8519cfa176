"""Untrusted log text: escape sequences, controls, invalid UTF-8, markup, long lines."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from monitors.logs.terminal_text import MAX_LINE_BYTES, sanitize_line, style_to_sgr, to_ansi

ESC = "\x1b"


@pytest.mark.parametrize(("raw", "text"), [
    (b"plain ascii", "plain ascii"),
    (b"a\x1b[2J\x1b[Hb", "ab"),  # clear screen, cursor home
    (b"a\x1b[1A\x1b[2Kb", "ab"),  # cursor up, erase line: could rewrite the previous line
    (b"a\x1b]0;window title\x07b", "ab"),  # OSC terminated by BEL
    (b"a\x1b]52;c;ZXZpbA==\x1b\\b", "ab"),  # OSC 52 clipboard write, terminated by ST
    (b"a\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),  # hyperlink
    (b"a\x1b]0;unterminated title", "a"),  # unterminated OSC: to the end of the line
    (b"a\x1bPq#0;2;0;0;0\x1b\\b", "ab"),  # DCS (sixel)
    (b"a\x1b_apc payload\x1b\\b", "ab"),  # APC
    (b"a\x1b(0b", "ab"),  # charset switch
    (b"a\x1b7\x1b8b", "ab"),  # save/restore cursor
    (b"abc\x1b", "abc"),  # lone ESC at the end (a sequence cut by the line end)
    (b"abc\x1b[31", "abc"),  # CSI cut short
    (b"a\xc2\x9b2Jb", "ab"),  # 8-bit CSI (U+009B) in UTF-8
    (b"a\xc2\x9d0;t\xc2\x9cb", "ab"),  # 8-bit OSC ... ST
    (b"a\xc2\x85b", "a b"),  # NEL: a line break, shown as a space (one line stays one)
    (b"a\xc2\x84\xc2\x86b", "ab"),  # other C1 controls
    (b"a\x07\x08\x0b\x0c\x7fb", "ab"),  # BEL, BS, VT, FF, DEL
    (b"a\x00b", "a␀b"),  # NUL is shown
    (b"a\xffb\xfe", "a\\xffb\\xfe"),  # invalid UTF-8 is shown escaped
    ("héllo wörld ✓ 日本".encode(), "héllo wörld ✓ 日本"),
    (b"line\r", "line"),  # CRLF ending
    (b"10%\r50%\r100%", "100%"),  # a progress bar: what the terminal shows last
    (b"fake\r[worker-0] spoof", "[worker-0] spoof"),  # cannot go back over the prefix
    (b"x\ty", "x       y"),
    (b"[bold red]markup[/] [link=http://x]y[/link]", "[bold red]markup[/] [link=http://x]y[/link]"),
    ("a\u202eb\u2066c".encode(), "abc"),  # bidi overrides
])
def test_sanitize_strips_and_shows(raw: bytes, text: str) -> None:
    out = sanitize_line(raw)
    assert out.text == text
    assert ESC not in out.text and "\r" not in out.text
    assert not re.search("[\x00-\x08\x0a-\x1f\x7f-\x9f]", out.text)


def test_sgr_becomes_spans_not_codes() -> None:
    raw = b"\x1b[1;31mERROR\x1b[0m: \x1b[38;5;208mwarm\x1b[39m \x1b[48;2;1;2;3mbg\x1b[m end"
    out = sanitize_line(raw)
    assert out.text == "ERROR: warm bg end"
    assert out.spans == ((0, 5, "bold red"), (7, 11, "color(208)"), (12, 14, "on #010203"))
    text = out.to_rich()
    assert text.plain == out.text
    console = Console(force_terminal=True, color_system="truecolor", width=200)
    with console.capture() as cap:
        console.print(text)
    assert "ERROR" in cap.get()
    ansi = to_ansi(out)
    # only our own SGR codes reach the terminal
    assert re.sub(r"\x1b\[[0-9;]*m", "", ansi) == out.text


def test_sgr_disabled_keeps_no_style() -> None:
    out = sanitize_line(b"\x1b[31mred\x1b[0m", sgr=False)
    assert (out.text, out.spans) == ("red", ())


def test_private_and_non_sgr_csi_ending_in_m_are_dropped() -> None:
    out = sanitize_line(b"\x1b[?1049m\x1b[>4;2mtext")
    assert (out.text, out.spans) == ("text", ())


def test_long_line_truncated_with_marker() -> None:
    raw = b"x" * (MAX_LINE_BYTES + 10)
    out = sanitize_line(raw)
    assert out.truncated == 10
    assert out.text.startswith("x" * 1000)
    assert out.text.endswith("…[10 more bytes not shown]")
    assert len(out.text) < MAX_LINE_BYTES + 100
    small = sanitize_line(b"\x1b[31m" + b"y" * 50, limit=20)
    assert small.truncated == 35 and small.text.startswith("y" * 15)


def test_style_round_trip_to_sgr() -> None:
    assert style_to_sgr("bold red on blue") == "\x1b[1;31;44m"
    assert style_to_sgr("color(208) on #010203") == "\x1b[38;5;208;48;2;1;2;3m"
    assert style_to_sgr("") == ""
