"""No internal error from the command line (issue #25, item 6): hypothesis builds command lines for
every `ranks` subcommand from its own options (found by introspection, so a new flag is fuzzed too)
with hostile values (empty, huge, negative, not numbers, control characters, bidi controls, other
scripts' digits, `--` and flags where values belong) and runs them in this process
(`tests.cli_inprocess`): against a cluster that cannot be reached (every command, the actions
included: nothing can act), and the read commands against simcluster too (what the values do to a
real read). Each ends with exit 0 or one `ranks: error:` line with a documented exit code, and
what it echoes carries no escape byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcluster.cluster import ThreadedSimCluster
from tests.cli_inprocess import isolated, one_line_or_ok, run_cli
from tests.integration.test_bad_config import closed_port, kubeconfig
from tests.kubeflow_objects import job, pod

LONG_RUNNING = {"", "demo", "sim", "serve"}  # (they serve until stopped: not one-shot commands)
READS = ("list", "get", "logs", "why", "top", "idle", "projects", "stacks")
HOSTILE = [
    "", " ", "-", "--", "-1", "0", "1", "2", "99999999999999999999999999", "1e400", "-1e400", "nan", "inf",
    "9" * 5000, "0x10", "1_000", "٣", "１", "²", "3.5", "30s", "0s", "1h", "2562048h", "-5m", "abc",
    "a\x1b]0;title\x07b", "a\nb", "a\rb", "\x00", "\u202egnp.exe", "\u2028", "a=b", "=", "K=V", "BAD NAME=1",
    "team-a", "default", "mnist", "pytorchjob/mnist", "worker-0", "master-0,", ",", "/etc/passwd", "../../x",
    "x" * 300, "json", "yaml", "wide", "text", "mpi", "pytorch", "-p", "--all", "--help", "http://[::1",
    "pvc:/data", "pvc:relative", "a:/d:ro:x",
]
SUBCOMMANDS = sorted(set(__import__("tui.cli.group", fromlist=["SUBCOMMANDS"]).SUBCOMMANDS) - LONG_RUNNING)


def options_of(name: str) -> list[tuple[str, bool]]:
    """(an option's name, whether it is a flag) for every option of `ranks NAME`."""
    from tui.cli.group import subcommand

    out = []
    for p in subcommand(name).params:
        if isinstance(p, click.Option) and p.name not in ("help",):
            out += [(o, bool(p.is_flag)) for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
    return out


PLAUSIBLE = ["default", "3", "0", "1", "json", "yaml", "wide", "text", "10m", "1s", "worker-0", "master-0", "0,1",
             "worker", "master", "error", "img", "2", "mpi", "pytorch", "K=V", "Running"]


def takes_workload(name: str) -> bool:
    from tui.cli.group import subcommand

    return any(isinstance(p, click.Argument) and p.name in ("workload", "name") for p in subcommand(name).params)


@st.composite
def command_line(draw: st.DrawFn, names: tuple[str, ...] | list[str]) -> list[str]:
    """`NAME [mnist] [OPTION [VALUE]]... [WORD]...`: mostly a command that gets as far as the cluster
    (a real workload, plausible values), with one or more hostile values among them."""
    name = draw(st.sampled_from(names))
    opts = options_of(name)
    argv = [name]
    if takes_workload(name) and draw(st.integers(0, 9)) < 8:
        argv.append("mnist")
        if draw(st.booleans()):
            argv += ["-p", "default"]
    values = st.one_of(st.sampled_from(PLAUSIBLE), st.sampled_from(HOSTILE), st.text(max_size=12))
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["option", "option", "option", "word"]))
        if kind == "word" or not opts:
            argv.append(draw(st.sampled_from(HOSTILE)))
            continue
        opt, flag = draw(st.sampled_from(opts))
        argv.append(opt)
        if not flag:
            argv.append(draw(values))
    return argv


FUZZ = settings(max_examples=250, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@FUZZ
@given(argv=command_line(SUBCOMMANDS))
def test_any_command_line_against_an_unreachable_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         argv: list[str]) -> None:
    if any(a in ("-f", "--follow", "--wait") for a in argv):  # (they wait for the cluster to answer)
        argv = [a for a in argv if a not in ("-f", "--follow", "--wait")]
    kc = kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{closed_port()}")
    with isolated(monkeypatch, tmp_path):
        r = run_cli(*argv, "--kubeconfig", str(kc), "--request-timeout", "2s", "--read-only")
    one_line_or_ok(r)


def seed(sim: Any) -> None:
    sim.apply(job("PyTorchJob", "mnist", "default", {"Master": 1, "Worker": 1}, conditions=[("Running", "")]))
    for rtype in ("Master", "Worker"):
        sim.apply(pod("PyTorchJob", "mnist", "default", rtype, 0))


@pytest.mark.simcluster(scenario="empty")
@settings(FUZZ, max_examples=120)
@given(argv=command_line(READS))
def test_any_read_command_line_against_simcluster(simcluster: ThreadedSimCluster, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    sim = simcluster.sim
    if not simcluster.call(sim.store.find, ("", "pods"), "default", "mnist-worker-0"):
        simcluster.call(seed, sim)
    argv = [a for a in argv if a not in ("-f", "--follow")]
    with isolated(monkeypatch, tmp_path):
        r = run_cli(*argv, "--kubeconfig", str(sim.kubeconfig_path), "--request-timeout", "5s")
    one_line_or_ok(r)
    assert "\x1b" not in r.out, r


def test_the_options_are_found() -> None:
    """(the fuzzing reaches every command's options: a command whose options could not be read
    would be fuzzed with words alone)"""
    found = {name: options_of(name) for name in SUBCOMMANDS}
    assert ("--tail", False) in found["logs"] and ("--request-timeout", False) in found["list"]
    assert ("--env", False) in found["submit"] and all(found.values()), found
    assert kubeconfig  # (the helper the unreachable cluster's kubeconfig comes from)
