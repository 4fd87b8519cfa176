"""Loading themes: the built-ins (`themes/builtin/*.toml`) and the user's (`<config dir>/themes/*.toml`).

A user theme file has the same keys as a built-in. ``name`` defaults to the file's stem; with
``extends = "<built-in>"`` it only needs the keys it changes (tables merge, lists replace). A
user theme named like a built-in replaces it. A file that fails to load gives one
`ConfigProblem` (one line: ``path:line: field: message``) and the other themes still load.

Also here, shared with `tui.settings`: `read_toml` (bad TOML -> one line with line and column),
`problems_from_validation` (pydantic errors -> one line each, with the line of the key, unknown
keys with a "did you mean" hint) and `ConfigFileError`.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from .model import ColourMode, Theme, ThemeSpec

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
BUILTIN_ORDER = ("dark", "light", "high-contrast", "colour-blind")
DEFAULT_THEME = "dark"


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


class ThemeError(ConfigFileError):
    """A theme file that cannot be used."""


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


# -- built-in and user themes -------------------------------------------------------------------------


@cache
def _builtin_raw() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(BUILTIN_DIR.glob("*.toml")):
        data, _ = read_toml(path, ThemeError)
        out[data.get("name", path.stem)] = data
    return out


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def parse_theme(data: Mapping[str, Any], path: Path, text: str = "") -> ThemeSpec:
    """Validate a theme's TOML data (handles ``extends`` and the default name); raises ThemeError."""
    name = str(path)
    data = dict(data)
    data.setdefault("name", path.stem)
    if "extends" in data:
        base_name = data.pop("extends")
        bases = _builtin_raw()
        if base_name not in bases:
            raise ThemeError([ConfigProblem(
                name, "extends", unknown_key_message(str(base_name), bases).replace("unknown key", "no built-in theme"),
                find_line(text, ("extends",)))])
        data = _merge({k: v for k, v in bases[base_name].items() if k not in ("name", "description")}, data)
    try:
        return ThemeSpec.model_validate(data)
    except ValidationError as exc:
        raise ThemeError(problems_from_validation(exc, name, text, ThemeSpec, extra_keys=("extends",))) from None


def load_theme_file(path: Path) -> ThemeSpec:
    """Read and validate one theme file; raises `ThemeError` (one line per problem)."""
    data, text = read_toml(path, ThemeError)
    return parse_theme(data, path, text)


@cache
def builtin_specs() -> dict[str, ThemeSpec]:
    specs = {spec.name: spec for spec in map(load_theme_file, sorted(BUILTIN_DIR.glob("*.toml")))}
    ordered = {n: specs[n] for n in BUILTIN_ORDER if n in specs}
    return {**ordered, **specs}


@dataclass
class ThemeSet:
    """The themes available: built-ins, then user themes.

    `problems` has one line per user file that failed (its first problem, and how many more);
    `failures` has every problem of each failed file.
    """

    specs: dict[str, ThemeSpec] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    problems: list[ConfigProblem] = field(default_factory=list)
    failures: dict[str, tuple[ConfigProblem, ...]] = field(default_factory=dict)

    def names(self) -> list[str]:
        return list(self.specs)

    def __contains__(self, name: object) -> bool:
        return name in self.specs

    def get(self, name: str, mode: ColourMode | str = ColourMode.TRUECOLOR) -> Theme:
        """The theme `name` resolved for `mode`; unknown names raise KeyError with a hint."""
        try:
            spec = self.specs[name]
        except KeyError:
            close = difflib.get_close_matches(name, self.specs, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise KeyError(f"unknown theme {name!r} ({hint}available: {', '.join(self.specs)})") from None
        return Theme.from_spec(spec, ColourMode(mode), self.sources.get(name, "builtin"))

    def textual_themes(self, mode: ColourMode | str = ColourMode.TRUECOLOR) -> list[Any]:
        """Every theme as a `textual.theme.Theme`, for `App.register_theme`."""
        return [self.get(name, mode).to_textual() for name in self.specs]


def load_user_themes(directory: Path) -> tuple[dict[str, tuple[ThemeSpec, str]], dict[str, tuple[ConfigProblem, ...]]]:
    """Every ``*.toml`` in `directory` (missing directory: none) -> ({name: (spec, path)},
    {path: problems} for the files that failed)."""
    found: dict[str, tuple[ThemeSpec, str]] = {}
    failures: dict[str, tuple[ConfigProblem, ...]] = {}
    if not directory.is_dir():
        return found, failures
    for path in sorted(directory.glob("*.toml")):
        try:
            spec = load_theme_file(path)
        except ThemeError as exc:
            failures[str(path)] = exc.problems
            continue
        if spec.name in found:
            failures[str(path)] = (ConfigProblem(str(path), "name", f"theme {spec.name!r} is already defined by "
                                                 f"{found[spec.name][1]}"),)
            continue
        found[spec.name] = (spec, str(path))
    return found, failures


def _summary(problems: tuple[ConfigProblem, ...]) -> ConfigProblem:
    first = problems[0]
    if len(problems) == 1:
        return first
    return dataclasses.replace(first, message=f"{first.message} (and {len(problems) - 1} more)")


def load_themes(user_dir: Path | None = None) -> ThemeSet:
    """Built-in themes plus those in `user_dir` (see `user_themes_dir`)."""
    themes = ThemeSet(specs=dict(builtin_specs()), sources=dict.fromkeys(builtin_specs(), "builtin"))
    if user_dir is not None:
        found, failures = load_user_themes(user_dir)
        for name, (spec, source) in found.items():
            themes.specs[name] = spec
            themes.sources[name] = source
        themes.failures = failures
        themes.problems = [_summary(problems) for problems in failures.values()]
    return themes


def user_themes_dir(config_file: Path) -> Path:
    """User themes live in ``themes/`` beside the configuration file."""
    return config_file.parent / "themes"
