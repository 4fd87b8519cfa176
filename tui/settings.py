"""Typed settings for the dashboard, read from a TOML file.

Where: ``$RANKS_CONFIG`` if set, else ``$XDG_CONFIG_HOME/ranks/config.toml`` (an absolute
XDG_CONFIG_HOME), else ``~/.config/ranks/config.toml``. A missing default file means defaults; a
missing file named by RANKS_CONFIG (or passed explicitly) is an error. Command-line flags go
over the file with `Settings.with_overrides`. User themes are read from ``themes/`` beside the
file (`themes_dir`).

Every problem is one line naming the file, the line and the key, e.g.
``~/.config/ranks/config.toml:4: refresh_interval: must be at least 1 second (got 0.5)``; unknown
keys are rejected with a "did you mean" hint; bad TOML gives its line and column.

Example::

    prometheus_url = "http://prometheus.monitoring:9090"
    refresh_interval = 5          # seconds, >= 1
    theme = "dark"                # a built-in (dark, light, high-contrast, colour-blind) or a user theme
    colours = "auto"              # auto | truecolor | 256 | 16 | mono (NO_COLOR always means mono)
    default_project = "team-a"
    read_only = false
    namespaces = ["runai-team-a", "runai-team-b"]   # watched when namespaces cannot be listed
    ascii = false                 # ASCII glyphs instead of Unicode
    coalesce = 0.05               # seconds to gather model changes before a redraw
    idle_threshold_percent = 5    # an interactive session's GPUs all under this % are idle
    hang_after_minutes = 10       # a running job silent with every GPU idle this long is hung
    progress_patterns = ['epoch (?P<step>\\d+)/(?P<total>\\d+) .* loss (?P<loss>[\\d.]+)']  # your log's steps
    stacks_image = "registry.local/py-spy:0.4"  # ranks stacks: a debug image with py-spy, for images without it

    [metrics]                     # Prometheus metric names (keys as in monitors.promql)
    util = "DCGM_FI_DEV_GPU_UTIL"

    [keymap]                      # binding id -> key(s); see tui.keymap.CATALOGUE
    quit = "ctrl+q"
    logs = ["l", "L"]
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from monitors.promql import DEFAULT_METRIC_NAMES
from themes.config_files import (
    NAME_RE,
    ConfigFileError,
    ConfigProblem,
    find_line,
    problems_from_validation,
    read_toml,
    user_themes_dir,
)

from .config_file import CONFIG_ENV, config_path

if TYPE_CHECKING:
    from monitors.diagnostics.hangs import Thresholds

    from .keymap import Keymap

MIN_REFRESH = 1.0

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


class SettingsError(ConfigFileError):
    """Settings that cannot be used; ``problems`` holds one `ConfigProblem` (one line) each."""


def _namespace(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise ValueError(f"{value!r} is not a namespace name (lower-case letters, digits and '-', "
                         "at most 63)")
    return value


def _metric(value: str) -> str:
    if not _METRIC.fullmatch(value):
        raise ValueError(f"{value!r} is not a Prometheus metric name")
    return value


Namespace = Annotated[str, AfterValidator(_namespace)]
MetricName = Annotated[str, AfterValidator(_metric)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class MetricNames(_Strict):
    """Prometheus metric names, by the keys `monitors.promql.metric_names` takes."""

    util: MetricName = DEFAULT_METRIC_NAMES["util"]
    sm_active: MetricName = DEFAULT_METRIC_NAMES["sm_active"]
    mem_used: MetricName = DEFAULT_METRIC_NAMES["mem_used"]
    mem_free: MetricName = DEFAULT_METRIC_NAMES["mem_free"]
    power: MetricName = DEFAULT_METRIC_NAMES["power"]
    temp: MetricName = DEFAULT_METRIC_NAMES["temp"]
    xid: MetricName = DEFAULT_METRIC_NAMES["xid"]
    reasons: MetricName = DEFAULT_METRIC_NAMES["reasons"]


class Settings(_Strict):
    prometheus_url: str | None = None
    """Prometheus base URL; None: discovered through the API server."""
    metrics: MetricNames = Field(default_factory=MetricNames)
    refresh_interval: float = 5.0
    """Seconds between metric refreshes (>= 1)."""
    theme: str = "dark"
    colours: Literal["auto", "truecolor", "256", "16", "mono"] = "auto"
    keymap: dict[str, Any] = Field(default_factory=dict)
    """Binding id -> key string or list of key strings (validated by `tui.keymap.Keymap`)."""
    default_project: Namespace | None = None
    read_only: bool = False
    namespaces: list[Namespace] = Field(default_factory=list)
    """Namespaces to watch when the user may not list namespaces."""
    ascii: bool = False
    coalesce: float = 0.05
    """Seconds to gather model changes before subscribers see them."""
    idle_threshold_percent: float = 5.0
    """GPU utilisation (%) under which an interactive session's GPUs count as idle (`ranks idle`,
    the cluster-load view); more than 0, at most 100."""

    hang_after_minutes: float = 10.0
    """A running job whose ranks are all silent and whose GPUs are all idle this long is hung
    (the workloads list's marker, the detail, `ranks get`, `ranks why`); more than 0."""
    stacks_image: str | None = None
    """`ranks stacks`: an image with py-spy (and sh) run as an ephemeral container beside a training
    container whose image lacks py-spy (`--image` for one command)."""
    progress_patterns: list[str] = []
    """Regexes with named groups step, total, loss, throughput (any of them) that read training
    progress from your logs, tried before the built-in ones (tqdm, Lightning, Hugging Face, Keras,
    Horovod/TensorFlow, key=value, JSON)."""

    _path: Path | None = PrivateAttr(default=None)
    _text: str = PrivateAttr(default="")

    @field_validator("prometheus_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {value!r}")
        return value.strip().rstrip("/")

    @field_validator("refresh_interval")
    @classmethod
    def _refresh(cls, value: float) -> float:
        if not MIN_REFRESH <= value <= 3600:
            raise ValueError(f"must be at least {MIN_REFRESH:g} second and at most 3600 (got {value:g})")
        return float(value)

    @field_validator("coalesce")
    @classmethod
    def _coalesce(cls, value: float) -> float:
        if not 0 <= value <= 2:
            raise ValueError(f"must be between 0 and 2 seconds (got {value:g})")
        return float(value)

    @field_validator("idle_threshold_percent")
    @classmethod
    def _idle_threshold(cls, value: float) -> float:
        if not 0 < value <= 100:
            raise ValueError(f"must be more than 0 and at most 100 (got {value:g})")
        return float(value)

    @field_validator("hang_after_minutes")
    @classmethod
    def _hang_after(cls, value: float) -> float:
        if not value > 0:
            raise ValueError(f"must be more than 0 minutes (got {value:g})")
        return float(value)

    @field_validator("progress_patterns")
    @classmethod
    def _progress_patterns(cls, value: list[str]) -> list[str]:
        from monitors.diagnostics.progress import compile_patterns

        compile_patterns(value)  # (a bad one: ValueError naming it)
        return value

    @field_validator("theme")
    @classmethod
    def _theme(cls, value: str) -> str:
        if not NAME_RE.fullmatch(value):
            raise ValueError(f"{value!r} is not a theme name (a-z, 0-9, '-' and '_')")
        return value

    @field_validator("namespaces")
    @classmethod
    def _dedupe(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))

    @property
    def path(self) -> Path | None:
        """The file these settings were read from (None: defaults only)."""
        return self._path

    @property
    def metric_names(self) -> dict[str, str]:
        return self.metrics.model_dump()

    @property
    def key_map(self) -> Keymap:
        from .keymap import Keymap  # (Textual's bindings: the dashboard's, not a command's settings)

        return Keymap(self.keymap)

    def problem(self, field: str, message: str) -> ConfigProblem:
        """A one-line problem about `field` (dotted) found later, e.g. an unknown theme name."""
        loc = tuple(field.split("."))
        return ConfigProblem(str(self._path) if self._path else "settings", field, message,
                             find_line(self._text, loc) if self._text else None)

    def with_overrides(self, source: str = "command line", **values: Any) -> Settings:
        """A copy with `values` (None values ignored) over these settings, validated the same way;
        errors name `source` and the flag (``--read-only``)."""
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            return self
        try:
            out = Settings.model_validate({**self.model_dump(), **values})
        except ValidationError as exc:
            problems = [ConfigProblem(source, "--" + p.field.replace("_", "-"), p.message)
                        for p in problems_from_validation(exc, source, "", Settings)]
            raise SettingsError(problems) from None
        if "keymap" in values and (problems := _keymap_problems(out.keymap, source, "")):
            raise SettingsError(problems)
        out._path, out._text = self._path, self._text
        # what was set stays what the file (or a flag) set, not every field the copy carried over
        object.__setattr__(out, "__pydantic_fields_set__", set(self.model_fields_set) | set(values))
        return out


def themes_dir(settings: Settings | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """Where user themes live: ``themes/`` beside the configuration file."""
    path = settings.path if settings is not None and settings.path is not None else config_path(environ)
    return user_themes_dir(path)


def _keymap_problems(keymap: Any, path: str, text: str) -> list[ConfigProblem]:
    if not isinstance(keymap, Mapping) or not keymap:
        return []  # the model reports the type; an empty keymap changes nothing
    from .keymap import Keymap, KeymapError

    try:
        checked = Keymap(keymap)
    except KeymapError as exc:
        return [ConfigProblem(path, f"keymap.{bid}", msg, find_line(text, ("keymap", bid)))
                for bid, msg in exc.problems]
    problems = []
    for conflict in checked.conflicts():
        changed = [bid for bid in conflict.ids if bid in checked.overrides] or list(conflict.ids[:1])
        problems.append(ConfigProblem(path, f"keymap.{changed[0]}", f"conflict: {conflict}",
                                      find_line(text, ("keymap", changed[0]))))
    return problems


def _by_line(problems: list[ConfigProblem]) -> list[ConfigProblem]:
    return sorted(problems, key=lambda p: p.line if p.line is not None else 1 << 30)


def parse_settings(data: Mapping[str, Any], path: str = "settings", text: str = "") -> Settings:
    """Validate settings data (as read from TOML); raises `SettingsError` listing every problem."""
    problems = _keymap_problems(data.get("keymap", {}), path, text)
    try:
        settings = Settings.model_validate(dict(data))
    except ValidationError as exc:
        raise SettingsError(_by_line(problems + problems_from_validation(exc, path, text, Settings))) from None
    if problems:
        raise SettingsError(_by_line(problems))
    settings._text = text
    return settings


def load_settings(path: Path | str | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from `path`, or from `config_path(environ)`; raises `SettingsError` (one line per
    problem). Only the default location may be missing (-> defaults)."""
    env = os.environ if environ is None else environ
    explicit = path is not None or bool(env.get(CONFIG_ENV))
    file = Path(path).expanduser() if path is not None else config_path(env)
    if not file.exists():
        if explicit:
            why = f" (set by {CONFIG_ENV})" if path is None else ""
            raise SettingsError([ConfigProblem(str(file), "", f"configuration file not found{why}")])
        settings = Settings()
        settings._path = None
        return settings
    if file.is_dir():
        raise SettingsError([ConfigProblem(str(file), "", "is a directory, not a configuration file")])
    data, text = read_toml(file, SettingsError)
    settings = parse_settings(data, str(file), text)
    settings._path = file
    return settings


# -- per-context settings ---------------------------------------------------------------------------------
# A kubeconfig context may carry settings of its own (its `ranks` extension, `monitors.connection`):
# `ranks demo` gives its cluster's contexts `hang_after_minutes = 1`, so that its dashboard and a
# `ranks why` in another terminal judge the same way. An explicit value in the configuration file
# wins; then the context's; then the default. Every verdict says which it used (`Thresholds.said`).

def _home_short(path: Path) -> str:
    home = str(Path.home())
    text = str(path)
    return "~" + text[len(home):] if home not in ("", "/") and text.startswith(home + os.sep) else text


def hang_after(settings: Settings, cfg: Any = None) -> tuple[float, str]:
    """(minutes, where they came from) for `hang_after_minutes`: the configuration file's value when
    it sets one, else the kubeconfig context's `ranks` extension, else the default. A context value
    that is no number of minutes over 0 raises `SettingsError` (one line naming the context)."""
    key = "hang_after_minutes"
    if key in settings.model_fields_set:
        where = f"in {_home_short(settings.path)}" if settings.path is not None else "of the settings"
        return settings.hang_after_minutes, f"{key} {where}"
    ext = getattr(cfg, "context_settings", None) or {}
    if key in ext:
        context = getattr(cfg, "context", "") or "?"
        value = ext[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 10**7:
            from monitors.connection import EXTENSION
            from monitors.sanitize import clean

            raise SettingsError([ConfigProblem(
                f"kubeconfig context {clean(context, limit=100)}", f"extension {EXTENSION}: {key}",
                f"must be a number of minutes more than 0 (got {clean(repr(value), limit=60)})")])
        return float(value), f"{key} of context {context}"
    return Settings.model_fields[key].default, f"the default {key}"


def hang_thresholds(settings: Settings, cfg: Any = None) -> Thresholds:
    """The hang threshold to judge by (`hang_after`), with its source to say."""
    from monitors.diagnostics.hangs import Thresholds

    minutes, source = hang_after(settings, cfg)
    return Thresholds(hang_after=minutes * 60, source=source)
