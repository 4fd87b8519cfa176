"""Where the configuration file is, and a light read of the one setting every command needs
(`read_only`) without the full settings model (pydantic, themes, Textual): `ranks shell` and the
other one-shot commands start faster. The dashboard validates the whole file (tui.settings)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

CONFIG_ENV = "RANKS_CONFIG"
APP_NAME = "ranks"
CONFIG_FILE = "config.toml"


class ConfigReadError(ValueError):
    """The file cannot be read or is not valid TOML (one line)."""


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The configuration file: $RANKS_CONFIG, else $XDG_CONFIG_HOME/ranks/config.toml, else
    ~/.config/ranks/config.toml (it may not exist)."""
    env = os.environ if environ is None else environ
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    xdg = env.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg):
        base = Path(xdg)
    else:
        home = env.get("HOME")
        base = (Path(home) if home else Path.home()) / ".config"
    return base / APP_NAME / CONFIG_FILE


def read_only_setting(environ: Mapping[str, str] | None = None) -> tuple[bool, Path | None]:
    """(read_only, the file that says so) from the configuration file, read with tomllib only."""
    env = os.environ if environ is None else environ
    path = config_path(env)
    if not path.exists():
        if env.get(CONFIG_ENV):
            raise ConfigReadError(f"{path}: configuration file not found (set by {CONFIG_ENV})")
        return False, None
    from monitors.state_dir import read_regular

    try:
        data = tomllib.loads(read_regular(path).decode())  # (only a regular file: a FIFO would block)
    except OSError as exc:
        raise ConfigReadError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigReadError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigReadError(f"{path}: invalid TOML: {exc}") from None
    value = data.get("read_only", False)
    if not isinstance(value, bool):
        raise ConfigReadError(f"{path}: read_only: must be true or false (got {value!r})")
    return value, path
