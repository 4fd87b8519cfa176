"""A real terminal for tests: one private tmux server (its own socket) running one window of a
fixed size, driven with send-keys and read with capture-pane; plus `stty -a` parsing."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.waiting import wait_for


def tmux_binary() -> str:
    path = shutil.which("tmux")
    if path is None:
        pytest.fail("tmux is not installed: run scripts/system-deps.sh (it installs tmux)", pytrace=False)
    return path


class Tmux:
    def __init__(self, env: dict[str, str], width: int, height: int, *, name: str = "ranks",
                 history: bool = False) -> None:
        self.binary = tmux_binary()
        self.socket = f"{name}-{os.getpid()}-{uuid.uuid4().hex[:10]}"
        self.env = env
        self.width, self.height = width, height
        self.history = history  # screen() includes the scrollback, wrapped lines joined
        self.target = f"{self.socket}:0.0"
        self.socket_path: str | None = None

    def run(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([self.binary, "-L", self.socket, "-f", "/dev/null", *args], env=self.env,
                              capture_output=True, text=True, timeout=15)
        if check and proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc.stdout

    def start(self, command: str, cwd: Path) -> None:
        self.run("new-session", "-d", "-s", self.socket, "-x", str(self.width), "-y", str(self.height),
                 "-c", str(cwd), command)
        self.socket_path = self.run("display-message", "-p", "-t", self.target, "#{socket_path}").strip()
        assert self.size() == (self.width, self.height), f"tmux pane is {self.size()}"

    def size(self) -> tuple[int, int]:
        w, h = self.run("display-message", "-p", "-t", self.target, "#{pane_width} #{pane_height}").split()
        return int(w), int(h)

    def resize(self, width: int, height: int) -> None:
        self.run("resize-window", "-t", self.target, "-x", str(width), "-y", str(height))
        assert self.size() == (width, height)

    def kill(self) -> None:
        self.run("kill-server", check=False)
        if self.socket_path:
            with contextlib.suppress(OSError):
                os.unlink(self.socket_path)

    def screen(self, *, join: bool = False) -> str:
        if self.history:
            return self.run("capture-pane", "-p", "-J", "-S", "-", "-t", self.target)
        return self.run("capture-pane", "-p", *(["-J"] if join else []), "-t", self.target)

    def keys(self, *keys: str) -> None:
        """tmux key names: Enter, Escape, Down, C-c, q, ..."""
        self.run("send-keys", "-t", self.target, *keys)

    def type(self, text: str) -> None:
        self.run("send-keys", "-t", self.target, "-l", text)

    def flags(self) -> dict[str, str]:
        names = ("alternate_on", "cursor_flag", "mouse_any_flag", "mouse_button_flag", "mouse_standard_flag",
                 "mouse_all_flag", "mouse_sgr_flag")
        out = self.run("display-message", "-p", "-t", self.target, " ".join(f"#{{{n}}}" for n in names))
        return dict(zip(names, out.split(), strict=True))

    def wait_for(self, what: str | Callable[[str], bool], timeout: float = 30.0, why: str = "") -> str:
        """Poll the screen until it shows `what` (text, or a predicate on the screen); the limit is
        generous (a busy machine's dashboard can take seconds to draw), only a failure waits it out."""
        check = (lambda s: what in s) if isinstance(what, str) else what
        label = why or (repr(what) if isinstance(what, str) else "condition")
        screen = ""

        def shows() -> bool:
            nonlocal screen
            screen = self.screen()
            return check(screen)

        wait_for(shows, timeout, label, interval=0.1, detail=lambda: f"screen:\n{screen}")
        return screen


def stty_flags(text: str) -> set[str]:
    """The settings of `stty -a`, without the line with the speed and the size."""
    lines = [ln for ln in text.splitlines() if not ln.startswith("speed ")]
    return set(re.split(r"[\s;]+", " ".join(lines))) - {""}
