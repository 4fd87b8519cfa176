"""`ranks sim`: serve simcluster until SIGINT/SIGTERM, leaving nothing behind."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import yaml

from .errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE


def _check_kubeconfig_target(path: Path) -> str | None:
    """Refuse to overwrite a kubeconfig that simcluster did not write."""
    if not path.exists():
        return None
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return f"refusing to overwrite {path}: it exists and is not a simcluster kubeconfig"
    clusters = [c.get("name") for c in data.get("clusters") or [] if isinstance(c, dict)]
    if clusters != ["ranks-sim"]:
        return f"refusing to overwrite {path}: it exists and is not a simcluster kubeconfig"
    return None


async def _serve(sim_kwargs: dict, kubeconfig: Path | None) -> int:
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
        return EXIT_ERROR
    try:
        print(f"ready: kubeconfig={sim.kubeconfig_path} server={sim.url}", flush=True)
        await stop.wait()
    finally:
        await sim.stop()
        if kubeconfig is not None:
            kubeconfig.unlink(missing_ok=True)
    return EXIT_OK


def run_sim(*, port: int, kubeconfig: str | None, scenario: str, nodes: int, gpus_per_node: int,
            pods: int, churn: float, tls: bool) -> int:
    path = Path(kubeconfig).expanduser().resolve() if kubeconfig else None
    if path is not None:
        problem = _check_kubeconfig_target(path)
        if problem:
            print(f"ranks: error: {problem}", file=sys.stderr)
            return EXIT_USAGE
    kwargs = dict(port=port, scenario=scenario, nodes=nodes, gpus_per_node=gpus_per_node, pods=pods,
                  churn=churn, tls=tls)
    try:
        return asyncio.run(_serve(kwargs, path))
    except KeyboardInterrupt:
        return EXIT_OK
