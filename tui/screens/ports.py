"""The Ports view (#29): a workload's ports (each running rank's: declared in its spec, listened on in
its pod, with what each probably is) and every forward the dashboard keeps (of any workload).

Enter on a port forwards it to a free port of 127.0.0.1 and shows the URL to open (Jupyter's with its
token; a port nothing listens on yet is forwarded too, and said so); ctrl+d on a forward (in the list of
forwards, or on its port) stops it; ctrl+r reads the ports again. The forwards live as long as the
dashboard, on its data loop (`forwards_of`), and follow their rank when its pod is replaced; while the
view is shown their list is read again every `FORWARDS_EVERY` seconds (connections counted, and the
newest note of a forward, a refusal or a replaced pod, said once in the state line). Over the
SSH door nothing is forwarded on the server: Enter shows the `ssh -L` line to paste on your own
machine. The reading and the forwarding run on the data loop, awaited by workers posting typed
messages; cluster text is shown as `Text`.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.message import Message
from textual.widgets import Static

from monitors import api_paths
from monitors.model_views import WorkloadView
from monitors.sanitize import clean
from sessions.ports import Forwarded, ForwardSet, PortRow, rank_ports, ssh_line
from sessions.shell import not_running_reason
from sessions.ssh import SSH_PORT_ENV, SSH_SESSION_ENV, door_host

from ..widgets.keyed_table import Column, KeyedTable
from .base import RanksScreen, bindings

PORT_COLUMNS = (Column("RANK", min=8, shrink=1), Column("PORT"), Column("WHAT", min=10, shrink=2),
                Column("DECLARED"), Column("LISTENING"), Column("FORWARDED TO", min=10, shrink=3))
FORWARD_COLUMNS = (Column("WORKLOAD", min=8, shrink=2), Column("RANK"), Column("PORT"), Column("WHAT"),
                   Column("URL", min=16, shrink=1), Column("CONNECTIONS"))
READ_AT_ONCE = 8
FORWARDS_EVERY = 2.0  # s between readings of the forwards' list while the view is shown

_FORWARDS: weakref.WeakKeyDictionary[Any, ForwardSet] = weakref.WeakKeyDictionary()


def forwards_of(data: Any) -> ForwardSet:
    """The dashboard's forwards: one set per data loop (used on that loop only)."""
    found = _FORWARDS.get(data)
    if found is None:
        found = _FORWARDS[data] = ForwardSet()
    return found


def short_note(note: str, port: int) -> str:
    """A forward's note for the state line: the kubelet's refusal of a port nothing listens on (several
    lines of containerd's words at 80 columns) in a few words; any other note as it is."""
    if "error forwarding port" in note and "connect: connection refused" in note:
        return f"a connection was refused in the pod: nothing listens on {port} there"
    return clean(note, limit=300)


def said_of(f: Forwarded, note: str) -> Text:
    """The state line for a forward's note: the forward named once (a follower's note names it too)."""
    own = f"{f.workload} {f.label}: "
    return Text(f"{f.workload} {f.label}:{f.port}: {short_note(note.removeprefix(own), f.port)}", style="bold")


def over_ssh() -> bool:
    return bool(os.environ.get(SSH_SESSION_ENV))


class PortsScreen(RanksScreen):
    BINDINGS: ClassVar[list[BindingType]] = [*RanksScreen.BINDINGS,
                                             *bindings("global", ("refresh",)), *bindings("table", ("open", "delete"))]
    DEFAULT_CSS = """
    PortsScreen #ports-state { height: auto; padding: 0 1; background: $panel; }
    PortsScreen #ports { height: 1fr; }
    PortsScreen #forwards-title { height: 1; padding: 0 1; color: $text-muted; }
    PortsScreen #forwards { height: auto; max-height: 10; }
    """

    class Read(Message):
        def __init__(self, rows: list[PortRow], problems: list[str]) -> None:
            super().__init__()
            self.rows, self.problems = rows, problems

    class Forwards(Message):
        def __init__(self, rows: list[Forwarded], said: Text | None = None) -> None:
            super().__init__()
            self.rows, self.said = rows, said

    def __init__(self, wl: WorkloadView) -> None:
        super().__init__()
        self.key = self.focus_key = wl.key
        self.wl = wl
        self.rows: dict[tuple[str, int], PortRow] = {}
        self.forwarded: list[Forwarded] = []
        self.noted: dict[int, str] = {}  # each forward's newest note already said (by its id)
        self.seen_forwards = False

    @property
    def crumb(self) -> str:
        return "ports"

    def body(self) -> ComposeResult:
        yield Static(Text("reading the ports of its ranks (in their pods)…", style="italic"), id="ports-state")
        yield KeyedTable(id="ports")
        yield Static(Text("forwards of this dashboard (every workload; ctrl+d stops one; Tab to this list)"),
                     id="forwards-title")
        yield KeyedTable(id="forwards")

    def on_mount(self) -> None:
        super().on_mount()
        self.query_one("#ports", KeyedTable).set_columns(PORT_COLUMNS)
        self.query_one("#ports", KeyedTable).choose = self.action_open
        self.query_one("#forwards", KeyedTable).set_columns(FORWARD_COLUMNS)
        self.query_one("#ports", KeyedTable).focus()
        self._read()
        self._list_forwards()
        self.set_interval(FORWARDS_EVERY, self._tick)

    def _tick(self) -> None:
        if self.is_current:
            self._list_forwards()

    def action_refresh(self) -> None:
        self._state(Text("reading again…", style="italic"))
        self._read()

    def _state(self, text: Text) -> None:
        self.query_one("#ports-state", Static).update(text)

    # -- reading ---------------------------------------------------------------------------------
    @work(exclusive=True, group="ports")
    async def _read(self) -> None:
        wl = self.dashboard.store.workloads.get(self.key) or self.wl
        ranks = [r for r in wl.ranks if not_running_reason(r) is None]
        data = self.dashboard.data
        if not ranks:
            self.post_message(self.Read([], [f"{clean(wl.name)} has no running pod"]))
            return

        async def go() -> tuple[list[PortRow], list[str]]:
            client = data.api_client()
            gate = asyncio.Semaphore(READ_AT_ONCE)
            rows: list[PortRow] = []
            problems: list[str] = []

            async def one(label: str, pod: str) -> None:
                async with gate:
                    try:
                        raw = await client.get(api_paths.pod(wl.namespace, pod))
                        rows.extend(await rank_ports(client, wl.namespace, raw, label,
                                                     timeout=client.cfg.request_timeout or 30.0))
                    except Exception as exc:
                        problems.append(f"{label}: {clean(getattr(exc, 'message', None) or exc, limit=200)}")

            await asyncio.gather(*(one(r.label, r.pod) for r in ranks))
            return rows, problems

        try:
            rows, problems = await asyncio.wrap_future(data.run_coroutine(go()))
        except Exception as exc:
            rows, problems = [], [clean(getattr(exc, "message", None) or exc, limit=300)]
        self.post_message(self.Read(rows, problems))

    def on_ports_screen_read(self, msg: Read) -> None:
        self.rows = {(r.label, r.port): r for r in msg.rows}
        self._show_ports()
        if msg.problems and not msg.rows:
            self._state(Text(f"no port read: {msg.problems[0]}", style="bold"))
            return
        hint = ("Enter: the ssh -L line for your machine" if over_ssh()
                else "Enter forwards the port to this machine")
        extra = f"; not read: {msg.problems[0]}" if msg.problems else ""
        self._state(Text(f"{len(msg.rows)} port(s) of {clean(self.wl.name)}; {hint}{extra}", style="dim"))

    def _show_ports(self) -> None:
        table: KeyedTable[tuple[str, int]] = self.query_one("#ports", KeyedTable)
        by_port = {(f.label, f.port): f for f in self.forwarded
                   if (f.namespace, f.workload) == (self.wl.namespace, self.wl.name)}
        cells = {}
        for key, r in self.rows.items():
            fwd = by_port.get(key)
            cells[key] = (Text(r.label), Text(str(r.port)), Text(r.kind), Text(r.declared),
                          Text("yes" if r.listening else "no", style="" if r.listening else "dim"),
                          Text(fwd.url if fwd else ""))
        order = sorted(cells, key=lambda k: (k[0], k[1]))
        table.sync(order, cells)

    # -- forwarding ------------------------------------------------------------------------------
    @on(KeyedTable.RowSelected, "#ports")
    def _port_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        table: KeyedTable[tuple[str, int]] = self.query_one("#ports", KeyedTable)
        key = table.cursor_key
        row = self.rows.get(key) if key is not None else None
        if row is None:
            return
        if over_ssh():
            line = ssh_line(row.label, self.wl.name, self.wl.project or self.wl.namespace, row.port,
                            os.environ.get(SSH_PORT_ENV, ""), door_host())
            self._state(Text(f"on your machine: {line}", style="bold"))
            return
        self._forward(row)

    @work(group="forward")
    async def _forward(self, row: PortRow) -> None:
        data = self.dashboard.data
        wl = self.wl
        self._state(Text(f"forwarding {row.label}:{row.port}…", style="italic"))

        async def go() -> tuple[Forwarded, list[Forwarded]]:
            forwards = forwards_of(data)
            client = data.api_client()
            item = await forwards.start(client.cfg, client, workload=wl.name, namespace=wl.namespace,
                                        label=row.label, pod=row.pod, port=row.port, kind=row.kind)
            return item, forwards.rows()

        try:
            item, rows = await asyncio.wrap_future(data.run_coroutine(go()))
        except Exception as exc:
            said = Text(f"not forwarded: {clean(getattr(exc, 'message', None) or exc, limit=300)}", style="bold")
            self.post_message(self.Forwards(self.forwarded, said))
            return
        said = Text(f"{row.label}:{row.port} ({row.kind}) forwarded: open ", style="bold")
        said.append(item.url, style="bold underline")
        if not row.listening:
            said.append(f" (nothing listened on {row.port} in its pod when read: it answers once something does)",
                        style="dim")
        self.post_message(self.Forwards(rows, said))

    def action_delete(self) -> None:
        """ctrl+d on a forward (in the forwards' list, or on a forwarded port): stop it."""
        forwards: KeyedTable[int] = self.query_one("#forwards", KeyedTable)
        if forwards.has_focus:
            if forwards.cursor_key is not None:
                self._stop(forwards.cursor_key)
            return
        ports: KeyedTable[tuple[str, int]] = self.query_one("#ports", KeyedTable)
        key = ports.cursor_key
        mine = next((f for f in self.forwarded if key is not None and (f.namespace, f.workload, f.label, f.port)
                     == (self.wl.namespace, self.wl.name, key[0], key[1])), None)
        if mine is not None:
            self._stop(mine.id)

    @work(group="forward")
    async def _stop(self, forward_id: int) -> None:
        data = self.dashboard.data

        async def go() -> list[Forwarded]:
            forwards = forwards_of(data)
            await forwards.stop(forward_id)
            return forwards.rows()

        rows = await asyncio.wrap_future(data.run_coroutine(go()))
        self.post_message(self.Forwards(rows, Text("forward stopped", style="dim")))

    @work(group="forward")
    async def _list_forwards(self) -> None:
        data = self.dashboard.data

        async def go() -> list[Forwarded]:
            return forwards_of(data).rows()

        self.post_message(self.Forwards(await asyncio.wrap_future(data.run_coroutine(go()))))

    def on_ports_screen_forwards(self, msg: Forwards) -> None:
        self.forwarded = msg.rows
        table: KeyedTable[int] = self.query_one("#forwards", KeyedTable)
        cells = {f.id: (Text(f.workload), Text(f.label), Text(str(f.port)), Text(f.kind), Text(f.url),
                        Text(str(f.connections))) for f in msg.rows}
        table.sync([f.id for f in msg.rows], cells)
        self._show_ports()
        said = msg.said
        for f in msg.rows if said is None else ():  # (what a key did is said first; a note waits a reading)
            newest = f.notes[-1] if f.notes else ""
            if newest and self.noted.get(f.id) != newest:
                self.noted[f.id] = newest
                if self.seen_forwards:  # (not the notes of before the view opened)
                    said = said_of(f, newest)
                    break
        self.seen_forwards = True
        if said is not None:
            self._state(said)

    def action_back(self) -> None:
        self.dashboard.go_back()
