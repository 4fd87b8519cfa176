"""`ranks` (the dashboard on the current context), `ranks demo` (the dashboard on simcluster's
demo scenario, with a real Prometheus scraping it when the binary is installed) and `ranks sim`
(simcluster alone, until SIGINT/SIGTERM, leaving nothing behind).

The dashboard itself is `tui.app.RanksApp`; this module prepares its settings, themes and colour
mode (each problem one line and an exit code) and runs it. Textual, pydantic and simcluster are
imported only when one of these runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from monitors.connection import ConnectionProblem, ExitCode, load_cluster_config, write_context_settings
from monitors.sanitize import clean

from .errors import error, fail
from .options import command, dashboard_options, global_options, group_project, impersonation, merge_globals
from .running import configure

if TYPE_CHECKING:
    from tui.settings import Settings


@command("demo", reads_only=False)
@dashboard_options
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Keep the demo cluster's kubeconfig and files here (default: a temporary directory).")
@global_options
@click.pass_context
def demo_command(ctx: click.Context, /, theme: str | None, ascii: bool, project: str | None, workdir: str | None,
                 **kwargs: Any) -> None:
    """The dashboard on simcluster's demo scenario (8 GPU nodes, 8 workloads), with a real
    Prometheus scraping its GPU exporters when `prometheus` is installed."""
    outer = (ctx.obj or {}).get("dashboard", {})
    theme = theme if theme is not None else outer.get("theme")
    sys.exit(run_demo(merge_globals(ctx, kwargs), theme=theme, ascii=ascii or bool(outer.get("ascii")),
                      project=group_project(ctx, project), workdir=workdir))


@command("sim", reads_only=False)
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port on 127.0.0.1 (0 picks a free one).")
@click.option("--kubeconfig", "kubeconfig", type=click.Path(dir_okay=False), default=None,
              help="Where to write the kubeconfig (default: a temporary directory).")
@click.option("--scenario", type=click.Choice(["empty", "demo", "scale"]), default="empty",
              show_default=True, help="What the cluster contains at start.")
@click.option("--nodes", type=click.IntRange(0, 100_000), default=0, help="Add N GPU nodes.")
@click.option("--gpus-per-node", type=click.IntRange(0, 64), default=8, show_default=True)
@click.option("--pods", type=click.IntRange(0, 1_000_000), default=20_000, show_default=True,
              help="Pods in the scale scenario.")
@click.option("--churn", type=click.FloatRange(0, 100_000), default=0.0,
              help="Pod status changes per second (scale benchmarks).")
@click.option("--tls/--no-tls", default=True, show_default=True, help="Serve HTTPS with a self-signed CA.")
def sim_command(port: int, kubeconfig: str | None, scenario: str, nodes: int, gpus_per_node: int,
                pods: int, churn: float, tls: bool) -> None:
    """Run simcluster, a local cluster for trying ranks and for tests.

    Prints one line `ready: kubeconfig=PATH server=URL` once it serves, and runs until
    interrupted. Real use is against a real cluster's kubeconfig.
    """
    sys.exit(run_sim(port=port, kubeconfig=kubeconfig, scenario=scenario, nodes=nodes,
                     gpus_per_node=gpus_per_node, pods=pods, churn=churn, tls=tls))


# -- the dashboard --------------------------------------------------------------------------------

@dataclass
class Prepared:
    settings: Settings
    kwargs: dict[str, Any]


def prepare(opts: dict[str, Any], *, theme: str | None, ascii: bool, project: str | None) -> Prepared:
    """Settings, themes and colour mode, each problem a one-line error and exit code."""
    from themes import ConfigFileError, detect_colour_mode, load_themes
    from tui.settings import load_settings, themes_dir

    try:
        settings = load_settings().with_overrides(
            theme=theme, read_only=opts.get("read_only"), ascii=True if ascii else None,
            prometheus_url=opts.get("prometheus"))
        themes = load_themes(themes_dir(settings))
    except ConfigFileError as exc:
        fail(str(exc).splitlines()[0] if str(exc) else "invalid configuration", ExitCode.NO_CONFIG)
    for problem in getattr(themes, "problems", []):
        print(f"ranks: warning: {clean(problem, limit=2000)}", file=sys.stderr)
    if settings.theme not in themes:
        where = "--theme" if theme else (f"{settings.path}: theme" if settings.path else "theme")
        fail(f"{where}: unknown theme {settings.theme!r} (themes: {', '.join(themes.names())})", ExitCode.USAGE)
    try:
        mode = detect_colour_mode(os.environ, settings.colours)
    except ValueError as exc:
        fail(str(exc), ExitCode.USAGE)
    why = "--read-only" if opts.get("read_only") else f"read_only = true in {settings.path}"
    return Prepared(settings, dict(themes=themes, colour_mode=mode, start_project=project, read_only_why=why))


def _need_terminal() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        fail("the dashboard needs a terminal; for scripts use 'ranks list', 'ranks get' or 'ranks logs'",
             ExitCode.USAGE)


def run_app(cfg: Any, prepared: Prepared) -> int:
    import signal

    from themes import ConfigFileError
    from tui.app import RanksApp
    from tui.settings import hang_after

    try:
        hang_after(prepared.settings, cfg)  # (a kubeconfig context's own settings, checked before the terminal)
    except ConfigFileError as exc:
        fail(str(exc).splitlines()[0], ExitCode.NO_CONFIG)

    app = RanksApp(cfg, prepared.settings, **prepared.kwargs)

    def hang_up(signum: int, _frame: object) -> None:  # terminal closed or killed: exit cleanly
        app.exit(128 + signum)

    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, hang_up)
    rc = app.run()
    if app.exit_message:
        error(app.exit_message, rc if isinstance(rc, int) else 1)
    return int(rc if isinstance(rc, int) else (app.return_code or 0))


def run_dashboard(opts: dict[str, Any], *, theme: str | None, ascii: bool, project: str | None) -> int:
    prepared = prepare(opts, theme=theme, ascii=ascii, project=project)
    _need_terminal()
    try:
        cfg = configure(load_cluster_config(opts.get("kubeconfig"), opts.get("context"), **impersonation(opts)),
                        opts)
    except ConnectionProblem as exc:
        fail(exc.message, exc.code)
    return run_app(cfg, prepared)


@contextlib.contextmanager
def demo_cluster(workdir: Path, *, prometheus: bool = True) -> Iterator[tuple[Path, str | None]]:
    """simcluster's demo scenario (and Prometheus when installed); yields (kubeconfig, prometheus url)."""
    import shutil

    from simcluster.cluster import ThreadedSimCluster
    from simcluster.prometheus import (
        PrometheusError,
        PrometheusServer,
        dcgm_scrape_config,
        prometheus_binary,
        register_prometheus_service,
    )

    sim_thread = ThreadedSimCluster(scenario="demo", workdir=workdir / "sim", kubeconfig=workdir / "kubeconfig")
    sim = sim_thread.start()
    server: PrometheusServer | None = None
    try:
        url = None
        binary = prometheus_binary() if prometheus else None
        if binary is not None:
            _wait_for_exporters(sim_thread, sim)
            cfg = sim_thread.call(dcgm_scrape_config, sim, interval="2s")
            storage = workdir / "prometheus"
            shutil.rmtree(storage, ignore_errors=True)  # no series of an earlier demo run
            server = PrometheusServer(cfg, storage, binary=binary)
            try:
                server.start(15.0)
                sim_thread.call(register_prometheus_service, sim, server.host, server.port)
                url = server.url
            except (PrometheusError, OSError) as exc:
                print(f"ranks: warning: Prometheus did not start ({exc}); using the exporters directly",
                      file=sys.stderr)
                server.stop()
                server = None
        yield sim.kubeconfig_path, url
    finally:
        if server is not None:
            server.stop()
        sim_thread.stop()
        # the cluster is gone: a kubeconfig pointing at its dead port must not stay behind
        (workdir / "kubeconfig").unlink(missing_ok=True)


DEMO_FILES = ("sim", "prometheus", "kubeconfig")  # what the demo writes in its --workdir


def remove_demo_workdir(base: Path) -> None:
    """The demo has quit: what it wrote in its --workdir goes (the cluster's files, its Prometheus
    series, the kubeconfig), and the directory with them when nothing else is in it (a directory
    the user keeps other files in stays, with them)."""
    import shutil

    for name in DEMO_FILES:
        path = base / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        base.rmdir()


def _wait_for_exporters(sim_thread: Any, sim: Any, timeout: float = 10.0) -> None:
    """Until every GPU node's DCGM exporter listens (they start with the cluster, a moment later, node
    by node: Prometheus' targets are those listening when it starts)."""
    def gpu_nodes() -> int:
        return sum(1 for st in sim.store.items(("", "nodes"))
                   if str(((st.obj.get("status") or {}).get("capacity") or {}).get("nvidia.com/gpu", "0")) != "0")

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listening, nodes = sim_thread.call(lambda: (len(sim.dcgm.targets()), gpu_nodes()))
        if nodes and listening >= nodes:
            return
        time.sleep(0.05)


DEMO_HANG_AFTER = 1.0  # minutes: the demo's gpt-hung is marked hung about a minute after it stalls


def run_demo(opts: dict[str, Any], *, theme: str | None, ascii: bool, project: str | None,
             workdir: str | None = None) -> int:
    import tempfile

    prepared = prepare(opts, theme=theme, ascii=ascii, project=project)
    _need_terminal()
    base = Path(workdir).resolve() if workdir else None
    with contextlib.ExitStack() as stack:
        if base is None:
            base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ranks-demo-")))
        else:  # (after the cluster has stopped: the callback is entered before it)
            stack.callback(remove_demo_workdir, base)
        try:
            base.mkdir(mode=0o700, parents=True, exist_ok=True)  # (not readable by others in between)
            base.chmod(0o700)  # the cluster's tokens, TLS keys and pod logs: the user's alone
            kubeconfig, url = stack.enter_context(demo_cluster(base))
        except OSError as exc:
            fail(f"cannot start the demo cluster: {exc.strerror or exc}", ExitCode.ERROR)
        try:  # the demo's job hangs within a minute: its contexts judge hangs after one (a `ranks why` too)
            write_context_settings(kubeconfig, {"hang_after_minutes": DEMO_HANG_AFTER})
        except OSError as exc:
            fail(f"cannot write the demo cluster's kubeconfig: {exc.strerror or exc}", ExitCode.ERROR)
        cfg = configure(load_cluster_config(str(kubeconfig), None), opts)
        settings = prepared.settings
        if url and not settings.prometheus_url:
            settings = settings.with_overrides(prometheus_url=url)
        prepared.settings = settings
        try:
            return run_app(cfg, prepared)
        finally:  # the demo's cluster ends with it, and so do its flight recordings (a new one each run)
            import shutil

            from monitors.flight_store import store_for

            shutil.rmtree(store_for(cfg).dir, ignore_errors=True)


# -- simcluster alone --------------------------------------------------------------------------------

def _check_kubeconfig_target(path: Path) -> str | None:
    """Refuse to overwrite a kubeconfig that simcluster did not write."""
    import yaml

    if not path.exists():
        return None
    refusal = f"refusing to overwrite {path}: it exists and is not a simcluster kubeconfig"
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return refusal
    listed = data.get("clusters") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return refusal
    clusters = [c.get("name") for c in listed if isinstance(c, dict)]
    return None if clusters == ["ranks-sim"] else refusal


async def _serve(sim_kwargs: dict[str, Any], kubeconfig: Path | None) -> int:
    import asyncio
    import signal

    from simcluster import SimCluster

    sim = SimCluster(kubeconfig=kubeconfig, **sim_kwargs)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    try:
        await sim.start()
    except OSError as exc:
        print(f"ranks: error: cannot listen on 127.0.0.1:{sim_kwargs['port']}: {exc.strerror or exc}",
              file=sys.stderr)
        await sim.stop()
        return ExitCode.ERROR
    try:
        print(f"ready: kubeconfig={sim.kubeconfig_path} server={sim.url}", flush=True)
        await stop.wait()
    finally:
        await sim.stop()
        if kubeconfig is not None:
            kubeconfig.unlink(missing_ok=True)
    return ExitCode.OK


def run_sim(*, port: int, kubeconfig: str | None, scenario: str, nodes: int, gpus_per_node: int,
            pods: int, churn: float, tls: bool) -> int:
    import asyncio

    path = Path(kubeconfig).expanduser().resolve() if kubeconfig else None
    if path is not None:
        problem = _check_kubeconfig_target(path)
        if problem:
            print(f"ranks: error: {problem}", file=sys.stderr)
            return ExitCode.USAGE
    kwargs = dict(port=port, scenario=scenario, nodes=nodes, gpus_per_node=gpus_per_node, pods=pods,
                  churn=churn, tls=tls)
    try:
        return asyncio.run(_serve(kwargs, path))
    except KeyboardInterrupt:
        return ExitCode.OK
