"""Which rank failed first, and its last lines.

The model's `WorkloadView.first_failure` names the rank whose container terminated first with a
non-zero exit (or OOMKilled), from container statuses. `first_failure_report()` adds the last
lines of that container instance: the current one if the container is still the one that failed,
the `previous` one if the container restarted since.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import api_paths
from ..kube import ApiProblem
from ..model_views import FirstFailure, WorkloadView
from ..records import parse_time
from .lines import LogLine, Origin, split_record

if TYPE_CHECKING:
    from ..kube import KubeClient


@dataclass
class FailureReport:
    failure: FirstFailure
    namespace: str
    previous: bool  # the lines come from the previous instance of the container
    lines: list[LogLine] = field(default_factory=list)
    note: str = ""  # why there are no lines, when there are none

    def as_json(self) -> dict[str, Any]:
        from .lines import format_ts

        f = self.failure
        return {
            "rank": f.rank, "label": f.label, "role": f.role, "pod": f.pod, "container": f.container,
            "exit_code": f.exit_code, "reason": f.reason, "message": f.message,
            "finished_at": format_ts(int(f.at * 1e9)) if f.at else None,
            "previous": self.previous, "note": self.note,
        }


def _which_instance(pod: dict[str, Any], f: FirstFailure) -> bool | None:
    """True: the failure is the previous instance; False: the current one; None: neither is kept."""
    status = pod.get("status") or {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if cs.get("name") != f.container:
            continue
        for previous, holder in ((False, cs.get("state")), (True, cs.get("lastState"))):
            t = (holder or {}).get("terminated")
            if not t:
                continue
            if int(t.get("exitCode") or 0) == f.exit_code and (
                    f.at is None or parse_time(t.get("finishedAt")) == f.at):
                return previous
        return None if int(cs.get("restartCount") or 0) > 1 else bool(cs.get("restartCount"))
    return None


async def locate_failure(client: KubeClient, wl: WorkloadView) -> FailureReport | None:
    """The first failure and the instance of its container that holds it (`previous`), without
    lines; `note` says why its log cannot be read (the pod is gone, or the container restarted
    again since, so the failed instance's log is no longer kept)."""
    f = wl.first_failure
    if f is None:
        return None
    report = FailureReport(f, wl.namespace, previous=False)
    try:
        pod = await client.get(api_paths.pod(wl.namespace, f.pod))
    except ApiProblem as exc:
        report.note = "the pod no longer exists; its logs are gone" if exc.status == 404 else exc.one_line()
        return report
    which = _which_instance(pod, f)
    if which is None:
        report.note = "the container restarted since it failed; the failed instance's log is no longer kept"
        return report
    report.previous = which
    return report


async def first_failure_report(client: KubeClient, wl: WorkloadView, *, lines: int = 20) -> FailureReport | None:
    report = await locate_failure(client, wl)
    if report is None or report.note:
        return report
    f, ns = report.failure, report.namespace
    rank = next((r for r in wl.ranks if r.pod == f.pod), None)
    origin = Origin(f.label, f.rank, f.role, rank.replica_index if rank else None, ns, f.pod, f.container, None)
    which = report.previous
    params: list[tuple[str, str]] = [("container", f.container), ("timestamps", "true"), ("tailLines", str(lines))]
    if which:
        params.append(("previous", "true"))
    try:
        raw = await client.request("GET", api_paths.pod(ns, f.pod, "log"), params=params)
    except ApiProblem as exc:
        report.note = exc.one_line()
        return report
    out = []
    for part in raw.split(b"\n"):
        if not part:
            continue
        ts, content = split_record(part)
        out.append(LogLine(ts or 0, content, origin))
    report.lines = out[-lines:] if lines else []
    if not report.lines:
        report.note = "the failed instance wrote no log lines"
    return report
