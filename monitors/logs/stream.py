"""One container's log, followed across reconnects, stalls and restarts without losing or repeating lines.

A `LogStream` reads `GET /api/v1/namespaces/{ns}/pods/{pod}/log?container=C&timestamps=true`:

- **history** (`follow=false`, with the user's since/tail/previous): read to the end, into the
  exact merge;
- **follow**: `follow=true` from where it stopped. A follow ends when the container instance
  ends, when the connection drops, or when no byte arrives for `read_timeout` (a stalled
  connection, log rotation on some runtimes). It is then reopened with `sinceTime` set to the
  second of the last timestamp seen; re-sent lines (timestamp before the last one seen, or equal
  to it with the same content) are skipped, so nothing is repeated. If the container restarted
  while the connection was down, the tail of the previous instance is fetched first
  (`previous=true`, same rule).
- It stops when its pod is gone or terminal and the instance was read to its end.

Lines are cut at 1 MiB while reading (the rest of a longer line is counted, not kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp

from ..connection import ConnectionProblem
from ..kube import ApiProblem, problem_from_body
from .lines import LogLine, Origin, format_since, split_record
from .merge import Source
from .terminal_text import MAX_LINE_BYTES

if TYPE_CHECKING:
    from ..records import PodRec
    from .engine import LogEngine, LogOptions

READ_LIMIT = MAX_LINE_BYTES + 64 * 1024  # bytes of one line kept while reading (timestamps and slack)
MAX_AT_LAST = 10_000
TRANSIENT = frozenset((429, 500, 502, 503, 504))  # answers worth asking again (with backoff)


class _Stalled(Exception):
    pass


class _Dropped(Exception):
    pass


class LogStream:
    def __init__(self, engine: LogEngine, origin: Origin, uid: str, *, history: bool) -> None:
        self.engine = engine
        self.origin = origin
        self.uid = uid
        self.with_history = history
        self.path = (f"/api/v1/namespaces/{quote(origin.namespace, safe='')}/pods/"
                     f"{quote(origin.pod, safe='')}/log")
        self.state = "waiting"  # waiting / open / retrying / ended / done / queued
        self.message = ""  # why it waits, or the last error
        self.last_ts = 0
        self._at_last: list[bytes] = []
        self._replay: tuple[int, set[bytes]] | None = None
        self.lines = 0
        self.bytes = 0
        self.opens = 0
        self.reopens = 0  # reopened after a stall or a dropped connection
        self.stalls = 0
        self.changed = asyncio.Event()  # the pod record changed (set by the engine)
        self.rec: PodRec | None = None
        self.source: Source | None = engine.merger.source() if history else None
        self.task: asyncio.Task[None] | None = None
        self.complete = False  # an instance was read to its end after the pod became terminal
        self.initial_consumed = False  # since/tail applied by a successful history read
        self.history_read = asyncio.Event()  # the history part is over (read, failed or skipped)
        self.last_problem: ApiProblem | ConnectionProblem | None = None
        self._retry_after: float | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        o = self.origin
        return (o.namespace, o.pod, o.container, self.uid)

    def __repr__(self) -> str:
        return f"LogStream({self.origin.label}/{self.origin.container}, {self.state}, lines={self.lines})"

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name=f"logs {self.origin.pod}")

    async def _run(self) -> None:
        eng = self.engine
        try:
            if self.with_history:
                try:
                    await self._history()
                finally:
                    assert self.source is not None
                    eng.merger.finish(self.source)
                    self.history_read.set()
            if eng.options.follow and not eng.options.previous:
                await eng.history_done.wait()
                if self.source is None:
                    self.source = eng.merger.source()
                else:
                    eng.merger.reopen(self.source)  # its history ended; the merge waits for it again
                await self._follow()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never let one stream take the engine down
            self.message = f"{type(exc).__name__}: {exc}"
            eng.failed(self, None, f"log stream failed: {self.message}")
        finally:
            self.history_read.set()
            self.state = "done"
            eng.stream_done(self)

    # -- phases --------------------------------------------------------------------------------
    def _base(self) -> list[tuple[str, str]]:
        return [("container", self.origin.container), ("timestamps", "true")]

    def _initial(self) -> list[tuple[str, str]]:
        o = self.engine.options
        p: list[tuple[str, str]] = []
        if o.since_seconds:
            p.append(("sinceSeconds", str(int(o.since_seconds))))
        if o.tail is not None:
            p.append(("tailLines", str(o.tail)))
        return p

    def _resume(self) -> list[tuple[str, str]]:
        """Parameters to continue after the last line seen, arming the duplicate filter."""
        if self.last_ts:
            self._replay = (self.last_ts, set(self._at_last))
            return [("sinceTime", format_since(self.last_ts))]
        if self.initial_consumed:
            return []
        return self._initial()

    async def _history(self) -> None:
        eng = self.engine
        params = self._base() + self._initial()
        if eng.options.previous:
            params.append(("previous", "true"))
        attempts = 0
        while True:
            terminal = self._terminal()
            delay: float | None = None
            try:
                await self._read(params, follow=False)
                self.initial_consumed = True
                self.complete = terminal
                self.state = "ended"
                return
            except (_Stalled, _Dropped) as exc:
                self.reopens += 1
                self.message = str(exc)
                self.last_problem = None
            except ApiProblem as exc:
                if exc.status not in TRANSIENT:
                    self._api_problem(exc, history=True)
                    return
                self.message = _problem_text(exc)
                self.last_problem = exc
                self.state = "retrying"
                delay = self._retry_after
            except ConnectionProblem as exc:
                eng.server_lost(exc.message)
                self.message = exc.message
                self.last_problem = exc
            attempts += 1
            if eng.stopping:
                self.state = "ended"
                return
            if attempts > eng.options.history_retries:
                self.state = "ended"
                eng.failed(self, self.last_problem, self.message)
                return
            await asyncio.sleep(delay if delay is not None else backoff_delay(attempts, eng.options))
            params = self._base() + self._resume() + ([("previous", "true")] if eng.options.previous else [])

    async def _follow(self) -> None:
        eng = self.engine
        backoff = eng.options.backoff_min
        while not eng.stopping:
            rec = eng.pod_record(self)
            if rec is None or rec.uid != self.uid:
                return  # the pod is gone (or was replaced: a new stream follows the new one)
            if self.complete and rec.terminated:
                return
            restarts = rec.restarts
            terminal = rec.terminated
            if not self.last_ts and not self.initial_consumed and self._missed_previous(rec):
                await self._previous_tail()  # it restarted before we ever read it: the first run first
            params = self._base() + self._resume() + [("follow", "true")]
            self.changed.clear()
            got = 0
            normal = False
            try:
                got = await self._read(params, follow=True)
                normal = True
                self.initial_consumed = True
                self.complete = terminal
                self.state = "ended"
            except (_Stalled, _Dropped) as exc:
                self.reopens += 1
                self.state = "retrying"
                self.message = str(exc)
                rec2 = eng.pod_record(self)
                if rec2 is not None and rec2.uid == self.uid and rec2.restarts > restarts and self.last_ts:
                    await self._previous_tail()
                continue  # reopen at once: the last timestamp tells where to resume
            except ApiProblem as exc:
                if not self._api_problem(exc, history=False):
                    return
                if self._retry_after is not None:
                    backoff = max(backoff, min(self._retry_after, eng.options.backoff_max))
            except ConnectionProblem as exc:
                eng.server_lost(exc.message)
                self.state = "retrying"
                self.message = exc.message
            if normal and got:
                backoff = eng.options.backoff_min
                await asyncio.sleep(0.02)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await self.changed.wait()
            backoff = min(backoff * 2, eng.options.backoff_max)

    def _missed_previous(self, rec: PodRec) -> bool:
        """The container already restarted, and its previous run ended after we started watching."""
        if rec.restarts <= 0:
            return False
        since = self.engine.started_at
        return any(
            ex.container == self.origin.container and ex.finished_at is not None and ex.finished_at >= since - 1
            for ex in rec.exits
        )

    async def _previous_tail(self) -> None:
        """The container restarted while the connection was down: read the rest of the previous instance."""
        params = self._base() + self._resume() + [("previous", "true")]
        with contextlib.suppress(_Stalled, _Dropped, ApiProblem, ConnectionProblem):
            await self._read(params, follow=False)

    def _terminal(self) -> bool:
        rec = self.engine.pod_record(self)
        return rec is not None and rec.terminated

    def _api_problem(self, exc: ApiProblem, *, history: bool) -> bool:
        """Note an error answer; False when following should stop."""
        eng = self.engine
        self.message = _problem_text(exc)
        self.last_problem = exc
        if exc.status != 401:
            eng.server_answered()
        if exc.status in (400, 404):
            # waiting to start / no previous instance / pod gone: normal while pods come and go
            self.state = "waiting"
            if history and (eng.options.previous or not eng.options.follow):
                eng.notice(f"{self.origin.label}/{self.origin.container}: {self.message}")
            return not (exc.status == 404 and eng.pod_record(self) is None)
        self.state = "retrying"
        if exc.status == 401 and not history:
            eng.unauthorized(self, exc)  # said once; a follow ends if it lasts (credentials may be refreshed)
            return True
        if exc.status in (401, 403) or history:
            eng.failed(self, exc)
            return False
        if exc.status not in TRANSIENT:
            eng.notice_once(self, exc.one_line())
        return True

    # -- reading -------------------------------------------------------------------------------
    async def _read(self, params: list[tuple[str, str]], *, follow: bool) -> int:
        """One request; returns the number of new lines. Raises _Stalled/_Dropped/ApiProblem/ConnectionProblem."""
        eng = self.engine
        client = eng.client
        session = client.session()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=eng.options.connect_timeout,
                                        sock_read=eng.options.read_timeout)
        merger = eng.merger
        src = self.source
        assert src is not None
        got = 0
        self.opens += 1
        try:
            async with session.get(client.server + self.path, params=params, headers=client.headers("*/*"),
                                   timeout=timeout) as resp:
                if resp.status >= 400:
                    self._retry_after = _retry_after(resp.headers.get("Retry-After"))
                    raise problem_from_body(resp.status, await resp.read())
                self.state = "open"
                self.message = ""
                self.last_problem = None
                eng.server_answered(self)
                pending: list[bytes] = []
                plen = 0
                over = 0
                async for chunk in resp.content.iter_any():
                    nl = chunk.rfind(b"\n")
                    if nl < 0:
                        merger.touch(src)  # part of a line: the stream is not quiet
                        if plen < READ_LIMIT:
                            pending.append(chunk)
                            plen += len(chunk)
                        else:
                            over += len(chunk)
                        continue
                    head = chunk[:nl]  # complete lines; the first one continues what is pending
                    if pending:
                        first_nl = head.find(b"\n")
                        first = head if first_nl < 0 else head[:first_nl]
                        if plen < READ_LIMIT:
                            pending.append(first)
                        else:
                            over += len(first)
                        head = b"".join(pending) + (b"" if first_nl < 0 else head[first_nl:])
                        pending = []
                    tail = chunk[nl + 1:]
                    if tail:
                        pending.append(tail)
                    plen = len(tail)
                    batch = self._parse(head.split(b"\n"), over)
                    over = 0
                    if batch:
                        got += len(batch)
                        merger.add(src, batch)
                        if merger.exact and src.full:
                            await src.wait_space()
                if pending:
                    batch = self._parse([b"".join(pending)], over)
                    if batch:
                        got += len(batch)
                        merger.add(src, batch)
        except TimeoutError:
            self.stalls += 1
            raise _Stalled(f"no data for {eng.options.read_timeout:g}s") from None
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
            raise _Dropped(f"connection dropped: {type(exc).__name__}") from None
        except aiohttp.ClientConnectorError as exc:
            raise client.connection_problem(exc) from None
        except (aiohttp.ClientError, OSError) as exc:
            if got:
                raise _Dropped(f"connection lost: {type(exc).__name__}") from None
            raise client.connection_problem(exc) from None
        return got

    def _parse(self, raws: list[bytes], over: int) -> list[LogLine]:
        out: list[LogLine] = []
        origin = self.origin
        replay = self._replay
        last = self.last_ts
        at_last = self._at_last
        nbytes = 0
        for k, raw in enumerate(raws):
            nbytes += len(raw) + 1
            ts, content = split_record(raw)
            if ts is None:
                ts = last or time.time_ns()  # not a timestamped line: keep it next to its neighbours
            if replay is not None:
                if ts < replay[0] or (ts == replay[0] and content in replay[1]):
                    continue
                if ts > replay[0]:
                    replay = None
            cut = over if k == 0 else 0
            if len(content) > READ_LIMIT:
                cut += len(content) - READ_LIMIT
                content = content[:READ_LIMIT]
            if ts > last:
                last = ts
                at_last = [content]
            elif ts == last and len(at_last) < MAX_AT_LAST:
                at_last.append(content)
            line = LogLine(ts, content, origin, cut=cut) if cut else LogLine(ts, content, origin)
            out.append(line)
        self._replay = replay
        self.last_ts = last
        self._at_last = at_last
        self.bytes += nbytes
        if out:
            self.lines += len(out)
            self.engine.note_log(self, last)
        return out


def _problem_text(exc: ApiProblem) -> str:
    return exc.message.splitlines()[0] if exc.message else exc.reason


def _retry_after(value: str | None) -> float | None:
    """Seconds of a Retry-After header (the delta form; an HTTP date is ignored)."""
    if not value:
        return None
    try:
        return max(0.0, min(float(value.strip()), 60.0))
    except ValueError:
        return None


def backoff_delay(attempt: int, options: LogOptions) -> float:
    """Exponential backoff with jitter for the `attempt`-th retry (1-based)."""
    base = min(options.backoff_max, options.backoff_min * 2 ** (attempt - 1))
    return base * (0.75 + random.random() * 0.5)


def stream_summary(s: LogStream) -> dict[str, Any]:
    o = s.origin
    return {"label": o.label, "pod": o.pod, "container": o.container, "state": s.state, "message": s.message,
            "lines": s.lines, "bytes": s.bytes, "opens": s.opens, "reopens": s.reopens}
