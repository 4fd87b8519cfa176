"""Simulated `torchrun` for simcluster pods (simulation only), after `torch/distributed/run.py`.

Arguments as torchrun's, each defaulting to its `PET_<NAME>` variable as torch's `env` action
does (the PyTorch operator sets `PET_NNODES`, `PET_NPROC_PER_NODE`, `PET_NODE_RANK`,
`PET_MASTER_ADDR`, `PET_MASTER_PORT`, and with an elastic policy `PET_RDZV_BACKEND`,
`PET_RDZV_ENDPOINT`...): `--nnodes N|MIN:MAX`, `--nproc-per-node` (int, `cpu`, `gpu`, `auto`:
the pod's `nvidia.com/gpu` limit, else the CPUs), `--node-rank`, `--master-addr`,
`--master-port`, `--rdzv-backend` (`static` by default, `c10d`...), `--rdzv-endpoint`,
`--rdzv-id`, `--rdzv-conf k=v,...`, `--standalone`, `--max-restarts`, `--role`, `--tee`,
`--redirects`, `--log-dir`, `--local-ranks-filter`, `--no-python`, `-m`, then the script and
its arguments.

The nodes meet at simcluster's rendezvous (`simcluster/apiserver/rendezvous.py`), keyed by the
master address:port (static) or the rendezvous endpoint (c10d); a single-node launch needs no
one. Static: group rank = `--node-rank`, the world is complete when every node rank has joined,
timeout `timeout` from `--rdzv-conf` (600 s as torch; `join_timeout` is honoured too). c10d:
group ranks follow the hostnames, `join_timeout` (600 s) and `last_call_timeout` (30 s).
A node that does not join fails the others with torch's own errors (`DistStoreError: Timed out
after N seconds waiting for clients. k/N clients joined.` on the master,
`DistNetworkError: The client socket has timed out ...` on the others, `RendezvousTimeoutError`
for c10d).

Then `nproc` local workers run `python -u script args` (the simulator's interpreter, or
`PYTHON_EXEC`) with torchrun's variables: `RANK`, `LOCAL_RANK`, `GROUP_RANK`, `ROLE_RANK`,
`ROLE_NAME`, `LOCAL_WORLD_SIZE`, `WORLD_SIZE`, `GROUP_WORLD_SIZE`, `ROLE_WORLD_SIZE`,
`MASTER_ADDR`, `MASTER_PORT`, `TORCHELASTIC_RESTART_COUNT`, `TORCHELASTIC_MAX_RESTARTS`,
`TORCHELASTIC_RUN_ID`, `TORCHELASTIC_USE_AGENT_STORE`, `TORCH_NCCL_ASYNC_ERROR_HANDLING`,
`OMP_NUM_THREADS`. Their output is theirs (inherited), or with `--tee` prefixed
`[<role><local_rank>]:` as torch's tail does. The first failing worker stops the others; with
restarts left the group restarts (the other nodes see the new round and restart too), else
torchrun prints the `ChildFailedError` summary ("Root Cause (first observed failure)") and exits
1. SIGINT/SIGTERM/SIGHUP stop the workers and end with torch's `SignalException`, exit 1.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from string import Template
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # (the type checker reads the package's modules)
    from . import _kube, _peers, _ranks
else:  # run by path from the wrapper
    import _kube
    import _peers
    import _ranks

ERRORS_DOC = "https://pytorch.org/docs/stable/elastic/errors.html"
RDZV_PATH = "/apis/simcluster.ranks/v1/namespaces/{ns}/rendezvous/{name}"
POLL = 5.0  # seconds a rendezvous request waits at the server
CLOSE_GRACE = 5.0  # SIGTERM -> SIGKILL for workers being stopped
LOOPBACK = re.compile(r"^(localhost(\.localdomain)?|127\.\d+\.\d+\.\d+|::1|0\.0\.0\.0)$")


class Interrupted(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Fatal(Exception):
    """torchrun ends with this exception line (`torch...Error: message`) and exit status 1."""


# -- arguments ---------------------------------------------------------------------------------------


class Env(argparse.Action):
    """A value that defaults to `PET_<DEST>` (torch.distributed.argparse_util.env)."""

    def __init__(self, dest: str, default: Any = None, required: bool = False, **kw: Any) -> None:
        default = os.environ.get(f"PET_{dest.upper()}", default)
        super().__init__(dest=dest, default=default, required=required and not default, **kw)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, values)


class CheckEnv(argparse.Action):
    """A flag that `PET_<DEST>=1` turns on (torch.distributed.argparse_util.check_env)."""

    def __init__(self, dest: str, default: bool = False, **kw: Any) -> None:
        raw = os.environ.get(f"PET_{dest.upper()}", "1" if default else "0").strip()
        super().__init__(dest=dest, const=True, default=bool(int(raw)) if raw.isdigit() else False, nargs=0, **kw)

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        setattr(namespace, self.dest, True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="torchrun", description="Torch Distributed Elastic Training Launcher")
    a = p.add_argument
    a("--nnodes", action=Env, type=str, default="1:1")
    a("--nproc-per-node", "--nproc_per_node", action=Env, type=str, default="1")
    a("--rdzv-backend", "--rdzv_backend", action=Env, type=str, default="static")
    a("--rdzv-endpoint", "--rdzv_endpoint", action=Env, type=str, default="")
    a("--rdzv-id", "--rdzv_id", action=Env, type=str, default="none")
    a("--rdzv-conf", "--rdzv_conf", action=Env, type=str, default="")
    a("--standalone", action=CheckEnv)
    a("--max-restarts", "--max_restarts", action=Env, type=int, default=0)
    a("--monitor-interval", "--monitor_interval", action=Env, type=float, default=0.1)
    a("--start-method", "--start_method", action=Env, type=str, default="spawn",
      choices=["spawn", "fork", "forkserver"])
    a("--event-log-handler", "--event_log_handler", action=Env, type=str, default="null")
    a("--role", action=Env, type=str, default="default")
    a("-m", "--module", action=CheckEnv)
    a("--no-python", "--no_python", action=CheckEnv)
    a("--run-path", "--run_path", action=CheckEnv)
    a("--log-dir", "--log_dir", action=Env, type=str, default=None)
    a("-r", "--redirects", action=Env, type=str, default="0")
    a("-t", "--tee", action=Env, type=str, default="0")
    a("--local-ranks-filter", "--local_ranks_filter", action=Env, type=str, default="")
    a("--node-rank", "--node_rank", type=int, action=Env, default=0)
    a("--master-addr", "--master_addr", default="127.0.0.1", type=str, action=Env)
    a("--master-port", "--master_port", default=29500, type=int, action=Env)
    a("--local-addr", "--local_addr", default=None, type=str, action=Env)
    a("--logs-specs", "--logs_specs", default=None, type=str)
    a("--numa-binding", "--numa_binding", type=str, default=None)
    a("--signals-to-handle", "--signals_to_handle", action=Env, type=str, default="SIGTERM,SIGINT,SIGHUP,SIGQUIT")
    a("training_script", type=str)
    a("training_script_args", nargs=argparse.REMAINDER)
    return p


def min_max_nodes(nnodes: str) -> tuple[int, int]:
    parts = nnodes.split(":")
    if len(parts) == 1:
        return int(parts[0]), int(parts[0])
    if len(parts) == 2:
        return int(parts[0]), int(parts[1])
    raise Fatal(f'RuntimeError: nnodes={nnodes} is not in "MIN:MAX" format')


def rdzv_conf(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise Fatal("ValueError: The rendezvous configuration string must be in format "
                        "<key1>=<value1>,...,<keyN>=<valueN>.")
        out[key.strip()] = value.strip()
    return out


def local_world_size(value: str) -> int:
    if value.strip().isdigit():
        return int(value)
    if value == "cpu":
        return os.cpu_count() or 1
    if value in ("gpu", "auto"):
        gpus = visible_gpus()
        if gpus:
            return gpus
        if value == "gpu":
            raise Fatal("ValueError: Cuda is not available.")
        return os.cpu_count() or 1
    raise Fatal(f"ValueError: Unsupported nproc_per_node value: {value}")


def visible_gpus() -> int:
    """The GPUs this pod has: NVIDIA_/CUDA_VISIBLE_DEVICES, else its `nvidia.com/gpu` limits."""
    for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
        ids = [i for i in os.environ.get(name, "").split(",") if i.strip() and i.strip() not in ("all", "none",
                                                                                                "void")]
        if ids:
            return len(ids)
    try:
        api = _kube.Api.in_pod()
        code, pod = api.request("GET", f"/api/v1/namespaces/{_kube.quote(_kube.namespace())}/pods/"
                                       f"{_kube.quote(_kube.hostname())}", timeout=5)
    except _kube.ApiError:
        return 0
    if code != 200 or not isinstance(pod, dict):
        return 0
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        limit = ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
        with contextlib.suppress(TypeError, ValueError):
            total += int(limit or 0)
    return total


def std_map(value: str, nproc: int) -> dict[int, int]:
    """torch's Std.from_str: `3` for every local rank, or `0:1,1:2` per local rank."""
    value = value.strip()
    if re.fullmatch(r"[0-3]", value):
        return dict.fromkeys(range(nproc), int(value))
    out: dict[int, int] = {}
    for item in value.split(","):
        rank, _, std = item.partition(":")
        if not (rank.strip().isdigit() and std.strip() in ("0", "1", "2", "3")):
            raise Fatal(f"ValueError: {value} does not match: <std> or <rank>:<std>,<rank>:<std>,...")
        out[int(rank)] = int(std)
    return out


def glog(level: str, where: str, message: str) -> None:
    now = datetime.datetime.now()
    head = f"{level}{now:%m%d %H:%M:%S.%f} {os.getpid()} {where}] "
    sys.stderr.write("".join(head + line + "\n" for line in message.split("\n")))
    sys.stderr.flush()


# -- rendezvous --------------------------------------------------------------------------------------


@dataclass
class World:
    group_rank: int
    group_world_size: int
    rank_offset: int
    world_size: int
    master_addr: str
    master_port: int
    round: int = 0
    member: str = ""  # this node's id at the rendezvous ("": a single node, no rendezvous)


@dataclass
class Config:
    min_nodes: int
    max_nodes: int
    nproc: int
    backend: str
    endpoint: str
    run_id: str
    node_rank: int
    master_addr: str
    master_port: int
    conf: dict[str, str]

    def endpoint_host_port(self) -> tuple[str, int]:
        host, _, port = self.endpoint.rpartition(":") if ":" in self.endpoint else (self.endpoint, "", "")
        host = host.strip("[]") or "localhost"
        default = 29400 if self.backend != "static" else -1
        return host, int(port) if port.isdigit() else default

    def timeout(self) -> float:
        keys = ("timeout", "join_timeout") if self.backend == "static" else ("join_timeout",)
        for k in keys:
            with contextlib.suppress(KeyError, ValueError):
                return float(self.conf[k])
        return 600.0


def rendezvous(cfg: Config) -> World:
    host, port = cfg.endpoint_host_port()
    me = _kube.hostname()
    if cfg.backend == "static" and port == -1:
        raise Fatal(f"ValueError: Port is absent in endpoint: {cfg.endpoint}. Try launching with --master_port")
    if cfg.max_nodes == 1:
        if cfg.backend == "static":
            return World(0, 1, 0, cfg.nproc, cfg.master_addr, cfg.master_port)
        return World(0, 1, 0, cfg.nproc, me, port if port > 0 else _free_port())
    api = _kube.Api.in_pod()
    path = rdzv_path(host, port)
    member = uuid.uuid4().hex
    body = {
        "id": member, "host": me, "backend": "static" if cfg.backend == "static" else "c10d",
        "nodeRank": cfg.node_rank if cfg.backend == "static" else None,
        "minNodes": cfg.min_nodes, "maxNodes": cfg.max_nodes, "nproc": cfg.nproc,
        "lastCall": float(cfg.conf.get("last_call_timeout", 30)), "runId": cfg.run_id, "wait": POLL,
    }
    timeout = cfg.timeout()
    deadline = time.monotonic() + timeout
    state: dict[str, Any] = {}
    seen: dict[str, Any] = {}
    joined = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            body["wait"] = min(POLL, max(0.1, left))
            try:
                code, answer = api.request("POST", path, body, timeout=POLL + 15)
            except _kube.ApiError:  # the server is not there yet: retry, as a TCPStore client does
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
                continue
            if code == 409 and joined:
                joined = False  # dropped (e.g. a long pause): join again
                continue
            if code >= 400:
                raise Fatal("torch.distributed.elastic.rendezvous.api.RendezvousError: "
                            + _kube.status_message(answer, code))
            joined = True
            state = answer or {}
            # what this node has seen of its peers (a TCPStore counts the clients that connected)
            seen["joined"] = max(seen.get("joined", 0), int(state.get("mostJoined") or state.get("joined") or 0))
            seen["rank0Joined"] = seen.get("rank0Joined", False) or bool(state.get("rank0Joined"))
            if state.get("complete"):
                addr = str(state.get("masterHost") or host)
                if cfg.backend == "static":
                    addr, mport = cfg.master_addr, cfg.master_port
                else:
                    mport = port if port > 0 else _free_port()
                return World(int(state["groupRank"]), int(state["groupWorldSize"]), int(state["rankOffset"]),
                             int(state["worldSize"]), addr, mport, int(state.get("round") or 0), member)
    except BaseException:
        _leave(api, path, member)
        raise
    _leave(api, path, member)
    raise Fatal(timeout_message(cfg, host, port, timeout, seen))


def rdzv_path(host: str, port: int) -> str:
    """The rendezvous of host:port in our namespace (a loopback address is this pod's own)."""
    key = _kube.hostname() if LOOPBACK.match(host.lower()) else host.rstrip(".")
    return RDZV_PATH.format(ns=_kube.quote(_kube.namespace()), name=_kube.quote(f"{key.lower()}:{port}"))


def timeout_message(cfg: Config, host: str, port: int, timeout: float, state: dict[str, Any]) -> str:
    if cfg.backend != "static":
        return "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"
    joined = int(state.get("joined") or 0)
    if cfg.node_rank == 0:
        return (f"torch.distributed.DistStoreError: Timed out after {int(timeout) + 1} seconds waiting for "
                f"clients. {joined}/{cfg.max_nodes} clients joined.")
    if not state.get("rank0Joined"):
        return (f"torch.distributed.DistNetworkError: The client socket has timed out after {int(timeout * 1000)}ms "
                f"while trying to connect to ({host}, {port}).")
    return ("torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. "
            "Did the remote TCPStore server shutdown or crash?")


def _leave(api: _kube.Api, path: str, member: str) -> None:
    with contextlib.suppress(_kube.ApiError):
        api.request("DELETE", f"{path}?id={member}", timeout=2)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


# -- workers ------------------------------------------------------------------------------------------


@dataclass
class Worker:
    local_rank: int
    rank: int
    proc: subprocess.Popen[bytes]
    code: int | None = None
    failed_at: float = 0.0
    stopped: bool = False  # stopped by torchrun (not a failure of its own)


class Group:
    def __init__(self, cmd: list[str], envs: list[dict[str, str]], std: dict[str, dict[int, int]],
                 ranks_filter: set[int] | None, log_dir: str | None, role: str, run_id: str, attempt: int) -> None:
        template = os.environ.get("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE")
        self.prefixes: dict[int, bytes] = {}
        self.output = _ranks.Output(lambda lr, s: self.prefixes.get(lr, b""))
        self.workers: list[Worker] = []
        self.readers: list[Any] = []
        files: list[Any] = []
        need_dir = any(std["redirects"].values()) or any(std["tee"].values())
        base = None
        if need_dir:
            root = log_dir or tempfile.mkdtemp(prefix="torchelastic_")
            os.makedirs(root, exist_ok=True)
            base = tempfile.mkdtemp(prefix=f"{run_id}_", dir=root)
        try:
            self._start(cmd, envs, std, ranks_filter, base, role, attempt, template, files)
        except BaseException:
            self.close(signal.SIGKILL)
            raise
        finally:
            for f in files:
                f.close()  # the children have them

    def _start(self, cmd: list[str], envs: list[dict[str, str]], std: dict[str, dict[int, int]],
               ranks_filter: set[int] | None, base: str | None, role: str, attempt: int, template: str | None,
               files: list[Any]) -> None:
        for lr, env in enumerate(envs):
            rank = int(env["RANK"])
            if template:
                prefix = Template(template).safe_substitute(role_name=role, rank=rank, local_rank=lr)
            else:
                prefix = f"[{role}{lr}]:"
            self.prefixes[lr] = prefix.encode()
            streams: dict[int, Any] = {}
            pumps: list[tuple[int, Any]] = []
            for stream in (1, 2):
                redirect = std["redirects"].get(lr, 0) in (stream, 3)
                tee = std["tee"].get(lr, 0) in (stream, 3)
                hidden = ranks_filter is not None and lr not in ranks_filter
                target_file = None
                if (redirect or tee) and base is not None:
                    d = os.path.join(base, f"attempt_{attempt}", str(lr))
                    os.makedirs(d, exist_ok=True)
                    target_file = open(os.path.join(d, "stdout.log" if stream == 1 else "stderr.log"), "wb")  # noqa: SIM115
                    files.append(target_file)
                if tee and not hidden:
                    streams[stream] = subprocess.PIPE
                    pumps.append((stream, target_file))
                elif target_file is not None:
                    streams[stream] = target_file
                elif hidden:
                    streams[stream] = subprocess.DEVNULL
                else:
                    streams[stream] = None  # inherited: the worker's own output
            full_env = dict(os.environ)
            full_env.update(env)
            proc = subprocess.Popen(cmd, env=full_env, stdin=subprocess.DEVNULL, stdout=streams[1],
                                    stderr=streams[2], process_group=0)
            self.workers.append(Worker(lr, rank, proc))
            for stream, copy_to in pumps:
                pipe = proc.stdout if stream == 1 else proc.stderr
                self.readers.append(_start_pump(self.output, lr, stream, pipe, copy_to))

    def poll(self) -> list[Worker]:
        """Workers that failed so far (and record every exit)."""
        now = time.monotonic()
        for w in self.workers:
            if w.code is None:
                rc = w.proc.poll()
                if rc is not None:
                    w.code = rc
                    w.failed_at = now if rc != 0 and not w.stopped else 0.0
        return [w for w in self.workers if w.code not in (None, 0) and not w.stopped]

    def done(self) -> bool:
        return all(w.code is not None for w in self.workers)

    def close(self, sig: int = signal.SIGTERM) -> None:
        """Stop the workers still running: `sig`, SIGKILL after CLOSE_GRACE."""
        live = [w for w in self.workers if w.proc.poll() is None]
        for w in live:
            w.stopped = True
            with contextlib.suppress(OSError):
                os.killpg(w.proc.pid, sig)
        deadline = time.monotonic() + CLOSE_GRACE
        for w in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                w.proc.wait(max(0.0, deadline - time.monotonic()))
        for w in live:
            if w.proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.killpg(w.proc.pid, signal.SIGKILL)
                w.proc.wait()

    def join_output(self) -> None:
        for t in self.readers:
            t.join(2)
        for w in self.workers:
            self.output.flush(w.local_rank)


def _start_pump(output: _ranks.Output, lr: int, stream: int, pipe: Any, copy_to: Any) -> Any:
    """Copy a worker's stream to the console with its prefix (and to its log file)."""
    import threading

    def pump() -> None:
        fd = pipe.fileno()
        sink = open(copy_to.name, "ab") if copy_to is not None else None  # noqa: SIM115
        try:
            while True:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    break
                if not data:
                    break
                output.feed(lr, stream, data)
                if sink is not None:
                    sink.write(data)
                    sink.flush()
        finally:
            if sink is not None:
                sink.close()
            pipe.close()

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    return t


# -- failures -----------------------------------------------------------------------------------------


def child_failed(name: str, failures: list[Worker], host: str) -> str:
    """torch's ChildFailedError.format_msg: the failures and the root cause (the first)."""
    root = min(failures, key=lambda w: (w.failed_at, w.rank))
    blocks: list[tuple[Worker, str]] = []
    for idx, w in enumerate(sorted(failures, key=lambda w: w.rank)):
        code = w.code if w.code is not None else 1
        if code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = "<N/A>"
            message = f"Signal {-code} ({sig}) received by PID {w.proc.pid}"
        else:
            message = f"To enable traceback see: {ERRORS_DOC}"
        when = datetime.datetime.now() - datetime.timedelta(seconds=time.monotonic() - w.failed_at)
        blocks.append((w, "\n".join([
            f"[{idx}]:",
            f"  time      : {when.replace(microsecond=0).isoformat(sep='_')}",
            f"  host      : {host}",
            f"  rank      : {w.rank} (local_rank: {w.local_rank})",
            f"  exitcode  : {code} (pid: {w.proc.pid})",
            "  error_file: <N/A>",
            f"  traceback : {message}",
        ])))
    title = f"{name} FAILED"
    width = min(60, max([len(title)] + [len(ln) for _, b in blocks for ln in b.split("\n")]))
    others = [b for w, b in blocks if w is not root] or ["  <NO_OTHER_FAILURES>"]
    root_block = next(b for w, b in blocks if w is root)
    return "\n".join(["", "=" * width, title, "-" * width, "Failures:", *others, "-" * width,
                      "Root Cause (first observed failure):", root_block, "=" * width])


# -- main ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)

    def on_signal(signum: int, frame: object) -> None:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # one is enough: stop what we started
        raise Interrupted(signum)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        return run(args)
    except Fatal as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return 1
    except Interrupted as exc:
        print(f"torch.distributed.elastic.multiprocessing.api.SignalException: Process {os.getpid()} got "
              f"signal: {exc.signum}", file=sys.stderr, flush=True)
        return 1


def run(args: argparse.Namespace) -> int:
    if args.standalone:
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    try:
        min_nodes, max_nodes = min_max_nodes(args.nnodes)
    except ValueError:
        raise Fatal(f"ValueError: invalid literal for int() with base 10: '{args.nnodes}'") from None
    if not 0 < min_nodes <= max_nodes:
        raise Fatal("AssertionError")
    nproc = local_world_size(str(args.nproc_per_node))
    if "OMP_NUM_THREADS" not in os.environ and nproc > 1:
        glog("W", "torch/distributed/run.py:793", "\n*****************************************\n"
             "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your "
             "system being overloaded, please further tune the variable for optimal performance in your "
             "application as needed. \n*****************************************")
        os.environ["OMP_NUM_THREADS"] = "1"
    endpoint = args.rdzv_endpoint
    if args.rdzv_backend == "static" and not endpoint:
        endpoint = f"{args.master_addr}:{args.master_port}"
    cfg = Config(min_nodes, max_nodes, nproc, args.rdzv_backend, endpoint, args.rdzv_id, int(args.node_rank),
                 args.master_addr, int(args.master_port), rdzv_conf(args.rdzv_conf))
    if args.no_python and args.module:
        raise Fatal("ValueError: Don't use both the '--no-python' flag and the '--module' flag at the same time.")
    if args.no_python:
        cmd = [args.training_script, *args.training_script_args]
        name = args.training_script
    else:
        python = os.environ.get("PYTHON_EXEC", sys.executable)
        cmd = [python, "-u", *(["-m"] if args.module else []), args.training_script, *args.training_script_args]
        name = args.training_script
    std = {"redirects": std_map(args.redirects, nproc), "tee": std_map(args.tee, nproc)}
    ranks_filter = None
    if args.local_ranks_filter:
        try:
            ranks_filter = {int(r) for r in args.local_ranks_filter.split(",")}
        except ValueError:
            raise Fatal("ValueError: --local_ranks_filter must be a comma-separated list of integers e.g. "
                        "--local_ranks_filter=0,1,2") from None
    max_restarts = int(args.max_restarts)
    remaining = max_restarts
    restart = 0
    host = _kube.hostname()
    world: World | None = None
    while True:
        if world is None or cfg.backend != "static":  # a static rendezvous is not repeated
            world = rendezvous(cfg)
        envs = [{
            "LOCAL_RANK": str(lr), "RANK": str(world.rank_offset + lr), "GROUP_RANK": str(world.group_rank),
            "ROLE_RANK": str(world.rank_offset + lr), "ROLE_NAME": args.role, "LOCAL_WORLD_SIZE": str(nproc),
            "WORLD_SIZE": str(world.world_size), "GROUP_WORLD_SIZE": str(world.group_world_size),
            "ROLE_WORLD_SIZE": str(world.world_size), "MASTER_ADDR": world.master_addr,
            "MASTER_PORT": str(world.master_port), "TORCHELASTIC_RESTART_COUNT": str(restart),
            "TORCHELASTIC_MAX_RESTARTS": str(max_restarts), "TORCHELASTIC_RUN_ID": cfg.run_id,
            "TORCHELASTIC_USE_AGENT_STORE": str(cfg.backend == "static"),
            "TORCH_NCCL_ASYNC_ERROR_HANDLING": os.environ.get("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        } for lr in range(nproc)]
        if "OMP_NUM_THREADS" in os.environ:
            for e in envs:
                e["OMP_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]
        watch = None
        if world.member:  # several nodes: learn of a peer's death as the collectives would
            peer_file = _peers.new_peer_file()
            for e in envs:
                e[_peers.PEER_FILE] = peer_file
            watch = _peers.Watch(rdzv_path(*cfg.endpoint_host_port()), world.round, world.member, peer_file,
                                 later=cfg.backend != "static")
        try:
            outcome, failures = run_group(cmd, envs, std, ranks_filter, args, cfg, world, restart, watch,
                                          final=remaining == 0)
        finally:
            if watch is not None:
                watch.stop()
                _peers.remove_peer_file(watch.peer_file)
        if outcome == "succeeded":
            return 0
        if outcome == "membership":
            glog("I", "torch/distributed/elastic/agent/server/api.py:913",
                 f"[{args.role}] Detected new nodes from group_rank={world.group_rank}; will restart worker group")
            restart += 1
            continue
        if remaining > 0:
            glog("W", "torch/distributed/elastic/agent/server/api.py:894",
                 f"[{args.role}] Worker group FAILED. {remaining}/{max_restarts} attempts left; will restart "
                 "worker group")
            remaining -= 1
            restart += 1
            continue
        for w in failures:
            glog("E", "torch/distributed/elastic/multiprocessing/api.py:882",
                 f"failed (exitcode: {w.code}) local_rank: {w.local_rank} (pid: {w.proc.pid}) of binary: {cmd[0]}")
        print("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "
              + child_failed(name, failures, host), file=sys.stderr, flush=True)
        return 1


def run_group(cmd: list[str], envs: list[dict[str, str]], std: dict[str, dict[int, int]],
              ranks_filter: set[int] | None, args: argparse.Namespace, cfg: Config, world: World, restart: int,
              watch: _peers.Watch | None, *, final: bool) -> tuple[str, list[Worker]]:
    """Start the workers and wait for them (see `monitor`); a node that gives up (`final`, or a
    signal) tells its peers at the rendezvous first."""
    try:
        group = Group(cmd, envs, std, ranks_filter, args.log_dir, args.role, cfg.run_id, restart)
    except FileNotFoundError as exc:
        raise Fatal(f"FileNotFoundError: [Errno 2] No such file or directory: '{exc.filename}'") from None

    reports: list[Any] = []  # (the threads telling the round: joined before this node goes on or ends)

    def tell_peers(rank: int, local_rank: int, code: int) -> None:
        if world.member:
            reports.append(_peers.report_failure_soon(rdzv_path(*cfg.endpoint_host_port()), world.member,
                                                      world.round, rank, local_rank, code))

    try:
        try:
            outcome, failures = monitor(group, cfg, world, float(args.monitor_interval), watch,
                                        tell_peers if final else None)
        except Interrupted as exc:
            first = group.workers[0] if group.workers else None
            if first is not None:
                tell_peers(first.rank, first.local_rank, -exc.signum)
            group.close(exc.signum)
            group.join_output()
            raise
    finally:
        for thread in reports:
            thread.join(_peers.REPORT_WITHIN + 15)
    group.join_output()
    return outcome, failures


def monitor(group: Group, cfg: Config, world: World, interval: float, watch: _peers.Watch | None,
            tell_peers: Any = None) -> tuple[str, list[Worker]]:
    """Wait for the group: ("succeeded", []), ("failed", failures; the others are stopped) or
    ("membership", []) when another node waits at a later c10d round. `tell_peers(rank, local
    rank, exit code)`, when given, reports the first failure to the other nodes before the
    workers left here are stopped."""
    while True:
        failed = group.poll()
        if failed:
            if tell_peers is not None:
                root = min(failed, key=lambda w: (w.failed_at, w.rank))
                tell_peers(root.rank, root.local_rank, root.code if root.code is not None else 1)
            group.close()
            group.poll()
            return "failed", failed
        if group.done():
            return "succeeded", []
        if watch is not None and watch.later_round:
            group.close()
            return "membership", []
        time.sleep(max(0.02, interval))


if __name__ == "__main__":
    sys.exit(main())
