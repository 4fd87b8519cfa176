"""A shell in a rank's pod: choosing the pod, the banner with ready-to-paste launch lines, the
remote command (bash recording each command, and each launch it runs, with its exit status and
time in a history file; sh as a fallback), the session itself (its history mirrored into ranks'
history store meanwhile) and why it ended. Reading the history back: `sessions.history`,
`sessions.session_history`; picking the launch: `sessions.launches`.

Nothing here opens the local terminal: the caller hands `run_shell_session` a byte stream
(`sessions.terminal.LocalTerminal`, or an SSH channel), which is what `ExecSession.bridge` reads
and writes. The CLI (`ranks shell`) and the dashboard (`s`) both run a shell through here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from monitors import api_paths
from monitors.connection import ExitCode
from monitors.humanize import gpus as fmt_gpus
from monitors.humanize import plural, wrap_prose
from monitors.kube import ApiProblem, KubeClient
from monitors.model_views import RankView, WorkloadView
from monitors.sanitize import clean

from .exec_bridge import ExecError, ExecOutcome, ExecSession
from .history import HISTORY_NAME
from .manifests import debug_seed
from .own_command import ranks_command as ranks_command  # (re-exported: the shell's users import it here)
from .session_history import instance, mirror_history, read_histories
from .ssh import SSH_PORT_ENV, SSH_SESSION_ENV, door_host

if TYPE_CHECKING:
    from .history_store import HistoryStore
    from .terminal import LocalTerminal

FINAL_READ = 5.0  # s for the last read of a shell's history when it ends

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
#
# Launches: the rc defines a function for each launcher (horovodrun, mpirun, mpiexec, torchrun,
# deepspeed; python and python3 for `-m torch.distributed.run|launch`), exported to the scripts
# bash runs, that runs the real one and appends `@launch\t<history number>\t<start>\t<end>\t
# <status>\t<launcher>\t<cwd>\t<start dir>\t<argv>` (`printf %q`): each launch with its own
# status and its arguments as run, whatever the line around it (see `sessions.history`). A launch
# on a line kept out of the history (a leading space) is not recorded either.
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
export RANKS_START_DIR="$PWD"
__ranks_launch() {
  local __l=$1 __t0 __t1 __s __n= __h __q
  shift
  __t0=${EPOCHREALTIME:-}; [[ -n $__t0 ]] || printf -v __t0 '%(%s)T' -1
  command "$@"
  __s=$?
  __t1=${EPOCHREALTIME:-}; [[ -n $__t1 ]] || printf -v __t1 '%(%s)T' -1
  __h=$(HISTTIMEFORMAT= builtin history 1 2>/dev/null)
  [[ $__h =~ ^\ *([0-9]+) ]] && __n=${BASH_REMATCH[1]}
  if [[ -z $__n || $__n != "${__ranks_seen-}" ]]; then
    printf -v __q '%q ' "$@"
    printf '@launch\t%s\t%s\t%s\t%s\t%s\t%q\t%q\t%s\n' "$__n" "$__t0" "$__t1" "$__s" "$__l" "$PWD" \
      "${RANKS_START_DIR-}" "${__q% }" >> "$RANKS_HISTFILE"
  fi
  return $__s
}
__ranks_py() {
  local __p=$1 __m= __x __k=0
  shift
  local -a __v=("$@")
  while (( __k < ${#__v[@]} )); do
    __x=${__v[__k]}
    case $__x in
      -m) __m=${__v[__k+1]-}; break ;;
      -m?*) __m=${__x#-m}; break ;;
      -X|-W|--check-hash-based-pycs) __k=$((__k + 2)) ;;
      -?*) __k=$((__k + 1)) ;;
      *) break ;;
    esac
  done
  case $__m in
    torch.distributed.run|torch.distributed.launch) __ranks_launch "python -m $__m" "$__p" "$@" ;;
    *) command "$__p" "$@" ;;
  esac
}
horovodrun() { __ranks_launch horovodrun horovodrun "$@"; }
mpirun() { __ranks_launch mpirun mpirun "$@"; }
mpiexec() { __ranks_launch mpiexec mpiexec "$@"; }
torchrun() { __ranks_launch torchrun torchrun "$@"; }
deepspeed() { __ranks_launch deepspeed deepspeed "$@"; }
python() { __ranks_py python "$@"; }
python3() { __ranks_py python3 "$@"; }
export -f __ranks_launch __ranks_py horovodrun mpirun mpiexec torchrun deepspeed python python3
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


def shell_command(seed: str = "") -> list[str]:
    """The remote command; `seed`: a command put in the shell's history list first (a debug
    session's job command: ↑ recalls it), not recorded as run."""
    lines = ""
    seed = clean(seed, single_line=False, limit=None)
    if seed.strip() and "RANKS_RC" not in seed:
        lines = f"history -s -- {shlex.quote(seed)}\n"
    marker = "HISTIGNORE=\n"
    return ["/bin/sh", "-c", SHELL_SCRIPT.replace(marker, marker + lines, 1)]


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
    containers: list[str] = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
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


OPERATOR_PORTS = ("pytorchjob-port", "tfjob-port", "xgboostjob-port", "mxjob-port", "paddlejob-port")


def port_lines(target: ShellTarget, *, cli: str | None) -> list[str]:
    """Banner lines on the ports this pod declares (`ranks submit --port/--jupyter`; the operators'
    own left out) and how to reach them: `ranks port-forward` on the user's machine, or over the
    SSH door the `ssh -L` line."""
    ports: list[tuple[int, str]] = []
    for c in (target.pod.get("spec") or {}).get("containers") or ():
        for p in (c.get("ports") or ()) if isinstance(c, dict) and c.get("name") == target.container else ():
            if isinstance(p, dict) and isinstance(p.get("containerPort"), int) and p.get("name") not in OPERATOR_PORTS:
                ports.append((int(p["containerPort"]), clean(str(p.get("name") or ""), limit=15)))
    if not ports:
        return []
    wl, q = target.workload, shlex.quote
    said = ", ".join(f"{port} ({name})" if name else str(port) for port, name in ports)
    if cli:
        return sentence(f"ports {said}: on your machine,",
                        f"{cli} port-forward {q(clean(wl.name))} -p {q(clean(wl.project))} "
                        f"{' '.join(str(port) for port, _ in ports)}", "reaches them (or P in the dashboard)")
    where = f"{clean(target.rank.label)}.{clean(wl.name)}.{clean(wl.project)}"
    if os.environ.get(SSH_SESSION_ENV):
        ssh_port = os.environ.get(SSH_PORT_ENV, "")
        return sentence(f"ports {said}: on your machine,",
                        "ssh -N " + " ".join(f"-L {port}:{where}:{port}" for port, _ in ports)
                        + (f" -p {ssh_port}" if ssh_port and ssh_port != "22" else "") + f" {door_host()}",
                        "reaches them")
    return [f"  ports {said}: ranks port-forward (or P in the dashboard) reaches them"]


def sentence(before: str, command: str, after: str) -> list[str]:
    """A hint whose command stands on a line of its own, as the paste lines do (whole, so it runs
    as pasted, whatever the terminal's width), between the words before and after it."""
    return [f"  {before}", f"    {command}", f"  {after}"]


def fit(lines: list[str], width: int | None) -> list[str]:
    """The banner's words wrapped at spaces to `width` columns, each line's continuation at its own
    indent; the lines to paste (indented four) are left whole: a terminal's own wrapping of a long
    one copies back as the one line."""
    if not width:
        return lines
    out: list[str] = []
    for line in lines:
        if line.startswith("    ") or len(line) <= width:
            out.append(line)
            continue
        out += wrap_prose(line, width, " " * (len(line) - len(line.lstrip(" ")) or 2))
    return out


def banner(target: ShellTarget, *, cli: bool | str | None = None, width: int | None = None) -> str:
    """What `ranks shell` prints before the prompt; `cli`: how the hints run ranks on the user's
    machine (a command prefix; True: `ranks`; False: no such hints; default: `ranks_command()`);
    `width`: the terminal's columns, its words wrapped to them (`fit`)."""
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
    origin, command, failure = debug_seed(target.pod)
    if origin:
        how = f" ({clean(failure, limit=200)})" if failure else ""
        lines.append(f"  a debug session of {clean(origin)}{how}: "
                     + ("its command is in this shell's history: up-arrow and Enter run it as the job did"
                        if command.strip() else "the job ran its image's entrypoint (no command to recall)"))
    lines += other_ranks(target, cli=cli)
    lines += port_lines(target, cli=cli)
    lines.append(f"  commands and launches are recorded with their exit status in ~/{HISTORY_NAME}, and kept by "
                 "ranks (convert takes the newest launch that exited 0 on every node)")
    if cli:
        q = shlex.quote
        lines += sentence("on your machine,", f"{cli} convert {q(clean(wl.name))} -p {q(clean(wl.project))} "
                          "--from-history", "turns the last launch into a training job")
    else:
        lines.append("  convert (t in the dashboard) turns the last launch into a training job")
    return "\r\n".join(fit(lines, width)) + "\r\n"


async def shell_target(client: KubeClient, wl: WorkloadView, rank: RankView, container: str | None = None
                       ) -> ShellTarget:
    """The shell's target: `rank`'s pod as the server has it now, and its container (`container`,
    else the pod's default one)."""
    raw = await client.get(api_paths.pod(wl.namespace, rank.pod))
    workers = [x for x in wl.ranks if x.role == "worker"]
    return ShellTarget(wl, rank, default_container(raw, container), raw, workers)


async def run_shell_session(client: KubeClient, target: ShellTarget, term: LocalTerminal, *,
                            quiet: bool = False, store: HistoryStore | None = None,
                            job: dict[str, Any] | None = None) -> ExecOutcome:
    """The banner, then the shell over `term` until it exits or the connection drops; with
    `store`, the rank's history mirrored there meanwhile (and the session's `job`)."""
    tty = term.is_tty
    if not quiet:
        term.sink(1, banner(target, cli=ranks_command(client.cfg) or False,
                            width=term.size()[0] if tty else None).encode())
    session = await ExecSession.open(client, target.workload.namespace, target.rank.pod,
                                     shell_command(seed=debug_seed(target.pod)[1]), container=target.container,
                                     tty=tty, stdin=True)
    mirror = None
    if store is not None and target.workload.interactive:
        mirror = asyncio.create_task(mirror_history(client, target.workload, target.rank, store,
                                                    target.container, job))
    try:
        with term:
            return await session.bridge(term, term.sink, term.resizes() if tty else None)
    finally:
        await session.close()
        if mirror is not None:
            await finish_mirror(client, target, store, mirror)


async def finish_mirror(client: KubeClient, target: ShellTarget, store: HistoryStore | None,
                        mirror: asyncio.Task[None]) -> None:
    """The mirror stopped, and the history read once more (what the last seconds added), quietly."""
    mirror.cancel()
    with contextlib.suppress(BaseException):
        await mirror
    if store is None:
        return
    with contextlib.suppress(Exception):
        found = await asyncio.wait_for(read_histories(client, target.workload, [target.rank]), FINAL_READ)
        for r, text, _res in found:
            if text is not None:
                await asyncio.to_thread(store.save_history, target.workload.namespace, target.workload.kind,
                                        target.workload.name, target.workload.uid, r.label, r.pod, instance(r), text)


async def explain_end(client: KubeClient, target: ShellTarget, outcome: ExecOutcome) -> str:
    """Why a shell ended other than by `exit` (the pod died, the connection dropped); "" if it did."""
    if not outcome.lost and outcome.exit_code < 128:
        return ""
    try:
        raw = await client.get(api_paths.pod(target.workload.namespace, target.rank.pod))
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
