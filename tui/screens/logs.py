"""The merged logs of a workload: `LogView` over a UI-side buffer fed by a log engine that runs on
the data loop (batches arrive as messages, so the view never reads what the engine is writing)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.message import Message
from textual.widgets import Input, Static

from monitors.dataloop import LogHandle
from monitors.humanize import plural
from monitors.logs import FilterError, LineBuffer, LineFilter, LogLine, LogOptions
from monitors.model_views import ModelDiff
from monitors.sanitize import clean
from monitors.user_regex import UserRegexError, compile_user

from ..log_files import save_refusal, saved_note, write_log_file
from ..widgets.log_view import LogView, palette_from_theme
from .base import RanksScreen, bindings
from .lists import FilterBar, FilterInput
from .workload import pending_reasons

HISTORY_LINES = 5000


class LinesArrived(Message):
    def __init__(self, lines: list[LogLine]) -> None:
        super().__init__()
        self.lines = lines


class LogNotice(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class LogStatus(Static):
    DEFAULT_CSS = """
    LogStatus { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    """


class LogsScreen(RanksScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings("global", ("filter",)),
        *bindings("logs", ("save_logs", "select_ranks", "previous_logs", "next_match", "prev_match")),
        *bindings("table", ("describe",)),
    ]

    def __init__(self, key: tuple[str, str, str], *, previous: bool = False, rank: str = "",
                 note: str = "") -> None:
        """`rank`: opened filtered to that rank (the first failure's; in `previous` mode only its
        streams are read); `note`: said in the status line from the start."""
        super().__init__()
        self.key = key
        self.focus_key = key
        self.previous = previous
        self.buffer = LineBuffer()
        self.handle: LogHandle | None = None
        self.notice = clean(note, limit=200)
        self.prompt = "filter"  # what the input at the bottom edits: filter / ranks
        self.saved: Path | None = None  # the file ctrl+s wrote last
        self.text_filter = ""
        self.rank_filter = rank
        self.only_rank = rank

    @property
    def crumb(self) -> str:
        return f"{'previous logs' if self.previous else 'logs'} {self.key[2]}"

    def body(self) -> ComposeResult:
        look = self.dashboard.look
        yield LogView(self.buffer, palette=[] if look.mono else palette_from_theme(look.theme), id="log")
        yield LogStatus(id="logstatus")
        yield FilterBar(id="filterbar")

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    def on_mount(self) -> None:
        super().on_mount()
        self.view.focus()
        self.view.on_flush = lambda: self._set_status("")
        if self.rank_filter:
            self._apply_filter()
        else:
            self.view.empty_text = self._not_started()
        self._set_status("opening log streams…")
        self._open()

    @work(exclusive=True, group="logs-open")
    async def _open(self) -> None:
        import asyncio

        only = LineFilter.build(ranks=self.only_rank) if self.previous and self.only_rank else None
        opts = LogOptions(follow=not self.previous, tail=HISTORY_LINES, previous=self.previous, filter=only)
        def lines_arrived(lines: list[LogLine]) -> None:  # (on the data loop's thread)
            self.post_message(LinesArrived(lines))

        def notice(text: str) -> None:  # (the same)
            self.post_message(LogNotice(text))

        fut = self.dashboard.data.open_logs(self.key, opts, lines_arrived, notice)
        try:
            handle = await asyncio.wrap_future(fut)
        except LookupError:
            self._set_status("this workload does not exist (any more)")
            return
        except Exception as exc:
            self._set_status(f"cannot read logs: {clean(getattr(exc, 'message', None) or exc)}")
            return
        if not self.is_attached:
            handle.close()
            return
        self.handle = handle
        self._set_status("")

    def on_unmount(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    @on(LinesArrived)
    def _lines(self, msg: LinesArrived) -> None:
        self.buffer.extend(msg.lines)
        self.view.notify_appended()  # the view's next frame takes them in, then says the count (on_flush)

    @on(LogNotice)
    def _notice(self, msg: LogNotice) -> None:
        self.notice = clean(msg.text, limit=200)
        self._set_status("")

    def model_changed(self, diff: ModelDiff) -> None:
        if self.key in diff.workloads.removed:
            self.show_status()
        elif (self.key in diff.workloads.changed or self.key in diff.workloads.added) and self.view.line_filter is None:
            self.view.empty_text = self._not_started()

    def _not_started(self) -> str:
        """What the empty view says while no pod of the workload has started (pending: why, the
        scheduler's words, on one line), rather than nothing."""
        wl = self.dashboard.store.workloads.get(self.key)
        if wl is None or self.previous or any(r.phase in ("Running", "Succeeded", "Failed") for r in wl.ranks):
            return ""
        what = f"no pod of {clean(wl.name, limit=80)} {'has started' if wl.ranks else 'exists'} yet"
        reasons = pending_reasons(wl)
        why = " ".join(reasons[0].split()) if reasons else ""
        if not why and wl.status != "Pending":
            why = clean(wl.status, limit=40).lower()
        return f"{what}: {why}" if why else f"{what}; its lines show here once one runs"

    def banner_text(self) -> Text | None:
        if self.dashboard.store.synced and self.key not in self.dashboard.store.workloads:
            return Text(f"{self.dashboard.look.glyphs.warning} this workload was deleted; its logs stay here "
                        "(Esc to go back)", style="bold")
        return None

    def _set_status(self, text: str) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        held = self.buffer.lines()
        if self.is_mounted and self.view.line_filter is not None:  # the dropped marker is no line
            shown = len(self.view.source) - (1 if self.buffer.dropped else 0)
            t.append(f"{shown:,} of {plural(held, 'line')}")
        else:
            t.append(plural(held, "line"))
        following = self.view.tail if self.is_mounted else True
        if following:
            t.append("  following", style="bold")
        filters = [f for f in (self.text_filter and f"/{self.text_filter}", self.rank_filter and
                               f"ranks {self.rank_filter}") if f]
        if filters:
            t.append("  " + "  ".join(filters))
        message = text or self.notice
        if message:
            t.append("  " + message, style="italic")
        self.query_one(LogStatus).update(t)

    # -- filters and prompts -----------------------------------------------------------------------
    PROMPTS: ClassVar[dict[str, str]] = {"filter": "/", "ranks": "ranks"}

    def _ask(self, prompt: str, value: str, placeholder: str) -> None:
        self.prompt = prompt
        self.query_one(FilterBar).open(self.PROMPTS[prompt], value, placeholder)

    def action_filter(self) -> None:
        self._ask("filter", self.text_filter, "regex, !regex to hide matches (Enter applies, empty: all lines)")

    def action_select_ranks(self) -> None:
        self._ask("ranks", self.rank_filter, "worker-0,launcher,3 or roles (Enter applies, empty: all ranks)")

    def action_save_logs(self) -> None:
        """ctrl+s: the lines shown, to a file named for the workload and the time in the user's data
        directory (`tui.log_files`); refused over the SSH door, where it would write the server's."""
        refusal = save_refusal()
        if refusal:
            self.notify(refusal, severity="warning", timeout=8, markup=False)
            return
        self._save(self.view.plain_lines())

    @work(group="save-logs")
    async def _save(self, lines: list[str]) -> None:
        import asyncio

        try:
            path = await asyncio.to_thread(write_log_file, self.key[0], self.key[2], lines)
        except OSError as exc:
            self.notify(f"cannot save: {exc.strerror or exc}", severity="error", markup=False)
            return
        self.saved = path
        self.notify(saved_note(path, len(lines)), timeout=12, markup=False)

    @on(Input.Submitted, "#filter")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        old = (self.text_filter, self.rank_filter)
        if self.prompt == "filter":
            self.text_filter = value
        else:
            self.rank_filter = value
        try:
            self._apply_filter()
        except (FilterError, re.error, ValueError) as exc:
            self.text_filter, self.rank_filter = old
            self.notify(clean(str(exc)), severity="error", markup=False)
            return
        self._close_prompt()

    def _apply_filter(self) -> None:
        include = exclude = None
        if self.text_filter.startswith("!"):
            exclude = self.text_filter[1:] or None
        elif self.text_filter:
            include = self.text_filter
        ranks = [r for r in re.split(r"[,\s]+", self.rank_filter) if r]
        roles = [r for r in ranks if not r[0].isdigit() and "-" not in r and r not in ("launcher",)]
        ranks = [r for r in ranks if r not in roles]
        if not (include or exclude or ranks or roles):
            self.view.set_filter(None)
            self.view.empty_text = self._not_started()
        else:
            flt = LineFilter.build(ranks=ranks or None, roles=roles or None, include=include, exclude=exclude,
                                   highlight=include)
            self.view.set_filter(flt)
            said = "  ".join(f for f in (self.text_filter and f"/{self.text_filter}",
                                          self.rank_filter and f"ranks {self.rank_filter}") if f)
            keys = {(True, False): "/ changes it", (False, True): "r changes it", (True, True): "/ and r change them"
                    }[(bool(self.text_filter), bool(self.rank_filter))]
            wl = self.dashboard.store.workloads.get(self.key)
            unknown = flt.unknown_ranks(wl.ranks) if wl is not None and ranks else []
            if unknown and wl is not None:  # (a rank that may still come: said, not refused)
                have = ", ".join(clean(r.label, limit=40) for r in wl.ranks) or "none yet"
                self.view.empty_text = (f"no rank {', '.join(clean(u, limit=40) for u in unknown)} in this workload "
                                        f"(ranks: {clean(have, limit=200)}; {keys})")
            else:
                self.view.empty_text = f"no line matches {clean(said, limit=200)} ({keys})"
        self._set_status("")

    def _close_prompt(self) -> None:
        self.query_one(FilterBar).close()
        self.view.focus()

    def action_back(self) -> None:
        if self.query_one(FilterInput).has_focus:
            self._close_prompt()
            return
        self.dashboard.go_back()

    def action_previous_logs(self) -> None:
        if not self.previous:
            self.app.push_screen(LogsScreen(self.key, previous=True))

    def action_describe(self) -> None:
        wl = self.dashboard.store.workloads.get(self.key)
        if wl is not None:
            self.dashboard.open_describe(wl)

    def action_next_match(self) -> None:
        self._jump(1)

    def action_prev_match(self) -> None:
        self._jump(-1)

    def _jump(self, step: int) -> None:
        if not self.text_filter or self.text_filter.startswith("!"):
            self.notify("set a filter with / first", timeout=2, markup=False)
            return
        view = self.view
        src = view.source
        try:
            pattern = compile_user(self.text_filter, ignore_case=True)
        except UserRegexError as exc:
            self.notify(clean(str(exc)), severity="error", markup=False)
            return
        y = int(view.scroll_y) + step
        while 0 <= y < len(src):
            line = src[y]
            if pattern.search(view.plain_line(line)):
                view.tail = False
                view.scroll_to(y=y, animate=False)
                return
            y += step
        self.notify("no more matches", timeout=1.5, markup=False)
