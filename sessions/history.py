"""The shell history of a session, as its shell records it in the pod (`sessions.shell`), read
back: the commands typed, each with its exit status and time, and the launches that ran, each
with its own exit status and the arguments as run, whatever the line around them.

Two kinds of records, one a line, in `~/.ranks_history`:
- a command line, when it has finished: `<epoch>\\t<status>\\t<line>` (the lines after the first
  of a multi-line command follow as `\\t\\t<line>`); older histories, or sh's, hold plain lines
  (`#<epoch>` before one is its time);
- a launch, when it has finished (bash runs every launcher through a function of the session's
  rc file, wherever it is in the line: `; echo done`, `&&`, pipes, loops, functions, scripts run by
  bash): `@launch\\t<history number>\\t<start>\\t<end>\\t<status>\\t<launcher>\\t<cwd>\\t<home>\\t<argv>`,
  the directories and the arguments quoted as bash's `printf %q` quotes them.
A line's launches are written before the line's own record. A launch that ran in a line has its
own status; a line holding a launch that no launch record came from (a launcher started through
`env`, `nohup`, `sudo`, sh: not through the function) counts as that launch only when the line's
status is the launch's (the launch is the line, or ends a chain of `&&`), else its status is
unknown.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace

from .cmdline import ASSIGNMENT, RESERVED, SEPARATORS, launcher_of, launches_in, simple_commands, tokens
from .launch_env import Exports, exports_of, track

HISTORY_NAME = ".ranks_history"
LAUNCH_TAG = "@launch"

RECORD = re.compile(r"(\d+)\t(-?\d+)\t(.*)")
BASH_TIMESTAMP = re.compile(r"#(\d{9,12})")  # a plain history's time line (HISTTIMEFORMAT)


@dataclass(frozen=True)
class LaunchRun:
    """One run of a launcher on one node, as recorded.

    `command` is what a job would run: the arguments as run (quoted), after the line's own
    `VAR=value` assignments and, when it ran elsewhere than where the shell started, a `cd`. For a
    run known only from its line (or from `ranks exec`), the line itself."""

    launcher: str
    command: str
    status: int | None
    start: float | None = None
    end: float | None = None
    line: str = ""  # the line typed (or the command given to `ranks exec`)
    label: str = ""  # the rank it ran on (master-0, worker-1, launcher); "" when not known
    pod: str = ""
    source: str = "shell"  # shell (a launch record), line (known from its line), exec, debug
    unknown_why: str = ""  # why the status is not known (None) though the line's is
    cwd: str = ""  # where it ran, when not where the shell started
    exports: Exports = field(default=Exports(), compare=False)  # what its shell had exported (sessions.launch_env)

    @property
    def ok(self) -> bool:
        return self.status == 0

    @property
    def time(self) -> float | None:
        return self.end if self.end is not None else self.start

    def on(self, label: str, pod: str = "") -> LaunchRun:
        return replace(self, label=label, pod=pod)

    def key(self) -> tuple[str, str, float | None, str]:
        """Who ran what when: the same run read twice (the pod's file and the saved copy) is one."""
        return (self.label, self.source, self.start if self.start is not None else self.end, self.command)


@dataclass(frozen=True)
class HistoryEntry:
    """A command line of the shell history; status and time None where not recorded (a history
    written by an older ranks, or by sh: plain lines); `runs`: the launches it ran, as recorded."""

    command: str
    status: int | None = None
    time: float | None = None
    runs: tuple[LaunchRun, ...] = field(default=(), compare=False)


def _unquote(text: str) -> str:
    """A value bash's `printf %q` quoted, back (plain words, backslashes, `$'...'`)."""
    if text.startswith("$'") and text.endswith("'"):
        try:
            return text[2:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        except UnicodeDecodeError:
            return text[2:-1]
    try:
        parts = shlex.split(text)
    except ValueError:
        return text
    return parts[0] if len(parts) == 1 else text


def _requoted(argv: str) -> str:
    """Arguments bash's `printf %q` quoted, quoted as few as a person would (`a\\,b` -> `a,b`)."""
    if "$'" in argv:
        return argv  # (ANSI-C quoting, for control characters: as bash wrote it)
    try:
        return shlex.join(shlex.split(argv))
    except ValueError:
        return argv


def _launch_record(line: str) -> LaunchRun | None:
    parts = line.split("\t", 8)
    if len(parts) != 9 or parts[0] != LAUNCH_TAG:
        return None
    _tag, _number, start, end, status, launcher, cwd, home, argv = parts
    try:
        # (bash 5's EPOCHREALTIME, microseconds: its decimal point is the locale's)
        run = LaunchRun(launcher, _requoted(argv.strip()), int(status), float(start.replace(",", ".")),
                        float(end.replace(",", ".")))
    except ValueError:
        return None
    where = _unquote(cwd)
    return replace(run, cwd=where) if where and where != _unquote(home) else run


def parse_history(text: str) -> list[HistoryEntry]:
    """The command lines of a history file, oldest first, each with the launches it ran."""
    entries: list[HistoryEntry] = []
    pending: list[LaunchRun] = []  # launch records written before their line's record
    continues = False  # the last entry is a record: a `\t\t` line is more of its command
    when: float | None = None
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if continues and line.startswith("\t\t"):
            last = entries[-1]
            entries[-1] = replace(last, command=f"{last.command}\n{line[2:]}")
            continue
        if line.startswith(LAUNCH_TAG + "\t"):
            run = _launch_record(line)
            if run is not None:
                pending.append(run)
            continues = False
            continue
        record = RECORD.fullmatch(line)
        if record is not None:
            entries.append(HistoryEntry(record[3], int(record[2]), float(record[1]), tuple(pending)))
            pending, continues, when = [], True, None
            continue
        continues = False
        stamp = BASH_TIMESTAMP.fullmatch(line.strip())
        if stamp is not None:
            when = float(stamp[1])
        elif line.strip():
            entries.append(HistoryEntry(line.strip(), None, when))
            when = None
    if pending:  # launches whose line has not ended (a launch in the background, a shell that died)
        entries.append(HistoryEntry("", None, pending[-1].end, tuple(pending)))
    return entries


def status_is_the_launchs(line: str) -> bool:
    """Whether a line's exit status is its launch's: the launch is the line's only command, or the
    last of a chain of `&&` (a `; echo done`, `||`, a pipe, a loop or a background `&` hide it)."""
    if any(t.kind == "op" and t.text in SEPARATORS and t.text != "&&" for t in tokens(line)):
        return False
    commands = simple_commands(line)
    return bool(commands) and launcher_of(commands[-1]) is not None and not any(
        words[0].text in RESERVED or words[0].text in ("function", "select", "case") for words in commands)


def _assignments(line: str, launcher: str) -> str:
    """The `VAR=value` words before the line's launch of `launcher` (they are its environment)."""
    for found in launches_in(line):
        if found.launcher != launcher:
            continue
        words = [w.text for w in found.words[: found.args_from] if ASSIGNMENT.match(w.text)]
        return " ".join(f"{w.split('=', 1)[0]}={shlex.quote(w.split('=', 1)[1])}" for w in words)
    return ""


def runs_of(entries: list[HistoryEntry], label: str = "", pod: str = "") -> list[LaunchRun]:
    """Every launch run of a history, oldest first, on the rank `label`: those recorded, each with
    its line's assignments; lines that hold a launch no record came from, as that launch."""
    out: list[LaunchRun] = []
    shell: dict[str, tuple[str | None, bool, str]] = {}  # the shell's variables so far (sessions.launch_env.track)
    sourced: list[str] = []
    for e in entries:
        track(e.command, shell, sourced)  # (a line's own exports come before its launch)
        exports = exports_of(shell, sourced)
        if e.runs:
            for run in e.runs:
                command = " ".join(x for x in (_assignments(e.command, run.launcher), run.command) if x)
                if run.cwd:
                    command = f"cd {shlex.quote(run.cwd)} && {command}"
                out.append(replace(run, command=command, line=e.command, label=label, pod=pod, exports=exports))
            continue
        found = launches_in(e.command)
        if not found:
            continue
        certain = e.status is None or status_is_the_launchs(e.command)
        out.append(LaunchRun(found[0].launcher, e.command.strip(), e.status if certain else None, None, e.time,
                             e.command, label, pod, "line",
                             "" if certain else f"the line's status ({e.status}) is not the launch's",
                             exports=exports))
    return out
