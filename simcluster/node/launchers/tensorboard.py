"""The image's `tensorboard` (a stand-in, simulation only): `tensorboard --logdir DIR [--host H]
[--port 6006] [--bind_all]` serves a page naming the runs of DIR (its subdirectories)."""

from __future__ import annotations

import html
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # (the type checker reads the package's modules)
    from ._notebook import serve
else:  # run by path from the wrapper
    from _notebook import serve


def option(args: list[str], name: str, default: str = "") -> str:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def main(args: list[str]) -> int:
    logdir = option(args, "--logdir")
    if not logdir:
        print("Error: A logdir or db must be specified. For example `tensorboard --logdir mylogdir`",
              file=sys.stderr)
        return 1
    port = int(option(args, "--port", "6006"))
    host = "0.0.0.0" if "--bind_all" in args else option(args, "--host", "localhost")
    runs = sorted(d for d in os.listdir(logdir) if os.path.isdir(os.path.join(logdir, d))) if os.path.isdir(logdir) else []
    body = "<p>TensorBoard: runs in " + html.escape(logdir) + ": " + (html.escape(", ".join(runs)) or "none yet") + "</p>"
    serve("TensorBoard", host, port, body)
    return 0


sys.exit(main(sys.argv[1:]))
