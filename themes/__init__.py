"""ranks: themes as data (TOML) turned into Textual themes, and glyph sets.

- `themes.model`: `ThemeSpec` (validated file data), `Theme` (resolved for a `ColourMode`:
  truecolor, 16 colours, or mono for NO_COLOR), `Theme.to_textual()`, and the look-ups
  `phase_colour`, `phase_style`, `rank_colour`, `util_colour`, `detect_colour_mode`.
- `themes.loader`: built-in themes (`themes/builtin/*.toml`: dark, light, high-contrast,
  colour-blind) and user themes (`<config dir>/themes/*.toml`) -> `ThemeSet`.
- `themes.glyphs`: Unicode and ASCII glyph sets (`--ascii`), `bar`, `sparkline`.

This package does not import Textual at import time except for `textual.color` (colour parsing),
and its names are imported on first use (`config_files` alone needs neither).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the type checker sees every name; at run time each is imported on first use)
    from .config_files import ConfigFileError, ConfigProblem, user_themes_dir
    from .glyphs import ASCII, UNICODE, GlyphSet, bar, glyphs_for, sparkline
    from .loader import DEFAULT_THEME, ThemeError, ThemeSet, builtin_specs, load_theme_file, load_themes
    from .model import (
        PHASES,
        ColourMode,
        Theme,
        ThemeSpec,
        detect_colour_mode,
        phase_colour,
        phase_of,
        phase_style,
        rank_colour,
        rich_colour,
        util_colour,
        variable_names,
    )

# where each name lives: `from themes import ConfigFileError` (a command's settings) imports
# `config_files` alone, not the models' pydantic classes and Textual's colours
_HOMES = {
    **dict.fromkeys(("ConfigFileError", "ConfigProblem", "user_themes_dir"), "config_files"),
    **dict.fromkeys(("ASCII", "UNICODE", "GlyphSet", "bar", "glyphs_for", "sparkline"), "glyphs"),
    **dict.fromkeys(("DEFAULT_THEME", "ThemeError", "ThemeSet", "builtin_specs", "load_theme_file", "load_themes"),
                    "loader"),
    **dict.fromkeys(("PHASES", "ColourMode", "Theme", "ThemeSpec", "detect_colour_mode", "phase_colour", "phase_of",
                     "phase_style", "rank_colour", "rich_colour", "util_colour", "variable_names"), "model"),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # (looked up once)
    return value


__all__ = [
    "ASCII",
    "DEFAULT_THEME",
    "PHASES",
    "UNICODE",
    "ColourMode",
    "ConfigFileError",
    "ConfigProblem",
    "GlyphSet",
    "Theme",
    "ThemeError",
    "ThemeSet",
    "ThemeSpec",
    "bar",
    "builtin_specs",
    "detect_colour_mode",
    "glyphs_for",
    "load_theme_file",
    "load_themes",
    "phase_colour",
    "phase_of",
    "phase_style",
    "rank_colour",
    "rich_colour",
    "sparkline",
    "user_themes_dir",
    "util_colour",
    "variable_names",
]
