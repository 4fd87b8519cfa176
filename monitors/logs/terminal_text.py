"""Untrusted log text made safe for a terminal: plain text plus style spans, never escape codes.

A log line is whatever a process wrote. Sent to a terminal as is, it can move the cursor, rewrite
the rank prefix of the line, set the window title, write to the clipboard (OSC 52), or hide
text. `sanitize_line()` works on the bytes of one *complete* line (so an escape sequence split
across network chunks is seen whole) and returns a `SafeText`:

- every ESC sequence is removed: CSI (`ESC [` ... final), OSC (`ESC ]` ... BEL or ST), DCS,
  SOS, PM and APC strings (to ST, or to the end of the line when unterminated), two- and
  three-byte ESC sequences and a lone ESC; C1 controls (U+0080..U+009F, including the 8-bit
  CSI/OSC/DCS introducers and what they introduce), other C0 controls, DEL and the bidi
  controls (embeddings, overrides, isolates and the LRM/RLM/ALM marks: U+202A-U+202E,
  U+2066-U+2069, U+200E, U+200F, U+061C), as `monitors.sanitize.clean()` does; the line and
  paragraph separators (NEL, U+2028, U+2029) become spaces;
- SGR colour and attribute codes (`ESC [ ... m`) are, when `sgr=True`, turned into style spans
  `(start, end, style)` whose style strings Rich understands (`"bold red on blue"`,
  `"color(208)"`, `"#ff8700"`), so a view can build a `rich.text.Text` without markup parsing;
- `\\r` as in `a\\r\\n` is dropped; text rewritten with `\\r` (progress bars) keeps what the
  terminal would finally show: the last non-empty segment;
- tabs become spaces (8-column stops); NUL is shown as `␀`; invalid UTF-8 is shown as `\\xff`;
- lines longer than `limit` bytes (1 MiB) are cut, with a visible marker.

Rich markup in a line (`[bold]`, `[link=...]`) is plain text here: nothing parses it. Render
with `SafeText.to_rich()` (a `rich.text.Text`) or as plain `text`; never build markup strings.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

MAX_LINE_BYTES = 1 << 20
Span = tuple[int, int, str]

NOT_PRINTABLE_ASCII = re.compile(rb"[^\x20-\x7e]")  # anything but printable ASCII needs the slow path
_SPECIAL = re.compile(rb"[\x00-\x1f\x7f]")  # C0 controls, ESC and DEL in the byte stream
# in decoded text: 8-bit CSI / string controls with what they introduce, other C1 controls, bidi controls
_C1 = re.compile(
    "\x9b[0-?]*[ -/]*[@-~]?|[\x90\x98\x9d\x9e\x9f][^\x9c\x07]*[\x9c\x07]?|[\x80-\x9f]|[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_C1_QUICK = re.compile("[\x80-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

_BASIC = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")
_BRIGHT = tuple(f"bright_{c}" for c in _BASIC)


@dataclass(frozen=True, slots=True)
class SafeText:
    """Display-safe text of one log line and its style spans (character offsets into `text`)."""

    text: str
    spans: tuple[Span, ...] = ()
    truncated: int = 0  # bytes not shown

    def to_rich(self, base_style: str = "") -> Any:
        """A `rich.text.Text` (imported lazily: this package uses no UI library itself)."""
        from rich.text import Text

        t = Text(self.text, style=base_style, end="")
        for start, end, style in self.spans:
            t.stylize(style, start, end)
        return t

    def to_ansi(self, extra: tuple[Span, ...] = ()) -> str:
        """The text with its spans (and `extra` ones, e.g. highlights) as ANSI SGR (`to_ansi`)."""
        return to_ansi(self, extra)


class _Style:
    __slots__ = ("bg", "bold", "dim", "fg", "italic", "reverse", "strike", "underline")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.fg = self.bg = ""
        self.bold = self.dim = self.italic = self.underline = self.reverse = self.strike = False

    def render(self) -> str:
        parts = [name for name in ("bold", "dim", "italic", "underline", "reverse", "strike") if getattr(self, name)]
        if self.fg:
            parts.append(self.fg)
        if self.bg:
            parts.append("on " + self.bg)
        return " ".join(parts)

    def apply(self, params: bytes) -> None:
        """One SGR parameter string (`1;31`, `38;5;208`, `38:2::1:2:3`, ``)."""
        try:
            codes = [int(p) if p else 0 for p in re.split(rb"[;:]", params)] if params else [0]
        except ValueError:
            return
        i = 0
        n = len(codes)
        while i < n:
            c = codes[i]
            i += 1
            if c == 0:
                self.reset()
            elif c == 1:
                self.bold = True
            elif c == 2:
                self.dim = True
            elif c == 3:
                self.italic = True
            elif c == 4:
                self.underline = True
            elif c == 7:
                self.reverse = True
            elif c == 9:
                self.strike = True
            elif c == 22:
                self.bold = self.dim = False
            elif c == 23:
                self.italic = False
            elif c == 24:
                self.underline = False
            elif c == 27:
                self.reverse = False
            elif c == 29:
                self.strike = False
            elif 30 <= c <= 37:
                self.fg = _BASIC[c - 30]
            elif c == 39:
                self.fg = ""
            elif 40 <= c <= 47:
                self.bg = _BASIC[c - 40]
            elif c == 49:
                self.bg = ""
            elif 90 <= c <= 97:
                self.fg = _BRIGHT[c - 90]
            elif 100 <= c <= 107:
                self.bg = _BRIGHT[c - 100]
            elif c in (38, 48):
                colour = ""
                if i < n and codes[i] == 5 and i + 1 < n:
                    if 0 <= codes[i + 1] <= 255:
                        colour = f"color({codes[i + 1]})"
                    i += 2
                elif i < n and codes[i] == 2:
                    # 38;2;R;G;B, or the ITU form 38:2:<colour space>:R:G:B
                    skip = 1 if b":" in params and n - i >= 5 else 0
                    rgb = codes[i + 1 + skip:i + 4 + skip]
                    if len(rgb) == 3 and all(0 <= v <= 255 for v in rgb):
                        colour = "#{:02x}{:02x}{:02x}".format(*rgb)
                    i += 4 + skip
                else:
                    i = n  # malformed: ignore the rest
                if colour:
                    if c == 38:
                        self.fg = colour
                    else:
                        self.bg = colour
            # anything else (blink, fonts, conceal, overline, ...) is ignored


def _decode(raw: bytes) -> str:
    text = raw.decode("utf-8", "backslashreplace")
    if _C1_QUICK.search(text):
        if "\x85" in text or "\u2028" in text or "\u2029" in text:  # (line separators: one line stays one)
            text = text.replace("\x85", " ").replace("\u2028", " ").replace("\u2029", " ")
        text = _C1.sub("", text)
    return text


def _truncation_marker(cut: int) -> str:
    return f" …[{cut:,} more bytes not shown]"


def sanitize_line(raw: bytes, *, sgr: bool = True, limit: int = MAX_LINE_BYTES) -> SafeText:
    """Make one complete log line (bytes, without its newline) safe to display."""
    truncated = 0
    if len(raw) > limit:
        truncated = len(raw) - limit
        raw = raw[:limit]
    if NOT_PRINTABLE_ASCII.search(raw) is None:  # printable ASCII: the common case
        text = raw.decode("ascii")
        if truncated:
            marker = _truncation_marker(truncated)
            return SafeText(text + marker, ((len(text), len(text) + len(marker), "dim"),), truncated)
        return SafeText(text)
    if b"\r" in raw:
        raw = raw.rstrip(b"\r")
        if b"\r" in raw:
            segments = [s for s in raw.split(b"\r") if s.strip()]
            raw = segments[-1] if segments else b""
    out: list[str] = []
    pos = 0
    spans: list[Span] = []
    style = _Style()
    cur = ""
    span_start = 0
    i = 0
    n = len(raw)
    search = _SPECIAL.search
    while i < n:
        m = search(raw, i)
        j = m.start() if m is not None else n
        if j > i:
            piece = _decode(raw[i:j])
            out.append(piece)
            pos += len(piece)
        if m is None:
            break
        b = raw[j]
        if b == 0x1B:
            i, params = _skip_escape(raw, j)
            if params is not None and sgr:
                style.apply(params)
                new = style.render()
                if new != cur:
                    if cur and pos > span_start:
                        if spans and spans[-1][1] == span_start and spans[-1][2] == cur:
                            spans[-1] = (spans[-1][0], pos, cur)
                        else:
                            spans.append((span_start, pos, cur))
                    cur = new
                    span_start = pos
            continue
        if b == 0x00:
            out.append("␀")
            pos += 1
        elif b == 0x09:
            pad = 8 - pos % 8
            out.append(" " * pad)
            pos += pad
        # other C0 controls and DEL are dropped
        i = j + 1
    if cur and pos > span_start:
        if spans and spans[-1][1] == span_start and spans[-1][2] == cur:
            spans[-1] = (spans[-1][0], pos, cur)
        else:
            spans.append((span_start, pos, cur))
    text = "".join(out)
    if truncated:
        marker = _truncation_marker(truncated)
        spans.append((len(text), len(text) + len(marker), "dim"))
        text += marker
    return SafeText(text, tuple(spans), truncated)


def _skip_escape(raw: bytes, j: int) -> tuple[int, bytes | None]:
    """Skip the escape sequence starting at `raw[j]` (ESC): (index after it, SGR params or None)."""
    n = len(raw)
    if j + 1 >= n:
        return n, None  # a lone ESC at the end of the line
    c = raw[j + 1]
    if c == 0x5B:  # CSI: parameters 0x30-0x3F, intermediates 0x20-0x2F, final 0x40-0x7E
        k = j + 2
        while k < n and 0x30 <= raw[k] <= 0x3F:
            k += 1
        p_end = k
        while k < n and 0x20 <= raw[k] <= 0x2F:
            k += 1
        if k < n and 0x40 <= raw[k] <= 0x7E:
            params = raw[j + 2:p_end]
            if raw[k] == 0x6D and p_end == k and params[:1] not in (b"<", b"=", b">", b"?"):
                return k + 1, params
            return k + 1, None
        return k, None  # cut short or malformed: drop what was read, look at the rest normally
    if c == 0x5D:  # OSC ... BEL or ST; unterminated: to the end of the line
        k = j + 2
        while k < n:
            b = raw[k]
            if b == 0x07:
                return k + 1, None
            if b == 0x1B and k + 1 < n and raw[k + 1] == 0x5C:
                return k + 2, None
            k += 1
        return n, None
    if c in (0x50, 0x58, 0x5E, 0x5F):  # DCS, SOS, PM, APC ... ST
        end = raw.find(b"\x1b\\", j + 2)
        return (n, None) if end < 0 else (end + 2, None)
    k = j + 1
    while k < n and 0x20 <= raw[k] <= 0x2F:  # intermediates (ESC ( B, ESC # 8, ...)
        k += 1
    if k < n and 0x30 <= raw[k] <= 0x7E:
        return k + 1, None
    return k, None  # a lone ESC (followed by a control or non-ASCII byte)


# -- styles back to ANSI, for the CLI ----------------------------------------------------------------

_ATTR_SGR = {"bold": "1", "dim": "2", "italic": "3", "underline": "4", "reverse": "7", "strike": "9"}


def _colour_sgr(name: str, background: bool) -> str:
    if name in _BASIC:
        return str((40 if background else 30) + _BASIC.index(name))
    if name in _BRIGHT:
        return str((100 if background else 90) + _BRIGHT.index(name))
    if name.startswith("color(") and name.endswith(")"):
        return f"{48 if background else 38};5;{int(name[6:-1])}"
    if name.startswith("#") and len(name) == 7:
        r, g, b = (int(name[k:k + 2], 16) for k in (1, 3, 5))
        return f"{48 if background else 38};2;{r};{g};{b}"
    return ""


@lru_cache(maxsize=1024)
def style_to_sgr(style: str) -> str:
    """The SGR sequence for a style string this module produced (or a simple Rich-like one)."""
    codes = []
    words = style.split()
    i = 0
    while i < len(words):
        w = words[i]
        if w == "on" and i + 1 < len(words):
            code = _colour_sgr(words[i + 1], True)
            i += 2
        else:
            code = _ATTR_SGR.get(w) or _colour_sgr(w, False)
            i += 1
        if code:
            codes.append(code)
    return f"\x1b[{';'.join(codes)}m" if codes else ""


def to_ansi(safe: SafeText, extra: tuple[Span, ...] = ()) -> str:
    """`safe` with its spans (and `extra` spans, e.g. highlights, applied on top) as ANSI SGR."""
    spans = safe.spans + extra
    if not spans:
        return safe.text
    text = safe.text
    # a style per boundary: walk the boundaries and combine the spans covering each piece
    cuts = sorted({0, len(text), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    out = []
    for a, b in itertools.pairwise(cuts):
        if a >= b:
            continue
        styles = [st for s, e, st in spans if s <= a and e >= b]
        piece = text[a:b]
        if styles:
            sgr = style_to_sgr(" ".join(styles))
            out.append(f"{sgr}{piece}\x1b[0m" if sgr else piece)
        else:
            out.append(piece)
    return "".join(out)
