"""Simulated `horovodrun` for simcluster pods (simulation only), after `horovod/runner/launch.py`.

Hosts: `-H host:slots,...`, else `-hostfile` (`host slots=N` lines), else (simcluster's
convenience for MPIJob launchers) the default hostfile in `OMPI_MCA_orte_default_hostfile`, else
`localhost:<np>` as horovodrun does. Ranks fill each host's slots in order (horovod's
`get_host_assignments`).

Two controllers, as horovodrun has:
- Gloo (the default here, also `--gloo`): every rank gets the launcher's exportable environment
  (horovod's `is_exportable`; variables that describe the launcher pod itself - HOME, HOSTNAME,
  PWD, PATH, KUBERNETES_* - are left to the worker) plus `HOROVOD_HOSTNAME`, `HOROVOD_RANK`,
  `HOROVOD_SIZE`, `HOROVOD_LOCAL_RANK`, `HOROVOD_LOCAL_SIZE`, `HOROVOD_CROSS_RANK`,
  `HOROVOD_CROSS_SIZE`, `HOROVOD_CONTROLLER=gloo`, `HOROVOD_CPU_OPERATIONS=gloo` and
  `PYTHONUNBUFFERED=1`; output lines are prefixed `[<rank>]<stdout>:` / `[<rank>]<stderr>:`
  (`safe_shell_exec.prefix_connection`). A failing rank stops the others and horovodrun exits
  1 with horovod's "Process R exit with status code C." and RuntimeError messages.
- MPI (`--mpi`): horovodrun runs `mpirun --allow-run-as-root --tag-output -np N -H hosts
  -bind-to none -map-by slot ... -x <every exportable variable>`: the simulated mpirun, with its
  `[1,<rank>]<stdout>:` tags, Open MPI variables and exit status.
"""

from __future__ import annotations

import os
import re
import shlex
import sys

TYPE_CHECKING = False  # (not typing's: importing it costs a launch ~3 ms)
if TYPE_CHECKING or __package__:  # (the type checker reads the package's modules)
    from . import _kube, _ranks, mpirun
else:  # run by path from the wrapper
    import _kube
    import _ranks
    import mpirun

VERSION = "0.28.1"
USAGE = "usage: horovodrun [-h] [-v] -np NP [-cb] [--disable-cache] [--start-timeout START_TIMEOUT] [--verbose] ..."

NO_ARG = frozenset({
    "verbose", "gloo", "mpi", "jsrun", "disable-cache", "tcp", "hierarchical-allreduce",
    "no-hierarchical-allreduce", "hierarchical-allgather", "no-hierarchical-allgather", "torus-allreduce",
    "no-torus-allreduce", "autotune", "no-autotune", "timeline-mark-cycles", "no-timeline-mark-cycles",
    "no-stall-check", "stall-check", "mpi-threads-disable", "no-mpi-threads-disable", "log-with-timestamp",
    "log-without-timestamp", "prefix-timestamp", "prefix-output-with-timestamp", "log-hide-timestamp",
    "no-log-hide-timestamp", "cb", "check-build", "v", "version", "h", "help",
})
ONE_ARG = frozenset({
    "np", "num-proc", "H", "hosts", "hostfile", "start-timeout", "network-interfaces", "network-interface",
    "output-filename", "config-file", "p", "ssh-port", "i", "ssh-identity-file", "fusion-threshold-mb",
    "cycle-time-ms", "cache-capacity", "autotune-log-file", "autotune-warmup-samples",
    "autotune-steps-per-sample", "autotune-bayes-opt-max-samples", "autotune-gaussian-process-noise",
    "min-np", "min-num-proc", "max-np", "max-num-proc", "slots-per-host", "elastic-timeout", "reset-limit",
    "timeline-filename", "stall-check-warning-time-seconds", "stall-check-shutdown-time-seconds",
    "mpi-args", "binding-args", "num-nccl-streams", "thread-affinity", "gloo-timeout-seconds", "log-level",
    "host-discovery-script",
})
TWO_ARG = frozenset({"blacklist-cooldown-range"})
# horovod's env.IGNORE_REGEXES, and what describes the launcher pod rather than the job
IGNORE = re.compile(r"^(BASH_FUNC_.*|OLDPWD|.*CUDA_VISIBLE_DEVICES|_HOROVOD_SECRET_KEY)$")
POD_LOCAL = re.compile(r"^(HOME|HOSTNAME|PWD|SHLVL|_|PATH|TERM|LS_COLORS|KUBERNETES_.*)$")
# the variables travel in the exec request's URL, which the API server reads as one line (8 KiB)
ENV_BUDGET = 4096


class Usage(Exception):
    pass


def parse(argv: list[str]) -> dict[str, object]:
    opts: dict[str, object] = {"command": []}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg == "-":
            opts["command"] = argv[i:]
            break
        if arg == "--":
            opts["command"] = argv[i + 1:]
            break
        name, eq, inline = arg.lstrip("-").partition("=")
        if name in NO_ARG:
            opts[name] = True
            i += 1
            continue
        if name not in ONE_ARG and name not in TWO_ARG:
            raise Usage(f"unrecognized arguments: {arg}")
        need = 2 if name in TWO_ARG else 1
        values = [inline] if eq else []
        while len(values) < need:
            i += 1
            if i >= len(argv) or (argv[i].startswith("-") and not re.match(r"^-\d", argv[i])):
                raise Usage(f"argument {arg}: expected {'one argument' if need == 1 else '2 arguments'}")
            values.append(argv[i])
        opts[name] = values[0] if need == 1 else values
        i += 1
    return opts


def hosts_of(opts: dict[str, object], np: int | None) -> list[_ranks.Host]:
    hosts = opts.get("H") or opts.get("hosts")
    if hosts:
        return _ranks.parse_host_list(str(hosts), need_slots=True)
    path = str(opts.get("hostfile") or os.environ.get(_ranks.DEFAULT_HOSTFILE) or "")
    if path:
        found = _ranks.find_hostfile(path)
        if found is None:
            raise _ranks.LaunchError(f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'")
        return _ranks.parse_hostfile(found)
    return [_ranks.Host("localhost", np or 1)]


def forwarded_env() -> dict[str, str]:
    """The launcher's exportable variables (the largest left out past ENV_BUDGET, with a warning)."""
    env = {k: v for k, v in os.environ.items() if not IGNORE.match(k) and not POD_LOCAL.match(k)}
    size = sum(len(_kube.quote(f"{k}={shlex.quote(v)} ")) for k, v in env.items())
    for k in sorted(env, key=lambda k: len(env[k]), reverse=True):
        if size <= ENV_BUDGET:
            break
        size -= len(_kube.quote(f"{k}={shlex.quote(env.pop(k))} "))
        print(f"horovodrun: not passing {k} to the ranks (too large for pods/exec)", file=sys.stderr)
    return env


def run_gloo(opts: dict[str, object], np: int | None, command: list[str]) -> int:
    err = _ranks.Output(lambda r, s: b"")
    try:
        hosts = hosts_of(opts, np)
    except _ranks.LaunchError as exc:
        err.text(2, exc.message)
        return 1
    except (OSError, ValueError, IndexError) as exc:
        err.text(2, f"{type(exc).__name__}: {exc}")
        return 1
    available = _ranks.total_slots(hosts)
    np = np if np is not None else available
    if np > available:
        err.text(2, f"ValueError: Requested more processes ({np}) than there are available slots ({available})")
        return 1
    slots = _ranks.place(hosts, np)
    base = forwarded_env()
    base["PYTHONUNBUFFERED"] = "1"
    verbose = bool(opts.get("verbose"))
    if verbose:
        me = _kube.hostname()
        remote = [h.name for h in hosts if not _ranks.target(h.name, "", me).local]
        lines = ["Filtering local host names."]
        if remote:
            lines += ["Remote host found: " + " ".join(remote), "Checking ssh on all remote hosts.",
                      "SSH was successful into all the remote hosts."]
        err.text(1, "\n".join(lines))

    def env(s: _ranks.Slot) -> dict[str, str]:
        return {**base,
                "HOROVOD_HOSTNAME": s.host, "HOROVOD_RANK": str(s.rank), "HOROVOD_SIZE": str(len(slots)),
                "HOROVOD_LOCAL_RANK": str(s.local_rank), "HOROVOD_LOCAL_SIZE": str(s.local_size),
                "HOROVOD_CROSS_RANK": str(s.cross_rank), "HOROVOD_CROSS_SIZE": str(s.cross_size),
                "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo"}

    def tag(rank: int, stream: int) -> bytes:
        return f"[{rank}]<{'stdout' if stream == 1 else 'stderr'}>:".encode()

    job = _ranks.Launch(slots, command, env, _ranks.Output(tag))
    if verbose:
        for s in slots:
            extra = " ".join(f"{k}={v}" for k, v in env(s).items() if k.startswith("HOROVOD_"))
            err.text(1, f"env {extra} {shlex.join(command)}")
    try:
        ranks = job.run()
    except _kube.ApiError as exc:
        err.text(2, f"RuntimeError: {exc.message}")
        return 1
    if job.signal is not None:
        return 128 + job.signal
    first = job.first_failure()
    if first is None:
        return 0
    if first.start_error:
        err.text(1, f"ssh not successful for host {first.slot.host}:\n{first.start_error}")
        err.text(2, "RuntimeError: could not connect to some hosts via ssh")
        return 1
    failed = sorted((r for r in ranks if r.failed), key=lambda r: (r.finished, r.slot.rank))
    for r in failed:
        err.text(1, f"Process {r.slot.rank} exit with status code {r.code}.")
        if r is first:
            err.text(1, f"Terminating remaining workers after failure of Process {r.slot.rank}.")
    err.text(2, "RuntimeError: Horovod detected that one or more processes exited with non-zero status, "
                "thus causing the job to be terminated. The first process to do so was:\n"
                f"Process name: {first.slot.rank}\nExit code: {first.code}")
    return 1


def run_mpi(opts: dict[str, object], np: int | None, command: list[str]) -> int:
    try:
        hosts = hosts_of(opts, np)
    except (_ranks.LaunchError, OSError, ValueError, IndexError) as exc:
        print(getattr(exc, "message", str(exc)), file=sys.stderr)
        return 1
    o = mpirun.Options(np=np, hosts=",".join(f"{h.name}:{h.slots}" for h in hosts), tag_output=True,
                       command=command)
    if opts.get("verbose"):
        print(f"mpirun --allow-run-as-root --tag-output -np {np} -H {o.hosts} -bind-to none -map-by slot "
              f"-mca pml ob1 -mca btl ^openib {shlex.join(command)}", flush=True)
    return mpirun.launch(o, extra_env=forwarded_env())


# horovod/runner/mpi_run.py for Open MPI (`_OMPI_FLAGS`, `_NO_BINDING_ARGS`) and launch.py's ssh check
OMPI_FLAGS = ["-mca pml ob1", "-mca btl ^openib"]
# (horovod's `-bind-to none -map-by slot`, with the two dashes Open MPI 5 needs: 5.0.11 takes
# `-bind-to`'s value for the program and refuses `-map-by`; horovod 0.28.1 predates it)
NO_BINDING_ARGS = ["--bind-to none", "--map-by slot"]
SSH_COMMAND_PREFIX = "ssh -o PasswordAuthentication=no -o StrictHostKeyChecking=no"
SSH_ATTEMPTS = 5
SSH_CONNECT_TIMEOUT_S = 10
SIMULATED = b"''" + b"''exec"  # the first line of a simulated launcher's wrapper (`launchers.wrapper`)


def real_mpirun() -> str | None:
    """Open MPI's own `mpirun` where PATH finds it (None: not there, or the simulated one)."""
    for d in os.environ.get("PATH", "").split(":"):
        path = os.path.join(d or ".", "mpirun")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            try:
                with open(path, "rb") as fh:
                    head = fh.read(512)
            except OSError:
                return None
            return None if SIMULATED in head else path
    return None


def _is_local(host: str) -> bool:
    """`host` names this pod (horovod's `network.filter_local_addresses`: its own addresses)."""
    import socket

    if host in ("localhost", "127.0.0.1", _kube.hostname()):
        return True
    try:
        own = {socket.gethostbyname(socket.gethostname()), "127.0.0.1"}
        return socket.gethostbyname(host) in own
    except OSError:
        return False


def ssh_check(hosts: list[str], port: object, identity: object) -> bool:
    """launch.py's `_check_all_hosts_ssh_successful`: `ssh ... true` to every remote host (in
    parallel, up to 5 tries each); a failure printed as horovodrun prints it."""
    import subprocess
    import threading

    port_arg = f"-p {port}" if port else ""
    identity_arg = f"-i {identity}" if identity else ""
    results: dict[int, tuple[int, str]] = {}

    def check(index: int, host: str) -> None:
        code, out = 1, ""
        cmd = f"{SSH_COMMAND_PREFIX} {host} {port_arg} {identity_arg} -o ConnectTimeout={SSH_CONNECT_TIMEOUT_S} true"
        for _ in range(SSH_ATTEMPTS):
            proc = subprocess.run(["/bin/sh", "-c", cmd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, errors="replace", check=False)
            code, out = proc.returncode, proc.stdout
            if code == 0:
                break
        results[index] = (code, out)

    threads = [threading.Thread(target=check, args=(i, h), daemon=True) for i, h in enumerate(hosts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = True
    for index in sorted(results):
        code, out = results[index]
        if code != 0:
            print(f"ssh not successful for host {hosts[index]}:\n{out}", flush=True)
            ok = False
    return ok


def run_real_mpi(opts: dict[str, object], np: int | None, command: list[str]) -> int:
    """horovodrun's MPI controller on Open MPI (`mpi_run.mpi_run`): the mpirun command it builds,
    run by /bin/sh in its place."""
    if opts.get("H") or opts.get("hosts"):
        hosts = str(opts.get("H") or opts.get("hosts"))
    elif opts.get("hostfile"):
        try:  # hosts.parse_host_files: `name slots=N` lines
            with open(str(opts["hostfile"])) as fh:
                hosts = ",".join(f"{ln.rstrip().split()[0]}:{ln.rstrip().split('=')[1]}" for ln in fh.readlines())
        except (OSError, IndexError) as exc:
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
    else:
        hosts = f"localhost:{np}"
    names = [h.rpartition(":")[0] or h for h in hosts.split(",") if h]
    verbose = bool(opts.get("verbose"))
    if verbose:
        print("Filtering local host names.", flush=True)
    remote = [h for h in names if not _is_local(h)]
    if verbose:
        print("Remote host found: " + " ".join(remote), flush=True)
    port, identity = opts.get("p") or opts.get("ssh-port"), opts.get("i") or opts.get("ssh-identity-file")
    if remote:
        if verbose:
            print("Checking ssh on all remote hosts.", flush=True)
        if not ssh_check(remote, port, identity):
            print("RuntimeError: could not connect to some hosts via ssh", file=sys.stderr)
            return 1
        if verbose:
            print("SSH was successful into all the remote hosts.", flush=True)
    env = dict(os.environ)
    ssh_args = [*([f"-p {port}"] if port else []), *([f"-i {identity}"] if identity else [])]
    mpi_ssh_args = f'-mca plm_rsh_args "{" ".join(ssh_args)}"' if ssh_args else ""
    flags = list(OMPI_FLAGS)
    if len(names) >= 64:
        flags += ["-mca plm_rsh_no_tree_spawn true", f"-mca plm_rsh_num_concurrent {len(names)}"]
    if opts.get("prefix-output-with-timestamp") or opts.get("prefix-timestamp"):
        flags.append("--timestamp-output")
    binding = str(opts.get("binding-args") or " ".join(NO_BINDING_ARGS))
    output = f"--output-filename {opts['output-filename']}" if opts.get("output-filename") else ""
    env_list = " ".join(f"-x {k}" for k in sorted(env) if not IGNORE.match(k))
    mpirun_command = (f"mpirun --allow-run-as-root --tag-output -np {np} -H {hosts} {binding} {' '.join(flags)} "
                      f"{mpi_ssh_args}   {output} {env_list} {opts.get('mpi-args') or ''} {shlex.join(command)}")
    if verbose:
        print(mpirun_command, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve("/bin/sh", ["/bin/sh", "-c", mpirun_command], env)
    return 127  # (not reached)


def main(argv: list[str] | None = None) -> int:
    try:
        opts = parse(sys.argv[1:] if argv is None else argv)
        np_raw = opts.get("np") or opts.get("num-proc")
        np = int(str(np_raw)) if np_raw is not None else None
    except Usage as exc:
        print(f"{USAGE}\nhorovodrun: error: {exc}", file=sys.stderr)
        return 2
    except ValueError:
        print(f"{USAGE}\nhorovodrun: error: argument -np/--num-proc: invalid int value: '{np_raw}'",
              file=sys.stderr)
        return 2
    if opts.get("v") or opts.get("version"):
        print(VERSION)
        return 0
    given = opts["command"]
    command = [str(a) for a in given] if isinstance(given, list) else []
    if not command:
        print(f"{USAGE}\nhorovodrun: error: the following arguments are required: COMMAND", file=sys.stderr)
        return 2
    if not opts.get("gloo") and real_mpirun() is not None:  # horovod built with MPI: its default
        return run_real_mpi(opts, np, command)
    if opts.get("mpi"):
        return run_mpi(opts, np, command)
    return run_gloo(opts, np, command)


if __name__ == "__main__":
    sys.exit(main())
