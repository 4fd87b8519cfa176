"""`ranks` (the dashboard on the current context) and `ranks demo` (the dashboard on simcluster's
demo scenario, with a real Prometheus scraping it when the binary is installed)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitors.connection import ConnectionProblem, ExitCode, load_cluster_config
from themes import ConfigFileError, detect_colour_mode, load_themes

from .cli_commands import configure
from .errors import fail
from .settings import Settings, load_settings, themes_dir


@dataclass
class Prepared:
    settings: Settings
    kwargs: dict[str, Any]


def prepare(opts: dict[str, Any], *, theme: str | None, ascii: bool, project: str | None) -> Prepared:
    """Settings, themes and colour mode, each problem a one-line error and exit code."""
    try:
        settings = load_settings().with_overrides(
            theme=theme, read_only=opts.get("read_only"), ascii=True if ascii else None,
            prometheus_url=opts.get("prometheus"))
        themes = load_themes(themes_dir(settings))
    except ConfigFileError as exc:
        fail(str(exc).splitlines()[0] if str(exc) else "invalid configuration", ExitCode.NO_CONFIG)
    for problem in getattr(themes, "problems", []):
        print(f"ranks: warning: {problem}", file=sys.stderr)
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
    from .app import RanksApp

    app = RanksApp(cfg, prepared.settings, **prepared.kwargs)

    def hang_up(signum: int, _frame: object) -> None:  # terminal closed or killed: exit cleanly
        app.exit(128 + signum)

    for sig in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, hang_up)
    rc = app.run()
    if app.exit_message:
        print(f"ranks: error: {app.exit_message}", file=sys.stderr)
    return int(rc if isinstance(rc, int) else (app.return_code or 0))


def run_dashboard(opts: dict[str, Any], *, theme: str | None, ascii: bool, project: str | None) -> int:
    prepared = prepare(opts, theme=theme, ascii=ascii, project=project)
    _need_terminal()
    try:
        cfg = configure(load_cluster_config(opts.get("kubeconfig"), opts.get("context")), opts)
    except ConnectionProblem as exc:
        fail(exc.message, exc.code)
    return run_app(cfg, prepared)


@contextlib.contextmanager
def demo_cluster(workdir: Path, *, prometheus: bool = True) -> Iterator[tuple[Path, str | None]]:
    """simcluster's demo scenario (and Prometheus when installed); yields (kubeconfig, prometheus url)."""
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


def _wait_for_exporters(sim_thread: Any, sim: Any, timeout: float = 10.0) -> None:
    """Until every node's DCGM exporter listens (they start with the cluster, a moment later)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listening, nodes = sim_thread.call(lambda: (len(sim.dcgm.targets()), len(sim.dcgm.exporter_pods())))
        if nodes and listening >= nodes:
            return
        time.sleep(0.05)


def run_demo(opts: dict[str, Any], *, theme: str | None, ascii: bool, project: str | None,
             workdir: str | None = None) -> int:
    prepared = prepare(opts, theme=theme, ascii=ascii, project=project)
    _need_terminal()
    base = Path(workdir).resolve() if workdir else None
    with contextlib.ExitStack() as stack:
        if base is None:
            base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ranks-demo-")))
        try:
            base.mkdir(parents=True, exist_ok=True)
            base.chmod(0o700)  # the cluster's tokens, TLS keys and pod logs: the user's alone
            kubeconfig, url = stack.enter_context(demo_cluster(base))
        except OSError as exc:
            fail(f"cannot start the demo cluster: {exc.strerror or exc}", ExitCode.ERROR)
        cfg = configure(load_cluster_config(str(kubeconfig), None), opts)
        settings = prepared.settings
        if url and not settings.prometheus_url:
            prepared.settings = settings.with_overrides(prometheus_url=url)
        return run_app(cfg, prepared)
