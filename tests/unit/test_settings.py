"""Settings: file location and precedence, defaults, strict validation with one-line errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from monitors.promql import DEFAULT_METRIC_NAMES, metric_names
from themes import load_themes
from tui.settings import (
    MetricNames,
    Settings,
    SettingsError,
    config_path,
    load_settings,
    parse_settings,
    themes_dir,
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment with its own HOME and XDG_CONFIG_HOME (nothing from the real user)."""
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


def errors(path: Path) -> list[str]:
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    lines = str(info.value).split("\n")
    assert [str(p) for p in info.value.problems] == lines
    return lines


# -- where ----------------------------------------------------------------------------------------


def test_config_path_precedence(tmp_path: Path, env: dict[str, str]) -> None:
    home = write(tmp_path / "home/.config/ranks/config.toml", 'theme = "light"\n')
    xdg = write(tmp_path / "xdg/ranks/config.toml", 'theme = "high-contrast"\n')
    explicit = write(tmp_path / "elsewhere/my.toml", 'theme = "colour-blind"\n')

    assert config_path({**env, "RANKS_CONFIG": str(explicit)}) == explicit
    assert load_settings(environ={**env, "RANKS_CONFIG": str(explicit)}).theme == "colour-blind"
    assert config_path(env) == xdg
    assert load_settings(environ=env).theme == "high-contrast"
    no_xdg = {"HOME": env["HOME"]}
    assert config_path(no_xdg) == home
    assert load_settings(environ=no_xdg).theme == "light"
    # a relative XDG_CONFIG_HOME is invalid per the XDG spec and ignored
    assert config_path({**no_xdg, "XDG_CONFIG_HOME": "relative/dir"}) == home
    # an empty RANKS_CONFIG counts as unset
    assert config_path({**env, "RANKS_CONFIG": ""}) == xdg
    # an explicit path argument beats everything
    assert load_settings(home, environ={**env, "RANKS_CONFIG": str(explicit)}).theme == "light"
    loaded = load_settings(environ=env)
    assert loaded.path == xdg
    assert themes_dir(loaded) == tmp_path / "xdg/ranks/themes"
    assert themes_dir(environ={**env, "RANKS_CONFIG": str(explicit)}) == tmp_path / "elsewhere/themes"


def test_missing_default_file_means_defaults(env: dict[str, str]) -> None:
    settings = load_settings(environ=env)
    assert settings == Settings()
    assert settings.path is None
    assert settings.theme == "dark" and settings.refresh_interval == 5.0 and settings.read_only is False
    assert settings.metric_names == DEFAULT_METRIC_NAMES
    assert settings.namespaces == [] and settings.keymap == {} and settings.prometheus_url is None
    assert settings.theme in load_themes()


def test_missing_explicit_file_is_an_error(tmp_path: Path, env: dict[str, str]) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(SettingsError, match=re.escape(f"{missing}: configuration file not found (set by RANKS_CONFIG)")):
        load_settings(environ={**env, "RANKS_CONFIG": str(missing)})
    with pytest.raises(SettingsError, match=r"configuration file not found$"):
        load_settings(missing)
    with pytest.raises(SettingsError, match="is a directory"):
        load_settings(tmp_path)


# -- what -----------------------------------------------------------------------------------------

FULL = """\
prometheus_url = "https://prom.example:9090/"
refresh_interval = 2          # an integer is fine
theme = "colour-blind"
colours = "16"
default_project = "team-a"
read_only = true
namespaces = ["runai-team-a", "runai-team-b", "runai-team-a"]
ascii = true
coalesce = 0.2

[metrics]
util = "MY_GPU_UTIL"
temp = "gpu:temp_celsius"

[keymap]
quit = "ctrl+q"
logs = ["l", "L"]
help = "f1,?"
"""


def test_full_file(tmp_path: Path) -> None:
    s = load_settings(write(tmp_path / "c.toml", FULL))
    assert s.prometheus_url == "https://prom.example:9090"
    assert s.refresh_interval == 2.0 and isinstance(s.refresh_interval, float)
    assert (s.theme, s.colours, s.default_project, s.read_only, s.ascii) == ("colour-blind", "16", "team-a", True, True)
    assert s.namespaces == ["runai-team-a", "runai-team-b"]
    assert s.coalesce == 0.2
    assert s.metric_names == {**DEFAULT_METRIC_NAMES, "util": "MY_GPU_UTIL", "temp": "gpu:temp_celsius"}
    assert metric_names(s.metric_names)["util"] == "MY_GPU_UTIL"
    km = s.key_map
    assert km.keys("quit") == ("ctrl+q",)
    assert km.keys("logs") == ("l", "L")
    assert km.keys("help") == ("f1", "question_mark")
    assert km.textual_keymap() == {"quit": "ctrl+q", "logs": "l,L", "help": "f1,question_mark"}


def test_metric_keys_match_the_metrics_module() -> None:
    assert set(MetricNames.model_fields) == set(DEFAULT_METRIC_NAMES)
    assert MetricNames().model_dump() == DEFAULT_METRIC_NAMES


def test_bad_toml_is_one_line_with_line_number(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", 'theme = "dark"\n\nrefresh_interval = \nread_only = true\n')
    [line] = errors(path)
    assert re.fullmatch(re.escape(str(path)) + r":3:\d+: invalid TOML: .+", line), line
    path = write(tmp_path / "d.toml", '[keymap]\nquit = "q"\n[keymap]\n')
    [line] = errors(path)
    assert line.startswith(f"{path}:3:") and "invalid TOML" in line
    path = write(tmp_path / "e.toml", 'theme = "\xff"\n')
    path.write_bytes(b'theme = "dark"\ntheme2 = "\xff"\n')
    [line] = errors(path)
    assert line == f"{path}:2: invalid TOML: not UTF-8 text"


def test_every_problem_is_one_line_with_file_line_and_field(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", """\
refresh = 2
read_only = "yes"
namespaces = ["ok", "Bad_NS"]
theme = "Nope Theme"
colours = "rainbow"
prometheus_url = "prom:9090"
refresh_interval = 0.5
coalesce = -1
ascii = 1

[metrics]
utl = "X"
power = "bad name"

[keymap]
quitt = "x"
help = "esc"
""")
    lines = errors(path)
    expected = [
        (1, "refresh", "unknown key 'refresh' (did you mean 'refresh_interval'?)"),
        (2, "read_only", "valid boolean (got 'yes')"),
        (3, "namespaces[1]", "'Bad_NS' is not a namespace name"),
        (4, "theme", "'Nope Theme' is not a theme name"),
        (5, "colours", "(got 'rainbow')"),
        (6, "prometheus_url", "not an http(s) URL: 'prom:9090'"),
        (7, "refresh_interval", "must be at least 1 second and at most 3600 (got 0.5)"),
        (8, "coalesce", "must be between 0 and 2 seconds (got -1)"),
        (9, "ascii", "valid boolean (got 1)"),
        (12, "metrics.utl", "unknown key 'utl' (did you mean 'util'?)"),
        (13, "metrics.power", "'bad name' is not a Prometheus metric name"),
        (16, "keymap.quitt", "unknown binding id 'quitt' (did you mean 'quit'?)"),
        (17, "keymap.help", "unknown key name 'esc' in 'esc' (did you mean 'escape'?)"),
    ]
    assert len(lines) == len(expected), lines
    for got, (line, field, message) in zip(lines, expected, strict=True):
        assert got.startswith(f"{path}:{line}: {field}: "), got
        assert message in got, got


def test_unknown_key_without_close_match_lists_known_keys(tmp_path: Path) -> None:
    [line] = errors(write(tmp_path / "c.toml", "zzz = 1\n"))
    assert "unknown key 'zzz' (known keys: ascii, coalesce, colours, default_project" in line


def test_wrong_table_types(tmp_path: Path) -> None:
    [line] = errors(write(tmp_path / "c.toml", 'metrics = "x"\n'))
    assert line.startswith(f"{tmp_path / 'c.toml'}:1: metrics: ")
    [line] = errors(write(tmp_path / "d.toml", '[keymap]\nquit = 3\n'))
    assert line.startswith(f"{tmp_path / 'd.toml'}:2: keymap.quit: expected a key string")


def test_keymap_conflicts_are_errors_naming_the_override(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '[keymap]\nlogs = "d"\nshell = "q"\n')
    lines = errors(path)
    assert lines == [
        f"{path}:2: keymap.logs: conflict: key 'd' is bound to 'describe' (table), 'logs' (table)",
        f"{path}:3: keymap.shell: conflict: key 'q' is bound to 'quit' (global), 'shell' (table)",
    ]
    # swapping two keys is fine: conflicts are computed after every override
    swapped = load_settings(write(tmp_path / "ok.toml", '[keymap]\nlogs = "s"\nshell = "l"\n'))
    assert swapped.key_map.conflicts() == []


def test_command_line_overrides(tmp_path: Path) -> None:
    base = load_settings(write(tmp_path / "c.toml", 'theme = "light"\nrefresh_interval = 3\n'))
    over = base.with_overrides(read_only=True, theme=None, prometheus_url="http://p:9090")
    assert over.read_only and over.theme == "light" and over.prometheus_url == "http://p:9090"
    assert over.refresh_interval == 3.0 and over.path == base.path
    assert base.read_only is False  # unchanged
    assert base.with_overrides() is base
    with pytest.raises(SettingsError) as info:
        base.with_overrides(refresh_interval=0.1, theme="Bad!")
    assert str(info.value).split("\n") == [
        "command line: --refresh-interval: must be at least 1 second and at most 3600 (got 0.1)",
        "command line: --theme: 'Bad!' is not a theme name (a-z, 0-9, '-' and '_')",
    ]


def test_problem_helper_points_at_the_key(tmp_path: Path) -> None:
    path = write(tmp_path / "c.toml", '# hello\nread_only = true\ntheme = "nope"\n')
    settings = load_settings(path)
    problem = settings.problem("theme", "unknown theme 'nope'")
    assert str(problem) == f"{path}:3: theme: unknown theme 'nope'"
    assert str(Settings().problem("theme", "x")) == "settings: theme: x"


def test_parse_settings_from_data() -> None:
    settings = parse_settings({"theme": "light", "keymap": {"tail": "F"}})
    assert settings.theme == "light" and settings.key_map.keys("tail") == ("F",)
    with pytest.raises(SettingsError, match=r"^settings: refresh_interval: must be at least 1 second"):
        parse_settings({"refresh_interval": 0})
