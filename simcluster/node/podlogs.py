"""Container logs: CRI log files written from the processes' pipes, and `GET .../pods/{name}/log`.

Files (one per container instance, `<workdir>/logs/<ns>_<pod>_<uid>/<container>/<restart>.log`;
the current and the previous instance are kept) use containerd's CRI format, one record per line:

    2026-01-01T00:00:00.123456789Z stdout F a full line
    2026-01-01T00:00:00.1234568Z stderr P the first 16384 bytes of a longer line...

- Timestamps are Go's RFC3339Nano in UTC, as containerd writes them and the kubelet returns them
  with `timestamps=true`: trailing zeros of the fraction are dropped (`.1234568Z`, or no fraction
  at all). Readers must parse them, not compare them as strings. They are taken when the data is
  read from the pipe and made strictly increasing within a container instance (+1 ns when equal),
  so they order lines of one instance exactly.
- Lines longer than 16 KiB are split as containerd does: `P` (partial) records of 16384 bytes,
  the end in an `F` record; a last line without a newline when the process exits is flushed as a
  `P` record. Reading returns partial records without a newline, so the text comes back whole;
  with `timestamps=true` every record, partial or not, gets its timestamp prefix, as the kubelet
  does, and `tailLines` counts records.
- Throughput: pipes are read up to 256 KiB at a time; after a short read the pipe is paused for a
  few milliseconds so data accumulates (fewer, larger reads); records are buffered in memory and
  written with one `write` per flush (every `flush_interval`, or at 256 KiB, and when the process
  exits). A flush wakes followers through an `asyncio.Event`: `follow` never polls the file.

The endpoint implements the API server's checks (PodLogOptions validation: 422; pod: 404;
container choice: 400) and then the kubelet's (`validateContainerLogStatus`: 400), with the
options `container`, `follow`, `previous`, `timestamps`, `tailLines`, `sinceSeconds`,
`sinceTime` (seconds precision, as the API server forwards it), `limitBytes` (may cut a line).
A follow ends when the container instance ends (after its last lines) or the client goes away;
a restart starts a new instance, and a new request is needed to read it, as with the kubelet.

Rotation (`LogWriter.rotate()`, what the kubelet's container log manager does when a file passes
`containerLogMaxSize`; `Kubelet.rotate_log(ns, pod, container)` is the hook for tests and admins):
the file is renamed to `<restart>.log.<UTC yyyymmdd-hhmmss>` and the runtime reopens a new, empty
`<restart>.log` (containerd's ReopenContainerLog); at most `MAX_FILES` files of an instance are
kept. As with the kubelet, every request reads the current file only (what was rotated away can
no longer be read through the API), and a follow that was open across the rotation goes on
reading the rotated file to its end and then sends nothing more until the container ends: the
connection stays open and silent, as `kubectl logs -f` is reported to stop at rotation
(kubernetes/kubernetes#115701, #126564). A reader must notice and reopen (`sinceTime`).
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ..apiserver.errors import ApiError, not_found

if TYPE_CHECKING:
    from ..apiserver.server import Ctx

MAX_LINE = 16 * 1024
_TAGS = {
    1: (b" stdout F ", b" stdout P "),
    2: (b" stderr F ", b" stderr P "),
}
READ_BLOCK = 1 << 20
WRITE_BLOCK = 256 * 1024
MAX_FILES = 5  # the kubelet's containerLogMaxFiles: the current file and 4 rotated ones


# -- timestamps ------------------------------------------------------------------------------------


class Stamper:
    """Strictly increasing RFC3339Nano timestamps (bytes), cheap to produce per line."""

    __slots__ = ("_prefix", "_sec", "last_ns")

    def __init__(self) -> None:
        self.last_ns = 0
        self._sec = -1
        self._prefix = b""

    def format(self, ns: int) -> bytes:
        sec, frac = divmod(ns, 1_000_000_000)
        if sec != self._sec:
            self._sec = sec
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)).encode()
        if frac:
            return self._prefix + b"." + (b"%09d" % frac).rstrip(b"0") + b"Z"
        return self._prefix + b"Z"


def format_rfc3339nano(ns: int) -> str:
    return Stamper().format(ns).decode()


_SEC_CACHE: dict[bytes, int] = {}


def parse_rfc3339nano(ts: bytes | str) -> int:
    """A record timestamp (`...T..:..:..[.frac]Z`) as nanoseconds since the epoch."""
    b = ts.encode() if isinstance(ts, str) else ts
    base = b[:19]
    sec = _SEC_CACHE.get(base)
    if sec is None:
        sec = calendar.timegm(time.strptime(base.decode(), "%Y-%m-%dT%H:%M:%S"))
        if len(_SEC_CACHE) > 4096:
            _SEC_CACHE.clear()
        _SEC_CACHE[base] = sec
    frac = b[20:].rstrip(b"Z") if b[19:20] == b"." else b""
    return sec * 1_000_000_000 + (int(frac[:9].ljust(9, b"0")) if frac else 0)


# -- writing ---------------------------------------------------------------------------------------


class LogWriter:
    """The CRI log file of one container instance; fed from the process's pipes."""

    def __init__(self, path: Path, *, flush_interval: float = 0.025) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o640)
        self.flush_interval = flush_interval
        self.size = 0  # bytes in the file: always whole records
        self.records = 0
        self.closed = False
        self.changed = asyncio.Event()
        self._buf: list[bytes] = []
        self._buffered = 0
        self._partial: dict[int, bytes] = {1: b"", 2: b""}
        self._stamp = Stamper()
        self._timer: asyncio.TimerHandle | None = None
        self.generation = 0  # rotations so far: a reader holding an older file reads it to its end
        self.rotated: list[Path] = []  # the rotated files kept, oldest first
        self._final: dict[int, int] = {}  # the size of each rotated generation's file

    def feed(self, fd: int, data: bytes) -> None:
        """Data read from stdout (fd 1) or stderr (fd 2)."""
        if self.closed or not data:
            return
        tag_f, tag_p = _TAGS[2 if fd == 2 else 1]
        pending = self._partial[fd]
        if pending:
            data = pending + data
        lines = data.split(b"\n")
        rest = lines.pop()
        out = self._buf
        stamp = self._stamp
        fmt = stamp.format
        now = time.time_ns()
        ns = stamp.last_ns
        n = 0
        for line in lines:
            while len(line) > MAX_LINE:
                ns = now if now > ns else ns + 1
                out += (fmt(ns), tag_p, line[:MAX_LINE], b"\n")
                line = line[MAX_LINE:]
                n += 1
            ns = now if now > ns else ns + 1
            out += (fmt(ns), tag_f, line, b"\n")
            n += 1
        while len(rest) > MAX_LINE:
            ns = now if now > ns else ns + 1
            out += (fmt(ns), tag_p, rest[:MAX_LINE], b"\n")
            rest = rest[MAX_LINE:]
            n += 1
        stamp.last_ns = ns
        self._partial[fd] = rest
        if n:
            self.records += n
            self._buffered += len(data) - len(rest) + 44 * n
            if self._buffered >= WRITE_BLOCK:
                self.flush()
            elif self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(self.flush_interval, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._buf or self._fd is None:
            return
        data = b"".join(self._buf)
        self._buf = []
        self._buffered = 0
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError:
            pass  # a full disk loses log lines, as it would on a node
        self.size += len(data) - len(view)
        ev = self.changed
        self.changed = asyncio.Event()
        ev.set()

    def size_of(self, generation: int) -> int:
        """Bytes in the file of `generation` (the current one grows; a rotated one is final)."""
        return self.size if generation == self.generation else self._final.get(generation, 0)

    def rotate(self) -> Path | None:
        """Rotate the file as the kubelet does: what is buffered is written, the file is renamed
        `<name>.<UTC timestamp>` and a new empty file is opened at the same path. Returns the
        rotated file (None when the instance has ended: the kubelet rotates running containers)."""
        if self.closed or self._fd is None:
            return None
        self.flush()
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        target = self.path.with_name(f"{self.path.name}.{stamp}")
        n = 0
        while target.exists() or target in self.rotated:
            n += 1
            target = self.path.with_name(f"{self.path.name}.{stamp}.{n}")
        os.rename(self.path, target)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o640)
        self._final[self.generation] = self.size
        self.generation += 1
        self.size = 0
        self.rotated.append(target)
        while len(self.rotated) > MAX_FILES - 1:
            with contextlib.suppress(OSError):
                self.rotated.pop(0).unlink()
        ev = self.changed
        self.changed = asyncio.Event()
        ev.set()
        return target

    def close(self) -> None:
        """The instance ended: flush partial lines (as `P` records) and wake every follower."""
        if self.closed:
            return
        stamp = self._stamp
        for fd in (1, 2):
            rest = self._partial[fd]
            if rest:
                stamp.last_ns = max(time.time_ns(), stamp.last_ns + 1)
                self._buf += (stamp.format(stamp.last_ns), _TAGS[fd][1], rest, b"\n")
                self._partial[fd] = b""
                self.records += 1
        self.flush()
        self.closed = True
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        ev = self.changed
        self.changed = asyncio.Event()
        ev.set()


# -- reading ---------------------------------------------------------------------------------------


def tail_offset(path: Path, end: int, lines: int) -> int:
    """The offset where the last `lines` records of the file's first `end` bytes start."""
    if lines <= 0:
        return end
    found = 0
    with open(path, "rb") as fh:
        # the byte at end-1 is the newline of the last record
        scan_end = end - 1
        while scan_end > 0:
            start = max(0, scan_end - READ_BLOCK)
            fh.seek(start)
            block = fh.read(scan_end - start)
            idx = len(block)
            while True:
                idx = block.rfind(b"\n", 0, idx)
                if idx < 0:
                    break
                found += 1
                if found == lines:
                    return start + idx + 1
            scan_end = start
    return 0


def record_content(line: bytes, timestamps: bool) -> tuple[bytes, bytes]:
    """(timestamp, text as returned) for one record line (without its newline)."""
    ts, _, rest = line.partition(b" ")
    _stream, _, rest = rest.partition(b" ")
    tag, _, content = rest.partition(b" ")
    if tag != b"P":
        content += b"\n"
    if timestamps:
        content = ts + b" " + content
    return ts, content


def read_text(path: Path, *, max_lines: int = 80, max_bytes: int = 2048) -> str:
    """The end of a log as plain text (for `FallbackToLogsOnError` termination messages)."""
    try:
        end = path.stat().st_size
    except OSError:
        return ""
    if end == 0:
        return ""
    start = tail_offset(path, end, max_lines)
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read(end - start)
    text = b"".join(record_content(line, False)[1] for line in data.split(b"\n") if line)
    return text[-max_bytes:].decode("utf-8", "replace")


@dataclass
class LogOptions:
    container: str = ""
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None
    since_seconds: int | None = None
    since_time: datetime | None = None

    def since_ns(self) -> int | None:
        if self.since_seconds is not None:
            return time.time_ns() - self.since_seconds * 1_000_000_000
        if self.since_time is not None:
            return int(self.since_time.timestamp()) * 1_000_000_000
        return None


def _bool(v: str) -> bool:
    """apimachinery's Convert_Slice_string_To_bool: anything but "0" or "false" is true."""
    return not (v == "0" or v.lower() == "false")


def _int(v: str) -> int:
    try:
        return int(v)
    except ValueError:
        raise ApiError(400, f'strconv.ParseInt: parsing "{v}": invalid syntax') from None


def parse_options(query: Any, pod_name: str) -> LogOptions:
    """Query parameters as the API server decodes and validates PodLogOptions."""
    o = LogOptions()
    o.container = query.get("container", "")
    for key in ("follow", "previous", "timestamps"):
        if key in query:
            setattr(o, key, _bool(query.get(key, "")))
    if query.get("tailLines", "") != "":
        o.tail_lines = _int(query["tailLines"])
    if query.get("limitBytes", "") != "":
        o.limit_bytes = _int(query["limitBytes"])
    if query.get("sinceSeconds", "") != "":
        o.since_seconds = _int(query["sinceSeconds"])
    if query.get("sinceTime", "") != "":
        raw = query["sinceTime"]
        try:
            o.since_time = datetime.fromisoformat(raw.replace("z", "Z"))
            if o.since_time.tzinfo is None:
                raise ValueError
        except ValueError:
            raise ApiError(
                400, f'parsing time "{raw}" as "2006-01-02T15:04:05Z07:00": cannot parse "{raw}" as "2006"'
            ) from None
    causes: list[tuple[str, str, str]] = []
    if o.tail_lines is not None and o.tail_lines < 0:
        causes.append(("FieldValueInvalid", "tailLines",
                       f"Invalid value: {o.tail_lines}: must be greater than or equal to 0"))
    if o.limit_bytes is not None and o.limit_bytes < 1:
        causes.append(("FieldValueInvalid", "limitBytes", f"Invalid value: {o.limit_bytes}: must be greater than 0"))
    if o.since_seconds is not None and o.since_time is not None:
        causes.append(("FieldValueForbidden", "",
                       "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"))
    elif o.since_seconds is not None and o.since_seconds < 1:
        causes.append(("FieldValueInvalid", "sinceSeconds",
                       f"Invalid value: {o.since_seconds}: must be greater than 0"))
    if query.get("stream"):
        causes.append(("FieldValueForbidden", "stream",
                       "Forbidden: may not be specified (feature gate PodLogsQuerySplitStreams is off)"))
    if causes:
        parts = [f"{f}: {m}" for _, f, m in causes]
        text = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
        raise ApiError(
            422,
            f'PodLogOptions "{pod_name}" is invalid: {text}',
            details={
                "name": pod_name, "kind": "PodLogOptions",
                "causes": [{"reason": r, "message": m, "field": f} for r, f, m in causes],
            },
        )
    return o


def choose_container(pod: dict[str, Any], container: str) -> str:
    """The API server's validateContainer: default to the only container, or a 400."""
    spec = pod.get("spec") or {}
    name = pod["metadata"]["name"]
    containers: list[str] = [c.get("name", "") for c in spec.get("containers") or ()]
    init = [c.get("name", "") for c in spec.get("initContainers") or ()]
    eph = [c.get("name", "") for c in spec.get("ephemeralContainers") or ()]
    if not container:
        if len(containers) == 1:
            return containers[0]
        if not containers:
            raise ApiError(400, f"a container name must be specified for pod {name}")
        names = " ".join([*init, *containers, *eph])
        raise ApiError(400, f"a container name must be specified for pod {name}, choose one of: [{names}]")
    if container not in (*containers, *init, *eph):
        raise ApiError(400, f"container {container} is not valid for pod {name}")
    return container


async def stream_log(request: web.Request, writer: LogWriter, opts: LogOptions,
                     stall_after: int | None = None) -> web.StreamResponse:
    """Serve one container instance's log. `stall_after` (fault injection): after that many bytes,
    send nothing more and keep the connection open, as a silently dead stream does."""
    resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain", "Cache-Control": "no-cache"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    sent = 0

    class _Stalled(Exception):
        pass

    async def send(data: bytes) -> None:
        nonlocal sent
        if stall_after is not None and sent + len(data) > stall_after:
            await resp.write(data[: max(0, stall_after - sent)])
            raise _Stalled
        sent += len(data)
        await resp.write(data)

    path = writer.path
    gen = writer.generation  # the file opened below; after a rotation it is read to its end only
    end = writer.size
    offset = tail_offset(path, end, opts.tail_lines) if opts.tail_lines is not None else 0
    since = opts.since_ns()
    remaining = opts.limit_bytes
    carry = b""
    try:
        with open(path, "rb") as fh:
            while True:
                changed = writer.changed  # taken before reading: a later flush sets it
                end = writer.size_of(gen)
                out: list[bytes] = []
                size = 0
                while offset < end:
                    fh.seek(offset)
                    block = fh.read(min(READ_BLOCK, end - offset))
                    if not block:
                        break
                    offset += len(block)
                    lines = (carry + block).split(b"\n")
                    carry = lines.pop()
                    for line in lines:
                        if not line:
                            continue
                        ts, text = record_content(line, opts.timestamps)
                        if since is not None:
                            if parse_rfc3339nano(ts) < since:
                                continue
                            since = None  # records are in time order
                        if remaining is not None:
                            if len(text) >= remaining:
                                out.append(text[:remaining])
                                remaining = 0
                                break
                            remaining -= len(text)
                        out.append(text)
                        size += len(text)
                        if size >= WRITE_BLOCK:
                            await send(b"".join(out))
                            out, size = [], 0
                    if remaining == 0:
                        break
                if out:
                    await send(b"".join(out))
                if remaining == 0 or not opts.follow:
                    break
                if writer.closed and offset >= writer.size_of(gen):
                    break
                if offset < writer.size_of(gen):
                    continue
                while not changed.is_set():
                    transport = request.transport
                    if transport is None or transport.is_closing():
                        return resp
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(1.0):
                            await changed.wait()
        await resp.write_eof()
    except _Stalled:
        while request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(0.2)
    except (ConnectionResetError, ConnectionError, FileNotFoundError):
        pass
    return resp


async def serve_pod_log(kubelet: Any, ctx: Ctx) -> web.StreamResponse:
    """The `pods/log` subresource handler (registered by the kubelet component)."""
    if ctx.request.method != "GET":
        raise ApiError(405, "the server does not allow this method on the requested resource")
    name = ctx.name or ""
    ns = ctx.namespace or ""
    opts = parse_options(ctx.request.query, name)
    st = kubelet.store.find(("", "pods"), ns, name)
    if st is None:
        raise not_found("pods", "", name)
    pod = st.obj
    container = choose_container(pod, opts.container)
    if not (pod.get("spec") or {}).get("nodeName"):
        return web.Response(body=b"", status=200, headers={"Content-Type": "text/plain"})
    rt = kubelet.runtime(ns, name)
    if rt is None or rt.uid != pod["metadata"].get("uid"):
        raise ApiError(
            404,
            f"the server could not find the requested resource ( pods/log {name})",
            details={"name": name, "kind": "pods/log", "causes": [
                {"reason": "UnexpectedServerResponse", "message": f'pod "{name}" does not exist'}]},
        )
    writer = rt.log_writer(container, opts.previous)  # raises ApiError(400) as the kubelet does
    stall = kubelet.sim.faults.take_stall(ctx.request.path)
    return await stream_log(ctx.request, writer, opts, stall.after_bytes if stall else None)
