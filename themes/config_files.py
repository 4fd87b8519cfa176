"""One-line problems of ranks' files (themes and the configuration file), without the themes'
models: `ConfigProblem`, `ConfigFileError`, `read_toml` (bad TOML -> one line with line and
column), `find_line`, `problems_from_validation` (pydantic errors -> one line each, with the line
of the key, unknown keys with a "did you mean" hint), `user_themes_dir` and `NAME_RE` (a theme's
name). `tui.settings` needs these and no theme: a command that reads the settings (`ranks get`'s
thresholds) does not import the themes' models and Textual's colours (0.1 s at its start)."""

from __future__ import annotations

import difflib
import re
import tomllib
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")  # a theme's name


# -- one-line problems ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigProblem:
    """One problem in a configuration or theme file, printed as one line."""

    path: str
    field: str
    message: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class ConfigFileError(ValueError):
    """A file that cannot be used; ``problems`` holds one `ConfigProblem` per error."""

    def __init__(self, problems: Iterable[ConfigProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def read_toml(path: Path, error: type[ConfigFileError] = ConfigFileError) -> tuple[dict[str, Any], str]:
    """Read and parse a TOML file -> (data, text); any failure raises `error` with one line."""
    from monitors.state_dir import read_regular

    name = str(path)
    try:
        raw = read_regular(path)  # (a FIFO would block: refused, as anything but a regular file)
    except OSError as exc:
        raise error([ConfigProblem(name, "", f"cannot read: {exc.strerror or exc}")]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error([ConfigProblem(name, "", "invalid TOML: not UTF-8 text",
                                   raw[: exc.start].count(b"\n") + 1)]) from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = _TOML_POS.search(msg)
        line, col = None, None
        if m:
            line, col = int(m.group(1)), int(m.group(2))
            msg = msg[: m.start()]
        elif msg.endswith("(at end of document)"):
            line = text.count("\n") + 1
            msg = msg.removesuffix("(at end of document)").strip()
        raise error([ConfigProblem(name, "", f"invalid TOML: {msg}", line, col)]) from None


def format_loc(loc: Sequence[str | int]) -> str:
    """("phase", "running") -> phase.running; ("ranks", 3) -> ranks[3]."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_BARE = r"[A-Za-z0-9_-]+"
_QUOTED = r"\"(?:[^\"\\]|\\.)*\"|'[^']*'"
_KEYPART = rf"(?:{_BARE}|{_QUOTED})"
_DOTTED = rf"{_KEYPART}(?:\s*\.\s*{_KEYPART})*"
_HEADER_RE = re.compile(rf"^\s*\[\[?\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEY_RE = re.compile(rf"^\s*({_DOTTED})\s*=")


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = re.findall(_KEYPART, dotted)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def find_line(text: str, loc: Sequence[str | int]) -> int | None:
    """Best-effort line number (1-based) of the key at `loc` in TOML `text` (the closest enclosing
    key or table when the key itself is absent)."""
    want: list[str] = []
    for part in loc:
        if isinstance(part, int):
            break
        want.append(part)
    if not want:
        return None
    best, best_len = None, 0
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), 1):
        if m := _HEADER_RE.match(line):
            table = _split_key(m.group(1))
            path = table
        elif m := _KEY_RE.match(line):
            path = table + _split_key(m.group(1))
        else:
            continue
        if len(path) > best_len and len(path) <= len(want) and list(path) == want[: len(path)]:
            best, best_len = number, len(path)
            if best_len == len(want):
                break
    return best


def unknown_key_message(key: str, allowed: Iterable[str]) -> str:
    allowed = sorted(allowed)
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key {key!r} (did you mean {close[0]!r}?)"
    return f"unknown key {key!r} (known keys: {', '.join(allowed)})" if allowed else f"unknown key {key!r}"


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, tuple, typing.Annotated):
        for arg in typing.get_args(annotation):
            if (found := _model_of(arg)) is not None:
                return found
    return None


def allowed_keys(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The keys the table at `loc` (a key path into `model`) may hold."""
    cls: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int):
            continue
        info = cls.model_fields.get(part) if cls else None
        cls = _model_of(info.annotation) if info else None
        if cls is None:
            return []
    return list(cls.model_fields) if cls else []


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def problems_from_validation(exc: ValidationError, path: str, text: str, model: type[BaseModel],
                             extra_keys: Sequence[str] = ()) -> list[ConfigProblem]:
    """One `ConfigProblem` per pydantic error, with the key's line and friendlier wording."""
    out: list[ConfigProblem] = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if isinstance(p, int) or not str(p).startswith("function-"))
        kind, msg = err["type"], err["msg"]
        if kind == "extra_forbidden":
            allowed = allowed_keys(model, loc[:-1]) + (list(extra_keys) if len(loc) == 1 else [])
            msg = unknown_key_message(str(loc[-1]), allowed)
        elif kind == "missing":
            msg = "required key is missing"
        elif kind in ("too_short", "too_long") and "ctx" in err:
            ctx = err["ctx"]
            bound = f"at least {ctx.get('min_length')}" if kind == "too_short" else f"at most {ctx.get('max_length')}"
            msg = f"needs {bound} entries (got {ctx.get('actual_length')})"
        elif kind in ("value_error", "assertion_error"):
            msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        elif "input" in err and not isinstance(err["input"], dict | list):
            msg = f"{msg} (got {_short(err['input'])})"
        out.append(ConfigProblem(path, format_loc(loc), msg, find_line(text, loc)))
    return sorted(out, key=lambda p: p.line if p.line is not None else 1 << 30)


def user_themes_dir(config_file: Path) -> Path:
    """User themes live in ``themes/`` beside the configuration file."""
    return config_file.parent / "themes"
