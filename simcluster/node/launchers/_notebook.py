"""What the image's `jupyter` and `tensorboard` stand-ins share: a small web server on the pod's
own address (simulation of the pod's network namespace: the pods share the machine's network, so
`--ip=0.0.0.0` or `localhost` is taken to mean the pod's address, where another pod's server on the
same port never collides), its page, and the runtime files `jupyter server list` reads.
Standard library only (the launchers run with `python -S`)."""

from __future__ import annotations

import http.server
import json
import os
import secrets
import signal
import socket
import sys
from pathlib import Path

ANY = ("", "0.0.0.0", "::", "*", "localhost", "127.0.0.1")


def pod_address() -> str:
    """The pod's own address: its hostname's line in the pod's /etc/hosts, else $POD_IP, else
    127.0.0.1."""
    host = os.environ.get("HOSTNAME") or socket.gethostname()
    try:
        with open("/etc/hosts", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                words = line.split("#", 1)[0].split()
                if len(words) > 1 and host in words[1:] and words[0].startswith("127.") and words[0] != "127.0.0.1":
                    return words[0]
    except OSError:
        pass
    return os.environ.get("POD_IP") or "127.0.0.1"


def runtime_dir() -> Path:
    base = os.environ.get("JUPYTER_RUNTIME_DIR")
    if base:
        return Path(base)
    return Path(os.environ.get("HOME") or "/root") / ".local" / "share" / "jupyter" / "runtime"


def serve(title: str, ip: str, port: int, body: str, *, token: str = "", root: str = "") -> None:
    """Serve `body` on (the pod's) `ip`:`port` until SIGTERM; with a `token`, write the runtime file."""
    address = pod_address() if ip in ANY else ip
    page = (f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
            f"{body}</body></html>\n").encode()
    login = (f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1><form>"
             "Password or token: <input type=password name=password></form></body></html>\n").encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            shown = page
            if token and f"token={token}" not in self.path and self.headers.get("Authorization") != f"token {token}":
                if not self.path.startswith("/login"):  # as Jupyter Server: the login page first
                    self.send_response(302)
                    self.send_header("Location", "/login?next=%2F")
                    self.end_headers()
                    return
                shown = login
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(shown)))
            self.end_headers()
            self.wfile.write(shown)

        def log_message(self, fmt: str, *args: object) -> None:
            print(f"[{title}] {self.address_string()} {fmt % args}", file=sys.stderr, flush=True)

    server = http.server.ThreadingHTTPServer((address, port), Handler)
    info: Path | None = None
    if token:
        info = runtime_dir() / f"jpserver-{os.getpid()}.json"
        info.parent.mkdir(parents=True, exist_ok=True)
        host = "localhost" if ip in ANY else ip
        info.write_text(json.dumps({"url": f"http://{host}:{port}/", "hostname": host, "port": port,
                                    "token": token, "root_dir": root, "pid": os.getpid(), "secure": False}))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    where = f"http://{'localhost' if ip in ANY else ip}:{port}/"
    print(f"[{title}] serving at {where}" + (f"?token={token}" if token else ""), file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        if info is not None:
            info.unlink(missing_ok=True)


def new_token() -> str:
    return secrets.token_hex(24)
