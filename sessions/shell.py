"""A shell in a rank's pod: choosing the pod, the banner with ready-to-paste launch lines, the
remote command (bash recording each command with its exit status and time in a history file; sh
as a fallback), the session itself and why it ended, reading back the history it recorded and
picking the launch to convert from it.

Nothing here opens the local terminal: the caller hands `run_shell_session` a byte stream
(`sessions.terminal.LocalTerminal`, or an SSH channel), which is what `ExecSession.bridge` reads
and writes. The CLI (`ranks shell`) and the dashboard (`s`) both run a shell through here.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from monitors.connection import ClusterConfig, ExitCode
from monitors.humanize import gpus as fmt_gpus
from monitors.humanize import plural
from monitors.kube import ApiProblem, KubeClient, seg
from monitors.model_views import RankView, WorkloadView
from monitors.sanitize import clean

from .cmdline import LAUNCHERS, launcher_in
from .errors import SessionError
from .exec_all import run_on_ranks
from .exec_bridge import ExecError, ExecOutcome, ExecSession
from .ssh import SSH_SESSION_ENV

if TYPE_CHECKING:
    from .terminal import LocalTerminal

HISTORY_NAME = ".ranks_history"

# The remote side: find a writable history file, then bash, whose PROMPT_COMMAND appends each
# command once it has finished as one record `<epoch>\t<exit status>\t<command>` (the lines after
# the first of a multi-line command follow as `\t\t<line>`); the EXIT trap records the command
# that ends the shell (`exit 5`) and leaves its status alone. A history number already recorded
# (an empty Enter shows the same one again) is not recorded twice; the first prompt only notes
# where bash's own history (loaded from ~/.bash_history) ends. Without bash: sh, with HISTFILE
# pointing at the same file (shells that keep one write plain lines: no exit status).
#
# Secrets stay secret: the history file is the user's alone (created 0600, an older one made
# 0600; in /tmp only a file of the user's own, never through a link, else nothing is recorded);
# HISTCONTROL=ignorespace as bash users expect: a command typed with a leading space (` export
# TOKEN=...`) is kept out of bash's history list, so neither this history nor bash's records it
# (what programs read, such as a password at a prompt, never was: only commands are recorded).
# The rc file gets a random name in $TMPDIR (where it cannot be written: /tmp), created
# exclusively (mktemp; without mktemp, noclobber's O_EXCL on a name from bash's $RANDOM, written
# by that same open), 0600, and removed by the shell it starts as soon as it is read: no one can
# plant a link at it or read or change it. No rc file at all: sh, as without bash.
SHELL_SCRIPT = r"""
__ranks_own() {
  [ ! -h "$1" ] && ( umask 077; : >> "$1" ) 2>/dev/null && [ -f "$1" ] && [ -O "$1" ] && [ ! -h "$1" ] &&
    { chmod 600 "$1" 2>/dev/null || :; }
}
H="${HOME:-/tmp}/__HIST__"
__ranks_own "$H" || { H="/tmp/__HIST__"; __ranks_own "$H"; } || H=/dev/null
export RANKS_HISTFILE="$H"
__ranks_rc() {
  W=">"
  RC=$( (umask 077; mktemp "$1/.ranks_bashrc.XXXXXXXXXX") 2>/dev/null ) && [ -n "$RC" ] || {
    W= RC=
    for i in 1 2 3 4 5 6 7 8; do
      R=$(bash -c 'echo "$RANDOM$RANDOM$RANDOM$RANDOM"' 2>/dev/null) && [ -n "$R" ] || return 1
      RC="$1/.ranks_bashrc.$$.$R$i"
      [ -e "$RC" ] || [ -h "$RC" ] || { W=new; break; }
    done
    [ -n "$W" ] || return 1
  }
  ( if [ "$W" = new ]; then set -C; fi; umask 077; cat > "$RC" ) 2>/dev/null <<'RANKS_RC' && return 0
rm -f "$RANKS_RC"; unset RANKS_RC
[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"
HISTSIZE=10000; HISTCONTROL=ignorespace; HISTIGNORE=
__ranks_record() {
  local s=$? h n= t
  h=$(HISTTIMEFORMAT= builtin history 1)
  [[ $h =~ ^\ *([0-9]+)\*?\ \ (.*)$ ]] && n=${BASH_REMATCH[1]}
  if [[ -z ${__ranks_seen+set} ]]; then
    __ranks_seen=$n
  elif [[ -n $n && $n != "$__ranks_seen" ]]; then
    __ranks_seen=$n
    printf -v t '%(%s)T' -1
    printf '%s\t%s\t%s\n' "$t" "$s" "${BASH_REMATCH[2]//$'\n'/$'\n\t\t'}" >> "$RANKS_HISTFILE"
  fi
  builtin history -a 2>/dev/null
  return $s
}
PROMPT_COMMAND="__ranks_record${PROMPT_COMMAND:+; $PROMPT_COMMAND}"
__ranks_on_exit=$(trap -p EXIT); __ranks_on_exit=${__ranks_on_exit#"trap -- "}
eval "__ranks_on_exit=${__ranks_on_exit%" EXIT"}"
trap '__ranks_record; eval "$__ranks_on_exit"' EXIT
RANKS_RC
  [ -O "$RC" ] && [ ! -h "$RC" ] && rm -f "$RC"
  return 1
}
if command -v bash >/dev/null 2>&1 && { __ranks_rc "${TMPDIR:-/tmp}" || __ranks_rc /tmp; }; then
  export RANKS_RC="$RC"
  exec bash --rcfile "$RC" -i
fi
HISTFILE="$H"; export HISTFILE
exec sh -i
""".replace("__HIST__", HISTORY_NAME)

RECORD = re.compile(r"(\d+)\t(-?\d+)\t(.*)")
BASH_TIMESTAMP = re.compile(r"#(\d{9,12})")  # a plain history's time line (HISTTIMEFORMAT)


def shell_command() -> list[str]:
    return ["/bin/sh", "-c", SHELL_SCRIPT]


def history_command() -> list[str]:
    """Prints the session's shell history (as recorded by `shell_command`): only a file of the
    user's own (not one someone else left in /tmp)."""
    script = (f'for f in "${{HOME:-/tmp}}/{HISTORY_NAME}" "/tmp/{HISTORY_NAME}"; do '
              '[ -r "$f" ] && [ -O "$f" ] && cat "$f" && exit 0; done; exit 0')
    return ["/bin/sh", "-c", script]


@dataclass(frozen=True)
class HistoryEntry:
    """A command of the shell history; status and time None where not recorded (a history written
    by an older ranks, or by sh: plain lines)."""

    command: str
    status: int | None = None
    time: float | None = None


def parse_history(text: str) -> list[HistoryEntry]:
    """The commands of a history file, oldest first: records (`<epoch>\t<status>\t<command>` with
    `\t\t<line>` continuations) and plain lines (a bash `#<epoch>` line before one is its time)."""
    entries: list[HistoryEntry] = []
    continues = False  # the last entry is a record: a `\t\t` line is more of its command
    when: float | None = None
    for line in text.split("\n"):
        line = line.removesuffix("\r")
        if continues and line.startswith("\t\t"):
            last = entries[-1]
            entries[-1] = HistoryEntry(f"{last.command}\n{line[2:]}", last.status, last.time)
            continue
        record = RECORD.fullmatch(line)
        if record is not None:
            entries.append(HistoryEntry(record[3], int(record[2]), float(record[1])))
            continues, when = True, None
            continue
        continues = False
        stamp = BASH_TIMESTAMP.fullmatch(line.strip())
        if stamp is not None:
            when = float(stamp[1])
        elif line.strip():
            entries.append(HistoryEntry(line.strip(), None, when))
            when = None
    return entries


@dataclass(frozen=True)
class Launch:
    """A command of the history that runs a distributed launcher (see `sessions.cmdline`)."""

    command: str
    launcher: str
    status: int | None
    time: float | None

    @property
    def ok(self) -> bool:
        return self.status == 0

    def outcome(self) -> str:
        return "exit status not recorded" if self.status is None else f"exit {self.status}"

    def when(self, now: float) -> str:
        if self.time is None:
            return "from an older history (no time recorded)"
        return f"from {ago(now - self.time)}"


def ago(seconds: float) -> str:
    s = int(seconds)
    if s < 2:
        return "just now"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= size:
            return f"{plural(s // size, unit)} ago"
    return f"{s} seconds ago"


def launches(history: str) -> list[Launch]:
    """The history's launch commands, most recent first: those whose command word (after
    assignments, `env`, `time`, `nohup`) is a launcher; comments, `ranks ...` lines and other
    commands never are."""
    out: list[Launch] = []
    for entry in reversed(parse_history(history)):
        launcher = launcher_in(entry.command)
        if launcher is not None:
            out.append(Launch(entry.command.strip(), launcher, entry.status, entry.time))
    return out


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
                where: str = f"~/{HISTORY_NAME}") -> tuple[Launch, str]:
    """The launch to convert and what to say about it: the last that exited 0; with
    `allow_failed`, the last whatever its status (said as a warning when it did not exit 0). A
    history with no launch, or only failed ones (without `allow_failed`), is a SessionError (1)."""
    now = time.time() if now is None else now
    if not found:
        raise SessionError(f"no launch in the session's shell history ({where}): run {', '.join(LAUNCHERS)} or "
                           "python -m torch.distributed.run in `ranks shell` first, or give --command",
                           ExitCode.ERROR)
    ok = next((launch for launch in found if launch.ok), None)
    chosen = found[0] if allow_failed or ok is None else ok
    cmd = clean(chosen.command, limit=200)
    if not chosen.ok and not allow_failed:
        raise SessionError(f"no launch in the session's shell history exited 0; the last one, "
                           f"{chosen.when(now)}, has {chosen.outcome()}: {cmd} "
                           "(fix it and run it again in the shell, or pass --allow-failed to take it anyway)",
                           ExitCode.ERROR)
    if not chosen.ok:
        return chosen, f"warning: using a launch that did not exit 0 ({chosen.outcome()}), {chosen.when(now)}: {cmd}"
    later = found.index(chosen)
    more = f"; {plural(later, 'later launch', 'later launches')} did not exit 0" if later else ""
    return chosen, f"using the launch {chosen.when(now)} (exit 0{more}): {cmd}"


class NotYet(ExecError):
    """The rank to open does not exist yet (its pod is not created): wait, or give up."""


@dataclass
class ShellTarget:
    workload: WorkloadView
    rank: RankView
    container: str
    pod: dict[str, Any] = field(repr=False)
    workers: list[RankView] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        for c in (self.pod.get("spec") or {}).get("containers") or []:
            if c.get("name") == self.container:
                return {e["name"]: str(e.get("value", "")) for e in c.get("env") or [] if "name" in e}
        return {}


def pick_rank(wl: WorkloadView, *, rank: str | None = None, pod: str | None = None) -> RankView:
    """The lead rank (MPI launcher, PyTorch master, TF chief), or the one asked for."""
    if pod:
        for r in wl.ranks:
            if r.pod == pod:
                return r
        raise ExecError(f'pod "{pod}" is not one of the ranks of {wl.name} '
                        f'({", ".join(r.pod for r in wl.ranks) or "none"})', ExitCode.NOT_FOUND)
    if rank is not None:
        for r in wl.ranks:
            if rank in (r.label, str(r.rank)):
                return r
        labels = ", ".join(f"{r.label} (rank {r.rank})" if r.rank is not None else r.label for r in wl.ranks)
        raise ExecError(f'no rank "{rank}" in {wl.name} (ranks: {labels or "none"})', ExitCode.NOT_FOUND)
    lead = wl.lead
    if lead is None and wl.kind == "MPIJob":
        ready = sum(1 for r in wl.ranks if r.ready)
        raise NotYet(f"{wl.name} has no launcher pod yet (it starts once every worker is Ready: "
                     f"{ready}/{len(wl.ranks)} ready)")
    lead = lead or (wl.ranks[0] if wl.ranks else None)
    if lead is None:
        raise NotYet(f"{wl.name} has no pods yet" + (f" ({clean(wl.reason, limit=200)})" if wl.reason else ""))
    return lead


def default_container(pod: dict[str, Any], wanted: str | None = None) -> str:
    containers = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
    if wanted:
        if wanted not in containers:
            raise ExecError(f'container "{wanted}" is not in pod "{pod["metadata"]["name"]}" '
                            f'(containers: {", ".join(containers)})', ExitCode.NOT_FOUND)
        return wanted
    annotated = ((pod.get("metadata") or {}).get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    if annotated in containers:
        return str(annotated)
    if not containers:
        raise ExecError(f'pod "{pod["metadata"]["name"]}" has no containers', ExitCode.ERROR)
    return containers[0]


def not_running_reason(r: RankView) -> str | None:
    """Why a shell cannot start in this rank yet (None: it can)."""
    if r.phase == "Running" and r.reason in ("", "Running"):
        return None
    why = clean(r.message or r.reason or r.phase, limit=300)
    return f"{r.label} ({r.pod}) is {r.phase}" + (f": {why}" if why and why != r.phase else "")


def _hosts(target: ShellTarget) -> list[str]:
    wl = target.workload
    return [f"{r.pod}.{wl.name}.{wl.namespace}.svc" for r in target.workers]


def world_size(target: ShellTarget) -> int:
    env = target.env
    if env.get("WORLD_SIZE", "").isdigit():
        return int(env["WORLD_SIZE"])
    if target.workload.kind == "MPIJob":
        return len(target.workers) * _slots(target)
    return len(target.workload.ranks)


def _slots(target: ShellTarget) -> int:
    s = target.env.get("OMPI_MCA_orte_set_default_slots", "")
    if s.isdigit():
        return int(s)
    gpus = max((r.gpus for r in target.workers), default=0)
    return max(1, int(gpus))


def _own_program() -> str | None:
    """This process's `ranks` executable (absolute), when it was started as one (not `python -m`)."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) not in ("ranks", "kubectl-ranks") or not os.access(argv0, os.X_OK):
        return None
    return os.path.abspath(argv0)


def ranks_command(cfg: ClusterConfig | None = None) -> str | None:
    """How the banner's hints run ranks on the user's machine, ready to paste in another terminal:
    `ranks` when that is the command on the PATH, else this program's own path (`make demo` runs
    `.venv/bin/ranks`); with `--kubeconfig`/`--context` when this ranks was pointed at them (the
    demo's kubeconfig). None when there is no such command to offer (over the SSH door the user's
    machine is another one)."""
    if os.environ.get(SSH_SESSION_ENV):
        return None
    on_path, own = shutil.which("ranks"), _own_program()
    if on_path is not None and (own is None or os.path.realpath(on_path) == os.path.realpath(own)):
        parts = ["ranks"]
    elif own is not None:
        parts = [own]
    else:
        return None
    if cfg is not None and cfg.kubeconfig_arg:
        parts += ["--kubeconfig", os.path.abspath(cfg.kubeconfig_arg)]
    if cfg is not None and cfg.context_arg:
        parts += ["--context", cfg.context_arg]
    return " ".join(shlex.quote(clean(p)) for p in parts)


def _hostfile(target: ShellTarget) -> str:
    return clean(target.env.get("OMPI_MCA_orte_default_hostfile") or "/etc/mpi/hostfile")


def paste_lines(target: ShellTarget) -> list[str]:
    """Launch lines to paste in this shell, built from the workload's actual ranks; they run as
    pasted in the pod (the launchers on its PATH, `train.py` in its working directory). PyTorch:
    torchrun for this node, from the variables the operator set on every pod (see `other_ranks`)."""
    wl, env = target.workload, target.env
    if wl.kind == "MPIJob":
        slots = _slots(target)
        np = len(target.workers) * slots
        hosts = ",".join(f"{clean(h)}:{slots}" for h in _hosts(target))
        hostfile = _hostfile(target)
        return [
            f"horovodrun -np {np} -H {hosts} python train.py",
            f"horovodrun -np {np} -hostfile {hostfile} python train.py",
            f"mpirun -np {np} --hostfile {hostfile} python train.py",
        ]
    if wl.kind == "PyTorchJob":
        nnodes = max(len(wl.ranks), wl.ranks_total)
        nproc = max(1, int(max((r.gpus for r in wl.ranks), default=1)))
        addr = "$MASTER_ADDR" if "MASTER_ADDR" in env else f"{clean(wl.name)}-master-0"
        port = "$MASTER_PORT" if "MASTER_PORT" in env else "23456"
        return [f"torchrun --nnodes={nnodes} --nproc_per_node={nproc} --node_rank=$RANK "
                f"--master_addr={addr} --master_port={port} train.py"]
    return ["python train.py"]


def other_ranks(target: ShellTarget, *, cli: str | None) -> list[str]:
    """Banner lines on starting the launch line on the other pods too (torchrun runs on every node,
    a TF/XGBoost script on every replica; MPI's launcher starts every rank itself): a `ranks exec`
    command for the user's own machine when `cli` (how ranks runs there), else which pods."""
    wl = target.workload
    if wl.kind == "MPIJob":
        return []
    others = [r for r in wl.ranks if r.pod != target.rank.pod]
    if not others:
        return []
    what = "every node runs torchrun" if wl.kind == "PyTorchJob" else "every replica runs the script"
    labels = [clean(r.label) for r in others]
    if not cli:
        return [f"  {what}: run line 1 in a shell on each of the other pods too ({', '.join(labels)})"]
    q = shlex.quote
    return [f"  {what}: to start it on the other {plural(len(others), 'pod')}, run on your machine "
            "(not in this shell):",
            f"    {cli} exec {q(clean(wl.name))} -p {q(clean(wl.project))} --rank {','.join(labels)} -- "
            f"sh -c {q(paste_lines(target)[0])}"]


def banner(target: ShellTarget, *, cli: bool | str | None = None) -> str:
    """What `ranks shell` prints before the prompt; `cli`: how the hints run ranks on the user's
    machine (a command prefix; True: `ranks`; False: no such hints; default: `ranks_command()`)."""
    cli = ranks_command() if cli is None else ("ranks" if cli is True else cli or None)
    wl, r, env = target.workload, target.rank, target.env
    lines = [
        f"ranks shell: {clean(wl.kind)} {clean(wl.name)} (project {clean(wl.project)})",
        f"  pod {clean(r.pod)} [{clean(target.container)}] on node {clean(r.node or '-')}, "
        f"{clean(r.label)}{'' if r.rank is None else f' rank {r.rank}'}",
        f"  world size {world_size(target)}, {plural(len(wl.ranks), 'pod')}, "
        f"{fmt_gpus(wl.gpus_allocated)} {'GPU' if wl.gpus_allocated == 1 else 'GPUs'}",
    ]
    if wl.kind == "MPIJob":
        lines.append(f"  hostfile {_hostfile(target)}: {', '.join(clean(h) for h in _hosts(target)) or 'no workers'}")
    elif "MASTER_ADDR" in env:
        lines.append(f"  master {clean(env['MASTER_ADDR'])}:{clean(env.get('MASTER_PORT', '?'))}")
    elif "TF_CONFIG" in env:
        lines.append("  TF_CONFIG is set on every replica")
    lines.append("  ready to paste:")
    lines += [f"    {line}" for line in paste_lines(target)]
    lines += other_ranks(target, cli=cli)
    lines.append(f"  commands and their exit status are recorded in ~/{HISTORY_NAME} (convert takes the last "
                 "launch that exited 0)")
    if cli:
        q = shlex.quote
        lines.append(f"  on your machine, '{cli} convert {q(clean(wl.name))} -p {q(clean(wl.project))} --from-history' "
                     "turns the last launch into a training job")
    else:
        lines.append("  convert (t in the dashboard) turns the last launch into a training job")
    return "\r\n".join(lines) + "\r\n"


async def shell_target(client: KubeClient, wl: WorkloadView, rank: RankView, container: str | None = None
                       ) -> ShellTarget:
    """The shell's target: `rank`'s pod as the server has it now, and its container (`container`,
    else the pod's default one)."""
    raw = await client.get(f"/api/v1/namespaces/{seg(wl.namespace)}/pods/{seg(rank.pod)}")
    workers = [x for x in wl.ranks if x.role == "worker"]
    return ShellTarget(wl, rank, default_container(raw, container), raw, workers)


async def run_shell_session(client: KubeClient, target: ShellTarget, term: LocalTerminal, *,
                            quiet: bool = False) -> ExecOutcome:
    """The banner, then the shell over `term` until it exits or the connection drops."""
    if not quiet:
        term.sink(1, banner(target, cli=ranks_command(client.cfg) or False).encode())
    tty = term.is_tty
    session = await ExecSession.open(client, target.workload.namespace, target.rank.pod, shell_command(),
                                     container=target.container, tty=tty, stdin=True)
    try:
        with term:
            return await session.bridge(term, term.sink, term.resizes() if tty else None)
    finally:
        await session.close()


async def explain_end(client: KubeClient, target: ShellTarget, outcome: ExecOutcome) -> str:
    """Why a shell ended other than by `exit` (the pod died, the connection dropped); "" if it did."""
    if not outcome.lost and outcome.exit_code < 128:
        return ""
    try:
        raw = await client.get(f"/api/v1/namespaces/{seg(target.workload.namespace)}/pods/{seg(target.rank.pod)}")
    except ApiProblem as exc:
        if exc.status == 404:
            return f"pod {target.rank.pod} was deleted during the shell"
        return ""
    except Exception:
        return outcome.message
    uid = (target.pod.get("metadata") or {}).get("uid")
    if uid and (raw.get("metadata") or {}).get("uid") != uid:
        return f"pod {target.rank.pod} was deleted during the shell (a new pod of that name replaced it)"
    phase = (raw.get("status") or {}).get("phase", "")
    deleting = bool((raw.get("metadata") or {}).get("deletionTimestamp"))
    if deleting or phase in ("Failed", "Succeeded"):
        return f"pod {target.rank.pod} stopped during the shell ({'deleting' if deleting else phase})"
    return outcome.message if outcome.lost else ""


async def session_history(client: KubeClient, wl: WorkloadView) -> list[Launch]:
    """Launches from the session's shell history (in its lead pod), most recent first, with their
    exit status and time; a history that cannot be read is a SessionError (exit 1)."""
    lead = pick_rank(wl)
    chunks: list[bytes] = []
    results = await run_on_ranks(client, wl, [lead], history_command(),
                                 lambda _r, ch, line: chunks.append(line) if ch == 1 else None)
    if not results[0].ok:
        raise SessionError(f"cannot read the shell history in {lead.pod}: "
                           f"{clean(results[0].error) or 'exit ' + str(results[0].exit_code)}", ExitCode.ERROR)
    return launches(b"".join(chunks).decode("utf-8", "replace"))
