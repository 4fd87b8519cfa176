"""Cluster-supplied text is untrusted: strip control and escape sequences before showing it.

`clean()` keeps the visible text of names, labels, events and messages and removes every ESC
sequence (CSI, OSC, DCS, SOS/PM/APC, lone ESC), C0 and C1 controls, DEL and the bidirectional
controls (embeddings, overrides, isolates and the LRM/RLM/ALM marks: U+202A-U+202E, U+2066-U+2069,
U+200E, U+200F, U+061C), which would reorder what the terminal shows. Newlines, tabs and the
Unicode line and paragraph separators (NEL, U+2028, U+2029: a terminal may start a new line at
them) become spaces (one line per cell). The result is plain text: render it with
`rich.text.Text`, never as markup.

Machine output keeps the text as the cluster gave it, escaped rather than stripped: `json_safe`
(after orjson, which writes U+2028 or U+202E as they are) and `yaml_dump` (PyYAML prints them
unescaped with `allow_unicode`) write each control, separator and bidi control as a `\\uXXXX`
escape, so a terminal showing `-o json` or `-o yaml` never acts on one.
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
_SPACE = re.compile("[\t\n\x85\u2028\u2029]")
_BREAKS = re.compile("[\x85\u2028\u2029]")  # (multi-line text: a line break, as they mean)
# what machine output escapes: C0 and C1 controls, DEL, the line and paragraph separators, bidi controls
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")  # (orjson escapes C0)


def clean(text: object, *, single_line: bool = True, limit: int | None = 4096) -> str:
    s = "" if text is None else str(text)
    if s.isascii() and s.isprintable():  # (names, UUIDs: nothing to strip, told at C speed)
        return s if limit is None or len(s) <= limit else s[: limit - 1] + "…"
    if "\x1b" in s or any("\x80" <= ch <= "\x9f" for ch in s):
        s = _SEQ.sub("", s)
    if single_line:
        s = _SPACE.sub(" ", s)
    elif "\x85" in s or "\u2028" in s or "\u2029" in s:
        s = _BREAKS.sub("\n", s)
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


def _escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def json_safe(text: str) -> str:
    """Serialised JSON (from orjson, which escapes C0 controls in strings itself) with every control,
    line separator and bidi control it leaves as it is (C1, DEL, U+2028/U+2029, U+202E...) written
    as a `\\uXXXX` escape: the same JSON once read, and
    nothing in it a terminal acts on (they only occur inside strings, where the escape is valid)."""
    if text.isascii() and "\x7f" not in text:  # (the common case, at C speed: 30 MB of GPUs in 20 ms)
        return text
    return _JSON_UNSAFE.sub(_escape, text) if _JSON_UNSAFE.search(text) else text


def yaml_dump(data: object, *, sort_keys: bool = True) -> str:
    """`yaml.safe_dump(data, allow_unicode=True, sort_keys=sort_keys)`, except that a string holding a
    control, a line or paragraph separator or a bidi control is written double-quoted with each of
    them escaped (`"\\u202E"`): the same data once read, nothing in it a terminal acts on."""
    import yaml

    return yaml.dump(data, Dumper=_safe_dumper(), allow_unicode=True, sort_keys=sort_keys)


_DUMPER: list[type] = []


def _safe_dumper() -> type:
    if _DUMPER:
        return _DUMPER[0]
    import yaml

    class SafeTextDumper(yaml.SafeDumper):
        def analyze_scalar(self, scalar: str) -> yaml.emitter.ScalarAnalysis:
            analysis = super().analyze_scalar(scalar)
            if _UNSAFE.search(scalar):  # double quotes: the only style with escapes
                analysis.allow_flow_plain = analysis.allow_block_plain = False
                analysis.allow_single_quoted = analysis.allow_block = False
            return analysis

        def write_double_quoted(self, text: str, split: bool = True) -> None:
            if not _UNSAFE.search(text):
                super().write_double_quoted(text, split)
                return
            keep, self.allow_unicode = self.allow_unicode, False  # (non-ASCII escaped in this string alone)
            try:
                super().write_double_quoted(text, split)
            finally:
                self.allow_unicode = keep

    _DUMPER.append(SafeTextDumper)
    return SafeTextDumper
