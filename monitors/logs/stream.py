"""One container's log, followed across reconnects, stalls and restarts without losing or repeating lines.

A `LogStream` reads `GET /api/v1/namespaces/{ns}/pods/{pod}/log?container=C&timestamps=true`:

- **history** (`follow=false`, with the user's since/tail/previous): read to the end, into the
  exact merge;
- **follow**: `follow=true` from where it stopped. A follow ends when the container instance
  ends, when the connection drops, or when no byte arrives for `read_timeout`. A follow can also
  hang with its connection open: the kubelet keeps a follow on a log file it has rotated, which
  gets no more lines (kubernetes/kubernetes#115701), or the connection stalls. So while a follow
  is quiet (`probe_after`, then three times as long each time, up to `read_timeout`) the stream
  asks for the newest line (`tailLines=1`); if the kubelet has one newer than the last this
  follow delivered, the follow is closed. It is then reopened with `sinceTime` set to the
  second of the last timestamp seen; re-sent lines (timestamp before the last one seen, or equal
  to it with the same content) are skipped, so nothing is repeated.
- A follow that dropped or stalled is reopened at once (first the rest of the previous instance,
  `previous=true`, same rule, if the pod's record says the container restarted meanwhile).
  After the server could not be reached (or answered 5xx, 429, 401) for a while, the pod is read
  first: replaced (another uid under the same name: the kubelet would serve the new pod's log)
  or gone, the stream ends (the new pod gets its own stream, from its first line); else the rest
  of the previous instance is read (the container may have restarted meanwhile), then the follow.
- Where it starts: the first follow goes on from the history (its last timestamp; with `--since`
  and no line in the window, from the window's start; `--tail 0` still reads the newest line
  for its position). A stream attached later (a new or replaced pod, a late rank) reads its log
  from the first line: all of it is new.
- It stops when its pod is gone, replaced or terminal and the instance was read to its end (a
  pod being deleted whose instance ended is done: its containers do not start again).

Lines are cut at 1 MiB while reading (the rest of a longer line is counted, not kept).

A stream asks of its host (the engine) only what `StreamHost` names: its options, the merge it feeds,
the client, and where it reports (its pod's record, lines, troubles, its end).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import TYPE_CHECKING, Any, Protocol

import aiohttp

from .. import api_paths
from ..connection import ConnectionProblem, ExitCode
from ..kube import ApiProblem, problem_from_body
from .lines import LogLine, Origin, format_since, split_record
from .merge import Merger, Source
from .options import LogOptions
from .rank_tags import TaggedOrigins, speaks_for_ranks
from .terminal_text import MAX_LINE_BYTES

if TYPE_CHECKING:
    from ..kube import KubeClient
    from ..records import PodRec

READ_LIMIT = MAX_LINE_BYTES + 64 * 1024  # bytes of one line kept while reading (timestamps and slack)
MAX_AT_LAST = 10_000
TRANSIENT = frozenset((429, 500, 502, 503, 504))  # answers worth asking again (with backoff)


class StreamHost(Protocol):
    """What a `LogStream` may ask of the engine that runs it (`engine.LogEngine`)."""

    options: LogOptions
    client: KubeClient
    merger: Merger  # the merge its lines go into
    history_done: asyncio.Event  # every stream's history is read: following may start
    stopping: bool
    started_at: float  # (unix time) when the engine started: a follow's gap is counted from then

    def pod_record(self, s: LogStream) -> PodRec | None:
        """The model's record of the stream's pod, None once it is gone."""

    def note_log(self, s: LogStream, ts: int) -> None:
        """The stream's newest line is at `ts` (ns)."""

    def notice(self, message: str) -> None: ...

    def notice_once(self, s: LogStream, message: str) -> None:
        """A stream's trouble, said again only when it changes."""

    def failed(self, s: LogStream, problem: ApiProblem | ConnectionProblem | None, message: str = "", *,
               text: str | None = None) -> None:
        """The stream's log cannot be read: recorded with its exit code."""

    def unauthorized(self, s: LogStream, exc: ApiProblem) -> None:
        """Following, and the server rejects the credentials."""

    def server_lost(self, message: str) -> None: ...

    def server_answered(self, s: LogStream | None = None) -> None: ...

    def stream_done(self, s: LogStream) -> None:
        """The stream ended: it holds no line back."""


class _Stalled(Exception):
    pass


class _Dropped(Exception):
    pass


class LogStream:
    def __init__(self, engine: StreamHost, origin: Origin, uid: str, *, history: bool,
                 initial: bool | None = None) -> None:
        """`history`: read the history first (since/tail); `initial`: the user's since/tail apply
        to this stream's first read (default: with history; a pod attached later is read whole)."""
        self.engine = engine
        self.origin = origin
        self.uid = uid
        self.with_history = history
        self.initial = history if initial is None else initial
        self.path = api_paths.pod(origin.namespace, origin.pod, "log")
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
        self._floor = 0  # --since and no line in the window: where the window started (ns)
        self._heard = 0.0  # when the open read last received a byte (monotonic)
        self._got = 0  # lines of the current read
        self.probes = 0  # newest-line checks of quiet follows
        self.recoveries = 0  # pod checks after a follow broke
        # following: since when its log could not be read ((monotonic, wall ns)), None while it can;
        # after it is read again, the lines written meanwhile are counted as they arrive (late)
        self.unreadable_since: tuple[float, int] | None = None
        self._own_trouble = False  # (its own answers failed, not only the whole server's connection)
        self._catching: list[int] | None = None  # [since ns, reopened at ns, lines of the gap]
        self._catch_timer: asyncio.TimerHandle | None = None
        self.gaps: list[tuple[int, int, int]] = []  # (from ns, to ns, lines) of each gap caught up
        # a launcher's lines carry the rank they were tagged with (`[1,0]<stdout>:`)
        self.tagged = TaggedOrigins(origin) if speaks_for_ranks(origin) else None

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
        if not self.initial:
            return p  # attached while following: every line of it is new
        if o.since_seconds:
            p.append(("sinceSeconds", str(int(o.since_seconds))))
        if o.tail is not None:
            # `--tail 0` asks for the newest line all the same: its timestamp is where a follow
            # goes on from (the engine keeps none of the history's lines)
            p.append(("tailLines", str(max(o.tail, 1) if o.follow and self.with_history else o.tail)))
        return p

    def _resume(self) -> list[tuple[str, str]]:
        """Parameters to continue after the last line seen, arming the duplicate filter."""
        if self.last_ts:
            self._replay = (self.last_ts, set(self._at_last))
            return [("sinceTime", format_since(self.last_ts))]
        if self.initial_consumed:
            if self._floor:  # --since found no line: go on from the window's start, not the log's
                self._replay = (self._floor, set())
                return [("sinceTime", format_since(self._floor))]
            return []
        return self._initial()

    async def _history(self) -> None:
        eng = self.engine
        if self.initial and eng.options.since_seconds and eng.options.follow:
            self._floor = time.time_ns() - int(eng.options.since_seconds) * 1_000_000_000
        params = self._base() + self._initial()
        if eng.options.previous:
            params.append(("previous", "true"))
        attempts = 0
        failing_since: float | None = None
        while True:
            terminal = self._terminal()
            delay: float | None = None
            try:
                await self._read(params, follow=False)
                self.initial_consumed = True
                self.complete = terminal
                self.state = "ended"
                return
            except _Stalled as exc:
                self.reopens += 1
                self.message = str(exc)
                self.last_problem = ConnectionProblem(f"the API server stopped sending it ({exc})", ExitCode.UNREACHABLE,
                                                      timed_out=True)
            except _Dropped as exc:
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
            now = time.monotonic()
            failing_since = now if failing_since is None else failing_since
            if eng.stopping:
                self.state = "ended"
                return
            if attempts > eng.options.history_retries or (attempts > 1 and now - failing_since > eng.options.give_up_after):
                self.state = "ended"
                eng.failed(self, self.last_problem, self.message)
                return
            await asyncio.sleep(delay if delay is not None else backoff_delay(attempts, eng.options))
            params = self._base() + self._resume() + ([("previous", "true")] if eng.options.previous else [])

    async def _follow(self) -> None:
        eng = self.engine
        backoff = eng.options.backoff_min
        broken = False  # the server could not be read: the pod may have changed meanwhile
        ended = False  # the last follow ended by itself: the instance it read has ended
        while not eng.stopping:
            rec = eng.pod_record(self)
            if rec is None or rec.uid != self.uid:
                return  # the pod is gone (or was replaced: a new stream follows the new one)
            if self.complete and rec.terminated:
                return
            if ended and rec.deleting:
                return  # its instance ended and the pod is being deleted: no container starts again
            if rec.terminated and self._given_up():
                return  # it has finished, and its log could not be read for `give_up_after`: an error
            restarts = rec.restarts
            terminal = rec.terminated
            if broken and (self.last_ts or self.initial_consumed):
                self.changed.clear()
                same = await self._recover()
                if same is None:
                    return
                if not same:  # the server cannot say yet: wait, then ask again
                    await self._pause(backoff)
                    backoff = min(backoff * 2, eng.options.backoff_max)
                    continue
                broken = False
            elif not self.last_ts and not self.initial_consumed and self._missed_previous(rec):
                await self._previous_tail()  # it restarted before we ever read it: the first run first
            params = self._base() + self._resume() + [("follow", "true")]
            self.changed.clear()
            got = 0
            normal = False
            ended = False
            try:
                got = await self._read(params, follow=True)
                normal = ended = True
                self.initial_consumed = True
                self.complete = terminal
                self.state = "ended"
            except (_Stalled, _Dropped) as exc:
                self.reopens += 1
                self.state = "retrying"
                self.message = str(exc)
                rec2 = eng.pod_record(self)
                if rec2 is not None and rec2.uid == self.uid and rec2.restarts > restarts and self.last_ts:
                    broken = not await self._previous_tail()  # not read: asked again before the follow
                continue  # reopen at once: the last timestamp tells where to resume
            except ApiProblem as exc:
                if not self._api_problem(exc, history=False):
                    return
                broken = broken or exc.status in TRANSIENT or exc.status == 401
                if self._retry_after is not None:
                    backoff = max(backoff, min(self._retry_after, eng.options.backoff_max))
            except ConnectionProblem as exc:
                eng.server_lost(exc.message)
                self.state = "retrying"
                self.message = exc.message
                self.last_problem = exc
                self._unreadable(None)
                broken = True
            if normal and got:
                backoff = eng.options.backoff_min
                await asyncio.sleep(0.02)
                continue
            await self._pause(backoff)
            backoff = min(backoff * 2, eng.options.backoff_max)

    async def _pause(self, seconds: float) -> None:
        """Wait `seconds`, or until the pod's record changes."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self.changed.wait()

    async def _recover(self) -> bool | None:
        """After a follow broke: the pod read from the server. None: it is gone or was replaced
        (another uid under its name: a reopen would read the new pod's log); True: the same pod,
        and the rest of its previous instance was read (the container may have restarted while
        the follow was down); False: the server cannot tell now (try again)."""
        eng = self.engine
        o = self.origin
        self.recoveries += 1
        try:
            pod = await eng.client.get(api_paths.pod(o.namespace, o.pod))
        except ApiProblem as exc:
            if exc.status == 404:
                return None
            if exc.status != 403:  # (401: said once, the follow ends if it lasts; 5xx: said, retried)
                self._api_problem(exc, history=False)
                return False
            pod = None  # (a pod that may not be read: its log may still be)
        except ConnectionProblem as exc:
            eng.server_lost(exc.message)
            self.message = exc.message
            self.last_problem = exc
            self._unreadable(None)
            return False
        uid = ((pod.get("metadata") or {}).get("uid") or "") if isinstance(pod, dict) else ""
        if uid and uid != self.uid:
            return None
        return await self._previous_tail()

    def _missed_previous(self, rec: PodRec) -> bool:
        """The container already restarted, and its previous run ended after we started watching."""
        if rec.restarts <= 0:
            return False
        since = self.engine.started_at
        return any(
            ex.container == self.origin.container and ex.finished_at is not None and ex.finished_at >= since - 1
            for ex in rec.exits
        )

    async def _previous_tail(self) -> bool:
        """The container restarted while the connection was down: read the rest of the previous
        instance. True when read, or when there is none (400); False on a transient failure (a
        finished instance is read at once: quiet for `probe_after` is a stall)."""
        params = self._base() + self._resume() + [("previous", "true")]
        o = self.engine.options
        try:
            await self._read(params, follow=False, read_timeout=min(o.read_timeout, o.probe_after or o.read_timeout))
        except ApiProblem as exc:
            if exc.status in (400, 404):
                return True
            self._api_problem(exc, history=False)  # (403 ends the follow; the rest is said and retried)
            return False
        except ConnectionProblem as exc:
            self.last_problem = exc
            self._unreadable(None)
            return False
        except (_Stalled, _Dropped):
            return False
        return True

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
        if exc.status == 404 and history and not eng.options.previous and not eng.options.follow:
            eng.failed(self, exc)  # (a rank whose log cannot be read: an error, exit 1, never a note and 0)
            return False
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
        self._unreadable(exc.one_line())
        return True

    # -- a log that cannot be read for a while, then can ------------------------------------------------------
    def _unreadable(self, message: str | None) -> None:
        """Following, its log could not be read (`message`, said once until it changes; None: the
        server is unreachable, which the engine says once for every stream). Its lines meanwhile
        are read when it answers again, and, when its own answers failed, counted then
        (`_caught_up`)."""
        if self.unreadable_since is None:
            self.unreadable_since = (time.monotonic(), time.time_ns())
        if message is not None:
            self._own_trouble = True
            self.engine.notice_once(self, f"{message}; retrying (its lines are read when it answers again)")

    def _given_up(self) -> bool:
        """Its pod has finished and its log has not been readable for `give_up_after`: recorded as
        a failure (the CLI's error and exit code), saying since when its lines are missing."""
        since = self.unreadable_since
        eng = self.engine
        if since is None or time.monotonic() - since[0] < eng.options.give_up_after:
            return False
        from .lines import format_ts

        p = self.last_problem
        why = p.one_line() if isinstance(p, ApiProblem) else p.message if isinstance(p, ConnectionProblem) else self.message
        eng.failed(self, p, text=f"{why}; its lines since {format_ts(since[1])[:19]}Z could not be read")
        return True

    def _read_again(self) -> None:
        """A follow opened after its log could not be read: count what it wrote meanwhile."""
        since, own = self.unreadable_since, self._own_trouble
        self.unreadable_since, self._own_trouble = None, False
        if since is None or not own or self._catching is not None:
            return  # (the whole server was away: the engine said so, and that it is back)
        self._catching = [since[1], time.time_ns(), 0]
        self._catch_timer = asyncio.get_running_loop().call_later(1.0, self._caught_up)

    def _caught_up(self) -> None:
        """The lines written while its log could not be read have come (or it wrote none): said once,
        with their number and the time they span."""
        c, self._catching = self._catching, None
        if self._catch_timer is not None:
            self._catch_timer.cancel()
            self._catch_timer = None
        if c is None or self.engine.stopping:
            return
        start, end, n = c
        self.gaps.append((start, end, n))
        secs = max(0.0, (end - start) / 1e9)
        what = (f"{n} line{'s' if n != 1 else ''} it wrote meanwhile follow, late (out of time order)" if n
                else "it wrote no line meanwhile")
        self.engine.notice(f"{self.origin.label}/{self.origin.container}: its log is read again after "
                           f"{secs:.0f} s without it; {what}")

    # -- reading -------------------------------------------------------------------------------
    async def _read(self, params: list[tuple[str, str]], *, follow: bool, read_timeout: float | None = None) -> int:
        """One request; returns the number of new lines. Raises _Stalled/_Dropped/ApiProblem/ConnectionProblem."""
        eng = self.engine
        client = eng.client
        session = client.session()
        silence = read_timeout or (eng.options.read_timeout if follow else
                                   eng.options.history_timeout or eng.options.read_timeout)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=eng.options.connect_timeout, sock_read=silence)
        self._got = 0
        self.opens += 1
        sent = client.credentials_now()
        try:
            async with session.get(client.server + self.path, params=params, headers=client.headers("*/*"),
                                   timeout=timeout, server_hostname=client.server_hostname) as resp:
                if resp.status >= 400:
                    self._retry_after = _retry_after(resp.headers.get("Retry-After"))
                    raise problem_from_body(resp.status, await resp.read())
                self.state = "open"
                self.message = ""
                self.last_problem = None
                eng.server_answered(self)
                self._heard = time.monotonic()
                if follow:
                    self._read_again()
                try:
                    if follow and eng.options.probe_after > 0:
                        await self._consume_watched(resp)
                    else:
                        await self._consume(resp)
                finally:
                    if follow and self._catching is not None:
                        self._caught_up()
        except ApiProblem as exc:
            if exc.status == 401 and await client.credentials_rejected(sent):
                raise _Dropped("the credentials were read again") from None  # (asked again at once with them)
            raise
        except TimeoutError:
            self.stalls += 1
            raise _Stalled(f"no data for {silence:g} s") from None
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as exc:
            raise _Dropped(f"connection dropped: {type(exc).__name__}") from None
        except aiohttp.ClientConnectorError as exc:
            raise client.connection_problem(exc) from None
        except (aiohttp.ClientError, OSError) as exc:
            if self._got:
                raise _Dropped(f"connection lost: {type(exc).__name__}") from None
            raise client.connection_problem(exc) from None
        return self._got

    async def _consume_watched(self, resp: aiohttp.ClientResponse) -> None:
        """Read a follow while a watchdog checks, when it is quiet, that it is not behind."""
        reader = asyncio.ensure_future(self._consume(resp))
        watch = asyncio.ensure_future(self._watchdog())
        try:
            await asyncio.wait((reader, watch), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            reader.cancel()
            watch.cancel()
            await asyncio.gather(reader, watch, return_exceptions=True)
            raise
        if reader.done():
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
            reader.result()  # its error, if it ended with one
            return
        reader.cancel()  # the watchdog saw a newer line than this follow delivered: it is stuck
        await asyncio.gather(reader, return_exceptions=True)
        self.stalls += 1
        raise _Stalled("the follow fell behind the log (rotated, or a stalled connection)")

    async def _watchdog(self) -> None:
        """Returns when the open follow is behind the kubelet's newest line; runs until cancelled
        otherwise. Checks when the follow has been quiet `probe_after` s, then three times as long
        each time (up to `read_timeout`, when the read times out by itself)."""
        o = self.engine.options
        wait = o.probe_after
        while True:
            quiet = time.monotonic() - self._heard
            if quiet < wait:
                await asyncio.sleep(wait - quiet)
                continue
            newest = await self._newest()
            seen = max(self.last_ts, self._floor)
            if newest is not None and newest > seen and time.monotonic() - self._heard >= wait:
                return
            wait = min(wait * 3, max(o.read_timeout, o.probe_after))

    async def _newest(self) -> int | None:
        """The timestamp of the newest line of the container's current log, or None (empty, or
        no answer: the follow's own timeouts deal with a server that is gone)."""
        eng = self.engine
        self.probes += 1
        try:
            body = await eng.client.request("GET", self.path, params=[*self._base(), ("tailLines", "1")],
                                            accept="*/*", timeout=max(1.0, min(eng.options.read_timeout,
                                                                               eng.options.probe_after)))
        except (ApiProblem, ConnectionProblem, TimeoutError, aiohttp.ClientError, OSError):
            return None
        newest: int | None = None
        for raw in body.split(b"\n"):
            ts, _ = split_record(raw) if raw else (None, b"")
            if ts is not None:
                newest = ts if newest is None else max(newest, ts)
        return newest

    async def _consume(self, resp: aiohttp.ClientResponse) -> None:
        """The body of an answer, line by line into the merge (`self._got` counts the new ones)."""
        merger = self.engine.merger
        src = self.source
        assert src is not None
        pending: list[bytes] = []
        plen = 0
        over = 0
        async for chunk in resp.content.iter_any():
            self._heard = time.monotonic()
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
                self._got += len(batch)
                merger.add(src, batch)
                if merger.exact and src.full:
                    await src.wait_space()
                    self._heard = time.monotonic()
        if pending:
            batch = self._parse([b"".join(pending)], over)
            if batch:
                self._got += len(batch)
                merger.add(src, batch)

    def _parse(self, raws: list[bytes], over: int) -> list[LogLine]:
        out: list[LogLine] = []
        origin = self.origin
        tagged = self.tagged
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
            catching = self._catching
            if catching is not None:
                if ts <= catching[1]:
                    catching[2] += 1
                else:
                    self._caught_up()
            at = origin if tagged is None else tagged.of(content)
            line = LogLine(ts, content, at, cut=cut) if cut else LogLine(ts, content, at)
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
    base = min(options.backoff_max, options.backoff_min * 2.0 ** (attempt - 1))
    return base * (0.75 + random.random() * 0.5)


def stream_summary(s: LogStream) -> dict[str, Any]:
    o = s.origin
    return {"label": o.label, "pod": o.pod, "container": o.container, "state": s.state, "message": s.message,
            "lines": s.lines, "bytes": s.bytes, "opens": s.opens, "reopens": s.reopens, "probes": s.probes}
