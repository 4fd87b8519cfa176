"""#7, #16: `ranks shell` on simcluster, against `kubectl exec -it` (v1.35) on the same pod, same run.

simcluster runs as `ranks sim` in its own process (every component: the exec WebSocket, pods as
local processes); `ranks shell` and kubectl run in theirs, each on a pseudo-terminal this process
holds the master side of (it only writes keys and reads the screen bytes). Figures and goals:

1. start: spawning `ranks shell S` -> its banner on the terminal, STARTS runs          p50 <= 0.5 s
   and -> its remote prompt                                                          p50 <= 1 s
   (also: the CLI's imports alone, what they cost by package, and `kubectl exec -it` to its
   prompt for comparison). `ranks` runs as installed, its bytecode compiled: the first run writes
   it (PYTHONPYCACHEPREFIX, in the test's directory) and is not counted. Where the environment
   says not to write bytecode (PYTHONDONTWRITEBYTECODE, as here), the start as it runs there,
   every module of the project compiled from source each time, is shown too (COLD_STARTS runs).
2. keystroke echo: one byte written to the terminal -> the byte echoed back by the remote bash
   (readline), KEYS keys per tool, both sessions open at once and the keys interleaved
   (ranks, kubectl, kubectl, ranks, ...) so that both see the same machine     ranks p50 <= 1.2 x kubectl
   Both run the same remote command (`sessions.shell.shell_command()`: bash with the history file).
"""

from __future__ import annotations

import asyncio
import fcntl
import math
import os
import re
import select
import statistics
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monitors.connection import load_cluster_config
from monitors.kube import KubeClient
from sessions.shell import shell_command
from tests.kubectl_binary import kubectl_path
from tests.perf.conftest import ROOT, kubectl_env
from tests.perf.results import record
from tests.waiting import until

pytestmark = pytest.mark.timeout(600)

RANKS = [sys.executable, "-m", "tui.cli"]
BANNER_END = b"turns the last launch into a training job"
ANSI = re.compile(rb"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-B]|[=>])")
PROMPT = re.compile(rb"[#$] $")
ROWS, COLS = 50, 200
STARTS = 10
COLD_STARTS = 5
KEYS = 400
BANNER_GOAL = 0.5  # s, p50
PROMPT_GOAL = 1.0  # s, p50
ECHO_GOAL = 1.2  # x kubectl's p50
KILL_LINE_EVERY = 40  # ^U clears the line now and then: the line never wraps


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return math.inf
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


class Pty:
    """A program on a pseudo-terminal (its controlling terminal) of ROWS x COLS."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                     start_new_session=True,
                                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.buf = b""

    def read_until(self, done: Callable[[bytes], bool], timeout: float = 15.0) -> float:
        """Read until done(all bytes so far); the perf_counter() of the read that made it true."""
        deadline = time.monotonic() + timeout
        while not done(self.buf):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out; the terminal shows: {self.buf[-600:]!r}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"the terminal closed; it showed: {self.buf[-600:]!r}")
                self.buf += chunk
        return time.perf_counter()

    def drain(self, quiet: float = 0.1) -> None:
        while select.select([self.master], [], [], quiet)[0]:
            try:
                if not os.read(self.master, 65536):
                    return
            except OSError:
                return

    def echo_rtt(self, key: bytes) -> float:
        """Seconds from writing one byte to reading it back."""
        self.buf = b""
        t = time.perf_counter()
        os.write(self.master, key)
        return self.read_until(lambda b: key in b, timeout=5.0) - t

    def close(self, timeout: float = 10.0) -> int | None:
        if self.proc.poll() is None:
            os.write(self.master, b"\x15exit\r")
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.close(self.master)
        return self.proc.returncode


def prompt_after(marker: bytes | None) -> Callable[[bytes], bool]:
    """The remote prompt is on the terminal (after `marker`, the banner's end, when given)."""
    def done(buf: bytes) -> bool:
        if marker is not None:
            if marker not in buf:
                return False
            buf = buf.split(marker, 1)[1]
        return PROMPT.search(ANSI.sub(b"", buf)) is not None

    return done


# what `ranks shell` imports before it connects (tui.cli.sessions.run_shell imports them all first)
SHELL_IMPORTS = ("from tui.cli.group import cli; import tui.cli.sessions; "
                 "import monitors.kube, sessions.locate, sessions.shell, sessions.terminal, sessions.lifecycle, "
                 "tui.config_file, uvloop, yaml")
PACKAGES = ("aiohttp", "asyncio", "click", "yaml", "uvloop", "monitors.monitor", "sessions.shell", "tui.cli.sessions",
            "textual", "kubernetes", "pydantic", "prometheus_api_client")


def import_costs(env: dict[str, str]) -> dict[str, float]:
    """Seconds spent importing each of PACKAGES (with what it imports first) on the shell's path."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", SHELL_IMPORTS], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    out: dict[str, float] = {}
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[2].strip() in PACKAGES and parts[1].strip().isdigit():
            out.setdefault(parts[2].strip(), int(parts[1]) / 1e6)
    return out


def starts(argv: list[str], env: dict[str, str], runs: int) -> tuple[list[float], list[float]]:
    """(to the banner, to the remote prompt) in seconds from the spawn, for `runs` new processes."""
    banner: list[float] = []
    prompt: list[float] = []
    for _ in range(runs):
        term = Pty(argv, env)
        try:
            banner.append(term.read_until(lambda b: BANNER_END in b) - term.t0)
            prompt.append(term.read_until(prompt_after(BANNER_END)) - term.t0)
        finally:
            assert term.close() == 0
    return banner, prompt


def wait_running(kubeconfig: Path, namespace: str, pod: str, timeout: float = 60) -> None:
    cfg = load_cluster_config(str(kubeconfig), None)

    async def poll() -> None:
        async with KubeClient(cfg) as client:
            async def running() -> bool:
                p = await client.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
                return (p.get("status") or {}).get("phase") == "Running"

            await until(running, timeout, f"{pod} Running", interval=0.1, ignore=lambda _exc: True)  # not created yet

    asyncio.run(poll())


def test_shell_start_and_keystroke_echo(sim_process: Any, tmp_path: Path) -> None:
    sim = sim_process("--nodes", "2")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "RANKS_")) and k not in ("TMUX", "PS1")}
    env.update(KUBECONFIG=str(sim.kubeconfig), HOME=str(home), XDG_CONFIG_HOME=str(home / "config"),
               RANKS_CONFIG="", TERM="xterm-256color", LC_ALL="C.UTF-8")
    r = subprocess.run([*RANKS, "submit", "bench", "--framework", "pytorch", "-i", "img", "--workers", "1",
                        "--interactive"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    ns = "default"
    pod = "bench-master-0"
    wait_running(sim.kubeconfig, ns, pod)
    kubectl = [str(kubectl_path()), "--kubeconfig", str(sim.kubeconfig), "exec", "-it", pod, "-c", "pytorch",
               "--", *shell_command()]
    k_env = {**kubectl_env(home), "TERM": "xterm-256color"}

    # -- 1. start ---------------------------------------------------------------------------------------
    cached = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")  # (the repository stays clean)
    starts([*RANKS, "shell", "bench"], cached, 1)  # writes the bytecode
    banner, prompt = starts([*RANKS, "shell", "bench"], cached, STARTS)
    cold: tuple[list[float], list[float]] | None = None
    if env.get("PYTHONDONTWRITEBYTECODE"):  # (an empty cache: not the bytecode `make bench` compiled)
        (tmp_path / "no-pycache").mkdir()
        cold = starts([*RANKS, "shell", "bench"], env | {"PYTHONPYCACHEPREFIX": str(tmp_path / "no-pycache")},
                      COLD_STARTS)
    imports = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", SHELL_IMPORTS], cwd=ROOT, env=cached, check=True)
        imports.append(time.perf_counter() - t)
    by_package = import_costs(cached)
    k_prompt: list[float] = []
    for _ in range(5):
        term = Pty(kubectl, k_env)
        try:
            k_prompt.append(term.read_until(prompt_after(None)) - term.t0)
        finally:
            term.close()

    # -- 2. keystroke echo, both sessions open, keys interleaved -----------------------------------------
    tools = {"ranks shell": Pty([*RANKS, "shell", "bench"], cached), "kubectl exec -it": Pty(kubectl, k_env)}
    rtts: dict[str, list[float]] = {name: [] for name in tools}
    try:
        tools["ranks shell"].read_until(prompt_after(BANNER_END))
        tools["kubectl exec -it"].read_until(prompt_after(None))
        for term in tools.values():
            term.drain()
        for i in range(-10, KEYS):  # 10 to warm up
            key = bytes([ord("a") + (i % 26)])
            order = list(tools.items()) if i % 2 == 0 else list(reversed(tools.items()))
            for name, term in order:
                rtt = term.echo_rtt(key)
                if i >= 0:
                    rtts[name].append(rtt)
            if i % KILL_LINE_EVERY == KILL_LINE_EVERY - 1:
                for term in tools.values():
                    os.write(term.master, b"\x15")
                    term.drain(0.05)
    finally:
        codes = {name: term.close() for name, term in tools.items()}

    # -- figures ----------------------------------------------------------------------------------------
    ms = 1000.0
    med = statistics.median
    print(f"\n[bench shell] start, {STARTS} runs of `ranks shell` (a new process each time, bytecode compiled):")
    print(f"  {'':34} {'p50':>9} {'max':>9}")
    print(f"  {'python + the imports of ranks shell':34} {med(imports) * ms:7.0f}ms {max(imports) * ms:7.0f}ms")
    print(f"  {'ranks shell: banner visible':34} {med(banner) * ms:7.0f}ms {max(banner) * ms:7.0f}ms"
          f"   goal p50 <= {BANNER_GOAL * ms:.0f} ms")
    print(f"  {'ranks shell: remote prompt':34} {med(prompt) * ms:7.0f}ms {max(prompt) * ms:7.0f}ms"
          f"   goal p50 <= {PROMPT_GOAL * ms:.0f} ms")
    if cold is not None:
        print(f"  {'  without bytecode: banner':34} {med(cold[0]) * ms:7.0f}ms {max(cold[0]) * ms:7.0f}ms"
              f"   ({COLD_STARTS} runs, PYTHONDONTWRITEBYTECODE: the project compiled from source each time)")
        print(f"  {'  without bytecode: remote prompt':34} {med(cold[1]) * ms:7.0f}ms {max(cold[1]) * ms:7.0f}ms")
    print(f"  {'kubectl exec -it: remote prompt':34} {med(k_prompt) * ms:7.0f}ms "
          f"{max(k_prompt) * ms:7.0f}ms   (for comparison)")
    print("  import time by package (-X importtime, with what each imports first): "
          + ", ".join(f"{k} {v * ms:.0f}ms" for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])))
    print(f"[bench shell] keystroke echo round trip, {KEYS} keys each, interleaved, same pod:")
    print(f"  {'':20} {'p50':>9} {'p95':>9} {'max':>9}")
    for name, values in rtts.items():
        print(f"  {name:20} {pct(values, 50) * ms:7.2f}ms {pct(values, 95) * ms:7.2f}ms {max(values) * ms:7.2f}ms")
    r50, k50 = pct(rtts["ranks shell"], 50), pct(rtts["kubectl exec -it"], 50)
    ratio50 = r50 / k50
    ratio95 = pct(rtts["ranks shell"], 95) / pct(rtts["kubectl exec -it"], 95)
    print(f"  ranks / kubectl: p50 {ratio50:.2f}x, p95 {ratio95:.2f}x   goal p50 <= {ECHO_GOAL:.2f}x")
    print(f"  exit status after `exit`: {codes}")

    cold_note = (f"; without bytecode (PYTHONDONTWRITEBYTECODE, every module of the project compiled each start): "
                 f"banner p50 {med(cold[0]):.3f} s, prompt p50 {med(cold[1]):.3f} s" if cold is not None else "")
    record("ranks shell: start to the banner, p50", f"<= {BANNER_GOAL} s", round(med(banner), 3), "s",
           met=med(banner) <= BANNER_GOAL,
           note=f"{STARTS} new processes, bytecode compiled as installed{cold_note}; imports alone p50 "
                f"{med(imports):.3f} s", cold_p50=round(med(cold[0]), 3) if cold is not None else None)
    record("ranks shell: start to the remote prompt, p50", f"<= {PROMPT_GOAL:g} s", round(med(prompt), 3), "s",
           met=med(prompt) <= PROMPT_GOAL, baseline="kubectl exec -it: to the remote prompt",
           baseline_measured=round(med(k_prompt), 3), note=f"{STARTS} new processes, bytecode compiled as installed")
    record("ranks shell: keystroke echo p50, vs kubectl exec -it", f"<= {ECHO_GOAL}x kubectl", round(r50 * ms, 3), "ms",
           met=ratio50 <= ECHO_GOAL, baseline="kubectl exec -it: keystroke echo p50", baseline_measured=round(k50 * ms, 3),
           ratio=round(ratio50, 3), note=f"{KEYS} keys each, both sessions open, keys interleaved; p95 ratio "
                                         f"{ratio95:.2f}x")

    assert codes["ranks shell"] == 0
    assert med(banner) <= BANNER_GOAL, f"ranks shell banner p50 {med(banner):.3f} s > {BANNER_GOAL} s"
    assert med(prompt) <= PROMPT_GOAL, f"ranks shell prompt p50 {med(prompt):.3f} s > {PROMPT_GOAL} s"
    assert ratio50 <= ECHO_GOAL, f"ranks shell keystroke echo p50 is {ratio50:.2f}x kubectl's"
