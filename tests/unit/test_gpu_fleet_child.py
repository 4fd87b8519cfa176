"""`ranks gpus` reads every GPU in a child process while it lists the cluster (#30 item 6): the
child's reading is the one the process would have made itself, its failure is the reading's
problem (said in one line, as a source's), a child
still reading when the command stops waiting is killed, and a process with other threads reads
in its own process (no fork)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from monitors import gpu_fleet_child
from monitors.gpu_fleet import Gpu, Owner, with_owner
from monitors.metrics import GpuMetrics
from tests.perf.test_bench_gpus import FakePrometheus, answers

ROOT = Path(__file__).resolve().parents[2]


def _gpus(nodes: int = 3) -> list[dict[str, Any]]:
    out = []
    for i in range(nodes):
        for g in range(8):
            owner = ("team-a", f"job-{i}-worker-{g}") if g < 5 else None
            out.append({"node": f"n{i}", "gpu": str(g), "uuid": f"GPU-{i:08x}-0000-4000-8000-{g:012x}",
                        "owner": owner, "util": (13 * i + 7 * g) % 100 if owner else 0})
    return out


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    with FakePrometheus(answers(_gpus())) as prom:
        yield prom


SCRIPT = """
import asyncio, json, os, pickle, sys
from monitors import gpu_fleet_child
from monitors.metrics import GpuMetrics

url, out = sys.argv[1], sys.argv[2]

async def main():
    apart = gpu_fleet_child.start(lambda: GpuMetrics(url, timeout=10.0))
    pid = apart.pid if apart is not None else None
    read, source = await apart.result()
    here, here_source = await gpu_fleet_child.in_process(GpuMetrics(url, timeout=10.0), False)
    try:
        os.waitpid(pid, os.WNOHANG)
        reaped = False
    except ChildProcessError:
        reaped = True
    with open(out, "wb") as fh:
        pickle.dump((read, here), fh)
    print(json.dumps({"pid": pid, "me": os.getpid(), "reaped": reaped, "source": source.description,
                      "here_source": here_source.description, "problem": read.problem,
                      "queries": read.queries}))

asyncio.run(main())
"""


def _python(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def test_the_child_reads_what_the_process_would_read_itself(prometheus: FakePrometheus, tmp_path: Path) -> None:
    out = tmp_path / "reads.pickle"
    r = _python("-c", SCRIPT, prometheus.url, str(out))
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)
    assert said["pid"] is not None and said["pid"] != said["me"]  # (read apart)
    assert said["reaped"] and not said["problem"] and said["queries"] == 4
    assert said["source"] == said["here_source"] == f"Prometheus at {prometheus.url}"
    with open(out, "rb") as fh:
        apart, here = pickle.load(fh)
    assert len(apart.fleet.gpus) == 24
    assert apart.fleet.gpus == here.fleet.gpus
    assert apart.fleet.fields_by_node == here.fleet.fields_by_node
    assert apart.fleet.pod_labels == here.fleet.pod_labels
    owned = [g for g in apart.fleet.gpus.values() if g.owner is not None]
    assert len(owned) == 15 and {g.owner.namespace for g in owned} == {"team-a"}


FAILING = """
import asyncio, sys
from monitors import gpu_fleet_child
from monitors.metrics import GpuMetrics

def broken():
    raise ValueError("no such metrics")

async def main():
    apart = gpu_fleet_child.start(broken)
    read, source = await apart.result()
    print(read.problem, source, len(read.fleet.gpus))

asyncio.run(main())
"""


def test_a_failure_in_the_child_is_said_by_the_parent() -> None:
    r = _python("-c", FAILING)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ValueError: no such metrics None 0"  # (the reading's problem, as a source's)


class Stalling:
    """A Prometheus that accepts queries and never answers (until the test ends)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.release.wait(60)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


STOPPED = """
import asyncio, json, os, sys, time
from monitors import gpu_fleet_child
from monitors.metrics import GpuMetrics

async def main():
    apart = gpu_fleet_child.start(lambda: GpuMetrics(sys.argv[1], timeout=30.0))
    waiting = asyncio.ensure_future(apart.result())
    await asyncio.sleep(0.5)
    alive = os.waitpid(apart.pid, os.WNOHANG) == (0, 0)
    waiting.cancel()
    apart.close()
    print(json.dumps({"pid": apart.pid, "alive_before": alive}), flush=True)
    os._exit(0)  # (the thread still blocked on the pipe's read: not waited for)

asyncio.run(main())
"""


def test_a_child_still_reading_is_killed_when_the_command_stops_waiting() -> None:
    prom = Stalling()
    try:
        r = _python("-c", STOPPED, prom.url)
    finally:
        prom.close()
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)
    assert said["alive_before"]
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{said['pid']}") and time.monotonic() < deadline:
        time.sleep(0.1)  # (reaped by its parent, which has exited: the pid is gone)
    assert not os.path.exists(f"/proc/{said['pid']}")


def test_a_process_with_other_threads_reads_in_its_own(prometheus: FakePrometheus) -> None:
    assert threading.active_count() > 1  # (the stand-in's server thread)
    assert gpu_fleet_child.start(lambda: GpuMetrics(prometheus.url, timeout=5.0)) is None


def test_gpus_pickle_as_their_fields_and_with_owner_is_replace() -> None:
    from dataclasses import replace

    g = Gpu("n1", 3, "1", "GPU-x", "NVIDIA A100", "3g.40gb", util=41.0, mem_used=1.0, mem_total=2.0, temp=50.0,
            power=100.0, power_limit=400.0, sm_clock=1400.0, reasons=4, xid=79, ecc_sbe=1.0, ecc_dbe=0.0,
            owner=Owner("ns", "pod"), owned_by="labels", allocated=True, owner_unknown=True)
    assert pickle.loads(pickle.dumps(g)) == g
    o = Owner("ns", "pod", "main", "PyTorchJob/j", "PyTorchJob", "j", 2, "worker-1", "p", "u", 5.0)
    assert pickle.loads(pickle.dumps(o)) == o
    assert with_owner(g, o, "uuid", False) == replace(g, owner=o, owned_by="uuid", allocated=False)


ORPHANED = """
import asyncio, sys, time
from monitors import gpu_fleet_child
from monitors.metrics import GpuMetrics

async def main():
    apart = gpu_fleet_child.start(lambda: GpuMetrics(sys.argv[1], timeout=120.0))
    print(apart.pid, flush=True)
    time.sleep(120)  # (killed before)

asyncio.run(main())
"""


def test_a_child_whose_parent_is_killed_ends_with_it() -> None:
    prom = Stalling()
    proc = subprocess.Popen([sys.executable, "-c", ORPHANED, prom.url], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        assert os.path.exists(f"/proc/{child}")
        proc.kill()
        proc.wait(30)
        deadline = time.monotonic() + 20  # (its reading would go on 60 s: Stalling answers nothing till then)
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(child)  # (not left reading for its parent, gone)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        prom.close()


def running(pid: int) -> bool:
    """The process exists and has not ended (a zombie not reaped yet has)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
