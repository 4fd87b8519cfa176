"""The launches of a session, as convert offers them: each node's recorded runs of one launch put
together (torchrun runs on every node, started by hand in several shells, through `ranks exec`
or the dashboard's run-on-ranks), its status the launch's as a whole (exit 0 only when every node
it spans exited 0), and which one to take: the newest that exited 0, a failed one only when asked.

An MPI launcher (and deepspeed) starts every rank itself: one run is the whole launch, its status
the launcher's. A torch launch spans `--nnodes` nodes (else the operator's `PET_NNODES`, the job's
replicas): runs on different ranks of the same command, as the new job would run it (the session's
names, node rank, master address and port normalised), whose times overlap, are one launch.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from monitors.connection import ExitCode
from monitors.humanize import plural
from monitors.sanitize import clean

from .cmdline import LAUNCHERS, TORCH_LAUNCHERS, launches_in
from .errors import SessionError
from .history import HISTORY_NAME, LaunchRun, parse_history, runs_of
from .launch_env import Exports, mask_command

SLACK = 60.0  # s: a run whose start was not recorded (known from its line) may have started this long before
NNODES_OPTIONS = ("--nnodes", "--num_nodes", "--num-nodes")
WHERE = f"~/{HISTORY_NAME}"


@dataclass(frozen=True)
class Launch:
    """A launch the session ran, on one node or several (`runs`, one per node, lead first)."""

    command: str
    launcher: str
    status: int | None  # 0: every node exited 0; else the first failing node's; None: not known
    time: float | None
    runs: tuple[LaunchRun, ...] = ()
    nodes: int = 1  # the nodes it spans
    note: str = ""  # what its status rests on, when it is more than one exit status

    @property
    def ok(self) -> bool:
        return self.status == 0

    def outcome(self) -> str:
        if self.note:
            return self.note
        return "exit status not recorded" if self.status is None else f"exit {self.status}"

    def when(self, now: float) -> str:
        if self.time is None:
            return "from an older history (no time recorded)"
        return f"from {ago(now - self.time)}"

    @property
    def exports(self) -> Exports:
        """What the lead's shell had exported when it ran (sessions.launch_env)."""
        return self.runs[0].exports if self.runs else Exports()

    @property
    def shown(self) -> str:
        """The command as ranks prints it: its secrets' values as ***."""
        return mask_command(self.command)

    @property
    def failed_node(self) -> str:
        """The first node that failed ("" when none did, or the launch ran on one)."""
        return next((r.label for r in self.runs if r.status not in (0, None)), "") if self.nodes > 1 else ""


def ago(seconds: float) -> str:
    s = int(seconds)
    if s < 2:
        return "just now"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= size:
            return f"{plural(s // size, unit)} ago"
    return f"{s} seconds ago"


def nodes_of(run: LaunchRun, default: int = 1) -> int:
    """The nodes a torch launch spans: its `--nnodes N` (the minimum of `MIN:MAX`), else `default`
    (the operator's PET_NNODES); 1 for MPI launchers and deepspeed, which start every node themselves."""
    if run.launcher not in TORCH_LAUNCHERS or run.launcher == "deepspeed":
        return 1
    for found in launches_in(run.command):
        if found.launcher != run.launcher:
            continue
        args = [w.text for w in found.words[found.args_from:]]
        for i, arg in enumerate(args):
            opt, eq, value = arg.partition("=")
            if opt in NNODES_OPTIONS:
                value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
                low = value.split(":")[0]
                return int(low) if low.isdigit() and int(low) > 0 else default
        return default
    return 1


def _span(run: LaunchRun) -> tuple[float, float]:
    start = run.start if run.start is not None else (run.end or 0.0) - SLACK
    end = run.end if run.end is not None else start
    return start, end


def _overlap(a: LaunchRun, b: LaunchRun) -> bool:
    (s1, e1), (s2, e2) = _span(a), _span(b)
    return s1 <= e2 and s2 <= e1


def _order(label: str) -> tuple[int, int, str]:
    """Lead first: the master, the launcher, then workers by index."""
    role, _, index = label.rpartition("-")
    lead = 0 if role in ("master", "chief") or label.startswith("launcher") else 1
    return (lead, int(index) if index.isdigit() else 0, label)


def _whole(members: list[LaunchRun], nodes: int, labels: Sequence[str]) -> Launch:
    members.sort(key=lambda r: _order(r.label))
    lead = members[0]
    end = max((r.time for r in members if r.time is not None), default=None)
    if nodes <= 1:
        note = f"exit status unknown: {lead.unknown_why}" if lead.unknown_why else ""
        return Launch(lead.command, lead.launcher, lead.status, end, tuple(members), 1, note)
    failed = sorted((r for r in members if r.status not in (0, None)), key=lambda r: r.time or 0.0)
    if failed:  # the first to end is the likeliest cause (its peers fail at their next collective)
        first, rest = failed[0], failed[1:]
        status: int | None = first.status
        note = f"exit {first.status} on {first.label or 'a node'}" + (
            f" (then {', '.join(f'{r.label} exit {r.status}' for r in rest)})" if rest else "")
        return Launch(lead.command, lead.launcher, status, end, tuple(members), nodes, note)
    said = [f"{r.label}: exit status unknown" for r in members if r.status is None]
    missing = nodes - len(members)
    if missing > 0:
        left = [x for x in labels if x not in {r.label for r in members}]
        who = ", ".join(left[:missing]) if len(left) >= missing else plural(missing, "node")
        said.append(f"{who} not recorded (started outside ranks shell and ranks exec?)")
    if said:
        status, note = None, f"exit status unknown: {'; '.join(said)}"
    else:
        status, note = 0, f"exit 0 on {plural(nodes, 'node')}"
    return Launch(lead.command, lead.launcher, status, end, tuple(members), nodes, note)


def group(runs: Sequence[LaunchRun], *, normalize: Callable[[str], str] = str, default_nodes: int = 1,
          labels: Sequence[str] = ()) -> list[Launch]:
    """The launches of these runs (of every node), most recent first: a multi-node launch's runs on
    different nodes, of the same normalised command, overlapping in time, together."""
    order = sorted(range(len(runs)), key=lambda i: (_span(runs[i])[0], i))
    used: set[int] = set()
    out: list[tuple[Launch, int]] = []
    keys: dict[int, str] = {}

    def key(i: int) -> str:
        if i not in keys:
            try:
                keys[i] = " ".join(shlex.split(normalize(runs[i].command)))
            except ValueError:
                keys[i] = normalize(runs[i].command)
        return keys[i]

    for n, i in enumerate(order):
        if i in used:
            continue
        used.add(i)
        first = runs[i]
        nodes = nodes_of(first, default_nodes)
        members = [first]
        if nodes > 1 and first.label:
            for j in order:
                other = runs[j]
                if (j in used or not other.label or other.launcher != first.launcher
                        or other.label in {m.label for m in members} or not _overlap(first, other)
                        or key(j) != key(i)):
                    continue
                used.add(j)
                members.append(other)
                if len(members) == nodes:
                    break
        out.append((_whole(members, nodes, labels), n))
    out.sort(key=lambda x: (x[0].time if x[0].time is not None else float("-inf"), x[1]), reverse=True)
    return [launch for launch, _ in out]


def launches(history: str) -> list[Launch]:
    """The launches of one history file (one node's, of no known rank), most recent first."""
    return group(runs_of(parse_history(history)))


def launch_choices(found: list[Launch], *, allow_failed: bool) -> list[Launch]:
    """What to offer in a picker, most recent first, each command once: the launches that exited 0
    (with `allow_failed`, every launch)."""
    out: list[Launch] = []
    seen: set[str] = set()
    for launch in found:
        if (allow_failed or launch.ok) and launch.command not in seen:
            seen.add(launch.command)
            out.append(launch)
    return out


def pick_launch(found: list[Launch], *, allow_failed: bool = False, now: float | None = None,
                where: str = WHERE) -> tuple[Launch, str]:
    """The launch to convert and what to say about it: the last that exited 0 (on every node it
    spans); with `allow_failed`, the last whatever its status (said as a warning when it did not
    exit 0). A history with no launch, or only failed ones (without `allow_failed`), is a
    SessionError (1)."""
    now = time.time() if now is None else now
    if not found:
        raise SessionError(f"no launch in the session's shell history ({where}): run {', '.join(LAUNCHERS)} or "
                           "python -m torch.distributed.run in `ranks shell` first, or give --command",
                           ExitCode.ERROR)
    ok = next((launch for launch in found if launch.ok), None)
    chosen = found[0] if allow_failed or ok is None else ok
    cmd = clean(chosen.shown, limit=200)
    if not chosen.ok and not allow_failed:
        raise SessionError(f"no launch in the session's shell history exited 0; the last one, "
                           f"{chosen.when(now)}, has {clean(chosen.outcome(), limit=300)}: {cmd} "
                           "(fix it and run it again in the shell, or pass --allow-failed to take it anyway)",
                           ExitCode.ERROR)
    if not chosen.ok:
        return chosen, (f"warning: using a launch that did not exit 0 ({clean(chosen.outcome(), limit=300)}), "
                        f"{chosen.when(now)}: {cmd}")
    later = found.index(chosen)
    more = f"; {plural(later, 'later launch', 'later launches')} did not exit 0" if later else ""
    return chosen, f"using the launch {chosen.when(now)} ({chosen.outcome()}{more}): {cmd}"


def exec_script(argv: Sequence[str]) -> str:
    """The command line `ranks exec` ran: the script of `sh -c SCRIPT` (bash, dash...), else the
    arguments quoted."""
    if len(argv) >= 3 and re.fullmatch(r"(?:.*/)?(?:ba|da|k|z)?sh", argv[0]) and argv[1] == "-c":
        return argv[2]
    return shlex.join(argv)


def exec_run(argv: Sequence[str], status: int | None, start: float, end: float, label: str,
             pod: str) -> LaunchRun | None:
    """A launch `ranks exec` (or the dashboard's run-on-ranks) ran on one rank; None when the
    command runs no launcher. Its status is the launch's only when the command's is."""
    from .history import status_is_the_launchs

    script = exec_script(argv)
    found = launches_in(script)
    if not found:
        return None
    certain = status_is_the_launchs(script)
    return LaunchRun(found[0].launcher, script.strip(), status if certain else None, start, end, script,
                     label, pod, "exec", "" if certain else f"the command's status ({status}) is not the launch's")
