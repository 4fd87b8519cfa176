"""Which process in a pod is which rank, from each process's own environment, read in the pod.

`LIST_SCRIPT` runs in the container (`sh -c`, through pods/exec; `tr`, `grep` and `readlink`, as
busybox and coreutils have them) and prints, per process of the container's mount namespace (told
by the shell's `-ef`, without a program started for the processes of others): its
pid and parent, its command line, its mount namespace and only the variables that say a rank
(`RANK_VARS`, and `HOSTNAME`): nothing else of its environment (secrets) leaves the pod.
`classify` then tells ranks from the rest:

- a rank is the outermost Python process with a rank variable (`HOROVOD_RANK`,
  `OMPI_COMM_WORLD_RANK`, `PMI_RANK`, `PMIX_RANK`, then `RANK`: the first set wins, as training
  code reads them);
- a process with a rank variable whose descendants say another rank is their launcher (torchrun,
  whose own `RANK` is its node's, or orted);
- a Python process under a rank's process with the same variables is one of its workers (a
  DataLoader's, whose environment it inherits);
- a shell that only starts the rank (`sh -c "python train.py"`) is its wrapper;
- everything else (sshd, sleep, a shell) is not a rank, named by its command.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from monitors.sanitize import clean

RANK_VARS = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "RANK")
LOCAL_VARS = ("HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK")
READ_VARS = (*RANK_VARS, *LOCAL_VARS, "HOSTNAME")
MAX_PROCESSES = 4096

# (each record: `P pid ppid`, `N mount namespace`, `C command line`, `E VAR=value` lines; the
# script's own processes, its children included, are left out)
LIST_SCRIPT = r"""me=$$
mine=$(readlink /proc/$me/ns/mnt 2>/dev/null)
echo "H $(cat /proc/sys/kernel/hostname 2>/dev/null)"
[ -n "$1" ] && mine=
echo "M $mine"
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [ "$p" = "$me" ] && continue
  [ -n "$1" ] || [ -z "$mine" ] || [ "$d/ns/mnt" -ef "/proc/$me/ns/mnt" ] || continue
  pp=
  while read -r k v; do [ "$k" = PPid: ] && { pp=$v; break; }; done 2>/dev/null < "$d/status" || continue
  [ -n "$pp" ] && [ "$pp" != "$me" ] || continue
  echo "P $p $pp"
  echo "N $mine"
  printf 'C '; tr '\000\n' '  ' 2>/dev/null < "$d/cmdline"; echo
  tr '\000' '\n' 2>/dev/null < "$d/environ" | grep -E '^(VARS)=' | while read -r e; do echo "E $e"; done
done
""".replace("VARS", "|".join(READ_VARS))


@dataclass
class Proc:
    pid: int
    ppid: int
    command: str  # its command line, cleaned and cut short
    mount_ns: str = ""
    env: dict[str, str] = field(default_factory=dict)

    @property
    def rank(self) -> int | None:
        for name in RANK_VARS:
            value = self.env.get(name, "").strip()
            if value.isdigit() and len(value) < 10:
                return int(value)
        return None

    @property
    def local_rank(self) -> int | None:
        for name in LOCAL_VARS:
            value = self.env.get(name, "").strip()
            if value.isdigit() and len(value) < 10:
                return int(value)
        return None

    @property
    def identity(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((k, v) for k, v in self.env.items() if k in RANK_VARS or k in LOCAL_VARS))

    @property
    def name(self) -> str:
        """Its program's name: the script a Python runs (torchrun, train.py), else the command's."""
        words = self.command.split()
        if not words:
            return "?"
        prog = words[0].rsplit("/", 1)[-1]
        if self.python:
            for w in words[1:]:
                if not w.startswith("-"):
                    return f"{prog} {w.rsplit('/', 1)[-1]}"
        return prog

    @property
    def python(self) -> bool:
        words = self.command.split()
        return bool(words) and words[0].rsplit("/", 1)[-1].startswith("python")


@dataclass
class Listing:
    hostname: str = ""
    mount_ns: str = ""
    procs: list[Proc] = field(default_factory=list)


def parse_listing(text: str) -> Listing:
    """What `LIST_SCRIPT` printed; lines of another shape are skipped (nothing is trusted)."""
    out = Listing()
    cur: Proc | None = None
    for line in text.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "H" and cur is None:
            out.hostname = clean(rest.strip(), limit=253)
        elif tag == "M" and cur is None:
            out.mount_ns = rest.strip()[:64]
        elif tag == "P":
            parts = rest.split()
            if len(parts) == 2 and all(p.isdigit() and len(p) < 11 for p in parts) and len(out.procs) < MAX_PROCESSES:
                cur = Proc(int(parts[0]), int(parts[1]), "")
                out.procs.append(cur)
            else:
                cur = None
        elif cur is None:
            continue
        elif tag == "N":
            cur.mount_ns = rest.strip()[:64]
        elif tag == "C":
            cur.command = clean(rest.strip(), limit=200)
        elif tag == "E":
            name, eq, value = rest.partition("=")
            if eq and name in READ_VARS:
                cur.env[name] = clean(value, limit=253)
    return out


@dataclass(frozen=True)
class RankProc:
    rank: int
    local_rank: int | None
    pid: int
    name: str


@dataclass(frozen=True)
class OtherProc:
    pid: int
    name: str
    role: str  # "launcher", "worker of rank 3", "wrapper of rank 3", "not a rank"


@dataclass
class Classified:
    ranks: list[RankProc] = field(default_factory=list)
    others: list[OtherProc] = field(default_factory=list)


def pod_processes(listing: Listing) -> list[Proc]:
    """The container's processes: those of the exec's own mount namespace (the container's), and
    where several hosts' processes share it (no namespaces of its own), those of its hostname."""
    procs = [p for p in listing.procs if not listing.mount_ns or p.mount_ns == listing.mount_ns]
    hosts = {p.env.get("HOSTNAME") for p in procs if p.env.get("HOSTNAME")}
    if len(hosts) > 1 and listing.hostname:
        procs = [p for p in procs if p.env.get("HOSTNAME") == listing.hostname]
    return procs


def classify(procs: list[Proc]) -> Classified:
    by_pid = {p.pid: p for p in procs}
    children: dict[int, list[Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)

    def descendants(p: Proc) -> list[Proc]:
        out, todo, seen = [], list(children.get(p.pid, ())), {p.pid}
        while todo:
            c = todo.pop()
            if c.pid in seen:
                continue
            seen.add(c.pid)
            out.append(c)
            todo.extend(children.get(c.pid, ()))
        return out

    def ancestors(p: Proc) -> list[Proc]:
        out, seen, cur = [], {p.pid}, by_pid.get(p.ppid)
        while cur is not None and cur.pid not in seen:
            seen.add(cur.pid)
            out.append(cur)
            cur = by_pid.get(cur.ppid)
        return out

    result = Classified()
    for p in sorted(procs, key=lambda q: q.pid):
        rank = p.rank
        if rank is None:
            result.others.append(OtherProc(p.pid, p.name, "not a rank"))
            continue
        below = descendants(p)
        if any(d.rank is not None and d.identity != p.identity for d in below):
            result.others.append(OtherProc(p.pid, p.name, "launcher"))
        elif not p.python:
            same = any(d.python and d.identity == p.identity for d in below)
            result.others.append(OtherProc(p.pid, p.name, f"wrapper of rank {rank}" if same else "not a rank"))
        elif any(a.python and a.identity == p.identity for a in ancestors(p)):
            result.others.append(OtherProc(p.pid, p.name, f"worker of rank {rank}"))
        else:
            result.ranks.append(RankProc(rank, p.local_rank, p.pid, p.name))
    return result
