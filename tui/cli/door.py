"""The SSH door's side of a session's `ranks` process (`ranks serve --ssh`, `sessions.ssh`).

The server never adds words to the user's command line (`ssh host list -p` would take what it
added as the project's value, and an error would show the server's paths): it gives its settings
out of band, as JSON in `$RANKS_SERVER_SETTINGS` (`sessions.ssh.SERVER_SETTINGS_ENV`):

- `context`, `request_timeout`, `prometheus`, `as_user`, `as_groups`, `namespace`, `read_only`: the
  global flags' values the session runs with (`tui.cli.options.PINNED`); no flag of the user's
  changes them, and the user giving one of the server's flags is a usage error (exit 2). The
  kubeconfig files come as `$KUBECONFIG`;
- `cpu_seconds`, `nice`: a command's limits (`apply_limits`): RLIMIT_CPU, then a one-line error
  when it is used up; a lower priority, so that one user's command cannot starve the dashboards.

`scrub` keeps the server's paths out of what an error says over the door.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from collections.abc import Mapping
from typing import Any

from sessions.ssh import SERVER_SETTINGS_ENV

# the global flags a session over the door may not give: the cluster, the identity, the endpoint
SERVER_FLAGS = {"kubeconfig": "--kubeconfig", "context": "--context", "prometheus": "--prometheus",
                "request_timeout": "--request-timeout", "as_user": "--as", "as_groups": "--as-group",
                "namespace": "--namespace"}
_PINNED_TYPES: dict[str, type | tuple[type, ...]] = {
    "context": str, "request_timeout": (int, float), "prometheus": str, "as_user": str, "as_groups": list,
    "namespace": str, "read_only": bool}
_LIMIT_TYPES: dict[str, type | tuple[type, ...]] = {"cpu_seconds": (int, float), "nice": int}
CPU_GRACE = 5  # seconds of CPU between the soft limit (the message) and the hard one (SIGKILL)


class DoorSettings:
    """What the server set for this session: `pinned` (global flags' values), `cpu_seconds`, `nice`."""

    def __init__(self, pinned: dict[str, Any], cpu_seconds: float | None, nice: int | None) -> None:
        self.pinned = pinned
        self.cpu_seconds = cpu_seconds
        self.nice = nice


def server_settings(environ: Mapping[str, str] | None = None) -> DoorSettings | None:
    """The server's settings for this session, None outside the door; ValueError for a malformed
    value (only the server sets it)."""
    raw = (os.environ if environ is None else environ).get(SERVER_SETTINGS_ENV)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ValueError(f"${SERVER_SETTINGS_ENV} is not a JSON object (it is set by ranks serve)")
    types = {**_PINNED_TYPES, **_LIMIT_TYPES}
    for key, value in data.items():
        if key not in types or (isinstance(value, bool) and types[key] is not bool) \
                or not isinstance(value, types[key]):
            raise ValueError(f"${SERVER_SETTINGS_ENV}: {key!r} is not a setting of ranks serve, or not of its type")
    pinned = {k: v for k, v in data.items() if k in _PINNED_TYPES}
    if "as_groups" in pinned:
        if not all(isinstance(g, str) for g in pinned["as_groups"]):
            raise ValueError(f"${SERVER_SETTINGS_ENV}: 'as_groups' is not a list of names")
        pinned["as_groups"] = tuple(pinned["as_groups"]) or None
    cpu = data.get("cpu_seconds")
    if cpu is not None and not 0 < cpu < 10 ** 9:
        raise ValueError(f"${SERVER_SETTINGS_ENV}: 'cpu_seconds' is out of range")
    return DoorSettings({k: v for k, v in pinned.items() if v is not None}, cpu, data.get("nice"))


def apply_limits(settings: DoorSettings) -> None:
    """This process's limits over the door: no core file (it would be written on the server), at
    most `cpu_seconds` of CPU (then one line and exit 1; SIGKILL `CPU_GRACE` s later whatever it
    does), and `nice` added to its priority. Inherited by what it starts."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if settings.cpu_seconds:  # (counted from the process's start)
        soft = max(1, int(settings.cpu_seconds + 0.999))
        hard = soft + CPU_GRACE
        _, hard_now = resource.getrlimit(resource.RLIMIT_CPU)
        if hard_now != resource.RLIM_INFINITY:  # (an operator's own lower limit stays)
            soft, hard = min(soft, hard_now), min(hard, hard_now)
        signal.signal(signal.SIGXCPU, _cpu_used_up(settings.cpu_seconds))
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    if settings.nice:
        os.nice(settings.nice)


def _cpu_used_up(seconds: float) -> Any:
    def handler(signum: int, frame: Any) -> None:
        from monitors.humanize import plural

        message = (f"ranks: error: stopped after {plural(round(seconds), 'second')} of CPU: the server's limit "
                   "for one command (ranks serve --command-cpu-limit)\n")
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        os.write(2, message.encode())
        os._exit(1)

    return handler


def scrub(message: str, environ: Mapping[str, str] | None = None) -> str:
    """`message` without the server's paths, over the door: its kubeconfig files are "the server's
    kubeconfig", its home directory "~". Unchanged elsewhere."""
    env = os.environ if environ is None else environ
    if SERVER_SETTINGS_ENV not in env:
        return message
    for path in sorted((p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p), key=len, reverse=True):
        message = message.replace(path, "the server's kubeconfig")
    home = env.get("HOME", "")
    if len(home) > 1:
        message = message.replace(home.rstrip("/") + "/", "~/")
    return message
