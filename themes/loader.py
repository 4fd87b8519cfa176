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
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .config_files import (
    ConfigFileError,
    ConfigProblem,
    find_line,
    problems_from_validation,
    read_toml,
    unknown_key_message,
)
from .model import ColourMode, Theme, ThemeSpec

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"
BUILTIN_ORDER = ("dark", "light", "high-contrast", "colour-blind")
DEFAULT_THEME = "dark"


# -- one-line problems: `config_files` ---------------------------------------------------------------


class ThemeError(ConfigFileError):
    """A theme file that cannot be used."""


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

