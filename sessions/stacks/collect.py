"""Every rank's stack, read in its pod through pods/exec: one listing per pod (`procs`), then one
`py-spy dump` per rank process, in parallel (at most `parallel` execs at once), each abandoned
after `timeout` seconds (`--request-timeout`): the ranks read are kept, the others named.

py-spy is asked for JSON (`--json`); a py-spy too old for it is asked again for its text. What it
prints is parsed as data (`dumps`), never evaluated.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from monitors.kube import KubeClient
from monitors.model_views import RankView, WorkloadView
from monitors.sanitize import clean

from ..exec_bridge import ExecError, ExecSession
from .dumps import DumpError, ThreadStack, chosen, parse
from .procs import LIST_SCRIPT, OtherProc, RankProc, classify, parse_listing, pod_processes

OUTPUT_LIMIT = 8 << 20  # bytes kept of one exec's output
NOT_FOUND = 127  # the shell's status for a command it cannot find


@dataclass(frozen=True)
class Options:
    native: bool = False
    all_threads: bool = False
    timeout: float | None = 30.0  # per exec; None: no limit
    parallel: int = 16
    ranks: frozenset[int] | None = None  # only these ranks (None: every one)
    container: str | None = None


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
               timeout: float | None) -> _Run:
    """`command` in the pod; raises ExecError (could not start) or TimeoutError (no end in time)."""
    out, err = bytearray(), bytearray()

    def sink(channel: int, data: bytes) -> None:
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

    return await asyncio.wait_for(go(), timeout)


def _why_dump_failed(run: _Run) -> str:
    """One line: what py-spy (or the shell) said, as a fix where the cause is known."""
    whole = clean(run.err.decode("utf-8", "replace").strip().splitlines()[0] if run.err.strip() else run.message,
                  limit=2000)
    said, lower = clean(whole, limit=200), whole.lower()
    # (a shell's 127, or the runtime's `exec: "py-spy": executable file not found in $PATH`)
    if run.code == NOT_FOUND or ("not found" in lower and "py-spy" in lower):
        return "py-spy is not in the image (add it: pip install py-spy)"
    if "permission denied" in lower or "operation not permitted" in lower:
        return ("the kernel refused py-spy's ptrace (the container needs the SYS_PTRACE capability: "
                "securityContext.capabilities.add)")
    if "no such process" in lower or ("failed to find python" in lower and "process" in lower):
        return f"the process could not be read ({said})"
    return said or f"py-spy exited with {run.code}"


async def dump(client: KubeClient, ns: str, pod: str, pid: int, opts: Options) -> list[ThreadStack]:
    """One process's threads (as `opts` chooses them); ExecError, TimeoutError or DumpError otherwise."""
    base = ["py-spy", "dump", "--pid", str(pid)] + (["--native"] if opts.native else [])
    run = await _run(client, ns, pod, [*base, "--json"], opts.container, opts.timeout)
    as_json = True
    if run.code != 0 and b"--json" in run.err:  # (a py-spy before --json: its text, then)
        run = await _run(client, ns, pod, base, opts.container, opts.timeout)
        as_json = False
    if run.code != 0:
        raise DumpError(_why_dump_failed(run))
    return chosen(parse(run.out, as_json=as_json), opts.all_threads, pid)


def running_ranks(wl: WorkloadView) -> list[RankView]:
    return [r for r in wl.ranks if r.phase == "Running" and r.node and not r.deleting]


async def autopsy(client: KubeClient, wl: WorkloadView, pods: Sequence[RankView], opts: Options) -> Autopsy:
    """Every rank process's stack in `pods`, read in parallel, bounded; see the module docstring."""
    started = time.monotonic()
    result = Autopsy(wl.name, wl.namespace, taken_at=time.time(), all_threads=opts.all_threads)
    gate = asyncio.Semaphore(max(1, opts.parallel))
    problems: dict[str, set[str]] = {}  # problem -> pods

    def waited(what: str) -> str:
        return f"{what} did not answer within {opts.timeout:g}s" if opts.timeout else f"{what} did not answer"

    async def one_rank(r: RankView, proc: RankProc) -> None:
        try:
            async with gate:
                threads = await dump(client, wl.namespace, r.pod, proc.pid, opts)
        except TimeoutError:
            result.unread.append(Unread(r.pod, r.label, waited("py-spy"), proc.rank))
            return
        except (ExecError, DumpError) as exc:
            why = exc.message if isinstance(exc, ExecError) else str(exc)
            problems.setdefault(why, set()).add(r.label)
            result.unread.append(Unread(r.pod, r.label, why, proc.rank))
            return
        result.stacks.append(RankStack(proc.rank, proc.local_rank, r.pod, r.label, proc.pid, proc.name, threads))

    async def one_pod(r: RankView) -> None:
        try:
            async with gate:
                run = await _run(client, wl.namespace, r.pod, ["sh", "-c", LIST_SCRIPT], opts.container, opts.timeout)
        except TimeoutError:
            result.unread.append(Unread(r.pod, r.label, waited("listing its processes")))
            return
        except ExecError as exc:
            result.unread.append(Unread(r.pod, r.label, exc.message))
            return
        found = classify(pod_processes(parse_listing(run.out.decode("utf-8", "replace"))))
        result.others.extend((r.label, o) for o in found.others)
        wanted = [p for p in found.ranks if opts.ranks is None or p.rank in opts.ranks]
        if not found.ranks:
            result.unread.append(Unread(r.pod, r.label, "no process in it says a rank (RANK, OMPI_COMM_WORLD_RANK...)"))
        await asyncio.gather(*(one_rank(r, p) for p in wanted))

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
        if len(labels) > 1 or why.startswith(("py-spy is not", "the kernel")):
            result.problems.append(f"{', '.join(sorted(labels))}: {why}")
    result.seconds = time.monotonic() - started
    return result
