"""The image's `jupyter` (a stand-in, simulation only): `jupyter lab|notebook|server [--ip=IP]
[--port=P] [--no-browser] [--allow-root] [--ServerApp.token=T] [--notebook-dir=D]` serves a notebook
page with a token (as Jupyter Server does), and `jupyter server list` (or `notebook list`) prints
the running servers as Jupyter does: `http://localhost:8888/?token=... :: /workspace`."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # (the type checker reads the package's modules)
    from ._notebook import new_token, runtime_dir, serve
else:  # run by path from the wrapper
    from _notebook import new_token, runtime_dir, serve

APPS = ("lab", "notebook", "server")


def option(args: list[str], *names: str, default: str = "") -> str:
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return default


def list_servers() -> int:
    print("Currently running servers:")
    folder = runtime_dir()
    for name in sorted(os.listdir(folder)) if folder.is_dir() else ():
        if not (name.startswith("jpserver-") and name.endswith(".json")):
            continue
        try:
            info = json.loads((folder / name).read_text())
            os.kill(int(info["pid"]), 0)
        except (OSError, ValueError, KeyError):
            continue
        print(f"{info['url']}?token={info['token']} :: {info.get('root_dir', '')}")
    return 0


def main(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help"):
        print("usage: jupyter lab|notebook|server [--ip=IP] [--port=PORT] | jupyter server list")
        return 0
    app, rest = args[0], args[1:]
    if app not in APPS:
        print(f"jupyter: '{app}' is not a Jupyter command", file=sys.stderr)
        return 1
    if rest[:1] == ["list"]:
        return list_servers()
    port = option(rest, "--port", "--ServerApp.port", "--NotebookApp.port", default="8888")
    ip = option(rest, "--ip", "--ServerApp.ip", "--NotebookApp.ip", default="localhost")
    token = option(rest, "--ServerApp.token", "--NotebookApp.token", "--IdentityProvider.token") or new_token()
    root = option(rest, "--notebook-dir", "--ServerApp.root_dir", default=os.getcwd())
    serve(f"Jupyter {app.capitalize()}", ip, int(port), f"<p>notebook server in {root}</p>", token=token, root=root)
    return 0


sys.exit(main(sys.argv[1:]))
