"""What happened to a workload whose pods are gone, and its first failure whatever is left of it.

`first_failure_of()` picks the best source for "which rank failed first, and its last lines":
the pods themselves while they exist (their statuses; the lines are read by the caller), else the
flight recorder's recording (`monitors.flight_recorder`), saying it is one and when it was made.

`what_happened()` tells the story in plain sentences from what is left: the job's conditions and
events (the operator's `SuccessfulDeletePod`, `ExitedWithCode`, `<Kind>Failed`), the pods' own
events (a pod deleted without a `Killing` event had stopped already), and the recording.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from ..flight_records import RecordedFailure, Recording
from ..humanize import age
from ..model_views import WorkloadView
from ..records import EventRec

_DELETED = re.compile(r"^Deleted pod: (\S+)")
_EXITED = re.compile(r"^Pod: (?:[^.\s]+)\.(\S+) exited with code (-?\d+)")


def first_failure_of(wl: WorkloadView, recording: Recording | None) -> RecordedFailure | None:
    """From the pods while they show one (no lines: the caller reads them, or takes the termination
    message), else from the recording."""
    f = wl.first_failure
    if f is not None:
        node = next((r.node for r in wl.ranks if r.pod == f.pod), "")
        return RecordedFailure(f.label, f.role, f.rank, f.pod, node, f.container, f.exit_code, f.reason, f.at,
                               f.message)
    return recording.first() if recording is not None else None


@dataclass
class Story:
    lines: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        self.lines.append(text)


def _when(t: float | None, now: float) -> str:
    if not t:
        return "at an unknown time"
    return f"at {time.strftime('%H:%M:%S', time.localtime(t))} ({age(now - t)} ago)"


def pods_going(wl: WorkloadView) -> bool:
    """Every pod of the workload is gone or being deleted (Terminating): what it said is going."""
    return all(r.deleting for r in wl.ranks)


def what_happened(wl: WorkloadView, events: list[EventRec], recording: Recording | None,
                  now: float | None = None) -> list[str]:
    """Plain sentences about a finished workload whose pods are gone or going (every one left is
    being deleted: the seconds of a failed job's clean-up); empty while pods that stay exist."""
    if not pods_going(wl) or wl.status not in ("Failed", "Succeeded"):
        return []
    now = time.time() if now is None else now
    story = Story()
    ref = f"{wl.kind.lower()}/{wl.name}"
    done = next((c for c in wl.conditions if c.type in ("Failed", "Succeeded", "Complete") and c.status == "True"),
                None)
    verb = "failed" if wl.status == "Failed" else "succeeded"
    why = f": {done.message or done.reason}" if done is not None and (done.message or done.reason) else ""
    story.say(f"{ref} {verb} {_when(done.at if done else None, now)}{why}")

    job_events = [e for e in events if e.object_name == wl.name]
    deleted: list[tuple[str, float | None]] = []
    exited: dict[str, int] = {}
    for e in job_events:
        if e.reason == "SuccessfulDeletePod" and (m := _DELETED.match(e.message)):
            deleted.append((m.group(1), e.last))
        elif e.reason == "ExitedWithCode" and (m := _EXITED.match(e.message)):
            exited[m.group(1)] = int(m.group(2))
    going = sorted(r.pod for r in wl.ranks)
    if deleted:
        times = [t for _, t in deleted if t]
        names = sorted({n for n, _ in deleted})
        story.say(f"the operator deleted {len(names)} pod{'s' if len(names) != 1 else ''} "
                  f"{_when(min(times) if times else None, now)}: {', '.join(names)}")
    elif not going:
        story.say("its pods are gone (no deletion events are left; events are kept about an hour)")
    if going:
        story.say(f"{len(going)} still terminating: {', '.join(going)}")

    if wl.status == "Succeeded":
        story.say("its logs went with the pods")
        return story.lines
    failed_first = recording.first() if recording is not None else None
    if recording is not None and recording.failures:
        for f in recording.failures:
            story.say(f"{f.label} (pod {f.pod}{' on ' + f.node if f.node else ''}) exited {f.exit_code}"
                      f"{' (' + f.reason + ')' if f.reason else ''} {_when(f.finished_at, now)}"
                      + (" — the first failure" if f is failed_first and len(recording.failures) > 1 else ""))
    elif exited:
        for pod, code in sorted(exited.items()):
            story.say(f"pod {pod} exited with code {code} (the operator's event)")
    elif deleted:
        killed = {e.object_name for e in events if e.reason == "Killing" and e.kind == "Pod"}
        stopped = sorted(n for n, _ in deleted if n not in killed)
        if stopped and len(stopped) < len(deleted):
            story.say(f"already stopped before the clean-up (no Killing event): {', '.join(stopped)} — "
                      "most likely where it failed")

    if failed_first is not None and failed_first.lines:
        story.say(f"the logs went with the pods; ranks recorded the last {len(failed_first.lines)} lines of "
                  f"{failed_first.label} {_when(failed_first.recorded_at, now)}"
                  + (" (from its termination message)" if failed_first.source == "termination message" else ""))
    else:
        story.say("the logs went with the pods: no ranks process was watching when it failed "
                  "(the dashboard and `ranks logs -f` record failing ranks; jobs `ranks submit` creates keep "
                  "their last lines in the pod status, FallbackToLogsOnError)")
    return story.lines
