"""#15 on simcluster's demo, as a user runs it: each detector finds exactly its seeded case.

The demo seeds one of each: a pending gang (big-pretrain), a failure on a non-zero rank
(bert-crash, worker-1 = rank 2), a hung job (gpt-hung: its logs stop after step 6 and its GPUs go idle
after 20 s), a straggler rank (llama-finetune's worker-2, 2.2x slower), idle interactive sessions
(hvd-interactive, pt-interactive) and training jobs printing progress lines. `ranks why` and
`ranks get` (real processes) say each of these about its own workload and nothing about the others,
and the config's `hang_after_minutes` decides whether gpt-hung is hung.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simcluster.cluster import ThreadedSimCluster, sim_in_thread
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
QUIET = ("resnet-tf", "xgb-churn")  # training jobs with nothing wrong


def ranks(kubeconfig: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_"))}
    env.update(RANKS_CONFIG=str(config), NO_COLOR="1")
    r = subprocess.run([sys.executable, "-m", "tui.cli", *args, "--kubeconfig", str(kubeconfig)],
                       capture_output=True, text=True, timeout=90, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def why(kc: Path, config: Path, name: str) -> dict[str, Any]:
    r = ranks(kc, config, "why", name, "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def kinds(d: dict[str, Any]) -> set[str]:
    return {f["kind"] for f in d["findings"]}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedSimCluster]:
    with sim_in_thread(scenario="demo", workdir=tmp_path_factory.mktemp("diag")) as t:
        yield t


@pytest.fixture
def configs(tmp_path: Path) -> tuple[Path, Path]:
    quick, slow = tmp_path / "quick.toml", tmp_path / "slow.toml"
    quick.write_text("hang_after_minutes = 0.25\n")  # 15 s
    slow.write_text("hang_after_minutes = 10\n")
    for f in (quick, slow):
        f.chmod(0o600)
    return quick, slow


def test_each_detector_finds_its_seeded_case_and_nothing_else(demo: ThreadedSimCluster,
                                                              configs: tuple[Path, Path]) -> None:
    kc = demo.sim.kubeconfig_path
    quick, slow = configs
    # the hang: every rank silent and every GPU idle for over 15 s (the GPUs stall at 20 s)
    hung = wait_for(lambda: (d := why(kc, quick, "gpt-hung")) and "hang" in kinds(d) and d, 90,
                    "gpt-hung found hung", interval=2)
    assert hung["summary"].startswith("hung for "), hung  # (in a few words: the finding says it whole)
    assert any(f["kind"] == "hang" and "every rank's log silent" in f["text"] and f"in {quick}" in f["text"]
               for f in hung["findings"]), hung
    # ...and with the configured 10 minutes, not (yet)
    assert "hang" not in kinds(why(kc, slow, "gpt-hung"))

    # the straggler: worker-2 of llama-finetune, by its steps per second from its log
    def straggler() -> dict[str, Any] | None:
        d = why(kc, quick, "llama-finetune")
        return d if "straggler" in kinds(d) else None

    d = wait_for(straggler, 60, "llama-finetune's straggler", interval=2)
    flagged = [f["text"] for f in d["findings"] if f["kind"] == "straggler"]
    assert len(flagged) == 1 and flagged[0].startswith("worker-2: "), flagged

    # the pending gang and the failure: their own findings, no hang or straggler
    assert {"gang", "fit"} <= kinds(why(kc, quick, "big-pretrain"))
    crash = wait_for(lambda: (c := why(kc, quick, "bert-crash")) and c["status"] == "Failed" and c, 60,
                     "bert-crash failed")
    assert "worker-1" in crash["summary"] and not kinds(crash) & {"hang", "straggler", "silent", "idle"}

    # nothing wrong anywhere else (the interactive sessions' idleness is `ranks idle`'s, not a hang)
    for name in (*QUIET, "hvd-interactive", "pt-interactive"):
        d = why(kc, quick, name)
        assert not kinds(d) & {"hang", "straggler", "silent", "idle"}, (name, d)


def test_get_shows_each_rank_s_last_log_step_and_loss_and_the_health(demo: ThreadedSimCluster,
                                                                     configs: tuple[Path, Path]) -> None:
    kc = demo.sim.kubeconfig_path
    quick, _ = configs

    def progressed() -> dict[str, Any] | None:
        r = ranks(kc, quick, "get", "llama-finetune", "-o", "json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        return doc if all((x.get("step") or 0) >= 3 for x in doc["ranks"]) else None

    doc = wait_for(progressed, 60, "every rank of llama-finetune past step 3", interval=2)
    for x in doc["ranks"]:
        assert isinstance(x["loss"], float) and 0 < x["loss"] < 3 and x["silent_seconds"] < 30, x
    steps = {x["pod"].rsplit("-", 2)[-2] + "-" + x["pod"].rsplit("-", 1)[-1]: x["step"] for x in doc["ranks"]}
    assert steps["worker-2"] < min(v for k, v in steps.items() if k != "worker-2"), steps  # the straggler lags

    r = ranks(kc, quick, "get", "llama-finetune")
    assert r.returncode == 0, r.stderr
    head = next(line for line in r.stdout.splitlines() if line.startswith("ROLE"))
    assert "LAST LOG" in head and "STEP" in head and "LOSS" in head
    if "straggler worker-2" not in r.stdout:  # (rates need a few steps of each rank: once more)
        r = wait_for(lambda: (x := ranks(kc, quick, "get", "llama-finetune")) and "straggler worker-2" in x.stdout
                     and x, 60, "the straggler in ranks get", interval=2)
    assert "Health:" in r.stdout

    for name in QUIET:
        out = ranks(kc, quick, "get", name).stdout
        assert "Health:" not in out, out


def test_the_hung_job_s_autopsy_shows_the_rank_stuck_apart(demo: ThreadedSimCluster, configs: tuple[Path, Path],
                                                          monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """gpt-hung's rank 1 is stuck loading a batch while rank 0 waits for it in the all-reduce
    (#28: the image's py-spy, read through pods/exec); `ranks why` says how to take the autopsy,
    then, once taken, shows it (kept with the flight recording)."""
    kc = demo.sim.kubeconfig_path
    quick, _ = configs
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    hung = wait_for(lambda: (d := why(kc, quick, "gpt-hung")) and "hang" in kinds(d) and d, 90, "gpt-hung hung",
                    interval=2)
    assert hung["autopsy"] == {"taken_at": None, "groups": []}
    said = ranks(kc, quick, "why", "gpt-hung").stdout.splitlines()
    assert any(line.startswith("  stacks: ") and line.endswith(" stacks gpt-hung -p team-b shows where each rank is")
               for line in said), said

    def apart() -> dict[str, Any] | None:
        r = ranks(kc, quick, "stacks", "gpt-hung", "-o", "json")
        data = json.loads(r.stdout) if r.returncode == 0 else None
        inner = {g["frames"][-1]["name"]: g["ranks"] for g in data["groups"]} if data else {}
        return data if inner == {"read_shard": [1], "wait_for_peers": [0]} else None

    data = wait_for(apart, 90, "gpt-hung's ranks in their places", interval=2)
    loader = next(g for g in data["groups"] if g["ranks"] == [1])
    assert [f["name"] for f in loader["frames"]][-2:] == ["load_batch", "read_shard"]
    assert loader["pods"] == ["worker-0"] and "step 6/100000" in loader["last_log"]
    said = ranks(kc, quick, "why", "gpt-hung").stdout.splitlines()
    at = next(i for i, line in enumerate(said) if line.startswith("  stacks: the last autopsy, "))
    assert {line.strip()[:28] for line in said[at + 1:at + 3]} == {"1 rank [0] in wait_for_peers", "1 rank [1] in read_shard (tr"}
    assert why(kc, quick, "gpt-hung")["autopsy"]["groups"][1].strip().startswith("1 rank [1] in read_shard")
