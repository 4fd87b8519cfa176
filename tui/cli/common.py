"""What the `ranks` commands share.

- errors and exit codes: `UserError`, `error` (print one line, return the code), `fail` (print
  one line, exit), `user_error` (a `sessions` error as a `UserError`);
- `run`: the asyncio runner of a command's body, which turns every failure into one line on
  stderr and its documented exit code;
- `configure`, `resolve_project`: the connection's settings and a project name -> its namespace;
- `read_only_reason`, `read_only_refusal`: read-only mode (the flag or the config file) refusing
  an action; `confirm`: a yes/no question on the terminal;
- `load_monitor`, `locate`: list what a command needs once (no watch) with GPU metrics read once,
  and find the workload a command names with a monitor that listed it;
- the printers: kubectl-style tables (aligned columns, no borders; widths in terminal cells),
  JSON/YAML. Cells are plain text sanitised by `monitors.sanitize.clean`; colour (status only) is
  added when stdout is a terminal and NO_COLOR is unset.

Exit codes: 0 ok, 1 failed, 2 usage, 3 no/invalid kubeconfig, context or config file (or a failing
exec credential plugin), 4 server unreachable or silent (--request-timeout), 5 TLS failure, 6 unauthorized, 7 forbidden, 8 not found, 130 interrupted.

Light at import (it is on the path of `ranks --help`): what needs aiohttp, the monitor, YAML...
is imported inside the function that uses it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from monitors.connection import ClusterConfig, ExitCode
from monitors.humanize import age, gpus, mib, percent
from monitors.sanitize import clean

if TYPE_CHECKING:
    from monitors.kube import KubeClient
    from monitors.model_views import NodeView, ProjectView, WorkloadView
    from monitors.monitor import Monitor
    from monitors.records import EventRec
    from sessions.errors import SessionError

STATUS_COLOURS = {
    "Running": "32", "Succeeded": "36", "Failed": "31", "Degraded": "33", "Pending": "33",
    "Restarting": "33", "Suspended": "90", "CrashLoopBackOff": "31", "Error": "31", "OOMKilled": "31",
}


# -- errors and exit codes -----------------------------------------------------------------------------

class UserError(Exception):
    """What a command reports as `ranks: error: MESSAGE` with its exit code."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


_SCHEME_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{6,}")
_NAMED_CREDENTIAL = re.compile(r"(?i)\b(token|password|client-key-data|authorization|x-api-key)"
                               r"([\"']?\s*[:=]\s*[\"']?)(?!\s)(?!bearer\b|basic\b)[^\s\"',}]{4,}")


def redact(message: str) -> str:
    """`message` with what looks like a credential replaced by <redacted>: `Bearer X`, `Basic X`,
    `token: X`, `password=X`, `client-key-data: X`, `Authorization: X` (an error can quote a request,
    a kubeconfig or a credential plugin's output)."""
    message = _SCHEME_CREDENTIAL.sub(r"\1\2<redacted>", message)
    return _NAMED_CREDENTIAL.sub(r"\1\2<redacted>", message)


def error(message: str, code: int) -> int:
    """Print `ranks: error: MESSAGE` on stderr (credentials redacted); the exit code, to return.
    MESSAGE is sanitised (`clean`): what it echoes of the command line or the cluster (an ESC, a
    newline, a bidi control in a name) cannot change the terminal or make a second line."""
    from .door import scrub  # (over the SSH door: none of the server's paths)

    print(f"ranks: error: {clean(redact(scrub(message)), limit=2000)}", file=sys.stderr)
    return int(code)


def fail(message: str, code: int = ExitCode.ERROR) -> NoReturn:
    """Print `ranks: error: MESSAGE` on stderr (credentials redacted, sanitised) and exit; never a
    traceback."""
    error(message, code)
    sys.exit(int(code))


def user_error(exc: SessionError) -> UserError:
    """A `sessions` error as the command line reports it (its code, if it is a documented one)."""
    try:
        code = ExitCode(exc.code)
    except ValueError:
        code = ExitCode.ERROR
    return UserError(exc.message, code)


# -- running a command -----------------------------------------------------------------------------------

def configure(cfg: ClusterConfig, opts: dict[str, Any]) -> ClusterConfig:
    """The command line's settings that go with the connection (--request-timeout, --namespace)."""
    if opts.get("namespace"):
        cfg.namespace = str(opts["namespace"])
    timeout = opts.get("request_timeout")
    if timeout is not None:
        cfg.request_timeout = float(timeout) or None  # 0: no limit
    return cfg


INTERRUPT_GRACE = 5.0  # seconds a reading command may take to wind down after Ctrl-C


def _run_interruptible(main: Awaitable[int], grace: float) -> int:
    """`main` on a new event loop, as `asyncio.run`, except that Ctrl-C is bounded: the first one
    cancels it (it winds down: streams closed, what was read printed) and, if that has not ended
    the process `grace` seconds later, it ends anyway (exit 130), as a second Ctrl-C does at once.
    For commands that only read or whose remote commands end with their connections (`logs -f`,
    `exec`): nothing of theirs is left half-done in the cluster by ending early."""
    import asyncio
    import signal
    import threading

    def leave(why: str) -> None:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            print(f"ranks: interrupted ({why})", file=sys.stderr, flush=True)
        os._exit(ExitCode.INTERRUPTED)

    task: asyncio.Task[int] | None = None
    hits = 0

    async def wrapper() -> int:
        nonlocal task
        task = asyncio.current_task()
        return await main

    with asyncio.Runner() as runner:
        loop = runner.get_loop()

        def on_sigint(_signum: int, _frame: Any) -> None:
            nonlocal hits
            hits += 1
            if hits == 1 and task is not None and not task.done():
                loop.call_soon_threadsafe(task.cancel)
                timer = threading.Timer(grace, leave, (f"it had not wound down {grace:g}s after Ctrl-C",))
                timer.daemon = True
                timer.start()
                return
            leave("Ctrl-C again")

        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started to ignore Ctrl-C (`cmd &` in a script): it does
            return runner.run(wrapper())
        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            return runner.run(wrapper())
        except asyncio.CancelledError:
            if hits:
                raise KeyboardInterrupt from None
            raise
        finally:
            signal.signal(signal.SIGINT, previous)


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def run(opts: dict[str, Any], body: Callable[[ClusterConfig], Awaitable[int]], *,
        interrupt_grace: float | None = None) -> int:
    """`body` on the cluster of `opts` (kubeconfig, context, request timeout), in a new event
    loop: its exit code, or the failure's as one line on stderr. `interrupt_grace`: Ctrl-C ends
    the command within that many seconds (`_run_interruptible`); without it, the body winds down
    in its own time (a submit removing what it created)."""
    import asyncio

    from monitors.connection import ConnectionProblem, load_cluster_config
    from monitors.kube import ApiProblem
    from monitors.names import LookupProblem
    from monitors.state_dir import PrivateDirError

    try:
        from .options import impersonation

        check_config_file()
        cfg = configure(load_cluster_config(opts.get("kubeconfig"), opts.get("context"), **impersonation(opts)), opts)
        if interrupt_grace is not None and threading_main():
            return _run_interruptible(body(cfg), interrupt_grace)
        return asyncio.run(body(cfg))
    except ConnectionProblem as exc:
        return error(exc.message, exc.code)
    except ApiProblem as exc:
        return error(clean(exc.one_line(), limit=500), exc.exit_code)
    except (UserError, LookupProblem) as exc:
        return error(exc.message, exc.code)
    except PrivateDirError as exc:  # (ranks' own state directory is not the user's alone)
        return error(str(exc), ExitCode.NO_CONFIG)
    except TimeoutError as exc:
        return error(str(exc) or "timed out", ExitCode.UNREACHABLE)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return ExitCode.OK


async def resolve_project(client: KubeClient, project: str) -> str:
    """A project name (team-a) or a namespace name (runai-team-a) -> its namespace; a project
    that does not exist is exit 8, one the user may not read exit 7 (`monitors.names`)."""
    from monitors.names import LookupProblem
    from monitors.names import resolve_project as resolve

    try:
        return await resolve(client, project, user=client.cfg.impersonate_user or client.cfg.user)
    except LookupProblem as exc:
        raise UserError(exc.message, exc.code) from None


# -- read-only mode and confirmation ---------------------------------------------------------------------

def check_config_file() -> None:
    """A configuration file that is not valid TOML (or RANKS_CONFIG naming no file) is exit 3 for
    every command, not only for those that read a setting from it (read lightly: tomllib)."""
    from tui.config_file import ConfigReadError, read_only_setting

    try:
        read_only_setting()
    except ConfigReadError as exc:
        raise UserError(str(exc), ExitCode.NO_CONFIG) from None


def read_only_reason(opts: dict[str, Any]) -> str | None:
    """Why read-only mode is on (the flag, or the config file that says so), or None when off."""
    if opts.get("read_only"):
        return "--read-only"
    from tui.config_file import ConfigReadError, read_only_setting

    try:
        read_only, path = read_only_setting()
    except ConfigReadError as exc:
        raise UserError(str(exc), ExitCode.NO_CONFIG) from None
    if read_only:
        return f"read_only = true in {path}"
    return None


def read_only_refusal(opts: dict[str, Any], action: str) -> int | None:
    """The exit code when read-only mode refuses `action` (after printing why), else None."""
    from sessions.errors import SessionError
    from sessions.lifecycle import refuse_if_read_only

    try:
        why = read_only_reason(opts)
        refuse_if_read_only(why is not None, action, why)
    except UserError as exc:
        return error(exc.message, exc.code)
    except SessionError as exc:
        return error(exc.message, exc.code)
    return None


def confirm(question: str, *, default: bool = False) -> bool:
    """The user's yes to `question` on the terminal (`default` on Enter; no when it cannot be asked).
    As the dashboard's dialogs: yes by default for what is harmless, no for what destroys."""
    import click

    try:
        return click.confirm(question, default=default, err=True)
    except (click.exceptions.Abort, EOFError):
        return False


# -- the cluster, listed once --------------------------------------------------------------------------------

async def load_monitor(cfg: ClusterConfig, opts: dict[str, Any], where: str | tuple[str, ...] | None,
                       *, nodes: bool = True, events: bool = False, metrics_for: str = "pods",
                       metrics: bool = True, alongside: Callable[[Monitor], Awaitable[None]] | None = None,
                       pod_rows: bool = False, pending_reasons: bool = False, widen: bool = False) -> Monitor:
    """List everything needed once, then read GPU metrics once.

    `where`: a project name to resolve (str), namespaces (tuple), or None for every project.
    `widen` (`where` being the context's namespace): when it holds no workload or may not be read,
    every project the user may read is listed instead (the monitor's `scope` is then None; the
    rule of the read commands, `tui.cli.where`); a user who may read no project at all gets the
    context's namespace's refusal (exit 7).
    Independent requests go out together: discovery with the project lookup, the GPU metrics
    source with the LISTs; a namespace whose pods may not be listed is exit 7, not an empty list.
    `pod_rows`: pods as Table rows (views of workloads, projects and nodes; no pod specs), and with
    `pending_reasons` the scheduler's message of each pending workload (one pod read whole each)."""
    import asyncio

    from monitors.connection import DEFAULT_REQUEST_TIMEOUT
    from monitors.monitor import Monitor

    project = where if isinstance(where, str) else None
    monitor = Monitor(cfg, once=True, events=events, nodes=nodes, scope=() if project else where,
                      pod_rows=pod_rows, unsettled=False)
    gm = None
    try:
        monitor.prefetch()
        if metrics:  # the GPU metrics source is looked for while the cluster is listed
            from monitors.gpu_feed import make_metrics

            gm = make_metrics(cfg, opts.get("prometheus"), timeout=cfg.request_timeout or DEFAULT_REQUEST_TIMEOUT)
            gm.discovery_namespaces = tuple(monitor.scope or ())
            source = asyncio.ensure_future(gm.resolve_source())
            source.add_done_callback(lambda t: t.cancelled() or t.exception())  # not waited for on errors
        if project:
            try:
                monitor.scope = (await resolve_project(monitor.client, project),)
            except BaseException:
                if metrics:
                    source.cancel()
                raise
        try:
            await monitor.start()
            await monitor.wait_synced()
            refused = _readable(monitor, project, widen)
            if widen and (refused is not None or not monitor.model.workloads):
                await monitor.stop()
                monitor = Monitor(cfg, once=True, events=events, nodes=nodes, scope=None, pod_rows=pod_rows,
                                  unsettled=False)
                await monitor.start()
                await monitor.wait_synced()
                if refused is not None and not monitor.status.cluster_wide and not monitor.status.namespaces:
                    raise refused
        except BaseException:
            if metrics:
                source.cancel()
            raise
        # one more round trip at most: what rows do not tell (GPUs of pods outside workloads, why
        # jobs wait), the GPU metrics and what the command reads alongside, all at once
        after: list[Awaitable[None]] = []
        if pod_rows:
            after += [monitor.read_unclaimed(), *([monitor.explain_pending()] if pending_reasons else [])]
        if alongside is not None:
            after.append(alongside(monitor))
        if gm is not None:
            await source
            after.append(read_metrics(gm, monitor, metrics_for))
        await asyncio.gather(*after)
    except BaseException:
        await monitor.stop()
        raise
    finally:
        if gm is not None:
            await gm.aclose()
    return monitor


def _readable(monitor: Monitor, project: str | None, widen: bool) -> UserError | None:
    """`_check_readable`; with `widen`, its refusal is returned (to look further) rather than raised."""
    try:
        _check_readable(monitor, project)
    except UserError as exc:
        if not widen or exc.code != ExitCode.FORBIDDEN:
            raise
        return exc
    return None


def _check_readable(monitor: Monitor, project: str | None) -> None:
    """A project whose pods may not be listed is an error (exit 7), not an empty answer."""
    from monitors.names import who

    denied = monitor.pods_forbidden()
    scoped = monitor.scope or monitor.status.namespaces
    if monitor.status.cluster_wide or not scoped or not all(ns in denied for ns in scoped):
        return
    ns = scoped[0]
    name = who(denied[ns], monitor.cfg.impersonate_user or monitor.cfg.user or "you")
    what = f'project "{project}"' if project else f"namespace {ns}"
    raise UserError(f"forbidden: {clean(name)} may not read {what} (cannot list pods in {ns})", ExitCode.FORBIDDEN)


async def load_recording(store: Any, wl: WorkloadView) -> Any:
    """The flight recording of `wl` (`FlightStore.load`, off the loop), or None; a store whose
    directory is not the user's own is said in one note and not read."""
    import asyncio

    from monitors.state_dir import PrivateDirError

    try:
        return await asyncio.to_thread(store.load, wl.namespace, wl.kind, wl.name, wl.uid)
    except PrivateDirError as exc:
        print(f"ranks: note: the flight recording is not read: {clean(str(exc), limit=500)}", file=sys.stderr)
        return None


def seed_history(gm: Any, model: Any, pods: Iterable[tuple[str, str]], before: float) -> None:
    """The utilisation history a refresh brought (Prometheus' range query) as the model's GPU
    history of those pods, before the readings of now are applied (the one-shot commands judge
    idleness and hangs over time, not from one reading)."""
    from collections import deque

    from monitors.model import HISTORY

    for ns, pod in pods:
        series = [(t, v) for t, v in gm.history(ns, pod) if t < before]
        if series:
            model.gpu_history[(ns, pod)] = deque(series, maxlen=HISTORY)


async def read_metrics(gm: Any, monitor: Monitor, what: str = "pods",
                       only: Callable[[WorkloadView], bool] | None = None) -> None:
    """One GPU metrics refresh for the running GPU pods (of the workloads `only` keeps; nothing is
    sent when there are none), its history seeding the model's, then its readings applied."""
    from monitors.gpu_feed import apply_snapshot

    model = monitor.model
    pods = sorted({(r.namespace, r.pod) for w in model.workloads.values() if only is None or only(w)
                   for r in w.ranks if r.gpus > 0 and r.node and r.phase == "Running"})
    if not pods and only is not None:
        return
    gm.set_shown(pods, namespaces={ns for ns, _ in pods}, all_nodes=(what == "nodes"))
    snap = await gm.refresh()
    seed_history(gm, model, pods, snap.at)
    apply_snapshot(model, snap)
    monitor.flush()
    monitor.metrics_note = snap.source.description if snap.source else ""
    monitor.metrics_problem = snap.reason if snap.state.value == "unavailable" else ""


async def locate(cfg: ClusterConfig, opts: dict[str, Any], ref: str, project: str | None, *,
                 events: bool = False, metrics: bool = False, nodes: bool = False,
                 alongside: Callable[[Monitor], Awaitable[None]] | None = None) -> tuple[Monitor, WorkloadView]:
    """The workload `ref` and a monitor that listed its namespace (and the nodes, `nodes`). With -p,
    in that project; without, in the context's namespace, else in the one project (among those the
    user may read) that has a workload of that name; several such projects are listed (exit 2)."""
    from monitors.names import LookupProblem
    from sessions.locate import pick_workload, search_namespace

    kinds = None
    try:
        monitor = await load_monitor(cfg, opts, project or (cfg.namespace,), nodes=nodes, events=events,
                                     metrics=metrics, alongside=alongside)
    except UserError as exc:
        if project or exc.code != ExitCode.FORBIDDEN:
            raise  # the context's namespace may not be read: look where the user may
    else:
        try:
            return monitor, pick_workload(monitor.model.workloads.values(), ref)
        except LookupProblem as exc:
            kinds = monitor.kinds
            await monitor.stop()
            if project or exc.code != ExitCode.NOT_FOUND:
                raise
    ns = await search_namespace(cfg, ref, kinds)
    monitor = await load_monitor(cfg, opts, (ns,), nodes=nodes, events=events, metrics=metrics,
                                 alongside=alongside)
    try:
        return monitor, pick_workload(monitor.model.workloads.values(), ref)
    except BaseException:
        await monitor.stop()
        raise


# -- printers ------------------------------------------------------------------------------------------------

def colour_enabled() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], colour_col: int | None = None) -> str:
    from rich.cells import cell_len

    cells = [[clean(c) for c in row] for row in rows]
    widths = [cell_len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], cell_len(c))
    use_colour = colour_enabled()
    room = terminal_width()
    gap = "   "  # (as kubectl; two spaces when that makes the table fit the terminal: 80 columns)
    if room is not None and sum(widths) + 3 * (len(widths) - 1) > room:
        gap = "  "
    lines = []
    for r, row in enumerate([list(headers), *cells]):
        parts = []
        for i, c in enumerate(row):
            pad = " " * (widths[i] - cell_len(c)) if i < len(row) - 1 else ""
            text = c
            if use_colour and r > 0 and i == colour_col:
                code = STATUS_COLOURS.get(c.split(" ")[0])
                if code:
                    text = f"\x1b[{code}m{c}\x1b[0m"
            parts.append(text + pad)
        lines.append(gap.join(parts).rstrip())
    return "\n".join(lines)


def terminal_width() -> int | None:
    """The terminal's width when output goes to one (COLUMNS first, as the shell sets it); None
    when it is piped (the columns stay as they are for scripts)."""
    value = os.environ.get("COLUMNS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    if not sys.stdout.isatty():
        return None
    import shutil

    return shutil.get_terminal_size().columns


def emit_structured(data: Any, output: str) -> None:
    """`data` as JSON or YAML; controls, line separators and bidi controls in its strings escaped
    (`monitors.sanitize.json_safe`, `yaml_dump`)."""
    from monitors.sanitize import json_safe, yaml_dump

    if output == "json":
        import orjson

        sys.stdout.write(json_safe(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()) + "\n")
    else:
        sys.stdout.write(yaml_dump(data, sort_keys=False))


def print_projects(projects: list[ProjectView], output: str) -> None:
    projects = sorted(projects, key=lambda p: p.name)
    if output in ("json", "yaml"):
        from monitors.export import project_json

        emit_structured({"projects": [project_json(p) for p in projects]}, output)
        return
    headers = ["PROJECT", "NAMESPACE", "GPU QUOTA", "GPUS ALLOCATED", "GPU UTIL", "RUNNING", "PENDING"]
    rows = [[p.name, p.namespace, gpus(p.gpu_quota), gpus(p.gpus_allocated), percent(p.gpu_util),
             str(p.running), str(p.pending)] for p in projects]
    _print(headers, rows, "No projects found.")


def print_workloads(wls: list[WorkloadView], output: str, *, show_project: bool,
                    empty: str = "No workloads found.") -> None:
    now = time.time()
    if output in ("json", "yaml"):
        from monitors.export import workload_json

        emit_structured({"workloads": [workload_json(w, now) for w in wls]}, output)
        return
    from monitors.diagnostics.leftovers import still_held

    headers = (["PROJECT"] if show_project else []) + ["NAME", "KIND", "STATUS", "RANKS", "GPUS", "GPU UTIL", "AGE"]
    if output == "wide":
        headers += ["FRAMEWORK", "INTERACTIVE", "USER", "REASON"]
    rows = []
    for w in wls:
        status = w.status if w.status not in ("Pending", "Degraded") or not w.reason else f"{w.status}"
        held = still_held(w) if w.status in ("Failed", "Succeeded") else None
        if held is not None:  # (its ranks still run on GPUs: `ranks get` says how to free them)
            status += f" ({held.mark})"
        row = ([w.project] if show_project else []) + [
            w.name, w.kind, status, f"{w.ranks_ready}/{w.ranks_total}",
            f"{gpus(w.gpus_allocated)}/{gpus(w.gpus_requested)}", percent(w.gpu_util),
            age(now - w.created if w.created else None),
        ]
        if output == "wide":
            row += [w.framework, "yes" if w.interactive else "no", w.user or "-", w.reason or "-"]
        rows.append(row)
    _print(headers, rows, empty, colour_col=headers.index("STATUS"))


def event_order(e: EventRec) -> tuple[float, int, str]:
    """When it happened: the last time seen, then (events of one second) the nanosecond clock
    that Kubernetes event recorders put in the name (`<object>.<hex UnixNano>`)."""
    _, _, suffix = e.name.rpartition(".")
    try:
        nanos = int(suffix, 16) if 8 <= len(suffix) <= 16 else 0
    except ValueError:
        nanos = 0
    return (e.last or 0.0, nanos, e.name)


def print_get(w: WorkloadView, events: list[EventRec], output: str, metrics_note: str, *,
              events_forbidden: str = "", max_events: int = 20, failure: Any = None,
              story: list[str] | None = None, diag: Any = None, held: str = "") -> None:
    now = time.time()
    out = sys.stdout
    pods_running = sum(1 for r in w.ranks if r.phase == "Running")
    pods_pending = sum(1 for r in w.ranks if r.phase == "Pending")
    pods_failed = sum(1 for r in w.ranks if r.phase == "Failed")
    header = [
        ("Name", w.name), ("Namespace", w.namespace), ("Project", w.project),
        ("Kind", f"{w.kind} ({w.framework})"), ("Status", w.status + (f": {w.reason}" if w.reason else "")),
        ("Interactive", "yes" if w.interactive else "no"), ("Age", age(now - w.created if w.created else None)),
        ("User", w.user or "-"),
        ("GPUs", f"{gpus(w.gpus_allocated)} allocated / {gpus(w.gpus_requested)} requested"),
        ("GPU util", percent(w.gpu_util)),
        ("Pods", f"{pods_running} running, {pods_pending} pending, {pods_failed} failed"),
        ("Command", w.command or "-"),
    ]
    if held:  # a finished job's ranks still running on GPUs (`diagnostics.leftovers`)
        header.append(("Still held", held))
    width = max(len(k) for k, _ in header) + 2
    for k, v in header:
        out.write(f"{k + ':':<{width}}{clean(v, limit=500)}\n")
    if w.conditions:
        out.write("Conditions:\n")
        out.write("  " + table(["TYPE", "STATUS", "REASON", "AGE"], [
            [c.type, c.status, c.reason or "-", age(now - c.at if c.at else None)] for c in w.conditions
        ]).replace("\n", "\n  ") + "\n")
    if failure is not None:
        print_failure(failure, now)
    elif w.first_failure is not None:
        f = w.first_failure
        out.write(clean(f"First failure: {f.label} (pod {f.pod}, container {f.container}) exited {f.exit_code}"
                        f" ({f.reason})") + "\n")
    if story:
        out.write("What happened:\n")
        for line in story:
            out.write(f"  - {clean(line, limit=500)}\n")
    health = diag.health if diag is not None else None
    if health is not None and not health.ok:
        out.write(f"Health: {clean(health.summary, limit=500)}\n" if health.hung else "Health:\n")
        for r in health.flagged:
            for flag, why in zip(r.flags, r.why, strict=False):
                out.write(f"  - {flag} {clean(r.label)}: {clean(why, limit=300)}\n")
    out.write("\n")
    headers = ["ROLE", "RANK", "POD", "STATUS", "RESTARTS", "NODE", "GPU%", "GPU MEM", "LAST LOG", "STEP", "LOSS",
               "AGE"]
    if output == "wide":
        headers += ["IP", "GPUS", "LEAD"]
    rows = []
    for r in w.ranks:
        mem = "-" if r.gpu_mem_used_mib is None else (
            f"{mib(r.gpu_mem_used_mib)}/{mib(r.gpu_mem_total_mib)}" if r.gpu_mem_total_mib else mib(r.gpu_mem_used_mib))
        last = diag.last_at(r.label) if diag is not None else None
        p = (diag.progress(r.label) if diag is not None else None) or {}
        loss = "-" if p.get("loss") is None else f"{p['loss']:.4g}"
        row = [r.label + (" *" if r.lead else ""), "-" if r.rank is None else str(r.rank), r.pod, r.status,
               str(r.restarts), r.node or "-", percent(r.gpu_util), mem, age(now - last) if last else "-",
               "-" if p.get("step") is None else str(p["step"]), loss, age(now - r.created if r.created else None)]
        if output == "wide":
            row += [r.pod_ip or "-", gpus(r.gpus), "yes" if r.lead else ""]
        rows.append(row)
    none = "No pods: they are gone (see What happened)." if story else "No pods yet."
    from .fitting import RANK_DROP, fit_columns, message_under, with_messages

    room = None if output == "wide" else terminal_width()  # (wide: every column, as kubectl's)
    headers, rows, left_out = fit_columns(headers, rows, RANK_DROP, room)
    out.write((table(headers, rows, colour_col=headers.index("STATUS")) if rows else none) + "\n")
    if rows and left_out:
        print(f"ranks: note: {', '.join(left_out)} left out to fit {room} columns (-o wide shows every column)",
              file=sys.stderr)
    if metrics_note:
        out.write(f"\nGPU metrics: {clean(metrics_note)}\n")
    events = sorted(events, key=event_order)[-max_events:]  # the newest, oldest first
    if events_forbidden:
        out.write(f"\nEvents:  not shown: {clean(events_forbidden, limit=200)}\n")
    elif not events:
        out.write("\nEvents:  <none>\n")
    else:
        out.write("\nEvents:\n")
        rows = [[age(now - e.last if e.last else None), e.type, e.reason, f"{e.kind}/{e.object_name}", e.message]
                for e in events]
        columns = ["AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        text = table(columns, rows)
        if room is not None and message_under(columns, rows, room - 2):  # each message under its event
            text = with_messages(table(columns[:-1], [r[:-1] for r in rows]), [r[-1] for r in rows], room - 2)
        out.write("  " + text.replace("\n", "\n  ") + "\n")


def print_failure(f: Any, now: float, indent: str = "") -> None:
    """The first failure's section: who, where, how, when; whether it is a recording; last lines."""
    out = sys.stdout
    rank = f" rank {f.rank}," if f.rank is not None else ""
    node = f" on node {f.node}" if f.node else ""
    when = f" {age(now - f.finished_at)} ago" if f.finished_at else ""
    out.write(clean(f"{indent}First failure: {f.label} ({f.role or 'rank'}{rank} pod {f.pod}{node}, container "
                    f"{f.container}) exited {f.exit_code}{' (' + f.reason + ')' if f.reason else ''}{when}",
                    limit=500) + "\n")
    if f.recorded_at is not None:
        out.write(f"{indent}  a recording made by ranks {age(now - f.recorded_at)} ago, while it watched "
                  "(the pods are gone)\n")
    if f.lines:
        source = " (its termination message)" if f.source == "termination message" else ""
        out.write(f"{indent}  last {len(f.lines)} lines{source}:\n")
        for line in f.lines:
            out.write(f"{indent}    {clean(line, limit=1000)}\n")
    elif f.recorded_at is None:
        out.write(f"{indent}  its log cannot be read (the pod is gone or restarted since)\n")


def print_nodes(nodes: list[NodeView], output: str) -> None:
    if output in ("json", "yaml"):
        from monitors.export import node_json

        emit_structured({"nodes": [node_json(n) for n in nodes]}, output)
        return
    headers = ["NODE", "POOL", "GPU MODEL", "GPUS", "ALLOCATED", "GPU UTIL", "GPU MEM", "STATUS"]
    if output == "wide":
        headers += ["PODS"]
    rows = []
    for n in nodes:
        status = ("Ready" if n.ready else "NotReady") + (",SchedulingDisabled" if n.unschedulable else "")
        row = [n.name, n.pool or "-", n.product or "-", gpus(n.gpus), gpus(n.gpus_allocated), percent(n.gpu_util),
               mib(n.gpu_mem_used_mib), status]
        if output == "wide":
            row.append(str(n.pods))
        rows.append(row)
    _print(headers, rows, "No nodes found.")


def _print(headers: list[str], rows: list[list[str]], empty: str, colour_col: int | None = None) -> None:
    if not rows:
        print(empty, file=sys.stderr)
        return
    sys.stdout.write(table(headers, rows, colour_col) + "\n")
