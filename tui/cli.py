"""The `ranks` command line (also installed as `kubectl-ranks`, so `kubectl ranks ...` works).

Heavy imports happen inside commands, so `ranks --help` and scripted calls start fast.
"""

from __future__ import annotations

import sys

import click

from .errors import EXIT_USAGE, fail


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="ranks", prog_name="ranks")
def cli() -> None:
    """ranks: distributed training workloads on Kubernetes, rank by rank."""


@cli.command("sim")
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
    from .sim_command import run_sim

    sys.exit(run_sim(port=port, kubeconfig=kubeconfig, scenario=scenario, nodes=nodes,
                     gpus_per_node=gpus_per_node, pods=pods, churn=churn, tls=tls))


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="ranks", standalone_mode=True)
    except KeyboardInterrupt:
        sys.exit(130)
    except click.exceptions.Exit as exc:  # pragma: no cover - click handles this in standalone mode
        sys.exit(exc.exit_code)
    except Exception as exc:  # never a traceback for the user
        fail(f"internal error: {type(exc).__name__}: {exc}", EXIT_USAGE + 68)


if __name__ == "__main__":
    main()
