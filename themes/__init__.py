"""ranks: themes as data (TOML) turned into Textual themes, and glyph sets.

- `themes.model`: `ThemeSpec` (validated file data), `Theme` (resolved for a `ColourMode`:
  truecolor, 16 colours, or mono for NO_COLOR), `Theme.to_textual()`, and the look-ups
  `phase_colour`, `phase_style`, `rank_colour`, `util_colour`, `detect_colour_mode`.
- `themes.loader`: built-in themes (`themes/builtin/*.toml`: dark, light, high-contrast,
  colour-blind) and user themes (`<config dir>/themes/*.toml`) -> `ThemeSet`.
- `themes.glyphs`: Unicode and ASCII glyph sets (`--ascii`), `bar`, `sparkline`.

This package does not import Textual at import time except for `textual.color` (colour parsing).
"""

from .glyphs import ASCII, UNICODE, GlyphSet, bar, glyphs_for, sparkline
from .loader import (
    DEFAULT_THEME,
    ConfigFileError,
    ConfigProblem,
    ThemeError,
    ThemeSet,
    builtin_specs,
    load_theme_file,
    load_themes,
    user_themes_dir,
)
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
