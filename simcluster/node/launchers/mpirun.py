"""Simulated Open MPI `mpirun` / `mpiexec` for simcluster pods (simulation only).

Reads `-np`, `-H host[:slots],...`, `-hostfile`/`--hostfile`/`-machinefile`, else the default
hostfile in `OMPI_MCA_orte_default_hostfile` (the MPI operator's `/etc/mpi/hostfile`), else
`localhost` with one slot per CPU; `-x VAR` / `-x VAR=value`; `--tag-output`; `-wdir`;
`--map-by node`; `-npernode`/`-N`; `--oversubscribe`; `--version`. Other common options are
accepted and ignored (`--allow-run-as-root`, `-bind-to`, `--mca k v`, ...); an unknown option is
refused as mpirun does. Ranks start as `_ranks` describes, each with Open MPI's variables
(`OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE/NODE_RANK`, `OMPI_UNIVERSE_SIZE`, `PMIX_RANK`...)
and the launcher's `OMPI_MCA_*` and `-x` variables.

Ends like Open MPI 4: with the first non-zero exit status of a rank (the others are stopped and
the "Primary job terminated normally..." / "mpirun detected..." or "mpirun noticed that process
rank R ... exited on signal" messages are printed), 1 when it cannot start (unknown host: the
exec's error, then "ORTE was unable to reliably start one or more daemons."), 128 + N after
signal N.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # (not typing's: importing it costs a launch ~3 ms)
if TYPE_CHECKING:
    from collections.abc import Callable

if TYPE_CHECKING or __package__:  # (the type checker reads the package's modules)
    from . import _kube, _ranks
else:  # run by path from the wrapper
    import _kube
    import _ranks

VERSION = "4.1.5"
RULE = "-" * 74

NO_ARG = frozenset({
    "allow-run-as-root", "oversubscribe", "nooversubscribe", "tag-output", "timestamp-output", "q", "quiet",
    "v", "verbose", "display-map", "display-allocation", "display-devel-map", "report-bindings",
    "merge-stderr-to-stdout", "noprefix", "use-hwthread-cpus", "bind-to-core", "bind-to-socket", "bynode",
    "byslot", "bycore", "bysocket", "nolocal", "show-progress", "debug-devel", "xml", "enable-recovery",
    "disable-recovery", "report-uri", "no-daemonize", "mca-verbose", "continuous", "keep-fqdn-hostnames",
    "do-not-resolve", "d", "hetero-nodes", "cpu-set-verbose", "version", "V", "help", "h",
})
ONE_ARG = frozenset({
    "np", "n", "c", "H", "host", "hostfile", "machinefile", "default-hostfile", "x", "bind-to", "map-by",
    "rank-by", "wdir", "wd", "prefix", "npernode", "N", "npersocket", "output-filename", "timeout",
    "cpus-per-proc", "cpus-per-rank", "am", "tune", "path", "preload-files", "personality", "app",
    "launch-agent", "report-pid", "report-uri", "output-proctable", "stdin", "s", "rf", "rankfile",
    "max-vm-size", "ompi-server", "report-child-jobs-separately", "set-cwd-to-session-dir",
})
TWO_ARG = frozenset({"mca", "gmca"})


class Options:
    """What mpirun was asked to do."""

    def __init__(self, *, np: int | None = None, hosts: str | None = None, tag_output: bool = False,
                 command: list[str] | None = None) -> None:
        self.np = np
        self.hosts = hosts
        self.hostfile: str | None = None
        self.exports: list[str] = []
        self.tag_output = tag_output
        self.merge_stderr = False
        self.oversubscribe = False
        self.by_node = False
        self.per_node: int | None = None
        self.wdir: str | None = None
        self.command: list[str] = list(command or [])
        self.version = False


class UsageError(Exception):
    pass


def parse(argv: list[str], prog: str = "mpirun") -> Options:
    o = Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            o.command = argv[i + 1:] if arg == "--" else argv[i:]
            break
        name, eq, inline = arg.lstrip("-").partition("=")
        if name in NO_ARG:
            values: list[str] = []
        elif name in ONE_ARG or name in TWO_ARG:
            need = 2 if name in TWO_ARG else 1
            values = [inline] if eq else []
            while len(values) < need:
                i += 1
                if i >= len(argv):
                    raise UsageError(f'{prog}: Error: option "{arg}" did not have enough parameters ({need})')
                values.append(argv[i])
        else:
            raise UsageError(f'{prog}: Error: unknown option "{arg}"\nType \'{prog} --help\' for usage.')
        i += 1
        if name in ("np", "n", "c"):
            o.np = _int(values[0], arg, prog)
        elif name in ("H", "host"):
            o.hosts = values[0] if o.hosts is None else f"{o.hosts},{values[0]}"
        elif name in ("hostfile", "machinefile", "default-hostfile"):
            o.hostfile = values[0]
        elif name == "x":
            o.exports.append(values[0])
        elif name == "tag-output":
            o.tag_output = True
        elif name == "merge-stderr-to-stdout":
            o.merge_stderr = True
        elif name == "oversubscribe":
            o.oversubscribe = True
        elif name == "map-by":
            o.by_node = values[0].split(":")[0].lower() == "node"
        elif name == "bynode":
            o.by_node = True
        elif name in ("npernode", "N"):
            o.per_node = _int(values[0], arg, prog)
        elif name in ("wdir", "wd"):
            o.wdir = values[0]
        elif name in ("version", "V"):
            o.version = True
    return o


def _int(value: str, arg: str, prog: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise UsageError(f'{prog}: Error: the value "{value}" of option "{arg}" is not a number') from None


def box(*lines: str) -> str:
    return "\n".join([RULE, *lines, RULE])


def hosts_of(o: Options) -> list[_ranks.Host]:
    """-H, else -hostfile, else the default hostfile, else localhost with a slot per CPU."""
    default_slots = 1
    with_default = os.environ.get(_ranks.DEFAULT_SLOTS, "")
    if with_default.isdigit():
        default_slots = int(with_default)
    if o.hosts:
        return _ranks.parse_host_list(o.hosts)
    path = o.hostfile or os.environ.get(_ranks.DEFAULT_HOSTFILE) or ""
    if path:
        found = _ranks.find_hostfile(path)
        if found is None:
            raise _ranks.LaunchError(box("Open RTE was unable to open the hostfile:", f"    {path}",
                                         "Check to make sure the path and filename are correct."))
        hosts = _ranks.parse_hostfile(found, default_slots=default_slots)
        if hosts:
            return hosts
    return [_ranks.Host("localhost", os.cpu_count() or 1)]


def rank_env(slots: list[_ranks.Slot], universe: int, exports: dict[str, str]) -> Callable[[_ranks.Slot], dict[str, str]]:
    size = len(slots)
    forwarded = {k: v for k, v in os.environ.items() if k.startswith("OMPI_MCA_")}

    def env(s: _ranks.Slot) -> dict[str, str]:
        out = dict(forwarded)
        out.update(exports)
        out.update({
            "OMPI_COMM_WORLD_RANK": str(s.rank),
            "OMPI_COMM_WORLD_SIZE": str(size),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(s.local_rank),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(s.local_size),
            "OMPI_COMM_WORLD_NODE_RANK": str(s.local_rank),  # Open MPI: the rank among this node's procs
            "OMPI_UNIVERSE_SIZE": str(universe),
            "OMPI_APP_CTX_NUM_PROCS": str(size),
            "OMPI_FIRST_RANKS": "0",
            "PMIX_RANK": str(s.rank),
        })
        return out

    return env


def exported(names: list[str], warn: Callable[[str], None]) -> dict[str, str]:
    """-x VAR (the launcher's value) and -x VAR=value."""
    out: dict[str, str] = {}
    for item in names:
        name, eq, value = item.partition("=")
        if eq:
            out[name] = value
        elif name in os.environ:
            out[name] = os.environ[name]
        else:
            warn(f'[{_kube.hostname()}:{os.getpid()}] Warning: could not find environment variable "{name}"')
    return out


def launch(o: Options, prog: str = "mpirun", extra_env: dict[str, str] | None = None) -> int:
    """Run the job; the exit status for the launcher."""
    err = _ranks.Output(lambda r, s: b"")
    if o.version:
        print(f"{prog} (Open MPI) {VERSION}\n\nReport bugs to http://www.open-mpi.org/community/help/", flush=True)
        return 0
    if not o.command:
        err.text(2, box(f"No executable was specified on the {prog} command line.", "", "Aborting."))
        return 1
    try:
        hosts = hosts_of(o)
    except _ranks.LaunchError as exc:
        err.text(2, exc.message)
        return exc.code
    except OSError as exc:
        err.text(2, f"{prog}: {exc}")
        return 1
    universe = _ranks.total_slots(hosts)
    np = o.np if o.np is not None else (len(hosts) * o.per_node if o.per_node else universe)
    if o.oversubscribe and np > universe:
        grow = -(-np // max(1, len(hosts)))
        hosts = [_ranks.Host(h.name, max(h.slots, grow)) for h in hosts]
    slots = _ranks.place(hosts, np, by_node=o.by_node, per_node=o.per_node)
    if len(slots) < np:
        err.text(2, box(f"There are not enough slots available in the system to satisfy the {np}",
                        "slots that were requested by the application:", "", f"  {o.command[0]}", "",
                        "Either request fewer slots for your application, or make more slots",
                        "available for use."))
        return 1
    exports = exported(o.exports, lambda m: err.text(2, m))
    if extra_env:
        exports = {**extra_env, **exports}
    jobid = (os.getpid() * 2654435761) % 65536 or 1

    def tag(rank: int, stream: int) -> bytes:
        if not o.tag_output:
            return b""
        return f"[1,{rank}]<{'stdout' if stream == 1 else 'stderr'}>:".encode()

    out = _ranks.Output(tag, (1, 1) if o.merge_stderr else (1, 2))
    job = _ranks.Launch(slots, o.command, rank_env(slots, universe, exports), out, workdir=o.wdir)
    try:
        ranks = job.run()
    except _kube.ApiError as exc:
        err.text(2, f"{prog}: {exc.message}")
        return 1
    if job.signal is not None:
        return 128 + job.signal
    return report(job, ranks, prog, jobid, err)


def report(job: _ranks.Launch, ranks: list[_ranks.Rank], prog: str, jobid: int, err: _ranks.Output) -> int:
    first = job.first_failure()
    if first is None:
        return 0
    host = first.slot.host
    if first.start_error:
        reasons = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 500: "InternalError"}
        reason = reasons.get(first.start_code, "")
        msg = first.start_error
        err.text(2, f"Error from server ({reason}): {msg}" if reason else f"error: {msg}")
        err.text(2, box(
            "ORTE was unable to reliably start one or more daemons.", "This usually is caused by:", "",
            "* not finding the required libraries and/or binaries on",
            "  one or more nodes. Please check your PATH and LD_LIBRARY_PATH",
            "  settings, or configure OMPI with --enable-orterun-prefix-by-default", "",
            "* lack of authority to execute on one or more specified nodes.",
            "  Please verify your allocation and authorities.",
        ))
        return 1
    if first.not_found:
        err.text(2, box(
            f"{prog} was unable to find the specified executable file, and therefore",
            "did not launch the job.  This error was first reported for process",
            f"rank {first.slot.rank}; it may have occurred for other processes as well.", "",
            f"NOTE: A common cause for this error is misspelling a {prog} command",
            f"      line parameter option (remember that {prog} interprets the first",
            "      unrecognized command line token as the executable).", "",
            f"Node:       {host}", f"Executable: {job.command[0]}",
        ))
        return 1
    if first.lost:
        err.text(2, box(
            "ORTE has lost communication with a remote daemon.", "",
            f"  HNP daemon   : [[{jobid},0],0] on node {_kube.hostname()}",
            f"  Remote daemon: [[{jobid},0],{first.slot.node_index + 1}] on node {host}", "",
            "This is usually due to either a failure of the TCP network",
            "connection to the node, or possibly an internal failure of",
            "the daemon itself. We cannot recover from this failure, and",
            "therefore will terminate the job.",
        ))
        return 1
    code = first.code or 1
    err.text(2, box("Primary job  terminated normally, but 1 process returned",
                    "a non-zero exit code. Per user-direction, the job has been aborted."))
    if code > 128:
        n, name = _ranks.signal_name(code)
        err.text(2, box(f"{prog} noticed that process rank {first.slot.rank} with PID {first.pid} on node "
                        f"{host} exited on signal {n} ({name})."))
    else:
        err.text(2, box(f"{prog} detected that one or more processes exited with non-zero status, thus causing",
                        "the job to be terminated. The first process to do so was:", "",
                        f"  Process name: [[{jobid},1],{first.slot.rank}]", f"  Exit code:    {code}"))
    return code


def main(argv: list[str] | None = None, prog: str = "mpirun") -> int:
    try:
        o = parse(sys.argv[1:] if argv is None else argv, prog)
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return launch(o, prog)


if __name__ == "__main__":
    sys.exit(main())
