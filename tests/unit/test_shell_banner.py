"""sessions/shell.py: the banner a shell opens with (what to paste on this node, how to reach the
others), its lines cleaned of what the cluster wrote."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sessions import shell
from sessions.cmdline import launcher_in
from sessions.shell import pick_rank
from tests.kubeflow_objects import pod
from tests.unit.session_objects import NS, mpi, workload

# -- shell: the banner --------------------------------------------------------------------------------


def pt_target(rank_label: str = "master-0", workers: int = 2, env: dict[str, str] | None = None) -> shell.ShellTarget:
    pods = [pod("PyTorchJob", "ddp", NS, "Master", 0, gpus=2)] + [
        pod("PyTorchJob", "ddp", NS, "Worker", i, gpus=2) for i in range(workers)]
    wl = workload("PyTorchJob", "ddp", {"Master": 1, "Worker": workers}, pods, labels={"project": "team-a"})
    r = pick_rank(wl, rank=rank_label)
    raw = next(p for p in pods if p["metadata"]["name"] == r.pod)
    base = {"MASTER_ADDR": "ddp-master-0", "MASTER_PORT": "23456", "RANK": str(r.rank), "WORLD_SIZE": str(1 + workers)}
    raw["spec"]["containers"][0]["env"] = [{"name": k, "value": v} for k, v in (env if env is not None else base).items()]
    return shell.ShellTarget(wl, r, "main", raw, [x for x in wl.ranks if x.role == "worker"])


TORCHRUN = ("torchrun --nnodes=3 --nproc_per_node=2 --node_rank=$RANK --master_addr=$MASTER_ADDR "
            "--master_port=$MASTER_PORT train.py")


def test_pytorch_paste_line_is_torchrun_for_this_node_from_the_operators_variables() -> None:
    assert shell.paste_lines(pt_target()) == [TORCHRUN]
    assert shell.paste_lines(pt_target("worker-1")) == [TORCHRUN]  # the same line on every node
    # without the operator's variables: the names it would have used
    assert shell.paste_lines(pt_target(env={"RANK": "0"})) == [
        "torchrun --nnodes=3 --nproc_per_node=2 --node_rank=$RANK --master_addr=ddp-master-0 --master_port=23456 "
        "train.py"]


def test_banner_hint_for_the_other_nodes_is_a_ranks_command_only_with_ranks_on_the_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert shell.ranks_command() is None
    without = shell.banner(pt_target()).split("\r\n")
    assert not any("ranks exec" in ln or "ranks convert" in ln for ln in without), without
    assert "  every node runs torchrun: run line 1 in a shell on each of the other pods too " \
           "(worker-0, worker-1)" in without
    assert without[-3:] == ["  commands and launches are recorded with their exit status in ~/.ranks_history, and "
                            "kept by ranks (convert takes the newest launch that exited 0 on every node)",
                            "  convert (t in the dashboard) turns the last launch into a training job", ""]

    fake = tmp_path / "ranks"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert shell.ranks_command() == "ranks"
    lines = shell.banner(pt_target()).split("\r\n")
    assert lines[lines.index("  ready to paste:") + 1] == f"    {TORCHRUN}"
    at = next(i for i, ln in enumerate(lines) if "run on your machine" in ln)
    assert lines[at] == ("  every node runs torchrun: to start it on the other 2 pods, run on your machine "
                         "(not in this shell):")
    assert lines[at + 1] == f"    ranks exec ddp -p team-a --rank worker-0,worker-1 -- sh -c '{TORCHRUN}'"
    assert lines[-4:] == ["  on your machine,", "    ranks convert ddp -p team-a --from-history",
                          "  turns the last launch into a training job", ""]
    # nothing the banner offers to paste in the pod is a comment, and no hint would be picked from history
    for ln in lines:
        assert launcher_in(ln.strip()) is None or ln.strip() == TORCHRUN, ln
    # from a worker's shell: the others are the master and the other worker
    assert ("    ranks exec ddp -p team-a --rank master-0,worker-1 -- sh -c '" in
            shell.banner(pt_target("worker-0"), cli=True))
    # a master alone: nothing to start elsewhere
    alone = shell.banner(pt_target(workers=0), cli=True)
    assert "ranks exec" not in alone and "--nnodes=1" in alone


def test_banner_hints_run_as_pasted_in_another_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make demo` runs `.venv/bin/ranks` (not on the PATH) on the demo's own kubeconfig: the hints
    name that program and that kubeconfig; over the SSH door there is no such hint."""
    from monitors.connection import ClusterConfig

    venv = tmp_path / "my venv" / "bin"
    venv.mkdir(parents=True)
    own = venv / "ranks"
    own.write_text("#!/bin/sh\n")
    own.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv(shell.SSH_SESSION_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", [str(own), "demo"])
    cfg = ClusterConfig(server="https://127.0.0.1:1", context="sim", namespace="default", user="admin",
                        kubeconfig_arg=str(tmp_path / "demo" / "kubeconfig"))
    prefix = f"'{own}' --kubeconfig {tmp_path}/demo/kubeconfig"
    assert shell.ranks_command(cfg) == prefix
    lines = shell.banner(pt_target(), cli=shell.ranks_command(cfg)).split("\r\n")
    assert f"    {prefix} exec ddp -p team-a --rank worker-0,worker-1 -- sh -c '{TORCHRUN}'" in lines
    at = lines.index(f"    {prefix} convert ddp -p team-a --from-history")  # whole: it runs as pasted
    assert lines[at - 1:at + 2:2] == ["  on your machine,", "  turns the last launch into a training job"]
    cfg.context_arg = "other"
    assert shell.ranks_command(cfg) == prefix + " --context other"
    # `ranks` on the PATH is this very program: its name is enough
    monkeypatch.setenv("PATH", str(venv))
    assert shell.ranks_command(None) == "ranks"
    # started some other way (python -m), with no ranks on the PATH: no command to offer
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/tui/cli/__main__.py"])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert shell.ranks_command(cfg) is None
    assert "ranks exec" not in shell.banner(pt_target(), cli=shell.ranks_command(cfg) or False)
    monkeypatch.setattr(sys, "argv", [str(own)])
    monkeypatch.setenv(shell.SSH_SESSION_ENV, "1")
    assert shell.ranks_command(cfg) is None


def test_mpi_banner_lines_run_in_the_launcher() -> None:
    wl = mpi()
    raw = pod("MPIJob", "hvd", NS, "Launcher", None, gpus=0, name="hvd-launcher-x7k2p")
    raw["spec"]["containers"][0]["env"] = [{"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                                           {"name": "OMPI_MCA_orte_set_default_slots", "value": "1"}]
    target = shell.ShellTarget(wl, pick_rank(wl), "main", raw, [x for x in wl.ranks if x.role == "worker"])
    hosts = f"hvd-worker-0.hvd.{NS}.svc:1,hvd-worker-1.hvd.{NS}.svc:1"
    assert shell.paste_lines(target) == [f"horovodrun -np 2 -H {hosts} python train.py",
                                         "horovodrun -np 2 -hostfile /etc/mpi/hostfile python train.py",
                                         "mpirun -np 2 --hostfile /etc/mpi/hostfile python train.py"]
    text = shell.banner(target, cli=True)
    assert "ranks exec" not in text  # the launcher starts every rank
    assert f"  hostfile /etc/mpi/hostfile: hvd-worker-0.hvd.{NS}.svc, hvd-worker-1.hvd.{NS}.svc" in text


def test_banner_cleans_what_the_cluster_wrote() -> None:
    target = pt_target(env={"MASTER_ADDR": "evil\x1b]0;pwned\x07-0", "MASTER_PORT": "1\x1b[2J", "RANK": "0"})
    text = shell.banner(target, cli=True)
    assert "\x1b" not in text and "\x07" not in text




def test_banner_lists_the_sessions_ports_and_how_to_reach_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """#29: the ports the pod declares (`ranks submit --port/--jupyter`), not the operator's own."""
    target = pt_target()
    target.pod["spec"]["containers"][0]["ports"] = [
        {"containerPort": 8888, "name": "jupyter"}, {"containerPort": 7000},
        {"containerPort": 23456, "name": "pytorchjob-port"}]
    text = shell.banner(target, cli=True)
    assert ("  ports 8888 (jupyter), 7000: on your machine,\r\n    ranks port-forward ddp -p team-a 8888 7000\r\n"
            "  reaches them (or P in the dashboard)\r\n") in text
    monkeypatch.setenv(shell.SSH_SESSION_ENV, "1")
    over_door = shell.banner(target, cli=False).split("\r\n")
    at = over_door.index("  ports 8888 (jupyter), 7000: on your machine,")
    assert over_door[at + 1:at + 3] == [
        "    ssh -N -L 8888:master-0.ddp.team-a:8888 -L 7000:master-0.ddp.team-a:7000 <this server>", "  reaches them"]
    assert over_door[-2].endswith("turns the last launch into a training job")
    monkeypatch.setenv("RANKS_SSH_HOST", "alice@10.0.0.5")  # (the door says how the user reached it)
    monkeypatch.setenv("RANKS_SSH_PORT", "2222")
    assert ("    ssh -N -L 8888:master-0.ddp.team-a:8888 -L 7000:master-0.ddp.team-a:7000 -p 2222 alice@10.0.0.5"
            in shell.banner(target, cli=False).split("\r\n"))
    assert not any("ports" in ln for ln in shell.banner(pt_target(), cli=True).split("\r\n"))


@pytest.mark.parametrize("width", [80, 60, 40])
def test_banner_words_wrap_at_spaces_to_the_terminal_and_its_commands_stay_whole(width: int) -> None:
    """An SSH user's 80x24 (and narrower): the banner's words wrap at spaces, each line within the
    width, every word whole; the lines to paste and the hints' commands are never cut."""
    target = pt_target()
    target.pod["spec"]["containers"][0]["ports"] = [{"containerPort": 8888, "name": "jupyter"}]
    cli = "'/home/me/ranks dir/.venv/bin/ranks' --kubeconfig /home/me/ranks/.ranks-demo/kubeconfig"
    wide = shell.banner(target, cli=cli).split("\r\n")
    fitted = shell.banner(target, cli=cli, width=width).split("\r\n")
    commands = [ln for ln in wide if ln.startswith("    ")]
    assert len(commands) == 4 and all(ln in fitted for ln in commands), fitted  # whole, as they run
    assert any(len(ln) > width for ln in wide if not ln.startswith("    "))  # (there is something to wrap)
    words = [ln for ln in fitted if not ln.startswith("    ")]
    assert all(len(ln) <= width for ln in words), [ln for ln in words if len(ln) > width]
    assert " ".join(" ".join(ln.split()) for ln in fitted) == " ".join(" ".join(ln.split()) for ln in wide)
    assert ("  turns the last launch into a training job" in fitted) is (width >= 44)  # (its one line)
