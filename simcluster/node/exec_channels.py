"""The remote-command WebSocket wire format: subprotocols, channel frames, resize and status messages.

Pure functions and small parsers, no I/O (the session lives in `simcluster.node.exec`). The behaviour
follows k8s.io/apimachinery `wsstream` (server side) and client-go `tools/remotecommand`:

- subprotocols, chosen in the client's order of preference: `v5.channel.k8s.io` (adds the CLOSE
  signal, served by the API server's stream translator since 1.30), `v4.channel.k8s.io` and
  `v4.base64.channel.k8s.io` (exit codes as a JSON `Status`), and the legacy `channel.k8s.io` /
  `base64.channel.k8s.io`; no subprotocol at all means `channel.k8s.io`.
- a binary frame is one channel byte then the payload; base64 protocols send text frames whose
  first character is the channel as an ASCII digit followed by the base64 of the payload.
- channels: 0 stdin, 1 stdout, 2 stderr, 3 error/status, 4 resize; v5 frame `[255, c]` closes c.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

STDIN = 0
STDOUT = 1
STDERR = 2
ERROR = 3
RESIZE = 4
CLOSE = 255

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
V4_BASE64 = "v4.base64.channel.k8s.io"
V1 = "channel.k8s.io"
V1_BASE64 = "base64.channel.k8s.io"

NON_ZERO_EXIT_CODE_REASON = "NonZeroExitCode"
EXIT_CODE_CAUSE_TYPE = "ExitCode"


@dataclass(frozen=True)
class Protocol:
    name: str
    version: int
    binary: bool = True

    @property
    def supports_close(self) -> bool:
        return self.version >= 5

    @property
    def status_json(self) -> bool:
        """v4+ report the end of the command as a JSON `Status`; older ones as plain error text."""
        return self.version >= 4

    @property
    def translated(self) -> bool:
        """A v5 session is served by the API server's WebSocket→SPDY translator in front of the
        kubelet, which shapes some messages (see `exit_status`); older protocols reach the
        container runtime's own WebSocket server."""
        return self.version >= 5


PROTOCOLS: dict[str, Protocol] = {
    V5: Protocol(V5, 5),
    V4: Protocol(V4, 4),
    V4_BASE64: Protocol(V4_BASE64, 4, binary=False),
    V1: Protocol(V1, 1),
    V1_BASE64: Protocol(V1_BASE64, 1, binary=False),
}
NO_PROTOCOL = Protocol("", 1)


class ProtocolError(ValueError):
    pass


def offered_protocols(header_values: Iterable[str]) -> list[str]:
    """The `Sec-WebSocket-Protocol` values, in order (the header may repeat and holds lists)."""
    out: list[str] = []
    for value in header_values:
        out.extend(p.strip() for p in value.split(",") if p.strip())
    return out


def negotiate(offered: list[str]) -> Protocol:
    """The first offered protocol the server speaks, as wsstream's handshake picks it."""
    if not offered:
        return NO_PROTOCOL
    for name in offered:
        proto = PROTOCOLS.get(name)
        if proto is not None:
            return proto
    raise ProtocolError(
        f"requested protocol(s) are not supported: [{' '.join(offered)}]; "
        f"supports [{' '.join(PROTOCOLS)}]"
    )


# -- frames ---------------------------------------------------------------------------------------


def encode(proto: Protocol, channel: int, data: bytes) -> bytes:
    """One outgoing message: send it as a binary frame if `proto.binary`, else as a text frame."""
    if proto.binary:
        return bytes((channel,)) + data
    return bytes((ord("0") + channel,)) + base64.b64encode(data)


@dataclass(frozen=True)
class Frame:
    channel: int
    data: bytes
    close: bool = False  # a v5 CLOSE signal for `channel` (data is empty)


def decode(proto: Protocol, payload: bytes) -> Frame | None:
    """An incoming message (binary or text, as bytes); None for empty or malformed ones."""
    if not payload:
        return None
    first = payload[0]
    if proto.supports_close and first == CLOSE:
        if len(payload) != 2:
            return None
        return Frame(payload[1], b"", close=True)
    if proto.binary:
        return Frame(first, payload[1:])
    channel = first - ord("0")
    if channel < 0:
        return None
    try:
        data = base64.b64decode(payload[1:], validate=False)
    except (binascii.Error, ValueError):
        return None
    return Frame(channel, data)


# -- resize ---------------------------------------------------------------------------------------


class ResizeParser:
    """Terminal sizes from the resize channel: a stream of JSON objects `{"Width":w,"Height":h}`.

    client-go writes one object per frame with a trailing newline (json.Encoder); other clients
    send bare objects. Objects may be split over or packed into frames. Keys are matched
    case-insensitively, as Go's decoder does for the untagged `TerminalSize` fields.
    """

    def __init__(self) -> None:
        self._buf = ""
        self._decoder = json.JSONDecoder()

    def feed(self, data: bytes) -> list[tuple[int, int]]:
        self._buf += data.decode("utf-8", "replace")
        sizes: list[tuple[int, int]] = []
        while True:
            text = self._buf.lstrip()
            if not text:
                self._buf = ""
                return sizes
            try:
                obj, end = self._decoder.raw_decode(text)
            except json.JSONDecodeError:
                if text[0] != "{" or len(text) > 4096:
                    self._buf = ""  # garbage: drop it, as the real decoder gives up on the stream
                else:
                    self._buf = text  # incomplete: wait for more
                return sizes
            self._buf = text[end:]
            size = _terminal_size(obj)
            if size is not None:
                sizes.append(size)


def _terminal_size(obj: Any) -> tuple[int, int] | None:
    if not isinstance(obj, dict):
        return None
    fields = {str(k).lower(): v for k, v in obj.items()}
    width, height = fields.get("width", 0), fields.get("height", 0)
    if not isinstance(width, int) or not isinstance(height, int) or isinstance(width, bool):
        return None
    if not (0 <= width <= 0xFFFF and 0 <= height <= 0xFFFF):
        return None
    return width, height


# -- statuses -------------------------------------------------------------------------------------
# Key order follows Go's encoding of metav1.Status: metadata, status, message, reason, details, code.


def success_status() -> dict[str, Any]:
    return {"metadata": {}, "status": "Success"}


def exit_status(code: int, argv: list[str], proto: Protocol) -> dict[str, Any]:
    """A non-zero exit. The container runtime words it `error executing command [argv], exit code
    N`; behind the v5 translator the kubelet's SPDY stream has already turned that into
    `command terminated with exit code N`, which the translator wraps again."""
    if proto.translated:
        inner = f"command terminated with exit code {code}"
    else:
        inner = f"error executing command [{' '.join(argv)}], exit code {code}"
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {inner}",
        "reason": NON_ZERO_EXIT_CODE_REASON,
        "details": {"causes": [{"reason": EXIT_CODE_CAUSE_TYPE, "message": str(code)}]},
    }


def internal_error(message: str) -> dict[str, Any]:
    """apierrors.NewInternalError(errors.New(message))."""
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"Internal error occurred: {message}",
        "reason": "InternalError",
        "details": {"causes": [{"message": message}]},
        "code": 500,
    }


def runtime_error(message: str, proto: Protocol) -> dict[str, Any]:
    """An error the container runtime reports as an internal error (e.g. the command could not be
    started). Through the v5 translator it is wrapped once more: the real double prefix
    `Internal error occurred: Internal error occurred: error executing command in container: …`."""
    status = internal_error(message)
    if proto.translated:
        status = internal_error(status["message"])
    return status


def status_payload(status: Mapping[str, Any], proto: Protocol) -> bytes | None:
    """What goes on the error channel: JSON for v4+, the bare message of a failure for older
    protocols (nothing on success). None means: send nothing."""
    if proto.status_json:
        return json.dumps(status, separators=(",", ":"), ensure_ascii=False).encode()
    if status.get("status") == "Success":
        return None
    return str(status.get("message", "")).encode()


def exit_code_of(status: Mapping[str, Any]) -> int | None:
    """The exit code a client reads from a status: 0 on success, the ExitCode cause otherwise."""
    if status.get("status") == "Success":
        return 0
    if status.get("reason") != NON_ZERO_EXIT_CODE_REASON:
        return None
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == EXIT_CODE_CAUSE_TYPE:
            try:
                return int(cause.get("message", ""))
            except ValueError:
                return None
    return None


# -- request options ------------------------------------------------------------------------------

_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})


def parse_bool(value: str | None) -> bool:
    """strconv.ParseBool's true spellings (how the API server decodes PodExecOptions)."""
    return value in _TRUE


@dataclass(frozen=True)
class ExecOptions:
    command: list[str]
    container: str
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool

    @classmethod
    def from_query(cls, query: Any) -> ExecOptions:
        """From the request's query (a MultiDict: `command` repeats once per argv element).
        With a tty, stderr is merged into stdout and its channel is not used."""
        tty = parse_bool(query.get("tty"))
        stderr = parse_bool(query.get("stderr")) and not tty
        return cls(
            command=list(query.getall("command", [])),
            container=query.get("container") or "",
            stdin=parse_bool(query.get("stdin")),
            stdout=parse_bool(query.get("stdout")),
            stderr=stderr,
            tty=tty,
        )

    @property
    def first_channel(self) -> int:
        """The lowest writable channel: the server sends it an empty frame once the streams are up."""
        if self.stdout:
            return STDOUT
        if self.stderr:
            return STDERR
        return ERROR


def container_names(pod: Mapping[str, Any], key: str = "containers") -> list[str]:
    spec = pod.get("spec") or {}
    return [str(c.get("name", "")) for c in spec.get(key) or [] if isinstance(c, dict)]


def resolve_container(pod: Mapping[str, Any], container: str) -> tuple[str | None, str | None]:
    """(container, None) or (None, error message) as the API server's streamLocation decides."""
    name = pod.get("metadata", {}).get("name", "")
    main = container_names(pod)
    if not container:
        if len(main) == 1:
            return main[0], None
        if not main:
            return None, f"a container name must be specified for pod {name}"
        msg = f"a container name must be specified for pod {name}, choose one of: [{' '.join(main)}]"
        init = container_names(pod, "initContainers")
        if init:
            msg += f" or one of the init containers: [{' '.join(init)}]"
        return None, msg
    every = main + container_names(pod, "initContainers") + container_names(pod, "ephemeralContainers")
    if container not in every:
        return None, f"container {container} is not valid for pod {name}"
    return container, None
