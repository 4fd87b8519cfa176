"""Every rank's stack, read in its pod through pods/exec: one listing per pod (`procs`), then one
exec per pod running `py-spy dump` for each of its rank processes in turn (`DUMP_SCRIPT`), the pods
in parallel (at most `parallel` execs at once). An exec silent for `timeout` seconds
(`--request-timeout`) is abandoned: the dumps it finished are kept, the rank py-spy hung on and
those after it named.

py-spy is asked for JSON (`--json`); a py-spy too old for it is asked again for its text. What it
prints is parsed as data (`dumps`), never evaluated.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from monitors.kube import KubeClient
from monitors.model_views import RankView, WorkloadView
from monitors.sanitize import clean

from ..exec_bridge import ExecError, ExecSession
from .dumps import DumpError, ThreadStack, chosen, parse
from .procs import LIST_SCRIPT, OtherProc, RankProc, classify, parse_listing, pod_processes

OUTPUT_LIMIT = 32 << 20  # bytes kept of one exec's output (a pod's dumps)
NOT_FOUND = 127  # the shell's status for a command it cannot find
NO_PY_SPY = "py-spy is not in the image (add it: pip install py-spy; or give --image, a debug image with it)"


@dataclass(frozen=True)
class Options:
    native: bool = False
    all_threads: bool = False
    timeout: float | None = 30.0  # per exec; None: no limit
    parallel: int = 16
    ranks: frozenset[int] | None = None  # only these ranks (None: every one)
    container: str | None = None
    image: str | None = None  # a debug image with py-spy, for pods whose image lacks it
    read_only: bool = False  # (then no debug container: it changes the pod)


@dataclass
class RankStack:
    rank: int
    local_rank: int | None
    pod: str
    label: str  # the pod's rank label (worker-3)
    pid: int
    name: str
    threads: list[ThreadStack]


@dataclass(frozen=True)
class Unread:
    pod: str
    label: str
    why: str
    rank: int | None = None  # None: the pod's processes could not be listed (its ranks unknown)


@dataclass
class Autopsy:
    workload: str
    namespace: str
    stacks: list[RankStack] = field(default_factory=list)
    others: list[tuple[str, OtherProc]] = field(default_factory=list)  # (pod label, process)
    unread: list[Unread] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what is missing, said once (py-spy, ptrace)
    taken_at: float = 0.0
    seconds: float = 0.0  # how long reading took
    all_threads: bool = False
    debug_containers: list[tuple[str, str]] = field(default_factory=list)  # (pod label, container) added

    @property
    def by_rank(self) -> dict[int, list[ThreadStack]]:
        return {s.rank: s.threads for s in self.stacks}


@dataclass
class _Run:
    code: int
    out: bytes
    err: bytes
    message: str = ""


async def _run(client: KubeClient, ns: str, pod: str, command: Sequence[str], container: str | None,
               timeout: float | None, out: bytearray | None = None, err: bytearray | None = None) -> _Run:
    """`command` in the pod; raises ExecError (could not start) or TimeoutError when it stays silent
    for `timeout` seconds (what it wrote until then stays in `out` and `err`)."""
    out = bytearray() if out is None else out
    err = bytearray() if err is None else err
    last = [time.monotonic()]

    def sink(channel: int, data: bytes) -> None:
        last[0] = time.monotonic()
        buf = out if channel == 1 else err
        if len(buf) < OUTPUT_LIMIT:
            buf.extend(data[: OUTPUT_LIMIT - len(buf)])

    async def go() -> _Run:
        session = await ExecSession.open(client, ns, pod, command, container=container, tty=False, stdin=False)
        try:
            outcome = await session.receive(sink)
        finally:
            await session.close()
        return _Run(outcome.exit_code, bytes(out), bytes(err), outcome.message)

    task = asyncio.ensure_future(go())
    try:
        while True:
            wait = None if timeout is None else max(0.0, last[0] + timeout - time.monotonic())
            done, _ = await asyncio.wait({task}, timeout=wait)
            if done:
                return task.result()
            if timeout is not None and time.monotonic() - last[0] >= timeout:
                raise TimeoutError
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def why_dump_failed(code: int, said_raw: str) -> str:
    """One line: what py-spy (or the shell) said, as a fix where the cause is known."""
    lines = [ln for ln in said_raw.strip().splitlines() if ln.strip()]
    whole = clean(lines[0] if lines else "", limit=2000)
    said, lower = clean(whole, limit=200), whole.lower()
    # (the shell's 127 and `py-spy: not found`, or the runtime's `exec: "py-spy": executable file not found`)
    if code == NOT_FOUND or ("not found" in lower and "py-spy" in lower):
        return NO_PY_SPY
    if "permission denied" in lower or "operation not permitted" in lower:
        return ("the kernel refused py-spy's ptrace (the container needs the SYS_PTRACE capability: "
                "securityContext.capabilities.add)")
    if "no such process" in lower or ("failed to find python" in lower and "process" in lower):
        return f"the process could not be read ({said})"
    return said or f"py-spy exited with {code}"


# one exec per pod: each rank process's dump in turn, between lines of a marker no dump can hold,
# on stdout and on stderr (where py-spy says why it could not)
DUMP_SCRIPT = r"""m=$1; shift; a=$1; shift
for p in "$@"; do
  echo "$m start $p"; echo "$m start $p" >&2
  py-spy dump --pid "$p" $a
  s=$?
  echo "$m end $p $s"; echo "$m end $p $s" >&2
done
"""


@dataclass
class Sections:
    done: dict[int, tuple[int, bytes]] = field(default_factory=dict)  # pid -> (exit status, what it printed)
    started: int | None = None  # the pid whose dump began and did not end


def split_sections(out: bytes, marker: str) -> Sections:
    """What `DUMP_SCRIPT` printed, per process; a dump cut short (the exec abandoned) is `started`."""
    result = Sections()
    start, end = f"{marker} start ".encode(), f"{marker} end ".encode()
    body: list[bytes] = []
    for line in out.split(b"\n"):
        if line.startswith(start):
            pid = line[len(start):].strip()
            result.started = int(pid) if pid.isdigit() else None
            body = []
        elif line.startswith(end) and result.started is not None:
            words = line[len(end):].split()
            if len(words) == 2 and words[1].isdigit():
                result.done[result.started] = (int(words[1]), b"\n".join(body))
            result.started = None
        elif result.started is not None:
            body.append(line)
    return result


async def dump_pod(client: KubeClient, ns: str, pod: str, pids: Sequence[int], opts: Options, *,
                   as_json: bool = True) -> tuple[dict[int, list[ThreadStack] | str], int | None, bool]:
    """The dumps of `pids` in one exec: (pid -> its threads, or why not; the pid py-spy hung on when
    the exec went silent for `opts.timeout`, the rest after it not reached; whether it timed out).
    ExecError when the exec cannot start. A py-spy too old for `--json` is asked again for text."""
    marker = f"@@ranks-{secrets.token_hex(8)}"
    args = " ".join((["--json"] if as_json else []) + (["--native"] if opts.native else []))
    out, err = bytearray(), bytearray()
    timed_out = False
    try:
        await _run(client, ns, pod, ["sh", "-c", DUMP_SCRIPT, "sh", marker, args, *map(str, pids)],
                   opts.container, opts.timeout, out, err)
    except TimeoutError:
        timed_out = True
    sections, said = split_sections(bytes(out), marker), split_sections(bytes(err), marker).done
    got: dict[int, list[ThreadStack] | str] = {}

    def error_of(pid: int) -> bytes:
        return said.get(pid, (0, b""))[1] or sections.done[pid][1]

    old = [pid for pid, (code, _) in sections.done.items() if code != 0 and as_json and b"--json" in error_of(pid)]
    for pid, (code, body) in sections.done.items():
        if pid in old:
            continue
        if code != 0:
            got[pid] = why_dump_failed(code, error_of(pid).decode("utf-8", "replace"))
            continue
        try:
            got[pid] = chosen(parse(body, as_json=as_json), opts.all_threads, pid)
        except DumpError as exc:
            got[pid] = str(exc)
    if old:  # (a py-spy before --json: its text, then)
        again, hung, more = await dump_pod(client, ns, pod, old, opts, as_json=False)
        got.update(again)
        return got, hung, more
    return got, sections.started if timed_out else None, timed_out


def running_ranks(wl: WorkloadView) -> list[RankView]:
    return [r for r in wl.ranks if r.phase == "Running" and r.node and not r.deleting]


@dataclass
class _PodRead:
    stacks: list[RankStack] = field(default_factory=list)
    unread: list[Unread] = field(default_factory=list)
    others: list[tuple[str, OtherProc]] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (why, pod label)

    @property
    def lacks_py_spy(self) -> bool:
        return bool(self.unread) and not self.stacks and all(u.why == NO_PY_SPY for u in self.unread)


async def autopsy(client: KubeClient, wl: WorkloadView, pods: Sequence[RankView], opts: Options) -> Autopsy:
    """Every rank process's stack in `pods`, read in parallel, bounded; see the module docstring.
    A pod whose image lacks py-spy is read again from a debug container of `opts.image`
    (`debug_container`), unless `opts.read_only`."""
    started = time.monotonic()
    result = Autopsy(wl.name, wl.namespace, taken_at=time.time(), all_threads=opts.all_threads)
    gate = asyncio.Semaphore(max(1, opts.parallel))

    def waited(what: str) -> str:
        return f"{what} did not answer within {opts.timeout:g}s" if opts.timeout else f"{what} did not answer"

    async def dumps(r: RankView, procs: list[RankProc], o: Options, out: _PodRead) -> None:
        try:
            async with gate:
                got, hung, timed_out = await dump_pod(client, wl.namespace, r.pod, [p.pid for p in procs], o)
        except ExecError as exc:
            out.problems.append((exc.message, r.label))
            out.unread.extend(Unread(r.pod, r.label, exc.message, p.rank) for p in procs)
            return
        hung_rank = next((p.rank for p in procs if p.pid == hung), None)
        for proc in procs:
            threads = got.get(proc.pid)
            if isinstance(threads, list):
                out.stacks.append(RankStack(proc.rank, proc.local_rank, r.pod, r.label, proc.pid, proc.name, threads))
                continue
            if threads is None:
                why = waited("py-spy") if proc.pid == hung or (hung_rank is None and timed_out) else (
                    f"not reached: py-spy did not answer for rank {hung_rank} before it" if timed_out
                    else "py-spy's output ended before its dump")
            else:
                why = threads
                out.problems.append((why, r.label))
            out.unread.append(Unread(r.pod, r.label, why, proc.rank))

    async def read(r: RankView, o: Options, beside: bool) -> _PodRead:
        """The pod's ranks through `o.container`; `beside`: a debug container, whose own mount
        namespace is not the target's (the processes it shares are the target's)."""
        out = _PodRead()
        script = ["sh", "-c", LIST_SCRIPT, "sh", *(["beside"] if beside else [])]
        try:
            async with gate:
                run = await _run(client, wl.namespace, r.pod, script, o.container, o.timeout)
        except TimeoutError:
            out.unread.append(Unread(r.pod, r.label, waited("listing its processes")))
            return out
        except ExecError as exc:
            out.unread.append(Unread(r.pod, r.label, exc.message))
            return out
        found = classify(pod_processes(parse_listing(run.out.decode("utf-8", "replace"))))
        out.others.extend((r.label, p) for p in found.others)
        wanted = [p for p in found.ranks if o.ranks is None or p.rank in o.ranks]
        if not found.ranks and r.role.lower() != "launcher":  # (an MPI launcher's ranks run in the workers)
            out.unread.append(Unread(r.pod, r.label, "no process in it says a rank (RANK, OMPI_COMM_WORLD_RANK...)"))
        if wanted:
            await dumps(r, wanted, o, out)
        return out

    async def one_pod(r: RankView) -> None:
        got = await read(r, opts, False)
        if got.lacks_py_spy and opts.image and opts.read_only:
            got.problems = [(f"{NO_PY_SPY[:-1]}; a debug container (--image) would change the pod, which "
                             "read-only mode refuses)", r.label)]
        elif got.lacks_py_spy and opts.image:
            from .debug_container import add

            try:
                name = await add(client, wl.namespace, r.pod, opts.image, opts.timeout)
            except ExecError as exc:
                got.problems = [(exc.message, r.label)]
                got.unread = [dataclasses.replace(u, why=exc.message) for u in got.unread]
            else:
                got = await read(r, dataclasses.replace(opts, container=name), True)
                result.debug_containers.append((r.label, name))
        result.stacks.extend(got.stacks)
        result.unread.extend(got.unread)
        result.others.extend(got.others)
        for why, label in got.problems:
            problems.setdefault(why, set()).add(label)

    problems: dict[str, set[str]] = {}  # problem -> pods
    tasks = [asyncio.ensure_future(one_pod(r)) for r in pods]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
    result.stacks.sort(key=lambda s: s.rank)
    result.unread.sort(key=lambda u: (u.rank is None, u.rank or 0, u.label))
    result.others.sort(key=lambda o: (o[0], o[1].pid))
    for why, labels in problems.items():
        if len(labels) > 1 or why.startswith(("py-spy is not", "the kernel", "forbidden", "the namespace's",
                                              "the debug container", "this cluster")):
            result.problems.append(f"{', '.join(sorted(labels))}: {why}")
    result.seconds = time.monotonic() - started
    return result
