"""Benchmarks: each prints its figures (run with `make bench`, i.e. pytest -s -m perf)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kubectl_binary import kubectl_path
from tests.perf.results import record_outcome

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/perf/" in str(item.fspath):
            item.add_marker(pytest.mark.perf)


@dataclass
class SimProcess:
    proc: subprocess.Popen[str]
    kubeconfig: Path
    url: str
    token: str
    ca: Path

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0


def start_sim(tmp: Path, *args: str, timeout: float = 180) -> SimProcess:
    kc = tmp / "kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "sim", "--kubeconfig", str(kc), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("ready:") or not line:
            break
    if not line.startswith("ready:"):
        proc.kill()
        raise RuntimeError(f"simcluster did not start: {proc.stderr.read() if proc.stderr else ''}")
    cfg = yaml.safe_load(kc.read_text())
    import base64

    ca = tmp / "ca.pem"
    ca.write_bytes(base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"]))
    token = next(u["user"]["token"] for u in cfg["users"] if u["name"] == "admin")
    return SimProcess(proc, kc, cfg["clusters"][0]["cluster"]["server"], token, ca)


def stop_sim(sp: SimProcess) -> None:
    if sp.proc.poll() is None:
        sp.proc.send_signal(signal.SIGTERM)
        try:
            sp.proc.wait(30)
        except subprocess.TimeoutExpired:
            sp.proc.kill()
            sp.proc.wait()
    for stream in (sp.proc.stdout, sp.proc.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture
def sim_process(tmp_path: Path) -> Iterator[Callable[..., SimProcess]]:
    started: list[SimProcess] = []

    def start(*args: str) -> SimProcess:
        sp = start_sim(tmp_path, *args)
        started.append(sp)
        return sp

    yield start
    for sp in started:
        stop_sim(sp)


def kubectl_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBE")}
    env["HOME"] = str(home)
    return env


# -- outcomes: one line per benchmark test in bench-results.jsonl (the report's failures and times) --

_phases: dict[str, dict[str, Any]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    state = _phases.setdefault(report.nodeid, {"duration": 0.0, "outcome": "passed", "message": ""})
    state["duration"] += report.duration
    if report.failed and state["outcome"] != "failed":
        state["outcome"] = "failed"
        crash = getattr(report.longrepr, "reprcrash", None)
        message = getattr(crash, "message", None) or (str(report.longrepr).strip().splitlines() or [""])[-1]
        first = message.strip().splitlines()[0] if message.strip() else ""
        state["message"] = (f"{report.when}: " if report.when != "call" else "") + first[:300]
    elif report.skipped and state["outcome"] == "passed":
        state["outcome"] = "skipped"
        state["message"] = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
    if report.when == "teardown":
        del _phases[report.nodeid]
        record_outcome(report.nodeid, state["outcome"], state["duration"], state["message"])


# -- measuring a command: wall time and peak RSS of that process alone ----------------------------------


@dataclass
class Run:
    argv: list[str]
    seconds: float
    rss_mb: float  # the process's peak RSS (ru_maxrss of its own rusage, from wait4)
    returncode: int
    stderr: str


# Runs the command as its own child and reports (seconds, ru_maxrss KB, exit code) of that child. A
# child of the test process itself would not do: Python starts children with vfork, and Linux counts
# the memory of the process that called exec into the high-water mark (ru_maxrss) of the program it
# became, so every command would seem at least as large as this process (GBs after a big LIST).
# Forked from this small helper, the command starts with the helper's ~10 MB.
_MEASURE = r"""
import os, sys, time
result, argv = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - t0
with open(result, "w") as fh:
    fh.write(f"{seconds} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def measure(argv: list[str], *, stdout: Path | None = None, env: dict[str, str] | None = None,
            cwd: Path = ROOT, timeout: float = 1200) -> Run:
    """Run `argv` to its exit (stdout to a file, or discarded), timed from its fork to its exit, with
    its peak RSS (the kernel's high-water mark for that process, from wait4: see _MEASURE)."""
    with contextlib.ExitStack() as stack:
        err = stack.enter_context(tempfile.TemporaryFile())
        out: Any = stack.enter_context(open(stdout, "wb")) if stdout is not None else subprocess.DEVNULL
        result = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="measure-"))) / "result"
        proc = subprocess.Popen([sys.executable, "-c", _MEASURE, str(result), *argv], stdout=out, stderr=err,
                                env=env, cwd=cwd, start_new_session=True)
        try:
            proc.wait(timeout)
        except BaseException:  # the timeout, or pytest-timeout's alarm: leave no command behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        err.seek(0)
        stderr = err.read().decode(errors="replace")
        if proc.returncode != 0 or not result.exists():
            raise RuntimeError(f"measuring {argv[0]} failed ({proc.returncode}): {stderr[-2000:]}")
        seconds, maxrss_kb, code = result.read_text().split()
    return Run(argv, float(seconds), int(maxrss_kb) / 1024, int(code), stderr)


def mem_available_gb() -> float:
    """MemAvailable of /proc/meminfo, in GB (what `free -g` calls available)."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024**2
    return 0.0


# -- scale clusters shared by the benchmarks of a session -------------------------------------------------

SCALE_NODES = 1000
MIN_AVAILABLE_GB = 12.0  # before starting a cluster above 20,000 pods (the machine is shared)


@dataclass
class CurlList:
    """curl's full pod LIST: `seconds` is the first one on the fresh cluster, for which the server
    encodes every pod (as kube-apiserver does on every LIST); `repeated` are later ones, for which
    simcluster only copies the encodings it kept (no real API server keeps them for a LIST)."""

    seconds: float  # to the last byte
    bytes: int
    repeated: tuple[float, ...] = ()


TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io"


@dataclass
class ScaleCluster:
    """`ranks sim --scenario scale --nodes 1000 --pods N` in its own process, and the baselines
    measured on it, each once: curl's full pod LIST and `kubectl get pods -A -o json`."""

    pods: int
    sim: SimProcess
    tmp: Path
    _curl: CurlList | None = None
    _table: CurlList | None = None
    _kubectl: Run | None = None

    def _curl_once(self, table: bool = False) -> tuple[float, int]:
        accept = ["-H", f"Accept: {TABLE_ACCEPT}"] if table else []
        query = "?includeObject=None" if table else ""
        r = subprocess.run(
            ["curl", "-sS", "--fail", "--cacert", str(self.sim.ca), "-H", f"Authorization: Bearer {self.sim.token}",
             *accept, "-o", "/dev/null", "-w", "%{time_total} %{size_download}", f"{self.sim.url}/api/v1/pods{query}"],
            capture_output=True, text=True, check=True, timeout=900,
        )
        seconds, size = r.stdout.split()
        return float(seconds), int(size)

    def curl_list(self, repeat: int = 0) -> CurlList:
        """`GET /api/v1/pods` with curl to its last byte, the answer discarded: the floor any client of
        the API has. The first is measured when the cluster starts, before any other request for pods
        (`ScaleClusters.get`); `repeat` more are measured once asked for."""
        if self._curl is None:
            self._curl = CurlList(*self._curl_once())
        while len(self._curl.repeated) < repeat:
            self._curl.repeated += (self._curl_once()[0],)
        return self._curl

    def table_list(self, repeat: int = 0) -> CurlList:
        """The cells-only Table LIST of every pod with curl (`GET /api/v1/pods?includeObject=None`,
        `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) to its last byte: what ranks' one-shot
        commands fetch of the pods. The first is measured when the cluster starts, right after the
        first full LIST; `repeat` more once asked for (simcluster builds every Table anew)."""
        if self._table is None:
            self._table = CurlList(*self._curl_once(table=True))
        while len(self._table.repeated) < repeat:
            self._table.repeated += (self._curl_once(table=True)[0],)
        return self._table

    def kubectl_get_pods(self) -> Run:
        """`kubectl get pods -A -o json > /dev/null`: wall time and kubectl's peak RSS (run once)."""
        if self._kubectl is None:
            home = self.tmp / "kubectl-home"
            home.mkdir(exist_ok=True)
            self._kubectl = measure([str(kubectl_path()), "--kubeconfig", str(self.sim.kubeconfig), "get", "pods",
                                     "-A", "-o", "json"], env=kubectl_env(home))
            assert self._kubectl.returncode == 0, self._kubectl.stderr[-2000:]
        return self._kubectl

    def api_get(self, path: str) -> Any:
        """The decoded answer of a GET (not timed), None for 404."""
        import orjson
        import requests

        s = requests.Session()
        s.trust_env = False
        r = s.get(f"{self.sim.url}{path}", verify=str(self.sim.ca), headers={"Authorization": f"Bearer {self.sim.token}"},
                  timeout=300)
        if r.status_code == 404:
            return None
        r.raise_for_status()
        return orjson.loads(r.content)

    def stop(self) -> None:
        stop_sim(self.sim)
        shutil.rmtree(self.tmp, ignore_errors=True)


class MemoryShort(RuntimeError):
    """Too little memory available to start a cluster this large now."""


class ScaleClusters:
    """One scale cluster at a time (the largest take GBs): `get(N)` returns the running one of N pods,
    or stops the other and starts it; its curl and kubectl figures are measured once and shared by
    the benchmarks that compare against them (list, model, scale)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.current: ScaleCluster | None = None

    def get(self, pods: int) -> ScaleCluster:
        if self.current is not None and self.current.pods == pods:
            return self.current
        self.close()
        if pods > 20000 and (avail := mem_available_gb()) < MIN_AVAILABLE_GB:
            raise MemoryShort(f"not run: {avail:.1f} GB of memory available before starting {pods:,} pods "
                              f"(< {MIN_AVAILABLE_GB:.0f} GB; the machine is shared)")
        tmp = Path(tempfile.mkdtemp(prefix=f"scale-{pods}-", dir=self.tmp))
        sim = start_sim(tmp, "--scenario", "scale", "--nodes", str(SCALE_NODES), "--pods", str(pods),
                        timeout=max(180.0, pods / 100000 * 600))
        self.current = ScaleCluster(pods, sim, tmp)
        self.current.curl_list()  # the first LIST of pods: before anything else asks for them
        self.current.table_list()  # the first Table LIST of pods, before any command's
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None


@pytest.fixture(scope="session")
def scale_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScaleClusters]:
    clusters = ScaleClusters(tmp_path_factory.mktemp("scale"))
    yield clusters
    clusters.close()
