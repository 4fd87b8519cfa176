"""Bounded work over the SSH door (issue #25, item 3), with the real OpenSSH client: a command runs
with the server's CPU limit (RLIMIT_CPU) at a lower priority than the dashboards (nice 10), at most
`--max-commands-per-user` of a user's at once, and is stopped after `--command-time-limit` saying
so in one line (exit 1, audited), leaving nothing behind."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

from tests.integration.test_ssh_faults import baseline, descendants, same_processes, serve  # noqa: F401
from tests.integration.test_ssh_serve import Served, env
from tests.waiting import wait_for

pytestmark = pytest.mark.simcluster(scenario="demo", components=("operators", "scheduler", "kubelet"))

FOLLOW = ("logs", "llama-finetune", "-p", "team-a", "-f", "--tail", "1")  # (runs until stopped)


def command_process(served: Served) -> int | None:
    return next((pid for pid, cmd in descendants(served.proc.pid).items() if "tui.cli logs llama-finetune" in cmd),
                None)


def nice_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[16])


def test_a_command_runs_niced_within_its_cpu_limit_and_one_at_a_time(
        serve: Callable[..., Served]) -> None:  # noqa: F811
    served = serve("--command-cpu-limit", "7s", "--max-commands-per-user", "1")
    before = baseline(served)
    client = subprocess.Popen(served.ssh(*FOLLOW), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=env())
    try:
        pid = wait_for(lambda: command_process(served), 30, "the command's process")

        def cpu_limit() -> list[str] | None:  # (set as the command starts, before it reads anything)
            with open(f"/proc/{pid}/limits") as fh:
                cpu = next(ln for ln in fh if ln.startswith("Max cpu time")).split()[3:5]
            return cpu if cpu != ["unlimited", "unlimited"] else None

        cpu = wait_for(cpu_limit, 30, "the command's CPU limit")
        assert cpu == ["7", "12"], cpu  # soft: the message; hard (5 s later): SIGKILL
        wait_for(lambda: nice_of(pid) == 10, 10, "the command's lower priority", detail=lambda: nice_of(pid))
        assert nice_of(served.proc.pid) == 0  # (the server, and the dashboards, are not niced)
        r = served.run("projects")
        assert r.returncode == 1 and r.stderr.strip() == "ranks: alice has 1 command running already; wait for " \
                                                          "one to end", r.stderr
        assert "refused user=alice" in served.audit() and "per-user command limit" in served.audit()
    finally:
        client.kill()
        client.wait()
    same_processes(served, before, 20, "the command ended with its client")
    assert served.run("projects").returncode == 0  # (its place is free again)


def test_a_command_is_stopped_at_the_time_limit_saying_so(serve: Callable[..., Served]) -> None:  # noqa: F811
    served = serve("--command-time-limit", "2s")
    before = baseline(served)
    for opts in ((), ("-tt",)):  # on pipes, and on a terminal
        r = served.run(*FOLLOW, opts=opts, timeout=60)
        lines = [ln for ln in r.stderr.replace("\r", "").splitlines() if ln.strip()]
        assert r.returncode == 1, (opts, r.returncode, r.stderr)
        assert lines[-1] == ("ranks: error: stopped after 2 seconds: the server's limit for one command "
                             "(ranks serve --command-time-limit)"), (opts, r.stderr)
    assert served.audit().count("limit user=alice") == 2, served.audit()
    assert "what='stopped after 2 seconds: logs llama-finetune -p team-a -f --tail 1'" in served.audit()
    same_processes(served, before, 20, "nothing of the stopped commands left")
