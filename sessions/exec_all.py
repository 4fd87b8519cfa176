"""Run one command on several ranks at once (how `torchrun`, which starts on every node, is run by
hand): output merged line by line with a rank prefix, each rank's exit status at the end."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from monitors.connection import ExitCode
from monitors.kube import KubeClient
from monitors.model_views import RankView, WorkloadView

from .exec_bridge import ExecError, ExecOutcome, ExecSession

OnLine = Callable[[RankView, int, bytes], None]  # rank, channel (1 stdout, 2 stderr), line with its newline


@dataclass
class RankResult:
    rank: RankView
    outcome: ExecOutcome | None
    error: str = ""
    code: int = 0  # the exit code of the CLI when exec could not start (forbidden: 7...)

    @property
    def exit_code(self) -> int:
        if self.outcome is None:
            return 255
        return self.outcome.exit_code

    @property
    def ok(self) -> bool:
        return self.outcome is not None and self.outcome.exit_code == 0


def select_ranks(wl: WorkloadView, wanted: Sequence[str] | None) -> list[RankView]:
    """Every rank (None), or those named by label (worker-3, launcher) or rank number."""
    if not wanted:
        return list(wl.ranks)
    out: list[RankView] = []
    missing: list[str] = []
    for w in wanted:
        found = [r for r in wl.ranks if w in (r.label, str(r.rank), r.pod)]
        if not found:
            missing.append(w)
        for r in found:
            if r not in out:
                out.append(r)
    if missing:
        labels = ", ".join(f"{r.label} (rank {r.rank})" if r.rank is not None else r.label for r in wl.ranks)
        raise ExecError(f"no such rank in {wl.name}: {', '.join(missing)} (ranks: {labels or 'none'})",
                        ExitCode.NOT_FOUND)
    return out


class _Lines:
    """Splits a rank's output into whole lines for the merged stream."""

    def __init__(self, rank: RankView, on_line: OnLine) -> None:
        self.rank = rank
        self.on_line = on_line
        self.partial = {1: b"", 2: b""}

    def feed(self, channel: int, data: bytes) -> None:
        buf = self.partial.get(channel, b"") + data
        *lines, rest = buf.split(b"\n")
        for line in lines:
            self.on_line(self.rank, channel, line + b"\n")
        self.partial[channel] = rest

    def flush(self) -> None:
        for channel, rest in self.partial.items():
            if rest:
                self.on_line(self.rank, channel, rest + b"\n")
        self.partial = {1: b"", 2: b""}


async def run_on_ranks(client: KubeClient, wl: WorkloadView, ranks: Sequence[RankView], command: Sequence[str],
                       on_line: OnLine, *, container: str | None = None) -> list[RankResult]:
    """`command` on every rank in parallel; one result per rank, in the order given."""

    async def one(r: RankView) -> RankResult:
        lines = _Lines(r, on_line)
        try:
            session = await ExecSession.open(client, wl.namespace, r.pod, command, container=container,
                                             tty=False, stdin=False)
        except ExecError as exc:
            return RankResult(r, None, exc.message, exc.code)
        try:
            outcome = await session.bridge(None, lines.feed)
        finally:
            lines.flush()
            await session.close()
        return RankResult(r, outcome, outcome.message)

    return list(await asyncio.gather(*(one(r) for r in ranks)))
