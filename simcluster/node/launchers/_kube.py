"""How a simulated launcher inside a pod reaches the API server: stdlib only (the wrappers run
Python with `-S`, so nothing outside the standard library is importable until `_site()`).

- Address: `KUBERNETES_SERVICE_HOST` / `KUBERNETES_SERVICE_PORT` (what the kubelet gives every
  container, `podenv.service_env`).
- Credentials: the service-account files `/var/run/secrets/kubernetes.io/serviceaccount/`
  (`token`, `ca.crt`, `namespace`), else the same path under `$HOME` (pods without a mount
  namespace have HOME = the pod's root with its volumes under it), else the kubeconfig simcluster
  writes at `$HOME/.kube/config` (its current context: server, CA, token). Either way the token is
  the pod's service account's (`system:serviceaccount:<ns>:<name>`), whose rules cover what the
  launchers do in their own namespace: read pods, exec into them, the torchrun rendezvous.
- TLS: https when a CA is known (a non-empty `ca.crt`, or the kubeconfig says https), plain http
  otherwise (simcluster started with `tls=False`; it still wants the token).

`Api.exec()` opens `pods/exec` over WebSocket (`v5.channel.k8s.io`, else `v4.channel.k8s.io`)
with a small client of its own (handshake, frames, ping/pong): one byte of channel then the data,
the exit `Status` on channel 3. `ExecStream.abort()` drops the connection (the API server then
kills the command, as it does for any client that goes away).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import socket
import ssl
import sys
import threading

TYPE_CHECKING = False  # (not typing's: importing it costs a launch ~3 ms)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
STDOUT, STDERR, ERROR = 1, 2, 3
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10
# simcluster's pod roots: <workdir>/pods/<namespace>_<name>_<uid>
_POD_ROOT = re.compile(r"^(?P<ns>[a-z0-9][-a-z0-9]*)_(?P<name>[a-z0-9][-.a-z0-9]*)_(?P<uid>[-0-9a-f]+)$")


class ApiError(Exception):
    """A request the API server refused (`code` is the HTTP status, 0 when it was not reached)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# -- the pod we are in -----------------------------------------------------------------------------


def pod_root() -> str | None:
    """$HOME when it is a simcluster pod root (processes without a mount namespace), else None."""
    home = os.environ.get("HOME", "")
    if home and _POD_ROOT.match(os.path.basename(home.rstrip("/"))) \
            and os.path.basename(os.path.dirname(home.rstrip("/"))) == "pods":
        return home.rstrip("/")
    return None


def pod_file(path: str) -> str | None:
    """An absolute in-pod path as it can be opened here: as is, else under the pod root."""
    if os.path.exists(path):
        return path
    root = pod_root() or os.environ.get("HOME", "")
    if root and path.startswith("/"):
        alt = root.rstrip("/") + path
        if os.path.exists(alt):
            return alt
    return None


def in_pod_path(path: str) -> str:
    """A path of this process (e.g. its cwd) as the pod sees it: under a pod root it is relative
    to that root."""
    root = pod_root()
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root):] or "/"
    return path


def _read(path: str) -> str | None:
    found = pod_file(path)
    if found is None:
        return None
    try:
        with open(found, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return None


def hostname() -> str:
    """This pod's hostname (the kubelet's HOSTNAME, else the UTS name)."""
    return os.environ.get("HOSTNAME") or socket.gethostname()


def namespace() -> str:
    ns = _read(f"{SA_DIR}/namespace") or os.environ.get("POD_NAMESPACE", "")
    if not ns:
        root = pod_root()
        m = _POD_ROOT.match(os.path.basename(root)) if root else None
        ns = m.group("ns") if m else ""
    return ns or "default"


def _site() -> None:
    """Make site-packages importable (the wrappers start Python with -S)."""
    if sys.flags.no_site:
        import site

        site.main()


def _kubeconfig() -> dict[str, Any] | None:
    """server, token and CA of the current context of $KUBECONFIG or $HOME/.kube/config."""
    path = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or os.path.join(
        os.environ.get("HOME", ""), ".kube", "config")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return None
    _site()
    try:
        import yaml

        cfg = yaml.safe_load(text) or {}
    except Exception:
        return None
    by_name = {k: {i.get("name"): i.get(k[:-1]) or {} for i in cfg.get(k) or [] if isinstance(i, dict)}
               for k in ("contexts", "clusters", "users")}
    ctx = by_name["contexts"].get(cfg.get("current-context")) or {}
    cluster = by_name["clusters"].get(ctx.get("cluster")) or {}
    user = by_name["users"].get(ctx.get("user")) or {}
    ca = cluster.get("certificate-authority-data")
    return {
        "server": cluster.get("server", ""),
        "ca": base64.b64decode(ca) if ca else None,
        "token": user.get("token"),
        "namespace": ctx.get("namespace"),
    }


# -- the API ----------------------------------------------------------------------------------------


class Api:
    def __init__(self, host: str, port: int, tls: bool, token: str | None, ca_file: str | None = None,
                 ca_data: bytes | None = None) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.token = token
        self.ca_file = ca_file
        self.ca_data = ca_data
        self._ctx: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    @classmethod
    def in_pod(cls) -> Api:
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
        token = _read(f"{SA_DIR}/token")
        ca_file = pod_file(f"{SA_DIR}/ca.crt")
        if ca_file is not None and os.path.getsize(ca_file) == 0:
            ca_file = None
        ca_data: bytes | None = None
        tls = ca_file is not None
        if token is None or not host:
            kc = _kubeconfig()
            if kc is not None:
                server = str(kc["server"])
                m = re.match(r"^(https?)://\[?([^\]/]+?)\]?(?::(\d+))?/?$", server)
                if m and not host:
                    host, port = m.group(2), m.group(3) or ("443" if m.group(1) == "https" else "80")
                if m and ca_file is None:
                    tls = m.group(1) == "https"
                    ca_data = kc["ca"]
                if token is None:
                    token = kc["token"]
        if not host:
            raise ApiError(0, "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and "
                              "KUBERNETES_SERVICE_PORT must be defined")
        return cls(host, int(port or (443 if tls else 80)), tls, token or None, ca_file, ca_data)

    # -- plumbing --------------------------------------------------------------------------------
    def ssl_context(self) -> ssl.SSLContext:
        with self._lock:
            if self._ctx is None:
                if self.ca_file or self.ca_data:
                    ctx = ssl.create_default_context(
                        cafile=self.ca_file, cadata=self.ca_data.decode() if self.ca_data else None)
                else:
                    ctx = ssl.create_default_context()
                self._ctx = ctx
            return self._ctx

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def request(self, method: str, path: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
        """One JSON request; (status, decoded body). ApiError(0, ...) when the server is not reached."""
        import http.client

        conn: http.client.HTTPConnection
        if self.tls:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.ssl_context())
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        headers = {"Accept": "application/json", **self._headers()}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ApiError(0, f"{method} {path}: {exc}") from None
        finally:
            conn.close()
        try:
            return resp.status, json.loads(raw) if raw else None
        except ValueError:
            return resp.status, {"message": raw.decode("utf-8", "replace")}

    def connect(self, timeout: float = 30.0) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls:
            try:
                sock = self.ssl_context().wrap_socket(sock, server_hostname=self.host)
            except BaseException:
                sock.close()
                raise
        return sock

    # -- exec ------------------------------------------------------------------------------------
    def exec(self, ns: str, pod: str, argv: list[str], container: str = "",
             timeout: float = 30.0) -> ExecStream:
        """Start `argv` in the pod (stdout and stderr, no stdin, no terminal)."""
        query = [("command", a) for a in argv] + [("stdout", "true"), ("stderr", "true")]
        if container:
            query.append(("container", container))
        path = f"/api/v1/namespaces/{quote(ns, safe='')}/pods/{quote(pod, safe='')}/exec?{urlencode(query)}"
        try:
            sock = self.connect(timeout)
        except OSError as exc:
            raise ApiError(0, f"dial tcp {self.host}:{self.port}: {exc}") from None
        try:
            return ExecStream.handshake(sock, self, path, timeout)
        except BaseException:
            with contextlib.suppress(OSError):
                sock.close()
            raise


_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def quote(text: str, safe: str = "") -> str:
    """Percent-encoding (urllib.parse.quote, whose import costs a launch ~8 ms)."""
    keep = _UNRESERVED | frozenset(safe.encode())
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in text.encode())


def urlencode(pairs: list[tuple[str, str]]) -> str:
    return "&".join(f"{quote(k)}={quote(v)}" for k, v in pairs)


def status_message(body: Any, code: int) -> str:
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return f"the server responded with the status code {code}"


def exit_code(status: Any) -> int | None:
    """The exit code in an exec Status (0 on Success), None when it carries none."""
    if not isinstance(status, dict):
        return None
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in (status.get("details") or {}).get("causes") or []:
            if cause.get("reason") == "ExitCode":
                with contextlib.suppress(TypeError, ValueError):
                    return int(cause.get("message"))
    return None


class ExecStream:
    """A pods/exec WebSocket: `frames()` yields (channel, data); `status` is the exit Status."""

    def __init__(self, sock: socket.socket, leftover: bytes, protocol: str) -> None:
        self.sock = sock
        self.buf = bytearray(leftover)
        self.protocol = protocol
        self.status: Any = None
        self.closed = False

    @classmethod
    def handshake(cls, sock: socket.socket, api: Api, path: str, timeout: float) -> ExecStream:
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1",
            f"Host: {api.host}:{api.port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            f"Sec-WebSocket-Protocol: {', '.join(PROTOCOLS)}",
            *(f"{k}: {v}" for k, v in api._headers().items()),
        ]
        sock.settimeout(timeout)
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise ApiError(0, "the connection was closed during the WebSocket handshake")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        parts = status_line.split(" ", 2)
        code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if code != 101:
            length = int(headers.get("content-length") or 0)
            while len(rest) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                rest += chunk
            try:
                body = json.loads(rest) if rest else None
            except ValueError:
                body = {"message": rest.decode("utf-8", "replace").strip()}
            raise ApiError(code, status_message(body, code))
        accept = base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()
        if headers.get("sec-websocket-accept") != accept:
            raise ApiError(0, "the server answered the WebSocket handshake with a wrong key")
        sock.settimeout(None)
        return cls(sock, rest, headers.get("sec-websocket-protocol", ""))

    # -- frames ----------------------------------------------------------------------------------
    def _fill(self, n: int) -> bool:
        while len(self.buf) < n:
            try:
                chunk = self.sock.recv(65536)
            except (OSError, ValueError):
                return False
            if not chunk:
                return False
            self.buf += chunk
        return True

    def _take(self, n: int) -> bytes | None:
        if not self._fill(n):
            return None
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _frame(self) -> tuple[int, bool, bytes] | None:
        head = self._take(2)
        if head is None:
            return None
        fin, opcode = bool(head[0] & 0x80), head[0] & 0x0F
        masked, length = bool(head[1] & 0x80), head[1] & 0x7F
        if length == 126:
            ext = self._take(2)
            if ext is None:
                return None
            length = int.from_bytes(ext, "big")
        elif length == 127:
            ext = self._take(8)
            if ext is None:
                return None
            length = int.from_bytes(ext, "big")
        mask = self._take(4) if masked else None
        if masked and mask is None:
            return None
        payload = self._take(length)
        if payload is None:
            return None
        if mask:
            payload = _xor(payload, mask)
        return opcode, fin, payload

    def send(self, opcode: int, payload: bytes = b"") -> None:
        mask = os.urandom(4)
        n = len(payload)
        head = bytes((0x80 | opcode,))
        if n < 126:
            head += bytes((0x80 | n,))
        elif n < 65536:
            head += bytes((0x80 | 126,)) + n.to_bytes(2, "big")
        else:
            head += bytes((0x80 | 127,)) + n.to_bytes(8, "big")
        with contextlib.suppress(OSError, ValueError):
            self.sock.sendall(head + mask + _xor(payload, mask))

    def frames(self) -> Iterator[tuple[int, bytes]]:
        """(channel, data) of each message until the stream ends; the Status goes to `status`."""
        message = bytearray()
        while True:
            frame = self._frame()
            if frame is None:
                break
            opcode, fin, payload = frame
            if opcode == OP_PING:
                self.send(OP_PONG, payload)
                continue
            if opcode == OP_PONG:
                continue
            if opcode == OP_CLOSE:
                self.send(OP_CLOSE, payload[:2])
                break
            message += payload
            if not fin:
                continue
            data, message = bytes(message), bytearray()
            if not data:
                continue
            channel, body = data[0], data[1:]
            if channel == ERROR:
                try:
                    self.status = json.loads(body)
                except ValueError:
                    self.status = {"status": "Failure", "message": body.decode("utf-8", "replace")}
                continue
            if body:
                yield channel, body
        self.close()

    def abort(self) -> None:
        """Drop the connection now (from any thread): the server kills the command."""
        if not self.closed:
            with contextlib.suppress(OSError, ValueError):
                socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            with contextlib.suppress(OSError, ValueError):
                self.sock.close()


def _xor(data: bytes, mask: bytes) -> bytes:
    if not data:
        return b""
    n = len(data)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
