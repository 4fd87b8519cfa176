"""torchrun's rendezvous, kept by simcluster's API server (simulation only, not a Kubernetes API).

The simulated `torchrun` (`simcluster/node/launchers/torchrun.py`) has no TCPStore to meet its
peers at, so the nodes of a launch meet here, keyed by the namespace and the address:port they
were given (`--master-addr:--master-port` for the static backend, `--rdzv-endpoint` for c10d):

    POST   /apis/simcluster.ranks/v1/namespaces/<ns>/rendezvous/<host:port>   join / wait
    DELETE /apis/simcluster.ranks/v1/namespaces/<ns>/rendezvous/<host:port>?id=<member>   leave
    GET    /apis/simcluster.ranks/v1/namespaces/<ns>/rendezvous/<host:port>   the state
    GET    ...?round=<n>&seen=<k>&wait=<s>[&later=1]   watch round n: its failures, a later round
    POST   (the same, with "failed" in the body)   a member's workers failed

A join's body: `{"id", "host", "backend": "static"|"c10d", "nodeRank", "minNodes", "maxNodes",
"nproc", "lastCall", "runId", "wait"}`. The request waits (long poll, up to `wait` seconds) until
the round is complete, and answers with the round's state; the node repeats it (same `id`) until
the round is complete or its own join timeout passes. A round completes:

- static: when node ranks 0..maxNodes-1 have all joined (a rank held by another live node is a
  409; a stale holder, or the same host joining again, is replaced);
- c10d: with maxNodes nodes, or minNodes once `lastCall` seconds have passed since the minimum
  was reached; group ranks follow the nodes' hostnames in order (torch sorts its node
  descriptors, whose first field is the FQDN).

The answer to a complete round gives the member its group rank, the group world size, its first
global rank and the world size. The next join at the same key opens the next round, so an
address can be reused launch after launch. A node that goes away before the round completes
(its long poll dropped, or no poll for `STALE` seconds, or a DELETE) leaves the round, so it
never wedges the next launch.

While a round trains, its members watch it (the GET with `round`, a long poll answered as soon as
the round has more than `seen` failures or, with `later=1`, a later round has members, else
after `wait` seconds): this is how a node learns that a peer died, which real torch learns from its
collectives (the gloo pair or the NCCL socket closing). A member whose workers failed for good
says so (POST `{"id", "round", "failed": {"rank", "localRank", "exitCode", "address"}}`); the
answer to a watch lists the round's failures in order (`host`, `address`, `nodeRank`,
`groupRank`, the failing `rank`, `exitCode`). A completed round is kept while it is watched, and `KEEP_DONE` seconds after.

Authenticated like every request; a service account may use the rendezvous of its own
namespace, other identities need RBAC on `rendezvous` in group `simcluster.ranks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import orjson
from aiohttp import web

from .auth import MASTERS, Authz, Identity
from .errors import ApiError

GROUP = "simcluster.ranks"
PREFIX = f"/apis/{GROUP}/v1/namespaces/"
STALE = 6.0  # a member that has not polled for this long has left
KEEP_DONE = 300.0  # how long a completed round is kept for members still to read it
MAX_WAIT = 30.0
CHECK = 0.25  # how often a waiting request looks at its connection and the last-call deadline


@dataclass
class Member:
    id: str
    host: str
    rank: int  # static: the node rank; c10d: -1 until the round completes
    nproc: int
    joined: float
    seen: float
    polling: int = 0


@dataclass
class Round:
    number: int
    backend: str
    min_nodes: int
    max_nodes: int
    last_call: float
    run_id: str
    members: dict[str, Member] = field(default_factory=dict)
    min_reached: float | None = None
    complete: bool = False
    completed_at: float = 0.0
    order: list[str] = field(default_factory=list)  # member ids by group rank, once complete
    ranks_seen: set[int] = field(default_factory=set)  # node ranks that joined at some point
    most: int = 0  # the most members the round had at once
    failures: list[dict[str, Any]] = field(default_factory=list)  # members whose workers failed, in order
    touched: float = 0.0  # when a member last watched it (a completed round is kept while watched)

    def live(self, now: float) -> list[Member]:
        return [m for m in self.members.values() if m.polling or now - m.seen < STALE]


@dataclass
class Slot:
    rounds: int = 0
    open: Round | None = None
    done: dict[int, Round] = field(default_factory=dict)
    member_round: dict[str, int] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def notify(self) -> None:
        self.changed.set()
        self.changed = asyncio.Event()


def allow(authz: Authz, who: Identity, verb: str, resource: str, ns: str, name: str) -> None:
    """Simulation-only resources of group `simcluster.ranks` (the rendezvous, the GPUs' driver): a
    service account may use its own namespace's, other identities need RBAC."""
    if MASTERS not in who.groups and not who.name.startswith(f"system:serviceaccount:{ns}:"):
        authz.authorize(who, verb, GROUP, resource, ns, name)


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type="application/json")


class Rendezvous:
    def __init__(self, authz: Authz) -> None:
        self.authz = authz
        self.slots: dict[tuple[str, str], Slot] = {}

    # -- request ---------------------------------------------------------------------------------
    async def handle(self, request: web.Request, who: Identity) -> web.StreamResponse:
        rest = request.path[len(PREFIX):].split("/")
        if len(rest) != 3 or rest[1] != "rendezvous" or not rest[0] or not rest[2]:
            raise ApiError(404, "the server could not find the requested resource")
        ns, name = rest[0], unquote(rest[2]).lower()
        verb = {"POST": "create", "GET": "get", "DELETE": "delete"}.get(request.method)
        if verb is None:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        allow(self.authz, who, verb, "rendezvous", ns, name)
        self._sweep()
        slot = self.slots.setdefault((ns, name), Slot())
        if verb == "get":
            if "round" in request.query:
                return await self._watch(request, slot)
            return _json(self._describe(slot))
        if verb == "delete":
            member = request.query.get("id", "")
            rnd = slot.open
            if rnd is not None and member in rnd.members and not rnd.complete:
                del rnd.members[member]
                self._progress(slot, time.monotonic())
                slot.notify()
            return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            raise ApiError(400, "the body of the request was not JSON") from None
        if not isinstance(body, dict) or not body.get("id"):
            raise ApiError(400, "a rendezvous join needs an id")
        if "failed" in body:
            return _json(self._fail(slot, body))
        return await self._join(request, slot, body)

    # -- joining and waiting -------------------------------------------------------------------------
    async def _join(self, request: web.Request, slot: Slot, body: dict[str, Any]) -> web.Response:
        mid = str(body["id"])
        now = time.monotonic()
        done = slot.member_round.get(mid)
        if done is not None and done in slot.done:
            return _json(self._answer(slot.done[done], mid))
        rnd = slot.open
        if rnd is None or rnd.complete:
            rnd = self._open(slot, body)
        member = rnd.members.get(mid)
        if member is None:
            member = self._admit(slot, rnd, body, mid, now)
        member.seen = now
        self._progress(slot, now)
        wait = min(MAX_WAIT, max(0.0, float(body.get("wait") or 0)))
        deadline = now + wait
        member.polling += 1
        try:
            while not rnd.complete and mid in rnd.members:
                now = time.monotonic()
                if now >= deadline:
                    break
                transport = request.transport
                if transport is None or transport.is_closing():  # the node went away
                    rnd.members.pop(mid, None)
                    self._progress(slot, now)
                    slot.notify()
                    break
                changed = slot.changed
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout=min(CHECK, deadline - now))
                self._progress(slot, time.monotonic())
        finally:
            member.polling -= 1
            member.seen = time.monotonic()
        if mid not in rnd.members and not rnd.complete:
            raise ApiError(409, f"member {mid} is no longer part of rendezvous round {rnd.number}",
                           reason="Conflict")
        return _json(self._answer(rnd, mid))

    def _open(self, slot: Slot, body: dict[str, Any]) -> Round:
        slot.rounds += 1
        backend = str(body.get("backend") or "static")
        hi = max(1, int(body.get("maxNodes") or 1))
        lo = max(1, min(hi, int(body.get("minNodes") or hi)))
        rnd = Round(slot.rounds, backend, lo, hi, max(0.0, float(body.get("lastCall") or 0)),
                    str(body.get("runId") or "none"))
        slot.open = rnd
        return rnd

    def _admit(self, slot: Slot, rnd: Round, body: dict[str, Any], mid: str, now: float) -> Member:
        node_rank = body.get("nodeRank")
        rank = int(node_rank if node_rank is not None else -1)
        host = str(body.get("host") or "")
        if rnd.backend == "static":
            if not 0 <= rank < rnd.max_nodes:
                raise ApiError(400, f"node rank {rank} is out of range [0, {rnd.max_nodes}) for rendezvous "
                                    f"round {rnd.number}")
            for other in list(rnd.members.values()):
                if other.rank != rank:
                    continue
                # the same node again (its torchrun restarted) takes its place; another node may not
                if other.host != host and (other.polling or now - other.seen < STALE):
                    raise ApiError(409, f"node rank {rank} is already taken by {other.host} in rendezvous "
                                        f"round {rnd.number}", reason="Conflict")
                del rnd.members[other.id]
        elif len(rnd.members) >= rnd.max_nodes:
            raise ApiError(409, f"rendezvous round {rnd.number} already has {rnd.max_nodes} nodes",
                           reason="Conflict")
        member = Member(mid, host, rank if rnd.backend == "static" else -1, max(1, int(body.get("nproc") or 1)),
                        now, now)
        rnd.members[mid] = member
        rnd.ranks_seen.add(member.rank)
        rnd.most = max(rnd.most, len(rnd.members))
        slot.notify()
        return member

    def _progress(self, slot: Slot, now: float) -> None:
        """Drop members that left; complete the open round when it can."""
        rnd = slot.open
        if rnd is None or rnd.complete:
            return
        for m in list(rnd.members.values()):
            if not m.polling and now - m.seen >= STALE:
                del rnd.members[m.id]
        n = len(rnd.members)
        if rnd.backend == "static":
            ready = {m.rank for m in rnd.members.values()} == set(range(rnd.max_nodes))
        else:
            if n >= rnd.min_nodes:
                rnd.min_reached = rnd.min_reached if rnd.min_reached is not None else now
            else:
                rnd.min_reached = None
            ready = n >= rnd.max_nodes or (rnd.min_reached is not None and now - rnd.min_reached >= rnd.last_call)
        if not ready:
            return
        if rnd.backend == "static":
            order = sorted(rnd.members.values(), key=lambda m: m.rank)
        else:
            order = sorted(rnd.members.values(), key=lambda m: (m.host, m.joined, m.id))
        rnd.order = [m.id for m in order]
        rnd.complete = True
        rnd.completed_at = now
        for mid in rnd.order:
            slot.member_round[mid] = rnd.number
        slot.done[rnd.number] = rnd
        slot.open = None
        slot.notify()

    # -- a round that trains: failures and watches ----------------------------------------------------
    def _fail(self, slot: Slot, body: dict[str, Any]) -> dict[str, Any]:
        """A member's workers failed for good: recorded once per member, the watchers woken."""
        mid = str(body["id"])
        try:
            number = int(body.get("round", ""))  # (missing: ValueError, null: TypeError)
        except (TypeError, ValueError):
            raise ApiError(400, "a rendezvous failure needs the round") from None
        rnd = slot.done.get(number)
        if rnd is None or mid not in rnd.order:
            raise ApiError(404, f"member {mid} is not part of a completed rendezvous round {number}",
                           reason="NotFound")
        reported = body.get("failed")
        failed: dict[str, Any] = reported if isinstance(reported, dict) else {}
        if not any(f["id"] == mid for f in rnd.failures):
            member = rnd.members[mid]

            def num(key: str, default: int) -> int:
                try:
                    return int(failed.get(key, default))
                except (TypeError, ValueError):
                    return default

            rnd.failures.append({
                "id": mid, "host": member.host, "address": str(failed.get("address") or "")[:64],
                "nodeRank": member.rank, "groupRank": rnd.order.index(mid), "rank": num("rank", -1),
                "localRank": num("localRank", -1), "exitCode": num("exitCode", 1),
            })
            slot.notify()
        rnd.touched = time.monotonic()
        return self._round_state(slot, rnd, number)

    async def _watch(self, request: web.Request, slot: Slot) -> web.Response:
        q = request.query
        try:
            number, seen = int(q.get("round", "")), int(q.get("seen") or 0)
            wait = min(MAX_WAIT, max(0.0, float(q.get("wait") or 0)))
        except ValueError:
            raise ApiError(400, "round, seen and wait must be numbers") from None
        deadline = time.monotonic() + wait
        want_later = q.get("later") == "1"
        while True:
            rnd = slot.done.get(number)
            now = time.monotonic()
            if rnd is not None:
                rnd.touched = now
            later = want_later and slot.open is not None and slot.open.number > number and bool(slot.open.members)
            if rnd is None or len(rnd.failures) > seen or later or now >= deadline:
                return _json(self._round_state(slot, rnd, number))
            transport = request.transport
            if transport is None or transport.is_closing():
                return _json(self._round_state(slot, rnd, number))
            changed = slot.changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=min(CHECK * 4, deadline - now))

    @staticmethod
    def _round_state(slot: Slot, rnd: Round | None, number: int) -> dict[str, Any]:
        opened = slot.open
        return {
            "kind": "Rendezvous", "apiVersion": f"{GROUP}/v1", "round": number, "known": rnd is not None,
            "failures": [{k: v for k, v in f.items() if k != "id"} for f in (rnd.failures if rnd else ())],
            "laterRound": opened is not None and opened.number > number and bool(opened.members),
        }

    def _sweep(self) -> None:
        now = time.monotonic()
        for key, slot in list(self.slots.items()):
            for number, rnd in list(slot.done.items()):
                if now - max(rnd.completed_at, rnd.touched) > KEEP_DONE:
                    del slot.done[number]
                    for mid in rnd.order:
                        slot.member_round.pop(mid, None)
            if slot.open is not None and not slot.open.complete:
                self._progress(slot, now)
                if not slot.open.members:
                    slot.open = None
            if slot.open is None and not slot.done:
                del self.slots[key]

    # -- answers ------------------------------------------------------------------------------------
    def _answer(self, rnd: Round, mid: str) -> dict[str, Any]:
        members = [rnd.members[i] for i in rnd.order] if rnd.complete else sorted(
            rnd.members.values(), key=lambda m: (m.rank, m.host))
        out: dict[str, Any] = {
            "kind": "Rendezvous", "apiVersion": f"{GROUP}/v1",
            "round": rnd.number, "backend": rnd.backend, "runId": rnd.run_id,
            "complete": rnd.complete, "joined": len(rnd.members),
            "minNodes": rnd.min_nodes, "maxNodes": rnd.max_nodes,
            "members": [{"host": m.host, "nodeRank": m.rank, "nproc": m.nproc} for m in members],
        }
        if not rnd.complete:
            # what the nodes' TCPStore would have seen: the master came, how many connected at most
            out["rank0Joined"] = 0 in rnd.ranks_seen
            out["mostJoined"] = rnd.most
            return out
        group = rnd.order.index(mid)
        out.update({
            "groupRank": group, "groupWorldSize": len(rnd.order),
            "rankOffset": sum(rnd.members[i].nproc for i in rnd.order[:group]),
            "worldSize": sum(m.nproc for m in rnd.members.values()),
            "masterHost": rnd.members[rnd.order[0]].host,
        })
        return out

    def _describe(self, slot: Slot) -> dict[str, Any]:
        rnd = slot.open
        last = slot.done[max(slot.done)] if slot.done else None
        return {
            "kind": "Rendezvous", "apiVersion": f"{GROUP}/v1", "rounds": slot.rounds,
            "open": None if rnd is None else {
                "round": rnd.number, "backend": rnd.backend, "joined": len(rnd.members),
                "maxNodes": rnd.max_nodes,
                "members": [{"host": m.host, "nodeRank": m.rank} for m in rnd.members.values()],
            },
            "lastComplete": None if last is None else {
                "round": last.number, "members": [last.members[i].host for i in last.order],
            },
        }
