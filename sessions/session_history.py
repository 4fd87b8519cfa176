"""A session's launches, wherever they were recorded: every running rank's shell history (read
through exec), the copies ranks kept of them and the launches `ranks exec` ran (the history store,
`sessions.history_store`), put together per launch (`sessions.launches.group`).

While a shell is open, its rank's history is mirrored into the store as it grows
(`mirror_history`: one exec that prints the file whenever its size changes), so a pod deleted
under the shell (a suspend, a restart) loses nothing of it; before a suspend or a delete, every
running rank's is saved (`save_histories`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from monitors.connection import ExitCode
from monitors.humanize import plural
from monitors.model_views import RankView, WorkloadView
from monitors.sanitize import clean

from .errors import SessionError
from .exec_all import RankResult, run_on_ranks
from .exec_bridge import ExecError, ExecSession
from .history import HISTORY_NAME, LaunchRun, parse_history, runs_of
from .history_store import HistoryStore, SavedSession
from .launches import Launch, exec_run, group

MIRROR_EVERY = 2  # s between looks at the history file's size
TEXT_TAIL = 512 * 1024  # bytes of a history file read at most
READ_AT_ONCE = 16  # ranks' histories read at once

_FIND = (f'H=; for f in "${{HOME:-/tmp}}/{HISTORY_NAME}" "/tmp/{HISTORY_NAME}"; do '
         '[ -f "$f" ] && [ -r "$f" ] && [ -O "$f" ] && [ ! -h "$f" ] && { H=$f; break; }; done')


def history_command() -> list[str]:
    """Prints the session's shell history (as `sessions.shell` records it): only a regular file of
    the user's own (not one someone else left in /tmp, not a FIFO, on which `tail` would wait
    forever), its last TEXT_TAIL bytes."""
    return ["/bin/sh", "-c", f'{_FIND}; [ -n "$H" ] && tail -c {TEXT_TAIL} "$H"; exit 0']


def mirror_command() -> list[str]:
    """Prints the history file framed (`\\x1e<size>\\n<text>\\x1e\\n`) whenever its size changes,
    and a heartbeat (`\\x1f`) every few looks: a dropped connection ends it at its next write."""
    script = (f'last=-; n=0; while :; do {_FIND}; s=; [ -n "$H" ] && s=$(wc -c < "$H" 2>/dev/null); '
              'if [ "$s" != "$last" ]; then last=$s; printf "\\036%s\\n" "$s"; '
              f'[ -n "$H" ] && tail -c {TEXT_TAIL} "$H"; printf "\\036\\n"; n=0; '
              'else n=$((n + 1)); [ $n -ge 5 ] && { printf "\\037\\n"; n=0; }; fi; '
              f'sleep {MIRROR_EVERY}; done')
    return ["/bin/sh", "-c", script]


class Frames:
    """The texts framed by `mirror_command` in a byte stream, as they arrive whole."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes) -> list[str]:
        self.buf += data
        out: list[str] = []
        while True:
            start = self.buf.find(b"\x1e")
            if start < 0:
                self.buf = b""
                return out
            head = self.buf.find(b"\n", start)
            end = self.buf.find(b"\x1e", head + 1) if head >= 0 else -1
            if end < 0:
                self.buf = self.buf[start:]
                return out
            out.append(self.buf[head + 1:end].decode("utf-8", "replace"))
            self.buf = self.buf[end + 1:]


def instance(r: RankView) -> str:
    """A pod instance: its name and creation (a recreated pod of the same name is another)."""
    return f"{r.pod}@{r.created or ''}"


def _saver(store: HistoryStore, wl: WorkloadView, r: RankView) -> Callable[[str], Any]:
    def save(text: str) -> Any:
        return store.save_history(wl.namespace, wl.kind, wl.name, wl.uid, r.label, r.pod, instance(r), text)
    return save


async def mirror_history(client: Any, wl: WorkloadView, r: RankView, store: HistoryStore,
                         container: str | None = None, job: dict[str, Any] | None = None) -> None:
    """Keep `r`'s history file mirrored in `store` until cancelled (the shell ended); the session's
    job is saved first. Failures are quiet: the mirror is a copy, the pod holds the file."""
    save = _saver(store, wl, r)
    if job is None and wl.api_version:
        from .lifecycle import get, target_of

        with contextlib.suppress(Exception):
            job = await get(client, target_of(wl))
    if job is not None:
        with contextlib.suppress(OSError):
            await asyncio.to_thread(store.save_job, wl.namespace, wl.kind, wl.name, wl.uid, comparable(job))
    frames = Frames()
    texts: asyncio.Queue[str] = asyncio.Queue()

    async def writer() -> None:
        while True:
            text = await texts.get()
            while not texts.empty():  # only the newest matters
                text = texts.get_nowait()
            with contextlib.suppress(OSError):
                await asyncio.to_thread(save, text)

    def sink(channel: int, data: bytes) -> None:
        if channel == 1:
            for text in frames.feed(data):
                texts.put_nowait(text)

    task = asyncio.create_task(writer())
    try:
        session = await ExecSession.open(client, wl.namespace, r.pod, mirror_command(), container=container,
                                         tty=False, stdin=False)
    except ExecError:
        task.cancel()
        return
    try:
        await session.bridge(None, sink)
    finally:
        with contextlib.suppress(Exception):
            await session.close()
        while not texts.empty():
            with contextlib.suppress(OSError):
                await asyncio.to_thread(save, texts.get_nowait())
        task.cancel()


async def read_histories(client: Any, wl: WorkloadView, ranks: Sequence[RankView]
                         ) -> list[tuple[RankView, str | None, RankResult]]:
    """Each rank's history file, read through exec at once (None where it could not be read)."""
    chunks: dict[str, list[bytes]] = {r.pod: [] for r in ranks}

    def on_line(r: RankView, channel: int, line: bytes) -> None:
        if channel == 1:
            chunks[r.pod].append(line)

    results: list[RankResult] = []
    for at in range(0, len(ranks), READ_AT_ONCE):  # a 64-rank session: not 64 execs at once
        results += await run_on_ranks(client, wl, ranks[at:at + READ_AT_ONCE], history_command(), on_line)
    return [(res.rank, b"".join(chunks[res.rank.pod]).decode("utf-8", "replace") if res.ok else None, res)
            for res in results]


def _running(wl: WorkloadView) -> list[RankView]:
    return [r for r in wl.ranks if r.phase == "Running" and r.reason in ("", "Running")]


async def _read_and_save(client: Any, wl: WorkloadView, store: HistoryStore, job: dict[str, Any] | None
                         ) -> tuple[SavedSession | None, list[tuple[RankView, str | None, RankResult]]]:
    running = _running(wl)
    found = await read_histories(client, wl, running) if running else []
    saved = None
    for r, text, _res in found:
        if text is not None:
            with contextlib.suppress(OSError):
                saved = await asyncio.to_thread(_saver(store, wl, r), text)
    if job is not None:
        with contextlib.suppress(OSError):
            await asyncio.to_thread(store.save_job, wl.namespace, wl.kind, wl.name, wl.uid, comparable(job))
    if saved is None or job is not None:
        saved = await asyncio.to_thread(store.load, wl.namespace, wl.kind, wl.name, wl.uid)
    return saved, found


async def save_histories(client: Any, wl: WorkloadView, store: HistoryStore,
                         job: dict[str, Any] | None = None) -> SavedSession | None:
    """Every running rank's history into the store (before a suspend or a delete); the saved
    session after."""
    return (await _read_and_save(client, wl, store, job))[0]


def comparable(job: dict[str, Any]) -> dict[str, Any]:
    """The job as kept: what a user wrote (no status, no server-set metadata)."""
    from .convert import comparable as written

    return written(job)


def normalizer(job: dict[str, Any] | None) -> Callable[[str], str]:
    """A command as the new job would run it (the session's names, node rank, master address and
    port as the operator gives them), to tell runs of the same launch on different nodes."""
    if not job:
        return str
    from .convert import rewrite_command

    def normalize(command: str) -> str:
        try:
            return rewrite_command(command, job, "new")
        except Exception:
            return command
    return normalize


def replicas_of(job: dict[str, Any] | None, fallback: int) -> int:
    """The job's replicas in all (the operator's PET_NNODES for a PyTorchJob without elasticPolicy)."""
    from .convert import REPLICA_FIELDS

    spec = (job or {}).get("spec") or {}
    field = REPLICA_FIELDS.get((job or {}).get("kind", ""), "")
    total = sum(int((r or {}).get("replicas") or 1) for r in (spec.get(field) or {}).values())
    return total or fallback


def launches_of(saved: SavedSession | None, job: dict[str, Any] | None, labels: Sequence[str] = ()) -> list[Launch]:
    """The launches of a saved session (its ranks' histories and exec runs), most recent first."""
    if saved is None:
        return []
    runs: dict[tuple[str, str, float | None, str], LaunchRun] = {}
    for h in saved.histories:
        for run in runs_of(parse_history(h.text), h.label, h.pod):
            runs.setdefault(run.key(), run)
    for run in saved.runs:
        runs.setdefault(run.key(), run)
    job = job or saved.job
    # a torchrun without --nnodes takes the operator's PET_NNODES: a PyTorchJob's replicas
    nodes = replicas_of(job, len(labels) or 1) if saved.kind == "PyTorchJob" else 1
    return group(list(runs.values()), normalize=normalizer(job), labels=labels, default_nodes=nodes)


async def session_launches(client: Any, wl: WorkloadView, store: HistoryStore,
                           job: dict[str, Any] | None = None) -> list[Launch]:
    """The session's launches, most recent first, each with its status on every node it spans:
    every running rank's history (saved on the way), what was saved before, the exec runs. A
    session whose lead's history cannot be read and of which nothing was saved is a SessionError."""
    saved, found = await _read_and_save(client, wl, store, job)
    if saved is None:
        lead = wl.lead or (wl.ranks[0] if wl.ranks else None)
        bad = next((res for r, text, res in found if text is None and lead is not None and r.pod == lead.pod), None)
        if bad is not None:
            raise SessionError(f"cannot read the shell history in {bad.rank.pod}: "
                               f"{clean(bad.error) or 'exit ' + str(bad.exit_code)}", ExitCode.ERROR)
        if not _running(wl):
            why = f"{wl.name} has no running pod" if wl.ranks or wl.status != "Suspended" else f"{wl.name} is suspended"
            raise SessionError(f"cannot read the shell history: {why}, and ranks kept none of it", ExitCode.ERROR)
        return []
    return launches_of(saved, job, [r.label for r in wl.ranks])


def record_exec(store: HistoryStore, wl: WorkloadView, argv: Sequence[str], results: Sequence[RankResult],
                start: float, end: float | None = None) -> list[LaunchRun]:
    """The launches `ranks exec` (or run-on-ranks) ran, each rank's with its status, into the store.
    Blocking (file I/O)."""
    end = time.time() if end is None else end
    runs = [run for res in results if res.outcome is not None
            and (run := exec_run(argv, res.exit_code, start, end, res.rank.label, res.rank.pod)) is not None]
    if runs:
        store.add_runs(wl.namespace, wl.kind, wl.name, wl.uid, runs)
    return runs


async def keep_before_losing(client: Any, wl: WorkloadView, store: HistoryStore) -> int:
    """Before a suspend or a delete of an interactive session: every running rank's history and
    the job saved in `store`; how many launches ranks keeps of it (-1: it could not keep them)."""
    job: dict[str, Any] | None = None
    if wl.api_version:
        from .lifecycle import get, target_of

        with contextlib.suppress(Exception):
            job = await get(client, target_of(wl))
    try:
        saved = await save_histories(client, wl, store, job)
    except (SessionError, ExecError, OSError):
        return -1
    return len(launches_of(saved, job, [r.label for r in wl.ranks]))


def loss_note(verb: str, wl: WorkloadView, kept: int) -> str:
    """What suspending or deleting an interactive session loses and what ranks keeps of it, as one
    sentence ("suspending deletes its 3 pods (the job stays), ...")."""
    doing = "suspending" if verb == "suspend" else "deleting"
    n = len(wl.ranks)
    if not n:
        lost = f"{doing} it deletes no pod (it has none now)"
    else:
        lost = (f"{doing} deletes its {plural(n, 'pod')}{' (the job stays)' if verb == 'suspend' else ''}, and with "
                f"{'them' if n != 1 else 'it'} every file outside mounted volumes (the home directory, /tmp, the "
                "shell history in the pods)")
    if kept < 0:
        keep = "ranks could not read the shell histories: their launches may be lost"
    elif kept == 0:
        keep = "no launch was recorded in its shells"
    else:
        keep = (f"ranks keeps the {plural(kept, 'launch', 'launches')} recorded in its shells: "
                "convert --from-history still finds them")
    return f"{lost}; {keep}."
