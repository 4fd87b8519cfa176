"""The last lines of every rank of one workload, read once (for one-shot views: `ranks get`,
`ranks why`): when each rank last wrote, and what, for the progress and silence diagnostics.

One `GET .../log?tailLines=N&timestamps=true` per running rank, all at once; a rank whose log
cannot be read is left out (the caller says what it knows without it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import api_paths
from ..kube import ApiProblem
from .lines import split_record
from .terminal_text import sanitize_line

if TYPE_CHECKING:
    from ..kube import KubeClient
    from ..model_views import RankView, WorkloadView


@dataclass(frozen=True)
class Tail:
    label: str
    pod: str
    last_at: float | None  # epoch seconds of the last line, None when it wrote none
    lines: tuple[tuple[float, str], ...]  # (epoch seconds, sanitised text), oldest first


async def rank_tails(client: KubeClient, wl: WorkloadView, lines: int = 50,
                     container_of: dict[str, str] | None = None) -> dict[str, Tail]:
    """label -> its tail, for each rank that runs (or ran) and whose log could be read."""

    async def one(r: RankView) -> Tail | None:
        params = [("tailLines", str(lines)), ("timestamps", "true")]
        if container_of and container_of.get(r.pod):
            params.append(("container", container_of[r.pod]))
        try:
            raw = await client.request("GET", api_paths.pod(r.namespace, r.pod, "log"), params=params)
        except (ApiProblem, OSError):
            return None
        except Exception:  # (a lost connection: left out, like an unreadable log)
            return None
        out = []
        for part in raw.split(b"\n"):
            if not part:
                continue
            ts, content = split_record(part)
            if ts is None:
                continue
            out.append((ts / 1e9, sanitize_line(content).text))
        return Tail(r.label, r.pod, out[-1][0] if out else None, tuple(out))

    ranks = [r for r in wl.ranks if r.phase in ("Running", "Succeeded", "Failed") and r.node]
    got = await asyncio.gather(*(one(r) for r in ranks))
    return {t.label: t for t in got if t is not None}
