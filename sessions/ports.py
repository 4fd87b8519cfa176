"""A rank's ports: those its pod's spec declares and the TCP ports its processes listen on (read in
the pod), each with what it probably is; and the dashboard's forwards of them (`ForwardSet`).

`LIST_SCRIPT` runs in the container (`sh -c` through pods/exec; `readlink` and `tr`, as busybox and
coreutils have them) and prints the machine's listening TCP sockets (`L address:port inode`, from
/proc/net/tcp and tcp6) and, for each process of the container's mount namespace, its socket inodes
and command line; `parse_listing` meets the two (nothing printed is trusted: lines of another shape
are skipped, text is cleaned). `kind_of` tells Jupyter, TensorBoard, a plain HTTP server... from the
command line. `jupyter_url` asks the pod's `jupyter server list` for the server's token.

A forward the dashboard starts listens on a free port of 127.0.0.1 and follows its rank
(`portforward.Follower`), so it outlives a restarted pod; it lives as long as the dashboard
(`ForwardSet.close`). Over the SSH door the dashboard's machine is the server, not the user's: there
it starts nothing and gives the `ssh -L` line to paste on the user's own machine (`ssh_line`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import time
from dataclasses import dataclass, field
from typing import Any

from monitors.connection import ClusterConfig
from monitors.kube import KubeClient
from monitors.sanitize import clean

from .exec_bridge import ExecError, ExecSession
from .portforward import POLL, Follower, PortForward, Target

LIST_SCRIPT = r"""me=$$
for t in /proc/net/tcp /proc/net/tcp6; do
  [ -r "$t" ] || continue
  while read -r sl local rem st rest; do
    [ "$st" = 0A ] || continue
    set -- $rest
    echo "L $local $6"
  done < "$t"
done
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  [ "$p" = "$me" ] && continue
  [ "$d/ns/mnt" -ef "/proc/$me/ns/mnt" ] || continue
  s=
  for f in "$d"/fd/*; do
    l=$(readlink "$f" 2>/dev/null) || continue
    case $l in socket:*) s="$s ${l#socket:}";; esac
  done
  [ -n "$s" ] || continue
  echo "S $p$s"
  printf 'C '; tr '\000\n' '  ' 2>/dev/null < "$d/cmdline"; echo
done
"""
MAX_LINES = 20_000
TOKEN_WAIT = 10.0  # seconds `jupyter server list` may take
NEW_TOKEN_WAIT = 60.0  # seconds a replaced pod's Jupyter is asked for its token, once a second, until it gives one

# (what a command line says, what the port probably is), first match wins
KINDS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), k) for p, k in (
    (r"\bjupyter[- ](lab|notebook|server)\b|jupyter-(lab|notebook)|jupyterlab|\bnotebook\.app\b|jupyter_server",
     "Jupyter"),
    (r"\btensorboard\b", "TensorBoard"),
    (r"\bhttp\.server\b|SimpleHTTPServer", "HTTP server (python -m http.server)"),
    (r"\bmlflow\b", "MLflow"),
    (r"\bstreamlit\b", "Streamlit"),
    (r"\bgradio\b", "Gradio"),
    (r"\bcode-server\b", "VS Code (code-server)"),
    (r"\bdebugpy\b", "debugger (debugpy)"),
    (r"\bray\b.*\bdashboard\b|\bray start\b", "Ray"),
    (r"\b(uvicorn|gunicorn|flask|fastapi|hypercorn)\b", "HTTP server"),
    (r"\b(torchrun|torch\.distributed\.run|torch\.distributed\.launch)\b", "torchrun rendezvous"),
    (r"\bsshd\b", "SSH"),
))
NAMED = {"jupyter": "Jupyter", "tensorboard": "TensorBoard", "pytorchjob-port": "PyTorch master (c10d)",
         "ssh": "SSH", "http": "HTTP server"}


def kind_of(command: str, name: str = "") -> str:
    """What a port probably is, from the command line listening on it (or the port's declared name)."""
    for pattern, kind in KINDS:
        if pattern.search(command):
            return kind
    if name in NAMED:
        return NAMED[name]
    words = command.split()
    return words[0].rsplit("/", 1)[-1] if words else (name or "")


@dataclass(frozen=True)
class Listener:
    port: int
    address: str
    pid: int
    command: str


def _address(hex_addr: str) -> str | None:
    """/proc/net/tcp's address text (each 32-bit word little-endian, as on x86 and ARM)."""
    try:
        raw = bytes.fromhex(hex_addr)
        if len(raw) not in (4, 16):
            return None
        return str(ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))))
    except ValueError:
        return None


def parse_listing(text: str) -> list[Listener]:
    """What `LIST_SCRIPT` printed: each listening port of the container's processes (by port)."""
    sockets: dict[str, tuple[str, int]] = {}
    owners: dict[str, int] = {}
    commands: dict[int, str] = {}
    pid: int | None = None
    for line in text.splitlines()[:MAX_LINES]:
        tag, _, rest = line.partition(" ")
        words = rest.split()
        if tag == "L" and len(words) == 2 and ":" in words[0] and words[1].isdigit():
            hex_addr, _, hex_port = words[0].rpartition(":")
            addr = _address(hex_addr)
            with contextlib.suppress(ValueError):
                if addr is not None:
                    sockets[words[1]] = (addr, int(hex_port, 16))
        elif tag == "S" and words and words[0].isdigit():
            pid = int(words[0])
            for w in words[1:]:
                inode = w.strip("[]")
                if inode.isdigit():
                    owners.setdefault(inode, pid)
        elif tag == "C" and pid is not None:
            commands[pid] = clean(rest.strip(), limit=300)
            pid = None
    found: dict[int, Listener] = {}
    for inode, owner in owners.items():
        hit = sockets.get(inode)
        if hit is not None and hit[1] not in found:
            found[hit[1]] = Listener(hit[1], hit[0], owner, commands.get(owner, ""))
    return sorted(found.values(), key=lambda x: x.port)


@dataclass(frozen=True)
class PortRow:
    """One port of one rank, as the dashboard lists it."""

    label: str  # the rank (master-0)
    pod: str
    port: int
    kind: str
    declared: str = ""  # its name in the spec ("" when not declared; "-" when declared without a name)
    listening: bool = False
    address: str = ""
    command: str = ""


def declared_ports(pod: dict[str, Any], container: str | None = None) -> list[tuple[int, str]]:
    """(port, name) of the TCP container ports the pod's spec declares (of `container`, or all)."""
    out: list[tuple[int, str]] = []
    for c in (pod.get("spec") or {}).get("containers") or ():
        if not isinstance(c, dict) or (container and c.get("name") != container):
            continue
        for p in c.get("ports") or ():
            if isinstance(p, dict) and isinstance(p.get("containerPort"), int) and p.get("protocol", "TCP") == "TCP":
                out.append((int(p["containerPort"]), clean(str(p.get("name") or ""), limit=15)))
    return out


def port_rows(label: str, pod: str, declared: list[tuple[int, str]], listeners: list[Listener]) -> list[PortRow]:
    by_port = {x.port: x for x in listeners}
    rows: list[PortRow] = []
    for port, name in declared:
        x = by_port.pop(port, None)
        rows.append(PortRow(label, pod, port, kind_of(x.command if x else "", name), name or "-", x is not None,
                            x.address if x else "", x.command if x else ""))
    for x in by_port.values():
        rows.append(PortRow(label, pod, x.port, kind_of(x.command), "", True, x.address, x.command))
    return sorted(rows, key=lambda r: r.port)


async def _exec_text(client: KubeClient, ns: str, pod: str, command: list[str], container: str | None,
                     timeout: float) -> tuple[int, str]:
    out = bytearray()

    def sink(channel: int, data: bytes) -> None:
        if channel == 1 and len(out) < 4 << 20:
            out.extend(data)

    async def go() -> int:
        session = await ExecSession.open(client, ns, pod, command, container=container, tty=False, stdin=False)
        try:
            return (await session.receive(sink)).exit_code
        finally:
            await session.close()

    code = await asyncio.wait_for(go(), timeout)
    return code, out.decode(errors="replace")


async def rank_ports(client: KubeClient, ns: str, pod: dict[str, Any], label: str, container: str | None = None,
                     timeout: float = 30.0) -> list[PortRow]:
    """The rank's ports: declared, and listened on (read in the pod; `ExecError` when it cannot be)."""
    name = str(pod["metadata"]["name"])
    _code, text = await _exec_text(client, ns, name, ["sh", "-c", LIST_SCRIPT], container, timeout)
    return port_rows(label, name, declared_ports(pod, container), parse_listing(text))


_SERVER_LINE = re.compile(r"^(https?://[^\s?]+?:(\d+)/[^\s?]*)\?token=([A-Za-z0-9_-]{1,128})\b")


def jupyter_token(text: str, port: int) -> str:
    """The token `jupyter server list` says for the server on `port` ("" when none)."""
    for line in text.splitlines():
        m = _SERVER_LINE.match(line.strip())
        if m and int(m.group(2)) == port:
            return m.group(3)
    return ""


async def jupyter_url(client: KubeClient, ns: str, pod: str, port: int, local: int, container: str | None = None
                      ) -> str:
    """The URL to open for the Jupyter server on `port`, forwarded to `local` (with its token when the
    pod's `jupyter server list` gives it)."""
    token = ""
    with contextlib.suppress(ExecError, TimeoutError, OSError):
        _code, text = await _exec_text(
            client, ns, pod, ["sh", "-c", "jupyter server list 2>/dev/null || jupyter notebook list 2>/dev/null"],
            container, TOKEN_WAIT)
        token = jupyter_token(text, port)
    return f"http://127.0.0.1:{local}/" + (f"?token={token}" if token else "")


def ssh_line(label: str, workload: str, project: str, port: int, ssh_port: str = "", host: str = "<this server>"
             ) -> str:
    """The line to paste on the user's own machine to reach the port through the SSH door (`host`:
    as the user reached it, `ssh.door_host`)."""
    where = f"{label}.{workload}.{project}"
    return (f"ssh -N -L {port}:{where}:{port} " + (f"-p {ssh_port} " if ssh_port and ssh_port != "22" else "")
            + host)


# -- the dashboard's forwards ----------------------------------------------------------------------------

@dataclass
class Forwarded:
    """A forward the dashboard started (plain data for the screen: `rows`)."""

    id: int
    workload: str
    namespace: str
    label: str
    port: int
    kind: str
    local: int
    url: str
    started: float
    pod: str = ""
    connections: int = 0
    replaced: int = 0
    notes: list[str] = field(default_factory=list)


class ForwardSet:
    """The dashboard's forwards, on its data loop (every method runs there)."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[Forwarded, PortForward, Follower]] = {}
        self._tokens: dict[int, asyncio.Future[None]] = {}  # Jupyter forwards: their token read again
        self._next = 1

    async def start(self, cfg: ClusterConfig, client: KubeClient, *, workload: str, namespace: str, label: str,
                    pod: str, port: int, kind: str, container: str | None = None) -> Forwarded:
        """Forward `port` of the rank `label` to a free port of 127.0.0.1; its URL (Jupyter's token
        read in the pod). Raises `portforward.ForwardError` when it cannot start."""
        for item, _fwd, _fol in self._items.values():
            if (item.namespace, item.workload, item.label, item.port) == (namespace, workload, label, port):
                return item  # (already forwarded: the same URL)
        notes: list[str] = []
        follower = Follower(cfg, client, workload, namespace=namespace, rank=label, notes=notes.append)
        await follower.start(known=Target(namespace, pod, "", label, workload))
        fwd = PortForward(client, follower, port, notes=notes.append)
        try:
            (_addr, local), = await fwd.listen(["127.0.0.1"], 0)
            url = (await jupyter_url(client, namespace, pod, port, local, container) if kind == "Jupyter"
                   else f"http://127.0.0.1:{local}/")
        except BaseException:
            await fwd.close()
            await follower.close()
            raise
        item = Forwarded(self._next, workload, namespace, label, port, kind, local, url, time.time(), pod,
                         notes=notes)
        self._next += 1
        self._items[item.id] = (item, fwd, follower)
        if kind == "Jupyter":
            self._tokens[item.id] = asyncio.ensure_future(self._new_tokens(item, follower, client, container))
        return item

    async def _new_tokens(self, item: Forwarded, follower: Follower, client: KubeClient,
                          container: str | None) -> None:
        """A Jupyter forward's URL kept usable: the server in a replaced pod has a token of its own,
        read there (once it answers) into `item.url`, and said in a note. (A server without a token
        keeps its URL: nothing to read.)"""
        if "?token=" not in item.url:
            return
        seen = follower.replaced
        while True:
            await asyncio.sleep(POLL)
            target = follower.target
            if follower.replaced == seen or target is None:
                continue
            seen = follower.replaced
            deadline = time.monotonic() + NEW_TOKEN_WAIT
            while True:
                try:
                    url = await jupyter_url(client, target.namespace, target.pod, item.port, item.local, container)
                except Exception:  # (whatever the exec met: asked again, the forward itself goes on)
                    url = ""
                if "?token=" in url or time.monotonic() > deadline or follower.replaced != seen:
                    break
                await asyncio.sleep(1.0)
            if "?token=" in url and url != item.url:
                item.url = url
                item.notes.append(f"Jupyter's token changed with the new pod: {url}")

    async def stop(self, forward_id: int) -> bool:
        entry = self._items.pop(forward_id, None)
        if entry is None:
            return False
        tokens = self._tokens.pop(forward_id, None)
        if tokens is not None:
            tokens.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await tokens
        _item, fwd, follower = entry
        await fwd.close()
        await follower.close()
        return True

    def rows(self) -> list[Forwarded]:
        """Copies, for the screen (the live objects stay on the data loop)."""
        out: list[Forwarded] = []
        for item, fwd, follower in self._items.values():
            target = follower.target
            out.append(Forwarded(item.id, item.workload, item.namespace, item.label, item.port, item.kind,
                                 item.local, item.url, item.started, target.pod if target else item.pod,
                                 fwd.connections, follower.replaced, list(item.notes[-3:])))
        return out

    async def close(self) -> None:
        for forward_id in list(self._items):
            await self.stop(forward_id)

