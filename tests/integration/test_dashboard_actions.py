"""The dashboard's actions (#7) with `App.run_test()` against simcluster's demo: exec on every
rank, convert with its diff screen, the new-session form, delete and suspend with confirmation,
read-only refusals. (The shell, which needs a real terminal, is tested in tests/e2e.)"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, Log, Select, Static

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests import dashboard_kit as kit
from tests.dashboard_kit import make_app, notifications
from tests.waiting import pilot_wait
from tui.app import RanksApp
from tui.screens.dialogs import ConfirmScreen, ConvertScreen, ExecScreen, NewSessionScreen, PromptScreen
from tui.screens.lists import WorkloadsScreen
from tui.screens.workload import WorkloadScreen

HVD = ("runai-team-a", "MPIJob", "hvd-interactive")
XGB = ("research", "XGBoostJob", "xgb-churn")
RESNET = ("runai-team-b", "TFJob", "resnet-tf")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="demo", workdir=tmp_path_factory.mktemp("sim")) as t:
        yield t


def running(app: RanksApp, key: tuple[str, str, str], ranks: int) -> bool:
    w = app.store.workloads.get(key)
    return w is not None and len(w.ranks) == ranks and all(r.phase == "Running" for r in w.ranks)


async def select(pilot: Pilot[Any], app: RanksApp, key: tuple[str, str, str], ranks: int) -> WorkloadsScreen:
    return await kit.select(pilot, app, key, lambda: running(app, key, ranks))


def job_object(demo: ThreadedSimCluster, key: tuple[str, str, str]) -> dict[str, Any] | None:
    ns, kind, name = key
    plural = kind.lower() + "s"

    def get() -> dict[str, Any] | None:
        obj = demo.sim.store.find(("kubeflow.org", plural), ns, name)
        return None if obj is None else copy.deepcopy(obj.obj)

    return demo.call(get)


async def test_exec_on_every_rank_shows_prefixed_output_and_exit_codes(demo: ThreadedSimCluster) -> None:
    app = make_app(demo.sim.kubeconfig_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await select(pilot, app, HVD, 3)
        await pilot.press("x")
        await pilot_wait(pilot, lambda: isinstance(app.screen, PromptScreen) and bool(app.screen.query(Input)),
                         what="the command prompt", timeout=20)
        app.screen.query_one(Input).value = 'echo "hello from $HOSTNAME"; test "$HOSTNAME" != hvd-interactive-worker-1'
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ExecScreen) and app.screen.done, what="exec to finish", timeout=20)
        lines = list(app.screen.query_one(Log).lines)
        for label, host in (("launcher", "hvd-interactive-launcher"), ("worker-0", "hvd-interactive-worker-0"),
                            ("worker-1", "hvd-interactive-worker-1")):
            assert any(ln.startswith(f"[{label}") and f"hello from {host}" in ln for ln in lines), lines
        summary = str(app.screen.query_one("#summary", Static).content)
        assert "launcher: exit 0" in summary and "worker-0: exit 0" in summary, summary
        assert "worker-1: exit 1" in summary and "1 failed" in summary, summary
        await pilot.press("escape")
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen), what="back to the list", timeout=20)


async def test_convert_shows_the_diff_and_creates_the_job(demo: ThreadedSimCluster) -> None:
    app = make_app(demo.sim.kubeconfig_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await select(pilot, app, HVD, 3)
        await pilot.press("t")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ConvertScreen) and app.screen.ready,
                         what="the convert screen", timeout=20)
        screen = app.screen
        screen.query_one("#command", Input).value = "echo converted-from-dashboard"
        screen.query_one("#name", Input).value = "hvd-dash-train"
        # (ticked when the new job would wait on the session's own GPUs, as in the demo: keep it here)
        screen.query_one("#delete", Checkbox).value = False
        await pilot_wait(pilot, lambda: "echo converted-from-dashboard" in
                         str(screen.query_one("#difftext", Static).content), what="the diff", timeout=20)
        diff = str(screen.query_one("#difftext", Static).content)
        assert "-            - sleep" in diff and "+  name: hvd-dash-train" in diff, diff
        assert "cleanPodPolicy: Running" in diff and "backoffLimit: 3" in diff, diff
        screen.query_one("#name", Input).value = "Bad_Name"
        await pilot_wait(pilot, lambda: "invalid name" in str(screen.query_one("#problem", Static).content),
                         what="the name problem", timeout=20)
        screen.query_one("#name", Input).value = "hvd-dash-train"
        await pilot.pause(0.1)
        await pilot.press("ctrl+s")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation", timeout=20)
        await pilot.press("y")
        new = ("runai-team-a", "MPIJob", "hvd-dash-train")
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.key == new,
                         what="the new job's screen", timeout=20)
        obj = job_object(demo, new)
        assert obj is not None
        launcher = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
        assert launcher["command"] == ["/bin/sh", "-c", "echo converted-from-dashboard"]
        assert job_object(demo, HVD) is not None  # not asked to delete the session


async def test_new_session_form_validates_then_submits(demo: ThreadedSimCluster) -> None:
    app = make_app(demo.sim.kubeconfig_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot_wait(pilot, lambda: app.store.synced, what="sync", timeout=20)
        await pilot.press("n")
        await pilot_wait(pilot, lambda: isinstance(app.screen, NewSessionScreen) and bool(app.screen.query("#f-name")),
                         what="the form", timeout=20)
        form = app.screen
        await pilot.press("ctrl+s")
        problems = str(form.query_one("#problems", Static).content)
        assert "choose a project" in problems and "name" in problems, problems
        form.query_one("#f-name", Input).value = "form-made"
        form.query_one("#f-workers", Input).value = "1"
        form.query_one("#f-gpus", Input).value = "1"
        form.query_one("#f-memory", Input).value = "lots"
        form.query_one("#project", Select).value = "runai-team-b"
        await pilot.press("ctrl+s")
        await pilot_wait(pilot, lambda: "memory" in str(form.query_one("#problems", Static).content),
                         what="the memory problem", timeout=20)
        form.query_one("#f-memory", Input).value = ""
        form.query_one("#f-ports", Input).value = "7000:metrics"
        form.query_one("#f-jupyter", Input).value = "yes"
        await pilot.press("ctrl+s")
        key = ("runai-team-b", "PyTorchJob", "form-made")
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.key == key,
                         what="the new session's screen", timeout=20)
        obj = job_object(demo, key)
        assert obj is not None and obj["metadata"]["annotations"].get("ranks/interactive") == "true"
        lead = obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]  # (#29)
        assert [p["containerPort"] for p in lead["ports"]] == [7000, 8888] and "jupyter lab" in lead["command"][2]
        await pilot_wait(pilot, lambda: key in app.store.workloads and app.store.workloads[key].interactive,
                         what="the session in the model", timeout=20)


async def test_suspend_then_delete_with_confirmation(demo: ThreadedSimCluster) -> None:
    app = make_app(demo.sim.kubeconfig_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await select(pilot, app, RESNET, 4)
        await pilot.press("z")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation", timeout=20)
        await pilot.press("n")  # cancelled: nothing happens
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen), what="back", timeout=20)
        assert not ((job_object(demo, RESNET) or {}).get("spec", {}).get("runPolicy") or {}).get("suspend")
        await pilot.press("z")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation", timeout=20)
        await pilot.press("y")
        await pilot_wait(pilot, lambda: (job_object(demo, RESNET) or {}).get("spec", {}).get("runPolicy", {})
                         .get("suspend") is True, what="runPolicy.suspend", timeout=20)
        await pilot_wait(pilot, lambda: app.store.workloads.get(RESNET) is not None
                         and app.store.workloads[RESNET].status == "Suspended", 30, "Suspended on screen")
        await pilot.press("ctrl+d")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the delete confirmation", timeout=20)
        await pilot.press("y")
        await pilot_wait(pilot, lambda: job_object(demo, RESNET) is None, what="the job deleted", timeout=20)
        await pilot_wait(pilot, lambda: RESNET not in app.store.workloads, what="the row gone", timeout=20)


async def test_read_only_refuses_every_action_and_says_why(demo: ThreadedSimCluster) -> None:
    app = make_app(demo.sim.kubeconfig_path, read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await select(pilot, app, XGB, 3)
        for key in ("s", "x", "t", "z", "ctrl+d", "n", "D"):
            before = len(notifications(app))
            await pilot.press(key)
            await pilot_wait(pilot, lambda b=before: len(notifications(app)) > b, what=f"a refusal for {key}", timeout=20)
            assert isinstance(app.screen, WorkloadsScreen), key
            message = notifications(app)[-1]
            assert message.startswith("read-only mode (") and "refusing to" in message, message
        assert job_object(demo, XGB) is not None


async def test_shell_without_a_real_terminal_says_so(demo: ThreadedSimCluster) -> None:
    app = make_app(demo.sim.kubeconfig_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await select(pilot, app, XGB, 3)
        await pilot.press("s")
        await pilot_wait(pilot, lambda: any("real terminal" in m for m in notifications(app)),
                         what="the headless refusal", timeout=20)
        assert isinstance(app.screen, WorkloadsScreen)


async def test_suspending_a_session_says_what_is_lost_and_kept_and_starts_on_cancel(
        demo: ThreadedSimCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #24, item 3: the session's launches are kept before its pods go; the question says what
    the pods take with them and what ranks keeps, and Enter (on Cancel) suspends nothing."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    record = "@launch\\t7\\t1767225600\\t1767225660\\t0\\thorovodrun\\t/w\\t/w\\thorovodrun -np 2 python train.py"
    r = subprocess.run([sys.executable, "-m", "tui.cli", "exec", HVD[2], "-p", "team-a", "--rank", "launcher", "--",
                        "sh", "-c", f'printf "{record}\\n1767225661\\t0\\thorovodrun -np 2 python train.py\\n" '
                        '> "$HOME/.ranks_history"'], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "KUBECONFIG": str(demo.sim.kubeconfig_path)}, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    app = make_app(demo.sim.kubeconfig_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await select(pilot, app, HVD, 3)
        await pilot.press("z")
        await pilot_wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation", timeout=30)
        screen = app.screen
        assert isinstance(screen, ConfirmScreen)
        text = screen.question.plain
        assert text.startswith("Suspend interactive session mpijob/hvd-interactive?"), text
        assert "every file outside mounted volumes" in text and "ranks keeps the 1 launch recorded" in text, text
        # it starts on Cancel (focused once the screen has mounted its buttons)
        await pilot_wait(pilot, lambda: screen.focused is not None, what="the confirmation's focus", timeout=30)
        assert screen.focused is not None and screen.focused.id == "no"
        await pilot.press("enter")
        await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen), what="back", timeout=20)
        assert not ((job_object(demo, HVD) or {}).get("spec", {}).get("runPolicy") or {}).get("suspend")
    kept = list((tmp_path / "state" / "ranks" / "sessions").rglob("*.json"))
    assert kept and all(p.stat().st_mode & 0o777 == 0o600 for p in kept), kept


async def test_debug_makes_a_session_from_a_job_and_opens_it(demo: ThreadedSimCluster, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #24, item 6: D on a job asks, then creates the session from its spec and opens it (on
    its way, not "deleted", until the watch brings it)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    app = make_app(demo.sim.kubeconfig_path)
    new = (XGB[0], XGB[1], "xgb-churn-debug")
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await select(pilot, app, XGB, 3)
            await pilot.press("D")
            await pilot_wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question", timeout=20)
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.question.plain.startswith("Create the interactive session xgboostjob/xgb-churn-debug "
                                                        "from xgb-churn (running)?"), app.screen.question.plain
            await pilot.press("y")
            await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadScreen) and app.screen.key == new,
                             what="the session's screen", timeout=30)
            assert "this workload was deleted" not in str(app.screen.banner_text() or "")
            obj = job_object(demo, new)
            assert obj is not None and obj["metadata"]["annotations"]["ranks/debug-of"] == "xgb-churn"
            for rspec in obj["spec"]["xgbReplicaSpecs"].values():
                assert rspec["template"]["spec"]["containers"][0]["command"] == ["sleep", "infinity"]
            await pilot_wait(pilot, lambda: new in app.store.workloads and app.store.workloads[new].interactive,
                             what="the session in the model, interactive", timeout=30)
            assert app.screen.banner_text() is None
    finally:
        subprocess.run([sys.executable, "-m", "tui.cli", "delete", new[2], "-p", new[0], "--yes"], capture_output=True,
                       timeout=60, env={**os.environ, "KUBECONFIG": str(demo.sim.kubeconfig_path)},
                       stdin=subprocess.DEVNULL)


PT = ("runai-team-a", "PyTorchJob", "pt-interactive")
TORCHRUN = ("torchrun --nnodes=3 --nproc_per_node=1 --node_rank=$RANK --master_addr=$MASTER_ADDR "
            "--master_port=$MASTER_PORT train.py --steps 2 --step-seconds 0.1")


async def test_a_launch_run_on_every_rank_is_one_convert_takes_with_every_node_s_status(
        demo: ThreadedSimCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #24, item 2: torchrun run on every node through x (run on every rank) is recorded, each
    node with its own status; convert counts it as successful only when every node exited 0, and
    names the node that did not."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    env = {**os.environ, "KUBECONFIG": str(demo.sim.kubeconfig_path), "XDG_STATE_HOME": str(tmp_path / "state")}

    def convert() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tui.cli", "convert", PT[2], "-p", "team-a", "--from-history",
                               "--dry-run"], capture_output=True, text=True, timeout=90, env=env,
                              stdin=subprocess.DEVNULL)

    app = make_app(demo.sim.kubeconfig_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await select(pilot, app, PT, 3)
        for args in ("--fail-rank 2", ""):
            await pilot.press("x")
            await pilot_wait(pilot, lambda: isinstance(app.screen, PromptScreen) and bool(app.screen.query(Input)),
                             what="the command prompt", timeout=20)
            app.screen.query_one(Input).value = f"{TORCHRUN} {args}".strip()
            await pilot.press("enter")
            await pilot_wait(pilot, lambda: isinstance(app.screen, ExecScreen) and app.screen.done,
                             what="the launch to end on every rank", timeout=120)
            summary = str(app.screen.query_one("#summary", Static).content)
            await pilot.press("escape")
            await pilot_wait(pilot, lambda: isinstance(app.screen, WorkloadsScreen), what="back", timeout=20)
            if args:
                assert "1 failed" in summary or "2 failed" in summary or "3 failed" in summary, summary
                r = convert()  # its only launch failed: refused, the failed node named
                assert r.returncode == 1 and "exit 1 on " in r.stderr, r.stderr
            else:
                assert "all succeeded" in summary, summary
    r = convert()
    assert r.returncode == 0, r.stderr
    assert re.match(r"ranks: using the launch from .* \(exit 0 on 3 nodes; 1 later launch did not exit 0\)|"
                    r"ranks: using the launch from .* \(exit 0 on 3 nodes\)", r.stderr), r.stderr
    assert "--steps 2 --step-seconds 0.1" in r.stderr.splitlines()[0] and "--fail-rank" not in r.stderr.splitlines()[0]
