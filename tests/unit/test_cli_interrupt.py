"""Ctrl-C ends a reading command (`logs -f`, `exec`) within its grace, whatever its wind-down
does: a real process, a real SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import asyncio, sys
from tui.cli.running import _run_interruptible

async def main(stuck):
    print("ready", flush=True)
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        print("winding down", flush=True)
        if stuck:
            await asyncio.sleep(3600)  # a wind-down that never ends
        raise
    return 0

try:
    sys.exit(_run_interruptible(main(sys.argv[1] == "stuck"), float(sys.argv[2])))
except KeyboardInterrupt:
    print("interrupted cleanly", flush=True)
    sys.exit(130)
'''


def interrupt(mode: str, grace: float) -> tuple[subprocess.CompletedProcess[str], float]:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, mode, str(grace)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), time.monotonic() - t0


def test_a_wind_down_that_hangs_ends_at_the_grace_with_130() -> None:
    r, took = interrupt("stuck", 1.0)
    assert r.returncode == 130 and r.stdout == "winding down\n", r
    assert r.stderr.strip() == "ranks: interrupted (it had not wound down 1s after Ctrl-C)", r.stderr
    assert took >= 0.9, took  # (held to the grace: communicate's limit is the wait's end)


def test_a_quick_wind_down_ends_at_once_as_an_interrupt() -> None:
    r, _ = interrupt("quick", 3600.0)  # (not held to the hour's grace: communicate gives up at 120 s)
    assert r.returncode == 130 and r.stdout == "winding down\ninterrupted cleanly\n" and r.stderr == "", r


def test_a_command_started_to_ignore_ctrl_c_keeps_ignoring_it() -> None:
    """`ranks logs -f > log &` in a script: the terminal's Ctrl-C is the script's, not its."""
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, "quick", "1.0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        time.sleep(1.5)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(10)
