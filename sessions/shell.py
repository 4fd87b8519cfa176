"""A shell in a rank's pod: choosing the pod, the banner with ready-to-paste launch lines, the
remote command (bash with a history file appended as each command runs; sh as a fallback), the
session itself and why it ended, and reading back the history it recorded.

Nothing here opens the local terminal: the caller hands `run_shell_session` a byte stream
(`sessions.terminal.LocalTerminal`, or an SSH channel), which is what `ExecSession.bridge` reads
and writes. The CLI (`ranks shell`) and the dashboard (`s`) both run a shell through here.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from monitors.connection import ExitCode
from monitors.humanize import gpus as fmt_gpus
from monitors.humanize import plural
from monitors.kube import ApiProblem, KubeClient, seg
from monitors.model_views import RankView, WorkloadView
from monitors.sanitize import clean

from .errors import SessionError
from .exec_all import run_on_ranks
from .exec_bridge import ExecError, ExecOutcome, ExecSession

if TYPE_CHECKING:
    from .terminal import LocalTerminal

HISTORY_NAME = ".ranks_history"
LAUNCH_WORDS = ("horovodrun", "mpirun", "mpiexec", "torchrun", "python -m torch.distributed")

# The remote side: find a writable history file, then bash with history appended before each
# command runs (DEBUG trap) and after it (PROMPT_COMMAND); sh when there is no bash.
SHELL_SCRIPT = r"""
H="${HOME:-/tmp}/__HIST__"
( : >> "$H" ) 2>/dev/null || H="/tmp/__HIST__"
export RANKS_HISTFILE="$H"
if command -v bash >/dev/null 2>&1; then
  RC="${TMPDIR:-/tmp}/.ranks_bashrc.$$"
  cat > "$RC" <<'EOF'
[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"
HISTFILE="$RANKS_HISTFILE"; HISTSIZE=10000; HISTFILESIZE=100000; HISTCONTROL=
shopt -s histappend
PROMPT_COMMAND='history -a'
trap 'history -a' DEBUG
rm -f "$RANKS_RC"
EOF
  export RANKS_RC="$RC"
  exec bash --rcfile "$RC" -i
fi
exec sh -i
""".replace("__HIST__", HISTORY_NAME)


def shell_command() -> list[str]:
    return ["/bin/sh", "-c", SHELL_SCRIPT]


def history_command() -> list[str]:
    """Prints the session's shell history (as recorded by `shell_command`)."""
    script = (f'for f in "${{HOME:-/tmp}}/{HISTORY_NAME}" "/tmp/{HISTORY_NAME}"; do '
              '[ -r "$f" ] && cat "$f" && exit 0; done; exit 0')
    return ["/bin/sh", "-c", script]


def launch_commands(history: str) -> list[str]:
    """Commands from a shell history that launch distributed training, most recent first, unique."""
    out: list[str] = []
    for line in reversed(history.splitlines()):
        cmd = line.strip()
        if not cmd or cmd.startswith("#"):
            continue
        if any(word in cmd for word in LAUNCH_WORDS) and cmd not in out:
            out.append(cmd)
    return out


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


def paste_lines(target: ShellTarget) -> list[str]:
    """Ready-to-paste launch lines built from the workload's actual ranks."""
    wl, env = target.workload, target.env
    q = shlex.quote
    if wl.kind == "MPIJob":
        slots = _slots(target)
        np = len(target.workers) * slots
        hosts = ",".join(f"{h}:{slots}" for h in _hosts(target))
        hostfile = env.get("OMPI_MCA_orte_default_hostfile") or "/etc/mpi/hostfile"
        return [
            f"horovodrun -np {np} -H {hosts} python train.py",
            f"horovodrun -np {np} -hostfile {hostfile} python train.py",
            f"mpirun -np {np} --hostfile {hostfile} python train.py",
        ]
    if wl.kind == "PyTorchJob":
        nnodes = len(wl.ranks)
        nproc = max(1, int(max((r.gpus for r in wl.ranks), default=1)))
        addr = env.get("MASTER_ADDR", f"{wl.name}-master-0")
        port = env.get("MASTER_PORT", "23456")
        line = (f"torchrun --nnodes={nnodes} --nproc_per_node={nproc} --node_rank=$RANK "
                f"--master_addr={addr} --master_port={port} train.py")
        return [line, f"# torchrun starts on every node: ranks exec {q(wl.name)} -p {q(wl.project)} --all -- "
                      f"sh -c {q(line)}"]
    return ["python train.py",
            f"# on every replica: ranks exec {q(wl.name)} -p {q(wl.project)} --all -- python train.py"]


def banner(target: ShellTarget) -> str:
    wl, r, env = target.workload, target.rank, target.env
    lines = [
        f"ranks shell: {clean(wl.kind)} {clean(wl.name)} (project {clean(wl.project)})",
        f"  pod {clean(r.pod)} [{clean(target.container)}] on node {clean(r.node or '-')}, "
        f"{clean(r.label)}{'' if r.rank is None else f' rank {r.rank}'}",
        f"  world size {world_size(target)}, {plural(len(wl.ranks), 'pod')}, "
        f"{fmt_gpus(wl.gpus_allocated)} {'GPU' if wl.gpus_allocated == 1 else 'GPUs'}",
    ]
    if wl.kind == "MPIJob":
        hostfile = env.get("OMPI_MCA_orte_default_hostfile") or "/etc/mpi/hostfile"
        lines.append(f"  hostfile {hostfile}: {', '.join(_hosts(target)) or 'no workers'}")
    elif "MASTER_ADDR" in env:
        lines.append(f"  master {env['MASTER_ADDR']}:{env.get('MASTER_PORT', '?')}")
    elif "TF_CONFIG" in env:
        lines.append("  TF_CONFIG is set on every replica")
    lines.append("  ready to paste:")
    lines += [f"    {line}" for line in paste_lines(target)]
    lines.append(f"  commands are recorded in ~/{HISTORY_NAME}; 'ranks convert {wl.name} --from-history' "
                 "turns the last launch into a training job")
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
        term.sink(1, banner(target).encode())
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


async def session_history(client: KubeClient, wl: WorkloadView) -> list[str]:
    """Launch commands from the session's shell history (in its lead pod), most recent first; a
    history that cannot be read is a SessionError (exit 1)."""
    lead = pick_rank(wl)
    chunks: list[bytes] = []
    results = await run_on_ranks(client, wl, [lead], history_command(),
                                 lambda _r, ch, line: chunks.append(line) if ch == 1 else None)
    if not results[0].ok:
        raise SessionError(f"cannot read the shell history in {lead.pod}: "
                           f"{clean(results[0].error) or 'exit ' + str(results[0].exit_code)}", ExitCode.ERROR)
    return launch_commands(b"".join(chunks).decode("utf-8", "replace"))
