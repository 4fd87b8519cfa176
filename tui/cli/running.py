"""Running a command's body: `run`, the asyncio runner that turns every failure into one line on
stderr and its documented exit code (`tui.cli.errors`); `configure` (the connection's settings
from the command line); Ctrl-C bounded for the commands that only read (`INTERRUPT_GRACE`).

Light at import (it is on the path of `ranks --help`): what needs aiohttp, the monitor, YAML...
is imported inside the function that uses it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from monitors.connection import ClusterConfig, ExitCode
from monitors.sanitize import clean

from .errors import UserError, error


def configure(cfg: ClusterConfig, opts: dict[str, Any]) -> ClusterConfig:
    """The command line's settings that go with the connection (--request-timeout, --namespace)."""
    if opts.get("namespace"):
        cfg.namespace = str(opts["namespace"])
    timeout = opts.get("request_timeout")
    if timeout is not None:
        cfg.request_timeout = float(timeout) or None  # 0: no limit
    return cfg


INTERRUPT_GRACE = 5.0  # seconds a reading command may take to wind down after Ctrl-C


def _run_interruptible(main: Coroutine[Any, Any, int], grace: float) -> int:
    """`main` on a new event loop, as `asyncio.run`, except that Ctrl-C is bounded: the first one
    cancels it (it winds down: streams closed, what was read printed) and, if that has not ended
    the process `grace` seconds later, it ends anyway (exit 130), as a second Ctrl-C does at once.
    For commands that only read or whose remote commands end with their connections (`logs -f`,
    `exec`): nothing of theirs is left half-done in the cluster by ending early."""
    import asyncio
    import signal
    import threading

    def leave(why: str) -> None:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            print(f"ranks: interrupted ({why})", file=sys.stderr, flush=True)
        os._exit(ExitCode.INTERRUPTED)

    task: asyncio.Task[int] | None = None
    hits = 0

    async def wrapper() -> int:
        nonlocal task
        task = asyncio.current_task()
        return await main

    with asyncio.Runner() as runner:
        loop = runner.get_loop()

        def on_sigint(_signum: int, _frame: Any) -> None:
            nonlocal hits
            hits += 1
            if hits == 1 and task is not None and not task.done():
                loop.call_soon_threadsafe(task.cancel)
                timer = threading.Timer(grace, leave, (f"it had not wound down {grace:g}s after Ctrl-C",))
                timer.daemon = True
                timer.start()
                return
            leave("Ctrl-C again")

        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # started to ignore Ctrl-C (`cmd &` in a script): it does
            return runner.run(wrapper())
        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            return runner.run(wrapper())
        except asyncio.CancelledError:
            if hits:
                raise KeyboardInterrupt from None
            raise
        finally:
            signal.signal(signal.SIGINT, previous)


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def run(opts: dict[str, Any], body: Callable[[ClusterConfig], Coroutine[Any, Any, int]], *,
        interrupt_grace: float | None = None) -> int:
    """`body` on the cluster of `opts` (kubeconfig, context, request timeout), in a new event
    loop: its exit code, or the failure's as one line on stderr. `interrupt_grace`: Ctrl-C ends
    the command within that many seconds (`_run_interruptible`); without it, the body winds down
    in its own time (a submit removing what it created)."""
    import asyncio

    from monitors.connection import ConnectionProblem, load_cluster_config
    from monitors.kube import ApiProblem
    from monitors.names import LookupProblem
    from monitors.state_dir import PrivateDirError

    try:
        from .options import impersonation

        check_config_file()
        cfg = configure(load_cluster_config(opts.get("kubeconfig"), opts.get("context"), **impersonation(opts)), opts)
        if interrupt_grace is not None and threading_main():
            return _run_interruptible(body(cfg), interrupt_grace)
        return asyncio.run(body(cfg))
    except ConnectionProblem as exc:
        return error(exc.message, exc.code)
    except ApiProblem as exc:
        return error(clean(exc.one_line(), limit=500), exc.exit_code)
    except (UserError, LookupProblem) as exc:
        return error(exc.message, exc.code)
    except PrivateDirError as exc:  # (ranks' own state directory is not the user's alone)
        return error(str(exc), ExitCode.NO_CONFIG)
    except TimeoutError as exc:
        return error(str(exc) or "timed out", ExitCode.UNREACHABLE)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return ExitCode.OK


def check_config_file() -> None:
    """A configuration file that is not valid TOML (or RANKS_CONFIG naming no file) is exit 3 for
    every command, not only for those that read a setting from it (read lightly: tomllib)."""
    from tui.config_file import ConfigReadError, read_only_setting

    try:
        read_only_setting()
    except ConfigReadError as exc:
        raise UserError(str(exc), ExitCode.NO_CONFIG) from None

