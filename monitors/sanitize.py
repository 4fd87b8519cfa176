"""Cluster-supplied text is untrusted: strip control and escape sequences before showing it.

`clean()` keeps the visible text of names, labels, events and messages and removes every ESC
sequence (CSI, OSC, DCS, SOS/PM/APC, lone ESC), C0 and C1 controls, DEL and the bidirectional
controls (embeddings, overrides, isolates and the LRM/RLM/ALM marks: U+202A-U+202E, U+2066-U+2069,
U+200E, U+200F, U+061C), which would reorder what the terminal shows. Newlines and tabs become
spaces (one line per cell). The result is plain text: render it with `rich.text.Text`,
never as markup.
"""

from __future__ import annotations

import re

# ESC [ ... final | ESC ] ... (BEL | ESC \) | ESC P/X/^/_ ... ESC \ | ESC + one char | 8-bit C1 forms
_SEQ = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]?          # CSI (possibly cut short)
  | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)? # OSC ... BEL or ST
  | \x1b[PX^_][^\x1b]*(?:\x1b\\)?      # DCS, SOS, PM, APC ... ST
  | \x1b[ -/]*[0-~]?                   # other ESC sequences and a lone ESC
  | \x9b[0-?]*[ -/]*[@-~]?             # 8-bit CSI
  | [\x90\x98\x9d\x9e\x9f][^\x9c\x07]*[\x9c\x07]?  # 8-bit DCS/SOS/OSC/PM/APC ... ST
    """,
    re.VERBOSE,
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SPACE = re.compile(r"[\t\n]")


def clean(text: object, *, single_line: bool = True, limit: int | None = 4096) -> str:
    s = "" if text is None else str(text)
    if "\x1b" in s or any("\x80" <= ch <= "\x9f" for ch in s):
        s = _SEQ.sub("", s)
    if single_line:
        s = _SPACE.sub(" ", s)
    s = _CONTROLS.sub("", s)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    return s


def shown(value: object, *, limit: int = 80) -> str:
    """`value` as a message echoes what the user typed: quoted, each character that is not
    printable (ESC, a newline, a bidi control...) as a visible escape (`\\x1b`, `\\n`, `\\u202e`),
    at most `limit` characters. Nothing of it acts on the terminal, and nothing is hidden."""
    s = "" if value is None else str(value)
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in s[:limit])
    return f'"{text}{"…" if len(s) > limit else ""}"'
