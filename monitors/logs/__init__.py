"""Merged logs of every rank of a workload (`ranks logs`, the dashboard's log view).

- `engine.LogEngine`: follows every container of every rank, merges by timestamp, bounded memory.
- `stream.LogStream`: one container's log with reopen from the last timestamp, no duplicates.
- `merge.Merger`: exact k-way merge for history, while following a watermark across the open streams (a line goes out once every other stream has shown a later one or been quiet for the grace).
- `buffer.LineBuffer`: the indexable merged buffer with a global cap and a dropped-lines marker.
- `terminal_text.sanitize_line`: untrusted bytes -> display-safe text + style spans.
- `first_failure.first_failure_report`: the rank that failed first and its last lines.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the type checker sees every name; at run time each is imported on first use)
    from .buffer import FilteredView, LineBuffer
    from .engine import LogEngine, LogOptions
    from .filters import FilterError, LineFilter
    from .first_failure import FailureReport, first_failure_report
    from .lines import LogLine, Origin, format_ts, parse_ts
    from .terminal_text import SafeText, sanitize_line

# where each name lives: `ranks get` reads the ranks' tails (`tails`, `lines`) without importing the
# engine that follows them (streams, merge, buffers, filters)
_HOMES = {
    **dict.fromkeys(("FilteredView", "LineBuffer"), "buffer"),
    **dict.fromkeys(("LogEngine", "LogOptions"), "engine"),
    **dict.fromkeys(("FilterError", "LineFilter"), "filters"),
    **dict.fromkeys(("FailureReport", "first_failure_report"), "first_failure"),
    **dict.fromkeys(("LogLine", "Origin", "format_ts", "parse_ts"), "lines"),
    **dict.fromkeys(("SafeText", "sanitize_line"), "terminal_text"),
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
    "FailureReport",
    "FilterError",
    "FilteredView",
    "LineBuffer",
    "LineFilter",
    "LogEngine",
    "LogLine",
    "LogOptions",
    "Origin",
    "SafeText",
    "first_failure_report",
    "format_ts",
    "parse_ts",
    "sanitize_line",
]
