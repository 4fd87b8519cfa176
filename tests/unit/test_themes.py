"""Themes: built-ins load and Textual accepts them; colour modes; accessibility; user themes; glyphs."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.color import Color
from textual.widgets import Static

from themes import (
    ASCII,
    PHASES,
    UNICODE,
    ColourMode,
    ThemeError,
    bar,
    builtin_specs,
    detect_colour_mode,
    glyphs_for,
    load_theme_file,
    load_themes,
    phase_colour,
    phase_of,
    phase_style,
    rank_colour,
    rich_colour,
    sparkline,
    util_colour,
    variable_names,
)
from themes.glyphs import wants_ascii
from themes.loader import find_line

BUILTINS = ("dark", "light", "high-contrast", "colour-blind")


# -- colour science helpers (kept simple: sRGB -> linear -> Machado 2009 CVD matrix -> CIELAB) ----

DEUTERANOPIA = ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881))
PROTANOPIA = ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998))
NORMAL = ((1, 0, 0), (0, 1, 0), (0, 0, 1))


def _linear(c: int) -> float:
    v = c / 255
    return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4


def _simulate(hex_colour: str, matrix) -> tuple[float, float, float]:
    c = Color.parse(hex_colour)
    rgb = [_linear(c.r), _linear(c.g), _linear(c.b)]
    out = [min(max(sum(matrix[i][j] * rgb[j] for j in range(3)), 0.0), 1.0) for i in range(3)]
    return out[0], out[1], out[2]


def _lab(lin: tuple[float, float, float]) -> tuple[float, float, float]:
    r, g, b = lin
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def delta_e(a: str, b: str, matrix=NORMAL) -> float:
    return math.dist(_lab(_simulate(a, matrix)), _lab(_simulate(b, matrix)))


def luminance(hex_colour: str) -> float:
    c = Color.parse(hex_colour)
    return 0.2126 * _linear(c.r) + 0.7152 * _linear(c.g) + 0.0722 * _linear(c.b)


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


# -- built-ins -----------------------------------------------------------------------------------


def test_builtins_load_in_order_with_all_variables() -> None:
    themes = load_themes()
    assert themes.names()[:4] == list(BUILTINS)
    assert themes.problems == []
    for name in BUILTINS:
        for mode in ColourMode:
            theme = themes.get(name, mode)
            assert theme.mode is mode and theme.source == "builtin"
            variables = theme.variables()
            assert set(variable_names()) <= set(variables)
            assert len([k for k in variables if k.startswith("ranks-rank-")]) >= 8
            textual = theme.to_textual()
            assert textual.name == name and textual.dark == theme.dark
            assert textual.ansi == (mode is not ColourMode.TRUECOLOR)
            assert {k: textual.variables[k] for k in variables} == variables
            for value in variables.values():
                Color.parse(value)  # valid Textual colours
            textual.to_color_system().generate()  # Textual can derive its palette
    assert themes.get("light").dark is False and themes.get("dark").dark is True


def test_mono_mode_collapses_our_colours_to_default() -> None:
    theme = load_themes().get("dark", ColourMode.MONO)
    assert set(theme.variables().values()) == {"ansi_default"}
    assert {phase_colour(theme, p) for p in PHASES} == {"ansi_default"}
    assert util_colour(theme, 42) == rank_colour(theme, 3) == "ansi_default"
    styles = [phase_style(theme, p) for p in PHASES]
    assert len(set(styles)) == len(PHASES), styles  # phases still told apart without colour
    assert all("ansi" not in s and "#" not in s for s in styles)
    assert "reverse" in phase_style(theme, "Failed") and "underline" in phase_style(theme, "Degraded")


def test_ansi16_mode_uses_terminal_palette_names() -> None:
    for name in BUILTINS:
        theme = load_themes().get(name, ColourMode.ANSI16)
        colours = [*theme.phase.values(), *theme.ranks, *theme.util]
        assert all(c.startswith("ansi_") for c in colours), colours
        assert len(set(theme.phase.values())) == len(PHASES)
        assert len(set(theme.ranks)) == len(theme.ranks) >= 8
        # bands, not blends: every utilisation maps onto one of the stops, in order
        bands = [util_colour(theme, pct) for pct in range(0, 101)]
        assert bands[0] == theme.util[0] and bands[-1] == theme.util[-1]
        assert [k for k, _ in itertools.groupby(bands)] == list(theme.util)


async def test_textual_accepts_every_theme_and_resolves_our_variables() -> None:
    class ThemeApp(App[None]):
        CSS = """
        #phase { color: $ranks-phase-failed; background: $ranks-util-4; }
        #rank { color: $ranks-rank-7; background: $ranks-util-0; }
        """

        def get_theme_variable_defaults(self) -> dict[str, str]:
            return dict.fromkeys(variable_names(), "red")

        def compose(self) -> ComposeResult:
            yield Static("x", id="phase")
            yield Static("y", id="rank")

    themes = load_themes()
    app = ThemeApp()
    async with app.run_test(size=(80, 24)) as pilot:
        for mode in (ColourMode.TRUECOLOR, ColourMode.ANSI16):
            for name in BUILTINS:
                theme = themes.get(name, mode)
                app.register_theme(theme.to_textual())
                app.theme = name
                await pilot.pause()
                assert app.current_theme.name == name
                phase, rank = app.query_one("#phase"), app.query_one("#rank")
                expect_fail, expect_rank = Color.parse(theme.phase["failed"]), Color.parse(theme.ranks[7])
                if mode is ColourMode.TRUECOLOR:
                    assert phase.styles.color.hex == expect_fail.hex
                    assert rank.styles.color.hex == expect_rank.hex
                    assert phase.styles.background.hex == Color.parse(util_colour(theme, 100)).hex
                else:
                    assert phase.styles.color.ansi == expect_fail.ansi
                    assert rank.styles.color.ansi == expect_rank.ansi


def test_phase_and_rank_colours_are_readable_on_their_background() -> None:
    for name, spec in builtin_specs().items():
        theme = load_themes().get(name)
        minimum = 7.0 if name == "high-contrast" else 4.5  # WCAG AAA / AA for text
        for phase, colour in theme.phase.items():
            assert contrast(colour, spec.background) >= minimum, (name, phase, colour)
        for colour in theme.ranks:
            assert contrast(colour, spec.background) >= minimum, (name, colour)
        for colour in theme.util:  # bars and numbers: non-text contrast
            assert contrast(colour, spec.background) >= 3.0, (name, colour)
        # every phase, and the first 8 ranks, are distinguishable with normal sight
        for a, b in itertools.combinations(theme.phase.values(), 2):
            assert delta_e(a, b) > 20, (name, a, b)
        for a, b in itertools.combinations(theme.ranks[:8], 2):
            assert delta_e(a, b) > 20, (name, a, b)


def test_cvd_simulation_is_meaningful() -> None:
    red, green = "#D03030", "#30A030"
    assert delta_e(red, green) > 50
    assert delta_e(red, green, DEUTERANOPIA) < 0.5 * delta_e(red, green)


def test_colour_blind_theme_phases_stay_distinct_under_deuteranopia_and_protanopia() -> None:
    theme = load_themes().get("colour-blind")
    for matrix in (DEUTERANOPIA, PROTANOPIA):
        worst = min(delta_e(a, b, matrix) for a, b in itertools.combinations(theme.phase.values(), 2))
        assert worst >= 10, worst
        ranks = min(delta_e(a, b, matrix) for a, b in itertools.combinations(theme.ranks[:8], 2))
        assert ranks >= 10, ranks
    # the utilisation scale keeps its order for colour-blind eyes: lightness rises with load
    for matrix in (NORMAL, DEUTERANOPIA, PROTANOPIA):
        lightness = [_lab(_simulate(util_colour(theme, pct), matrix))[0] for pct in range(0, 101, 10)]
        assert lightness == sorted(lightness) and lightness[-1] - lightness[0] > 40


# -- look-ups -------------------------------------------------------------------------------------


def test_util_colour_interpolates_between_stops_and_clamps() -> None:
    theme = load_themes().get("dark")
    stops = theme.util
    assert len(stops) == 5
    assert [util_colour(theme, p) for p in (0, 25, 50, 75, 100)] == list(stops)
    assert util_colour(theme, -5) == stops[0] and util_colour(theme, 250) == stops[-1]
    mid = Color.parse(util_colour(theme, 12.5))
    a, b = Color.parse(stops[0]), Color.parse(stops[1])
    assert mid.hex == a.blend(b, 0.5).hex and mid.hex not in (a.hex, b.hex)
    assert util_colour(theme, None) == util_colour(theme, float("nan")) == theme.phase["unknown"]
    assert [theme.variables()[f"ranks-util-{i}"] for i in range(5)] == list(stops)


def test_phase_colour_maps_statuses() -> None:
    theme = load_themes().get("dark")
    assert phase_colour(theme, "Running") == theme.phase["running"]
    assert phase_colour(theme, "Completed") == theme.phase["succeeded"]
    assert phase_colour(theme, "Restarting") == theme.phase["degraded"]
    assert phase_colour(theme, "CrashLoopBackOff") == theme.phase["failed"]
    assert phase_colour(theme, "whatever") == phase_colour(theme, None) == theme.phase["unknown"]
    assert phase_of(" SUSPENDED ") == "suspended"
    assert phase_style(theme, "Failed") == f"bold {theme.phase['failed']}"
    assert phase_style(theme, "Running") == theme.phase["running"]


def test_rank_colour_cycles() -> None:
    theme = load_themes().get("dark")
    n = len(theme.ranks)
    assert len({rank_colour(theme, i) for i in range(n)}) == n
    assert rank_colour(theme, n + 2) == rank_colour(theme, 2)
    assert rank_colour(theme, -1) == theme.ranks[-1]


def test_rich_colour() -> None:
    assert rich_colour("ansi_bright_red") == "bright_red"
    assert rich_colour("ansi_default") == "default"
    assert rich_colour("#AABBCC") == "#AABBCC"


@pytest.mark.parametrize(("env", "setting", "mode"), [
    ({"NO_COLOR": "1", "COLORTERM": "truecolor"}, "truecolor", ColourMode.MONO),
    ({"NO_COLOR": "", "TERM": "xterm-256color"}, "auto", ColourMode.TRUECOLOR),
    ({"TERM": "xterm"}, "auto", ColourMode.ANSI16),
    ({"TERM": "linux"}, "auto", ColourMode.ANSI16),
    ({"TERM": "xterm", "COLORTERM": "24bit"}, "auto", ColourMode.TRUECOLOR),
    ({"TERM": "screen-256color"}, "auto", ColourMode.TRUECOLOR),
    ({"TERM": "dumb"}, "auto", ColourMode.MONO),
    ({"TERM": "xterm-256color"}, "16", ColourMode.ANSI16),
    ({"TERM": "xterm"}, "256", ColourMode.TRUECOLOR),
    ({"TERM": "xterm-256color"}, "mono", ColourMode.MONO),
    ({"TERM": "xterm", "TEXTUAL_COLOR_SYSTEM": "truecolor"}, "auto", ColourMode.TRUECOLOR),
])
def test_detect_colour_mode(env: dict[str, str], setting: str, mode: ColourMode) -> None:
    assert detect_colour_mode(env, setting) is mode


def test_detect_colour_mode_rejects_unknown_setting() -> None:
    with pytest.raises(ValueError, match="rainbow"):
        detect_colour_mode({}, "rainbow")


# -- user themes ----------------------------------------------------------------------------------

GOOD_THEME = """
name = "sunset"
extends = "light"
description = "warm"
primary = "orange"
ranks = ["#AA0000", "#00AA00", "#0000AA", "#AAAA00", "#AA00AA", "#00AAAA", "#555555", "#AA5500"]

[phase]
running = "rgb(0, 128, 0)"
"""


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def test_user_theme_extends_a_builtin(tmp_path: Path) -> None:
    path = write(tmp_path, "sunset.toml", GOOD_THEME)
    themes = load_themes(tmp_path)
    assert themes.problems == []
    theme = themes.get("sunset")
    assert theme.source == str(path) and theme.description == "warm"
    light = themes.get("light")
    assert theme.spec.primary == "#FFA500" and theme.phase["running"] == "#008000"
    assert theme.phase["failed"] == light.phase["failed"] and theme.util == light.util
    assert theme.ranks[0] == "#AA0000" and theme.dark is False


def test_user_theme_name_defaults_to_file_stem_and_may_replace_a_builtin(tmp_path: Path) -> None:
    write(tmp_path, "my-theme.toml", 'extends = "dark"\n')
    write(tmp_path, "dark.toml", 'name = "dark"\nextends = "high-contrast"\n')
    themes = load_themes(tmp_path)
    assert "my-theme" in themes
    assert themes.get("dark").spec.background == "#000000"
    assert themes.sources["dark"].endswith("dark.toml")


BAD_THEMES = {
    "colour.toml": ('extends = "dark"\n[phase]\nrunning = "gren"\n', 3, "phase.running", "not a colour: 'gren'"),
    "unknown-key.toml": ('extends = "dark"\nforground = "#fff"\n', 2, "forground",
                         "unknown key 'forground' (did you mean 'foreground'?)"),
    "few-ranks.toml": ('extends = "dark"\nranks = ["#111111", "#222222"]\n', 2, "ranks",
                       "needs at least 8 entries (got 2)"),
    "ansi-in-rgb.toml": ('extends = "dark"\nutil = ["#000000", "ansi_red"]\n', 2, "util[1]", "[ansi16]"),
    "bad-ansi.toml": ('extends = "dark"\n[ansi16.phase]\nfailed = "crimson"\n', 3, "ansi16.phase.failed",
                      "not an ANSI colour"),
    "same-phase.toml": ('extends = "dark"\n\n[phase]\nfailed = "#3FB950"\n', 3, "phase",
                        "running and failed are the same colour"),
    "missing.toml": ('name = "missing"\nprimary = "#123456"\n', None, "phase", "required key is missing"),
    "bad-name.toml": ('name = "Bad Name"\nextends = "dark"\n', 1, "name", "bad theme name"),
    "bad-base.toml": ('extends = "drak"\n', 1, "extends", "no built-in theme 'drak' (did you mean 'dark'?)"),
    "dark-flag.toml": ('extends = "dark"\ndark = "yes"\n', 2, "dark", "valid boolean (got 'yes')"),
    "bad-toml.toml": ('extends = "dark"\nprimary = "#fff\n', 2, "", "invalid TOML"),
}


def test_invalid_user_themes_give_one_line_each_and_the_others_load(tmp_path: Path) -> None:
    for name, (text, *_rest) in BAD_THEMES.items():
        write(tmp_path, name, text)
    write(tmp_path, "sunset.toml", GOOD_THEME)
    themes = load_themes(tmp_path)
    assert themes.names() == [*BUILTINS, "sunset"]
    by_file = {Path(p.path).name: p for p in themes.problems}
    assert set(by_file) == set(BAD_THEMES)
    for name, (_text, line, field, message) in BAD_THEMES.items():
        problem = by_file[name]
        text = str(problem)
        assert "\n" not in text
        assert text.startswith(str(tmp_path / name) + (f":{line}" if line else ":")), text
        assert problem.field == field, text
        assert message in text, text
    assert str(by_file["bad-toml.toml"]).startswith(f"{tmp_path / 'bad-toml.toml'}:2:")
    assert "(and 2 more)" in str(by_file["missing.toml"])  # phase, ranks and util all reported
    assert [p.field for p in themes.failures[str(tmp_path / "missing.toml")]] == ["phase", "ranks", "util"]


def test_duplicate_user_theme_names(tmp_path: Path) -> None:
    write(tmp_path, "a.toml", 'name = "twin"\nextends = "dark"\n')
    write(tmp_path, "b.toml", 'name = "twin"\nextends = "light"\n')
    themes = load_themes(tmp_path)
    assert themes.get("twin").dark is True
    [problem] = themes.problems
    assert problem.path.endswith("b.toml") and "already defined by" in problem.message


def test_load_theme_file_raises_and_unknown_theme_has_hint(tmp_path: Path) -> None:
    with pytest.raises(ThemeError) as info:
        load_theme_file(write(tmp_path, "x.toml", 'extends = "dark"\nprimary = 3\n'))
    assert str(info.value).startswith(f"{tmp_path / 'x.toml'}:2: primary:")
    with pytest.raises(KeyError, match="did you mean 'dark'"):
        load_themes().get("drak")
    assert load_themes(tmp_path / "absent").names() == list(BUILTINS)


def test_find_line() -> None:
    text = 'a = 1\n[phase]\n# c\nrunning = "x"\n[ansi16.phase]\nfailed = "y"\n[keymap]\n"quit" = "q"\n'
    assert find_line(text, ("a",)) == 1
    assert find_line(text, ("phase", "running")) == 4
    assert find_line(text, ("phase", "failed")) == 2
    assert find_line(text, ("ansi16", "phase", "failed")) == 6
    assert find_line(text, ("keymap", "quit")) == 8
    assert find_line(text, ("nothing",)) is None


# -- glyphs ---------------------------------------------------------------------------------------


def test_glyph_sets() -> None:
    assert glyphs_for(True) is ASCII and glyphs_for(False) is UNICODE
    for glyph in ASCII.all_glyphs():
        assert glyph.isascii(), glyph
    assert not all(g.isascii() for g in UNICODE.all_glyphs())
    for gs in (ASCII, UNICODE):
        assert set(gs.phase_markers) == set(PHASES)
        assert len(set(gs.phase_markers.values())) == len(PHASES)
        singles = [g for g in gs.all_glyphs() if g not in (gs.breadcrumb, gs.ellipsis)]
        assert all(cell_len(g) == 1 for g in singles), [g for g in singles if cell_len(g) != 1]
        assert len(gs.spark) == 8 and len(set(gs.spark)) == 8
    assert cell_len(UNICODE.breadcrumb) == cell_len(ASCII.breadcrumb) == 3
    assert UNICODE.phase_marker("Completed") == "✓" and ASCII.phase_marker("Failed") == "x"
    assert [ASCII.spinner_frame(i) for i in range(5)] == ["|", "/", "-", "\\", "|"]
    assert wants_ascii("ascii") and wants_ascii("latin-1") and not wants_ascii("utf-8")


@pytest.mark.parametrize("gs", [UNICODE, ASCII], ids=lambda g: g.name)
def test_bar_is_always_exactly_width(gs) -> None:
    for width in (1, 5, 10, 17):
        for i in range(101):
            assert cell_len(bar(gs, i / 100, width)) == width
    assert bar(gs, 1.0, 4) == gs.bar_full * 4
    assert bar(gs, 0.0, 4) == gs.bar_empty * 4
    assert bar(gs, None, 3) == bar(gs, float("nan"), 3) == gs.bar_empty * 3
    assert bar(gs, 2.0, 3) == gs.bar_full * 3
    assert bar(gs, 0.5, 0) == ""


def test_bar_partials() -> None:
    assert bar(UNICODE, 0.5, 3) == "█▌ "
    assert bar(UNICODE, 1 / 16, 2) == "▏ "
    assert bar(ASCII, 0.5, 3) == "#- "
    assert bar(ASCII, 0.25, 2) == "- "


def test_sparkline() -> None:
    assert sparkline(UNICODE, [0, 50, 100, None, 200, -1]) == "▁▅█ █▁"
    assert sparkline(ASCII, [0, 100, float("nan")]) == "_# "
    assert sparkline(UNICODE, [5, 5], lo=5, hi=5) == "▁▁"
    assert sparkline(ASCII, range(0, 101)).isascii()
