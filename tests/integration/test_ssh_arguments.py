"""The user's command line over the SSH door is the user's alone (issue #25, item 2), with the real
OpenSSH client: the server gives its settings out of band (`$RANKS_SERVER_SETTINGS`, `$KUBECONFIG`),
never as words after the user's, so no option of the user's can take one of the server's flags as
its value, no flag of the user's replaces one of the server's, and no error shows a server path.

Every read-only command the door serves is fed every flag of the server's set at the end, in the
middle and as `--flag=value`; value-taking options left without their value at the end (`-o`,
bundled as `-Ap`), and words after `--`."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.test_ssh_faults import baseline, same_processes, serve  # noqa: F401 (the fixture)
from tests.integration.test_ssh_serve import Served

pytestmark = pytest.mark.simcluster(scenario="demo", components=("operators", "scheduler", "kubelet"))

# each read-only command with words that make it run as alice (her project: team-a)
COMMANDS: dict[str, tuple[str, ...]] = {
    "get": ("get", "llama-finetune", "-p", "team-a"),
    "gpus": ("gpus", "-p", "team-a"),
    "idle": ("idle", "-p", "team-a"),
    "list": ("list", "-p", "team-a"),
    "logs": ("logs", "llama-finetune", "-p", "team-a", "--tail", "1"),
    "projects": ("projects",),
    "stacks": ("stacks", "llama-finetune", "-p", "team-a"),
    "top": ("top",),
    "why": ("why", "llama-finetune", "-p", "team-a"),
}
BUNDLED = {"list": ("list", "-Ap"), "idle": ("idle", "-Ap"), "logs": ("logs", "llama-finetune", "-fp")}


def server_flags(served: Served) -> dict[str, str]:
    """The flags the server used to add, each with a value that would change what the user reads:
    the cluster's admin kubeconfig and context, another identity, another project, an endpoint."""
    return {"--kubeconfig": str(served.kubeconfig), "--context": "ranks-sim", "--as": "admin",
            "--as-group": "system:masters", "--namespace": "runai-team-b", "--prometheus": "http://127.0.0.1:9",
            "--request-timeout": "0"}


def test_every_read_only_command_takes_the_users_words_alone(serve: Callable[..., Served]) -> None:  # noqa: F811
    from tui.cli.group import read_only_commands

    assert set(COMMANDS) == set(read_only_commands()), "a read-only command this test does not feed"
    served = serve("--max-sessions-per-user", "8", "--max-commands-per-user", "8")
    before = baseline(served)
    flags = server_flags(served)
    server_paths = {str(served.dir), str(served.kubeconfig), str(Path(served.kubeconfig).parent), str(Path.home())}

    cases: list[tuple[tuple[str, ...], str]] = []  # (argv, what its one error line must say)
    for name, words in COMMANDS.items():
        for flag, value in flags.items():
            said = f"the flag {flag} is the server's"
            cases += [((*words, flag, value), said), ((name, flag, value, *words[1:]), said),
                      ((*words, f"{flag}={value}"), said)]
        cases.append(((*words, "-o"), "Option '-o' requires an argument"))
        cases.append(((*words, "--", "--as", "admin"), "'--as'" if name == "top" else "unexpected extra arguments (--as admin)"))
    for words in BUNDLED.values():
        cases.append((words, "Option '-p' requires an argument"))

    def run(argv: tuple[str, ...]) -> tuple[tuple[str, ...], int, str, str]:
        r = served.run(*argv, timeout=120)
        return argv, r.returncode, r.stdout, r.stderr

    with ThreadPoolExecutor(4) as pool:
        refused = list(pool.map(run, [argv for argv, _ in cases]))
        # --read-only is of the server's set too, and harmless: the command runs as without it
        plain = {name: pool.submit(run, words) for name, words in COMMANDS.items()}
        read_only = {name: pool.submit(run, (*words, "--read-only")) for name, words in COMMANDS.items()}
    for (argv, rc, out, err), (_, said) in zip(refused, cases, strict=True):
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert rc == 2 and out == "", (argv, rc, out, err)
        assert len(lines) == 1 and lines[0].startswith("ranks: error: ") and said in lines[0], (argv, err)
        assert not [p for p in server_paths if p in err], (argv, err)
        if not any(a.startswith("--") and a != "--" for a in argv):  # nothing of the server's named either
            assert not any(f in err for f in flags), (argv, err)
    for name in COMMANDS:
        _, rc, out, err = plain[name].result()
        argv, rc_ro, out_ro, err_ro = read_only[name].result()
        assert rc_ro == rc and not [p for p in server_paths if p in out_ro + err_ro], (argv, rc, rc_ro, err_ro)
    # alice's own commands ran as alice: her project, not the admin's view
    _, rc, out, err = plain["list"].result()
    assert rc == 0 and "llama-finetune" in out and "team-b" not in out, (rc, out, err)
    r = served.run("list", "-A", "-o", "json", "--read-only")
    assert r.returncode == 0 and {w["namespace"] for w in json.loads(r.stdout)["workloads"]} == {"runai-team-a"}
    assert "refused user=alice" not in served.audit()  # (the server ran each; the command refused the flags)
    same_processes(served, before, 30, "no command's process left")
