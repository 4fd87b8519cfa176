"""Nothing lost, proved by sequence numbers (issue #17, item 0).

One PyTorchJob (operators, scheduler, kubelet: its ranks are real processes) whose every rank
prints `rank=<r> seq=<n>` every 50 ms, the count kept in a file outside the pod, so it goes on
across a container restart and a replaced pod: a rank's lines are numbered 0, 1, 2... over its
whole life, and the file says how many it printed. Six readers follow it at once:

- `ranks logs -f` as real processes: text (with `--timestamps`), `-o json`, `-o json --since 2s`,
  text `--tail 5`, `-o json --tail 0`;
- the dashboard's log view (`RanksApp` under `run_test`, its screen's buffer read).

While they follow, the job goes through, one after the other: a stalled stream (the log endpoint
goes silent with the connection open after 100 bytes) together with a rank restarting, a pod
deleted and replaced by the operator, every watch dropped, the kubelet rotating a rank's log
file (a follow open across it gets nothing more, as `kubectl logs -f` stops at rotation), the API
server stopped for 20 s and back, and the job finishing. Each fault is checked to have happened.

Every reader must then have every line of every rank exactly once, in order per rank, from the
line its boundary says (the first line for the full follows; `--since`: the first line at or after
the API server's request time minus 2 s; `--tail 5`: the newest 5 lines of the merged history;
`--tail 0`: the first line after the history was read) to the last line each rank printed.
One-shot `--tail` reads of the finished job end exactly where the full history ends.
The figures (cases, lines checked, gaps, duplicates, processes left behind) are printed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from monitors.connection import load_cluster_config
from monitors.logs.lines import parse_ts
from simcluster.cluster import ThreadedSimCluster
from simcluster.operators.common import api_delete, rtype
from simcluster.scenarios.nodes import gpu_node
from tests.dashboard_kit import make_app
from tests.faults import assert_consumed
from tests.waiting import pilot_wait, processes_matching
from tui.screens.logs import LogsScreen
from tui.settings import Settings

NS = "default"
JOB = "seq"
KEY = (NS, "PyTorchJob", JOB)
LABELS = ("master-0", "worker-0", "worker-1")
ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
SINCE = 2
SLACK = 1.0  # s: how far a loaded machine can delay the kubelet's write of a line after stamping it
SEQ = re.compile(r"rank=(\d+) seq=(\d+)$")

# a rank: prints its next number every 50 ms; the count lives in $SEQ_DIR/rank-<r> (written after
# each line, so a new instance or a new pod goes on where the last one stopped); `crash-<r>` makes
# it exit 1 (the kubelet restarts it), `finish` makes every rank exit 0; SIGTERM ends it after the
# line it is at (a deleted pod).
RANK_PROGRAM = """\
import os, signal, sys, time
d = os.environ["SEQ_DIR"]; r = os.environ["RANK"]
count = os.path.join(d, "rank-" + r)
n = int(open(count).read()) if os.path.exists(count) else 0
stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
while True:
    print(f"rank={r} seq={n}", flush=True)
    n += 1
    with open(count + ".tmp", "w") as f:
        f.write(str(n))
    os.replace(count + ".tmp", count)
    if stop or os.path.exists(os.path.join(d, "finish")):
        sys.exit(0)
    crash = os.path.join(d, "crash-" + r)
    if os.path.exists(crash):
        os.unlink(crash)
        sys.exit(1)
    time.sleep(0.05)
"""


def seq_job(seq_dir: Path) -> dict[str, Any]:
    def spec(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{"name": "pytorch", "image": "img", "command": [PY, "-c", RANK_PROGRAM, "nothing-lost"],
                            "env": [{"name": "SEQ_DIR", "value": str(seq_dir)}]}]}}}

    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": JOB, "namespace": NS},
        "spec": {"runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 10},
                 "pytorchReplicaSpecs": {"Master": spec(1), "Worker": spec(2)}},
    }


# -- what a reader got --------------------------------------------------------------------------


@dataclass
class Got:
    """One reader's lines: per rank, (seq, ts ns or None) in the order received."""

    name: str
    lines: dict[str, list[tuple[int, int | None]]] = field(default_factory=dict)
    order: list[tuple[str, int, int | None]] = field(default_factory=list)  # (label, seq, ts) as received
    other: list[str] = field(default_factory=list)  # lines that are not numbered lines

    def add(self, label: str, text: str, ts: int | None) -> None:
        m = SEQ.search(text)
        if m is None or LABELS[int(m.group(1))] != label:
            self.other.append(f"[{label}] {text}")
            return
        self.lines.setdefault(label, []).append((int(m.group(2)), ts))
        self.order.append((label, int(m.group(2)), ts))

    def seqs(self, label: str) -> list[int]:
        return [s for s, _ in self.lines.get(label, [])]

    def last(self, label: str) -> int:
        s = self.seqs(label)
        return s[-1] if s else -1

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.lines.values())


def parse_text(name: str, text: str, *, timestamps: bool) -> Got:
    got = Got(name)
    for raw in text.splitlines():
        ts = None
        if timestamps:
            stamp, _, raw = raw.partition(" ")
            ts = parse_ts(stamp.encode())
        m = re.match(r"\[([^\]]+)\]\s+(.*)$", raw)
        if m is None:
            got.other.append(raw)
            continue
        got.add(m.group(1), m.group(2), ts)
    return got


def parse_json(name: str, text: str) -> Got:
    got = Got(name)
    for raw in text.splitlines():
        try:
            row = json.loads(raw)
        except ValueError:  # a line being written: the rest comes later
            continue
        got.add(row["label"], row["line"], parse_ts(row["ts"].encode()))
    return got


@dataclass
class Check:
    """Gaps and duplicates of one reader against what each rank printed."""

    name: str
    lines: int = 0
    gaps: int = 0
    duplicates: int = 0
    disorder: int = 0
    problems: list[str] = field(default_factory=list)


def check(got: Got, totals: dict[str, int], first: dict[str, int]) -> Check:
    c = Check(got.name, lines=got.total)
    for label in LABELS:
        seqs = got.seqs(label)
        c.duplicates += len(seqs) - len(set(seqs))
        c.disorder += sum(1 for a, b in itertools.pairwise(seqs) if b <= a)
        want = list(range(first[label], totals[label]))
        missing = sorted(set(want) - set(seqs))
        extra = sorted(set(seqs) - set(want))
        c.gaps += len(missing)
        c.duplicates += len(extra)  # lines before the boundary: shown although the boundary excludes them
        if missing or extra or seqs != want:
            c.problems.append(f"{label}: {len(seqs)} lines {_ranges(seqs)}, want {first[label]}..{totals[label] - 1}; "
                              f"missing {_ranges(missing)[:200]}, not wanted {_ranges(extra)[:200]}")
    if got.other:
        c.problems.append(f"lines that are not numbered: {got.other[:5]}")
    return c


def _ranges(seqs: list[int]) -> str:
    if not seqs:
        return "[]"
    out: list[str] = []
    start = prev = seqs[0]
    for s in [*seqs[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return "[" + ",".join(out) + "]"


# -- the readers ----------------------------------------------------------------------------------


class Follower:
    """`ranks logs JOB -f ...` as a real process, its output in a file."""

    def __init__(self, name: str, kubeconfig: Path, out_dir: Path, *args: str) -> None:
        self.name = name
        self.args = args
        self.json = "json" in args
        self.timestamps = "--timestamps" in args
        self.out = out_dir / f"{name}.out"
        self.err = out_dir / f"{name}.err"
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
        env["XDG_STATE_HOME"] = str(out_dir / "state")  # the flight recorder writes there (a rank fails)
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen([PY, "-m", "tui.cli", "logs", JOB, "-p", NS, "-f", *args,
                                          "--kubeconfig", str(kubeconfig)],
                                         stdout=out, stderr=err, env=env, cwd=ROOT)
        self.started = time.time()

    def got(self) -> Got:
        text = self.out.read_bytes().decode("utf-8", "replace")
        text = text[: text.rfind("\n") + 1]  # whole lines only (the process may be writing)
        if self.json:
            return parse_json(self.name, text)
        return parse_text(self.name, text, timestamps=self.timestamps)

    def stderr(self) -> str:
        return self.err.read_bytes().decode("utf-8", "replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def dashboard_got(screen: LogsScreen) -> Got:
    got = Got("dashboard")
    for line in screen.buffer:
        if line.kind == "line":
            got.add(line.label, line.text, line.ts)
        else:
            got.other.append(f"({line.kind}) {line.text}")
    return got


# -- the cluster ----------------------------------------------------------------------------------


def counts(seq_dir: Path) -> dict[str, int]:
    """How many lines each rank has printed (its count file)."""
    out = {}
    for k, label in enumerate(LABELS):
        f = seq_dir / f"rank-{k}"
        out[label] = int(f.read_text() or 0) if f.exists() else 0
    return out


def pod_state(t: ThreadedSimCluster, name: str) -> tuple[str, str, int]:
    """(uid, phase, restarts of its container) of the pod, ("", "", 0) when it does not exist."""

    def read() -> tuple[str, str, int]:
        st = t.sim.store.find(("", "pods"), NS, name)
        if st is None:
            return "", "", 0
        status = st.obj.get("status") or {}
        cs = status.get("containerStatuses") or [{}]
        return st.obj["metadata"]["uid"], status.get("phase", ""), int(cs[0].get("restartCount", 0))

    return t.call(read)


def job_status(t: ThreadedSimCluster) -> set[str]:
    def read() -> set[str]:
        st = t.sim.store.find(("kubeflow.org", "pytorchjobs"), NS, JOB)
        conds = ((st.obj.get("status") or {}).get("conditions") or []) if st else []
        return {c["type"] for c in conds if c.get("status") == "True"}

    return t.call(read)


def delete_pod(t: ThreadedSimCluster, name: str) -> None:
    def delete() -> None:
        st = t.sim.store.find(("", "pods"), NS, name)
        assert st is not None
        api_delete(t.sim, rtype(t.sim, "", "v1", "pods"), st.obj)

    t.call(delete)


def first_log_requests(t: ThreadedSimCluster, since: float, want: Callable[[dict[str, list[str]]], bool]
                       ) -> dict[str, float]:
    """Per rank label, when the first non-follow log request since `since` matching `want` (its
    query) arrived."""
    out: dict[str, float] = {}
    for r in t.call(t.sim.requests.since, since):
        m = re.search(rf"/pods/{JOB}-(master|worker)-(\d)/log$", r.path)
        if m is None:
            continue
        q = parse_qs(r.query)
        if "follow" in q or "previous" in q or not want(q):
            continue
        label = f"{m.group(1)}-{m.group(2)}"
        out.setdefault(label, r.at)
    return out


# -- the test -------------------------------------------------------------------------------------


@pytest.mark.simcluster(components=("operators", "scheduler", "kubelet"))
async def test_every_line_exactly_once_across_faults(simcluster: ThreadedSimCluster, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    t = simcluster
    sim = t.sim
    seq_dir = sim.workdir / "seq"
    seq_dir.mkdir()
    t.call(setattr, sim.kubelet, "backoff_base", 0.3)
    t.call(sim.apply, gpu_node("gpu-0", 8))
    t.call(sim.apply, seq_job(seq_dir))
    began = time.monotonic()

    def running() -> bool:
        return all(pod_state(t, f"{JOB}-{label}")[1] == "Running" for label in LABELS) and \
            min(counts(seq_dir).values()) >= 5

    deadline = time.monotonic() + 30
    while not running():
        assert time.monotonic() < deadline, "the job's pods did not start"
        await asyncio.sleep(0.1)

    kubeconfig = sim.kubeconfig_path
    followers: list[Follower] = []
    cases: list[str] = []
    app = make_app(kubeconfig, Settings())
    try:
        followers.append(Follower("text", kubeconfig, tmp_path, "--timestamps"))
        followers.append(Follower("json", kubeconfig, tmp_path, "-o", "json"))
        since_at = time.time()
        followers.append(Follower("json --since", kubeconfig, tmp_path, "-o", "json", "--since", f"{SINCE}s"))
        tail5_at = time.time()
        followers.append(Follower("text --tail 5", kubeconfig, tmp_path, "--tail", "5", "--timestamps"))
        tail0_at = time.time()
        followers.append(Follower("json --tail 0", kubeconfig, tmp_path, "-o", "json", "--tail", "0"))
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot_wait(pilot, lambda: app.store.synced and KEY in app.store.workloads, timeout=30,
                             what="the dashboard's first picture")
            app.open_logs(KEY)
            await pilot_wait(pilot, lambda: isinstance(app.screen, LogsScreen), what="the log view")
            screen = app.screen
            assert isinstance(screen, LogsScreen)

            def readers() -> list[Got]:
                return [f.got() for f in followers] + [dashboard_got(screen)]

            async def caught_up(what: str, timeout: float = 30) -> None:
                """Every reader has every rank's lines up to what the ranks had printed half a
                second from now (lines written after what just happened)."""
                await pilot.pause(0.5)
                now = counts(seq_dir)

                def behind() -> list[str]:
                    return [f"{g.name}/{label}: {g.last(label)} < {now[label] - 1}"
                            for g in readers() for label in LABELS if g.last(label) < now[label] - 1]

                await pilot_wait(pilot, lambda: not behind(), timeout=timeout, what=f"readers caught up {what}",
                                 interval=0.2, detail=behind)

            await caught_up("at the start")
            for f in followers:
                assert f.proc.poll() is None, (f.name, f.stderr())

            # a stalled stream and a rank restarting: worker-0 exits 1 and the kubelet restarts it;
            # the first three reads of its log after that (follows reopened as its instance ended)
            # go silent after 100 bytes, within a line, the connection open
            stall = rf"/pods/{JOB}-worker-0/log$"
            t.call(sim.faults.stall_next, stall, 100, 3)
            (seq_dir / "crash-1").touch()
            await pilot_wait(pilot, lambda: pod_state(t, f"{JOB}-worker-0")[2] >= 1, timeout=20,
                             what="worker-0 restarted")
            await pilot_wait(pilot, lambda: counts(seq_dir)["worker-0"] > 0 and not (seq_dir / "crash-1").exists(),
                             what="crash consumed")
            await caught_up("after the restart and the stalls", timeout=40)
            assert_consumed(t, stall)
            cases += ["a rank restarting", "a stalled stream"]

            # a pod replaced: worker-1 deleted, the operator makes a new one under the same name
            old_uid = pod_state(t, f"{JOB}-worker-1")[0]
            delete_pod(t, f"{JOB}-worker-1")
            await pilot_wait(pilot, lambda: pod_state(t, f"{JOB}-worker-1")[0] not in ("", old_uid)
                             and pod_state(t, f"{JOB}-worker-1")[1] == "Running", timeout=30, what="worker-1 replaced")
            await caught_up("after the pod was replaced")
            cases.append("a pod replaced")

            # every watch dropped
            assert t.call(sim.store.drop_watches) > 0
            await caught_up("after the watches were dropped")
            cases.append("a dropped watch")

            # the kubelet rotates master-0's log file: a follow open across it gets nothing more
            rotated = t.call(sim.kubelet.rotate_log, NS, f"{JOB}-master-0", "pytorch")
            assert rotated is not None and rotated.exists()
            await caught_up("after the log rotation")

            async def master_stalls() -> list[int]:
                engine = app.data.engines.open[KEY]
                return [s.stalls for s in engine.streams.values() if s.origin.pod == f"{JOB}-master-0"]

            stalls = await asyncio.wrap_future(app.data.run_coroutine(master_stalls()))
            assert stalls and stalls[0] >= 1, stalls  # the dashboard's follow of master-0 was stuck, and noticed
            cases.append("log rotation")

            # the API server stopped for 20 s and back
            await asyncio.to_thread(t.run, sim.restart(down_for=20))
            await caught_up("after the API server came back", timeout=40)
            cases.append("the API server stopped for 20 s")

            # the job finishes: every rank's last line is kept
            (seq_dir / "finish").touch()
            await pilot_wait(pilot, lambda: "Succeeded" in job_status(t), timeout=30, what="job succeeded")
            for f in followers:  # each follow ends by itself once every rank ended and the job is done
                rc = await asyncio.to_thread(f.proc.wait, 30)
                assert rc == 0, (f.name, rc, f.stderr())
            totals = counts(seq_dir)
            await caught_up("after the job finished")
            cases.append("the job finishing")
            results = readers()
    finally:
        for f in followers:
            f.kill()

    by_name = {g.name: g for g in results}
    # gaps and duplicates: the full follows from each rank's first line, the others from their
    # first line shown (where their boundary says: checked below) to each rank's last line
    firsts: dict[str, dict[str, int]] = {g.name: dict.fromkeys(LABELS, 0) for g in results}
    for name in ("json --since", "text --tail 5", "json --tail 0"):
        for label in LABELS:
            shown = by_name[name].seqs(label)
            firsts[name][label] = shown[0] if shown else totals[label]
    checks = [check(g, totals, firsts[g.name]) for g in results]
    cases.append("--since/--tail boundaries")  # (their first lines: checked below)
    left = processes_matching(str(kubeconfig))
    figures = {"cases": cases, "readers": [c.name for c in checks], "lines checked": sum(c.lines for c in checks),
               "gaps": sum(c.gaps for c in checks), "duplicates": sum(c.duplicates for c in checks),
               "out of order": sum(c.disorder for c in checks), "processes left behind": len(left),
               "lines printed": totals, "seconds": round(time.monotonic() - began, 1)}
    print("nothing lost:", json.dumps(figures))
    problems = [f"{c.name}: {p}" for c in checks for p in c.problems]
    assert not problems, "\n".join(problems)
    assert figures["gaps"] == 0 and figures["duplicates"] == 0 and figures["out of order"] == 0, figures
    assert not left, left
    for f in followers:
        err = f.stderr()
        assert "Traceback" not in err, (f.name, err)
        assert "connected to the API server again" in err, (f.name, err)  # the outage was seen

    # where each reader started, against every line's timestamp (from the full JSON follow)
    ts_of = {label: dict(by_name["json"].lines[label]) for label in LABELS}

    def ts(label: str, s: int) -> int:
        value = ts_of[label].get(s)
        assert value is not None, (label, s)
        return value

    # --since 2s: the first line at or after the request's arrival minus 2 s (the kubelet stamps a
    # line as it reads it and writes its file every 25 ms; a loaded machine delays the write: SLACK)
    asked = first_log_requests(t, since_at, lambda q: q.get("sinceSeconds") == [str(SINCE)])
    assert set(asked) == set(LABELS), asked
    for label in LABELS:
        shown = by_name["json --since"].seqs(label)
        boundary = (asked[label] - SINCE) * 1e9
        assert shown and ts(label, shown[0]) >= boundary, (label, shown[:3], boundary)
        assert shown[0] == 0 or ts(label, shown[0] - 1) < boundary + SLACK * 1e9, (label, shown[:3], boundary)

    # --tail 5: the first five lines printed are the newest five of the merged history, in time
    # order: each rank's line before its first shown one is older than them, and of the lines
    # that were surely in the files when they were read (SLACK before the first read: the kubelet
    # writes every 25 ms, later on a loaded machine), only those five are shown
    asked5 = first_log_requests(t, tail5_at, lambda q: q.get("tailLines") == ["5"])
    assert set(asked5) == set(LABELS), asked5
    tail5 = by_name["text --tail 5"]
    head = tail5.order[:5]
    cut = min(h[2] or 0 for h in head)
    assert len(head) == 5 and [h[2] for h in head] == sorted(h[2] or 0 for h in head), head
    surely_old = [o for o in tail5.order if (o[2] or 0) < (min(asked5.values()) - SLACK) * 1e9]
    assert all(o in head for o in surely_old), (head, surely_old[:8])
    for label in LABELS:
        shown = tail5.seqs(label)
        assert shown, label
        assert shown[0] == 0 or ts(label, shown[0] - 1) < cut, (label, shown[:3], head)

    # --tail 0: each rank from the first line after its history read (the newest line then);
    # SLACK allowed either way (the kubelet writes the file every 25 ms, later when loaded)
    asked0 = first_log_requests(t, tail0_at, lambda q: q.get("tailLines") in (["0"], ["1"]))
    assert set(asked0) == set(LABELS), asked0
    for label in LABELS:
        shown = by_name["json --tail 0"].seqs(label)
        assert shown, label
        assert ts(label, shown[0]) >= (asked0[label] - SLACK) * 1e9, (label, shown[:3])
        assert shown[0] == 0 or ts(label, shown[0] - 1) < (asked0[label] + SLACK) * 1e9, (label, shown[:3])

    # one-shot reads of the finished job: --tail N ends exactly where the whole history ends
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")

    def one_shot(*args: str) -> list[dict[str, Any]]:
        r = subprocess.run([PY, "-m", "tui.cli", "logs", JOB, "-p", NS, "-o", "json", *args,
                            "--kubeconfig", str(kubeconfig)], capture_output=True, text=True, env=env, cwd=ROOT,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return [json.loads(line) for line in r.stdout.splitlines()]

    whole = one_shot()
    for n in (1, 7):
        assert one_shot("--tail", str(n)) == whole[-n:], n
    history = Got("history")
    for row in whole:
        history.add(row["label"], row["line"], None)
    for label in LABELS:  # the whole history ends with each rank's last line, once
        seqs = history.seqs(label)
        assert seqs and seqs[-1] == totals[label] - 1 and len(seqs) == len(set(seqs)), label
    print("boundaries: --since, --tail 5, --tail 0 (follows), --tail 1, --tail 7 (one-shot): exact")


@pytest.mark.simcluster(components=("kubelet",))
async def test_simcluster_rotation_leaves_an_open_follow_behind(simcluster_async: Any) -> None:
    """The fault the big test relies on is real: after `rotate_log` a follow opened before it
    gets the rotated file to its end and then nothing (the connection open, as `kubectl logs -f`
    stops at rotation), and a new read gets only the new file, which goes on where it ended."""
    from monitors.kube import KubeClient
    from tests.integration.test_logs import kf_pod, phase_of, seed
    from tests.waiting import until

    sim = simcluster_async
    prog = "import time\nfor i in range(100000):\n    print(f'n {i}', flush=True)\n    time.sleep(0.02)\n"
    seed(sim, "rot", [kf_pod("rot", "Master", 0, [PY, "-c", prog])], workers=0)
    await until(lambda: phase_of(sim, "rot-master-0") == "Running", what="running", timeout=20)
    path = f"/api/v1/namespaces/{NS}/pods/rot-master-0/log"
    async with KubeClient(load_cluster_config(str(sim.kubeconfig_path))) as client:
        got: list[bytes] = []

        async def follow() -> None:
            async with client.session().get(client.server + path, params={"follow": "true"},
                                            headers=client.headers("*/*")) as resp:
                async for chunk in resp.content.iter_any():
                    got.append(chunk)

        task = asyncio.create_task(follow())
        try:
            await until(lambda: b"n 10\n" in b"".join(got), what="the follow's first lines", timeout=10)
            rotated = sim.kubelet.rotate_log(NS, "rot-master-0", "pytorch")
            assert rotated is not None
            await asyncio.sleep(0.3)
            before = b"".join(got)
            await asyncio.sleep(1.0)
            assert b"".join(got) == before and not task.done()  # stuck: nothing more, still open
            now = (await client.request("GET", path, accept="*/*")).decode().splitlines()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    followed = before.decode().splitlines()
    assert followed == [f"n {i}" for i in range(len(followed))]  # everything up to the rotation
    assert now[0] == f"n {len(followed)}", (followed[-2:], now[:2])  # the new file: only what came after
    assert len(now) >= 40  # lines the stuck follow missed
    assert [ln.split(" ", 3)[-1] for ln in rotated.read_text().splitlines()] == followed


@pytest.mark.simcluster(components=("kubelet",))
def test_follow_boundaries_of_a_quiet_rank(simcluster: ThreadedSimCluster, tmp_path: Path) -> None:
    """`-f --since 1s` and `-f --tail 0` started while a rank is quiet: its older lines are outside
    the boundary, so the follow starts with the first line it prints next (not its whole log)."""
    from tests.integration.test_logs import kf_pod, phase_of, seed, timed

    t = simcluster
    sim = t.sim
    t0 = time.time() + 1.0
    QUIET = 10.0  # s: the rank's silence, in which both commands start (a loaded CI machine takes seconds)
    lines = [(0.05 * i, f"rank=0 seq={i}") for i in range(10)] + [(QUIET + 0.05 * i, f"rank=0 seq={i}")
                                                                  for i in range(10, 20)]
    t.call(seed, sim, "quiet", [kf_pod("quiet", "Master", 0, timed(lines, t0, then_sleep=30))], workers=0)
    while time.time() < t0 + 1.6:  # the first lines (to t0 + 0.45) older than --since 1s once read
        time.sleep(0.05)
    assert t.call(phase_of, sim, "quiet-master-0") == "Running"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "NO_COLOR")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    procs = {}
    for name, args in (("since", ("--since", "1s")), ("tail", ("--tail", "0"))):
        out = open(tmp_path / f"{name}.out", "wb")  # noqa: SIM115 - closed below
        procs[name] = (subprocess.Popen([PY, "-m", "tui.cli", "logs", "quiet", "-p", NS, "-f", "-o", "json", *args,
                                         "--kubeconfig", str(sim.kubeconfig_path)],
                                        stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=ROOT), out)
    try:
        deadline = time.monotonic() + 30
        while not all(b"seq=19" in (tmp_path / f"{n}.out").read_bytes() for n in procs):
            assert time.monotonic() < deadline, {n: (tmp_path / f"{n}.out").read_text() for n in procs}
            time.sleep(0.1)
        time.sleep(0.3)
    finally:
        for proc, out in procs.values():
            proc.kill()
            proc.wait(10)
            out.close()
    reads = [(r.at, parse_qs(r.query)) for r in t.call(sim.requests.since, t0 - 1)
             if r.path.endswith("/pods/quiet-master-0/log")]
    histories = [next(at for at, q in reads if key in q and "follow" not in q) for key in ("sinceSeconds", "tailLines")]
    assert all(t0 + 1.5 < at < t0 + QUIET - 0.1 for at in histories), \
        "the history was not read while the rank was quiet"
    for name in procs:
        got = parse_json(name, (tmp_path / f"{name}.out").read_text())
        assert got.seqs("master-0") == list(range(10, 20)), (name, got.seqs("master-0"))
