"""py-spy's dumps, parsed as data: its JSON (`py-spy dump --json`), or its text when the py-spy in
the image is too old for `--json`. Nothing in them is evaluated or unpickled; every name and path is
cluster-supplied text, passed through `monitors.sanitize.clean` (and cut short) as log lines are.

A stack is outermost frame first (`<module>`, then `main`, ...), the reverse of py-spy's order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from monitors.sanitize import clean

NAME_LIMIT = 200  # a function's name, at most
FILE_LIMIT = 300  # a file's path, at most
MAX_FRAMES = 512  # frames kept of one thread (the outermost: where the tree's common prefix is)
MAX_THREADS = 256


class DumpError(ValueError):
    """What came back is no dump py-spy writes."""


@dataclass(frozen=True, slots=True)
class Frame:
    name: str
    file: str  # py-spy's short file name (the package part of the path), or a native library
    line: int | None  # None for native frames

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file


@dataclass(frozen=True, slots=True)
class ThreadStack:
    thread: str  # its name (MainThread...), or its id when it has none
    frames: tuple[Frame, ...]  # outermost first
    active: bool = False
    native_id: int | None = None

    @property
    def main(self) -> bool:
        return self.thread == "MainThread"


def _frame(raw: Any) -> Frame | None:
    if not isinstance(raw, dict):
        return None
    name = raw.get("name")
    file = raw.get("short_filename") or raw.get("filename")
    line = raw.get("line")
    if not isinstance(name, str):
        return None
    return Frame(clean(name, limit=NAME_LIMIT), clean(file if isinstance(file, str) else "?", limit=FILE_LIMIT),
                 line if isinstance(line, int) and not isinstance(line, bool) and 0 < line < 1 << 31 else None)


def parse_json(data: bytes) -> list[ThreadStack]:
    """`py-spy dump --json`: a list of threads, each with `thread_name`, `active`, `frames` (innermost
    first, each `name`, `short_filename`, `line`). Fields of another type are left out, never trusted."""
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DumpError(f"not py-spy's JSON ({exc.msg})") from None
    if not isinstance(raw, list):
        raise DumpError("not py-spy's JSON (no list of threads)")
    out: list[ThreadStack] = []
    for t in raw[:MAX_THREADS]:
        if not isinstance(t, dict) or not isinstance(t.get("frames"), list):
            continue
        frames = [f for f in map(_frame, t["frames"]) if f is not None][::-1][:MAX_FRAMES]
        name = t.get("thread_name")
        tid = t.get("os_thread_id")
        tid = tid if isinstance(tid, int) and not isinstance(tid, bool) else None
        label = clean(name, limit=NAME_LIMIT) if isinstance(name, str) and name else f"thread {tid or '?'}"
        out.append(ThreadStack(label, tuple(frames), t.get("active") is True, tid))
    return out


_THREAD = re.compile(r'^Thread (0x[0-9a-fA-F]+|[0-9]+)(?: \((\w+)\))?(?:: "(.*)")?\s*$')
_FRAME = re.compile(r"^\s+(.+?) \((.+?)(?::([0-9]{1,10}))?\)\s*$")


def parse_text(text: str) -> list[ThreadStack]:
    """py-spy's text dump: `Thread 123 (idle): "MainThread"` then one indented `name (file:line)`
    per frame, innermost first; its `Process`/`Python` header and anything else is skipped."""
    out: list[ThreadStack] = []
    current: tuple[str, bool, int | None] | None = None
    frames: list[Frame] = []

    def close() -> None:
        if current is not None and len(out) < MAX_THREADS:
            out.append(ThreadStack(current[0], tuple(frames[::-1][:MAX_FRAMES]), current[1], current[2]))

    for line in text.splitlines():
        m = _THREAD.match(line)
        if m:
            close()
            tid = int(m.group(1), 16) if m.group(1).startswith("0x") else int(m.group(1))
            name = m.group(3)
            current = (clean(name, limit=NAME_LIMIT) if name else f"thread {tid}", m.group(2) == "active", tid)
            frames = []
            continue
        f = _FRAME.match(line)
        if f and current is not None:
            frames.append(Frame(clean(f.group(1), limit=NAME_LIMIT), clean(f.group(2), limit=FILE_LIMIT),
                                int(f.group(3)) if f.group(3) else None))
    close()
    if not out and text.strip():
        raise DumpError("not a py-spy dump (no thread in it)")
    return out


def parse(data: bytes, *, as_json: bool) -> list[ThreadStack]:
    if as_json:
        return parse_json(data)
    return parse_text(data.decode("utf-8", "replace"))


def chosen(threads: list[ThreadStack], all_threads: bool, pid: int | None = None) -> list[ThreadStack]:
    """Every thread (`--all-threads`), else the main thread: the one named so, else the one whose id
    is the process's (py-spy does not always learn the names), else the first. An unnamed main
    thread is named MainThread, so that it merges with the others' across ranks."""
    import dataclasses

    threads = [dataclasses.replace(t, thread="MainThread")
               if pid is not None and t.native_id == pid and t.thread.startswith("thread ") else t for t in threads]
    if all_threads or not threads:
        return threads
    main = [t for t in threads if t.main]
    return main[:1] or threads[:1]
