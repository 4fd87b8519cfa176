"""The read commands' tables fitted to the terminal (SSH users on login nodes have 80 columns): a
table wider than the terminal leaves out columns in a fixed order of priority (what names a row and
its status never), says so on stderr, and `ranks get`'s events put each message on a line of its
own under the event. `-o wide` shows every column, as kubectl's wide does; piped output (no
terminal) keeps every column too, for scripts. The gaps are the two spaces `printers.table` narrows
to when a table does not fit. Prose (`ranks why`'s findings) wraps at spaces to the terminal, its
`commands` whole, each line's continuation two further in."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence

from rich.cells import cell_len

from monitors.humanize import wrap_prose
from monitors.sanitize import clean

# the rank table's columns, the first left out first: the rank's name (ROLE) and STATUS stay
RANK_DROP = ("GPU MEM", "LOSS", "LAST LOG", "STEP", "RESTARTS", "AGE", "RANK", "NODE", "GPU%", "POD")
# `ranks list`: the workload's name, its project and its status stay
WORKLOAD_DROP = ("KIND", "AGE", "GPUS", "GPU UTIL", "RANKS")
# `ranks top nodes`: the node's name and its status stay
NODE_DROP = ("GPU MODEL", "POOL", "GPU MEM", "ALLOCATED", "GPU UTIL", "GPUS")
# `ranks projects`: the project's name stays
PROJECT_DROP = ("NAMESPACE", "PENDING", "RUNNING", "GPU UTIL", "GPUS ALLOCATED", "GPU QUOTA")
GAP = 2
MESSAGE_INDENT = 4


def _widths(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    widths = [cell_len(h) for h in headers]
    for row in rows:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], cell_len(clean(c)))
    return widths


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + GAP * (len(widths) - 1)


def fit_columns(headers: Sequence[str], rows: Sequence[Sequence[str]], drop: Sequence[str],
                room: int | None) -> tuple[list[str], list[list[str]], list[str]]:
    """(headers, rows, the columns left out): the columns named in `drop` are left out, in that
    order, until the table fits `room` cells (None: no terminal, nothing is left out)."""
    keep = list(range(len(headers)))
    left_out: list[str] = []
    if room is not None and drop:
        widths = _widths(headers, rows)
        for name in drop:
            if _total([widths[i] for i in keep]) <= room:
                break
            if name in headers and (i := list(headers).index(name)) in keep:
                keep.remove(i)
                left_out.append(name)
    return [headers[i] for i in keep], [[row[i] for i in keep] for row in rows], left_out


def note_left_out(left_out: Sequence[str], room: int | None) -> None:
    """Say on stderr which columns were left out (after the table: stdout is flushed first)."""
    if left_out:
        sys.stdout.flush()
        print(f"ranks: note: {', '.join(left_out)} left out to fit {room} columns (-o wide shows every column)",
              file=sys.stderr)


def message_under(headers: Sequence[str], rows: Sequence[Sequence[str]], room: int | None) -> bool:
    """The last column (an event's message) goes under its row: the table does not fit `room`."""
    return room is not None and _total(_widths(headers, rows)) > room


def with_messages(table_text: str, messages: Sequence[str], room: int) -> str:
    """`table_text` (a header line, then a line per row) with each row's message under it, wrapped
    to `room` cells and indented."""
    lines = table_text.split("\n")
    out = lines[:1]
    width = max(20, room - MESSAGE_INDENT)
    for line, message in zip(lines[1:], messages, strict=True):
        out.append(line)
        for part in textwrap.wrap(clean(message, limit=2000), width) or [""]:
            out.append(" " * MESSAGE_INDENT + part)
    return "\n".join(out)


def wrap_words(text: str, room: int | None) -> str:
    """`text`'s lines wrapped at spaces to `room` cells (None: no terminal, as they are), each
    continuation two further in than its line; a `command` in backquotes is never cut, so that it
    runs as pasted (alone on its line when it is wider than the room)."""
    if room is None:
        return text
    out: list[str] = []
    for line in text.split("\n"):
        if cell_len(line) <= room:
            out.append(line)
            continue
        out += wrap_prose(line, room, " " * (len(line) - len(line.lstrip(" ")) + 2))
    return "\n".join(out)
