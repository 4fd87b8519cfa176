"""The Stacks view (#28): every rank's Python stack of a workload, merged STAT-style, as
`ranks stacks` prints it (`sessions.stacks`). The reading (py-spy through pods/exec, in its pods)
runs on the data loop, awaited by a worker that posts one typed message (`StacksScreen.Read`); the
tree is shown as `Text` (cluster text, never markup), the odd ones out's lines in bold, and kept
with the workload's flight recording. A pod whose image lacks py-spy is read from a debug container
of `stacks_image` (not in read-only mode). `ctrl+r` reads again."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from monitors.connection import ClusterConfig
from monitors.model_views import WorkloadView
from monitors.sanitize import clean
from sessions.stacks.collect import Autopsy, Options, autopsy, running_ranks
from sessions.stacks.render import PodInfo, annotate, group_line, text

from .base import RanksScreen, bindings


def pod_infos(wl: WorkloadView) -> dict[str, PodInfo]:
    return {r.label: PodInfo(None, r.last_log, r.gpu_util) for r in wl.ranks}


def keep(cfg: ClusterConfig, wl: WorkloadView, a: Autopsy) -> None:
    """The autopsy's groups, a line each, into the workload's flight recording (blocking file I/O)."""
    from monitors.flight_store import store_for

    now = time.time()
    lines = tuple(group_line(v, now) for v in annotate(a, pod_infos(wl))[1])
    store_for(cfg).add_autopsy(wl.namespace, wl.kind, wl.name, wl.uid, lines, a.taken_at)


def stacks_text(a: Autopsy, wl: WorkloadView, now: float) -> Text:
    """The autopsy as `ranks stacks` prints it, each line plain text; the odd ones out's in bold."""
    info = pod_infos(wl)
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, line in enumerate(text(a, info, now).splitlines()):
        if i:
            out.append("\n")
        style = "bold" if i == 0 or line.startswith("!") else ("dim" if line.startswith(("Not ", "Missing")) else "")
        out.append(line, style=style)
    return out


class StacksScreen(RanksScreen):
    BINDINGS: ClassVar[list[BindingType]] = [*RanksScreen.BINDINGS, *bindings("global", ("refresh",))]
    DEFAULT_CSS = """
    StacksScreen #stacks-state { height: auto; padding: 0 1; background: $panel; }
    StacksScreen VerticalScroll { height: 1fr; }
    StacksScreen #stacks { padding: 0 1; width: auto; }
    """

    class Read(Message):
        """The autopsy, or why it could not be taken (one line)."""

        def __init__(self, autopsy: Autopsy | None, error: str = "") -> None:
            super().__init__()
            self.autopsy = autopsy
            self.error = error

    def __init__(self, wl: WorkloadView) -> None:
        super().__init__()
        self.key = wl.key
        self.focus_key = wl.key
        self.wl = wl
        self.autopsy: Autopsy | None = None
        self.error = ""

    @property
    def crumb(self) -> str:
        return "stacks"

    def body(self) -> ComposeResult:
        yield Static(Text("reading every rank's stack (py-spy in its pod)…", style="italic"), id="stacks-state")
        with VerticalScroll():
            yield Static(Text(""), id="stacks")

    def on_mount(self) -> None:
        super().on_mount()
        self._read()

    def action_refresh(self) -> None:
        self.query_one("#stacks-state", Static).update(Text("reading again…", style="italic"))
        self._read()

    @work(exclusive=True, group="stacks")
    async def _read(self) -> None:
        wl = self.dashboard.store.workloads.get(self.key) or self.wl
        pods = running_ranks(wl)
        if not pods:
            self.post_message(self.Read(None, f"{clean(wl.name)} has no running pod to read stacks in"))
            return
        data = self.dashboard.data
        options = Options(image=self.dashboard.settings.stacks_image, read_only=self.dashboard.read_only)

        async def go() -> Autopsy:
            client = data.api_client()
            a = await autopsy(client, wl, pods, dataclasses.replace(options, timeout=client.cfg.request_timeout or None))
            if a.stacks:  # (kept with the workload's flight recording, where `ranks why` shows it)
                with contextlib.suppress(OSError):
                    await asyncio.to_thread(keep, client.cfg, wl, a)
            return a

        try:
            self.post_message(self.Read(await asyncio.wrap_future(data.run_coroutine(go()))))
        except Exception as exc:
            self.post_message(self.Read(None, clean(getattr(exc, "message", None) or exc, limit=300)))

    def on_stacks_screen_read(self, msg: Read) -> None:
        self.autopsy, self.error = msg.autopsy, msg.error
        state = self.query_one("#stacks-state", Static)
        a = msg.autopsy
        if a is None or not a.stacks:
            why = msg.error or (a.problems[0] if a is not None and a.problems else "") or (
                a.unread[0].why if a is not None and a.unread else "no rank's stack could be read")
            state.update(Text(f"no stack read: {why}", style="bold"))
            if a is not None:
                self.query_one("#stacks", Static).update(stacks_text(a, self.wl, time.time()))
            return
        state.update(Text(f"taken {time.strftime('%H:%M:%S', time.localtime(a.taken_at))}; ctrl+r reads again",
                          style="dim"))
        wl = self.dashboard.store.workloads.get(self.key) or self.wl
        self.query_one("#stacks", Static).update(stacks_text(a, wl, time.time()))

    def action_back(self) -> None:
        self.dashboard.go_back()
