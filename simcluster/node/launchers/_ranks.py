"""Starting ranks on hosts the way an MPI launcher does, for the simulated `mpirun`/`horovodrun`.

- Hosts: `-H host[:slots],...`, Open MPI hostfiles (`host slots=N`, `#` comments), placed over
  slots in order (`--map-by slot`) or round-robin (`--map-by node`).
- Where a host runs: `<pod>.<subdomain>.<ns>.svc[.<domain>]` is pod `<pod>` in `<ns>`;
  `<pod>[.<subdomain>]` a pod of the launcher's namespace; `localhost`, `127.*` and the
  launcher's own hostname run here, as child processes (own process group, same session).
- Remote ranks start through the API server's `pods/exec` with the pod's token, as
  `sh -c 'cd <dir>; export K=V...; exec "$@"' sh <command...>`: the worker container's
  environment plus the launcher's variables, in the launcher's working directory when the worker
  has it (mpirun's `-wdir` default), else the worker's `/workspace`. A worker that does not run
  yet is tried once a second, as often as ssh's `ConnectionAttempts` in `OMPI_MCA_plm_rsh_args`
  (the MPI operator's `-o ConnectionAttempts=10`), so a launcher started with its workers waits.
- Output: each rank's stdout and stderr are cut into lines and written whole to the launcher's
  stdout and stderr, with the launcher's prefix (`tag(rank, stream)`).
- Stopping: the first failing rank stops the others (`stop_on_failure`); SIGINT, SIGTERM and
  SIGHUP stop every rank. A remote rank stops when its exec stream is dropped (the API server
  kills the command), a local one with SIGTERM then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
import time

TYPE_CHECKING = False  # (not typing's: importing it costs a launch ~3 ms)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO

if TYPE_CHECKING or __package__:  # (the type checker reads the package's modules)
    from . import _kube
else:  # run by path from the wrapper
    import _kube

LOOPBACK = re.compile(r"^(localhost(\.localdomain)?|127\.\d+\.\d+\.\d+|::1|ip6-localhost)$")
SVC = re.compile(r"^(?P<pod>[^.]+)\.(?P<sub>[^.]+)\.(?P<ns>[^.]+)\.svc(\..*)?$")
LOCAL_KILL_GRACE = 2.0
# a worker not running yet (not scheduled, container not started): worth another attempt
NOT_READY = re.compile(r"does not have a host assigned|container not found|pod does not exist|"
                       r"unable to upgrade connection|is waiting to start")
RSH_ARGS = "OMPI_MCA_plm_rsh_args"
# Open MPI's MCA parameters in the environment (lower-case names are Open MPI's own spelling)
DEFAULT_HOSTFILE = "OMPI_MCA_orte_default_hostfile"
DEFAULT_SLOTS = "OMPI_MCA_orte_set_default_slots"


class LaunchError(Exception):
    """The launch cannot start (the launcher prints `message` and exits with `code`)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# -- hosts and slots -------------------------------------------------------------------------------


class Host:
    __slots__ = ("name", "slots")

    def __init__(self, name: str, slots: int) -> None:
        self.name = name
        self.slots = slots


def parse_host_list(text: str, *, default_slots: int = 1, need_slots: bool = False) -> list[Host]:
    """`a,b:2,a` -> hosts in first-seen order with their slots summed (`need_slots`: horovod's
    `host:slots` form only)."""
    hosts: dict[str, Host] = {}
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        name, sep, slots = item.rpartition(":") if ":" in item else (item, "", "")
        if need_slots and (not sep or not slots.isdigit() or not re.match(r"^[\w.-]+$", name)):
            raise LaunchError("Invalid host input, please make sure it has format as : worker-0:2,worker-1:2.")
        if sep and not slots.isdigit():
            raise LaunchError(f'invalid host "{item}"')
        n = int(slots) if sep else default_slots
        if name in hosts:
            hosts[name].slots += n
        else:
            hosts[name] = Host(name, n)
    return list(hosts.values())


def parse_hostfile(path: str, *, default_slots: int = 1) -> list[Host]:
    """An Open MPI hostfile: `host [slots=N] [max_slots=M]` per line; `#` starts a comment."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    hosts: dict[str, Host] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, *opts = line.split()
        if ":" in name:  # Intel MPI / MPICH style host:slots
            name, _, n = name.partition(":")
            slots = int(n) if n.isdigit() else default_slots
        else:
            slots = default_slots
        for opt in opts:
            key, _, value = opt.partition("=")
            if key in ("slots", "cpu", "count") and value.isdigit():
                slots = int(value)
        if name in hosts:
            hosts[name].slots += slots
        else:
            hosts[name] = Host(name, slots)
    return list(hosts.values())


def find_hostfile(path: str) -> str | None:
    """The hostfile as it can be opened here (an in-pod path is tried under the pod root too)."""
    return _kube.pod_file(path)


class Slot:
    """A rank's place: its host, its local rank there, horovod's cross rank."""

    __slots__ = ("cross_rank", "cross_size", "host", "local_rank", "local_size", "node_index", "rank")

    def __init__(self, rank: int, host: str, local_rank: int = 0, local_size: int = 1, node_index: int = 0) -> None:
        self.rank = rank
        self.host = host
        self.local_rank = local_rank
        self.local_size = local_size
        self.node_index = node_index  # the host's index among the hosts that got ranks
        self.cross_rank = 0  # the host's index among the hosts that have this local rank
        self.cross_size = 1


def place(hosts: list[Host], np: int, *, by_node: bool = False, per_node: int | None = None) -> list[Slot]:
    """Ranks 0..np-1 over the hosts' slots: fill each host in order, or round-robin by node."""
    caps = [min(h.slots, per_node) if per_node else h.slots for h in hosts]
    counts = [0] * len(hosts)
    order: list[int] = []
    if by_node:
        while len(order) < np and any(c < cap for c, cap in zip(counts, caps, strict=True)):
            for i in range(len(hosts)):
                if len(order) < np and counts[i] < caps[i]:
                    order.append(i)
                    counts[i] += 1
    else:
        for i in range(len(hosts)):
            while len(order) < np and counts[i] < caps[i]:
                order.append(i)
                counts[i] += 1
    used = sorted(set(order))
    slots: list[Slot] = []
    local: dict[int, int] = {}
    for rank, i in enumerate(order):
        lr = local.get(i, 0)
        local[i] = lr + 1
        slots.append(Slot(rank, hosts[i].name, lr, counts[i], used.index(i)))
    # horovod's cross rank: a host's index among the hosts that have this local rank
    by_local: dict[int, list[str]] = {}
    for s in slots:
        by_local.setdefault(s.local_rank, [])
        if s.host not in by_local[s.local_rank]:
            by_local[s.local_rank].append(s.host)
    for s in slots:
        peers = by_local[s.local_rank]
        s.cross_rank, s.cross_size = peers.index(s.host), len(peers)
    return slots


def total_slots(hosts: list[Host]) -> int:
    return sum(h.slots for h in hosts)


# -- where a host runs -----------------------------------------------------------------------------


class Target:
    """Where a host's ranks run: here (`local`), or in pod `namespace`/`pod`."""

    __slots__ = ("local", "namespace", "pod")

    def __init__(self, local: bool, namespace: str = "", pod: str = "") -> None:
        self.local = local
        self.namespace = namespace
        self.pod = pod

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Target) and (self.local, self.namespace, self.pod) == (
            other.local, other.namespace, other.pod)

    def __hash__(self) -> int:
        return hash((self.local, self.namespace, self.pod))

    def __repr__(self) -> str:
        return f"Target(local={self.local}, namespace={self.namespace!r}, pod={self.pod!r})"


def target(host: str, my_namespace: str, my_hostname: str) -> Target:
    name = host.strip().rstrip(".").lower()
    me = my_hostname.lower()
    if LOOPBACK.match(name) or name == me or name.split(".", 1)[0] == me:
        return Target(True)
    m = SVC.match(name)
    if m:
        return Target(False, m.group("ns"), m.group("pod"))
    return Target(False, my_namespace, name.split(".", 1)[0])


# -- output -----------------------------------------------------------------------------------------


class Output:
    """Whole lines of every rank onto the launcher's stdout/stderr, each with its prefix."""

    def __init__(self, tag: Callable[[int, int], bytes], fds: tuple[int, int] = (1, 2)) -> None:
        self.tag = tag
        self.fds = {_kube.STDOUT: fds[0], _kube.STDERR: fds[1]}
        self.partial: dict[tuple[int, int], bytes] = {}
        self.lock = threading.Lock()
        self.broken = False

    def feed(self, rank: int, stream: int, data: bytes) -> None:
        key = (rank, stream)
        with self.lock:
            buf = self.partial.get(key, b"") + data
            cut = buf.rfind(b"\n") + 1
            self.partial[key] = buf[cut:]
            if cut:
                self._write(stream, rank, buf[:cut])

    def flush(self, rank: int) -> None:
        with self.lock:
            for stream in (_kube.STDOUT, _kube.STDERR):
                rest = self.partial.pop((rank, stream), b"")
                if rest:
                    self._write(stream, rank, rest + b"\n")

    def _write(self, stream: int, rank: int, lines: bytes) -> None:
        prefix = self.tag(rank, stream)
        if prefix:
            lines = b"".join(prefix + ln for ln in lines.splitlines(keepends=True))
        write_all(self.fds[stream], lines)

    def text(self, stream: int, message: str) -> None:
        """A launcher message (whole lines, no prefix)."""
        with self.lock:
            write_all(self.fds[stream], message.encode() + (b"" if message.endswith("\n") else b"\n"))


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            time.sleep(0.005)
            continue
        except OSError:  # the terminal or pipe went away: nothing left to show it to
            return
        view = view[n:]


# -- ranks ------------------------------------------------------------------------------------------


class Rank:
    """One rank of a launch and how it ended."""

    def __init__(self, slot: Slot, target: Target, env: dict[str, str]) -> None:
        self.slot = slot
        self.target = target
        self.env = env  # what the launcher adds to the rank's environment
        self.code: int | None = None  # exit status (128 + N for a signal)
        self.finished = 0.0
        self.pid = 0
        self.start_error = ""  # the rank could not be started (unknown pod, refused exec...)
        self.start_code = 0  # the HTTP status of that refusal (0: the API server was not reached)
        self.not_found = False  # the executable does not exist
        self.killed = False  # stopped by the launcher
        self.lost = False  # the stream ended without an exit status
        self.stream: _kube.ExecStream | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.thread: threading.Thread | None = None

    @property
    def failed(self) -> bool:
        return not self.killed and (bool(self.start_error) or (self.code is not None and self.code != 0))


class Launch:
    """Start `command` once per slot, merge the output, stop everything on failure or signal."""

    def __init__(self, slots: list[Slot], command: list[str], env_for: Callable[[Slot], dict[str, str]],
                 output: Output, *, workdir: str | None = None, stop_on_failure: bool = True) -> None:
        self.command = command
        self.output = output
        self.stop_on_failure = stop_on_failure
        self.cwd = workdir or os.getcwd()
        self.api: _kube.Api | None = None
        self.my_ns = _kube.namespace()
        self.my_host = _kube.hostname()
        self.ranks = [Rank(s, target(s.host, self.my_ns, self.my_host), env_for(s)) for s in slots]
        self.changed = threading.Condition()
        self.stopping = False
        self.signal: int | None = None

    # -- running ----------------------------------------------------------------------------------
    def run(self) -> list[Rank]:
        if any(not r.target.local for r in self.ranks):
            self.api = _kube.Api.in_pod()
        old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        try:
            for r in self.ranks:
                r.thread = threading.Thread(target=self._run_rank, args=(r,), daemon=True)
                r.thread.start()
            with self.changed:
                while not all(r.thread is not None and not r.thread.is_alive() for r in self.ranks):
                    if not self.stopping and (self.signal is not None or (
                            self.stop_on_failure and any(r.failed for r in self.ranks))):
                        self._stop_all()
                    self.changed.wait(0.1)
            for r in self.ranks:
                if r.thread is not None:
                    r.thread.join()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        return self.ranks

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.signal is None:
            self.signal = signum

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def _stop_all(self) -> None:
        self.stopping = True
        for r in self.ranks:
            if r.code is None and not r.start_error:
                r.killed = True
            if r.stream is not None:
                r.stream.abort()
            if r.proc is not None and r.proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(r.proc.pid, signal.SIGTERM)
                timer = threading.Timer(LOCAL_KILL_GRACE, _kill_group, (r.proc,))
                timer.daemon = True
                timer.start()

    def _run_rank(self, r: Rank) -> None:
        try:
            if r.target.local:
                self._run_local(r)
            else:
                self._run_remote(r)
        except Exception as exc:  # a rank must always end with a result
            if r.code is None and not r.start_error:
                r.start_error = f"{type(exc).__name__}: {exc}"
        finally:
            r.finished = time.monotonic()
            self.output.flush(r.slot.rank)
            self._notify()

    def _run_local(self, r: Rank) -> None:
        if self.stopping:
            r.killed = True
            return
        env = dict(os.environ)
        env.update(r.env)
        try:
            proc = subprocess.Popen(self.command, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0)
        except FileNotFoundError:
            r.code, r.not_found = 127, True
            return
        except OSError as exc:
            r.start_error = f"{self.command[0]}: {exc.strerror or exc}"
            return
        r.proc, r.pid = proc, proc.pid
        if self.stopping:
            _kill_group(proc)
        assert proc.stdout is not None and proc.stderr is not None
        err_reader = threading.Thread(target=self._pump, args=(r, _kube.STDERR, proc.stderr), daemon=True)
        err_reader.start()
        self._pump(r, _kube.STDOUT, proc.stdout)
        err_reader.join()
        rc = proc.wait()
        r.code = 128 - rc if rc < 0 else rc

    def _pump(self, r: Rank, stream: int, pipe: IO[bytes]) -> None:
        fd = pipe.fileno()
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            self.output.feed(r.slot.rank, stream, data)
        with contextlib.suppress(OSError):
            pipe.close()

    def _run_remote(self, r: Rank) -> None:
        assert self.api is not None
        argv = ["sh", "-c", self.remote_script(r.env), "sh", *self.command]
        container = ""
        attempts = connection_attempts()
        while True:
            if self.stopping:
                r.killed = True
                return
            attempts -= 1
            try:
                r.stream = self.api.exec(r.target.namespace, r.target.pod, argv, container)
            except _kube.ApiError as exc:
                # several containers: take the first, as kubectl exec does without -c
                m = re.search(r"choose one of: \[([^\] ]+)", exc.message)
                if exc.code == 400 and m and not container:
                    container = m.group(1)
                    attempts += 1
                    continue
                if attempts > 0 and NOT_READY.search(exc.message):
                    time.sleep(1.0)
                    continue
                r.start_error, r.start_code = exc.message, exc.code
                return
            except OSError as exc:
                r.start_error = str(exc)
                return
            stream = r.stream
            if self.stopping:
                stream.abort()
            output = False
            for channel, data in stream.frames():
                if channel in (_kube.STDOUT, _kube.STDERR):
                    output = True
                    self.output.feed(r.slot.rank, channel, data)
            code = _kube.exit_code(stream.status)
            if code is not None:
                r.code = code
                r.not_found = code == 127
                return
            message = _kube.status_message(stream.status, 500) if stream.status is not None else ""
            if message and not output and attempts > 0 and NOT_READY.search(message) and not self.stopping:
                time.sleep(1.0)  # refused after the upgrade (v5): the worker is not running yet
                continue
            if message and not r.killed:
                r.start_error = message
            else:
                r.lost = not r.killed
                r.code = 255 if not r.killed else None
            return

    def remote_script(self, env: dict[str, str]) -> str:
        """cd to the launcher's directory (as the pod sees it) or the worker's workspace, export
        the launcher's variables, exec the command."""
        here = _kube.in_pod_path(self.cwd)
        if _kube.pod_root() is not None:  # pods without a mount namespace: paths under $HOME
            dirs = ['"$HOME"' + shlex.quote(here.rstrip("/") or "/"), shlex.quote(here), "/workspace",
                    '"$HOME"/workspace']
        else:
            dirs = [shlex.quote(here), "/workspace", '"$HOME"/workspace']
        cd = " || ".join(f"cd {d} 2>/dev/null" for d in dirs)
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        return f"{{ {cd}; }}; " + (f"export {exports}; " if exports else "") + 'exec "$@"'

    def first_failure(self) -> Rank | None:
        failed = [r for r in self.ranks if r.failed]
        return min(failed, key=lambda r: (r.finished, r.slot.rank)) if failed else None


def connection_attempts() -> int:
    """How often a worker is tried: ssh's ConnectionAttempts in the rsh agent's arguments (the MPI
    operator sets `-o ConnectionAttempts=10`, one attempt a second while workers start), else 1."""
    m = re.search(r"ConnectionAttempts[= ](\d+)", os.environ.get(RSH_ARGS, ""))
    return max(1, int(m.group(1))) if m else 1


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)


def signal_name(code: int) -> tuple[int, str]:
    """(N, description) for an exit status 128 + N."""
    n = code - 128
    try:
        return n, signal.strsignal(n) or f"Signal {n}"
    except ValueError:
        return n, f"Signal {n}"
