"""How the nodes of a simulated torchrun launch learn that a peer died (simulation only).

Real DDP learns it from its collectives: the next all-reduce after a peer's exit fails on the
closed connection (gloo's TCP pair, NCCL's sockets), so every surviving rank raises at its next
step and its torchrun ends with `ChildFailedError`. The simulated workers have no connections to
each other, so the agents relay it through simcluster's rendezvous (`apiserver/rendezvous.py`):

- an agent whose workers failed for good (no restarts left, or stopped by a signal) reports it
  (`report_failure`: a POST with its member id, the round, the failing rank and exit status);
- every agent of a multi-node round watches the round while its workers run (`Watch`, a thread
  long-polling the round): when another node failed it writes the failure, as JSON, to the file
  named by `PEER_FILE` in its workers' environment; `train.py` looks for that file at each step
  (its "collective") and fails there with the error torch prints for a peer that exited;
- the same watch tells a c10d agent that a later round has members (a node restarted): its
  workers are restarted to join it, as torch's agent does when nodes wait at the rendezvous.

Standard library only, like every launcher.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time

TYPE_CHECKING = False  # (not typing's: importing it costs a launch ~3 ms)
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING or __package__:  # (the type checker reads the package's modules)
    from . import _kube
else:  # run by path from the wrapper
    import _kube

# the workers' environment variable naming the file a peer's failure is written to
PEER_FILE = "SIMCLUSTER_PEER_FAILURE"
WAIT = 5.0  # seconds a watch waits at the server
REPORT_WITHIN = 60.0  # seconds a node keeps telling the round of its failure while the server does not take it


def new_peer_file() -> str:
    """A path (not created yet) for the workers of one group to look for, under a private directory."""
    return os.path.join(tempfile.mkdtemp(prefix="torchelastic_peers_"), "failure.json")


def remove_peer_file(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(path))


def pod_address() -> str:
    """This pod's IP (`status.podIP`), as a peer's error names it; "" when it cannot be read."""
    try:
        code, pod = _kube.Api.in_pod().request(
            "GET", f"/api/v1/namespaces/{_kube.quote(_kube.namespace())}/pods/{_kube.quote(_kube.hostname())}",
            timeout=3)
    except _kube.ApiError:
        return ""
    ip = ((pod or {}).get("status") or {}).get("podIP") if code == 200 and isinstance(pod, dict) else ""
    return str(ip or "")


def report_failure(path: str, member: str, round_: int, rank: int, local_rank: int, code: int) -> None:
    """Tell the round this node's workers failed: the peers then fail at their next step, as torch's
    do when a peer's connection closes. Asked again while the server does not answer or answers
    5xx/429 (a busy machine), for `REPORT_WITHIN` at most."""
    body = {"id": member, "round": round_, "failed": {
        "rank": rank, "localRank": local_rank, "exitCode": code, "address": pod_address()}}
    api = _kube.Api.in_pod()
    deadline = time.monotonic() + REPORT_WITHIN
    while True:
        try:
            status, _answer = api.request("POST", path, body, timeout=10)
            if status < 500 and status != 429:
                return
        except _kube.ApiError:
            pass
        if time.monotonic() > deadline:
            return
        time.sleep(0.5)


def report_failure_soon(path: str, member: str, round_: int, rank: int, local_rank: int, code: int
                        ) -> threading.Thread:
    """`report_failure` on a thread of its own: the peers are told while this node stops its workers
    (a server slow to take it delays neither); join it before the process ends."""
    thread = threading.Thread(target=report_failure, args=(path, member, round_, rank, local_rank, code),
                              daemon=True)
    thread.start()
    return thread


class Watch:
    """Watches a completed round while the workers run (a daemon thread)."""

    def __init__(self, path: str, round_: int, member: str, peer_file: str, *, later: bool) -> None:
        self.path = path
        self.watch_later = later  # c10d: a later round with members restarts the workers
        self.round = round_
        self.member = member
        self.peer_file = peer_file
        self.peer_failure: dict[str, Any] | None = None  # the first other node's failure
        self.later_round = False  # a later round has members (a node restarted)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        api = _kube.Api.in_pod()
        seen = 0
        me = _kube.hostname()
        while not self._stop.is_set():
            query = f"?round={self.round}&seen={seen}&wait={WAIT}"
            if self.watch_later and not self.later_round:
                query += "&later=1"
            try:
                code, state = api.request("GET", self.path + query, timeout=WAIT + 15)
            except _kube.ApiError:
                self._stop.wait(1.0)  # the API server is away for a moment: ask again
                continue
            if code != 200 or not isinstance(state, dict):
                self._stop.wait(1.0)
                continue
            failures = [f for f in state.get("failures") or () if isinstance(f, dict)]
            seen = len(failures)
            self.later_round = self.later_round or bool(state.get("laterRound"))
            others = [f for f in failures if f.get("host") != me]
            if others and self.peer_failure is None:
                self.peer_failure = others[0]
                self._tell_workers(others[0])
            if not state.get("known", True):
                return  # the round is gone (the server restarted): nothing more to learn

    def _tell_workers(self, failure: dict[str, Any]) -> None:
        tmp = f"{self.peer_file}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(failure, fh)
            os.replace(tmp, self.peer_file)
        except OSError:
            pass
