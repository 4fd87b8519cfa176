"""Themes as data: the validated theme model, its colour modes, and its Textual theme.

A theme file (TOML, see `themes/builtin/*.toml`) holds the standard Textual colours (primary,
secondary, accent, foreground, background, surface, panel, success, warning, error, dark) and
ours: a colour per workload phase, a palette for ranks (log prefixes), and a utilisation scale
(gradient stops from 0 % to 100 %, evenly spaced). `ThemeSpec` validates it; `Theme` is a spec
resolved for one `ColourMode`:

- ``truecolor``: the file's colours (also used on 256-colour terminals, which approximate them);
- ``16``: ANSI colour names (``ansi_green``...) from the file's ``[ansi16]`` table or defaults, so
  a 16-colour terminal shows the terminal's own palette instead of collapsed approximations;
- ``mono`` (NO_COLOR): every colour of ours is ``ansi_default``; `phase_style` then relies on
  bold/reverse/underline/dim only.

`Theme.to_textual()` gives a `textual.theme.Theme` whose ``variables`` carry ours as
``ranks-phase-<phase>``, ``ranks-rank-<i>`` (i < len(ranks), at least 8) and ``ranks-util-<i>``
(always 5: 0, 25, 50, 75, 100 %). Colours returned by the helpers use Textual's colour syntax
(``#RRGGBB`` or ``ansi_<name>``), valid in Textual CSS, `Content` markup and `textual.style`;
`rich_colour` converts one for Rich.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from textual.color import (  # type: ignore[attr-defined]  # (textual.color re-exports it without __all__)
    ANSI_COLORS,
    Color,
    ColorParseError,
)

from .config_files import NAME_RE  # (a theme's name: there, for the settings' check without the models)

PHASES: tuple[str, ...] = ("running", "pending", "succeeded", "failed", "degraded", "suspended", "unknown")
"""The phases a theme colours (lower case; `phase_colour` maps statuses onto them)."""

MIN_RANK_COLOURS = 8
UTIL_VARIABLE_STOPS = (0, 25, 50, 75, 100)
"""Utilisation percentages exported as CSS variables ``ranks-util-0`` .. ``ranks-util-4``."""

ANSI_NAMES: tuple[str, ...] = (*(f"ansi_{name}" for name in ANSI_COLORS), "ansi_default")

# Statuses seen in the model (workload status, pod phase, container reasons) -> our phases.
STATUS_ALIASES: Mapping[str, str] = MappingProxyType({
    "complete": "succeeded",
    "completed": "succeeded",
    "restarting": "degraded",
    "error": "failed",
    "crashloopbackoff": "failed",
    "oomkilled": "failed",
    "containercreating": "pending",
    "created": "pending",
    "terminating": "suspended",
})

# Emphasis per phase: added in every mode, and the only distinction without colour (NO_COLOR).
PHASE_EMPHASIS: Mapping[str, str] = MappingProxyType({
    "running": "bold",
    "pending": "italic",
    "succeeded": "",
    "failed": "bold reverse",
    "degraded": "bold underline",
    "suspended": "dim",
    "unknown": "dim italic",
})
PHASE_EMPHASIS_COLOUR: Mapping[str, str] = MappingProxyType({
    "failed": "bold", "degraded": "bold", "suspended": "dim", "unknown": "dim",
})


class ColourMode(StrEnum):
    TRUECOLOR = "truecolor"
    ANSI16 = "16"
    MONO = "mono"


# -- colour values ------------------------------------------------------------------------------


def _parse_rgb(value: object) -> str:
    """A colour for truecolor fields: any Textual colour except ANSI names, opaque; -> #RRGGBB."""
    if not isinstance(value, str):
        raise ValueError(f"a colour must be a string like \"#1f6feb\" (got {value!r})")
    text = value.strip()
    if text.lower().startswith("ansi_"):
        raise ValueError(f"{value!r} is an ANSI colour name: put ANSI names in the [ansi16] table, "
                         "use #rrggbb here")
    try:
        colour = Color.parse(text)
    except ColorParseError:
        raise ValueError(f"not a colour: {value!r} (use #rrggbb, rgb(r,g,b), hsl(h,s%,l%) or a CSS "
                         "colour name)") from None
    if colour.a < 1:
        raise ValueError(f"colour {value!r} must be opaque (no alpha)")
    return colour.hex


def _parse_ansi(value: object) -> str:
    """A colour for the [ansi16] table: one of the 16 ANSI names or ansi_default."""
    if not isinstance(value, str):
        raise ValueError(f"an ANSI colour must be a string like \"ansi_green\" (got {value!r})")
    text = value.strip().lower()
    if not text.startswith("ansi_") and f"ansi_{text}" in ANSI_NAMES:
        text = f"ansi_{text}"
    if text not in ANSI_NAMES:
        raise ValueError(f"not an ANSI colour: {value!r} (use one of {', '.join(ANSI_NAMES)})")
    return text


RGB = Annotated[str, AfterValidator(_parse_rgb)]
Ansi = Annotated[str, AfterValidator(_parse_ansi)]


def _distinct(values: list[str], what: str) -> list[str]:
    seen: dict[str, int] = {}
    for i, value in enumerate(values):
        if value in seen:
            raise ValueError(f"{what} [{seen[value]}] and [{i}] are the same colour {value}")
        seen[value] = i
    return values


def _distinct_phases(model: BaseModel) -> BaseModel:
    seen: dict[str, str] = {}
    for phase in PHASES:
        value = getattr(model, phase)
        if value in seen:
            raise ValueError(f"{seen[value]} and {phase} are the same colour {value}: phases must differ")
        seen[value] = phase
    return model


# -- the file model -----------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PhaseColours(_Strict):
    """One colour per phase (`PHASES`), all different."""

    running: RGB
    pending: RGB
    succeeded: RGB
    failed: RGB
    degraded: RGB
    suspended: RGB
    unknown: RGB


class AnsiPhaseColours(_Strict):
    running: Ansi = "ansi_green"
    pending: Ansi = "ansi_yellow"
    succeeded: Ansi = "ansi_blue"
    failed: Ansi = "ansi_red"
    degraded: Ansi = "ansi_magenta"
    suspended: Ansi = "ansi_cyan"
    unknown: Ansi = "ansi_bright_black"


DEFAULT_ANSI_RANKS = (
    "ansi_cyan", "ansi_magenta", "ansi_yellow", "ansi_green", "ansi_blue", "ansi_red",
    "ansi_bright_cyan", "ansi_bright_magenta", "ansi_bright_yellow", "ansi_bright_green",
    "ansi_bright_blue", "ansi_bright_red",
)
DEFAULT_ANSI_UTIL = ("ansi_bright_black", "ansi_blue", "ansi_cyan", "ansi_green", "ansi_bright_green")


class Ansi16Colours(_Strict):
    """The 16-colour fallback: ANSI names, so the terminal's own palette is used."""

    phase: AnsiPhaseColours = Field(default_factory=AnsiPhaseColours)
    ranks: list[Ansi] = Field(default_factory=lambda: list(DEFAULT_ANSI_RANKS), min_length=4)
    util: list[Ansi] = Field(default_factory=lambda: list(DEFAULT_ANSI_UTIL), min_length=2, max_length=16)

    @field_validator("ranks")
    @classmethod
    def _ranks_differ(cls, value: list[str]) -> list[str]:
        return _distinct(value, "ansi16.ranks")


class ThemeSpec(_Strict):
    """A theme as written in a TOML file (validated; colours normalised to #RRGGBB)."""

    name: str
    description: str = ""
    dark: bool = True
    primary: RGB
    secondary: RGB | None = None
    accent: RGB | None = None
    foreground: RGB | None = None
    background: RGB | None = None
    surface: RGB | None = None
    panel: RGB | None = None
    success: RGB | None = None
    warning: RGB | None = None
    error: RGB | None = None
    phase: PhaseColours
    ranks: list[RGB] = Field(min_length=MIN_RANK_COLOURS, max_length=64)
    util: list[RGB] = Field(min_length=2, max_length=16)
    ansi16: Ansi16Colours = Field(default_factory=Ansi16Colours)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_RE.fullmatch(value):
            raise ValueError(f"bad theme name {value!r}: use 1-40 of a-z, 0-9, '-' and '_', starting "
                             "with a letter or digit")
        return value

    @field_validator("phase")
    @classmethod
    def _phases_differ(cls, value: PhaseColours) -> PhaseColours:
        _distinct_phases(value)
        return value

    @field_validator("ranks")
    @classmethod
    def _ranks_differ(cls, value: list[str]) -> list[str]:
        return _distinct(value, "ranks")


# -- the resolved theme -------------------------------------------------------------------------

STANDARD_FIELDS = ("primary", "secondary", "accent", "foreground", "background", "surface", "panel",
                   "success", "warning", "error")


@dataclass(frozen=True)
class Theme:
    """A `ThemeSpec` resolved for one colour mode. Build with `Theme.from_spec` or `for_mode`."""

    spec: ThemeSpec
    mode: ColourMode
    phase: Mapping[str, str]
    ranks: tuple[str, ...]
    util: tuple[str, ...]
    source: str = "builtin"
    """Where the theme came from: ``builtin`` or the path of the user's file."""

    @classmethod
    def from_spec(cls, spec: ThemeSpec, mode: ColourMode = ColourMode.TRUECOLOR,
                  source: str = "builtin") -> Theme:
        mode = ColourMode(mode)
        if mode is ColourMode.TRUECOLOR:
            phase = spec.phase.model_dump()
            ranks, util = tuple(spec.ranks), tuple(spec.util)
        elif mode is ColourMode.ANSI16:
            phase = spec.ansi16.phase.model_dump()
            ranks, util = tuple(spec.ansi16.ranks), tuple(spec.ansi16.util)
        else:
            phase = dict.fromkeys(PHASES, "ansi_default")
            ranks, util = ("ansi_default",) * len(spec.ranks), ("ansi_default",)
        return cls(spec, mode, MappingProxyType(phase), ranks, util, source)

    def for_mode(self, mode: ColourMode | str) -> Theme:
        return self if self.mode == mode else Theme.from_spec(self.spec, ColourMode(mode), self.source)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dark(self) -> bool:
        return self.spec.dark

    @property
    def description(self) -> str:
        return self.spec.description

    def variables(self) -> dict[str, str]:
        """Our CSS variables (``ranks-phase-*``, ``ranks-rank-*``, ``ranks-util-*``)."""
        out = {f"ranks-phase-{p}": self.phase[p] for p in PHASES}
        out.update({f"ranks-rank-{i}": colour for i, colour in enumerate(self.ranks)})
        out.update({f"ranks-util-{i}": util_colour(self, pct) for i, pct in enumerate(UTIL_VARIABLE_STOPS)})
        return out

    def to_textual(self) -> Any:
        """The `textual.theme.Theme` (same name), our colours in its ``variables``."""
        from textual.theme import BUILTIN_THEMES
        from textual.theme import Theme as TextualTheme

        if self.mode is ColourMode.TRUECOLOR:
            colours = {f: getattr(self.spec, f) for f in STANDARD_FIELDS}
            return TextualTheme(name=self.name, dark=self.dark, variables=self.variables(), **colours)
        # 16 colours and NO_COLOR: Textual's own ANSI theme (terminal palette), plus our variables.
        base = BUILTIN_THEMES["ansi-dark" if self.dark else "ansi-light"]
        return dataclasses.replace(base, name=self.name, variables={**base.variables, **self.variables()})


def variable_names(rank_colours: int = MIN_RANK_COLOURS) -> list[str]:
    """The variable names every theme defines (rank variables beyond 8 depend on the theme)."""
    return ([f"ranks-phase-{p}" for p in PHASES] + [f"ranks-rank-{i}" for i in range(rank_colours)]
            + [f"ranks-util-{i}" for i in range(len(UTIL_VARIABLE_STOPS))])


# -- colour look-ups ----------------------------------------------------------------------------


def phase_of(status: str | None) -> str:
    """The theme phase for a status: ``Running`` -> running, ``Completed`` -> succeeded, else unknown."""
    key = (status or "").strip().lower()
    key = STATUS_ALIASES.get(key, key)
    return key if key in PHASES else "unknown"


def phase_colour(theme: Theme, status: str | None) -> str:
    return theme.phase[phase_of(status)]


def phase_style(theme: Theme, status: str | None) -> str:
    """A style string (Textual syntax) for a status: colour plus emphasis; emphasis only in mono."""
    phase = phase_of(status)
    if theme.mode is ColourMode.MONO:
        return PHASE_EMPHASIS[phase] or "none"
    return " ".join(filter(None, (PHASE_EMPHASIS_COLOUR.get(phase, ""), theme.phase[phase])))


def rank_colour(theme: Theme, index: int) -> str:
    """The colour of rank `index` (cycles through the palette; negative indexes count too)."""
    return theme.ranks[index % len(theme.ranks)]


def util_colour(theme: Theme, pct: float | None) -> str:
    """The utilisation colour for `pct` (0-100, clamped); None or NaN -> the unknown phase colour.

    True colour interpolates between the evenly spaced stops; 16 colours picks a band.
    """
    if pct is None or pct != pct:
        return theme.phase["unknown"]
    stops = theme.util
    frac = min(max(float(pct), 0.0), 100.0) / 100.0
    if len(stops) == 1:
        return stops[0]
    if theme.mode is not ColourMode.TRUECOLOR:
        return stops[min(int(frac * len(stops)), len(stops) - 1)]
    pos = frac * (len(stops) - 1)
    i = min(int(pos), len(stops) - 2)
    return Color.parse(stops[i]).blend(Color.parse(stops[i + 1]), pos - i).hex


def rich_colour(colour: str) -> str:
    """A Textual colour string as Rich spells it (``ansi_bright_red`` -> ``bright_red``)."""
    if colour == "ansi_default":
        return "default"
    return colour[5:] if colour.startswith("ansi_") else colour


# -- terminal capabilities ------------------------------------------------------------------------

_MODE_SETTINGS = {
    "truecolor": ColourMode.TRUECOLOR, "256": ColourMode.TRUECOLOR, "16": ColourMode.ANSI16,
    "mono": ColourMode.MONO,
}


def no_color(environ: Mapping[str, str] | None = None) -> bool:
    """NO_COLOR (https://no-color.org) is set to a non-empty value.

    Note: `textual.app.App.__init__` removes NO_COLOR from os.environ; decide before creating it.
    """
    env = os.environ if environ is None else environ
    return bool(env.get("NO_COLOR", ""))


def detect_colour_mode(environ: Mapping[str, str] | None = None, setting: str = "auto") -> ColourMode:
    """The colour mode: NO_COLOR wins, then an explicit `setting` (truecolor|256|16|mono), then
    the terminal (TERM=dumb -> mono; COLORTERM=truecolor/24bit, *-256color, kitty -> truecolor;
    TEXTUAL_COLOR_SYSTEM; other TERMs such as xterm, linux, screen, vt100 -> 16)."""
    env = os.environ if environ is None else environ
    if no_color(env):
        return ColourMode.MONO
    if setting != "auto":
        try:
            return _MODE_SETTINGS[setting]
        except KeyError:
            raise ValueError(f"unknown colour mode {setting!r}: use auto, {', '.join(_MODE_SETTINGS)}") from None
    textual_system = env.get("TEXTUAL_COLOR_SYSTEM", "auto").strip().lower()
    if textual_system in ("truecolor", "256"):
        return ColourMode.TRUECOLOR
    if textual_system == "standard":
        return ColourMode.ANSI16
    term = env.get("TERM", "").strip().lower()
    if term in ("dumb", "unknown"):
        return ColourMode.MONO
    if env.get("COLORTERM", "").strip().lower() in ("truecolor", "24bit"):
        return ColourMode.TRUECOLOR
    if re.search(r"(256colou?r|direct|kitty|truecolor)$", term) or env.get("WT_SESSION"):
        return ColourMode.TRUECOLOR
    return ColourMode.ANSI16
